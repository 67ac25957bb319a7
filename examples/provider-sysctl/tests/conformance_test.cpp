// The SDK's conformance suite against the sysctl provider, on a temporary root per test.
#include <mesh/sdk/testing/conformance.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "sysctl_provider.h"

namespace {

namespace fs = std::filesystem;
namespace mt = mesh::sdk::testing;
using mesh::sdk::Value;

/// A temporary stand-in for /proc/sys holding two keys, removed when the suite drops it.
struct FakeProcSys {
  FakeProcSys() {
    std::string tmpl = (fs::temp_directory_path() / "sysctl-conformance-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
    fs::create_directories(path + "/net/ipv4");
    std::ofstream(path + "/net/ipv4/ip_forward") << "0\n";
    std::ofstream(path + "/net/ipv4/ip_local_port_range") << "32768\t60999\n";
  }
  ~FakeProcSys() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

mt::ProviderConformance sysctl_conformance() {
  auto root = std::make_shared<FakeProcSys>();
  mt::ProviderConformance c;
  c.make_provider = [root](const mesh::sdk::HostContext& host) {
    auto p = std::make_unique<sysctl::SysctlProvider>(host);
    Value config = Value::object();
    config.set("root", root->path);
    if (!p->configure(config)) return std::unique_ptr<mesh::sdk::Provider>();
    return std::unique_ptr<mesh::sdk::Provider>(std::move(p));
  };
  // Keys exist before management (the provider says so in its capabilities), so the suite runs
  // its partial instantiation: each sample's key is there when a test starts, and what it holds
  // then is the baseline. remove() releases a key with its current value (not the baseline), so
  // release_restores_original stays false.
  c.samples = {
      {"set", mt::make_resource("sysctl", "net.ipv4.ip_forward", {{"value", "1"}})},
      {"already_set", mt::make_resource("sysctl", "net.ipv4.ip_forward", {{"value", "0"}})},
      {"multi_value_update",
       mt::make_resource("sysctl", "net.ipv4.ip_local_port_range", {{"value", "40000 50000"}}),
       mt::make_resource("sysctl", "net.ipv4.ip_local_port_range", {{"value", "1024\t65000"}})},
  };
  c.bad_resources = {
      {"empty_key", mt::make_resource("sysctl", "", {{"value", "1"}}), "id"},
      {"dot_dot", mt::make_resource("sysctl", "net..ipv4", {{"value", "1"}}), "id"},
      {"parent", mt::make_resource("sysctl", "..", {{"value", "1"}}), "id"},
      {"leading_dot", mt::make_resource("sysctl", ".net.ipv4.ip_forward", {{"value", "1"}}), "id"},
      {"slashes", mt::make_resource("sysctl", "net/ipv4/ip_forward", {{"value", "1"}}), "id"},
      {"no_value", mt::make_resource("sysctl", "net.ipv4.ip_forward", {}), "properties.value"},
      {"integer_value", mt::make_resource("sysctl", "net.ipv4.ip_forward", {{"value", 1}}),
       "properties.value"},
      {"empty_value", mt::make_resource("sysctl", "net.ipv4.ip_forward", {{"value", " "}}),
       "properties.value"},
      {"unknown_property",
       mt::make_resource("sysctl", "net.ipv4.ip_forward", {{"value", "1"}, {"ensure", "absent"}}),
       "properties.ensure"},
  };
  // The backend as the kernel would show it, read without the provider.
  c.observe = [root](const mesh::sdk::ResourceId& rid) {
    std::string listing;
    for (const auto& e : fs::recursive_directory_iterator(root->path)) {
      listing += e.path().string() + "=";
      if (e.is_regular_file()) {
        std::ifstream in(e.path());
        std::stringstream ss;
        ss << in.rdbuf();
        listing += ss.str();
      }
      listing += ";";
    }
    return rid.id + " " + listing;
  };
  c.keep_alive = root;
  return c;
}

}  // namespace

MESH_INSTANTIATE_PROVIDER_CONFORMANCE(Sysctl, sysctl_conformance);
