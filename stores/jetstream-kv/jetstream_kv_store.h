// The `jetstream-kv` store: the control plane's store on a NATS JetStream cluster
// (docs/decisions/0087). Its truth is ONE JetStream stream, an ordered log of the store's write
// operations; each instance applies the log into a local SQLite file through the `sqlite` store's
// own code, and reads from there after catching up.
//
// Sources: jetstream_kv_store.cpp (config, open), catch_up.cpp (applying the log), methods.cpp
// (the Store methods), store_paths.h (the write and read paths), operations and codec (the
// encoding), stream_log (JetStream), import (decision 88), report_batch.cpp (a batch of reports as
// one operation and read_many, decisions 100 and 101).
//
// Config (the `[store]` table less `plugin`; the control plane copies servers, user,
// password_file, nkey_seed and tls_ca from `[transport]` when the store table leaves them out):
//   servers        list, required   NATS server URLs (nats://host[:port] or tls://host[:port])
//   user           string           user name, for user/password authentication
//   password_file  string           file holding the password of `user`
//   nkey_seed      string           file holding a user nkey seed (SU...), for nkey authentication
//   tls_ca         string           PEM file of CA certificates that verify the servers; TLS on
//   inbox_prefix   string           subject prefix of the connection's reply inboxes (JetStream API
//                                   replies, ordered consumers; default nats.c's _INBOX); mesh-control
//                                   sets _INBOX.control, which only its own broker user may read
//                                   (decision 185)
//   prefix         string           the stream's name and subject prefix (default MESH_STORE);
//                                   [A-Za-z0-9_-], 1-32 characters
//   replicas       integer          the stream's replicas, 1..5 (default 1); changed on an
//                                   existing stream at open
//   timeout        integer, ms      each JetStream request (default 5000)
//   local_path     string           the local SQLite file (default
//                                   <state_dir>/jetstream-kv-<prefix>.db); its directory must exist
//   compact_after  integer          operations applied since the last snapshot after which the next
//                                   write first compacts the stream (default 20000; 0: never, whatever
//                                   compact_after_bytes says; compaction.cpp, decision 104)
//   compact_after_bytes integer     bytes of operations since the last snapshot (refused ones
//                                   included) after which the next write first compacts, or the
//                                   last snapshot's size when larger (default 64 MiB; 0: operations
//                                   alone decide; decision 186): the stream stays within about
//                                   snapshot + max(compact_after_bytes, snapshot) + one operation
//   import_sqlite  string           a sqlite store's file: at open, when the stream holds no
//                                   operation yet, a consistent copy of it becomes the stream's
//                                   first operation (decision 88), recording the file's SHA-256
//                                   inside it; when the stream was made from this very file (the
//                                   same digest), nothing is done and an info line says so; when it
//                                   holds other operations, FailedPrecondition naming import_sqlite
//                                   and telling to remove it (decision 189)
//   import_new_only bool            true: import_sqlite only into a new stream, a stream made
//                                   from the same file is refused as well (mesh-control migrate)
//
// Every write method is one operation published with JetStream's compare-and-swap (expected last
// subject sequence = the last operation this instance applied); a lost race catches up and tries
// again (up to 64 times, then Transient). Every read first asks the stream's last sequence and
// applies what is missing (reads are linearizable across instances). Renders run before
// publishing, on the caught-up state (DeclarationWrite::render etc. may therefore run more than
// once for one call, once per attempt).
//
// Behaviour, bounds and errors are the sqlite store's (sqlite_store.h), with drift_reports_kept
// fixed at 100 (every instance must apply the log the same way), plus: Unavailable when the
// servers cannot be reached (reads and writes: nothing stale is served); FailedPrecondition at
// open when the local file was made from another stream of the same name (remove it: it is
// rebuilt from the stream), and for every call once messages this instance had not applied are
// gone from the stream (purged by hand: the log is never compacted yet) with no import after them. An operation larger than the servers' max_payload less 4 KiB goes in
// parts (decision 87).
//
// Thread safety: every method may be called from any thread; calls on one instance run one at a
// time (one mutex). Several instances (processes, machines) share one stream; each has its own
// local file.
#pragma once

