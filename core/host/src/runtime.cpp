#include "mesh/host/runtime.h"

#include <algorithm>
#include <filesystem>
#include <unistd.h>

#include "mesh/common/protocol.h"
#include "mesh/host/path_policy.h"

namespace mesh::host {

#ifndef MESH_INSTALL_PLUGIN_DIR
#define MESH_INSTALL_PLUGIN_DIR "/usr/lib/nox-mesh/plugins"
#endif

std::string default_plugin_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto prefix = exe.parent_path().parent_path();
    for (const char* rel : {"lib/nox-mesh/plugins", "lib/x86_64-linux-gnu/nox-mesh/plugins",
                            "lib/aarch64-linux-gnu/nox-mesh/plugins", "lib64/nox-mesh/plugins",
                            "plugins"}) {
      auto p = prefix / rel;
      if (std::filesystem::is_directory(p, ec)) return p.string();
    }
  }
  return MESH_INSTALL_PLUGIN_DIR;
}


sdk::Result<Providers> load_providers(const loader::PluginDirs& dirs, const std::vector<std::string>& names,
                                      const HostConfig* config, const std::string& state_dir) {
  Providers out;
  loader::LoadOptions opts{"host", state_dir};
  // The names and the folder came from the config file (not from --load / --plugin-dir): a
  // provider that is not there is an error in that file, named as such.
  const bool from_config = config && names == config->load && dirs == config->plugin_dirs;
  // The host's path policy goes to every provider whose config takes it (path_policy.h).
  auto denied = denied_paths(config, state_dir);
  if (!denied) return sdk::fail(denied.error());
  for (const auto& name : names) {
    auto lp = loader::load_plugin(dirs, "provider", name, opts);
    if (!lp && from_config && lp.error().code == sdk::ErrorCode::NotFound)
      return sdk::fail(config->file.error_at(
          "plugins.load", "no provider '" + name + "': " + lp.error().message + " (providers in " + loader::describe_dirs(dirs) +
                              ": " + loader::plugin_names_in(dirs, "provider") + ")"));
    if (!lp) return sdk::fail(lp.error());
    auto provider = lp->as<sdk::Provider>();
    if (!provider)
      return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                       "plugin " + lp->path + " says it is a provider but does not implement the provider interface");
    sdk::Value cfg = sdk::Value::object();
    if (config) {
      auto checked = config->file.check_table("provider." + name, provider->config_schema());
      if (!checked) return sdk::fail(checked.error());
      cfg = *checked;
    } else {
      cfg = sdk::apply_defaults(provider->config_schema(), cfg);
    }
    add_denied_roots(cfg, provider->config_schema().find("denied_roots") != nullptr, *denied);
    if (auto r = provider->configure(cfg); !r) {
      auto e = r.error();
      if (config && !e.path.empty())
        return sdk::fail(config->file.error_at("provider." + name + "." + e.path, e.message));
      return sdk::fail(e.code, "provider " + name + ": " + e.describe(), e.path);
    }
    // Whatever the provider does with denied_roots, a resource whose id is a denied path never
    // reaches it (path_policy.h): this covers providers that take no policy of their own.
    if (auto r = out.registry.add(name, guard_paths(provider, *denied)); !r) return sdk::fail(r.error());
    out.plugins.push_back(std::move(*lp));
  }
  return out;
}

void host_transport_defaults(const sdk::Schema& schema, sdk::Value& table) {
  // Handlers of a host's subscriptions only hand work to the worker: one shared delivery thread
  // serves them all (decision 113), unless host.toml says otherwise.
  if (schema.find("shared_delivery") != nullptr && !table.find("shared_delivery")) table.set("shared_delivery", true);
  // Requests are made by the worker (and enrolment's one thread), which can take its own reply:
  // no thread for nats.c's shared reply subscription (decision 161).
  if (schema.find("per_request_inbox") != nullptr && !table.find("per_request_inbox"))
    table.set("per_request_inbox", true);
}

sdk::Result<std::shared_ptr<sdk::Transport>> load_transport(const HostConfig& config, bool node_credentials) {
  auto lp = loader::load_plugin(config.plugin_dirs, "transport", config.transport_plugin,
                                {"host", config.state_dir});
  if (!lp && lp.error().code == sdk::ErrorCode::NotFound)
    return sdk::fail(config.file.error_at(
        "transport.plugin", "no transport '" + config.transport_plugin + "': " + lp.error().message +
                                " (transports in " + loader::describe_dirs(config.plugin_dirs) + ": " +
                                loader::plugin_names_in(config.plugin_dirs, "transport") +
                                ")"));
  if (!lp) return sdk::fail(lp.error());
  auto transport = lp->as<sdk::Transport>();
  if (!transport)
    return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                     "plugin " + lp->path + " does not implement the transport interface");
  auto checked = config.file.check_table("transport", transport->config_schema(), {"plugin"});
  if (!checked) return sdk::fail(checked.error());
  // After enrolment the node connects as itself: the nkey mesh-control minted for it (allowed to
  // publish only under its own name) replaces the enrolment credentials of host.toml.
  const std::string node_seed = config.state_dir + "/broker.nk";
  // Replies come on an inbox prefix of its own (docs/security.md "Broker permissions"): the
  // node's under its own credentials, the enrolment one otherwise (unless host.toml names one).
  const bool has_inbox_prefix = transport->config_schema().find("inbox_prefix") != nullptr;
  if (node_credentials && ::access(node_seed.c_str(), R_OK) == 0) {
    checked->erase("user");
    checked->erase("password_file");
    checked->set("nkey_seed", node_seed);
    if (has_inbox_prefix) checked->set("inbox_prefix", protocol::node_inbox_prefix(config.node));
  } else if (!node_credentials && has_inbox_prefix && !checked->find("inbox_prefix")) {
    checked->set("inbox_prefix", protocol::kEnrolInboxPrefix);
  }
  host_transport_defaults(transport->config_schema(), *checked);
  if (auto r = transport->configure(*checked); !r) {
    auto e = r.error();
    if (!e.path.empty()) return sdk::fail(config.file.error_at("transport." + e.path, e.message));
    return sdk::fail(e.code, "transport " + config.transport_plugin + ": " + e.describe());
  }
  return transport;
}

}  // namespace mesh::host
