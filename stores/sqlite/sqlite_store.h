// The `sqlite` store: the control plane's embedded default store, one SQLite database file.
//
// Config (the `[store]` table less `plugin`):
//   path          string, required  the database file; created if missing; its directory must
//                                   exist (InvalidArgument with path `path` otherwise)
//   busy_timeout  integer, ms       how long a write waits for another connection's write lock
//                                   before failing with Transient (default 5000)
//
// Storage: WAL journal, synchronous=FULL (every write method's commit is on disk when the call
// returns), foreign keys on. The schema is versioned (`schema_version` table, see migrations.h);
// a database written by a newer version of this plugin is refused with FailedPrecondition.
//
// Thread safety: every method may be called from any thread. One connection, guarded by one
// mutex, serves all calls, so calls on one instance run one at a time (reads included). Several
// instances or processes may open the same file: each write method is one BEGIN IMMEDIATE
// transaction, so writers are serialised by SQLite's write lock (a writer waits up to
// `busy_timeout`, then fails with Transient, which is retryable).
//
// Behaviour the SDK leaves open, decided here:
// - Per-node reads (latest_revision, revision, history, apply_report, apply_reports, owned,
//   last_drift) and per-node writes fail with NotFound when the node is not enrolled.
// - record_apply: last_outcome follows the report with the highest revision (a late, re-sent
//   report for an older revision does not overwrite it); the recovery copy is replaced only by an
//   "applied" report for the node's newest applied revision; apply_reports are ordered by
//   revision, newest first.
// - touch ignores ContactUpdate::applied_revision (applied_revision is driven by apply reports
//   alone); host_version/host_state come from the newest heartbeat by `at_ms`.
// - Re-enrolment sets enrolled_at_ms to the re-enrolment time (the current identity's age).
// - last_drift orders reports by at_ms, then by arrival.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/store.h"

namespace mesh::stores::sqlite {

class Connection;

class SqliteStore final : public sdk::Store {
 public:
  explicit SqliteStore(const sdk::HostContext& host);
  ~SqliteStore() override;

  const sdk::Schema& config_schema() const noexcept override;

  sdk::Result<void> open() noexcept override;

  sdk::Result<std::vector<sdk::NodeRecord>> nodes() noexcept override;
  sdk::Result<sdk::NodeRecord> node(const std::string& name) noexcept override;

  sdk::Result<void> add_token(const sdk::TokenRecord& token) noexcept override;
  sdk::Result<std::vector<sdk::TokenRecord>> tokens(std::int64_t now_ms) noexcept override;
  sdk::Result<void> revoke_token(const std::string& id) noexcept override;
  sdk::Result<sdk::NodeRecord> enrol(const std::string& token_hash, const std::string& node,
                                     const std::string& public_key,
                                     std::int64_t now_ms) noexcept override;
  sdk::Result<void> set_briefing(const std::string& node, const std::string& briefing,
                                 bool eligible) noexcept override;

  /// Also InvalidArgument when `writes` is empty, names a node twice or has no `render`.
  /// `render` runs while the store's lock is held: it must not call back into the store.
  sdk::Result<sdk::DeliveryRecord> declare(const std::vector<sdk::DeclarationWrite>& writes,
                                           std::int64_t now_ms,
                                           std::uint32_t retain) noexcept override;
  sdk::Result<std::optional<sdk::RevisionRecord>> latest_revision(
      const std::string& node) noexcept override;
  sdk::Result<sdk::RevisionRecord> revision(const std::string& node,
                                            std::uint64_t revision) noexcept override;
  sdk::Result<std::vector<sdk::RevisionRecord>> history(const std::string& node,
                                                        std::uint32_t limit) noexcept override;
  sdk::Result<sdk::DeliveryRecord> delivery(std::uint64_t id) noexcept override;
  sdk::Result<std::optional<sdk::DeliveryRecord>> latest_delivery() noexcept override;

  /// Also InvalidArgument for revision 0 or an outcome other than applied/failed/refused.
  sdk::Result<bool> record_apply(const sdk::ApplyReport& report) noexcept override;
  sdk::Result<std::optional<sdk::ApplyReport>> apply_report(
      const std::string& node, std::uint64_t revision) noexcept override;
  sdk::Result<std::vector<sdk::ApplyReport>> apply_reports(const std::string& node,
                                                           std::uint32_t limit) noexcept override;
  sdk::Result<bool> record_drift(const sdk::DriftReport& report) noexcept override;
  sdk::Result<std::optional<sdk::DriftReport>> last_drift(const std::string& node,
                                                          bool with_items_only) noexcept override;
  sdk::Result<void> touch(const std::vector<sdk::ContactUpdate>& updates) noexcept override;
  sdk::Result<std::vector<std::string>> owned(const std::string& node) noexcept override;

  sdk::Result<std::optional<sdk::RequestRecord>> remember_request(const sdk::RequestRecord& request,
                                                                  std::int64_t now_ms) noexcept override;
  sdk::Result<void> answer_request(const std::string& signer, const std::string& nonce,
                                   const std::string& answer) noexcept override;
  sdk::Result<sdk::DeliveryRecord> declare_answered(const std::vector<sdk::DeclarationWrite>& writes,
                                                    std::int64_t now_ms, std::uint32_t retain,
                                                    const sdk::RequestAnswer& answer) noexcept override;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;

 private:
  /// Runs `f(connection)` under the mutex, with exceptions turned into Internal errors;
  /// FailedPrecondition before open(). Defined in sqlite_store.cpp (only used there).
  template <class F>
  auto with_db(const char* what, F&& f) noexcept;
  /// declare() with, when `answer` is not null, the request's answer in the same transaction.
  sdk::Result<sdk::DeliveryRecord> declare_with(const std::vector<sdk::DeclarationWrite>& writes,
                                                std::int64_t now_ms, std::uint32_t retain,
                                                const sdk::RequestAnswer* answer) noexcept;

  std::mutex mutex_;
  std::string path_;
  std::int64_t busy_timeout_ms_ = 5000;
  std::int64_t drift_reports_kept_ = 100;
  bool configured_ = false;
  std::unique_ptr<Connection> db_;
};

}  // namespace mesh::stores::sqlite
