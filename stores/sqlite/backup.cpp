// SqliteStore::backup and ::restore: SQLite's online backup API (https://www.sqlite.org/backup.html)
// copies every page of one database into another inside one read transaction of the source, so
// the copy is of one instant while other connections go on writing (WAL). The in-use lock keeps
// a restore from replacing a database a running control plane has open.
#include "backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "connection.h"
#include "migrations.h"
#include "mesh/support/errno_text.h"
#include "sqlite_store.h"

namespace mesh::stores::sqlite {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;
using sdk::Result;

ErrorCode os_code(int e) {
  return e == EACCES || e == EPERM || e == EROFS ? ErrorCode::PermissionDenied : ErrorCode::Unavailable;
}

sdk::Error os_error(const std::string& path, const char* what, int e) {
  return sdk::Error{os_code(e), "sqlite store: cannot " + std::string(what) + " '" + path + "': " +
                                    support::errno_text(e), {}};
}

struct RawHandle {
  sqlite3* db = nullptr;
  ~RawHandle() {
    if (db) sqlite3_close_v2(db);
  }
};

sdk::Error sqlite_error(sqlite3* db, int rc, const std::string& path, const std::string& what) {
  const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  ErrorCode code = ErrorCode::Failed;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) code = ErrorCode::Transient;
  else if (primary == SQLITE_FULL || primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN) code = ErrorCode::Unavailable;
  else if (primary == SQLITE_PERM || primary == SQLITE_READONLY || primary == SQLITE_AUTH) code = ErrorCode::PermissionDenied;
  return sdk::Error{code, "sqlite store: " + what + " '" + path + "': " + msg, {}};
}

/// Copies every page of `from` into `to` in one step (one read transaction of `from`, one write
/// transaction of `to`: a failure leaves `to` as it was).
Result<void> copy_pages(sqlite3* from, sqlite3* to, const std::string& to_path) {
  sqlite3_backup* b = sqlite3_backup_init(to, "main", from, "main");
  if (!b) return sdk::fail(sqlite_error(to, sqlite3_errcode(to), to_path, "start the copy into"));
  const int step = sqlite3_backup_step(b, -1);
  const int finish = sqlite3_backup_finish(b);
  if (step != SQLITE_DONE) return sdk::fail(sqlite_error(to, step, to_path, "copy into"));
  if (finish != SQLITE_OK) return sdk::fail(sqlite_error(to, finish, to_path, "finish the copy into"));
  return {};
}

Result<void> fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return sdk::fail(os_error(path, "open", errno));
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return sdk::fail(os_error(path, "sync", e));
  return {};
}

std::string random_suffix() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 12; ++i) s += kHex[rd() % 16];
  return s;
}

/// What a backup file must be before anything is restored from it: an SQLite database that
/// passes integrity_check, with this store's schema_version table at a version this build knows.
Result<std::int64_t> check_backup(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return sdk::fail(ErrorCode::InvalidArgument, "sqlite store: backup '" + path + "' is not a regular file");
  RawHandle h;
  int rc = sqlite3_open_v2(path.c_str(), &h.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr);
  if (rc != SQLITE_OK) return sdk::fail(sqlite_error(h.db, rc, path, "open the backup"));
  std::string check;
  rc = sqlite3_exec(
      h.db, "PRAGMA integrity_check(1)",
      [](void* out, int n, char** v, char**) {
        if (n > 0 && v[0]) *static_cast<std::string*>(out) = v[0];
        return 0;
      },
      &check, nullptr);
  if (rc != SQLITE_OK)
    return sdk::fail(ErrorCode::InvalidArgument, "sqlite store: backup '" + path +
                                                     "' is not a readable SQLite database: " + sqlite3_errmsg(h.db));
  if (check != "ok")
    return sdk::fail(ErrorCode::InvalidArgument,
                     "sqlite store: backup '" + path + "' fails SQLite's integrity check: " + check);
  sqlite3_stmt* st = nullptr;
  rc = sqlite3_prepare_v2(h.db, "SELECT version FROM schema_version WHERE id = 1", -1, &st, nullptr);
  if (rc != SQLITE_OK)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "sqlite store: backup '" + path + "' is not a Nox Mesh store (no schema_version table)");
  std::int64_t version = 0;
  const bool row = sqlite3_step(st) == SQLITE_ROW;
  if (row) version = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (!row || version < 1)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "sqlite store: backup '" + path + "' is not a Nox Mesh store (no schema version recorded)");
  if (version > kWrittenSchemaVersion)
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "sqlite store: backup '" + path + "' has schema version " + std::to_string(version) +
                         ", newer than this build's " + std::to_string(kWrittenSchemaVersion) +
                         " (restore it with the release that made it)");
  return version;
}

}  // namespace

