// The `sqlite` store: the control plane's embedded default store, one SQLite database file.
//
// Config (the `[store]` table less `plugin`):
//   path          string, required  the database file; created if missing; its directory must
//                                   exist (InvalidArgument with path `path` otherwise)
//   busy_timeout  integer, ms       how long a write waits for another connection's write lock
//                                   before failing with Transient (default 5000)
//   drift_reports_kept  integer     drift reports kept per node (default 100)
//   max_size      integer, bytes    largest database file (SQLite max_page_count at 4096-byte
//                                   pages); a write beyond it fails as on a full disk, with
//                                   Unavailable (retryable). 0 (default): no limit
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
// - Apply reports are stored with the generation that verified them; re-enrolment leaves them
//   in the file (audit) but they no longer count.
// - touch ignores ContactUpdate::applied_revision (applied_revision is driven by apply reports
//   alone); host_version/host_state come from the newest heartbeat by `at_ms`.
// - Re-enrolment sets enrolled_at_ms to the re-enrolment time (the current identity's age).
// - last_drift orders reports by at_ms, then by arrival.
// - Removal (decision record 37): a removed node keeps its `nodes` row (removed_at_ms set), so
//   its revision counter and generation continue if it is enrolled again; per-node reads
//   (history, apply reports, owned, last_drift) still answer for it by name; `purge` deletes
//   its revisions, delivery targets, reports, drift reports, recovery copy, briefing and tokens.
// - Apply reports are pruned with their revisions (declare's `retain`); a report older than
//   every retained revision is not recorded (record_apply returns false).
// - A heartbeat (touch) of the node's current identity whose applied_revision is above the
//   node's revision counter raises the counter to it (at most 2^53 - 1; never lowers it), so
//   that a store restored from a backup numbers the next revision above what the host applied
//   (decision record 191). Revision numbers then have a gap: `retain` counts revisions, not
//   numbers, and NodeRecord::declared_revision is the newest revision stored.
// - Records (schema 7): an erased record keeps a row (erased, no value) so that its version
//   continues if it is written again; records are never pruned and are not per node (purging a
//   node leaves records naming it, e.g. its labels, to the control plane).
//
// Bounds (what one node may store; beyond them InvalidArgument naming the node and the limit):
//   apply report  owned: at most 100,000 resources, each at most 4,096 bytes, 16 MiB in all;
//                 resource at most 4,096 bytes; code at most 64 bytes; a reason over 64 KiB is
//                 stored cut (never refused)
//   briefing      at most 256 KiB
//   drift report  at most 10,000 items; resource at most 4,096 bytes; found/action at most 64 KiB
//   revision      composition at most 1 MiB (the body itself is not bounded here)
// Bounds of the control plane's records (not per node; InvalidArgument naming ns/key):
//   record        ns 1-64 bytes of [a-z0-9_.-]; key 1-1,024 bytes, no NUL; value at most 16 MiB
//   sequence      name 1-1,024 bytes
// With `retain` revisions and `drift_reports_kept` drift reports per node, one node stores at
// most about retain × 16 MiB of apply reports, drift_reports_kept × 10,000 items and one briefing.
//
// Errors of the database itself are retryable: SQLITE_BUSY/LOCKED are Transient, SQLITE_FULL
// and SQLITE_IOERR (disk full, I/O error) Unavailable; messages carry the OS error (errno text).
// Files: the database and its -wal and -shm are created 0600 (existing ones lose group/other
// permissions at open).
#pragma once

