#include "connection.h"

#include "mesh/support/errno_text.h"

#include <sqlite3.h>

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>

namespace mesh::stores::sqlite {

using sdk::ErrorCode;

namespace {

ErrorCode code_for(int rc, int system_errno) noexcept {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return ErrorCode::Transient;
    // The disk is full or failing: nothing the caller sent is wrong, and the same write may
    // succeed once space returns. Retryable, so that a report is kept and sent again rather
    // than dropped (store.h: "store errors are never the caller's fault").
    case SQLITE_FULL:
    case SQLITE_IOERR:
      return ErrorCode::Unavailable;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return ErrorCode::PermissionDenied;
    case SQLITE_CANTOPEN:
      return system_errno == EACCES || system_errno == EPERM || system_errno == EROFS
                 ? ErrorCode::PermissionDenied
                 : ErrorCode::Unavailable;
    case SQLITE_MISUSE:
    case SQLITE_RANGE:
      return ErrorCode::Internal;
    default:  // CORRUPT, NOTADB, CONSTRAINT, ...
      return ErrorCode::Failed;
  }
}

}  // namespace

sdk::Result<void> restrict_mode(const std::string& path, bool create) {
  const auto fail = [&](const char* what) {
    const int e = errno;
    return sdk::fail(e == EACCES || e == EPERM || e == EROFS ? ErrorCode::PermissionDenied : ErrorCode::Unavailable,
                     "sqlite store '" + path + "': cannot " + what + ": " + support::errno_text(e));
  };
  struct stat st {};
  // lstat, and the file opened without following a link: a link planted where the store's file
  // goes (its folder writable by someone else) must not make this process chmod, create or open
  // a file elsewhere (found by an attacker: a root-owned file chmod'ed 0600 through a link).
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return sdk::fail(ErrorCode::PermissionDenied,
                     "sqlite store '" + path + "': is a symbolic link; the store's file is never reached through one "
                     "(point [store] path at the file itself)");
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return fail("read the file's mode");
    if (!create) return {};
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      if (errno == EEXIST) return restrict_mode(path, false);  // created meanwhile by another opener
      return fail("create the file (mode 0600)");
    }
    ::close(fd);
    return {};
  }
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) == 0) return {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return fail("open the file to restrict its mode");
  const int rc = ::fchmod(fd, st.st_mode & 0700);
  const int e = errno;
  ::close(fd);
  errno = e;
  if (rc != 0) return fail("restrict the file's mode to its owner");
  return {};
}

// --- Statement ---------------------------------------------------------------------------------

