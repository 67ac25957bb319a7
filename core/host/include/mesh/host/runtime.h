// Loading what mesh-host needs from its config: provider plugins into a registry, the transport.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mesh/engine/declaration.h"
#include "mesh/host/host_config.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/transport.h"

namespace mesh::host {

/// The plugin folder used when no config names one: `<exe>/../lib/nox-mesh/plugins`, or the
/// GNU multiarch libdir variant, whichever exists; else the build-time install path.
std::string default_plugin_dir();

struct Providers {
  std::vector<loader::LoadedPlugin> plugins;
  engine::ProviderRegistry registry;
};

/// Loads each provider named in `names` from the first of `dirs` holding it
/// (loader::load_plugin), checks its `[provider.<name>]` table (when
/// `config` is given) against its config_schema() and configures it. Errors name the plugin file
/// or the config file:line:key.
sdk::Result<Providers> load_providers(const loader::PluginDirs& dirs, const std::vector<std::string>& names,
                                      const HostConfig* config, const std::string& state_dir);

/// Loads and configures the transport plugin named in the config ([transport] table). With
/// `node_credentials`, a node that received its own broker nkey at enrolment
/// (`<state_dir>/broker.nk`) connects with it instead of the table's user/password or nkey, and
/// takes its replies on `_INBOX.node.<node>` (the only inbox its broker user may read); without
/// `node_credentials` (enrolment) replies come on `_INBOX.enrol` unless the table sets
/// `inbox_prefix`. Both only when the transport's schema has `inbox_prefix`. The host's own
/// defaults (host_transport_defaults) are added before configure.
sdk::Result<std::shared_ptr<sdk::Transport>> load_transport(const HostConfig& config, bool node_credentials = true);

/// The transport settings a host wants unless its [transport] table says otherwise, each only
/// when the transport's `schema` has the key and `table` lacks it: `shared_delivery = true`
/// (decision 113: the declarations' handler hands work to the worker and never blocks, so one
/// nats.c delivery thread serves it) and `per_request_inbox = true` (decision 161: every request
/// is made by the worker, which takes its reply itself; no reply-subscription thread). Changes
/// `table` in place; pure, no I/O, thread-safe for distinct tables.
void host_transport_defaults(const sdk::Schema& schema, sdk::Value& table);

}  // namespace mesh::host