#include <cstdint>
#include <memory>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/store.h"
#include "operations.h"
#include "stream_log.h"

namespace mesh::stores::sqlite {
class SqliteStore;
}

namespace mesh::stores::jetstream_kv {

class JetStreamKvStore final : public sdk::Store {
 public:
  explicit JetStreamKvStore(const sdk::HostContext& host);
  ~JetStreamKvStore() override;

  const sdk::Schema& config_schema() const noexcept override;
  sdk::Result<void> open() noexcept override;

  sdk::Result<std::vector<sdk::NodeRecord>> nodes() noexcept override;
  sdk::Result<sdk::NodeRecord> node(const std::string& name) noexcept override;
  sdk::Result<void> add_token(const sdk::TokenRecord& token) noexcept override;
  sdk::Result<std::vector<sdk::TokenRecord>> tokens(std::int64_t now_ms) noexcept override;
  sdk::Result<void> revoke_token(const std::string& id) noexcept override;
  sdk::Result<sdk::NodeRecord> enrol(const std::string& token_hash, const std::string& node,
                                     const std::string& public_key, std::int64_t now_ms) noexcept override;
  sdk::Result<void> set_briefing(const std::string& node, const std::string& briefing,
                                 bool eligible) noexcept override;
  sdk::Result<sdk::DeliveryRecord> declare(const std::vector<sdk::DeclarationWrite>& writes, std::int64_t now_ms,
                                           std::uint32_t retain) noexcept override;
  sdk::Result<std::optional<sdk::RevisionRecord>> latest_revision(const std::string& node) noexcept override;
  sdk::Result<sdk::RevisionRecord> revision(const std::string& node, std::uint64_t revision) noexcept override;
  sdk::Result<std::vector<sdk::RevisionRecord>> history(const std::string& node,
                                                        std::uint32_t limit) noexcept override;
  sdk::Result<std::optional<sdk::RevisionRef>> next_revision(const std::string& node,
                                                             std::uint64_t revision) noexcept override;
  sdk::Result<sdk::DeliveryRecord> delivery(std::uint64_t id) noexcept override;
  sdk::Result<std::optional<sdk::DeliveryRecord>> latest_delivery() noexcept override;
  sdk::Result<bool> record_apply(const sdk::ApplyReport& report) noexcept override;
  sdk::Result<std::optional<sdk::ApplyReport>> apply_report(const std::string& node,
                                                            std::uint64_t revision) noexcept override;
  sdk::Result<std::vector<sdk::ApplyReport>> apply_reports(const std::string& node,
                                                           std::uint32_t limit) noexcept override;
  sdk::Result<bool> record_drift(const sdk::DriftReport& report) noexcept override;
  /// report_batch.cpp (docs/decisions/0100): the whole batch as ONE operation message (one
  /// JetStream publish round trip, in parts when over max_payload), applied by the sqlite store's
  /// record_reports in one local transaction on every instance, so each report's result is the
  /// same everywhere; refusals are per report, as there.
  sdk::Result<sdk::ReportResults> record_reports(const sdk::ReportBatch& batch) noexcept override;
  /// report_batch.cpp (docs/decisions/0101): catches up once, then runs `reads` with the local
  /// file's sqlite store as the view, under this store's mutex (so no operation is applied
  /// during the reads).
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
  /// Group commit of nonces (docs/decisions/0119): the batch is ONE operation, applied on every
  /// instance by the sqlite store's remember_requests in one local transaction — each request's
  /// result is the same everywhere, and one that another instance remembered first is a replay.
  sdk::Result<sdk::RememberResults> remember_requests(const std::vector<sdk::RequestRecord>& requests,
                                                      std::int64_t now_ms) noexcept override;
  sdk::Result<sdk::DeliveryRecord> declare_answered(const std::vector<sdk::DeclarationWrite>& writes,
                                                    std::int64_t now_ms, std::uint32_t retain,
                                                    const sdk::RequestAnswer& answer) noexcept override;
  sdk::Result<void> set_provider_schemas(const std::string& node, const std::string& schemas) noexcept override;
  sdk::Result<std::optional<std::string>> provider_schemas(const std::string& node) noexcept override;
  sdk::Result<std::optional<sdk::StoredRecord>> record(const std::string& ns, const std::string& key) noexcept override;
  sdk::Result<std::vector<sdk::StoredRecord>> records(const std::string& ns,
                                                      const std::string& key_prefix) noexcept override;
  sdk::Result<std::vector<sdk::StoredRecord>> put_records(const std::vector<sdk::RecordWrite>& writes,
                                                          std::int64_t now_ms) noexcept override;
  sdk::Result<std::uint64_t> next_sequence(const std::string& name) noexcept override;
  sdk::Result<sdk::DeliveryRecord> declare_with(const std::vector<sdk::DeclarationWrite>& writes,
                                                const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                                std::uint32_t retain,
                                                const std::optional<sdk::RequestAnswer>& answer) noexcept override;

