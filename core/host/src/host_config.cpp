#include "mesh/host/host_config.h"

#include <filesystem>

#include "mesh/common/config.h"
#include "mesh/common/duration.h"
#include "mesh/common/protocol.h"

namespace mesh::host {
namespace {

using sdk::Attribute;
using sdk::Schema;
using sdk::Value;
using sdk::ValueType;

const Schema& node_schema() {
  static const Schema s{"node", "this node", {
      {"name", ValueType::String, true, "node name: 1-64 of [a-z0-9_-], as enrolled"},
      {"state_dir", ValueType::String, true, "directory for identity, state and outbox"},
  }};
  return s;
}
const Schema& plugins_schema() {
  static const Schema s{"plugins", "plugin loading", {
      {"dir", ValueType::Any, true,
       "directory holding mesh-<kind>-<name>.so files, or a list of them searched in order (the first holding a "
       "plugin wins)"},
      {"load", ValueType::StringList, false, "provider plugins to load", {}, Value(Value::Array{Value("file")})},
  }};
  return s;
}
const Schema& timers_schema() {
  static const Schema s{"timers", "timers", {
      {"heartbeat", ValueType::String, false, "heartbeat period (duration, >= 1s)", {}, Value("30s")},
      {"drift", ValueType::String, false, "drift scan period (duration, >= 1s; jitter up to 10%)", {}, Value("30m")},
  }};
  return s;
}
const Schema& limits_schema() {
  static const Schema s{"limits", "limits", {
      {"max_message", ValueType::Int, false, "largest accepted message body, in bytes (default: broker max_payload)"},
      {"max_declaration", ValueType::Int, false,
       "largest declaration this host applies, in bytes: a local `mesh-host apply` file, or a pushed one reassembled "
       "from its parts (default 67108864, 64 MiB; the broker's limit does not bound it)"},
  }};
  return s;
}

const Schema& briefing_schema() {
  static const Schema s{"briefing", "the adoption briefing's checks", {
      {"min_free_mib", ValueType::Int, false, "free disk at the state directory below which the briefing fails (MiB)", {}, Value(100)},
  }};
  return s;
}

const Schema& paths_schema() {
  static const Schema s{"paths", "the host's path policy (decision record 24)", {
      {"deny", ValueType::StringList, false,
       "absolute paths no provider may manage, besides state_dir, this file and /var/lib/nox-mesh-control"},
      {"control_config", ValueType::String, false,
       "a control plane config (control.toml) on this machine: it, its state_dir, store path and broker files are denied"},
  }};
  return s;
}

const Schema& metrics_schema() {
  static const Schema s{"metrics", "the host's figures for node-exporter (decision record 94)", {
      {"textfile", ValueType::String, false,
       "node-exporter textfile to write (absolute, ending in .prom, in an existing directory); unset: none"},
  }};
  return s;
}

sdk::Result<HostConfig> check(const common::ConfigFile& cf) {
  if (auto r = cf.check_tables({"node", "plugins", "transport", "timers", "limits", "provider", "briefing", "paths", "metrics"}); !r)
    return sdk::fail(r.error());
  HostConfig hc;
  hc.path = cf.path();
  hc.file = cf;
  auto node = cf.check_table("node", node_schema());
  if (!node) return sdk::fail(node.error());
  hc.node = node->get_string("name");
  hc.state_dir = node->get_string("state_dir");
  if (!protocol::valid_node_name(hc.node))
    return sdk::fail(cf.error_at("node.name", "'" + hc.node +
                                                  "' is not a node name (1-64 characters of a-z, 0-9, '-', '_')"));
  if (hc.state_dir.empty() || hc.state_dir[0] != '/')
    return sdk::fail(cf.error_at("node.state_dir", "must be an absolute path"));
  auto plugins = cf.check_table("plugins", plugins_schema());
  if (!plugins) return sdk::fail(plugins.error());
  auto dirs = cf.string_or_list("plugins.dir", *plugins->find("dir"));
  if (!dirs) return sdk::fail(dirs.error());
  hc.plugin_dirs = std::move(*dirs);
  for (const auto& v : plugins->find("load")->as_array()) hc.load.push_back(v.as_string());
  Value transport = cf.table("transport");
  if (!transport.is_object()) return sdk::fail(cf.error_at("transport", "must be a table"));
  hc.transport_plugin = transport.get_string("plugin", "nats");
  if (const Value* p = transport.find("plugin"); p && !p->is_string())
    return sdk::fail(cf.error_at("transport.plugin", "must be a string"));
  transport.erase("plugin");
  hc.transport = transport;
  auto timers = cf.check_table("timers", timers_schema());
  if (!timers) return sdk::fail(timers.error());
  for (const char* key : {"heartbeat", "drift"}) {
    auto d = common::parse_duration(timers->get_string(key));
    if (!d) return sdk::fail(cf.error_at(std::string("timers.") + key, d.error().message));
    if (d->count() < 1000) return sdk::fail(cf.error_at(std::string("timers.") + key, "must be at least 1s"));
    (std::string(key) == "heartbeat" ? hc.heartbeat : hc.drift) = *d;
  }
  auto limits = cf.check_table("limits", limits_schema());
  if (!limits) return sdk::fail(limits.error());
  if (const Value* m = limits->find("max_message")) {
    if (m->as_int() < 1024) return sdk::fail(cf.error_at("limits.max_message", "must be at least 1024 bytes"));
    hc.max_message = static_cast<std::size_t>(m->as_int());
  }
  if (const Value* m = limits->find("max_declaration")) {
    if (m->as_int() < 1024)
      return sdk::fail(cf.error_at("limits.max_declaration", "must be at least 1024 bytes"));
    hc.max_declaration = static_cast<std::size_t>(m->as_int());
  }
  auto briefing = cf.check_table("briefing", briefing_schema());
  if (!briefing) return sdk::fail(briefing.error());
  if (briefing->get_int("min_free_mib", 100) < 0)
    return sdk::fail(cf.error_at("briefing.min_free_mib", "must not be negative"));
  hc.min_free_mib = static_cast<std::uint64_t>(briefing->get_int("min_free_mib", 100));
  auto paths = cf.check_table("paths", paths_schema());
  if (!paths) return sdk::fail(paths.error());
  if (const Value* deny = paths->find("deny")) {
    for (std::size_t i = 0; i < deny->as_array().size(); ++i) {
      const std::string& p = deny->as_array()[i].as_string();
      if (p.empty() || p[0] != '/' || p == "/")
        return sdk::fail(cf.error_at("paths.deny", "entry " + std::to_string(i) + " ('" + p +
                                                       "') must be an absolute path other than /"));
      hc.deny.push_back(p);
    }
  }
  hc.control_config = paths->get_string("control_config");
  if (!hc.control_config.empty() && hc.control_config[0] != '/')
    return sdk::fail(cf.error_at("paths.control_config", "must be an absolute path"));
  auto metrics = cf.check_table("metrics", metrics_schema());
  if (!metrics) return sdk::fail(metrics.error());
  hc.metrics_textfile = metrics->get_string("textfile");
  if (const Value* t = metrics->find("textfile")) {
    const std::filesystem::path p(t->as_string());
    std::error_code ec;
    if (!p.is_absolute() || p.extension() != ".prom" || p.filename() == ".prom")
      return sdk::fail(cf.error_at("metrics.textfile", "must be an absolute path ending in .prom (node-exporter reads only those)"));
    if (!std::filesystem::is_directory(p.parent_path(), ec))
      return sdk::fail(cf.error_at("metrics.textfile", "its directory " + p.parent_path().string() + " does not exist"));
  }
  Value providers = cf.table("provider");
  for (const auto& [name, table] : providers.as_object()) {
    if (!table.is_object()) return sdk::fail(cf.error_at("provider." + name, "must be a table"));
    hc.provider_config[name] = table;
  }
  return hc;
}

}  // namespace

sdk::Result<HostConfig> parse_host_config(const std::string& text, const std::string& path) {
  auto cf = common::ConfigFile::parse(text, path);
  if (!cf) return sdk::fail(cf.error());
  return check(*cf);
}

sdk::Result<HostConfig> load_host_config(const std::string& path) {
  auto cf = common::ConfigFile::load(path);
  if (!cf) return sdk::fail(cf.error());
  return check(*cf);
}

}  // namespace mesh::host
