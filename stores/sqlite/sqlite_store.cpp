#include "sqlite_store.h"

#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "backup.h"
#include "connection.h"
#include "migrations.h"
#include "records.h"
#include "requests.h"

// Begins a transaction held until the end of the scope (rolled back unless committed).
#define MESH_SQLITE_BEGIN(name, kind)          \
  MESH_TRY(name, Transaction::begin(db, kind)); \
  (void)name

namespace mesh::stores::sqlite {

using sdk::ApplyReport;
using sdk::DeliveryRecord;
using sdk::DeliveryTarget;
using sdk::DriftItem;
using sdk::DriftReport;
using sdk::ErrorCode;
using sdk::NodeRecord;
using sdk::Result;
using sdk::RevisionRecord;
using sdk::TokenRecord;
using Kind = Transaction::Kind;

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// Revisions and delivery ids are stored as SQLite integers (int64). Larger values cannot exist.
bool fits(std::uint64_t v) {
  return v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
}
std::int64_t i64(std::uint64_t v) { return static_cast<std::int64_t>(v); }

sdk::Error not_enrolled(const std::string& node) {
  return sdk::Error{ErrorCode::NotFound, "node " + in_quotes(node) + " is not enrolled", {}};
}

// What one node may store (sqlite_store.h "Bounds"). Beyond them a write is refused with
// InvalidArgument naming the node and the limit, so that one node cannot fill the disk.
constexpr std::size_t kMaxOwned = 100'000;
constexpr std::size_t kMaxOwnedBytes = 16u << 20;
constexpr std::size_t kMaxResourceBytes = 4096;
constexpr std::size_t kMaxReasonBytes = 64u << 10;
constexpr std::size_t kMaxCodeBytes = 64;
constexpr std::size_t kMaxBriefingBytes = 256u << 10;
constexpr std::size_t kMaxSchemasBytes = 1u << 20;
constexpr std::size_t kMaxCompositionBytes = 1u << 20;
constexpr std::size_t kMaxDriftItems = 10'000;
constexpr std::size_t kMaxDriftTextBytes = 64u << 10;
// The highest revision a heartbeat may raise a node's counter to (touch(), decision record 191):
// 2^53 - 1, the largest integer every JSON reader keeps exactly, far below running out (int64).
constexpr std::uint64_t kMaxRaisedRevision = (std::uint64_t{1} << 53) - 1;

// The reason as stored: at most kMaxReasonBytes, cut at a UTF-8 boundary with the size cut off.
std::string bounded_reason(const std::string& reason) {
  if (reason.size() <= kMaxReasonBytes) return reason;
  std::size_t keep = kMaxReasonBytes - 64;
  while (keep > 0 && (static_cast<unsigned char>(reason[keep]) & 0xC0) == 0x80) --keep;
  return reason.substr(0, keep) + "… (" + std::to_string(reason.size()) + " bytes, cut to " +
         std::to_string(keep) + ")";
}

sdk::Error over_bound(const std::string& what, const std::string& node, const std::string& field,
                      std::size_t size, std::size_t limit, const char* unit) {
  return sdk::Error{ErrorCode::InvalidArgument,
                    what + " of node " + in_quotes(node) + ": " + field + " has " + std::to_string(size) + " " +
                        unit + ", over the store's limit of " + std::to_string(limit) + " " + unit +
                        " per node (sqlite_store.h \"Bounds\"); not stored",
                    field};
}

// --- nodes ---------------------------------------------------------------------------------------

#define MESH_SQLITE_NODE_SELECT                                                              \
  "SELECT n.name, n.enrolled_at_ms, n.last_contact_ms, n.applied_revision, n.last_outcome, " \
  "n.eligible, n.public_key, n.host_version, n.host_state, coalesce(b.briefing, ''), "       \
  "n.generation, n.removed_at_ms, "                                                           \
  "coalesce((SELECT max(r.revision) FROM revisions AS r WHERE r.node = n.name), 0), "     \
  "n.heartbeat_at_ms, "                                                                      \
  "n.heartbeat_ts_ms, n.heartbeat_generation "                                               \
  "FROM nodes AS n LEFT JOIN node_briefings AS b ON b.node = n.name"

NodeRecord read_node(const Statement& st) {
  NodeRecord n;
  n.name = st.column_text(0);
  n.enrolled_at_ms = st.column_int(1);
  if (!st.column_is_null(2)) n.last_contact_ms = st.column_int(2);
  n.applied_revision = st.column_uint(3);
  n.last_outcome = st.column_text(4);
  n.eligible = st.column_int(5) != 0;
  n.public_key = st.column_text(6);
  n.host_version = st.column_text(7);
  n.host_state = st.column_text(8);
  n.briefing = st.column_text(9);
  n.generation = st.column_uint(10);
  if (!st.column_is_null(11)) n.removed_at_ms = st.column_int(11);
  n.declared_revision = st.column_uint(12);
  if (!st.column_is_null(13)) n.heartbeat_at_ms = st.column_int(13);
  n.heartbeat_ms = st.column_int(14);
  n.heartbeat_generation = st.column_uint(15);
  return n;
}

// Every row of a node listing (`sql`: MESH_SQLITE_NODE_SELECT with its WHERE/ORDER BY).
Result<std::vector<NodeRecord>> read_nodes(Connection& db, const char* sql) {
  MESH_TRY(st, db.prepare(sql));
  std::vector<NodeRecord> out;
  for (;;) {
    MESH_TRY(row, st.step());
    if (!row) break;
    out.push_back(read_node(st));
  }
  return out;
}

Result<std::optional<NodeRecord>> load_node(Connection& db, const std::string& name) {
  MESH_TRY(st, db.prepare(MESH_SQLITE_NODE_SELECT " WHERE n.name = ?1"));
  st.bind(1, name);
  MESH_TRY(row, st.step());
  if (!row) return std::optional<NodeRecord>();
  return std::optional<NodeRecord>(read_node(st));
}

Result<bool> node_exists(Connection& db, const std::string& name) {
  MESH_TRY(st, db.prepare("SELECT 1 FROM nodes WHERE name = ?1"));
  st.bind(1, name);
  return st.step();
}

// True when the node is enrolled: it has a row and was not removed. Per-node writes need this;
// per-node reads (history) only need the row (node_exists), so a removed node's stays readable.
Result<bool> node_enrolled(Connection& db, const std::string& name) {
  MESH_TRY(st, db.prepare("SELECT 1 FROM nodes WHERE name = ?1 AND removed_at_ms IS NULL"));
  st.bind(1, name);
  return st.step();
}

// For hints only: true when the node is enrolled (a store error counts as "not known").
bool exists_hint(Connection& db, const std::string& name) {
  auto r = node_enrolled(db, name);
  return r && *r;
}

// "2026-11-29T12:00:00Z" (UTC, whole seconds) for messages.
std::string utc_text(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  char buf[32] = "?";
  if (::gmtime_r(&secs, &tm)) std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<void> require_node(Connection& db, const std::string& name) {
  MESH_TRY(exists, node_exists(db, name));
  if (!exists) return sdk::fail(not_enrolled(name));
  return {};
}

// --- revisions and deliveries --------------------------------------------------------------------

#define MESH_SQLITE_REVISION_SELECT \
  "SELECT node, revision, created_at_ms, delivery, body, digest, composition FROM revisions"

RevisionRecord read_revision(const Statement& st) {
  RevisionRecord r;
  r.node = st.column_text(0);
  r.revision = st.column_uint(1);
  r.created_at_ms = st.column_int(2);
  r.delivery = st.column_uint(3);
  r.body = st.column_text(4);
  r.digest = st.column_text(5);
  r.composition = st.column_text(6);
  return r;
}

Result<std::vector<DeliveryTarget>> load_targets(Connection& db, std::int64_t delivery) {
  MESH_TRY(st, db.prepare("SELECT node, revision FROM delivery_targets "
                                    "WHERE delivery = ?1 ORDER BY node"));
  st.bind(1, delivery);
  std::vector<DeliveryTarget> targets;
  for (;;) {
    MESH_TRY(row, st.step());
    if (!row) break;
    targets.push_back(DeliveryTarget{st.column_text(0), st.column_uint(1)});
  }
  return targets;
}

// --- reports -------------------------------------------------------------------------------------

// Fills report.owned and report.owned_digests (the latter only when some digest is known).
Result<void> load_report_owned(Connection& db, ApplyReport& report) {
  MESH_TRY(st, db.prepare("SELECT resource, digest FROM apply_report_owned "
                                    "WHERE node = ?1 AND revision = ?2 ORDER BY position"));
  st.bind(1, report.node).bind(2, i64(report.revision));
  bool any_digest = false;
  for (;;) {
    MESH_TRY(row, st.step());
    if (!row) break;
    report.owned.push_back(st.column_text(0));
    report.owned_digests.push_back(st.column_text(1));
    any_digest = any_digest || !report.owned_digests.back().empty();
  }
  if (!any_digest) report.owned_digests.clear();
  return {};
}

// Columns of an apply report as read by read_apply_report (prefix `a.`).
#define MESH_SQLITE_REPORT_COLUMNS \
  "a.revision, a.at_ms, a.outcome, a.resource, a.reason, a.received_at_ms, a.generation, a.code"

// Which stored report of a (node, revision) gives way to `incoming` (docs/protocol.md,
// "Delivery outcomes"): a refusal or a host's "superseded" to a real apply's outcome, a failure
// to a retried success. "applied" is final.
bool gives_way(const std::string& recorded, const std::string& incoming) {
  if (recorded == "refused" || recorded == "superseded")
    return incoming == "applied" || incoming == "failed";
  if (recorded == "failed") return incoming == "applied";
  return false;
}

ApplyReport read_apply_report(const Statement& st, const std::string& node) {
  ApplyReport r;
  r.node = node;
  r.revision = st.column_uint(0);
  r.at_ms = st.column_int(1);
  r.outcome = st.column_text(2);
  r.resource = st.column_text(3);
  r.reason = st.column_text(4);
  r.received_at_ms = st.column_int(5);
  r.generation = st.column_uint(6);
  r.code = st.column_text(7);
  return r;
}

Result<std::vector<DriftItem>> load_drift_items(Connection& db, std::int64_t report) {
  MESH_TRY(st, db.prepare("SELECT resource, found, action FROM drift_items "
                                    "WHERE report = ?1 ORDER BY position"));
  st.bind(1, report);
  std::vector<DriftItem> items;
  for (;;) {
    MESH_TRY(row, st.step());
    if (!row) break;
    items.push_back(DriftItem{st.column_text(0), st.column_text(1), st.column_text(2)});
  }
  return items;
}

// Moves last_contact_ms forward to at_ms (never back).
constexpr const char* kAdvanceContact =
    "UPDATE nodes SET last_contact_ms = ?2 "
    "WHERE name = ?1 AND (last_contact_ms IS NULL OR last_contact_ms < ?2)";

#define MESH_SQLITE_TOKEN_SELECT                                                            \
  "SELECT id, node, hash, created_at_ms, expires_at_ms, reenrol, used_at_ms, revoked FROM " \
  "tokens"

TokenRecord read_token(const Statement& st) {
  TokenRecord t;
  t.id = st.column_text(0);
  t.node = st.column_text(1);
  t.hash = st.column_text(2);
  t.created_at_ms = st.column_int(3);
  t.expires_at_ms = st.column_int(4);
  t.reenrol = st.column_int(5) != 0;
  if (!st.column_is_null(6)) t.used_at_ms = st.column_int(6);
  t.revoked = st.column_int(7) != 0;
  return t;
}

}  // namespace

// --- plugin plumbing -----------------------------------------------------------------------------

SqliteStore::SqliteStore(const sdk::HostContext& host) : Store(host) {}

SqliteStore::~SqliteStore() {
  db_.reset();  // the connection first, then the in-use lock
  if (use_lock_fd_ >= 0) ::close(use_lock_fd_);
}

const sdk::Schema& SqliteStore::config_schema() const noexcept {
  static const sdk::Schema schema = [] {
    sdk::Schema s;
    s.name = "store";
    s.description = "sqlite store: one SQLite database file (WAL, synchronous=FULL)";
    sdk::Attribute path;
    path.name = "path";
    path.type = sdk::ValueType::String;
    path.required = true;
    path.description = "the database file; created if missing; its directory must exist";
    s.attributes.push_back(std::move(path));
    sdk::Attribute busy;
    busy.name = "busy_timeout";
    busy.type = sdk::ValueType::Int;
    busy.description =
        "how long a write waits for another connection's lock before failing with a retryable "
        "error, in milliseconds";
    busy.default_value = sdk::Value(std::int64_t{5000});
    s.attributes.push_back(std::move(busy));
    sdk::Attribute kept;
    kept.name = "drift_reports_kept";
    kept.type = sdk::ValueType::Int;
    kept.description =
        "drift reports kept per node, newest first (a host sends one per scan, found drift or "
        "not); the newest report that found drift is kept as well, however old. At least 1";
    kept.default_value = sdk::Value(std::int64_t{100});
    s.attributes.push_back(std::move(kept));
    sdk::Attribute max_size;
    max_size.name = "max_size";
    max_size.type = sdk::ValueType::Int;
    max_size.description =
        "largest size of the database file in bytes (SQLite's max_page_count); a write that would "
        "grow it further fails with a retryable error, as on a full disk. 0: no limit";
    max_size.default_value = sdk::Value(std::int64_t{0});
    s.attributes.push_back(std::move(max_size));
    return s;
  }();
  return schema;
}

Result<void> SqliteStore::do_configure(const sdk::Value& config) {
  std::lock_guard lock(mutex_);
  if (db_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: configure after open");
  const sdk::Value cfg = sdk::apply_defaults(config_schema(), config);
  MESH_TRY(sdk::validate_against(config_schema(), cfg, ""));

  const std::string path = cfg.get_string("path");
  if (path.empty()) return sdk::fail(ErrorCode::InvalidArgument, "must not be empty", "path");
  namespace fs = std::filesystem;
  const fs::path file(path);
  fs::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return sdk::fail(
        ErrorCode::InvalidArgument,
        "the directory of the database file, " + in_quotes(dir.string()) + ", does not exist",
        "path");
  if (fs::is_directory(file, ec))
    return sdk::fail(ErrorCode::InvalidArgument,
                     in_quotes(path) + " is a directory; name the database file", "path");
  const std::int64_t busy = cfg.get_int("busy_timeout", 5000);
  if (busy < 0)
    return sdk::fail(ErrorCode::InvalidArgument, "must not be negative", "busy_timeout");

  const std::int64_t kept = cfg.get_int("drift_reports_kept", 100);
  if (kept < 1 || kept > 1'000'000)
    return sdk::fail(ErrorCode::InvalidArgument, "must be between 1 and 1000000", "drift_reports_kept");

  const std::int64_t max_size = cfg.get_int("max_size", 0);
  if (max_size < 0) return sdk::fail(ErrorCode::InvalidArgument, "must not be negative", "max_size");

  path_ = path;
  max_size_ = max_size;
  busy_timeout_ms_ = busy;
  drift_reports_kept_ = kept;
  configured_ = true;
  return {};
}

template <class F>
auto SqliteStore::with_db(const char* what, F&& f) noexcept {
  using R = decltype(f(std::declval<Connection&>()));
  return sdk::guard(what, [&]() -> R {
    std::lock_guard lock(mutex_);
    if (!db_)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       std::string("sqlite store: ") + what + " called before open()");
    return f(*db_);
  });
}

Result<void> SqliteStore::open() noexcept {
  return sdk::guard("open", [&]() -> Result<void> {
    std::lock_guard lock(mutex_);
    if (!configured_)
      return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: open before configure");
    if (db_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: already open");
    if (sodium_init() < 0)
      return sdk::fail(ErrorCode::Failed, "sqlite store: libsodium failed to initialise");
    // Shared: other stores and processes may open it too; only a restore needs it alone.
    MESH_TRY(use_lock, lock_database_use(path_, /*exclusive=*/false));
    struct LockGuard {
      int fd;
      bool keep = false;
      ~LockGuard() {
        if (!keep) ::close(fd);
      }
    } use_lock_guard{use_lock};
    MESH_TRY(db, Connection::open(path_, busy_timeout_ms_));
    MESH_TRY(migrate(*db, now_ms()));
    if (max_size_ > 0) {
      // Pages (4096 bytes, the default page size), not bytes; never below what the file already
      // has (SQLite keeps the larger).
      const std::string sql = "PRAGMA max_page_count = " + std::to_string(std::max<std::int64_t>(1, max_size_ / 4096));
      MESH_TRY(db->exec(sql.c_str(), "set max_page_count"));
    }
    db_ = std::move(db);
    use_lock_fd_ = use_lock;
    use_lock_guard.keep = true;
    log().info("sqlite store opened path=" + path_ +
               " schema_version=" + std::to_string(kWrittenSchemaVersion));
    return {};
  });
}

// --- nodes ---------------------------------------------------------------------------------------

Result<std::vector<NodeRecord>> SqliteStore::nodes() noexcept {
  return with_db("nodes", [&](Connection& db) -> Result<std::vector<NodeRecord>> {
    return read_nodes(db, MESH_SQLITE_NODE_SELECT " WHERE n.removed_at_ms IS NULL ORDER BY n.name");
  });
}

Result<NodeRecord> SqliteStore::node(const std::string& name) noexcept {
  return with_db("node", [&](Connection& db) -> Result<NodeRecord> {
    MESH_TRY(n, load_node(db, name));
    if (!n) return sdk::fail(not_enrolled(name));
    if (n->removed_at_ms)
      return sdk::fail(ErrorCode::NotFound, "node " + in_quotes(name) + " is not enrolled (removed at " +
                                                utc_text(*n->removed_at_ms) + ")");
    return std::move(*n);
  });
}

Result<std::vector<NodeRecord>> SqliteStore::all_nodes() noexcept {
  return with_db("all_nodes", [&](Connection& db) -> Result<std::vector<NodeRecord>> {
    return read_nodes(db, MESH_SQLITE_NODE_SELECT " ORDER BY n.name");
  });
}

Result<NodeRecord> SqliteStore::remove_node(const std::string& name, std::int64_t now_ms, bool purge) noexcept {
  return with_db("remove_node", [&](Connection& db) -> Result<NodeRecord> {
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(before, load_node(db, name));
    if (!before) return sdk::fail(ErrorCode::NotFound, "node " + in_quotes(name) + " was never enrolled");
    if (before->removed_at_ms && !purge)
      return sdk::fail(ErrorCode::NotFound, "node " + in_quotes(name) + " was already removed at " +
                                                utc_text(*before->removed_at_ms) + " (--purge deletes its history)");
    {
      // Only a token issued after the removal may enrol the name again.
      MESH_TRY(st, db.prepare("UPDATE tokens SET revoked = 1 WHERE node = ?1 AND used_at_ms IS NULL"));
      st.bind(1, name);
      MESH_TRY(st.run());
    }
    {
      // The row stays: its revision counter and generation continue at a later enrolment.
      MESH_TRY(st, db.prepare("UPDATE nodes SET removed_at_ms = coalesce(removed_at_ms, ?2), "
                                        "retired_revision = last_revision WHERE name = ?1"));
      st.bind(1, name).bind(2, now_ms);
      MESH_TRY(st.run());
    }
    if (purge) {
      // Children by node name; apply_report_owned and drift_items go with their parents.
      for (const char* sql : {"DELETE FROM delivery_targets WHERE node = ?1", "DELETE FROM revisions WHERE node = ?1",
                              "DELETE FROM apply_reports WHERE node = ?1", "DELETE FROM owned WHERE node = ?1",
                              "DELETE FROM drift_reports WHERE node = ?1", "DELETE FROM node_briefings WHERE node = ?1",
                              "DELETE FROM node_schemas WHERE node = ?1",
                              "DELETE FROM tokens WHERE node = ?1"}) {
        MESH_TRY(st, db.prepare(sql));
        st.bind(1, name);
        MESH_TRY(st.run());
      }
      MESH_TRY(st, db.prepare("UPDATE nodes SET applied_revision = 0, last_outcome = '', "
                                        "last_report_revision = 0, owned_revision = 0, host_version = '', "
                                        "host_state = '', eligible = 1, public_key = '' WHERE name = ?1"));
      st.bind(1, name);
      MESH_TRY(st.run());
    }
    MESH_TRY(tx.commit());
    return std::move(*before);
  });
}

// --- tokens and enrolment ------------------------------------------------------------------------

Result<void> SqliteStore::add_token(const TokenRecord& token) noexcept {
  return with_db("add_token", [&](Connection& db) -> Result<void> {
    if (token.id.empty()) return sdk::fail(ErrorCode::InvalidArgument, "must not be empty", "id");
    if (token.node.empty())
      return sdk::fail(ErrorCode::InvalidArgument,
                       "token " + in_quotes(token.id) + ": the node must not be empty", "node");
    if (token.hash.empty())
      return sdk::fail(ErrorCode::InvalidArgument,
                       "token " + in_quotes(token.id) + ": the hash must not be empty", "hash");
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    {
      MESH_TRY(st, db.prepare("SELECT id = ?1 FROM tokens WHERE id = ?1 OR hash = ?2 "
                                        "ORDER BY 1 DESC LIMIT 1"));
      st.bind(1, token.id).bind(2, token.hash);
      MESH_TRY(row, st.step());
      if (row)
        return sdk::fail(ErrorCode::AlreadyExists,
                         st.column_int(0) != 0 ? "token " + in_quotes(token.id) + " already exists"
                                               : "token " + in_quotes(token.id) +
                                                     ": another token already has the same hash");
    }
    {
      MESH_TRY(st, db.prepare("INSERT INTO tokens (id, node, hash, created_at_ms, "
                                        "expires_at_ms, reenrol, used_at_ms, revoked) "
                                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
      st.bind(1, token.id)
          .bind(2, token.node)
          .bind(3, token.hash)
          .bind(4, token.created_at_ms)
          .bind(5, token.expires_at_ms)
          .bind(6, std::int64_t{token.reenrol});
      if (token.used_at_ms)
        st.bind(7, *token.used_at_ms);
      else
        st.bind_null(7);
      st.bind(8, std::int64_t{token.revoked});
      MESH_TRY(st.run());
    }
    return tx.commit();
  });
}

Result<std::vector<TokenRecord>> SqliteStore::tokens(std::int64_t now_ms) noexcept {
  return with_db("tokens", [&](Connection& db) -> Result<std::vector<TokenRecord>> {
    MESH_TRY(st, db.prepare(MESH_SQLITE_TOKEN_SELECT
                                      " WHERE used_at_ms IS NULL AND revoked = 0 AND "
                                      "expires_at_ms > ?1 ORDER BY created_at_ms, rowid"));
    st.bind(1, now_ms);
    std::vector<TokenRecord> out;
    for (;;) {
      MESH_TRY(row, st.step());
      if (!row) break;
      out.push_back(read_token(st));
    }
    return out;
  });
}

Result<void> SqliteStore::revoke_token(const std::string& id) noexcept {
  return with_db("revoke_token", [&](Connection& db) -> Result<void> {
    // A write transaction (one statement would do), so that the before-commit hook runs.
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(st, db.prepare("UPDATE tokens SET revoked = 1 WHERE id = ?1"));
    st.bind(1, id);
    MESH_TRY(st.run());
    if (db.changes() == 0)
      return sdk::fail(ErrorCode::NotFound, "token " + in_quotes(id) + " not found");
    return tx.commit();
  });
}

Result<NodeRecord> SqliteStore::enrol(const std::string& token_hash, const std::string& node,
                                      const std::string& public_key, std::int64_t now_ms) noexcept {
  return with_db("enrol", [&](Connection& db) -> Result<NodeRecord> {
    const std::string refused = "enrolment of node " + in_quotes(node) + " refused: ";
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    TokenRecord token;
    {
      MESH_TRY(st, db.prepare(MESH_SQLITE_TOKEN_SELECT " WHERE hash = ?1"));
      st.bind(1, token_hash);
      MESH_TRY(row, st.step());
      if (!row) return sdk::fail(ErrorCode::PermissionDenied, refused + "unknown token");
      token = read_token(st);
    }
    const std::string tok = "token " + in_quotes(token.id);
    if (token.revoked)
      return sdk::fail(ErrorCode::PermissionDenied, refused + tok + " was revoked");
    const std::string reissue = "; issue a new one with `mesh token issue " + node +
                                (exists_hint(db, node) ? " --reenrol`" : "`");
    if (token.used_at_ms)
      return sdk::fail(ErrorCode::PermissionDenied, refused + tok + " was already used" + reissue);
    if (now_ms >= token.expires_at_ms)
      return sdk::fail(ErrorCode::PermissionDenied, refused + tok + " expired at " +
                                                        utc_text(token.expires_at_ms) + reissue);
    if (token.node != node)
      return sdk::fail(ErrorCode::PermissionDenied, refused + tok + " was issued for another node");
    MESH_TRY(has_row, node_exists(db, node));
    MESH_TRY(exists, node_enrolled(db, node));
    if (exists && !token.reenrol)
      return sdk::fail(ErrorCode::PermissionDenied, refused + "the node is already enrolled and " +
                                                        tok + " does not allow re-enrolment");
    {
      // Of concurrent attempts exactly one changes the row (BEGIN IMMEDIATE serialises them
      // already; the condition keeps that true whatever the transaction mode).
      MESH_TRY(st, db.prepare("UPDATE tokens SET used_at_ms = ?2 "
                                        "WHERE id = ?1 AND used_at_ms IS NULL AND revoked = 0"));
      st.bind(1, token.id).bind(2, now_ms);
      MESH_TRY(st.run());
      if (db.changes() != 1)
        return sdk::fail(ErrorCode::PermissionDenied, refused + tok + " was already used");
    }
    if (has_row && !exists) {
      // A removed node enrolled again: a new identity under the same name. Its revision counter
      // and generation continue (no revision number is ever reused), its earlier revisions stay
      // history and are never served (retired_revision), and nothing of the retired machine —
      // recovery copy, briefing, outcome, contact — carries over.
      MESH_TRY(st, db.prepare("UPDATE nodes SET public_key = ?2, enrolled_at_ms = ?3, "
                                        "generation = generation + 1, removed_at_ms = NULL, "
                                        "retired_revision = last_revision, applied_revision = 0, "
                                        "last_outcome = '', last_report_revision = last_revision, "
                                        "last_contact_ms = NULL, heartbeat_at_ms = NULL, host_version = '', "
                                        "host_state = '', eligible = 1, owned_revision = 0 WHERE name = ?1"));
      st.bind(1, node).bind(2, public_key).bind(3, now_ms);
      MESH_TRY(st.run());
      for (const char* sql : {"DELETE FROM owned WHERE node = ?1", "DELETE FROM node_briefings WHERE node = ?1",
                              "DELETE FROM node_schemas WHERE node = ?1"}) {
        MESH_TRY(del, db.prepare(sql));
        del.bind(1, node);
        MESH_TRY(del.run());
      }
    } else if (exists) {
      // Re-enrolment: the new key replaces the old identity. Declarations, history and
      // deliveries are kept; what the old identity reported no longer counts (it may have been
      // stolen): the recovery copy is cleared and the applied revision and outcome start again.
      // Its reports stay stored under their generation (apply_report/apply_reports skip them).
      MESH_TRY(st, db.prepare("UPDATE nodes SET public_key = ?2, enrolled_at_ms = ?3, "
                                        "generation = generation + 1, applied_revision = 0, "
                                        "last_outcome = '', last_report_revision = 0, "
                                        "owned_revision = 0 WHERE name = ?1"));
      st.bind(1, node).bind(2, public_key).bind(3, now_ms);
      MESH_TRY(st.run());
      MESH_TRY(del, db.prepare("DELETE FROM owned WHERE node = ?1"));
      del.bind(1, node);
      MESH_TRY(del.run());
    } else {
      MESH_TRY(st, db.prepare("INSERT INTO nodes (name, enrolled_at_ms, generation, "
                                        "public_key) VALUES (?1, ?2, 1, ?3)"));
      st.bind(1, node).bind(2, now_ms).bind(3, public_key);
      MESH_TRY(st.run());
    }
    MESH_TRY(record, load_node(db, node));
    if (!record) return sdk::fail(ErrorCode::Internal, "enrolled node vanished: " + node);
    MESH_TRY(tx.commit());
    return std::move(*record);
  });
}

Result<void> SqliteStore::set_briefing(const std::string& node, const std::string& briefing,
                                       bool eligible) noexcept {
  return with_db("set_briefing", [&](Connection& db) -> Result<void> {
    if (briefing.size() > kMaxBriefingBytes)
      return sdk::fail(over_bound("briefing", node, "briefing", briefing.size(), kMaxBriefingBytes, "bytes"));
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    {
      MESH_TRY(st, db.prepare("UPDATE nodes SET eligible = ?2 WHERE name = ?1 AND removed_at_ms IS NULL"));
      st.bind(1, node).bind(2, std::int64_t{eligible});
      MESH_TRY(st.run());
      if (db.changes() == 0) return sdk::fail(not_enrolled(node));
    }
    {
      MESH_TRY(st, db.prepare("INSERT INTO node_briefings (node, briefing) "
                                        "VALUES (?1, ?2) ON CONFLICT (node) DO UPDATE SET "
                                        "briefing = excluded.briefing"));
      st.bind(1, node).bind(2, briefing);
      MESH_TRY(st.run());
    }
    return tx.commit();
  });
}

Result<void> SqliteStore::set_provider_schemas(const std::string& node, const std::string& schemas) noexcept {
  return with_db("set_provider_schemas", [&](Connection& db) -> Result<void> {
    if (schemas.size() > kMaxSchemasBytes)
      return sdk::fail(over_bound("provider schemas", node, "schemas", schemas.size(), kMaxSchemasBytes, "bytes"));
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    {
      MESH_TRY(st, db.prepare("SELECT count(*) FROM nodes WHERE name = ?1 AND removed_at_ms IS NULL"));
      st.bind(1, node);
      MESH_TRY(row, st.step());
      if (!row || st.column_int(0) == 0) return sdk::fail(not_enrolled(node));
    }
    if (schemas.empty()) {
      MESH_TRY(st, db.prepare("DELETE FROM node_schemas WHERE node = ?1"));
      st.bind(1, node);
      MESH_TRY(st.run());
    } else {
      MESH_TRY(st, db.prepare("INSERT INTO node_schemas (node, schemas) VALUES (?1, ?2) "
                              "ON CONFLICT (node) DO UPDATE SET schemas = excluded.schemas"));
      st.bind(1, node).bind(2, schemas);
      MESH_TRY(st.run());
    }
    return tx.commit();
  });
}

Result<std::optional<std::string>> SqliteStore::provider_schemas(const std::string& node) noexcept {
  return with_db("provider_schemas", [&](Connection& db) -> Result<std::optional<std::string>> {
    MESH_TRY(st, db.prepare("SELECT schemas FROM node_schemas WHERE node = ?1"));
    st.bind(1, node);
    MESH_TRY(row, st.step());
    if (!row) return std::optional<std::string>{};
    return std::optional<std::string>{st.column_text(0)};
  });
}

// --- declarations and deliveries -----------------------------------------------------------------

Result<DeliveryRecord> SqliteStore::declare(const std::vector<sdk::DeclarationWrite>& writes,
                                            std::int64_t now_ms, std::uint32_t retain) noexcept {
  return declare_in("declare", writes, {}, now_ms, retain, nullptr, false);
}

Result<DeliveryRecord> SqliteStore::declare_answered(const std::vector<sdk::DeclarationWrite>& writes,
                                                     std::int64_t now_ms, std::uint32_t retain,
                                                     const sdk::RequestAnswer& answer) noexcept {
  return declare_in("declare_answered", writes, {}, now_ms, retain, &answer, false);
}

Result<DeliveryRecord> SqliteStore::declare_with(const std::vector<sdk::DeclarationWrite>& writes,
                                                 const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                                 std::uint32_t retain,
                                                 const std::optional<sdk::RequestAnswer>& answer) noexcept {
  return declare_in("declare_with", writes, records, now_ms, retain, answer ? &*answer : nullptr, true);
}

Result<DeliveryRecord> SqliteStore::declare_in(const char* what, const std::vector<sdk::DeclarationWrite>& writes,
                                               const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                               std::uint32_t retain, const sdk::RequestAnswer* answer,
                                               bool allow_empty) noexcept {
  return with_db(what, [&](Connection& db) -> Result<DeliveryRecord> {
    if (writes.empty() && !allow_empty)
      return sdk::fail(ErrorCode::InvalidArgument, "a declaration names no node");
    {
      std::set<std::string_view> seen;
      for (const auto& w : writes) {
        if (!w.render)
          return sdk::fail(ErrorCode::InvalidArgument, "the declaration write for node " +
                                                           in_quotes(w.node) + " has no render");
        if (!seen.insert(w.node).second)
          return sdk::fail(ErrorCode::InvalidArgument,
                           "node " + in_quotes(w.node) + " appears twice in one declaration");
        if (w.composition.size() > kMaxCompositionBytes)
          return sdk::fail(over_bound("the declaration", w.node, "composition", w.composition.size(),
                                      kMaxCompositionBytes, "bytes"));
      }
    }
    MESH_TRY(check_record_writes(records, true));  // records.cpp
    if (answer && !answer->render) return sdk::fail(ErrorCode::InvalidArgument, "the request answer has no render");
    MESH_SQLITE_BEGIN(tx, Kind::Write);

    // Every check first, so that an unknown node or a stale revision or version fails before
    // anything is rendered or written.
    std::vector<std::uint64_t> last(writes.size());
    for (std::size_t i = 0; i < writes.size(); ++i) {
      MESH_TRY(st, db.prepare("SELECT last_revision, retired_revision FROM nodes "
                              "WHERE name = ?1 AND removed_at_ms IS NULL"));
      st.bind(1, writes[i].node);
      MESH_TRY(row, st.step());
      if (!row)
        return sdk::fail(ErrorCode::NotFound, "node " + in_quotes(writes[i].node) +
                                                  " is not enrolled; nothing was declared");
      last[i] = st.column_uint(0);
      if (!fits(last[i] + 1))
        return sdk::fail(ErrorCode::Failed,
                         "node " + in_quotes(writes[i].node) + " has run out of revision numbers");
      if (writes[i].expected_revision) {
        // The latest revision as latest_revision() reports it: revisions up to retired_revision
        // belong to a removed identity and are not current (0: none). Read from the revisions
        // themselves: the counter may stand above the newest (raised by a heartbeat, touch()).
        const std::uint64_t retired = st.column_uint(1);
        MESH_TRY(newest, db.prepare("SELECT max(revision) FROM revisions WHERE node = ?1 AND revision > ?2"));
        newest.bind(1, writes[i].node).bind(2, i64(retired));
        MESH_TRY(has, newest.step());
        const std::uint64_t latest = has && !newest.column_is_null(0) ? newest.column_uint(0) : 0;
        if (*writes[i].expected_revision != latest)
          return sdk::fail(ErrorCode::FailedPrecondition,
                           "node " + in_quotes(writes[i].node) + ": expected its latest revision to be " +
                               std::to_string(*writes[i].expected_revision) + ", but it is " +
                               std::to_string(latest) + " (written meanwhile); nothing was declared");
      }
    }
    MESH_TRY(versions, check_record_versions(db, records));  // records.cpp

    DeliveryRecord delivery;
    if (!writes.empty()) {
      delivery.created_at_ms = now_ms;
      MESH_TRY(st, db.prepare("INSERT INTO deliveries (created_at_ms) VALUES (?1)"));
      st.bind(1, now_ms);
      MESH_TRY(st.run());
      delivery.id = static_cast<std::uint64_t>(db.last_insert_rowid());
    }

    delivery.targets.reserve(writes.size());
    for (std::size_t i = 0; i < writes.size(); ++i) {
      const auto& node = writes[i].node;
      const std::uint64_t revision = last[i] + 1;
      const std::string body = writes[i].render(revision);
      {
        MESH_TRY(st, db.prepare("INSERT INTO revisions (node, revision, "
                                          "created_at_ms, delivery, body, digest, composition) "
                                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
        st.bind(1, node)
            .bind(2, i64(revision))
            .bind(3, now_ms)
            .bind(4, i64(delivery.id))
            .bind(5, body)
            .bind(6, sha256_hex(body))
            .bind(7, writes[i].composition);
        MESH_TRY(st.run());
      }
      {
        MESH_TRY(st, db.prepare("UPDATE nodes SET last_revision = ?2 WHERE name = ?1"));
        st.bind(1, node).bind(2, i64(revision));
        MESH_TRY(st.run());
      }
      {
        MESH_TRY(st, db.prepare("INSERT INTO delivery_targets (delivery, node, "
                                          "revision) VALUES (?1, ?2, ?3)"));
        st.bind(1, i64(delivery.id)).bind(2, node).bind(3, i64(revision));
        MESH_TRY(st.run());
      }
      if (retain > 0 && revision > retain) {
        // The newest `retain` revisions are kept (the one just written always): everything at or
        // below the (retain+1)-th newest goes. Counted, not computed as revision - retain: the
        // counter may have been raised above the newest revision (touch(), decision record 191),
        // and a gap in the numbers must not take the revisions before it with it.
        MESH_TRY(cut, db.prepare("SELECT revision FROM revisions WHERE node = ?1 "
                                 "ORDER BY revision DESC LIMIT 1 OFFSET ?2"));
        cut.bind(1, node).bind(2, static_cast<std::int64_t>(retain));
        MESH_TRY(beyond, cut.step());
        if (beyond) {
          const std::int64_t cutoff = cut.column_int(0);
          MESH_TRY(st, db.prepare("DELETE FROM revisions "
                                  "WHERE node = ?1 AND revision <= ?2"));
          st.bind(1, node).bind(2, cutoff);
          MESH_TRY(st.run());
          // Apply reports by the same rule (their owned lists go with them, ON DELETE CASCADE):
          // without it one node's reports grow the file without bound.
          MESH_TRY(reports, db.prepare("DELETE FROM apply_reports "
                                       "WHERE node = ?1 AND revision <= ?2"));
          reports.bind(1, node).bind(2, cutoff);
          MESH_TRY(reports.run());
        }
      }
      delivery.targets.push_back(DeliveryTarget{node, revision});
    }
    std::sort(delivery.targets.begin(), delivery.targets.end(),
              [](const DeliveryTarget& a, const DeliveryTarget& b) { return a.node < b.node; });
    if (!records.empty()) MESH_TRY(write_records(db, records, versions, &delivery, now_ms));  // records.cpp
    if (answer) MESH_TRY(store_answer(db, *answer, delivery));  // requests.cpp
    MESH_TRY(tx.commit());
    return delivery;
  });
}

Result<std::optional<RevisionRecord>> SqliteStore::latest_revision(
    const std::string& node) noexcept {
  return with_db("latest_revision", [&](Connection& db) -> Result<std::optional<RevisionRecord>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    // Revisions up to retired_revision belong to a removed identity: history, never current.
    MESH_TRY(st, db.prepare(MESH_SQLITE_REVISION_SELECT
                                      " WHERE node = ?1 AND revision > (SELECT retired_revision FROM nodes "
                                      "WHERE name = ?1) ORDER BY revision DESC LIMIT 1"));
    st.bind(1, node);
    MESH_TRY(row, st.step());
    if (!row) return std::optional<RevisionRecord>();
    return std::optional<RevisionRecord>(read_revision(st));
  });
}

Result<RevisionRecord> SqliteStore::revision(const std::string& node,
                                             std::uint64_t revision) noexcept {
  return with_db("revision", [&](Connection& db) -> Result<RevisionRecord> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    const std::string missing = "revision " + std::to_string(revision) + " of node " +
                                in_quotes(node) + " not found (never declared, or pruned)";
    if (!fits(revision)) return sdk::fail(ErrorCode::NotFound, missing);
    MESH_TRY(
        st, db.prepare(MESH_SQLITE_REVISION_SELECT " WHERE node = ?1 AND revision = ?2"));
    st.bind(1, node).bind(2, i64(revision));
    MESH_TRY(row, st.step());
    if (!row) return sdk::fail(ErrorCode::NotFound, missing);
    return read_revision(st);
  });
}

Result<std::vector<RevisionRecord>> SqliteStore::history(const std::string& node,
                                                         std::uint32_t limit) noexcept {
  return with_db("history", [&](Connection& db) -> Result<std::vector<RevisionRecord>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    MESH_TRY(st, db.prepare(MESH_SQLITE_REVISION_SELECT
                                      " WHERE node = ?1 ORDER BY revision DESC LIMIT ?2"));
    st.bind(1, node).bind(2, std::int64_t{limit});
    std::vector<RevisionRecord> out;
    for (;;) {
      MESH_TRY(row, st.step());
      if (!row) break;
      out.push_back(read_revision(st));
    }
    return out;
  });
}

Result<DeliveryRecord> SqliteStore::delivery(std::uint64_t id) noexcept {
  return with_db("delivery", [&](Connection& db) -> Result<DeliveryRecord> {
    const std::string missing = "delivery " + std::to_string(id) + " not found";
    if (!fits(id)) return sdk::fail(ErrorCode::NotFound, missing);
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    DeliveryRecord d;
    {
      MESH_TRY(st, db.prepare("SELECT created_at_ms FROM deliveries WHERE id = ?1"));
      st.bind(1, i64(id));
      MESH_TRY(row, st.step());
      if (!row) return sdk::fail(ErrorCode::NotFound, missing);
      d.id = id;
      d.created_at_ms = st.column_int(0);
    }
    MESH_TRY(targets, load_targets(db, i64(id)));
    d.targets = std::move(targets);
    return d;
  });
}

Result<std::optional<DeliveryRecord>> SqliteStore::latest_delivery() noexcept {
  return with_db("latest_delivery", [&](Connection& db) -> Result<std::optional<DeliveryRecord>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    DeliveryRecord d;
    {
      MESH_TRY(st, db.prepare("SELECT id, created_at_ms FROM deliveries "
                                        "ORDER BY id DESC LIMIT 1"));
      MESH_TRY(row, st.step());
      if (!row) return std::optional<DeliveryRecord>();
      d.id = st.column_uint(0);
      d.created_at_ms = st.column_int(1);
    }
    MESH_TRY(targets, load_targets(db, i64(d.id)));
    d.targets = std::move(targets);
    return std::optional<DeliveryRecord>(std::move(d));
  });
}

// --- reports and contact -------------------------------------------------------------------------

Result<bool> SqliteStore::record_apply(const ApplyReport& report) noexcept {
  return with_db("record_apply", [&](Connection& db) -> Result<bool> {
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(recorded, record_apply_rows(db, report));
    MESH_TRY(tx.commit());
    return recorded;
  });
}

// The rows of one apply report, inside the caller's write transaction (record_apply, and
// record_reports in report_batch.cpp); an error leaves the caller to roll back.
Result<bool> SqliteStore::record_apply_rows(Connection& db, const ApplyReport& report) {
  const std::string which = "apply report for revision " + std::to_string(report.revision) +
                            " of node " + in_quotes(report.node);
  if (report.revision == 0 || !fits(report.revision))
    return sdk::fail(ErrorCode::InvalidArgument, which + ": no such revision", "revision");
  const bool applied = report.outcome == "applied";
  if (!applied && report.outcome != "failed" && report.outcome != "refused" &&
      report.outcome != "superseded")
    return sdk::fail(ErrorCode::InvalidArgument,
                     which + ": outcome " + in_quotes(report.outcome) +
                         " is not one of applied, failed, refused, superseded",
                     "outcome");
  {
    const std::string what = "apply report for revision " + std::to_string(report.revision);
    if (report.owned.size() > kMaxOwned)
      return sdk::fail(over_bound(what, report.node, "owned", report.owned.size(), kMaxOwned, "resources"));
    std::size_t owned_bytes = 0;
    for (const auto& o : report.owned) {
      if (o.size() > kMaxResourceBytes)
        return sdk::fail(over_bound(what, report.node, "owned", o.size(), kMaxResourceBytes, "bytes in one resource id"));
      owned_bytes += o.size();
    }
    if (owned_bytes > kMaxOwnedBytes)
      return sdk::fail(over_bound(what, report.node, "owned", owned_bytes, kMaxOwnedBytes, "bytes"));
    if (report.resource.size() > kMaxResourceBytes)
      return sdk::fail(over_bound(what, report.node, "resource", report.resource.size(), kMaxResourceBytes, "bytes"));
    if (report.code.size() > kMaxCodeBytes)
      return sdk::fail(over_bound(what, report.node, "code", report.code.size(), kMaxCodeBytes, "bytes"));
    // A long reason (a tool's whole output) is cut, never refused: refusing it would throw away
    // a genuine failure, and the host would drop the report as invalid.
  }
  if (!report.owned_digests.empty() && report.owned_digests.size() != report.owned.size())
    return sdk::fail(ErrorCode::InvalidArgument,
                     which + ": owned_digests has " + std::to_string(report.owned_digests.size()) +
                         " entries for " + std::to_string(report.owned.size()) + " owned",
                     "owned_digests");
  std::uint64_t applied_before = 0;
  std::uint64_t generation = 0;
  std::uint64_t declared = 0;
  {
    MESH_TRY(st, db.prepare("SELECT applied_revision, generation, last_revision, retired_revision "
                                      "FROM nodes WHERE name = ?1 AND removed_at_ms IS NULL"));
    st.bind(1, report.node);
    MESH_TRY(row, st.step());
    if (!row) return sdk::fail(ErrorCode::NotFound, which + ": node is not enrolled");
    applied_before = st.column_uint(0);
    generation = st.column_uint(1);
    declared = st.column_uint(2);
    // Revisions up to retired_revision were declared to the node before it was removed: a
    // report of one (an old outbox re-sent after the name was enrolled again) is not an answer
    // of this node's, which has no declaration until one is written for it.
    if (report.revision <= st.column_uint(3))
      return sdk::fail(ErrorCode::InvalidArgument,
                       which + ": that revision was declared before the node was removed (revisions up to " +
                           std::to_string(st.column_uint(3)) + " are history)",
                       "revision");
  }
  if (report.generation != 0 && report.generation != generation)
    return sdk::fail(ErrorCode::PermissionDenied,
                     which + ": signed by identity generation " +
                         std::to_string(report.generation) + ", which was revoked (current: " +
                         std::to_string(generation) + ")");
  {
    // Older than every retained revision: pruned by retention with its revision (declare), so
    // recording it now would only grow the file again.
    MESH_TRY(st, db.prepare("SELECT min(revision) FROM revisions WHERE node = ?1"));
    st.bind(1, report.node);
    MESH_TRY(row, st.step());
    if (row && !st.column_is_null(0) && report.revision < st.column_uint(0)) return false;
  }
  {
    // Only a revision the control plane declared to this node and still holds: a report for
    // anything else was not an answer to anything it sent (a stolen key's invention).
    MESH_TRY(st, db.prepare("SELECT 1 FROM revisions WHERE node = ?1 AND revision = ?2"));
    st.bind(1, report.node).bind(2, i64(report.revision));
    MESH_TRY(row, st.step());
    if (!row)
      return sdk::fail(ErrorCode::InvalidArgument,
                       which + ": " +
                           (report.revision > declared
                                ? "that revision was never declared to the node (its highest is " +
                                      std::to_string(declared) + ")"
                                : std::string("that revision is no longer in the node's history")),
                       "revision");
  }
  {
    // The outcome state machine (docs/protocol.md, "Delivery outcomes"): per (node, revision)
    // a recorded report gives way only as gives_way() says, and always to the current identity
    // when it was recorded under a revoked one.
    MESH_TRY(st, db.prepare("SELECT outcome, generation FROM apply_reports "
                                      "WHERE node = ?1 AND revision = ?2"));
    st.bind(1, report.node).bind(2, i64(report.revision));
    MESH_TRY(row, st.step());
    if (row) {
      const bool stale = st.column_uint(1) != generation;
      if (!stale && !gives_way(st.column_text(0), report.outcome)) return false;
      MESH_TRY(del, db.prepare("DELETE FROM apply_reports WHERE node = ?1 AND revision = ?2"));
      del.bind(1, report.node).bind(2, i64(report.revision));
      MESH_TRY(del.run());  // its owned rows go with it (ON DELETE CASCADE)
    }
  }
  {
    MESH_TRY(st, db.prepare("INSERT INTO apply_reports (node, revision, at_ms, "
                                      "outcome, resource, reason, generation, received_at_ms, code) "
                                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
    st.bind(1, report.node)
        .bind(2, i64(report.revision))
        .bind(3, report.at_ms)
        .bind(4, report.outcome)
        .bind(5, report.resource)
        .bind(6, bounded_reason(report.reason))
        .bind(7, i64(generation))
        .bind(8, report.received_at_ms)
        .bind(9, report.code);
    MESH_TRY(st.run());
  }
  const auto digest_of = [&](std::size_t i) {
    return report.owned_digests.empty() ? std::string() : report.owned_digests[i];
  };
  {
    MESH_TRY(st, db.prepare("INSERT INTO apply_report_owned (node, revision, "
                                      "position, resource, digest) VALUES (?1, ?2, ?3, ?4, ?5)"));
    for (std::size_t i = 0; i < report.owned.size(); ++i) {
      st.reset();
      st.bind(1, report.node)
          .bind(2, i64(report.revision))
          .bind(3, static_cast<std::int64_t>(i))
          .bind(4, report.owned[i])
          .bind(5, digest_of(i));
      MESH_TRY(st.run());
    }
  }
  {
    // last_outcome follows the report with the highest revision, so a late re-sent report
    // for an older revision cannot overwrite a newer outcome. Last contact is the receipt time.
    MESH_TRY(
        st, db.prepare("UPDATE nodes SET "
                       "applied_revision = CASE WHEN ?3 THEN max(applied_revision, ?2) "
                       "ELSE applied_revision END, "
                       "last_outcome = CASE WHEN ?2 >= last_report_revision THEN ?4 "
                       "ELSE last_outcome END, "
                       "last_report_revision = max(last_report_revision, ?2), "
                       "last_contact_ms = CASE WHEN ?5 > 0 AND (last_contact_ms IS NULL OR "
                       "last_contact_ms < ?5) THEN ?5 ELSE last_contact_ms END "
                       "WHERE name = ?1"));
    st.bind(1, report.node)
        .bind(2, i64(report.revision))
        .bind(3, std::int64_t{applied})
        .bind(4, report.outcome)
        .bind(5, report.received_at_ms);
    MESH_TRY(st.run());
  }
  if (applied && report.revision >= applied_before) {
    // The node's newest applied revision: its owned list becomes the recovery copy.
    {
      MESH_TRY(st, db.prepare("DELETE FROM owned WHERE node = ?1"));
      st.bind(1, report.node);
      MESH_TRY(st.run());
    }
    {
      MESH_TRY(st, db.prepare("INSERT INTO owned (node, resource, digest) "
                                        "VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING"));
      for (std::size_t i = 0; i < report.owned.size(); ++i) {
        st.reset();
        st.bind(1, report.node).bind(2, report.owned[i]).bind(3, digest_of(i));
        MESH_TRY(st.run());
      }
    }
    {
      MESH_TRY(st, db.prepare("UPDATE nodes SET owned_revision = ?2 WHERE name = ?1"));
      st.bind(1, report.node).bind(2, i64(report.revision));
      MESH_TRY(st.run());
    }
  }
  return true;
}

Result<std::optional<ApplyReport>> SqliteStore::apply_report(const std::string& node,
                                                             std::uint64_t revision) noexcept {
  return with_db("apply_report", [&](Connection& db) -> Result<std::optional<ApplyReport>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    if (!fits(revision)) return std::optional<ApplyReport>();
    ApplyReport report;
    {
      MESH_TRY(st, db.prepare("SELECT " MESH_SQLITE_REPORT_COLUMNS
                                        " FROM apply_reports AS a JOIN nodes AS n ON n.name = "
                                        "a.node WHERE a.node = ?1 AND a.revision = ?2 AND "
                                        "a.generation = n.generation"));
      st.bind(1, node).bind(2, i64(revision));
      MESH_TRY(row, st.step());
      if (!row) return std::optional<ApplyReport>();
      report = read_apply_report(st, node);
    }
    MESH_TRY(load_report_owned(db, report));
    return std::optional<ApplyReport>(std::move(report));
  });
}

Result<std::vector<ApplyReport>> SqliteStore::apply_reports(const std::string& node,
                                                            std::uint32_t limit) noexcept {
  return with_db("apply_reports", [&](Connection& db) -> Result<std::vector<ApplyReport>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    std::vector<ApplyReport> out;
    {
      MESH_TRY(st, db.prepare("SELECT " MESH_SQLITE_REPORT_COLUMNS
                                        " FROM apply_reports AS a JOIN nodes AS n ON n.name = "
                                        "a.node WHERE a.node = ?1 AND a.generation = n.generation "
                                        "ORDER BY a.revision DESC LIMIT ?2"));
      st.bind(1, node).bind(2, std::int64_t{limit});
      for (;;) {
        MESH_TRY(row, st.step());
        if (!row) break;
        out.push_back(read_apply_report(st, node));
      }
    }
    for (auto& report : out) MESH_TRY(load_report_owned(db, report));
    return out;
  });
}

Result<std::optional<sdk::RevisionRef>> SqliteStore::next_revision(const std::string& node,
                                                                   std::uint64_t revision) noexcept {
  return with_db("next_revision", [&](Connection& db) -> Result<std::optional<sdk::RevisionRef>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    if (!fits(revision)) return std::optional<sdk::RevisionRef>();
    // delivery_targets are never pruned, so this finds the successor even when retention has
    // deleted its body.
    MESH_TRY(st, db.prepare("SELECT revision, delivery FROM delivery_targets "
                                      "WHERE node = ?1 AND revision > ?2 "
                                      "ORDER BY revision LIMIT 1"));
    st.bind(1, node).bind(2, i64(revision));
    MESH_TRY(row, st.step());
    if (!row) return std::optional<sdk::RevisionRef>();
    return std::optional<sdk::RevisionRef>(sdk::RevisionRef{st.column_uint(0), st.column_uint(1)});
  });
}

Result<bool> SqliteStore::record_drift(const DriftReport& report) noexcept {
  return with_db("record_drift", [&](Connection& db) -> Result<bool> {
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(recorded, record_drift_rows(db, report));
    MESH_TRY(tx.commit());
    return recorded;
  });
}

// The rows of one drift report, inside the caller's write transaction (record_drift, and
// record_reports in report_batch.cpp); an error leaves the caller to roll back.
Result<bool> SqliteStore::record_drift_rows(Connection& db, const DriftReport& report) {
  const std::string which =
      "drift report " + in_quotes(report.scan_id) + " of node " + in_quotes(report.node);
  if (report.scan_id.empty())
    return sdk::fail(ErrorCode::InvalidArgument, which + ": the scan id is empty", "scan_id");
  if (!fits(report.revision))
    return sdk::fail(ErrorCode::InvalidArgument, which + ": no such revision", "revision");
  if (report.items.size() > kMaxDriftItems)
    return sdk::fail(over_bound("drift report", report.node, "resources", report.items.size(), kMaxDriftItems, "items"));
  for (const auto& item : report.items) {
    if (item.resource.size() > kMaxResourceBytes)
      return sdk::fail(over_bound("drift report", report.node, "resources[].resource", item.resource.size(),
                                  kMaxResourceBytes, "bytes"));
    if (item.found.size() > kMaxDriftTextBytes || item.action.size() > kMaxDriftTextBytes)
      return sdk::fail(over_bound("drift report", report.node, "resources[].found/action",
                                  std::max(item.found.size(), item.action.size()), kMaxDriftTextBytes, "bytes"));
  }
  MESH_TRY(exists, node_enrolled(db, report.node));
  if (!exists) return sdk::fail(ErrorCode::NotFound, which + ": node is not enrolled");
  std::int64_t id = 0;
  {
    MESH_TRY(st, db.prepare("INSERT INTO drift_reports (node, scan_id, revision, "
                                      "at_ms, item_count) VALUES (?1, ?2, ?3, ?4, ?5) "
                                      "ON CONFLICT (node, scan_id) DO NOTHING"));
    st.bind(1, report.node)
        .bind(2, report.scan_id)
        .bind(3, i64(report.revision))
        .bind(4, report.at_ms)
        .bind(5, static_cast<std::int64_t>(report.items.size()));
    MESH_TRY(st.run());
    if (db.changes() == 0) return false;  // already recorded
    id = db.last_insert_rowid();
  }
  {
    MESH_TRY(st, db.prepare("INSERT INTO drift_items (report, position, resource, "
                                      "found, action) VALUES (?1, ?2, ?3, ?4, ?5)"));
    for (std::size_t i = 0; i < report.items.size(); ++i) {
      const auto& item = report.items[i];
      st.reset();
      st.bind(1, id)
          .bind(2, static_cast<std::int64_t>(i))
          .bind(3, item.resource)
          .bind(4, item.found)
          .bind(5, item.action);
      MESH_TRY(st.run());
    }
  }
  {
    // Retention: the newest `drift_reports_kept` of this node, plus the newest that found drift
    // (last_drift). A late, re-sent old report is stored and pruned in the same transaction.
    // Items go with their report (ON DELETE CASCADE). Bounded by the index on (node, at_ms, id).
    MESH_TRY(st, db.prepare(
                               "DELETE FROM drift_reports WHERE node = ?1 "
                               "AND id NOT IN (SELECT id FROM drift_reports WHERE node = ?1 "
                               "ORDER BY at_ms DESC, id DESC LIMIT ?2) "
                               "AND id NOT IN (SELECT id FROM drift_reports WHERE node = ?1 "
                               "AND item_count > 0 ORDER BY at_ms DESC, id DESC LIMIT 1)"));
    st.bind(1, report.node).bind(2, drift_reports_kept_);
    MESH_TRY(st.run());
  }
  if (report.received_at_ms > 0) {
    MESH_TRY(st, db.prepare(kAdvanceContact));
    st.bind(1, report.node).bind(2, report.received_at_ms);
    MESH_TRY(st.run());
  }
  return true;
}

Result<std::optional<DriftReport>> SqliteStore::last_drift(const std::string& node,
                                                           bool with_items_only) noexcept {
  return with_db("last_drift", [&](Connection& db) -> Result<std::optional<DriftReport>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    DriftReport report;
    std::int64_t id = 0;
    {
      // The `item_count > 0` form uses the partial index of reports with items, so finding the
      // last real drift does not scan every empty scan since.
      MESH_TRY(
          st, db.prepare(with_items_only ? "SELECT id, scan_id, revision, at_ms FROM drift_reports "
                                           "WHERE node = ?1 AND item_count > 0 "
                                           "ORDER BY at_ms DESC, id DESC LIMIT 1"
                                         : "SELECT id, scan_id, revision, at_ms FROM drift_reports "
                                           "WHERE node = ?1 ORDER BY at_ms DESC, id DESC LIMIT 1"));
      st.bind(1, node);
      MESH_TRY(row, st.step());
      if (!row) return std::optional<DriftReport>();
      id = st.column_int(0);
      report.node = node;
      report.scan_id = st.column_text(1);
      report.revision = st.column_uint(2);
      report.at_ms = st.column_int(3);
    }
    MESH_TRY(items, load_drift_items(db, id));
    report.items = std::move(items);
    return std::optional<DriftReport>(std::move(report));
  });
}

