#include "mesh/control/config.h"

#include <pwd.h>

#include <cerrno>
#include <vector>

#include "mesh/common/duration.h"
#include "mesh/common/protocol.h"
#include "mesh/control/repository_server.h"

namespace mesh::control {
namespace {

using sdk::Attribute;
using sdk::ErrorCode;
using sdk::Schema;
using sdk::Value;
using sdk::ValueType;

const std::vector<std::string> kTables = {"control", "plugins", "store", "transport", "limits", "broker", "stages", "repository", "content", "pipelines", "metrics"};

// The `plugin` key of [store] / [transport]: a string naming the plugin file.
sdk::Result<std::string> plugin_name(const common::ConfigFile& file, const std::string& table,
                                     const std::string& fallback) {
  Value t = file.table(table);
  const Value* p = t.find("plugin");
  if (!p) return fallback;
  if (!p->is_string()) return sdk::fail(file.error_at(table + ".plugin", "must be a string"));
  const std::string& name = p->as_string();
  bool ok = !name.empty();
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
  if (!ok)
    return sdk::fail(file.error_at(table + ".plugin",
                                   "'" + name + "' is not a plugin name (lower-case letters, "
                                   "digits, '-' and '_')"));
  return name;
}

}  // namespace

const Schema& control_table_schema() {
  static const Schema s{
      "control",
      "the control plane itself",
      {Attribute{"state_dir", ValueType::String, true,
                 "directory for keys, plugin state and (by default) the sqlite file; created "
                 "with mode 0700"},
       Attribute{"keys_dir", ValueType::String, false,
                 "directory of the key material several control planes share (control.key, "
                 "control.pub, broker.nk, operators.json, admin.identity); default: state_dir. "
                 "The instance id (state_dir/instance.id) stays in state_dir"},
       Attribute{"lease", ValueType::String, false,
                 "how long this instance holds the lease on background work (re-pushes, "
                 "staged-deploy waves, broker permissions) without renewing it: another "
                 "instance takes it over that long after this one died (2s..10m)", {}, Value("15s")},
       Attribute{"retain", ValueType::Int, false,
                 "declaration revisions kept per node (older ones are pruned)", {}, Value(50)},
       Attribute{"heartbeat_flush", ValueType::String, false,
                 "how often batched heartbeats are written to the store (at most 500ms)", {},
                 Value("250ms")},
       Attribute{"clock_tolerance", ValueType::String, false,
                 "how far a signed request's timestamp may be from this clock, either way "
                 "(1s..1h); also the briefing's clock check", {}, Value("60s")}}};
  return s;
}

const Schema& plugins_table_schema() {
  static const Schema s{
      "plugins",
      "where plugins are loaded from",
      {Attribute{"dir", ValueType::Any, true,
                 "the plugin directory, or a list of them searched in order (the first holding a plugin "
                 "wins)"}}};
  return s;
}

const Schema& limits_table_schema() {
  static const Schema s{
      "limits",
      "message limits",
      {Attribute{"max_message", ValueType::Int, false,
                 "largest accepted message body, in bytes (the broker's max_payload when unset "
                 "or larger)"},
       Attribute{"max_assembled", ValueType::Int, false,
                 "largest message accepted in parts (reports, declarations uploaded by mesh "
                 "declare), in bytes; default 67108864 (64 MiB)"},
       Attribute{"node_store_rate", ValueType::Int, false,
                 "bytes per second one node's reports, drift reports and briefings may make the store "
                 "write, on average; default 16384 (decision record 186)"},
       Attribute{"node_store_burst", ValueType::Int, false,
                 "bytes one node's reports, drift reports and briefings may make the store write at once; "
                 "default 1048576"}}};
  return s;
}

const Schema& broker_table_schema() {
  static const Schema s{
      "broker",
      "broker permissions maintained by mesh-control (docs/security.md)",
      {Attribute{"authorization_file", ValueType::String, false,
                 "nats-server authorization file to write (include it from the server config); "
                 "unset: broker permissions are not managed"},
       Attribute{"pid_file", ValueType::Any, false,
                 "nats-server's pid_file, signalled to reload; or a list of them (every server on this "
                 "machine that includes the authorization file)"},
       Attribute{"enrol_user", ValueType::String, false, "user new nodes enrol as", {}, Value("mesh-enrol")},
       Attribute{"enrol_password_file", ValueType::String, false, "file holding the enrolment user's password"},
       Attribute{"operator_user", ValueType::String, false, "user `mesh` connects as", {}, Value("mesh-operator")},
       Attribute{"operator_password_file", ValueType::String, false, "file holding the operators' user's password"}}};
  return s;
}

const Schema& repository_table_schema() {
  static const Schema s{
      "repository",
      "the mesh's apt repository (written by the publish stage), served read-only over HTTP",
      {Attribute{"dir", ValueType::String, false,
                 "the repository's directory (dists/, pool/); the publish stage's default "
                 "repository"},
       Attribute{"listen", ValueType::String, false,
                 "loopback address and port to serve the directory on over HTTP, e.g. "
                 "127.0.0.1:8080 (unset: not served by mesh-control)"}}};
  return s;
}

const Schema& content_table_schema() {
  static const Schema s{
      "content",
      "file content by digest (mesh content push; a file resource's source = \"sha256:<hex>\")",
      {Attribute{"dir", ValueType::String, false,
                 "the content directory (sha256/, incoming/), shared by every instance like the "
                 "repository; default: state_dir/content"}}};
  return s;
}

const Schema& pipelines_table_schema() {
  static const Schema s{
      "pipelines",
      "pipelines run by mesh-control (mesh pipeline run)",
      {Attribute{"dir", ValueType::String, false,
                 "directory of the pipeline files (<name>.toml), on this host; unset: no pipelines"},
       Attribute{"build_user", ValueType::String, false,
                 "the unprivileged user build commands run as (never root; required when mesh-control runs as "
                 "root)"}}};
  return s;
}

sdk::Result<ControlConfig> load_control_config(const common::ConfigFile& file) {
  ControlConfig c;
  c.file = file;
  if (auto ok = file.check_tables(kTables); !ok) return sdk::fail(ok.error());

  auto control = file.check_table("control", control_table_schema());
  if (!control) return sdk::fail(control.error());
  c.state_dir = control->get_string("state_dir");
  if (c.state_dir.empty()) return sdk::fail(file.error_at("control.state_dir", "must not be empty"));
  c.keys_dir = control->get_string("keys_dir", c.state_dir);
  if (c.keys_dir.empty()) return sdk::fail(file.error_at("control.keys_dir", "must not be empty"));
  auto lease = common::parse_duration(control->get_string("lease", "15s"));
  if (!lease) return sdk::fail(file.error_at("control.lease", lease.error().message));
  if (lease->count() < 2000 || lease->count() > 600 * 1000)
    return sdk::fail(file.error_at("control.lease", "must be between 2s and 10m"));
  c.lease = *lease;
  std::int64_t retain = control->get_int("retain", 50);
  if (retain < 1 || retain > 100000)
    return sdk::fail(file.error_at("control.retain", "must be between 1 and 100000"));
  c.retain = static_cast<std::uint32_t>(retain);
  auto flush = common::parse_duration(control->get_string("heartbeat_flush", "250ms"));
  if (!flush) return sdk::fail(file.error_at("control.heartbeat_flush", flush.error().message));
  if (flush->count() < 1 || *flush > kMaxHeartbeatFlush)
    return sdk::fail(file.error_at("control.heartbeat_flush",
                                   "must be between 1ms and " +
                                       common::format_duration(kMaxHeartbeatFlush)));
  c.heartbeat_flush = *flush;
  auto tolerance = common::parse_duration(control->get_string("clock_tolerance", "60s"));
  if (!tolerance) return sdk::fail(file.error_at("control.clock_tolerance", tolerance.error().message));
  if (tolerance->count() < 1000 || tolerance->count() > 3600 * 1000)
    return sdk::fail(file.error_at("control.clock_tolerance", "must be between 1s and 1h"));
  c.clock_tolerance = *tolerance;

  auto plugins = file.check_table("plugins", plugins_table_schema());
  if (!plugins) return sdk::fail(plugins.error());
  auto dirs = file.string_or_list("plugins.dir", *plugins->find("dir"));
  if (!dirs) return sdk::fail(dirs.error());
  c.plugin_dirs = std::move(*dirs);

  auto limits = file.check_table("limits", limits_table_schema());
  if (!limits) return sdk::fail(limits.error());
  if (const Value* m = limits->find("max_message")) {
    if (m->as_int() < 1024)
      return sdk::fail(file.error_at("limits.max_message", "must be at least 1024 bytes"));
    c.max_message = static_cast<std::size_t>(m->as_int());
  }
  if (const Value* m = limits->find("max_assembled")) {
    if (m->as_int() < 1024)
      return sdk::fail(file.error_at("limits.max_assembled", "must be at least 1024 bytes"));
    c.max_assembled = static_cast<std::size_t>(m->as_int());
  }
  if (const Value* m = limits->find("node_store_rate")) {
    if (m->as_int() < 1024) return sdk::fail(file.error_at("limits.node_store_rate", "must be at least 1024 bytes"));
    c.node_store_rate = static_cast<double>(m->as_int());
  }
  if (const Value* m = limits->find("node_store_burst")) {
    if (m->as_int() < 4096) return sdk::fail(file.error_at("limits.node_store_burst", "must be at least 4096 bytes"));
    c.node_store_burst = static_cast<double>(m->as_int());
  }

  auto broker = file.check_table("broker", broker_table_schema());
  if (!broker) return sdk::fail(broker.error());
  c.broker.authorization_file = broker->get_string("authorization_file");
  if (const Value* pid = broker->find("pid_file")) {
    auto pids = file.string_or_list("broker.pid_file", *pid);
    if (!pids) return sdk::fail(pids.error());
    c.broker.pid_files = std::move(*pids);
  }
  c.broker.enrol_user = broker->get_string("enrol_user", "mesh-enrol");
  c.broker.enrol_password_file = broker->get_string("enrol_password_file");
  c.broker.operator_user = broker->get_string("operator_user", "mesh-operator");
  c.broker.operator_password_file = broker->get_string("operator_password_file");

  // [stages]: `load`, and one sub-table per stage plugin (checked when the plugins are loaded).
  {
    Value t = file.table("stages");
    std::vector<std::string> subtables;
    if (t.is_object())
      for (const auto& [k, v] : t.as_object())
        if (v.is_object()) subtables.push_back(k);
    Schema stages{"stages", "stage plugins", {Attribute{"load", ValueType::Any, false, "stage plugins to load"}}};
    auto checked = file.check_table("stages", stages, subtables);
    if (!checked) return sdk::fail(checked.error());
    if (const Value* load = checked->find("load")) {
      if (load->is_array() && load->as_array().empty()) {
      } else {
        auto names = file.string_or_list("stages.load", *load);
        if (!names) return sdk::fail(names.error());
        c.stages_load = std::move(*names);
      }
    }
  }
  auto repository = file.check_table("repository", repository_table_schema());
  if (!repository) return sdk::fail(repository.error());
  c.repository.dir = repository->get_string("dir");
  c.repository.listen = repository->get_string("listen");
  if (!c.repository.listen.empty() && c.repository.dir.empty())
    return sdk::fail(file.error_at("repository.listen", "needs repository.dir (the directory to serve)"));
  if (!c.repository.dir.empty() && c.repository.dir.front() != '/')
    return sdk::fail(file.error_at("repository.dir", "must be an absolute path"));
  if (!c.repository.listen.empty())
    if (auto a = parse_listen_address(c.repository.listen); !a)
      return sdk::fail(file.error_at("repository.listen", a.error().message));

  auto content = file.check_table("content", content_table_schema());
  if (!content) return sdk::fail(content.error());
  c.content_dir = content->get_string("dir");
  if (!c.content_dir.empty() && c.content_dir.front() != '/')
    return sdk::fail(file.error_at("content.dir", "must be an absolute path"));
  if (c.content_dir.empty()) c.content_dir = c.state_dir + "/content";

  auto metrics = load_metrics_settings(file);
  if (!metrics) return sdk::fail(metrics.error());
  c.metrics = std::move(*metrics);

  auto pipelines = file.check_table("pipelines", pipelines_table_schema());
  if (!pipelines) return sdk::fail(pipelines.error());
  c.pipelines.dir = pipelines->get_string("dir");
  c.pipelines.build_user = pipelines->get_string("build_user");
  c.pipelines.report_plugin_dirs = c.plugin_dirs;
  if (!c.pipelines.dir.empty() && c.pipelines.dir.front() != '/')
    return sdk::fail(file.error_at("pipelines.dir", "must be an absolute path"));
  if (c.pipelines.build_user == "root")
    return sdk::fail(file.error_at("pipelines.build_user", "builds never run as root: name an unprivileged user"));

  auto store = plugin_name(file, "store", "sqlite");
  if (!store) return sdk::fail(store.error());
  c.store_plugin = *store;
  if (c.store_plugin == "jetstream-kv") {
    const Value st = file.table("store");
    c.broker.store_stream = st.is_object() ? st.get_string("prefix", "MESH_STORE") : "MESH_STORE";
  }
  auto transport = plugin_name(file, "transport", "nats");
  if (!transport) return sdk::fail(transport.error());
  c.transport_plugin = *transport;
  return c;
}

sdk::Result<Value> plugin_table(const ControlConfig& config, std::string_view table,
                                const Schema& schema) {
  const common::ConfigFile& file = config.file;
  Value t = file.table(table);
  if (!t.is_object()) return sdk::fail(file.error_at(table, "must be a table"));
  Value filtered = Value::object();
  for (const auto& [k, v] : t.as_object())
    if (k != "plugin") filtered.set(k, v);
  // The store keeps its file in the state directory unless told otherwise (documented in
  // INTERFACE.md: "the sqlite file by default").
  if (table == "store" && schema.find("path") && !filtered.find("path"))
    filtered.set("path", config.state_dir + "/mesh.db");
  // A store that connects to NATS itself (jetstream-kv, decision 87) uses the [transport]
  // settings it does not set: each key its schema has, copied from the transport table.
  if (table == "store")
    if (const Value transport = file.table("transport"); transport.is_object())
      for (const char* key : {"servers", "user", "password_file", "nkey_seed", "tls_ca"})
        if (schema.find(key) && !filtered.find(key))
          if (const Value* v = transport.find(key)) filtered.set(key, *v);
  // With [broker], the servers know only the users of the authorization file: such a store
  // connects as the control plane itself (keys_dir/broker.nk), whose user has exactly the
  // store's JetStream rights (decision record 0116).
  if (table == "store" && config.broker.enabled() && schema.find("nkey_seed") && !filtered.find("nkey_seed") &&
      !filtered.find("user"))
    filtered.set("nkey_seed", config.keys_dir + "/broker.nk");
  // Every connection of the control plane takes its replies under its own inbox prefix, which
  // the operators' broker user may not read and the control plane never answers into (decision
  // record 185): the store's JetStream replies are nobody else's business.
  if ((table == "store" || table == "transport") && schema.find("inbox_prefix") && !filtered.find("inbox_prefix"))
    filtered.set("inbox_prefix", std::string(protocol::kControlInboxPrefix));
  if (auto ok = sdk::validate_against(schema, filtered, table); !ok) {
    const auto& e = ok.error();
    std::string message = e.message;
    // A key the store takes from [transport] when [store] does not set it: say where it may be set.
    if (table == "store")
      for (const char* key : {"servers", "user", "password_file", "nkey_seed", "tls_ca"})
        if (e.path == std::string("store.") + key && !file.table("store").find(key))
          message += " (the store takes it from [transport] " + std::string(key) + ", or set it in [store])";
    return sdk::fail(file.error_at(e.path.empty() ? std::string(table) : e.path, message));
  }
  return sdk::apply_defaults(schema, std::move(filtered));
}

sdk::Result<void> check_pipelines_on_this_machine(const ControlConfig& config, bool running_as_root) {
  if (config.pipelines.dir.empty()) return {};
  const std::string& name = config.pipelines.build_user;
  if (name.empty()) {
    if (!running_as_root) return {};
    return sdk::fail(config.file.error_at(
        "pipelines", "mesh-control runs as root and builds never do: set build_user to an unprivileged user "
                     "(e.g. build_user = \"nobody\", or a user of its own)"));
  }
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc = 0;
  while ((rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE && buf.size() < (1u << 20))
    buf.resize(buf.size() * 2);
  if (rc != 0 || !found)
    return sdk::fail(config.file.error_at("pipelines.build_user", "'" + name + "': no such user on this machine"));
  if (pw.pw_uid == 0)
    return sdk::fail(config.file.error_at("pipelines.build_user",
                                          "'" + name + "' is root (uid 0): builds never run as root"));
  return {};
}

}  // namespace mesh::control
