#include "import.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mesh/support/sha256.h"

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;

namespace {

struct Db {
  sqlite3* p = nullptr;
  ~Db() {
    if (p) sqlite3_close_v2(p);
  }
};

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out.push_back(c);
    if (c == '\'') out.push_back('\'');
  }
  return out + "'";
}

}  // namespace

std::string import_record_digest(const std::string& value) {
  constexpr std::string_view kKey = "\"digest\":\"";
  const auto at = value.find(kKey);
  if (at == std::string::npos) return {};
  const auto end = value.find('"', at + kKey.size());
  return end == std::string::npos ? std::string() : value.substr(at + kKey.size(), end - at - kKey.size());
}

Result<std::string> snapshot_sqlite_file(const std::string& source, const std::string& scratch_dir,
                                         const std::function<Result<void>(const std::string& copy)>& edit) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec))
    return sdk::fail(ErrorCode::InvalidArgument, "'" + source + "' is not a file", "import_sqlite");
  Db db;
  if (sqlite3_open_v2(source.c_str(), &db.p, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    return sdk::fail(ErrorCode::InvalidArgument, "'" + source + "': " + sqlite3_errmsg(db.p), "import_sqlite");
  sqlite3_busy_timeout(db.p, 5000);
  sqlite3_stmt* st = nullptr;
  bool is_store = false;
  if (sqlite3_prepare_v2(db.p, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'",
                         -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    is_store = sqlite3_column_int(st, 0) == 1;
  sqlite3_finalize(st);
  if (!is_store)
    return sdk::fail(ErrorCode::InvalidArgument, "'" + source + "' is not a sqlite store's database (no schema_version table)",
                     "import_sqlite");
  // Named after the source too: two stores of one process (tests), or an import and a compaction
  // (decision 104), never share the copy.
  const std::string copy = scratch_dir + "/" + std::filesystem::path(source).filename().string() + ".copy-" +
                           std::to_string(::getpid()) + ".db";
  std::filesystem::remove(copy, ec);
  const std::string sql = "VACUUM INTO " + quoted(copy);
  char* err = nullptr;
  if (sqlite3_exec(db.p, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    std::filesystem::remove(copy, ec);
    return sdk::fail(ErrorCode::Unavailable, "copying '" + source + "' to '" + copy + "': " + why);
  }
  if (edit) {
    auto edited = edit(copy);
    if (!edited) {
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(copy + suffix, ec);
      return sdk::fail(std::move(edited).error());
    }
    std::filesystem::remove(copy + "-wal", ec);  // checkpointed when its connection closed
    std::filesystem::remove(copy + "-shm", ec);
  }
  std::ifstream in(copy, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::filesystem::remove(copy, ec);
  if (!in && !in.eof()) return sdk::fail(ErrorCode::Unavailable, "reading '" + copy + "' back failed");
  return bytes.str();
}

Result<std::string> file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return sdk::fail(ErrorCode::InvalidArgument, "'" + path + "' cannot be read", "import_sqlite");
  support::Sha256 h;
  std::string buf(1 << 20, '\0');
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) return sdk::fail(ErrorCode::InvalidArgument, "'" + path + "': a read failed", "import_sqlite");
  return "sha256:" + h.hex_digest();
}

Result<void> install_image(const std::string& image, const std::string& local_path, const std::string& stream,
                           std::int64_t created_ns, std::uint64_t seq) {
  const std::string temp = local_path + ".import";
  std::error_code ec;
  std::filesystem::remove(temp, ec);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    out.flush();
    if (!out) return sdk::fail(ErrorCode::Unavailable, "writing '" + temp + "': " + std::strerror(errno));
  }
  std::filesystem::permissions(temp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  {
    Db db;
    if (sqlite3_open_v2(temp.c_str(), &db.p, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      return sdk::fail(ErrorCode::Failed, "the imported image is not a database: " + std::string(sqlite3_errmsg(db.p)));
    const std::string sql =
        "PRAGMA journal_mode = DELETE;"
        "DROP TABLE IF EXISTS jetstream_log;"
        "CREATE TABLE jetstream_log (id INTEGER PRIMARY KEY CHECK (id = 1), stream TEXT NOT NULL,"
        " created_ns INTEGER NOT NULL, last_op_seq INTEGER NOT NULL);"
        "INSERT INTO jetstream_log VALUES (1, " + quoted(stream) + ", " + std::to_string(created_ns) + ", " +
        std::to_string(seq) + ");";
    char* err = nullptr;
    if (sqlite3_exec(db.p, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "unknown error";
      sqlite3_free(err);
      return sdk::fail(ErrorCode::Failed, "the imported image cannot be written: " + why);
    }
  }
  std::filesystem::remove(local_path + "-wal", ec);
  std::filesystem::remove(local_path + "-shm", ec);
  std::filesystem::rename(temp, local_path, ec);
  if (ec) return sdk::fail(ErrorCode::Unavailable, "renaming '" + temp + "' to '" + local_path + "': " + ec.message());
  return {};
}

}  // namespace mesh::stores::jetstream_kv
