// service_provider_probe: loads mesh-provider-service.so the way a host does (dlopen, the one
// exported symbol, create, configure) and performs one operation, printing the outcome as one
// JSON object on stdout. The system tests run it inside the systemd sandbox (nsenter), so the
// provider reaches that systemd exactly as it would on a real host.
//
//   service_provider_probe [--plugin PATH] [--config JSON] OP UNIT [PROPERTIES_JSON] [--restart]
//
//   OP  validate  schema check + defaults + validate()
//       read      read()                               -> {"ok":true,"state":{...}|null}
//       plan      validate + read + plan()              -> {"ok":true,"plan":{...}}
//       apply     validate + read + plan + apply() + read back + plan again, as the engine does;
//                 --restart plans as the engine does when something in `restart_on` changed:
//                 notified_by = the first `restart_on` entry (or file:/etc/probe.conf)
//                 -> {"ok":true,"plan":...,"state":...,"read_back":...,"read_back_plan":...}
//       remove    remove()                             -> {"ok":true,"left":{...}|null}
// Failures: {"ok":false,"stage":"apply","error":{"code":"failed","message":"...","path":""}}.
// Every answer carries "elapsed_ms". Exit status: 0 ok, 1 operation failed, 2 usage or load error.
#include <dlfcn.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "mesh/sdk/sdk.h"

namespace {

using mesh::sdk::Value;
namespace json = boost::json;

Value to_value(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return Value();
    case json::kind::bool_: return Value(v.get_bool());
    case json::kind::int64: return Value(v.get_int64());
    case json::kind::uint64: return Value(static_cast<std::int64_t>(v.get_uint64()));
    case json::kind::double_: return Value(v.get_double());
    case json::kind::string: return Value(std::string(v.get_string()));
    case json::kind::array: {
      Value::Array a;
      for (const auto& e : v.get_array()) a.push_back(to_value(e));
      return Value(std::move(a));
    }
    case json::kind::object: {
      Value o = Value::object();
      for (const auto& [k, e] : v.get_object()) o.set(std::string(k), to_value(e));
      return o;
    }
  }
  return Value();
}

Value error_value(const mesh::sdk::Error& e) {
  Value v = Value::object();
  v.set("code", mesh::sdk::to_string(e.code));
  v.set("message", e.message);
  v.set("path", e.path);
  return v;
}

Value plan_value(const mesh::sdk::Plan& plan) {
  Value v = Value::object();
  v.set("action", mesh::sdk::to_string(plan.action));
  Value::Array changes;
  for (const auto& c : plan.changes) {
    Value ch = Value::object();
    ch.set("path", c.path);
    ch.set("observed", c.observed);
    ch.set("declared", c.declared);
    changes.push_back(std::move(ch));
  }
  v.set("changes", Value(std::move(changes)));
  return v;
}

Value state_value(const std::optional<mesh::sdk::State>& s) {
  return s ? s->properties : Value();
}

class StderrLogger final : public mesh::sdk::Logger {
 public:
  void log(mesh::sdk::LogLevel, std::string_view message) noexcept override {
    std::fprintf(stderr, "probe log: %.*s\n", static_cast<int>(message.size()), message.data());
  }
  bool enabled(mesh::sdk::LogLevel) const noexcept override { return true; }
};

