#include "store_broker.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <filesystem>
#include <iostream>

#include "instance.h"
#include "mesh/common/error_text.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/common/nkey.h"
#include "mesh/common/protocol.h"
#include "mesh/control/broker.h"
#include "mesh/control/trust.h"

namespace mesh::control::detail {
namespace {

bool names_credentials(const sdk::Value& table) {
  return table.is_object() && (table.find("user") || table.find("nkey_seed"));
}

}  // namespace

bool refused_as_control_plane(const sdk::Error& e) {
  return e.code == sdk::ErrorCode::PermissionDenied || e.message.find("Authorization Violation") != std::string::npos ||
         e.message.find("Authentication Violation") != std::string::npos;
}

bool store_connects_as_control_plane(const ControlConfig& config) {
  if (!config.broker.enabled() || config.broker.store_stream.empty()) return false;
  return !names_credentials(config.file.table("store")) && !names_credentials(config.file.table("transport"));
}

sdk::Result<void> prepare_store_broker_identity(const ControlConfig& config) {
  if (!store_connects_as_control_plane(config)) return {};
  if (auto ok = common::make_dirs(config.keys_dir, 0700); !ok) return sdk::fail(ok.error());
  MESH_TRY(lock, lock_keys_dir(config.keys_dir));
  // Never made here: whether this keys_dir should hold a new mesh key is known only once the
  // store was seen empty, and this store cannot be reached without the key (newuser finding 3).
  std::error_code ec;
  if (!std::filesystem::exists(config.keys_dir + "/control.key", ec))
    return sdk::fail(sdk::ErrorCode::NotFound,
                     "keys_dir '" + config.keys_dir +
                         "' has no control.key: with [broker] the jetstream-kv store connects to the servers as this "
                         "control plane's own nkey, derived from control.key, and cannot connect without it. A new mesh "
                         "is set up with `mesh-control broker-config` first (README \"The jetstream-kv store\"); an "
                         "instance of an existing mesh needs that mesh's keys_dir ([control] keys_dir). No key was made");
  MESH_TRY(keys, load_or_create_control_keys(config.keys_dir));
  const std::string path = config.keys_dir + "/broker.nk";
  const std::string text = common::nkey_user_seed(control_broker_seed(keys)) + "\n";
  if (auto old = common::read_file(path, text.size() + 1); old && *old == text) return {};
  return common::write_file_atomic(path, text, 0600);
}

void warn_if_store_stream_open(const ControlConfig& config) {
  if (config.store_plugin != "jetstream-kv" || config.broker.enabled()) return;
  if (names_credentials(config.file.table("store")) || names_credentials(config.file.table("transport"))) return;
  common::logger()->warn(
      "SECURITY: the jetstream-kv store's stream {} is open to every client of the NATS servers: no [broker] "
      "and no store credentials, so anyone who can connect can forge store operations (take the background "
      "lease, add nodes or operators) or purge the stream ($JS.API.STREAM.PURGE.{}); turn on [broker] "
      "(README \"More than one machine\")",
      config.broker.store_stream, config.broker.store_stream);
}

int store_open_failed(const ControlConfig& config, const sdk::Error& why) {
  if (why.path.empty()) {
    common::logger()->error("store {}: {}", config.store_plugin, common::described(why));
    return common::kExitFailed;
  }
  // A key of [store] the operator must change (or the broker's file): a configuration error,
  // which a restart would only repeat.
  common::logger()->error("{}", config.file.error_at("store." + why.path, why.message).message);
  return common::kExitUsage;
}

sdk::Result<std::vector<sdk::NodeRecord>> sqlite_file_nodes(const std::string& path) {
  sqlite3* db = nullptr;
  struct Close {
    sqlite3*& db;
    ~Close() { sqlite3_close(db); }
  } close{db};
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr) != SQLITE_OK)
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     "'" + path + "' cannot be opened: " + (db ? sqlite3_errmsg(db) : "out of memory"));
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  // A store older than node removal has no removed_at_ms: every row is enrolled there.
  if (sqlite3_prepare_v2(db, "SELECT name, generation, public_key FROM nodes WHERE removed_at_ms IS NULL ORDER BY name",
                         -1, &st, nullptr) != SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT name, generation, public_key FROM nodes ORDER BY name", -1, &st, nullptr) !=
          SQLITE_OK)
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     "'" + path + "' is not a sqlite store's database: " + sqlite3_errmsg(db));
  std::vector<sdk::NodeRecord> out;
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sdk::NodeRecord n;
    const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    const auto* key = reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
    n.name = name ? name : "";
    n.generation = static_cast<std::uint64_t>(sqlite3_column_int64(st, 1));
    n.public_key = key ? key : "";
    if (protocol::valid_node_name(n.name)) out.push_back(std::move(n));
  }
  const std::string why = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
  sqlite3_finalize(st);
  if (!why.empty()) return sdk::fail(sdk::ErrorCode::Unavailable, "reading the nodes of '" + path + "': " + why);
  return out;
}

