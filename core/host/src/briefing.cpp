#include "mesh/host/briefing.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mesh/common/fs.h"
#include "mesh/common/protocol.h"
#include "mesh/host/describe.h"
#include "mesh/host/runtime.h"
#include "mesh/host/version.h"

namespace mesh::host {

std::vector<BriefingLine> run_briefing_checks(const HostConfig& config, sdk::Value* schemas, Facts* facts,
                                              const FactSources& sources) {
  std::vector<BriefingLine> lines;
  if (schemas) *schemas = sdk::Value::array();
  // The state directory: everything the host keeps lives there.
  {
    auto dir = common::make_dirs(config.state_dir, 0700);
    const std::string probe = config.state_dir + "/.briefing-probe";
    auto w = dir ? common::write_file_atomic(probe, "ok\n", 0600) : dir;
    ::unlink(probe.c_str());
    lines.push_back({"state_dir", w ? "pass" : "fail",
                     w ? config.state_dir + " is writable"
                       : config.state_dir + " is not writable: " + w.error().message});
  }
  // Free disk where the state (and, usually, what the mesh manages) lives.
  {
    struct statvfs st {};
    if (::statvfs(config.state_dir.c_str(), &st) == 0) {
      const unsigned long long free_mib =
          static_cast<unsigned long long>(st.f_bavail) * st.f_frsize / (1024ULL * 1024ULL);
      const bool ok = free_mib >= config.min_free_mib;
      lines.push_back({"disk", ok ? "pass" : "fail",
                       std::to_string(free_mib) + " MiB free at " + config.state_dir + " (at least " +
                           std::to_string(config.min_free_mib) + " MiB " + (ok ? "required)" : "needed)")});
    } else {
      lines.push_back({"disk", "fail", "cannot measure free space at " + config.state_dir + ": " + std::strerror(errno)});
    }
  }
  // Each configured provider plugin, loaded and configured as the daemon will.
  for (const auto& name : config.load) {
    auto p = load_providers(config.plugin_dirs, {name}, &config, config.state_dir);
    lines.push_back({"plugin:" + name, p ? "pass" : "fail",
                     p ? "loads from " + loader::describe_dirs(config.plugin_dirs) : p.error().describe()});
    // Its schema, as `mesh-host plugins describe --output json` prints it, for the control
    // plane's check of declarations to this node (docs/protocol.md "Briefing").
    if (p && schemas)
      for (const auto& type : p->registry.types())
        if (const sdk::Provider* provider = p->registry.find(type)) {
          sdk::Value s = schema_json(provider->schema());
          s.set("name", type);
          schemas->as_array().push_back(std::move(s));
        }
  }
  if (schemas && schemas->to_json().size() > kMaxBriefingSchemasBytes) {
    lines.push_back({"schemas", "info",
                     "provider schemas not sent: " + std::to_string(schemas->to_json().size()) +
                         " bytes of JSON, over the limit of " + std::to_string(kMaxBriefingSchemasBytes) +
                         " (the control plane checks declarations to this node for shape only)"});
    *schemas = sdk::Value(nullptr);
  }
  // Facts (decision record 54), and the info lines people read.
  MachineProbe probe = probe_machine(sources);
  {
    std::string kernel;
    if (auto k = probe.facts.find("kernel"); k != probe.facts.end()) kernel = k->second;
    lines.push_back({"os", "info", (probe.os_pretty.empty() ? std::string("unknown (no /etc/os-release)") : probe.os_pretty) +
                                       (kernel.empty() ? "" : ", kernel " + kernel)});
  }
  {
    const bool apt = probe.apt, dpkg = probe.dpkg;
    std::string detail = apt || dpkg ? std::string(apt ? "apt" : "") + (apt && dpkg ? " and " : "") + (dpkg ? "dpkg" : "") + " present"
                                     : "none found (apt, dpkg)";
    lines.push_back({"package_manager", "info", detail});
  }
  lines.push_back({"service_manager", "info", probe.systemd ? "systemd running" : "systemd not running"});
  lines.push_back({"container_engine", "info",
                   probe.container_detail.empty() ? "none found (podman, docker)" : probe.container_detail});
  if (facts) *facts = std::move(probe.facts);
  return lines;
}

namespace {

// [{check, outcome, detail}, …]: the lines as the briefing request and the local view carry them.
sdk::Value lines_value(const std::vector<BriefingLine>& lines) {
  sdk::Value arr = sdk::Value::array();
  for (const auto& l : lines) {
    sdk::Value e = sdk::Value::object();
    e.set("check", l.check);
    e.set("outcome", l.outcome);
    e.set("detail", l.detail);
    arr.as_array().push_back(std::move(e));
  }
  return arr;
}

}  // namespace

std::string briefing_request_json(const std::string& node, const std::vector<BriefingLine>& lines,
                                  std::int64_t at_ms, const sdk::Value* schemas, const Facts* facts,
                                  bool at_enrolment) {
  sdk::Value v = sdk::Value::object();
  v.set("node", node);
  v.set("at_ms", at_ms);
  v.set("host_version", running_version().version);
  v.set("lines", lines_value(lines));
  if (schemas && schemas->is_array()) v.set("schemas", *schemas);
  if (facts) {
    sdk::Value f = sdk::Value::object();
    for (const auto& [key, value] : *facts) f.set(key, value);
    v.set("facts", std::move(f));
  }
  if (at_enrolment) v.set("enrolment", true);
  return v.to_json();
}

sdk::Value local_briefing(const std::string& node, const std::vector<BriefingLine>& lines, const Facts* facts) {
  bool failed = false;
  for (const auto& l : lines) failed = failed || l.outcome == "fail";
  sdk::Value v = sdk::Value::object();
  v.set("node", node);
  v.set("outcome", failed ? "fail" : "pass");
  v.set("lines", lines_value(lines));
  if (facts) {
    sdk::Value f = sdk::Value::object();
    for (const auto& [key, value] : *facts) f.set(key, value);
    v.set("facts", std::move(f));
  }
  return v;
}

std::string briefing_text(const std::string& node, const sdk::Value& briefing) {
  const std::string outcome = briefing.get_string("outcome", "fail");
  std::string out = "briefing " + node + ": " + outcome + "\n";
  if (const sdk::Value* lines = briefing.find("lines"); lines && lines->is_array())
    for (const auto& l : lines->as_array()) {
      std::string o = l.get_string("outcome");
      o.resize(6, ' ');
      out += "  " + o + " " + l.get_string("check") + ": " + l.get_string("detail") + "\n";
    }
  // The facts the control plane recorded (decision record 54), or the local ones.
  if (const sdk::Value* facts = briefing.find("facts"); facts && facts->is_object() && !facts->as_object().empty()) {
    std::string f;
    for (const auto& [key, value] : facts->as_object())
      if (value.is_string()) f += (f.empty() ? "" : ", ") + key + "=" + value.as_string();
    out += "  facts  " + f + "\n";
  }
  out += std::string("eligible: ") +
         (outcome == "pass" ? "yes\n" : "no (a failed line makes the node ineligible for assignment until a briefing passes)\n");
  return out;
}

}  // namespace mesh::host