  /// The stream sequence of the last operation applied to the local file (0: none). For tests
  /// and tools; does not catch up.
  std::uint64_t applied_sequence() noexcept;
  /// How many times a write of this instance had to be rendered and published again because
  /// another instance wrote first (JetStream refused the CAS, or the server let both through and
  /// the later one's renders no longer held). For tests and figures.
  std::uint64_t lost_races() noexcept;
  /// How many reads of this instance were served by a catch-up another call made after the read
  /// arrived (decision 128) instead of asking the stream for its bounds themselves. For tests
  /// and figures.
  std::uint64_t reads_shared() noexcept;

  /// Compaction (compaction.cpp, decision 104): after catching up, the local file's image is
  /// published as a snapshot operation (an Import: it replaces the whole state) with the same
  /// compare-and-swap as every write — a write of another instance that lands first makes it
  /// catch up and snapshot again, one that comes after it lands after it — then every message
  /// before the snapshot's first part is purged (JetStream purge up to that sequence). An
  /// instance behind the purge point (a new one, one stopped) then starts from the snapshot.
  /// Returns the stream sequence of the snapshot and how many messages were purged. Errors:
  /// those of a write (Unavailable, Transient after 64 lost races); a failed purge is
  /// Unavailable after the snapshot landed (the next compaction purges). Thread-safe.
  struct Compacted {
    std::uint64_t snapshot_seq = 0;
    std::uint64_t purged = 0;
  };
  sdk::Result<Compacted> compact() noexcept;
  /// Operations applied since the last snapshot (or import, or the start of the stream). For
  /// tests and figures.
  std::uint64_t operations_since_snapshot() noexcept;
  /// Bytes of the operations in the stream since the last snapshot (what compact_after_bytes is
  /// compared with). For tests and figures.
  std::uint64_t bytes_since_snapshot() noexcept;

  /// After catching up, the local file's online backup (the sqlite store's backup(), decision
  /// 85): the whole store as of the stream's last sequence at the call, in the sqlite store's
  /// format — a `sqlite` store restores it, and `import_sqlite` makes it a new stream's first
  /// operation.
  sdk::Result<void> backup(const std::string& path) noexcept override;
  /// Unsupported, naming the way that works: other instances serve this stream, so a backup goes
  /// into a new stream (a new `prefix` with `import_sqlite` = the backup).
  sdk::Result<void> restore(const std::string& path) noexcept override;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;

