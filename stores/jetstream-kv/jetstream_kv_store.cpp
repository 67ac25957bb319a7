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

/// Dot-separated tokens of [A-Za-z0-9_-], each non-empty, at most 128 characters in all.
bool valid_inbox_prefix(const std::string& p) {
  if (p.empty() || p.size() > 128 || p.front() == '.' || p.back() == '.') return false;
  char prev = '.';
  for (char c : p) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!word && !(c == '.' && prev != '.')) return false;
    prev = c;
  }
  return true;
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
    add("inbox_prefix", sdk::ValueType::String, false,
        "subject prefix of the connection's reply inboxes (JetStream API replies, ordered consumers), "
        "dot-separated tokens of [A-Za-z0-9_-] (default _INBOX; mesh-control sets _INBOX.control)");
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
    add("compact_after_bytes", sdk::ValueType::Int, false,
        "bytes of operations since the last snapshot after which a write first compacts the stream, or the "
        "snapshot's own size when larger (decision 186); 0: operations alone decide",
        sdk::Value(std::int64_t{kDefaultCompactAfterBytes}));
    add("import_sqlite", sdk::ValueType::String, false,
        "a sqlite store's database file to import at open into a stream that holds no operation yet "
        "(mesh-control migrate --to jetstream-kv sets it); a stream already made from this very file is "
        "used as it is");
    add("import_new_only", sdk::ValueType::Bool, false,
        "true: import_sqlite into a new stream only, a stream already made from the same file is refused too "
        "(mesh-control migrate sets it)",
        sdk::Value(false));
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
  if (cfg.find("inbox_prefix")) {
    s.inbox_prefix = cfg.get_string("inbox_prefix");
    if (!valid_inbox_prefix(s.inbox_prefix))
      return sdk::fail(ErrorCode::InvalidArgument,
                       "'" + s.inbox_prefix + "' is not a subject prefix (dot-separated tokens of [A-Za-z0-9_-])",
                       "inbox_prefix");
  }
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
  compact_after_bytes_ = cfg.get_int("compact_after_bytes", kDefaultCompactAfterBytes);
  if (compact_after_bytes_ != 0 && (compact_after_bytes_ < 65536 || compact_after_bytes_ > (std::int64_t{1} << 40)))
    return sdk::fail(ErrorCode::InvalidArgument, "must be 0 (operations alone) or between 65536 and 2^40 (bytes)",
                     "compact_after_bytes");
  import_path_ = cfg.get_string("import_sqlite");
  import_new_only_ = cfg.get_bool("import_new_only", false);
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
    // Until an image is applied, the local file stands for the snapshot's size (decision 186).
    std::error_code size_ec;
    const auto local_size = std::filesystem::file_size(local_path_, size_ec);
    image_bytes_ = size_ec ? 0 : static_cast<std::uint64_t>(local_size);
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
  // The file's digest names it (decision record 189): a stream already made from this very file
  // is not an error, every instance of a restore may keep import_sqlite in its config.
  auto digest = file_digest(import_path_);
  if (!digest) return sdk::fail(std::move(digest).error());
  std::optional<std::uint64_t> already;  // set when the stream was imported from this file
  // The import is the stream's first operation, or nothing: published like any write (the CAS
  // expects no operation), so that two imports racing cannot both land.
  auto imported = write<void>("import", Method::Import, [&]() -> Result<std::string> {
    if (last_op_seq_ != 0) {
      MESH_TRY(rec, db_->record(kImportRecordNs, kImportRecordKey));
      if (rec && import_record_digest(rec->value) == *digest && !import_new_only_) {
        already = last_op_seq_;
        return sdk::fail(ErrorCode::AlreadyExists, "already imported from this file", "import_sqlite");
      }
      return sdk::fail(ErrorCode::FailedPrecondition,
                       "stream '" + settings_.prefix + "' already holds operations (the last at sequence " +
                           std::to_string(last_op_seq_) + ") and was not imported from '" + import_path_ + "' (" +
                           *digest + "; " +
                           (rec ? "the stream's state came from a file with " + import_record_digest(rec->value)
                                : std::string("the stream records no import of a file")) +
                           "): remove import_sqlite from this config, the stream is in use and a sqlite store is "
                           "imported only into a new stream (to make another stream from this file, give a new "
                           "prefix to every instance)",
                       "import_sqlite");
    }
    const auto dir = std::filesystem::path(local_path_).parent_path().string();
    // The copy records where it came from, inside the image: every instance, every compaction
    // and every backup of this stream carries it.
    auto mark = [&](const std::string& copy) -> Result<void> {
      sqlite::SqliteStore db(host());
      sdk::Value c = sdk::Value::object();
      c.set("path", copy);
      MESH_TRY(db.configure(c));
      MESH_TRY(db.open());
      sdk::Value v = sdk::Value::object();
      v.set("digest", *digest);
      v.set("file", import_path_);
      sdk::RecordWrite w;
      w.ns = kImportRecordNs;
      w.key = kImportRecordKey;
      w.value = v.to_json();
      MESH_TRY(db.put_records({w}, 0));
      // One self-contained file again (the store opened it in WAL mode).
      return db.with_connection([](Connection& conn) { return conn.exec("PRAGMA journal_mode = DELETE", "journal"); });
    };
    MESH_TRY(image, snapshot_sqlite_file(import_path_, dir.empty() ? "." : dir, mark));
    Writer w;
    w.str(image);
    return std::move(w.bytes());
  });
  if (!imported && already) {
    log().info("jetstream-kv store import skipped file=" + import_path_ + " stream=" + settings_.prefix +
               " outcome=already_imported digest=" + *digest + " (the stream was made from this file; its last "
               "operation is at sequence " + std::to_string(*already) + "; import_sqlite may be removed from the config)");
    return {};
  }
  if (imported)
    log().info("jetstream-kv store imported file=" + import_path_ + " stream=" + settings_.prefix +
               " outcome=imported digest=" + *digest);
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