int usage(const std::string& why) {
  std::cerr << "service_provider_probe: " << why
            << "\nusage: service_provider_probe [--plugin PATH] [--config JSON] "
               "validate|read|plan|apply|remove UNIT [PROPERTIES_JSON] [--restart]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const auto began = std::chrono::steady_clock::now();
  std::string plugin_path = std::string(MESH_TEST_PLUGIN_DIR) + "/mesh-provider-service.so";
  std::string config_text = "{}";
  bool restart = false;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--plugin" && i + 1 < argc) plugin_path = argv[++i];
    else if (a == "--config" && i + 1 < argc) config_text = argv[++i];
    else if (a == "--restart") restart = true;
    else positional.push_back(a);
  }
  if (positional.size() < 2 || positional.size() > 3) return usage("wrong number of arguments");
  const std::string op = positional[0];
  mesh::sdk::Resource want;
  want.rid = {"service", positional[1]};
  Value config, declared = Value::object();
  try {
    config = to_value(json::parse(config_text));
    if (positional.size() == 3) declared = to_value(json::parse(positional[2]));
  } catch (const std::exception& e) {
    return usage(std::string("bad JSON: ") + e.what());
  }

  void* lib = ::dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return usage(std::string("dlopen: ") + ::dlerror());
  using InfoFn = const mesh_plugin_info* (*)() noexcept;
  auto info_fn = reinterpret_cast<InfoFn>(::dlsym(lib, MESH_PLUGIN_INFO_SYMBOL));
  if (!info_fn) return usage("no mesh_plugin_info_v1 in " + plugin_path);
  const mesh_plugin_info* info = info_fn();
  StderrLogger logger;
  mesh::sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  mesh::sdk::Plugin* plugin = info->create(&host);
  auto* provider = dynamic_cast<mesh::sdk::Provider*>(plugin);
  if (!provider) return usage("the plugin did not create a provider");

  Value out = Value::object();
  auto finish = [&](bool ok) {
    out.set("ok", ok);
    out.set("elapsed_ms", static_cast<std::int64_t>(
                              std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - began)
                                  .count()));
    std::cout << out.to_json() << std::endl;
    info->destroy(plugin);
    ::dlclose(lib);
    return ok ? 0 : 1;
  };
  auto failed = [&](const char* stage, const mesh::sdk::Error& e) {
    out.set("stage", stage);
    out.set("error", error_value(e));
    return finish(false);
  };

  if (auto checked = mesh::sdk::validate_against(provider->config_schema(), config, ""); !checked)
    return failed("config", checked.error());
  if (auto ok = plugin->configure(mesh::sdk::apply_defaults(provider->config_schema(), config)); !ok)
    return failed("configure", ok.error());
  mesh::sdk::CancelToken cancel;

  if (op == "read") {
    auto r = provider->read(want.rid);
    if (!r) return failed("read", r.error());
    out.set("state", state_value(*r));
    return finish(true);
  }
  if (op == "remove") {
    mesh::sdk::RemoveRequest req;
    req.rid = want.rid;
    req.cancel = &cancel;
    mesh::sdk::RemoveResponse resp;
    if (auto r = provider->remove(req, resp); !r) return failed("remove", r.error());
    out.set("left", resp.left ? *resp.left : Value());
    return finish(true);
  }
  if (op != "validate" && op != "plan" && op != "apply") return usage("unknown operation " + op);

  // What the engine does before a provider sees a declaration.
  if (auto checked = mesh::sdk::validate_against(provider->schema(), declared, "properties");
      !checked)
    return failed("validate", checked.error());
  want.properties = mesh::sdk::apply_defaults(provider->schema(), declared);
  if (auto valid = provider->validate(want); !valid) return failed("validate", valid.error());
  if (op == "validate") return finish(true);

  auto observed = provider->read(want.rid);
  if (!observed) return failed("read", observed.error());
  mesh::sdk::PlanRequest plan_req;
  plan_req.desired = want;
  plan_req.observed = *observed;
  if (restart) {
    std::string by = "file:/etc/probe.conf";
    if (const Value* list = want.properties.find(mesh::sdk::kRestartOnProperty);
        list && list->is_array() && !list->as_array().empty() && list->as_array()[0].is_string())
      by = list->as_array()[0].as_string();
    auto rid = mesh::sdk::ResourceId::parse(by);
    if (rid) plan_req.notified_by.push_back(*rid);
  }
  mesh::sdk::PlanResponse plan_resp;
  if (auto ok = provider->plan(plan_req, plan_resp); !ok) return failed("plan", ok.error());
  mesh::sdk::Plan* plan = &plan_resp.plan;
  out.set("observed", state_value(*observed));
  out.set("plan", plan_value(*plan));
  if (op == "plan") return finish(true);

  if (!plan->empty()) {
    mesh::sdk::ApplyRequest apply_req;
    apply_req.plan = *plan;
    apply_req.cancel = &cancel;
    apply_req.notified_by = plan_req.notified_by;
    mesh::sdk::ApplyResponse applied;
    if (auto ok = provider->apply(apply_req, applied); !ok) return failed("apply", ok.error());
    out.set("state", applied.state.properties);
  }
  auto read_back = provider->read(want.rid);
  if (!read_back) return failed("read_back", read_back.error());
  out.set("read_back", state_value(*read_back));
  auto again = provider->plan(want, *read_back);
  if (!again) return failed("plan_again", again.error());
  out.set("read_back_plan", plan_value(*again));
  return finish(true);
}
