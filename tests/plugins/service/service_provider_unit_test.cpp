// ServiceProvider in process, without systemd: schema, config, validation, and the errors that
// come before any bus call (a bad id) or from an unreachable bus.
#include <gtest/gtest.h>

#include "mesh/sdk/sdk.h"
#include "service_provider.h"

namespace mesh::plugins::service::test {
namespace {

using sdk::ErrorCode;
using sdk::Value;

class ServiceProviderTest : public ::testing::Test {
 protected:
  ServiceProviderTest() { host_.logger = &logger_; host_.role = "tool"; }
  std::unique_ptr<ServiceProvider> make(Value config = Value::object()) {
    auto p = std::make_unique<ServiceProvider>(host_);
    auto checked = sdk::validate_against(p->config_schema(), config, "");
    EXPECT_TRUE(checked) << checked.error().describe();
    auto ok = p->configure(sdk::apply_defaults(p->config_schema(), config));
    EXPECT_TRUE(ok) << ok.error().describe();
    return p;
  }
  sdk::NullLogger logger_;
  sdk::HostContext host_;
};

TEST_F(ServiceProviderTest, Schema) {
  ServiceProvider p(host_);
  const auto& s = p.schema();
  EXPECT_EQ(s.name, "service");
  for (const char* name : {"running", "enabled", "restart_on", "settle", "timeout"})
    EXPECT_NE(s.find(name), nullptr) << name;
  EXPECT_EQ(s.find("running")->type, sdk::ValueType::Bool);
  EXPECT_EQ(s.find("enabled")->type, sdk::ValueType::Bool);
  EXPECT_EQ(s.find("restart_on")->type, sdk::ValueType::StringList);
  EXPECT_EQ(s.find("settle")->default_value, std::nullopt);  // the config's default applies
  const auto& c = p.config_schema();
  EXPECT_EQ(*c.find("settle")->default_value, Value("2s"));
  EXPECT_EQ(*c.find("timeout")->default_value, Value("90s"));
  EXPECT_EQ(c.find("bus_address")->default_value, std::nullopt);
}

TEST_F(ServiceProviderTest, ConfigErrorsNameTheKey) {
  struct Case {
    const char* key;
    Value value;
  };
  for (const auto& [key, value] : {Case{"settle", "soon"}, Case{"settle", "2h"},
                                   Case{"timeout", "0s"}, Case{"timeout", "forever"},
                                   Case{"bus_address", ""}}) {
    ServiceProvider p(host_);
    Value config = Value::object();
    config.set(key, value);
    auto ok = p.configure(sdk::apply_defaults(p.config_schema(), config));
    ASSERT_FALSE(ok) << key << "=" << value.to_json();
    EXPECT_EQ(ok.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(ok.error().path, key);
  }
  Value unknown = Value::object();
  unknown.set("settel", "2s");
  auto checked = sdk::validate_against(ServiceProvider(host_).config_schema(), unknown, "");
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error().path, "settel");
}

TEST_F(ServiceProviderTest, BadIdIsRefusedBeforeTheBus) {
  // An address nothing listens on: if any of these reached the bus they would say Unavailable.
  Value config = Value::object();
  config.set("bus_address", "unix:path=/nonexistent/mesh-test/private");
  auto p = make(config);
  sdk::CancelToken cancel;
  const sdk::ResourceId bad{"service", "../etc/passwd"};
  auto r = p->read(bad);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().path, "id");
  auto rm = p->remove(bad, cancel);
  ASSERT_FALSE(rm);
  EXPECT_EQ(rm.error().path, "id");
  sdk::Plan plan;
  plan.rid = bad;
  plan.action = sdk::PlanAction::Update;
  plan.changes.push_back({"properties.running", false, true});
  plan.desired.rid = bad;
  auto ap = p->apply(plan, cancel);
  ASSERT_FALSE(ap);
  EXPECT_EQ(ap.error().path, "id");
}

TEST_F(ServiceProviderTest, UnreachableBusIsUnavailable) {
  Value config = Value::object();
  config.set("bus_address", "unix:path=/nonexistent/mesh-test/private");
  auto p = make(config);
  auto r = p->read({"service", "nginx.service"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Unavailable);
  EXPECT_NE(r.error().message.find("cannot reach systemd: unix:path=/nonexistent/mesh-test/private"),
            std::string::npos)
      << r.error().message;
}

TEST_F(ServiceProviderTest, PlanIsPureAndChecksItsInput) {
  // No bus at all: plan must not need one.
  Value config = Value::object();
  config.set("bus_address", "unix:path=/nonexistent/mesh-test/private");
  auto p = make(config);
  sdk::Resource want;
  want.rid = {"service", "demo.service"};
  want.properties.set("running", true);
  auto plan = p->plan(want, std::nullopt);
  ASSERT_TRUE(plan) << plan.error().describe();
  EXPECT_EQ(plan->action, sdk::PlanAction::Create);
  want.properties.set("restart_on", Value(Value::Array{"no-colon"}));
  auto bad = p->plan(want, std::nullopt);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().path, "properties.restart_on[0]");
}

}  // namespace
}  // namespace mesh::plugins::service::test