 private:
  /// FailedPrecondition naming the stream, the first missing sequence and the local file.
  sdk::Error gap_error() const;
  /// Applies every operation up to the stream's last sequence. Mutex held.
  sdk::Result<void> catch_up();
  /// Applies every operation up to sequence `limit`, one message request each. Mutex held.
  sdk::Result<void> catch_up_to(std::uint64_t limit);
  /// Applies the operation message `data` stored at `seq` (inline or parts); returns its op id
  /// and result; an error is a retryable local failure (nothing applied). Mutex held.
  sdk::Result<std::pair<std::string, OpResult>> apply(std::uint64_t seq, const std::string& data);
  /// Publishes an operation of `method` whose payload `build` makes on the caught-up state,
  /// until it wins the compare-and-swap; returns what applying it returned. Mutex taken.
  template <class T, class Build>
  sdk::Result<T> write(const char* what, Method method, Build&& build) noexcept;
  /// Catches up, then runs `f(sqlite store)`. Mutex taken.
  template <class F>
  auto read(const char* what, F&& f) noexcept;
  /// Opens the local SQLite file through the sqlite store.
  sdk::Result<std::unique_ptr<sqlite::SqliteStore>> open_local();
  /// compact() when `compact_after` operations were applied since the last snapshot; a failure
  /// is logged (the write that called it goes on). Called by write() before it takes the mutex.
  void maybe_compact() noexcept;
  sdk::Result<DeclarePrediction> predict(const std::vector<sdk::DeclarationWrite>& writes);
  sdk::Result<sdk::DeliveryRecord> declare_op(DeclareKind kind, const std::vector<sdk::DeclarationWrite>& writes,
                                              const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                              std::uint32_t retain, const sdk::RequestAnswer* answer) noexcept;

  std::mutex mutex_;
  LogSettings settings_;
  std::string local_path_;
  std::string import_path_;  ///< import_sqlite, or empty
  bool import_new_only_ = false;  ///< import_new_only: a stream made from the same file is refused too
  bool configured_ = false;
  std::unique_ptr<sqlite::SqliteStore> db_;
  std::unique_ptr<StreamLog> log_;
  std::uint64_t last_op_seq_ = 0;  ///< the last operation applied (its stream sequence)
  std::uint64_t position_ = 0;     ///< the last stream sequence looked at (parts included)
  /// The first sequence found missing (purged or deleted) while no import has replaced the whole
  /// state since: every read and write fails (gap_error) rather than answer from a partial log.
  std::optional<std::uint64_t> gap_from_;
  std::vector<std::string> pending_ids_;  ///< this call's published op ids
  std::optional<OpResult> pending_result_;
  std::uint64_t lost_races_ = 0;
  static constexpr std::int64_t kDefaultCompactAfter = 20000;
  static constexpr std::int64_t kDefaultCompactAfterBytes = std::int64_t{64} << 20;
  std::int64_t compact_after_ = kDefaultCompactAfter;
  std::int64_t compact_after_bytes_ = kDefaultCompactAfterBytes;
  std::uint64_t ops_since_snapshot_ = 0;  ///< applied since the last Import (mutex held)
  /// Bytes of every operation in the stream since the last Import (refused ones too: they take
  /// the stream's room as well), and the size of that image (decision 186). Mutex held.
  std::uint64_t bytes_since_snapshot_ = 0;
  std::uint64_t image_bytes_ = 0;
  std::uint64_t compact_retry_bytes_ = 0;  ///< after a failed compaction: not before this many bytes
  std::uint64_t image_seq_ = 0;           ///< the last Import applied: its commit's sequence
  std::uint64_t image_first_seq_ = 0;     ///< ... and its first message's (first part)
  std::uint64_t compact_retry_at_ = 0;    ///< after a failed compaction: not before this count
  std::atomic<bool> compacting_{false};
  /// Catch-up rounds (decision 128): `rounds_started_` is raised under the mutex before a round
  /// asks the stream for its bounds, `rounds_done_` is the last round that completed. A read that
  /// loaded `rounds_started_ == s` on arrival is served by any round numbered above s that has
  /// completed: that round's bounds were asked after the read arrived.
  std::atomic<std::uint64_t> rounds_started_{0};
  std::uint64_t rounds_done_ = 0;  ///< mutex held
  std::uint64_t reads_shared_ = 0; ///< reads served by another call's catch-up (mutex held)
};

}  // namespace mesh::stores::jetstream_kv