#include <cstdint>
#include <functional>
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
  /// From delivery_targets, which retention never prunes.
  sdk::Result<std::optional<sdk::RevisionRef>> next_revision(const std::string& node,
                                                             std::uint64_t revision) noexcept override;
  sdk::Result<sdk::DeliveryRecord> delivery(std::uint64_t id) noexcept override;
  sdk::Result<std::optional<sdk::DeliveryRecord>> latest_delivery() noexcept override;

  /// Also InvalidArgument for revision 0 or an outcome other than
  /// applied/failed/refused/superseded.
  sdk::Result<bool> record_apply(const sdk::ApplyReport& report) noexcept override;
  sdk::Result<std::optional<sdk::ApplyReport>> apply_report(
      const std::string& node, std::uint64_t revision) noexcept override;
  sdk::Result<std::vector<sdk::ApplyReport>> apply_reports(const std::string& node,
                                                           std::uint32_t limit) noexcept override;
  sdk::Result<bool> record_drift(const sdk::DriftReport& report) noexcept override;
  /// report_batch.cpp (docs/decisions/0100): the whole batch in ONE write transaction (one
  /// fsync), each report inside its own SAVEPOINT, so that a report refused (any error but a
  /// retryable one) is rolled back alone and answered with its own error while the others
  /// commit. A retryable error (busy, disk full, I/O) fails the whole batch: nothing of it is
  /// written. Under jetstream-kv the before-commit hook runs once, for the whole batch.
  sdk::Result<sdk::ReportResults> record_reports(const sdk::ReportBatch& batch) noexcept override;
  /// report_batch.cpp: `reads(*this)` inside ONE read transaction, under the store's mutex (held
  /// for the whole call: other callers wait). Every read answers from one snapshot, and SQLite
  /// takes its WAL read lock once instead of once per read (a deploy report of 50,000 nodes made
  /// 100,000 read transactions, each a pair of fcntl locks). A write through the view fails with
  /// FailedPrecondition; a nested read_many joins the open one.
  sdk::Result<void> read_many(const std::function<sdk::Result<void>(sdk::Store& view)>& reads) noexcept override;
  sdk::Result<std::optional<sdk::DriftReport>> last_drift(const std::string& node,
                                                          bool with_items_only) noexcept override;
  sdk::Result<void> touch(const std::vector<sdk::ContactUpdate>& updates) noexcept override;
  sdk::Result<std::vector<std::string>> owned(const std::string& node) noexcept override;
  sdk::Result<std::vector<sdk::OwnedRecord>> recovery_copy(const std::string& node) noexcept override;

  sdk::Result<std::vector<sdk::NodeRecord>> all_nodes() noexcept override;
  sdk::Result<sdk::NodeRecord> remove_node(const std::string& node, std::int64_t now_ms,
                                           bool purge) noexcept override;

  sdk::Result<std::optional<sdk::RequestRecord>> remember_request(const sdk::RequestRecord& request,
                                                                  std::int64_t now_ms) noexcept override;
  sdk::Result<void> answer_request(const std::string& signer, const std::string& nonce,
                                   const std::string& answer) noexcept override;
  /// requests.cpp (docs/decisions/0119): the whole batch in ONE write transaction (one fsync).
  sdk::Result<sdk::RememberResults> remember_requests(const std::vector<sdk::RequestRecord>& requests,
                                                      std::int64_t now_ms) noexcept override;
  sdk::Result<sdk::DeliveryRecord> declare_answered(const std::vector<sdk::DeclarationWrite>& writes,
                                                    std::int64_t now_ms, std::uint32_t retain,
                                                    const sdk::RequestAnswer& answer) noexcept override;

  /// Bound: kMaxSchemasBytes (1 MiB) of JSON text per node.
  sdk::Result<void> set_provider_schemas(const std::string& node, const std::string& schemas) noexcept override;
  sdk::Result<std::optional<std::string>> provider_schemas(const std::string& node) noexcept override;

  /// Records and sequences (records.cpp; bounds in "Bounds" above).
  sdk::Result<std::optional<sdk::StoredRecord>> record(const std::string& ns, const std::string& key) noexcept override;
  sdk::Result<std::vector<sdk::StoredRecord>> records(const std::string& ns,
                                                      const std::string& key_prefix) noexcept override;
  sdk::Result<std::vector<sdk::StoredRecord>> put_records(const std::vector<sdk::RecordWrite>& writes,
                                                          std::int64_t now_ms) noexcept override;
  sdk::Result<std::uint64_t> next_sequence(const std::string& name) noexcept override;
  /// Also InvalidArgument as declare() (a node twice, no render) and for a composition over
  /// 1 MiB. An empty `writes` writes no delivery (returned: id 0, no targets).
  sdk::Result<sdk::DeliveryRecord> declare_with(const std::vector<sdk::DeclarationWrite>& writes,
                                                const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                                std::uint32_t retain,
                                                const std::optional<sdk::RequestAnswer>& answer) noexcept override;

  /// backup.cpp: SQLite's online backup API into a temporary file renamed over `path`. The file
  /// is a plain SQLite database in rollback-journal mode: `sqlite3 FILE .dump` reads it.
  sdk::Result<void> backup(const std::string& path) noexcept override;
  /// backup.cpp: checks the file (integrity_check, a schema_version this build knows), takes the
  /// in-use lock exclusively ("<path>.lock"; a store that is open holds it shared), then copies
  /// the backup's pages into the database in one write transaction.
  sdk::Result<void> restore(const std::string& path) noexcept override;
  /// For a store built on this one (jetstream-kv): runs `f` with the connection, under the
  /// store's mutex (so between two calls of the other methods, never during one). `f` may set
  /// the connection's before-commit hook (Connection::set_before_commit), run its own SQL and
  /// transactions; it must not call back into this store. Errors: FailedPrecondition before
  /// open(), what `f` returns, Internal for an exception `f` throws.
  sdk::Result<void> with_connection(const std::function<sdk::Result<void>(Connection&)>& f) noexcept;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;

 private:
  /// Runs `f(connection)` under the mutex, with exceptions turned into Internal errors;
  /// FailedPrecondition before open(). Defined in sqlite_store.cpp (only used there).
  template <class F>
  auto with_db(const char* what, F&& f) noexcept;
  /// What record_apply / record_drift write, inside the caller's write transaction (no BEGIN,
  /// no COMMIT; the caller rolls back on an error). sqlite_store.cpp.
  sdk::Result<bool> record_apply_rows(Connection& db, const sdk::ApplyReport& report);
  sdk::Result<bool> record_drift_rows(Connection& db, const sdk::DriftReport& report);
  /// declare() with the record writes and, when `answer` is not null, the request's answer in
  /// the same transaction; an empty `writes` only when `allow_empty` (no delivery then).
  sdk::Result<sdk::DeliveryRecord> declare_in(const char* what, const std::vector<sdk::DeclarationWrite>& writes,
                                              const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                              std::uint32_t retain, const sdk::RequestAnswer* answer,
                                              bool allow_empty) noexcept;

  /// Recursive: read_many holds it while the reads it makes take it again.
  std::recursive_mutex mutex_;
  std::string path_;
  std::int64_t busy_timeout_ms_ = 5000;
  std::int64_t drift_reports_kept_ = 100;
  std::int64_t max_size_ = 0;
  bool configured_ = false;
  std::unique_ptr<Connection> db_;
  /// The in-use lock (backup.h), held shared from open() until destruction; -1 when not open.
  int use_lock_fd_ = -1;
};

}  // namespace mesh::stores::sqlite
