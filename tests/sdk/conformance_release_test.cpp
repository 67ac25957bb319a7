// The conformance suite's partial instantiation (sdk/testing/conformance.h): a provider whose
// resources exist before management and whose removal is Removal::Release — an in-memory stand-in
// for a sysctl-like provider: every key exists with a value the system gave it; applying sets it;
// remove() puts back the value from before management and says so in RemoveResponse::left.
#include <map>
#include <memory>
#include <string>

#include "mesh/sdk/provider.h"
#include "mesh/sdk/testing/conformance.h"

namespace {

using namespace mesh::sdk;
namespace mt = mesh::sdk::testing;

/// The "kernel": every key below exists from the start.
struct Knobs {
  std::map<std::string, std::string> values{{"net.a", "0"}, {"net.b", "7"}};
  std::map<std::string, std::string> original;  ///< value before the first apply, per key
};

class KnobProvider final : public Provider {
 public:
  KnobProvider(const HostContext& host, std::shared_ptr<Knobs> knobs) : Provider(host), knobs_(std::move(knobs)) {}
  const Schema& schema() const noexcept override {
    static const Schema s{"knob", "a kernel-like setting that always exists",
                          {Attribute{"value", ValueType::String, true, "the setting's value"}}};
    return s;
  }

 protected:
  Result<void> do_capabilities(ProviderCapabilities& caps) const override {
    caps.removal = Removal::Release;
    caps.exists_before_management = true;
    return {};
  }
  Result<void> do_validate(const ValidateRequest& req, ValidateResponse& resp) override {
    if (req.resource.rid.id.rfind("net.", 0) != 0)
      resp.errors.push_back({ErrorCode::InvalidArgument, "must start with net.", "id"});
    if (req.resource.properties.get_string("value").empty())
      resp.errors.push_back({ErrorCode::InvalidArgument, "must not be empty", "properties.value"});
    return {};
  }
  Result<void> do_read(const ReadRequest& req, ReadResponse& resp) override {
    auto it = knobs_->values.find(req.rid.id);
    if (it == knobs_->values.end()) return {};
    State s;
    s.properties.set("value", it->second);
    resp.state = std::move(s);
    return {};
  }
  Result<void> do_plan(const PlanRequest& req, PlanResponse& resp) override {
    resp.plan = Plan{req.desired.rid, PlanAction::None, {}, req.desired};
    if (!req.observed) {
      resp.plan.action = PlanAction::Create;
      resp.plan.changes.push_back({"properties.value", Value(), *req.desired.properties.find("value")});
      return {};
    }
    diff_properties(req.desired.properties, req.observed->properties, {"value"}, resp.plan.changes);
    if (!resp.plan.changes.empty()) resp.plan.action = PlanAction::Update;
    return {};
  }
  Result<void> do_apply(const ApplyRequest& req, ApplyResponse& resp) override {
    const std::string& key = req.plan.rid.id;
    if (!knobs_->values.count(key)) return fail(ErrorCode::Failed, "no such key " + key);
    knobs_->original.emplace(key, knobs_->values[key]);  // first apply only
    knobs_->values[key] = req.plan.desired.properties.get_string("value");
    resp.state.properties.set("value", knobs_->values[key]);
    return {};
  }
  Result<void> do_remove(const RemoveRequest& req, RemoveResponse& resp) override {
    auto it = knobs_->original.find(req.rid.id);
    if (it == knobs_->original.end()) return {};  // never managed, or already released
    knobs_->values[req.rid.id] = it->second;
    Value left = Value::object();
    left.set("value", it->second);
    resp.left = std::move(left);
    knobs_->original.erase(it);
    return {};
  }

 private:
  std::shared_ptr<Knobs> knobs_;
};

mt::ProviderConformance knob_conformance() {
  auto knobs = std::make_shared<Knobs>();
  mt::ProviderConformance c;
  c.make_provider = [knobs](const HostContext& host) {
    return std::unique_ptr<Provider>(std::make_unique<KnobProvider>(host, knobs));
  };
  c.samples = {
      {"set", mt::make_resource("knob", "net.a", {{"value", "1"}})},
      {"change", mt::make_resource("knob", "net.b", {{"value", "9"}}), mt::make_resource("knob", "net.b", {{"value", "8"}})},
      {"already_so", mt::make_resource("knob", "net.a", {{"value", "0"}})},
  };
  c.bad_resources = {
      {"not_net", mt::make_resource("knob", "kernel.x", {{"value", "1"}}), "id"},
      {"empty_value", mt::make_resource("knob", "net.a", {{"value", ""}}), "properties.value"},
  };
  c.observe = [knobs](const ResourceId& rid) {
    auto it = knobs->values.find(rid.id);
    return it == knobs->values.end() ? std::string("absent") : it->second;
  };
  c.release_restores_original = true;
  c.keep_alive = knobs;
  return c;
}

}  // namespace

MESH_INSTANTIATE_PROVIDER_CONFORMANCE(Knob, knob_conformance);

// Validation reports every problem at once through ValidateResponse.
TEST(ValidateResponseTest, AProviderReportsEveryProblem) {
  NullLogger logger;
  HostContext host;
  host.logger = &logger;
  KnobProvider p(host, std::make_shared<Knobs>());
  ValidateRequest req;
  req.resource = mt::make_resource("knob", "kernel.x", {{"value", ""}});
  ValidateResponse resp;
  ASSERT_TRUE(p.validate(req, resp));
  ASSERT_EQ(resp.errors.size(), 2u);
  EXPECT_EQ(resp.errors[0].path, "id");
  EXPECT_EQ(resp.errors[1].path, "properties.value");
  // The short form returns the first.
  auto first = p.validate(req.resource);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().path, "id");
  // Every struct starts with the size the caller was built with.
  EXPECT_EQ(req.struct_size, sizeof(ValidateRequest));
  EXPECT_EQ(resp.struct_size, sizeof(ValidateResponse));
  auto caps = p.capabilities();
  ASSERT_TRUE(caps);
  EXPECT_EQ(caps->struct_size, sizeof(ProviderCapabilities));
  EXPECT_EQ(caps->removal, Removal::Release);
}