Statement::Statement(Connection& db, sqlite3_stmt* stmt, bool& in_use) noexcept
    : db_(&db), stmt_(stmt), in_use_(&in_use) {
  *in_use_ = true;
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      in_use_(std::exchange(other.in_use_, nullptr)),
      bind_error_(other.bind_error_),
      constraint_failed_(other.constraint_failed_) {}

Statement::~Statement() {
  if (!stmt_) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  *in_use_ = false;
}

Statement& Statement::bind(int index, std::int64_t value) noexcept {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) noexcept {
  if (value.size() > static_cast<std::size_t>(INT_MAX)) {
    if (bind_error_ == 0) bind_error_ = SQLITE_TOOBIG;
    return *this;
  }
  // SQLITE_TRANSIENT: SQLite copies the text, so temporaries may be bound.
  const int rc = sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                                   SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::bind_null(int index) noexcept {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

void Statement::reset() noexcept {
  sqlite3_reset(stmt_);
  bind_error_ = 0;
  constraint_failed_ = false;
}

sdk::Result<bool> Statement::step() noexcept {
  if (bind_error_ != 0) return sdk::fail(db_->error(bind_error_, "bind"));
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  constraint_failed_ = (rc & 0xff) == SQLITE_CONSTRAINT;
  return sdk::fail(db_->error(rc, sqlite3_sql(stmt_)));
}

sdk::Result<void> Statement::run() noexcept {
  auto r = step();
  if (!r) return sdk::fail(std::move(r).error());
  if (*r)
    return sdk::fail(ErrorCode::Internal,
                     std::string("statement returned a row: ") + sqlite3_sql(stmt_));
  return {};
}

std::int64_t Statement::column_int(int column) const noexcept {
  return sqlite3_column_int64(stmt_, column);
}

bool Statement::column_is_null(int column) const noexcept {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::string Statement::column_text(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size));
}

// --- Connection --------------------------------------------------------------------------------

sdk::Result<std::unique_ptr<Connection>> Connection::open(const std::string& path,
                                                          std::int64_t busy_timeout_ms) {
  // mesh.db holds every node's key, declarations and tokens' hashes: 0600 (docs/security.md).
  // SQLite creates -wal and -shm with the main file's mode, so a main file created 0600 here —
  // an empty file is a valid empty database — gives all three 0600. An existing file keeps its
  // owner but loses any group/other bits (it may be from before this rule).
  if (auto ok = restrict_mode(path); !ok) return sdk::fail(std::move(ok).error());
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                      nullptr);
  if (!raw) return sdk::fail(ErrorCode::Failed, "sqlite store '" + path + "': out of memory");
  // Owns the handle from here on: it is closed on every return path.
  std::unique_ptr<Connection> db(new Connection(raw, path));
  if (rc != SQLITE_OK) return sdk::fail(db->error(rc, "open"));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, static_cast<int>(std::min<std::int64_t>(busy_timeout_ms, INT_MAX)));

  if (auto r = db->exec("PRAGMA foreign_keys = ON", "enable foreign keys"); !r)
    return sdk::fail(std::move(r).error());
  // The first statement that reads the file: a corrupt file or one that is not a database
  // fails here (SQLITE_NOTADB / SQLITE_CORRUPT → Failed naming the file).
  // Switching a new file to WAL takes an exclusive lock, and SQLite does not call the busy
  // handler for it: two processes opening one new file at once (two control planes started
  // together) get SQLITE_BUSY at once. Asked again until the busy timeout, like any locked write.
  std::string mode;
  int wal_rc = SQLITE_OK;
  const auto wal_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  for (;;) {
    mode.clear();
    wal_rc = sqlite3_exec(
        raw, "PRAGMA journal_mode = WAL",
        [](void* out, int columns, char** values, char**) {
          if (columns > 0 && values[0]) *static_cast<std::string*>(out) = values[0];
          return 0;
        },
        &mode, nullptr);
    if ((wal_rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= wal_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (wal_rc != SQLITE_OK) return sdk::fail(db->error(wal_rc, "open"));
  if (mode != "wal")
    return sdk::fail(
        ErrorCode::Failed,
        "sqlite store '" + path + "': cannot switch to WAL journal mode (got '" + mode + "')");
  // FULL: in WAL mode the WAL is synced at every commit, so a committed write survives power
  // loss. The control plane reports "stored" only after the commit returns.
  if (auto r = db->exec("PRAGMA synchronous = FULL", "set synchronous=FULL"); !r)
    return sdk::fail(std::move(r).error());
  if (auto r = db->exec("SELECT count(*) FROM sqlite_schema", "read the schema"); !r)
    return sdk::fail(std::move(r).error());
  // -wal and -shm exist now (WAL mode): tighten them too, for files made before this rule.
  for (const char* suffix : {"-wal", "-shm"})
    if (auto ok = restrict_mode(path + suffix, /*create=*/false); !ok) return sdk::fail(std::move(ok).error());
  return db;
}

Connection::~Connection() {
  for (auto& [sql, cached] : statements_) sqlite3_finalize(cached.stmt);
  sqlite3_close_v2(db_);
}

sdk::Result<void> Connection::exec(const char* sql, std::string_view what) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  sqlite3_free(message);  // error() reads sqlite3_errmsg, which holds the same text
  if (rc != SQLITE_OK) return sdk::fail(error(rc, what));
  return {};
}

sdk::Result<Statement> Connection::prepare(std::string_view sql) {
  // By the text's address first: the SQL is a literal, and comparing texts that share long
  // prefixes (every node query starts with the same 300 characters) in the map below was a
  // tenth of a deploy report's CPU.
  if (auto hit = by_address_.find(sql.data()); hit != by_address_.end() && hit->second.size == sql.size()) {
    Cached& c = *hit->second.cached;
    if (c.in_use)
      return sdk::fail(ErrorCode::Internal, "statement used twice at once (a bug in the sqlite store): " + std::string(sql));
    return Statement(*this, c.stmt, c.in_use);
  }
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return sdk::fail(error(rc, std::string("prepare: ") + std::string(sql)));
    }
    it = statements_.emplace(sql, Cached{stmt, false}).first;
  }
  by_address_[sql.data()] = ByAddress{sql.size(), &it->second};
  if (it->second.in_use)
    return sdk::fail(
        ErrorCode::Internal,
        "statement used twice at once (a bug in the sqlite store): " + std::string(sql));
  return Statement(*this, it->second.stmt, it->second.in_use);
}