Result<void> SqliteStore::touch(const std::vector<sdk::ContactUpdate>& updates) noexcept {
  return with_db("touch", [&](Connection& db) -> Result<void> {
    if (updates.empty()) return {};
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    {
      // One statement per heartbeat; an unknown node matches no row and is skipped. The
      // CASEs all read the row's old values. ContactUpdate::applied_revision does not move
      // applied_revision (driven by apply reports alone); it raises the node's revision counter
      // when it is above it — the host applied a revision this store does not know of (a store
      // restored from a backup, or a state directory kept from an identity the store lost) and
      // refuses every lower one, so the next revision is numbered above it (decision record 191).
      // Only for a heartbeat verified with the node's current identity (?5), only upward and at
      // most kMaxRaisedRevision: what a stolen heartbeat key can do is make its own node's numbers
      // skip ahead.
      MESH_TRY(st, db.prepare("UPDATE nodes SET "
                                        "last_revision = CASE WHEN ?5 <> 0 AND generation = ?5 AND "
                                        "?6 > last_revision AND ?6 <= ?7 THEN ?6 ELSE last_revision END, "
                                        "last_contact_ms = CASE WHEN last_contact_ms IS NULL OR "
                                        "last_contact_ms < ?2 THEN ?2 ELSE last_contact_ms END, "
                                        "host_version = CASE WHEN heartbeat_at_ms IS NULL OR "
                                        "heartbeat_at_ms <= ?2 THEN ?3 ELSE host_version END, "
                                        "host_state = CASE WHEN heartbeat_at_ms IS NULL OR "
                                        "heartbeat_at_ms <= ?2 THEN ?4 ELSE host_state END, "
                                        "heartbeat_at_ms = CASE WHEN heartbeat_at_ms IS NULL OR "
                                        "heartbeat_at_ms < ?2 THEN ?2 ELSE heartbeat_at_ms END "
                                        "WHERE name = ?1 AND removed_at_ms IS NULL"));
      for (const auto& u : updates) {
        st.reset();
        st.bind(1, u.node).bind(2, u.at_ms).bind(3, u.host_version).bind(4, u.host_state)
            .bind(5, i64(u.generation)).bind(6, i64(std::min(u.applied_revision, kMaxRaisedRevision + 1)))
            .bind(7, i64(kMaxRaisedRevision));
        MESH_TRY(st.run());
      }
    }
    // The newest heartbeat timestamp taken from the node's current identity (only forward).
    MESH_TRY(record_heartbeat_times(db, updates));  // requests.cpp
    return tx.commit();
  });
}

