// A test-only provider whose apply takes as long as the declaration says, so an integration test
// can be sure an apply is still running while it declares more revisions.
//   {"type": "sleep", "id": "/abs/path", "properties": {"value": "r1", "sleep_ms": 3000}}
// apply sleeps `sleep_ms` (stopping early when cancelled, unless `uncancellable`: then it runs to
// its end like a dpkg run would), then writes `value` and a newline to the file. Only `value` is
// state (read back from the file); `sleep_ms` and `uncancellable` are behaviour, and so is
// `fail_code`: apply then fails with the ErrorCode of that name ("permission_denied", ...).
// Built with mesh_add_plugin(... NO_INSTALL): never part of an install.
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <mesh/sdk/sdk.h>

namespace sleep_test {

using namespace mesh::sdk;

class SleepProvider final : public Provider {
 public:
  using Provider::Provider;

  const Schema& schema() const noexcept override {
    static const Schema s{"sleep", "a value in a file, written after a delay (tests only)", {
        {"value", ValueType::String, true, "what the file holds"},
        {"sleep_ms", ValueType::Int, false, "how long apply waits before writing, in milliseconds"},
        {"uncancellable", ValueType::Bool, false, "the wait ignores a cancel (as a running dpkg does)"},
        {"fail_code", ValueType::String, false, "apply fails with the ErrorCode of this name, after the wait"},
    }};
    return s;
  }

 protected:
  Result<void> do_validate(const ValidateRequest& req, ValidateResponse& resp) override {
    const Resource& want = req.resource;
    if (want.rid.id.empty() || want.rid.id[0] != '/')
      resp.errors.push_back({ErrorCode::InvalidArgument, "must be an absolute path", "id"});
    if (want.properties.get_int("sleep_ms", 0) < 0)
      resp.errors.push_back({ErrorCode::InvalidArgument, "must not be negative", "properties.sleep_ms"});
    return {};
  }

  Result<void> do_read(const ReadRequest& req, ReadResponse& resp) override {
    std::ifstream in(req.rid.id);
    if (!in) return {};
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (!text.empty() && text.back() == '\n') text.pop_back();
    State st;
    st.properties.set("value", text);
    resp.state = std::move(st);
    return {};
  }

  Result<void> do_plan(const PlanRequest& req, PlanResponse& resp) override {
    const Resource& want = req.desired;
    Plan& p = resp.plan;
    p = Plan{want.rid, PlanAction::None, {}, want};
    if (!req.observed) {
      p.action = PlanAction::Create;
      p.changes.push_back({"properties.value", Value(), *want.properties.find("value")});
      return {};
    }
    diff_properties(want.properties, req.observed->properties, {"value"}, p.changes);
    if (!p.changes.empty()) p.action = PlanAction::Update;
    return {};
  }

  Result<void> do_apply(const ApplyRequest& req, ApplyResponse& resp) override {
    const Plan& plan = req.plan;
    const CancelToken& cancel = *req.cancel;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(plan.desired.properties.get_int("sleep_ms", 0));
    const bool uncancellable = plan.desired.properties.get_bool("uncancellable", false);
    while (std::chrono::steady_clock::now() < until) {
      if (cancel.cancelled() && !uncancellable) return fail(ErrorCode::Cancelled, "cancelled while sleeping");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (const std::string code = plan.desired.properties.get_string("fail_code"); !code.empty()) {
      for (int c = 0; c <= static_cast<int>(ErrorCode::Internal); ++c)
        if (code == to_string(static_cast<ErrorCode>(c)))
          return fail(static_cast<ErrorCode>(c), "told to fail with " + code);
      return fail(ErrorCode::InvalidArgument, "unknown error code '" + code + "'", "properties.fail_code");
    }
    const std::string value = plan.desired.properties.get_string("value");
    const std::string tmp = plan.rid.id + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << value << "\n";
      if (!out) return fail(ErrorCode::Failed, "cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), plan.rid.id.c_str()) != 0)
      return fail(ErrorCode::Failed, "cannot rename onto " + plan.rid.id);
    resp.state.properties.set("value", value);
    return {};
  }

  Result<void> do_remove(const RemoveRequest& req, RemoveResponse&) override {
    std::remove(req.rid.id.c_str());
    return {};
  }
};

}  // namespace sleep_test

MESH_PLUGIN(provider, "sleep", "1.0.0", "sleeps sleep_ms in apply (tests only)", sleep_test::SleepProvider)