sdk::Result<StoreRightsWritten> write_store_rights(const ControlConfig& config, const ControlKeys& keys,
                                                   const std::string& stream, const std::vector<BrokerNode>& nodes) {
  const std::string& path = config.broker.authorization_file;
  // Under the lock every writer of the file takes (decision record 91): an instance of this
  // machine may be writing it (it should be stopped; a restore or a migration needs that).
  MESH_TRY(file_lock, lock_keys_dir(std::filesystem::path(path).parent_path().string(), "authorization.lock"));
  StoreRightsWritten out;
  std::vector<BrokerNode> all;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    out.existed = true;
    auto text = common::read_file(path, 64 << 20);
    if (!text) return sdk::fail(text.error());
    auto parsed = parse_authorization(*text);
    if (!parsed)
      return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                       "the authorization file " + path + " is kept as it is: " + parsed.error().message);
    const std::string mine = control_broker_public(keys);
    if (parsed->control_nkey != mine)
      return sdk::fail(sdk::ErrorCode::InvalidArgument,
                       "the authorization file " + path +
                           " was written for another control plane key (its control plane user is " +
                           parsed->control_nkey + "; the one of " + config.keys_dir + "/control.key is " + mine +
                           "): it is kept as it is; check [control] keys_dir (every instance of a mesh uses the "
                           "same keys)",
                       "control.keys_dir");
    out.from_file = parsed->nodes.size();
    all = std::move(parsed->nodes);
  }
  for (const auto& n : nodes) {
    bool known = false;
    for (const auto& have : all) known = known || have.nkey == n.nkey;
    if (!known) {
      all.push_back(n);
      ++out.added;
    }
  }
  BrokerSettings broker = config.broker;
  broker.store_stream = stream;
  const auto before = common::read_file(path, 64 << 20);
  MESH_TRY(signalled, update_broker_for(broker, keys, all));
  const auto after = common::read_file(path, 64 << 20);
  out.changed = !(before && after && *before == *after);
  out.reloaded = signalled;
  out.nodes = all.size();
  return out;
}

