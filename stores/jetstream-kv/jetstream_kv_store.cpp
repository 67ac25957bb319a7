// The jetstream-kv store: configuration, opening (the local file, the stream, the import).
// The log's application is in catch_up.cpp, the Store methods in methods.cpp.
#include "jetstream_kv_store.h"

#include <sodium.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "connection.h"
#include "import.h"
#include "mesh/support/nkey_keys.h"
#include "sqlite_store.h"
#include "store_paths.h"

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;
using sqlite::Connection;

namespace {

Result<std::string> read_small_file(const std::string& path, const char* field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return sdk::fail(ErrorCode::InvalidArgument, "'" + path + "' cannot be read", field);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool valid_prefix(const std::string& p) {
  if (p.empty() || p.size() > 32) return false;
  for (char c : p)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

}  // namespace

JetStreamKvStore::JetStreamKvStore(const sdk::HostContext& host) : sdk::Store(host) {}
JetStreamKvStore::~JetStreamKvStore() = default;

const sdk::Schema& JetStreamKvStore::config_schema() const noexcept {
  static const sdk::Schema schema = [] {
    sdk::Schema s;
    s.name = "store";
    s.description = "jetstream-kv store: one JetStream stream of write operations, applied into a local SQLite file";
    auto add = [&](const char* name, sdk::ValueType type, bool required, const char* desc,
                   std::optional<sdk::Value> def = std::nullopt) {
      sdk::Attribute a;
      a.name = name;
      a.type = type;
      a.required = required;
      a.description = desc;
      a.default_value = std::move(def);
      s.attributes.push_back(std::move(a));
    };
    add("servers", sdk::ValueType::StringList, true,
        "NATS server URLs, each nats://host[:port] or tls://host[:port] (default: [transport] servers)");
    add("user", sdk::ValueType::String, false, "user name, for user/password authentication");
    add("password_file", sdk::ValueType::String, false, "path of a file holding the password of `user`");
    add("nkey_seed", sdk::ValueType::String, false, "path of a file holding the user nkey seed (SU...)");
    add("tls_ca", sdk::ValueType::String, false, "path of a PEM file of CA certificates; turns TLS on");
    add("prefix", sdk::ValueType::String, false,
        "the JetStream stream's name and subject prefix, [A-Za-z0-9_-] (1-32 characters)",
        sdk::Value(std::string("MESH_STORE")));
    add("replicas", sdk::ValueType::Int, false, "the stream's replicas, 1 to 5", sdk::Value(std::int64_t{1}));
    add("timeout", sdk::ValueType::Int, false, "each JetStream request's timeout, in milliseconds",
        sdk::Value(std::int64_t{5000}));
    add("local_path", sdk::ValueType::String, false,
        "this instance's local SQLite file (default: <state_dir>/jetstream-kv-<prefix>.db)");
    add("compact_after", sdk::ValueType::Int, false,
        "operations applied since the last snapshot after which a write first compacts the stream (a snapshot "
        "operation, then the messages before it purged; decision 104); 0 never compacts",
        sdk::Value(std::int64_t{kDefaultCompactAfter}));
    add("import_sqlite", sdk::ValueType::String, false,
        "a sqlite store's database file to import at open into a stream that holds no operation yet "
        "(mesh-control migrate --to jetstream-kv sets it)");
    return s;
  }();
  return schema;
}

Result<void> JetStreamKvStore::do_configure(const sdk::Value& cfg) {
  LogSettings s;
  const sdk::Value* servers = cfg.find("servers");
  if (!servers || !servers->is_array() || servers->as_array().empty())
    return sdk::fail(ErrorCode::InvalidArgument, "must list at least one server", "servers");
  for (std::size_t i = 0; i < servers->as_array().size(); ++i) {
    const auto& v = servers->as_array()[i];
    const std::string url = v.is_string() ? v.as_string() : std::string();
    if (url.rfind("nats://", 0) != 0 && url.rfind("tls://", 0) != 0)
      return sdk::fail(ErrorCode::InvalidArgument, "'" + url + "' is not a nats://host[:port] or tls://host[:port] URL",
                       "servers[" + std::to_string(i) + "]");
    s.servers.push_back(url);
  }
  s.user = cfg.get_string("user");
  if (cfg.find("password_file")) {
    if (s.user.empty()) return sdk::fail(ErrorCode::InvalidArgument, "needs `user` to be set", "password_file");
    MESH_TRY(text, read_small_file(cfg.get_string("password_file"), "password_file"));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    s.password = std::move(text);
  }
  if (cfg.find("nkey_seed")) {
    if (!s.user.empty()) return sdk::fail(ErrorCode::InvalidArgument, "give `nkey_seed` or `user`, not both", "nkey_seed");
    const std::string path = cfg.get_string("nkey_seed");
    MESH_TRY(text, read_small_file(path, "nkey_seed"));
    auto pub = support::nkey_public_from_seed_text(text);
    sodium_memzero(text.data(), text.size());
    if (!pub) return sdk::fail(ErrorCode::InvalidArgument, "'" + path + "': " + pub.error().message, "nkey_seed");
    s.nkey_seed_path = path;
    s.nkey_public = *pub;
  }
  s.tls_ca_path = cfg.get_string("tls_ca");
  s.prefix = cfg.get_string("prefix", "MESH_STORE");
  if (!valid_prefix(s.prefix))
    return sdk::fail(ErrorCode::InvalidArgument, "'" + s.prefix + "' is not 1-32 characters of [A-Za-z0-9_-]", "prefix");
  const std::int64_t replicas = cfg.get_int("replicas", 1);
  if (replicas < 1 || replicas > 5) return sdk::fail(ErrorCode::InvalidArgument, "must be between 1 and 5", "replicas");
  s.replicas = static_cast<int>(replicas);
  s.timeout_ms = cfg.get_int("timeout", 5000);
  if (s.timeout_ms < 100 || s.timeout_ms > 600'000)
    return sdk::fail(ErrorCode::InvalidArgument, "must be between 100 and 600000 (milliseconds)", "timeout");
  std::string local = cfg.get_string("local_path");
  if (local.empty()) {
    if (host().state_dir.empty())
      return sdk::fail(ErrorCode::InvalidArgument, "needed: the plugin was given no state directory", "local_path");
    local = host().state_dir + "/jetstream-kv-" + s.prefix + ".db";
  }
  const auto dir = std::filesystem::path(local).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    return sdk::fail(ErrorCode::InvalidArgument, "'" + dir.string() + "' is not a directory", "local_path");
  compact_after_ = cfg.get_int("compact_after", kDefaultCompactAfter);
  if (compact_after_ != 0 && (compact_after_ < 16 || compact_after_ > 100'000'000))
    return sdk::fail(ErrorCode::InvalidArgument, "must be 0 (never) or between 16 and 100000000 (operations)",
                     "compact_after");
  import_path_ = cfg.get_string("import_sqlite");
  settings_ = std::move(s);
  local_path_ = std::move(local);
  configured_ = true;
  return {};
}

Result<void> JetStreamKvStore::open() noexcept {
  auto opened = sdk::guard("open", [&]() -> Result<void> {
    std::lock_guard lock(mutex_);
    if (!configured_) return sdk::fail(ErrorCode::FailedPrecondition, "jetstream-kv store: open before configure");
    if (db_) return sdk::fail(ErrorCode::FailedPrecondition, "jetstream-kv store: already open");
    if (sodium_init() < 0) return sdk::fail(ErrorCode::Failed, "jetstream-kv store: libsodium failed to initialise");
    MESH_TRY(db, open_local());
    MESH_TRY(log, StreamLog::open(settings_));

    // The local file's identity: the stream it was made from, and how far it got.
    std::uint64_t last = 0;
    const std::string stream = settings_.prefix;
    const std::int64_t created = log->created_ns();
    const std::string path = local_path_;
    MESH_TRY(db->with_connection([&](Connection& conn) -> Result<void> {
      MESH_TRY(conn.exec("CREATE TABLE IF NOT EXISTS jetstream_log ("
                         " id INTEGER PRIMARY KEY CHECK (id = 1),"
                         " stream TEXT NOT NULL, created_ns INTEGER NOT NULL, last_op_seq INTEGER NOT NULL)",
                         "create jetstream_log"));
      MESH_TRY(st, conn.prepare("SELECT stream, created_ns, last_op_seq FROM jetstream_log WHERE id = 1"));
      MESH_TRY(row, st.step());
      if (row) {
        if (st.column_text(0) != stream || st.column_int(1) != created)
          return sdk::fail(ErrorCode::FailedPrecondition,
                           "jetstream-kv: the local file '" + path + "' was made from another stream named '" +
                               st.column_text(0) + "' (deleted and made again since?); remove the file: it is "
                               "rebuilt from the stream");
        last = st.column_uint(2);
        return {};
      }
      MESH_TRY(ins, conn.prepare("INSERT INTO jetstream_log (id, stream, created_ns, last_op_seq) VALUES (1, ?1, ?2, 0)"));
      ins.bind(1, stream).bind(2, created);
      return ins.run();
    }));
    db_ = std::move(db);
    log_ = std::move(log);
    last_op_seq_ = position_ = last;
    if (auto ok = catch_up(); !ok) {
      log_.reset();
      db_.reset();
      return sdk::fail(std::move(ok).error());
    }
    this->log().info("jetstream-kv store opened stream=" + settings_.prefix + " replicas=" +
                     std::to_string(settings_.replicas) + " local=" + local_path_ +
                     " applied=" + std::to_string(last_op_seq_));
    return {};
  });
  if (!opened || import_path_.empty()) return opened;
  // The import is the stream's first operation, or nothing: published like any write (the CAS
  // expects no operation), so that two imports racing cannot both land.
  auto imported = write<void>("import", Method::Import, [&]() -> Result<std::string> {
    if (last_op_seq_ != 0)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       "stream '" + settings_.prefix + "' already holds operations (the last at sequence " +
                           std::to_string(last_op_seq_) + "): a sqlite store is imported only into a new stream; "
                           "choose another prefix", "import_sqlite");
    const auto dir = std::filesystem::path(local_path_).parent_path().string();
    MESH_TRY(image, snapshot_sqlite_file(import_path_, dir.empty() ? "." : dir));
    Writer w;
    w.str(image);
    return std::move(w.bytes());
  });
  if (imported)
    log().info("jetstream-kv store imported file=" + import_path_ + " stream=" + settings_.prefix +
               " outcome=imported");
  return imported;
}

Result<std::unique_ptr<sqlite::SqliteStore>> JetStreamKvStore::open_local() {
  auto db = std::make_unique<sqlite::SqliteStore>(host());
  sdk::Value c = sdk::Value::object();
  c.set("path", local_path_);
  MESH_TRY(db->configure(c));
  MESH_TRY(db->open());
  // The truth is the stream: a commit lost to a power cut is applied again (its sequence is in
  // the same transaction), so the local file needs no fsync per commit. WAL keeps it consistent.
  MESH_TRY(db->with_connection([](Connection& conn) { return conn.exec("PRAGMA synchronous = NORMAL", "synchronous"); }));
  return db;
}

std::uint64_t JetStreamKvStore::applied_sequence() noexcept {
  std::lock_guard lock(mutex_);
  return last_op_seq_;
}

}  // namespace mesh::stores::jetstream_kv