Result<std::vector<std::string>> SqliteStore::owned(const std::string& node) noexcept {
  return with_db("owned", [&](Connection& db) -> Result<std::vector<std::string>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    MESH_TRY(st,
                       db.prepare("SELECT resource FROM owned WHERE node = ?1 ORDER BY resource"));
    st.bind(1, node);
    std::vector<std::string> out;
    for (;;) {
      MESH_TRY(row, st.step());
      if (!row) break;
      out.push_back(st.column_text(0));
    }
    return out;
  });
}

Result<std::vector<sdk::OwnedRecord>> SqliteStore::recovery_copy(const std::string& node) noexcept {
  return with_db("recovery_copy", [&](Connection& db) -> Result<std::vector<sdk::OwnedRecord>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    MESH_TRY(require_node(db, node));
    MESH_TRY(st, db.prepare("SELECT resource, digest FROM owned WHERE node = ?1 "
                                      "ORDER BY resource"));
    st.bind(1, node);
    std::vector<sdk::OwnedRecord> out;
    for (;;) {
      MESH_TRY(row, st.step());
      if (!row) break;
      out.push_back(sdk::OwnedRecord{st.column_text(0), st.column_text(1)});
    }
    return out;
  });
}

// --- signed requests (requests.cpp) ------------------------------------------------------------

