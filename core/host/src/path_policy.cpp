#include "mesh/host/path_policy.h"

#include <algorithm>

#include "mesh/common/config.h"
#include "mesh/host/host_config.h"

namespace mesh::host {
namespace {

// "/a/b/" -> "/a/b"; keeps "/" and relative paths as they are (they are refused by providers).
std::string normalised(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

void add(std::vector<std::string>& out, const std::string& p) {
  if (p.empty() || p.front() != '/' || p == "/") return;
  std::string n = normalised(p);
  if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
}

}  // namespace

sdk::Result<std::vector<std::string>> denied_paths(const HostConfig* config, const std::string& state_dir) {
  std::vector<std::string> out;
  add(out, state_dir);
  if (config && !config->path.empty() && config->path.front() == '/') add(out, config->path);
  add(out, kDefaultControlStateDir);
  if (!config) return out;
  for (const auto& p : config->deny) add(out, p);
  if (config->control_config.empty()) return out;
  auto cf = common::ConfigFile::load(config->control_config);
  if (!cf)
    return sdk::fail(config->file.error_at("paths.control_config", "cannot read the control plane's config: " +
                                                                       cf.error().describe()));
  add(out, config->control_config);
  const sdk::Value control = cf->table("control");
  const std::string control_state = control.get_string("state_dir");
  add(out, control_state);
  const sdk::Value store = cf->table("store");
  add(out, store.get_string("path"));
  const sdk::Value broker = cf->table("broker");
  for (const char* key : {"authorization_file", "enrol_password_file", "operator_password_file"})
    add(out, broker.get_string(key));
  return out;
}

bool add_denied_roots(sdk::Value& provider_config, bool schema_has_key, const std::vector<std::string>& denied) {
  if (!schema_has_key) return false;
  sdk::Value::Array list;
  if (const sdk::Value* own = provider_config.find("denied_roots"); own && own->is_array()) list = own->as_array();
  for (const auto& p : denied) list.emplace_back(p);
  provider_config.set("denied_roots", sdk::Value(std::move(list)));
  return true;
}

}  // namespace mesh::host
