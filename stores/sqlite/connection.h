// The `sqlite` store's thin layer over the SQLite C API: one connection, a cache of prepared
// statements, transactions, and the mapping of SQLite result codes to SDK errors.
//
// Internal to the plugin. Thread safety: none; the store serialises every call with its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <memory>
#include <string>
#include <string_view>

#include "mesh/sdk/result.h"
#include "mesh/support/sha256.h"

struct sqlite3;
struct sqlite3_stmt;

namespace mesh::stores::sqlite {

class Connection;

/// A cached prepared statement, borrowed from its Connection for one use. Binding errors are
/// kept and reported by the next step(). On destruction the statement is reset and its bindings
/// cleared, so the next user starts clean (also when an error or exception ends the use early).
class Statement {
 public:
  Statement(Connection& db, sqlite3_stmt* stmt, bool& in_use) noexcept;
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  /// Binds parameter `index` (1-based).
  Statement& bind(int index, std::int64_t value) noexcept;
  Statement& bind(int index, std::string_view value) noexcept;
  Statement& bind_null(int index) noexcept;
  /// Makes the statement ready to run again (bindings are kept until re-bound).
  void reset() noexcept;

  /// Runs one step: true when a row is available, false when the statement is done.
  sdk::Result<bool> step() noexcept;
  /// Runs the statement to completion, expecting no rows (INSERT, UPDATE, DELETE).
  sdk::Result<void> run() noexcept;
  /// Whether step() last failed with a constraint violation (UNIQUE, PRIMARY KEY, CHECK).
  bool constraint_failed() const noexcept { return constraint_failed_; }

  std::int64_t column_int(int column) const noexcept;
  std::uint64_t column_uint(int column) const noexcept {
    return static_cast<std::uint64_t>(column_int(column));
  }
  bool column_is_null(int column) const noexcept;
  std::string column_text(int column) const;

 private:
  Connection* db_;
  sqlite3_stmt* stmt_;
  bool* in_use_;
  int bind_error_ = 0;
  bool constraint_failed_ = false;
};

/// One open database connection (opened with SQLITE_OPEN_NOMUTEX: the owner serialises use).
class Connection {
 public:
  /// Opens (creating if needed) the database file at `path`, sets the busy timeout and the
  /// store's pragmas (WAL, synchronous=FULL, foreign_keys=ON) and checks the file can be read.
  /// The file and its -wal and -shm are owner-only (restrict_mode: created 0600, group/other
  /// bits of existing ones removed).
  /// Errors: Failed (corrupt file, not a database), PermissionDenied, Unavailable (cannot open,
  /// disk full or failing); an error from the OS names its errno text.
  static sdk::Result<std::unique_ptr<Connection>> open(const std::string& path,
                                                       std::int64_t busy_timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Runs SQL without parameters (may hold several statements). `what` names the step in errors.
  sdk::Result<void> exec(const char* sql, std::string_view what);
  /// The cached prepared statement for `sql` (prepared on first use, kept until close). `sql`
  /// must be a string literal or otherwise outlive the connection (it is the cache key). The
  /// same statement cannot be borrowed twice at once (Internal error).
  sdk::Result<Statement> prepare(std::string_view sql);

  /// Rolls back the open transaction, if any; errors are ignored (there may be none open).
  void rollback() noexcept;

  /// For a store built on this one (jetstream-kv keeps the log sequence it applied in the same
  /// transaction as the effect): `hook` runs inside every write transaction (Transaction of
  /// Kind::Write) just before its COMMIT; an error from it rolls the transaction back and is what
  /// commit() returns. An empty function removes it. Not called for autocommit statements.
  void set_before_commit(std::function<sdk::Result<void>(Connection&)> hook) { before_commit_ = std::move(hook); }
  /// The hook set by set_before_commit (empty when none).
  const std::function<sdk::Result<void>(Connection&)>& before_commit() const noexcept { return before_commit_; }

  /// Rows changed by the last INSERT/UPDATE/DELETE.
  std::int64_t changes() const noexcept;
  std::int64_t last_insert_rowid() const noexcept;
  const std::string& path() const noexcept { return path_; }
  /// The SQLite handle, for the backup API (backup.cpp). Owned by the connection.
  sqlite3* handle() noexcept { return db_; }

  /// Whether a read transaction of SqliteStore::read_many is open: a read Transaction begun
  /// meanwhile joins it (no BEGIN of its own) and a write Transaction is refused.
  bool in_read_many() const noexcept { return in_read_many_; }
  void set_in_read_many(bool on) noexcept { in_read_many_ = on; }

  /// An SDK error for SQLite result code `rc`, naming the file, `what` and SQLite's message.
  sdk::Error error(int rc, std::string_view what) const;

 private:
  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
  std::map<std::string_view, Cached, std::less<>> statements_;
  /// The same statements by the address of their text (prepare's fast path); the map's nodes
  /// never move, so the pointers stay valid until close.
  struct ByAddress {
    std::size_t size = 0;
    Cached* cached = nullptr;
  };
  std::unordered_map<const char*, ByAddress> by_address_;
  std::function<sdk::Result<void>(Connection&)> before_commit_;
  bool in_read_many_ = false;
};

/// A transaction that rolls back unless committed. Write transactions use BEGIN IMMEDIATE so the
/// write lock is taken up front (waiting up to the busy timeout, then Transient) and a
/// read-then-write sequence can never fail half-way with SQLITE_BUSY. Inside
/// SqliteStore::read_many (Connection::in_read_many) a read transaction is that one (begin and
/// commit do nothing) and a write transaction is refused (FailedPrecondition).
class Transaction {
 public:
  enum class Kind { Read, Write };
  static sdk::Result<Transaction> begin(Connection& db, Kind kind);
  Transaction(Transaction&& other) noexcept : db_(other.db_), write_(other.write_), joined_(other.joined_) {
    other.db_ = nullptr;
  }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  /// Commits; with synchronous=FULL the commit is durable when this returns. A write
  /// transaction runs the connection's before-commit hook first (Connection::set_before_commit).
  sdk::Result<void> commit();

 private:
  Transaction(Connection& db, bool write, bool joined = false) : db_(&db), write_(write), joined_(joined) {}
  Connection* db_;
  bool write_ = false;
  bool joined_ = false;  ///< read_many's read transaction: begin and commit are its
};

/// Makes sure the file at `path` is readable by its owner only: creates it empty with mode 0600
/// when missing and `create`, else removes any group/other permission bits of an existing
/// regular file. A missing file with `create` false is left alone. Errors: PermissionDenied,
/// Unavailable, naming the file and the OS error.
sdk::Result<void> restrict_mode(const std::string& path, bool create = true);

/// Lower-case hex SHA-256 of `data` (mesh/support/sha256.h: libsodium).
using support::sha256_hex;

}  // namespace mesh::stores::sqlite