Result<std::optional<sdk::RequestRecord>> SqliteStore::remember_request(const sdk::RequestRecord& request,
                                                                        std::int64_t now_ms) noexcept {
  return with_db("remember_request", [&](Connection& db) -> Result<std::optional<sdk::RequestRecord>> {
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(kept, remember_request_in(db, request, now_ms));
    MESH_TRY(tx.commit());
    return kept;
  });
}

Result<void> SqliteStore::answer_request(const std::string& signer, const std::string& nonce,
                                         const std::string& answer) noexcept {
  return with_db("answer_request", [&](Connection& db) -> Result<void> {
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(set_request_answer(db, signer, nonce, answer));
    return tx.commit();
  });
}

// --- for stores built on this one ----------------------------------------------------------------

Result<void> SqliteStore::with_connection(const std::function<Result<void>(Connection&)>& f) noexcept {
  return with_db("with_connection", [&](Connection& db) -> Result<void> { return f(db); });
}

// --- records and sequences (records.cpp) ------------------------------------------------------------

Result<std::optional<sdk::StoredRecord>> SqliteStore::record(const std::string& ns, const std::string& key) noexcept {
  return with_db("record", [&](Connection& db) -> Result<std::optional<sdk::StoredRecord>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    return read_record(db, ns, key);
  });
}

