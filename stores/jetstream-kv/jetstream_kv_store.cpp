#include "jetstream_kv_store.h"

#include <sodium.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "connection.h"
#include "import.h"
#include "mesh/support/hex.h"
#include "mesh/support/nkey_keys.h"
#include "mesh/support/sha256.h"
#include "sqlite_store.h"

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;
using sqlite::Connection;

namespace {

constexpr int kMaxAttempts = 64;
constexpr std::uint64_t kScanFrom = 64;  // messages behind from which catch-up uses a consumer
constexpr std::size_t kHeaderRoom = 4096;  // headers and envelope within max_payload
constexpr std::uint8_t kVersion = 1;
constexpr std::uint8_t kInline = 0;
constexpr std::uint8_t kParts = 1;

bool retryable(ErrorCode c) { return c == ErrorCode::Transient || c == ErrorCode::Unavailable || c == ErrorCode::Timeout; }

std::string random_id() {
  unsigned char b[16];
  randombytes_buf(b, sizeof b);
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

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

template <class T>
Result<T> take(OpResult&& r) {
  if (auto* p = std::get_if<Result<T>>(&r)) return std::move(*p);
  return sdk::fail(ErrorCode::Internal, "jetstream-kv: an operation answered with another type than its method's");
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

Result<void> JetStreamKvStore::catch_up() {
  MESH_TRY(bounds, log_->bounds());
  if (bounds.first > position_ + 1 && !gap_from_) gap_from_ = position_ + 1;  // purged before we read it
  if (bounds.first > position_ + 1) position_ = std::min(bounds.first, bounds.last + 1) - 1;
  if (bounds.last - position_ > kScanFrom && !gap_from_) {
    // Far behind (a new instance, a long stop): one ordered consumer instead of a request per
    // message. Whatever it does not deliver is read one by one below.
    MESH_TRY(log_->scan(position_ + 1, bounds.last, [&](LogMessage&& m) -> Result<void> {
      if (m.seq != position_ + 1 && !gap_from_) gap_from_ = position_ + 1;  // deleted in between
      if (m.subject != log_->op_subject()) {
        position_ = m.seq;
        return {};
      }
      MESH_TRY(applied, apply(m.seq, m.data));
      for (const auto& id : pending_ids_)
        if (id == applied.first) pending_result_ = std::move(applied.second);
      return {};
    }));
  }
  return catch_up_to(bounds.last);
}

Result<void> JetStreamKvStore::catch_up_to(std::uint64_t limit) {
  while (position_ < limit) {
    const std::uint64_t seq = position_ + 1;
    MESH_TRY(msg, log_->get(seq));
    if (!msg || msg->subject != log_->op_subject()) {
      if (!msg && !gap_from_) gap_from_ = seq;  // deleted: an operation may be gone
      position_ = seq;                           // a part is read with its commit
      continue;
    }
    MESH_TRY(applied, apply(seq, msg->data));
    for (const auto& id : pending_ids_)
      if (id == applied.first) pending_result_ = std::move(applied.second);
  }
  if (gap_from_) return sdk::fail(gap_error());
  return {};
}

std::uint64_t JetStreamKvStore::lost_races() noexcept {
  std::lock_guard lock(mutex_);
  return lost_races_;
}

sdk::Error JetStreamKvStore::gap_error() const {
  return sdk::Error{ErrorCode::FailedPrecondition,
                    "jetstream-kv: stream '" + settings_.prefix + "' no longer holds its messages from sequence " +
                        std::to_string(*gap_from_) + " on (purged or deleted by hand?), and no snapshot follows: the "
                        "local file '" + local_path_ + "' cannot be brought up to date; restore the stream from a "
                        "backup, or migrate a sqlite store into a new one",
                    {}};
}

Result<std::pair<std::string, OpResult>> JetStreamKvStore::apply(std::uint64_t seq, const std::string& data) {
  if (!db_)  // an import whose file could not be opened again: nothing more is applied
    return sdk::fail(ErrorCode::Unavailable, "jetstream-kv: the local file '" + local_path_ + "' is not open");
  std::string inline_form;
  const std::string* body = &data;
  std::string id;
  auto malformed = [&](const std::string& why) -> OpResult {
    this->log().error("jetstream-kv operation skipped seq=" + std::to_string(seq) + " outcome=malformed " + why);
    return Result<void>(sdk::fail(ErrorCode::Failed, "jetstream-kv: the operation at stream sequence " +
                                                         std::to_string(seq) + " is malformed (" + why + ")"));
  };
  std::optional<OpResult> result;
  {
    Reader r(data);
    const std::uint8_t version = r.u8();
    const std::uint8_t kind = r.u8();
    id = r.str();
    if (!r.ok() || version != kVersion) {
      result = malformed("unknown version");
    } else if (kind == kParts) {
      std::vector<std::uint64_t> parts(r.count(8));
      for (auto& p : parts) p = r.u64();
      const std::string digest = r.str();
      if (!r.ok() || !r.at_end()) {
        result = malformed("bad parts list");
      } else {
        for (std::size_t n = 0; n < parts.size() && !result; ++n) {
          MESH_TRY(part, log_->get(parts[n]));
          if (!part) {  // deleted: what this operation was is gone
            if (!gap_from_) gap_from_ = parts[n];
            return sdk::fail(gap_error());
          }
          if (part->subject != log_->part_subject(id, n))
            result = malformed("part " + std::to_string(n) + " missing");
          else
            inline_form += part->data;
        }
        if (!result && support::sha256_hex(inline_form) != digest) result = malformed("parts digest differs");
        body = &inline_form;
      }
    } else if (kind != kInline) {
      result = malformed("unknown kind");
    }
  }
  bool hook_ran = false;
  if (!result) {
    Reader r(*body);
    r.u8();
    r.u8();
    const bool same_id = r.str() == id;
    const auto method = static_cast<Method>(r.u8());
    if (gap_from_ && !(same_id && method == Method::Import)) {
      return sdk::fail(gap_error());  // only a whole image may follow a gap
    } else if (!same_id) {
      result = malformed("op id differs");
    } else if (method == Method::Import) {
      const std::string image = r.str();
      if (!r.ok() || !r.at_end()) {
        result = malformed("bad import");
      } else {
        // The whole file is replaced by the image, the applied sequence set inside it first.
        db_.reset();
        auto installed = install_image(image, local_path_, settings_.prefix, log_->created_ns(), seq);
        MESH_TRY(db, open_local());
        db_ = std::move(db);
        if (!installed) return sdk::fail(std::move(installed).error());
        hook_ran = true;
        gap_from_.reset();  // the image is the whole state: nothing before it is needed
        result = Result<void>{};
      }
    } else {
      MESH_TRY(db_->with_connection([&](Connection& conn) -> Result<void> {
        conn.set_before_commit([seq, &hook_ran](Connection& c) -> Result<void> {
          MESH_TRY(st, c.prepare("UPDATE jetstream_log SET last_op_seq = ?1 WHERE id = 1"));
          st.bind(1, static_cast<std::int64_t>(seq));
          MESH_TRY(st.run());
          hook_ran = true;
          return {};
        });
        return {};
      }));
      result = apply_operation(*db_, method, r, seq);
      (void)db_->with_connection([](Connection& conn) -> Result<void> {
        conn.set_before_commit({});
        return {};
      });
    }
  }
  if (const sdk::Error* e = error_of(*result); e && retryable(e->code) && !hook_ran)
    return sdk::fail(*e);  // a local failure (disk full, busy): applied later, nothing skipped
  if (!hook_ran) {
    // Nothing committed (a refused write, or one that changed nothing): only the sequence moves.
    MESH_TRY(db_->with_connection([seq](Connection& conn) -> Result<void> {
      MESH_TRY(st, conn.prepare("UPDATE jetstream_log SET last_op_seq = ?1 WHERE id = 1"));
      st.bind(1, static_cast<std::int64_t>(seq));
      return st.run();
    }));
  }
  last_op_seq_ = seq;
  position_ = std::max(position_, seq);
  return std::make_pair(std::move(id), std::move(*result));
}

template <class T, class Build>
Result<T> JetStreamKvStore::write(const char* what, Method method, Build&& build) noexcept {
  return sdk::guard(what, [&]() -> Result<T> {
    std::lock_guard lock(mutex_);
    if (!db_ || !log_)
      return sdk::fail(ErrorCode::FailedPrecondition, std::string("jetstream-kv store: ") + what + " called before open()");
    pending_ids_.clear();
    pending_result_.reset();
    struct Clear {
      JetStreamKvStore* s;
      ~Clear() {
        s->pending_ids_.clear();
        s->pending_result_.reset();
      }
    } clear{this};
    std::optional<sdk::Error> last_error;
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      MESH_TRY(catch_up());
      if (pending_result_) return take<T>(std::move(*pending_result_));  // an earlier attempt landed
      if (!db_) return sdk::fail(ErrorCode::Unavailable, "jetstream-kv: the local file '" + local_path_ + "' is not open");
      MESH_TRY(payload, build());
      const std::string id = random_id();
      Writer w;
      w.u8(kVersion);
      w.u8(kInline);
      w.str(id);
      w.u8(static_cast<std::uint8_t>(method));
      w.bytes() += payload;
      std::string message = std::move(w.bytes());
      const std::size_t limit = log_->max_payload() > 2 * kHeaderRoom ? log_->max_payload() - kHeaderRoom : kHeaderRoom;
      if (message.size() > limit) {
        // Parts first (no compare-and-swap), then the commit that names them.
        Writer c;
        c.u8(kVersion);
        c.u8(kParts);
        c.str(id);
        const std::size_t n = (message.size() + limit - 1) / limit;
        c.u64(n);
        for (std::size_t i = 0; i < n; ++i) {
          const std::string_view chunk = std::string_view(message).substr(i * limit, limit);
          MESH_TRY(p, log_->publish(log_->part_subject(id, i), chunk, std::nullopt, id + "." + std::to_string(i)));
          c.u64(p.seq);
        }
        c.str(support::sha256_hex(message));
        message = std::move(c.bytes());
      }
      pending_ids_.push_back(id);
      auto published = log_->publish(log_->op_subject(), message, last_op_seq_, id);
      if (!published) {
        // It may have landed (the answer was lost): the next catch-up finds it by its id; one
        // that lands later still holds the CAS of this attempt, so at most one attempt lands.
        last_error = std::move(published).error();
        continue;
      }
      if (published->wrong_last) {
        ++lost_races_;
        // Another instance wrote first: catch up, render again. Unless nothing came after our last
        // operation and it is gone from the stream (purged): then the CAS can never hold.
        const std::uint64_t expected = last_op_seq_;
        MESH_TRY(catch_up());
        if (last_op_seq_ == expected && expected > 0) {
          MESH_TRY(still, log_->get(expected));
          if (!still) {
            gap_from_ = expected;
            return sdk::fail(gap_error());
          }
        }
        continue;
      }
      // Only parts should lie between the last operation applied and this one (the CAS held),
      // but nats-server 2.9 can accept two publishes expecting the same sequence on a clustered
      // stream: whatever is there is applied first, in the log's order, as every instance does.
      MESH_TRY(catch_up_to(published->seq - 1));
      if (pending_result_) return take<T>(std::move(*pending_result_));
      MESH_TRY(applied, apply(published->seq, message));
      if (const sdk::Error* e = error_of(applied.second); e && is_prediction_mismatch(*e)) {
        ++lost_races_;  // rendered for a state another write changed: nothing written; again
        pending_ids_.clear();
        continue;
      }
      return take<T>(std::move(applied.second));
    }
    if (last_error) return sdk::fail(ErrorCode::Unavailable, last_error->message);
    return sdk::fail(ErrorCode::Transient, std::string("jetstream-kv: ") + what + " lost the compare-and-swap " +
                                               std::to_string(kMaxAttempts) + " times in a row; try again");
  });
}

template <class F>
auto JetStreamKvStore::read(const char* what, F&& f) noexcept {
  using R = decltype(f(std::declval<sqlite::SqliteStore&>()));
  return sdk::guard(what, [&]() -> R {
    std::lock_guard lock(mutex_);
    if (!db_ || !log_)
      return sdk::fail(ErrorCode::FailedPrecondition, std::string("jetstream-kv store: ") + what + " called before open()");
    MESH_TRY(catch_up());
    if (!db_) return sdk::fail(ErrorCode::Unavailable, "jetstream-kv: the local file '" + local_path_ + "' is not open");
    return f(*db_);
  });
}

// --- reads -----------------------------------------------------------------------------------------

Result<std::vector<sdk::NodeRecord>> JetStreamKvStore::nodes() noexcept {
  return read("nodes", [&](sqlite::SqliteStore& s) { return s.nodes(); });
}
Result<sdk::NodeRecord> JetStreamKvStore::node(const std::string& name) noexcept {
  return read("node", [&](sqlite::SqliteStore& s) { return s.node(name); });
}
Result<std::vector<sdk::TokenRecord>> JetStreamKvStore::tokens(std::int64_t now_ms) noexcept {
  return read("tokens", [&](sqlite::SqliteStore& s) { return s.tokens(now_ms); });
}
Result<std::optional<sdk::RevisionRecord>> JetStreamKvStore::latest_revision(const std::string& n) noexcept {
  return read("latest_revision", [&](sqlite::SqliteStore& s) { return s.latest_revision(n); });
}
Result<sdk::RevisionRecord> JetStreamKvStore::revision(const std::string& n, std::uint64_t r) noexcept {
  return read("revision", [&](sqlite::SqliteStore& s) { return s.revision(n, r); });
}
Result<std::vector<sdk::RevisionRecord>> JetStreamKvStore::history(const std::string& n, std::uint32_t limit) noexcept {
  return read("history", [&](sqlite::SqliteStore& s) { return s.history(n, limit); });
}
Result<std::optional<sdk::RevisionRef>> JetStreamKvStore::next_revision(const std::string& n, std::uint64_t r) noexcept {
  return read("next_revision", [&](sqlite::SqliteStore& s) { return s.next_revision(n, r); });
}
Result<sdk::DeliveryRecord> JetStreamKvStore::delivery(std::uint64_t id) noexcept {
  return read("delivery", [&](sqlite::SqliteStore& s) { return s.delivery(id); });
}
Result<std::optional<sdk::DeliveryRecord>> JetStreamKvStore::latest_delivery() noexcept {
  return read("latest_delivery", [&](sqlite::SqliteStore& s) { return s.latest_delivery(); });
}
Result<std::optional<sdk::ApplyReport>> JetStreamKvStore::apply_report(const std::string& n, std::uint64_t r) noexcept {
  return read("apply_report", [&](sqlite::SqliteStore& s) { return s.apply_report(n, r); });
}
Result<std::vector<sdk::ApplyReport>> JetStreamKvStore::apply_reports(const std::string& n, std::uint32_t limit) noexcept {
  return read("apply_reports", [&](sqlite::SqliteStore& s) { return s.apply_reports(n, limit); });
}
Result<std::optional<sdk::DriftReport>> JetStreamKvStore::last_drift(const std::string& n, bool items_only) noexcept {
  return read("last_drift", [&](sqlite::SqliteStore& s) { return s.last_drift(n, items_only); });
}
Result<std::vector<std::string>> JetStreamKvStore::owned(const std::string& n) noexcept {
  return read("owned", [&](sqlite::SqliteStore& s) { return s.owned(n); });
}
Result<std::vector<sdk::OwnedRecord>> JetStreamKvStore::recovery_copy(const std::string& n) noexcept {
  return read("recovery_copy", [&](sqlite::SqliteStore& s) { return s.recovery_copy(n); });
}
Result<std::vector<sdk::NodeRecord>> JetStreamKvStore::all_nodes() noexcept {
  return read("all_nodes", [&](sqlite::SqliteStore& s) { return s.all_nodes(); });
}
Result<std::optional<std::string>> JetStreamKvStore::provider_schemas(const std::string& n) noexcept {
  return read("provider_schemas", [&](sqlite::SqliteStore& s) { return s.provider_schemas(n); });
}
Result<std::optional<sdk::StoredRecord>> JetStreamKvStore::record(const std::string& ns, const std::string& key) noexcept {
  return read("record", [&](sqlite::SqliteStore& s) { return s.record(ns, key); });
}
Result<std::vector<sdk::StoredRecord>> JetStreamKvStore::records(const std::string& ns, const std::string& prefix) noexcept {
  return read("records", [&](sqlite::SqliteStore& s) { return s.records(ns, prefix); });
}

// --- writes ----------------------------------------------------------------------------------------

Result<void> JetStreamKvStore::add_token(const sdk::TokenRecord& token) noexcept {
  return write<void>("add_token", Method::AddToken, [&]() -> Result<std::string> {
    Writer w;
    put(w, token);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::revoke_token(const std::string& id) noexcept {
  return write<void>("revoke_token", Method::RevokeToken, [&]() -> Result<std::string> {
    Writer w;
    w.str(id);
    return std::move(w.bytes());
  });
}
Result<sdk::NodeRecord> JetStreamKvStore::enrol(const std::string& token_hash, const std::string& node,
                                                const std::string& public_key, std::int64_t now_ms) noexcept {
  return write<sdk::NodeRecord>("enrol", Method::Enrol, [&]() -> Result<std::string> {
    Writer w;
    w.str(token_hash);
    w.str(node);
    w.str(public_key);
    w.i64(now_ms);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::set_briefing(const std::string& node, const std::string& briefing, bool eligible) noexcept {
  return write<void>("set_briefing", Method::SetBriefing, [&]() -> Result<std::string> {
    Writer w;
    w.str(node);
    w.str(briefing);
    w.boolean(eligible);
    return std::move(w.bytes());
  });
}
Result<bool> JetStreamKvStore::record_apply(const sdk::ApplyReport& report) noexcept {
  return write<bool>("record_apply", Method::RecordApply, [&]() -> Result<std::string> {
    Writer w;
    put(w, report);
    return std::move(w.bytes());
  });
}
Result<bool> JetStreamKvStore::record_drift(const sdk::DriftReport& report) noexcept {
  return write<bool>("record_drift", Method::RecordDrift, [&]() -> Result<std::string> {
    Writer w;
    put(w, report);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::touch(const std::vector<sdk::ContactUpdate>& updates) noexcept {
  if (updates.empty()) return {};
  return write<void>("touch", Method::Touch, [&]() -> Result<std::string> {
    Writer w;
    w.u64(updates.size());
    for (const auto& u : updates) put(w, u);
    return std::move(w.bytes());
  });
}
Result<sdk::NodeRecord> JetStreamKvStore::remove_node(const std::string& node, std::int64_t now_ms, bool purge) noexcept {
  return write<sdk::NodeRecord>("remove_node", Method::RemoveNode, [&]() -> Result<std::string> {
    Writer w;
    w.str(node);
    w.i64(now_ms);
    w.boolean(purge);
    return std::move(w.bytes());
  });
}
Result<std::optional<sdk::RequestRecord>> JetStreamKvStore::remember_request(const sdk::RequestRecord& request,
                                                                             std::int64_t now_ms) noexcept {
  return write<std::optional<sdk::RequestRecord>>("remember_request", Method::RememberRequest,
                                                  [&]() -> Result<std::string> {
                                                    Writer w;
                                                    put(w, request);
                                                    w.i64(now_ms);
                                                    return std::move(w.bytes());
                                                  });
}
Result<void> JetStreamKvStore::answer_request(const std::string& signer, const std::string& nonce,
                                              const std::string& answer) noexcept {
  return write<void>("answer_request", Method::AnswerRequest, [&]() -> Result<std::string> {
    Writer w;
    w.str(signer);
    w.str(nonce);
    w.str(answer);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::set_provider_schemas(const std::string& node, const std::string& schemas) noexcept {
  return write<void>("set_provider_schemas", Method::SetProviderSchemas, [&]() -> Result<std::string> {
    Writer w;
    w.str(node);
    w.str(schemas);
    return std::move(w.bytes());
  });
}
Result<std::vector<sdk::StoredRecord>> JetStreamKvStore::put_records(const std::vector<sdk::RecordWrite>& writes,
                                                                     std::int64_t now_ms) noexcept {
  return write<std::vector<sdk::StoredRecord>>("put_records", Method::PutRecords, [&]() -> Result<std::string> {
    return encode_put_records(writes, now_ms);
  });
}
Result<std::uint64_t> JetStreamKvStore::next_sequence(const std::string& name) noexcept {
  return write<std::uint64_t>("next_sequence", Method::NextSequence, [&]() -> Result<std::string> {
    Writer w;
    w.str(name);
    return std::move(w.bytes());
  });
}

Result<DeclarePrediction> JetStreamKvStore::predict(const std::vector<sdk::DeclarationWrite>& writes) {
  DeclarePrediction p;
  MESH_TRY(db_->with_connection([&](Connection& conn) -> Result<void> {
    for (const auto& w : writes) {
      MESH_TRY(st, conn.prepare("SELECT last_revision FROM nodes WHERE name = ?1"));
      st.bind(1, w.node);
      MESH_TRY(row, st.step());
      p.revisions.push_back((row ? st.column_uint(0) : 0) + 1);
    }
    if (!writes.empty()) {
      MESH_TRY(st, conn.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'deliveries'"));
      MESH_TRY(row, st.step());
      p.delivery = (row ? st.column_uint(0) : 0) + 1;
    }
    return {};
  }));
  return p;
}

Result<sdk::DeliveryRecord> JetStreamKvStore::declare_op(DeclareKind kind, const std::vector<sdk::DeclarationWrite>& writes,
                                                         const std::vector<sdk::RecordWrite>& records,
                                                         std::int64_t now_ms, std::uint32_t retain,
                                                         const sdk::RequestAnswer* answer) noexcept {
  return write<sdk::DeliveryRecord>("declare", Method::Declare, [&]() -> Result<std::string> {
    MESH_TRY(prediction, predict(writes));
    return encode_declare(kind, writes, records, now_ms, retain, answer, prediction);
  });
}

Result<sdk::DeliveryRecord> JetStreamKvStore::declare(const std::vector<sdk::DeclarationWrite>& writes,
                                                      std::int64_t now_ms, std::uint32_t retain) noexcept {
  return declare_op(DeclareKind::Declare, writes, {}, now_ms, retain, nullptr);
}
Result<sdk::DeliveryRecord> JetStreamKvStore::declare_answered(const std::vector<sdk::DeclarationWrite>& writes,
                                                               std::int64_t now_ms, std::uint32_t retain,
                                                               const sdk::RequestAnswer& answer) noexcept {
  return declare_op(DeclareKind::Answered, writes, {}, now_ms, retain, &answer);
}
Result<sdk::DeliveryRecord> JetStreamKvStore::declare_with(const std::vector<sdk::DeclarationWrite>& writes,
                                                           const std::vector<sdk::RecordWrite>& records,
                                                           std::int64_t now_ms, std::uint32_t retain,
                                                           const std::optional<sdk::RequestAnswer>& answer) noexcept {
  return declare_op(DeclareKind::With, writes, records, now_ms, retain, answer ? &*answer : nullptr);
}

}  // namespace mesh::stores::jetstream_kv
