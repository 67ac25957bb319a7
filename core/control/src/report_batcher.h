// Group commit of reports (docs/decisions/0100). Internal to mesh-control.
//
// The workers check a report (its proof, its fields) and hand it here; one committer thread
// takes every report waiting — those that arrived while the previous batch was being written —
// and records them in ONE store write (Store::record_reports: one sqlite transaction, one
// jetstream-kv operation), then answers each report with its own result. A report is therefore
// acknowledged only once the write holding it is durable, and a report refused by the store is
// answered with its own error while the others of its batch are recorded.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>

#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"

namespace mesh::control::detail {

/// One report waiting for its batch: the request it came in (to answer it) and what to record.
struct PendingReport {
  sdk::Message request;
  std::variant<sdk::ApplyReport, sdk::DriftReport> report;
};

/// Records batches of reports and answers them. Thread-safe: submit() from any number of threads.
class ReportBatcher {
 public:
  /// Called on the committer thread with each report and its own result, in the order of the
  /// batch, after the batch is durable (or failed as a whole: then every report of it gets the
  /// store's error). Must not call submit().
  using Done = std::function<void(PendingReport&&, const sdk::Result<bool>&)>;

  /// `store_abi_minor`: the SDK ABI minor the store plugin was built with; below 3 its table has
  /// no record_reports, and the batch is recorded with record_apply/record_drift one at a time.
  /// `max_batch`: most reports in one write; `max_waiting`: most reports waiting (submit()
  /// blocks beyond it, so that the control plane's own queue fills and says "busy"). Both ≥ 1.
  ReportBatcher(std::shared_ptr<sdk::Store> store, std::uint32_t store_abi_minor, Done done,
                std::size_t max_batch = 2048, std::size_t max_waiting = 8192);
  /// drain(), then stops the thread.
  ~ReportBatcher();
  ReportBatcher(const ReportBatcher&) = delete;
  ReportBatcher& operator=(const ReportBatcher&) = delete;

  /// Queues `report` for the next batch; blocks while max_waiting reports wait. After stop(),
  /// the report is answered at once with Unavailable (retry later). Never throws.
  void submit(PendingReport&& report) noexcept;
  /// Returns once every report submitted before the call is recorded and answered.
  void drain() noexcept;
  /// drain(), then ends the committer thread; later submits are answered Unavailable.
  void stop() noexcept;

  /// How many batches were written and how many reports they held (for figures and tests).
  std::uint64_t batches() const noexcept;
  std::uint64_t reports() const noexcept;
  /// How many reports wait for the next batch now (for tests).
  std::size_t waiting() const noexcept;

 private:
  void run() noexcept;
  void commit(std::deque<PendingReport>& batch) noexcept;

  std::shared_ptr<sdk::Store> store_;
  std::uint32_t abi_minor_;
  Done done_;
  std::size_t max_batch_;
  std::size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // the committer waits for reports
  std::condition_variable space_cv_;  // submitters wait for room; drain() waits for progress
  std::deque<PendingReport> waiting_;
  std::uint64_t submitted_ = 0;  // reports taken by submit()
  std::uint64_t answered_ = 0;   // reports answered
  std::uint64_t batches_ = 0;
  bool stopping_ = false;
  bool finished_ = false;  // the committer thread has ended
  std::thread thread_;  // last: started when everything it uses exists
};

}  // namespace mesh::control::detail