void Connection::rollback() noexcept {
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

std::int64_t Connection::changes() const noexcept { return sqlite3_changes64(db_); }

std::int64_t Connection::last_insert_rowid() const noexcept {
  return sqlite3_last_insert_rowid(db_);
}

sdk::Error Connection::error(int rc, std::string_view what) const {
  std::string message = "sqlite store '" + path_ + "': " + std::string(what) + ": ";
  const char* detail = db_ ? sqlite3_errmsg(db_) : nullptr;
  // sqlite3_errmsg describes the connection's last error; for codes raised outside SQLite
  // (bind checks) fall back to the generic text of the code.
  message += (db_ && sqlite3_extended_errcode(db_) == rc && detail) ? detail : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB)
    message += " (the file is corrupt or not an SQLite database)";
  else if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    message += " (the database is busy; retry later)";
  // SQLite's own text hides the cause of a failed open or I/O ("unable to open database file"):
  // the OS error says it (read-only file system, no space left, permission denied).
  const int os_errno = db_ ? sqlite3_system_errno(db_) : 0;
  if (os_errno != 0 && (primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR || primary == SQLITE_FULL ||
                        primary == SQLITE_READONLY || primary == SQLITE_PERM))
    message += std::string(" (") + support::errno_text(os_errno) + ")";
  if (primary == SQLITE_FULL || primary == SQLITE_IOERR)
    message += " (retryable: nothing was written; retry once the disk has room or works again)";
  return sdk::Error{code_for(rc, os_errno), std::move(message), {}};
}

// --- Transaction -------------------------------------------------------------------------------

sdk::Result<Transaction> Transaction::begin(Connection& db, Kind kind) {
  const bool write = kind == Kind::Write;
  if (db.in_read_many()) {
    if (write)
      return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                       "sqlite store: a write through Store::read_many's view (it is for reads only)");
    return Transaction(db, false, /*joined=*/true);
  }
  if (auto r = db.exec(write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED",
                       write ? "begin write transaction" : "begin read transaction");
      !r)
    return sdk::fail(std::move(r).error());
  return Transaction(db, write);
}

Transaction::~Transaction() {
  if (db_ && !joined_) db_->rollback();
}

sdk::Result<void> Transaction::commit() {
  Connection* db = std::exchange(db_, nullptr);
  if (joined_) return {};  // read_many's transaction: it ends there
  if (write_ && db->before_commit()) {
    if (auto r = db->before_commit()(*db); !r) {
      db->rollback();
      return r;
    }
  }
  if (auto r = db->exec("COMMIT", "commit"); !r) {
    db->rollback();  // a failed COMMIT may leave the transaction open
    return r;
  }
  return {};
}

}  // namespace mesh::stores::sqlite