int authorization_without_store(const ControlConfig& config, const sdk::Error& why) {
  const std::string& path = config.broker.authorization_file;
  if (!config.broker.enabled()) {
    common::logger()->error("store {}: {}", config.store_plugin, common::described(why));
    return common::kExitFailed;
  }
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  auto lock = lock_keys_dir(config.keys_dir);
  if (!lock) {
    common::logger()->error("keys directory {}: {}", config.keys_dir, common::described(lock.error()));
    return common::kExitFailed;
  }
  // A file written by a control plane means its key exists somewhere: never make a new one here
  // (it would be another mesh's, and the file's control plane user would not be it).
  if (existed && !std::filesystem::exists(config.keys_dir + "/control.key", ec)) {
    common::logger()->error("store {}: {}; keys_dir {} holds no control.key while the authorization file {} exists: "
                            "it is kept as it is; check [control] keys_dir (every instance of a mesh uses the same "
                            "keys)",
                            config.store_plugin, common::described(why), config.keys_dir, path);
    return common::kExitUsage;
  }
  auto keys = load_or_create_control_keys(config.keys_dir);
  if (!keys) {
    common::logger()->error("control key: {}", common::described(keys.error()));
    return common::kExitFailed;
  }
  const std::string seed = config.keys_dir + "/broker.nk";
  const std::string text = common::nkey_user_seed(control_broker_seed(*keys)) + "\n";
  if (auto old = common::read_file(seed, text.size() + 1); !old || *old != text)
    if (auto ok = common::write_file_atomic(seed, text, 0600); !ok) {
      common::logger()->error("{}", common::described(ok.error()));
      return common::kExitFailed;
    }
  // The nodes of the backup a new stream is to be made from (a restore: README "Back up and
  // restore"), so that its hosts are let in as soon as the servers read the file.
  std::vector<BrokerNode> extra;
  std::string import;
  if (const sdk::Value store = config.file.table("store"); store.is_object())
    import = store.get_string("import_sqlite");
  if (!import.empty()) {
    auto nodes = sqlite_file_nodes(import);
    if (nodes)
      extra = broker_nodes(*keys, *nodes);
    else
      common::logger()->warn("store.import_sqlite: the nodes of {} are not added to the authorization file: {}", import,
                             common::described(nodes.error()));
  }
  auto written = write_store_rights(config, *keys, config.broker.store_stream, extra);
  if (!written) {
    common::logger()->error("store {}: {}; {}", config.store_plugin, common::described(why),
                            common::described(written.error()));
    return written.error().code == sdk::ErrorCode::InvalidArgument ? common::kExitUsage : common::kExitFailed;
  }
  const std::string stream = config.broker.store_stream.empty() ? "-" : config.broker.store_stream;
  const std::string whence = std::to_string(written->from_file) + " from the file it replaces, " +
                             std::to_string(written->added) + " more" + (import.empty() ? "" : " from " + import);
  if (!written->changed) {
    if (why.code == sdk::ErrorCode::PermissionDenied) {
      common::logger()->error("store {}: {}; the authorization file {} already gives the control plane's user the "
                              "rights of stream {}, yet the servers refused them: do they include that file, and "
                              "were they reloaded ([broker] pid_file)?",
                              config.store_plugin, common::described(why), path, stream);
      return common::kExitFailed;
    }
    common::logger()->warn("store {} not opened ({}): the authorization file {} is unchanged (stream {}, {} "
                           "nodes); start the servers with it, then mesh-control run",
                           config.store_plugin, common::described(why), path, stream, written->nodes);
    std::cout << path << "\n";
    return common::kExitOk;
  }
  if (!written->existed)
    common::logger()->warn("store {} not opened ({}): {} written {}, with the JetStream rights of stream {} (there "
                           "was no file, so no enrolled host can be left out); start the servers with it, then "
                           "mesh-control run, which rewrites it with the store's nodes",
                           config.store_plugin, common::described(why), path,
                           import.empty() ? std::string("without nodes")
                                          : "with the " + std::to_string(written->nodes) + " nodes of " + import,
                           stream);
  else
    common::logger()->warn("store {} not opened ({}): {} rewritten with the JetStream rights of stream {}, keeping "
                           "its nodes ({} in all: {}){}; then mesh-control run, which rewrites it with the store's "
                           "nodes",
                           config.store_plugin, common::described(why), path, stream, written->nodes, whence,
                           written->reloaded ? "; servers reloaded" : "; start the servers with it");
  std::cout << path << "\n";
  return common::kExitOk;
}

}  // namespace mesh::control::detail
