// Group commit of reports (report_batcher.h, docs/decisions/0100).
#include "report_batcher.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <spdlog/spdlog.h>

#include "mesh/common/logging.h"

namespace mesh::control::detail {
namespace {

// The first SDK ABI minor whose Store has record_reports in its table.
constexpr std::uint32_t kRecordReportsAbiMinor = 3;

}  // namespace

ReportBatcher::ReportBatcher(std::shared_ptr<sdk::Store> store, std::uint32_t store_abi_minor, Done done,
                             std::size_t max_batch, std::size_t max_waiting)
    : store_(std::move(store)),
      abi_minor_(store_abi_minor),
      done_(std::move(done)),
      max_batch_(std::max<std::size_t>(1, max_batch)),
      max_waiting_(std::max<std::size_t>(1, max_waiting)),
      thread_([this] { run(); }) {}

ReportBatcher::~ReportBatcher() { stop(); }

void ReportBatcher::submit(PendingReport&& report) noexcept {
  try {
    std::unique_lock lock(mu_);
    space_cv_.wait(lock, [&] { return stopping_ || waiting_.size() < max_waiting_; });
    if (!stopping_) {
      waiting_.push_back(std::move(report));
      ++submitted_;
      lock.unlock();
      cv_.notify_one();
      return;
    }
  } catch (...) {
  }
  done_(std::move(report), sdk::fail(sdk::ErrorCode::Unavailable, "the control plane is stopping; retry later"));
}

void ReportBatcher::drain() noexcept {
  std::unique_lock lock(mu_);
  const std::uint64_t target = submitted_;
  space_cv_.wait(lock, [&] { return answered_ >= target || finished_; });
}

void ReportBatcher::stop() noexcept {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  space_cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::uint64_t ReportBatcher::batches() const noexcept {
  std::lock_guard lock(mu_);
  return batches_;
}

std::uint64_t ReportBatcher::reports() const noexcept {
  std::lock_guard lock(mu_);
  return answered_;
}

std::size_t ReportBatcher::waiting() const noexcept {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

void ReportBatcher::run() noexcept {
  std::deque<PendingReport> batch;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      // Stopping: what is waiting is still recorded and answered (its hosts wait for the ack).
      if (waiting_.empty()) {
        finished_ = true;
        space_cv_.notify_all();
        return;
      }
      const std::size_t n = std::min(max_batch_, waiting_.size());
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    space_cv_.notify_all();
    const std::size_t n = batch.size();
    commit(batch);
    batch.clear();
    {
      std::lock_guard lock(mu_);
      answered_ += n;
      ++batches_;
    }
    space_cv_.notify_all();
  }
}

void ReportBatcher::commit(std::deque<PendingReport>& batch) noexcept {
  // Which report of the batch goes where in the store's call.
  sdk::ReportBatch write;
  std::vector<std::pair<bool, std::size_t>> where;  // (is apply, index in its vector)
  where.reserve(batch.size());
  std::vector<sdk::Result<bool>> results;
  try {
    for (auto& p : batch) {
      if (auto* a = std::get_if<sdk::ApplyReport>(&p.report)) {
        where.emplace_back(true, write.applies.size());
        write.applies.push_back(*a);
      } else {
        where.emplace_back(false, write.drifts.size());
        write.drifts.push_back(std::get<sdk::DriftReport>(p.report));
      }
    }
    sdk::Result<sdk::ReportResults> r = sdk::ReportResults{};
    if (abi_minor_ >= kRecordReportsAbiMinor) {
      r = store_->record_reports(write);
    } else {
      // An older store plugin: one write per report, as before group commit.
      for (const auto& a : write.applies) r->applies.push_back(store_->record_apply(a));
      for (const auto& d : write.drifts) r->drifts.push_back(store_->record_drift(d));
    }
    if (r && (r->applies.size() != write.applies.size() || r->drifts.size() != write.drifts.size()))
      r = sdk::fail(sdk::ErrorCode::Internal,
                    "the store answered record_reports with " + std::to_string(r->applies.size() + r->drifts.size()) +
                        " results for " + std::to_string(batch.size()) + " reports");
    // For the test of a control plane killed between a batch's write and its acknowledgements
    // (tests/integration/report_batch_test.cpp): the hosts must send the reports again.
    if (const char* t = std::getenv("NOX_MESH_CONTROL_EXIT_BEFORE_ACK_FOR_TEST"); t && std::string_view(t) == "1" && r) {
      common::logger()->warn("exiting after recording {} report(s), before their acknowledgements "
                             "(NOX_MESH_CONTROL_EXIT_BEFORE_ACK_FOR_TEST)",
                             batch.size());
      std::_Exit(137);
    }
    results.reserve(batch.size());
    for (const auto& [apply, i] : where) {
      if (!r)
        results.push_back(sdk::fail(r.error()));
      else
        results.push_back(std::move(apply ? r->applies[i] : r->drifts[i]));
    }
  } catch (const std::exception& e) {
    results.assign(batch.size(),
                   sdk::Result<bool>(sdk::fail(sdk::ErrorCode::Internal, std::string("record_reports: ") + e.what())));
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      done_(std::move(batch[i]), i < results.size() ? results[i]
                                                    : sdk::Result<bool>(sdk::fail(sdk::ErrorCode::Internal,
                                                                                  "record_reports: no result")));
    } catch (...) {
    }
  }
}

}  // namespace mesh::control::detail
