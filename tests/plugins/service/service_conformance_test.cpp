// The SDK's provider conformance suite, on the service provider: the bad-input and schema checks.
//
// The per-sample checks (plan has no side effects, read after apply, plan after apply, remove
// twice) are not instantiated here: they need a real systemd, and a unit reaches that only from
// inside the sandbox's PID namespace. The provider declares exists_before_management and
// Removal::Release, so the suite would run them partially (the unit exists before the test; remove
// is checked against what it left). The same checks run against a real systemd in
// service_provider_system_test.cpp (ServiceProviderSystemTest.*), through the probe inside the
// sandbox, where a fresh provider per operation is automatic.
#include <memory>
#include <string>

#include "mesh/sdk/testing/conformance.h"
#include "service_provider.h"

namespace mesh::plugins::service::test {
namespace {

namespace mt = mesh::sdk::testing;
using sdk::Value;

mt::ProviderConformance service_conformance() {
  mt::ProviderConformance c;
  c.make_provider = [](const sdk::HostContext& host) -> std::unique_ptr<sdk::Provider> {
    auto provider = std::make_unique<ServiceProvider>(host);
    // Nothing listens there: validation must not need systemd.
    Value config = Value::object();
    config.set("settle", "2s");
    config.set("timeout", "90s");
    config.set("bus_address", "unix:path=/nonexistent/mesh-conformance/private");
    if (auto ok = provider->configure(config); !ok) {
      ADD_FAILURE() << "configure: " << ok.error().describe();
      return nullptr;
    }
    return provider;
  };
  auto svc = [](const std::string& id, std::initializer_list<std::pair<std::string, Value>> p) {
    return mt::make_resource("service", id, p);
  };
  std::string nul = "a";
  nul.push_back('\0');
  nul += ".service";
  c.bad_resources = {
      {"no_suffix", svc("nginx", {{"running", true}}), "id"},
      {"unknown_suffix", svc("nginx.conf", {}), "id"},
      {"slash", svc("a/b.service", {}), "id"},
      {"absolute_path", svc("/etc/systemd/system/a.service", {}), "id"},
      {"nul_byte", svc(nul, {}), "id"},
      {"template_without_instance", svc("getty@.service", {{"running", true}}), "id"},
      {"empty_name", svc(".service", {}), "id"},
      {"space", svc("a b.service", {}), "id"},
      {"too_long", svc(std::string(300, 'a') + ".service", {}), "id"},
      {"unknown_property", svc("a.service", {{"colour", "red"}}), "properties.colour"},
      {"running_not_bool", svc("a.service", {{"running", "yes"}}), "properties.running"},
      {"enabled_not_bool", svc("a.service", {{"enabled", 1}}), "properties.enabled"},
      {"restart_on_not_list", svc("a.service", {{"restart_on", "file:/x"}}),
       "properties.restart_on"},
      {"restart_on_no_colon", svc("a.service", {{"restart_on", Value(Value::Array{"nginx"})}}),
       "properties.restart_on[0]"},
      {"restart_on_empty_id",
       svc("a.service", {{"restart_on", Value(Value::Array{"file:/x", "file:"})}}),
       "properties.restart_on[1]"},
      {"restart_on_bad_type", svc("a.service", {{"restart_on", Value(Value::Array{"F!le:/x"})}}),
       "properties.restart_on[0]"},
      {"restart_on_itself",
       svc("a.service", {{"restart_on", Value(Value::Array{"service:a.service"})}}),
       "properties.restart_on[0]"},
      {"settle_not_duration", svc("a.service", {{"settle", "quick"}}), "properties.settle"},
      {"settle_too_long", svc("a.service", {{"settle", "2h"}}), "properties.settle"},
      {"timeout_zero", svc("a.service", {{"timeout", "0s"}}), "properties.timeout"},
      {"timeout_fraction", svc("a.service", {{"timeout", "1.5s"}}), "properties.timeout"},
  };
  return c;
}

}  // namespace

// Only the two suites that fit (see the top of this file); the fixture's checks are public API.
class ServiceProviderConformanceBadInputTest : public mt::ProviderConformanceFixture {};
TEST_P(ServiceProviderConformanceBadInputTest, RejectedWithPath) { check_bad_input(); }
INSTANTIATE_TEST_SUITE_P(Conformance, ServiceProviderConformanceBadInputTest,
                         ::testing::ValuesIn(mt::bad_input_params(service_conformance)),
                         mt::ConformanceParamName{});

class ServiceProviderConformanceSchemaTest : public mt::ProviderConformanceFixture {};
TEST_P(ServiceProviderConformanceSchemaTest, EveryAttributeDescribed) { check_schema(); }
INSTANTIATE_TEST_SUITE_P(Conformance, ServiceProviderConformanceSchemaTest,
                         ::testing::ValuesIn(mt::schema_params(service_conformance)),
                         mt::ConformanceParamName{});

}  // namespace mesh::plugins::service::test
