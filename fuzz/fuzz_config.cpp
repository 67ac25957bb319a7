// The TOML config loader: mesh::common::ConfigFile::parse and the checks built on it — the
// host's (mesh::host::parse_host_config, then the [provider.file] and [transport] tables as
// mesh-host checks them against the plugins' schemas) and the control plane's
// (mesh::control::load_control_config, then plugin_table for [store] and [transport]).
//
// Input: one selector byte (low 2 bits: 0 host, 1 control, 2 ConfigFile alone against a schema
// with every attribute type, 3 host and control both), then the TOML text.
// Invariants: refusals are InvalidArgument and name the file ("host.toml:..."); an accepted host
// config has a valid node name, an absolute state_dir and timers of at least 1 s; an accepted
// control config has 1 <= retain <= 100000 and 1ms <= heartbeat_flush <= 500ms.
#include <cstddef>
#include <cstdint>
#include <string>

#include "file_provider.h"
#include "fuzz_support.h"
#include "mesh/common/config.h"
#include "mesh/common/protocol.h"
#include "mesh/control/config.h"
#include "mesh/host/host_config.h"

using namespace mesh;
using sdk::ValueType;

namespace {

sdk::NullLogger g_null_logger;
const sdk::HostContext g_host{MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, &g_null_logger, "", "host"};

// Copies of the built-in plugins' config schemas (transports/nats, stores/sqlite): the plugins
// are modules, loaded at run time; only their schemas matter here.
const sdk::Schema& nats_schema() {
  static const sdk::Schema s{"transport", "nats",
                             {{"servers", ValueType::StringList, true, ""},
                              {"name", ValueType::String, false, ""},
                              {"nkey_seed", ValueType::String, false, ""},
                              {"user", ValueType::String, false, ""},
                              {"password_file", ValueType::String, false, ""},
                              {"tls_ca", ValueType::String, false, ""}},
                             {{"nkey_seed", "user"}}};
  return s;
}
const sdk::Schema& sqlite_schema() {
  static const sdk::Schema s{"store", "sqlite",
                             {{"path", ValueType::String, true, ""},
                              {"busy_timeout", ValueType::Int, false, "", {}, sdk::Value(std::int64_t{5000})}}};
  return s;
}
const sdk::Schema& every_type_schema() {
  static const sdk::Schema s{"t", "every type",
                             {{"s", ValueType::String, false, "", {"a", "b"}, sdk::Value("a")},
                              {"b", ValueType::Bool, false, ""},
                              {"i", ValueType::Int, false, ""},
                              {"n", ValueType::Number, false, ""},
                              {"l", ValueType::StringList, false, ""},
                              {"m", ValueType::StringMap, false, ""},
                              {"x", ValueType::Any, false, ""},
                              {"r", ValueType::String, true, ""}},
                             {{"i", "n"}}};
  return s;
}

void check_refusal(const sdk::Error& e, const std::string& file, const char* what) {
  if (e.code != sdk::ErrorCode::InvalidArgument)
    fuzz::finding(std::string(what) + " refused with a code other than invalid_argument", e.describe());
  if (e.message.rfind(file + ":", 0) != 0)
    fuzz::finding(std::string(what) + " refusal does not name the file", e.message);
}

void host_config(const std::string& text) {
  const std::string file = "host.toml";
  auto hc = host::parse_host_config(text, file);
  if (!hc) return check_refusal(hc.error(), file, "parse_host_config");
  if (!protocol::valid_node_name(hc->node)) fuzz::finding("invalid node name accepted", hc->node);
  if (hc->state_dir.empty() || hc->state_dir[0] != '/') fuzz::finding("relative state_dir accepted");
  if (hc->heartbeat.count() < 1000 || hc->drift.count() < 1000) fuzz::finding("timer under 1s accepted");
  // What mesh-host does next (runtime.cpp): each provider's table against its config schema,
  // then configure(); the [transport] table against the transport's schema.
  if (hc->provider_config.count("file")) {
    plugins::file::FileProvider p(g_host);
    auto t = hc->file.check_table("provider.file", p.config_schema());
    if (!t) {
      check_refusal(t.error(), file, "check_table(provider.file)");
    } else if (auto ok = p.configure(*t); !ok && !fuzz::clean_refusal(ok.error().code)) {
      fuzz::finding("file provider configure", ok.error().describe());
    }
  }
  auto t = hc->file.check_table("transport", nats_schema(), {"plugin"});
  if (!t) check_refusal(t.error(), file, "check_table(transport)");
}

void control_config(const std::string& text) {
  const std::string file = "control.toml";
  auto cf = common::ConfigFile::parse(text, file);
  if (!cf) return check_refusal(cf.error(), file, "ConfigFile::parse");
  auto cc = control::load_control_config(*cf);
  if (!cc) return check_refusal(cc.error(), file, "load_control_config");
  if (cc->retain < 1 || cc->retain > 100000) fuzz::finding("retain out of range accepted");
  if (cc->heartbeat_flush.count() < 1 || cc->heartbeat_flush > control::kMaxHeartbeatFlush)
    fuzz::finding("heartbeat_flush out of range accepted");
  if (cc->state_dir.empty() || cc->plugin_dirs.empty()) fuzz::finding("empty state_dir or plugin dir accepted");
  auto store = control::plugin_table(*cc, "store", sqlite_schema());
  if (!store) check_refusal(store.error(), file, "plugin_table(store)");
  else if (!store->find("path") || !store->find("path")->is_string()) fuzz::finding("store path missing");
  auto transport = control::plugin_table(*cc, "transport", nats_schema());
  if (!transport) check_refusal(transport.error(), file, "plugin_table(transport)");
}

void generic(const std::string& text) {
  const std::string file = "any.toml";
  auto cf = common::ConfigFile::parse(text, file);
  if (!cf) return check_refusal(cf.error(), file, "ConfigFile::parse");
  if (!cf->root().is_object()) fuzz::finding("config root is not an object");
  if (auto ok = cf->check_tables({"t", "a"}); !ok) check_refusal(ok.error(), file, "check_tables");
  auto t = cf->check_table("t", every_type_schema(), {"skip"});
  if (!t) check_refusal(t.error(), file, "check_table");
  else if (!t->find("s") || !t->find("r")) fuzz::finding("check_table result lacks a default or a required key");
  (void)cf->table("a.b.c");
  (void)cf->error_at("a.b[1].c", "probe");
  // Whatever the file holds renders as JSON (plugin configs are passed on as sdk::Value).
  (void)cf->root().to_json();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in(data, size);
  const std::uint8_t sel = in.byte();
  const std::string text(in.rest());
  switch (sel & 3) {
    case 0: host_config(text); break;
    case 1: control_config(text); break;
    case 2: generic(text); break;
    default: host_config(text); control_config(text); break;
  }
  return 0;
}