Result<int> lock_database_use(const std::string& db_path, bool exclusive) {
  const std::string lock_path = db_path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return sdk::fail(os_error(lock_path, "open the in-use lock", errno));
  const int how = exclusive ? (LOCK_EX | LOCK_NB) : LOCK_SH;
  int rc;
  do rc = ::flock(fd, how);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       "sqlite store '" + db_path + "' is in use (its lock " + lock_path +
                           " is held: a running mesh-control?); stop every process that has it open first");
    return sdk::fail(os_error(lock_path, "lock", e));
  }
  return fd;
}

Result<void> SqliteStore::backup(const std::string& path) noexcept {
  return sdk::guard("backup", [&]() -> Result<void> {
    if (path.empty()) return sdk::fail(ErrorCode::InvalidArgument, "sqlite store: backup: no file named");
    const fs::path target = fs::absolute(path);
    std::error_code ec;
    const fs::path dir = target.parent_path();
    if (!fs::is_directory(dir, ec))
      return sdk::fail(ErrorCode::InvalidArgument,
                       "sqlite store: backup '" + path + "': directory " + dir.string() + " does not exist");
    if (fs::equivalent(target, fs::path(path_), ec))
      return sdk::fail(ErrorCode::InvalidArgument, "sqlite store: backup '" + path + "' is the store's own database");
    const std::string tmp = (dir / ("." + target.filename().string() + ".tmp-" + random_suffix())).string();
    // Created 0600 before SQLite opens it, so the copy of every node's key is never readable by
    // others, not even for a moment.
    const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return sdk::fail(os_error(tmp, "create", errno));
    ::close(fd);
    struct Cleanup {
      std::string path;
      bool keep = false;
      ~Cleanup() {
        if (!keep) {
          std::error_code e;
          fs::remove(path, e);
          fs::remove(path + "-journal", e);
        }
      }
    } cleanup{tmp};
    {
      RawHandle out;
      int rc = sqlite3_open_v2(tmp.c_str(), &out.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, nullptr);
      if (rc != SQLITE_OK) return sdk::fail(sqlite_error(out.db, rc, tmp, "open"));
      {
        std::lock_guard lock(mutex_);
        if (!db_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: backup called before open()");
        MESH_TRY(copy_pages(db_->handle(), out.db, tmp));
      }
      // The copy carries the source's WAL flag; a backup is one self-contained file.
      rc = sqlite3_exec(out.db, "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) return sdk::fail(sqlite_error(out.db, rc, tmp, "finish"));
    }
    MESH_TRY(fsync_path(tmp, false));
    if (::rename(tmp.c_str(), target.c_str()) != 0) return sdk::fail(os_error(target.string(), "rename onto", errno));
    cleanup.keep = true;
    MESH_TRY(fsync_path(dir.string(), true));
    log().info("sqlite store backed up path=" + path_ + " to=" + target.string());
    return {};
  });
}

Result<void> SqliteStore::restore(const std::string& path) noexcept {
  return sdk::guard("restore", [&]() -> Result<void> {
    std::lock_guard lock(mutex_);
    if (!configured_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: restore before configure");
    if (db_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: restore of an open store (restore runs instead of open)");
    std::error_code ec;
    if (fs::exists(path_, ec) && fs::equivalent(fs::path(path), fs::path(path_), ec))
      return sdk::fail(ErrorCode::InvalidArgument, "sqlite store: restore '" + path + "' is the store's own database");
    MESH_TRY(version, check_backup(path));
    MESH_TRY(lock_fd, lock_database_use(path_, /*exclusive=*/true));
    struct Unlock {
      int fd;
      ~Unlock() { ::close(fd); }
    } unlock{lock_fd};
    RawHandle in;
    int rc = sqlite3_open_v2(path.c_str(), &in.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr);
    if (rc != SQLITE_OK) return sdk::fail(sqlite_error(in.db, rc, path, "open the backup"));
    // The live database keeps its inode, mode and WAL: its pages are replaced in one write
    // transaction, so a failure (disk full) leaves it as it was.
    MESH_TRY(live, Connection::open(path_, busy_timeout_ms_));
    MESH_TRY(copy_pages(in.db, live->handle(), path_));
    log().info("sqlite store restored path=" + path_ + " from=" + path + " schema_version=" +
               std::to_string(version) + " (migrated at the next open)");
    return {};
  });
}

}  // namespace mesh::stores::sqlite
