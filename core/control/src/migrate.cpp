#include "migrate.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "mesh/common/config.h"
#include "mesh/common/error_text.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/common/nkey.h"
#include "mesh/common/protocol.h"
#include "mesh/control/broker.h"
#include "mesh/control/config.h"
#include "mesh/control/trust.h"
#include "instance.h"
#include "store_broker.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/store.h"

namespace mesh::control {
namespace {

int usage(const std::string& message) {
  common::logger()->error("migrate: {}", message);
  return common::kExitUsage;
}
int failed(const std::string& message, sdk::ErrorCode code = sdk::ErrorCode::Failed) {
  common::logger()->error("migrate: {}", message);
  return common::exit_code_for(code);
}

// What both stores must answer alike after the import: "" when they do, else what differs.
std::string compare(sdk::Store& from, sdk::Store& to) {
  auto a = from.all_nodes();
  auto b = to.all_nodes();
  if (!a || !b) return "listing nodes: " + (a ? b.error().describe() : a.error().describe());
  if (a->size() != b->size())
    return std::to_string(a->size()) + " nodes in the sqlite file, " + std::to_string(b->size()) + " in the stream";
  for (std::size_t i = 0; i < a->size(); ++i) {
    const auto& x = (*a)[i];
    const auto& y = (*b)[i];
    if (x.name != y.name || x.generation != y.generation || x.declared_revision != y.declared_revision ||
        x.applied_revision != y.applied_revision || x.public_key != y.public_key)
      return "node '" + x.name + "' differs";
  }
  auto da = from.latest_delivery();
  auto db = to.latest_delivery();
  if (!da || !db) return "latest delivery: " + (da ? db.error().describe() : da.error().describe());
  if (da->has_value() != db->has_value() || (*da && (*da)->id != (*db)->id)) return "the latest delivery differs";
  return {};
}

/// Writes [broker]'s authorization file for the target stream `stream` with the nodes of the
/// sqlite store `from` (and those the file lists), under keys_dir's lock for the keys. Sets
/// `*reloaded` when running servers were reloaded with a changed file; returns the exit code
/// after logging why when it could not.
std::optional<int> write_rights_for(const ControlConfig& config, const std::string& stream, sdk::Store& from,
                                    bool* reloaded) {
  std::error_code ec;
  if (!std::filesystem::exists(config.keys_dir + "/control.key", ec))
    return usage(config.file
                     .error_at("control.keys_dir", "'" + config.keys_dir +
                                                       "' holds no control.key: a migration moves a mesh that has "
                                                       "run (its keys are needed for the broker's permissions)")
                     .message);
  auto lock = detail::lock_keys_dir(config.keys_dir);
  if (!lock) return failed("keys directory " + config.keys_dir + ": " + common::described(lock.error()));
  auto keys = load_or_create_control_keys(config.keys_dir);
  if (!keys) return failed("control key: " + common::described(keys.error()));
  const std::string seed = config.keys_dir + "/broker.nk";
  const std::string text = common::nkey_user_seed(control_broker_seed(*keys)) + "\n";
  if (auto old = common::read_file(seed, text.size() + 1); !old || *old != text)
    if (auto ok = common::write_file_atomic(seed, text, 0600); !ok) return failed(common::described(ok.error()));
  lock->release();
  auto nodes = from.nodes();
  if (!nodes) return failed("sqlite store: " + common::described(nodes.error()), nodes.error().code);
  auto written = detail::write_store_rights(config, *keys, stream, broker_nodes(*keys, *nodes));
  if (!written) {
    const auto code = written.error().code;
    return failed("broker permissions: " + common::described(written.error()),
                  code == sdk::ErrorCode::InvalidArgument ? code : sdk::ErrorCode::Failed);
  }
  common::logger()->info("broker permissions written file={} stream={} nodes={} changed={} reloaded={}",
                         config.broker.authorization_file, stream, written->nodes, written->changed, written->reloaded);
  *reloaded = written->changed && written->reloaded;
  return std::nullopt;
}

}  // namespace

int run_migrate(const MigrateOptions& options) {
  if (options.to != "jetstream-kv")
    return usage("--to: '" + options.to + "' is not a store migrate can write (only jetstream-kv)");
  auto file = common::ConfigFile::load(options.config_path);
  if (!file) return usage(common::described(file.error()));
  auto config = load_control_config(*file);
  if (!config) return usage(config.error().message);
  if (config->store_plugin != "sqlite")
    return usage(config->file.error_at("store.plugin", "is '" + config->store_plugin +
                                                           "': migrate moves a sqlite store (keep [store] as it is "
                                                           "until the migration is done)")
                     .message);
  const sdk::Value store_table = file->table("store");
  const std::string source = store_table.get_string("path", config->state_dir + "/mesh.db");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec))
    return usage(config->file.error_at("store.path", "'" + source + "': no such sqlite store file").message);

  loader::LoadOptions load_options;
  load_options.role = "control";
  load_options.state_base = config->state_dir;
  auto from_plugin = loader::load_plugin(config->plugin_dirs, "store", "sqlite", load_options);
  if (!from_plugin) return failed("store plugin sqlite: " + from_plugin.error().message);
  auto to_plugin = loader::load_plugin(config->plugin_dirs, "store", options.to, load_options);
  if (!to_plugin) return failed("store plugin " + options.to + ": " + to_plugin.error().message);
  auto from = from_plugin->as<sdk::Store>();
  auto to = to_plugin->as<sdk::Store>();
  if (!from || !to) return failed("a store plugin is not a store");

  sdk::Value from_config = sdk::Value::object();
  if (store_table.is_object())
    for (const auto& [k, v] : store_table.as_object())
      if (k != "plugin") from_config.set(k, v);
  from_config.set("path", source);
  if (auto ok = from->configure(sdk::apply_defaults(from->config_schema(), std::move(from_config))); !ok)
    return usage(config->file.error_at("store." + ok.error().path, ok.error().message).message);
  if (auto ok = from->open(); !ok)
    return failed("sqlite store '" + source + "': " + common::described(ok.error()), ok.error().code);

  // The target: the [transport] servers and credentials (as mesh-control run gives them), the
  // options, and the file to import.
  sdk::Value to_config = sdk::Value::object();
  const sdk::Value transport = file->table("transport");
  if (transport.is_object())
    for (const char* key : {"servers", "user", "password_file", "nkey_seed", "tls_ca"})
      if (const sdk::Value* v = transport.find(key); v && to->config_schema().find(key)) to_config.set(key, *v);
  // With [broker] the store connects as the control plane (decision record 116).
  const bool as_control_plane = config->broker.enabled() && !to_config.find("nkey_seed") && !to_config.find("user");
  if (as_control_plane) to_config.set("nkey_seed", config->keys_dir + "/broker.nk");
  // The store's replies on the control plane's own inboxes, as under mesh-control run (decision
  // record 185).
  if (to->config_schema().find("inbox_prefix"))
    to_config.set("inbox_prefix", std::string(protocol::kControlInboxPrefix));
  if (options.replicas != 0) to_config.set("replicas", std::int64_t{options.replicas});
  if (!options.prefix.empty()) to_config.set("prefix", options.prefix);
  to_config.set("import_sqlite", source);
  if (to->config_schema().find("import_new_only")) to_config.set("import_new_only", true);
  if (auto ok = sdk::validate_against(to->config_schema(), to_config, "store"); !ok)
    return usage("the " + options.to + " store's settings: " + ok.error().describe());
  to_config = sdk::apply_defaults(to->config_schema(), std::move(to_config));
  // The control plane's user has JetStream rights only on the stream the authorization file
  // names — none while the store is sqlite: the file gets the new stream's rights first, with the
  // sqlite store's nodes, and the servers are reloaded (decision record 188).
  bool reloaded = false;
  if (as_control_plane) {
    if (auto refused = write_rights_for(*config, to_config.get_string("prefix"), *from, &reloaded)) return *refused;
  }
  if (auto ok = to->configure(to_config); !ok) return usage("the " + options.to + " store: " + ok.error().describe());
  auto opened = to->open();
  // A reload takes effect a moment after the signal: a refusal right after it is tried again.
  for (int again = 0; !opened && reloaded && opened.error().code == sdk::ErrorCode::PermissionDenied && again < 3;
       ++again) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    opened = to->open();
  }
  if (!opened) return failed(options.to + " store: " + common::described(opened.error()), opened.error().code);

  if (const std::string diff = compare(*from, *to); !diff.empty())
    return failed("the imported store does not answer as the sqlite file: " + diff);
  auto nodes = to->all_nodes();
  const std::string prefix = to_config.get_string("prefix");
  const std::int64_t replicas = to_config.get_int("replicas", 1);
  common::logger()->info("migrate file={} stream={} replicas={} nodes={} outcome=migrated", source, prefix, replicas,
                         nodes ? nodes->size() : 0);
  std::cout << "migrated " << source << " to the JetStream stream " << prefix << " (replicas " << replicas << "): "
            << (nodes ? nodes->size() : 0) << " nodes\n"
            << "now set in " << options.config_path << ":\n"
            << "  [store]\n  plugin = \"jetstream-kv\"\n  replicas = " << replicas << "\n"
            << (options.prefix.empty() ? "" : "  prefix = \"" + prefix + "\"\n")
            << "(the sqlite file is left as it was)\n";
  return 0;
}

}  // namespace mesh::control