Result<std::vector<sdk::StoredRecord>> SqliteStore::records(const std::string& ns,
                                                            const std::string& key_prefix) noexcept {
  return with_db("records", [&](Connection& db) -> Result<std::vector<sdk::StoredRecord>> {
    MESH_SQLITE_BEGIN(tx, Kind::Read);
    return read_records(db, ns, key_prefix);
  });
}

Result<std::vector<sdk::StoredRecord>> SqliteStore::put_records(const std::vector<sdk::RecordWrite>& writes,
                                                                std::int64_t now_ms) noexcept {
  return with_db("put_records", [&](Connection& db) -> Result<std::vector<sdk::StoredRecord>> {
    if (writes.empty()) return sdk::fail(ErrorCode::InvalidArgument, "put_records: no record to write");
    MESH_TRY(check_record_writes(writes, false));
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(versions, check_record_versions(db, writes));
    MESH_TRY(out, write_records(db, writes, versions, nullptr, now_ms));
    MESH_TRY(tx.commit());
    return out;
  });
}

Result<std::uint64_t> SqliteStore::next_sequence(const std::string& name) noexcept {
  return with_db("next_sequence", [&](Connection& db) -> Result<std::uint64_t> {
    MESH_SQLITE_BEGIN(tx, Kind::Write);
    MESH_TRY(v, next_sequence_in(db, name));
    MESH_TRY(tx.commit());
    return v;
  });
}

}  // namespace mesh::stores::sqlite
