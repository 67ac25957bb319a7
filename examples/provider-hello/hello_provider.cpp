// The smallest useful provider: `hello:<absolute path>` keeps a greeting in a file.
//   {"type": "hello", "id": "/tmp/greeting", "properties": {"name": "world"}}
// writes "hello, world\n". It shows the whole provider contract: schema, validate, read, plan,
// apply, remove — the engine does the read-back.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <mesh/sdk/sdk.h>

namespace hello {

using namespace mesh::sdk;

class HelloProvider final : public Provider {
 public:
  using Provider::Provider;

  const Schema& schema() const noexcept override {
    static const Schema s{"hello", "a greeting in a file", {
        {"name", ValueType::String, true, "who to greet"},
    }};
    return s;
  }

 protected:
  // Every call takes a request and fills in a response; both belong to the host (read the fields
  // you need, set the ones you produce, never copy the structs themselves).
  Result<void> do_validate(const ValidateRequest& req, ValidateResponse& resp) override {
    const std::string& path = req.resource.rid.id;
    if (path.empty() || path[0] != '/')
      resp.errors.push_back({ErrorCode::InvalidArgument, "must be an absolute path", "id"});
    return {};
  }

  Result<void> do_read(const ReadRequest& req, ReadResponse& resp) override {
    std::ifstream in(req.rid.id);
    if (!in) return {};  // absent: resp.state stays nullopt
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    State st;
    const std::string prefix = "hello, ";
    if (text.rfind(prefix, 0) == 0 && !text.empty() && text.back() == '\n')
      st.properties.set("name", text.substr(prefix.size(), text.size() - prefix.size() - 1));
    resp.state = std::move(st);
    return {};
  }

  Result<void> do_plan(const PlanRequest& req, PlanResponse& resp) override {
    const Resource& want = req.desired;
    Plan& p = resp.plan;
    p = Plan{want.rid, PlanAction::None, {}, want};
    if (!req.observed) {
      p.action = PlanAction::Create;
      p.changes.push_back({"properties.name", Value(), *want.properties.find("name")});
      return {};
    }
    diff_properties(want.properties, req.observed->properties, {"name"}, p.changes);
    if (!p.changes.empty()) p.action = PlanAction::Update;
    return {};
  }

  Result<void> do_apply(const ApplyRequest& req, ApplyResponse& resp) override {
    const Plan& plan = req.plan;
    const std::string name = plan.desired.properties.get_string("name");
    const std::string tmp = plan.rid.id + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << "hello, " << name << "\n";
      if (!out) return fail(ErrorCode::Failed, "cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), plan.rid.id.c_str()) != 0)
      return fail(ErrorCode::Failed, "cannot rename onto " + plan.rid.id);
    log().info("resource=hello:" + plan.rid.id + " outcome=changed");
    resp.state.properties.set("name", name);
    return {};
  }

  // Removal::Delete (the default capability): after this, read() must find nothing.
  Result<void> do_remove(const RemoveRequest& req, RemoveResponse&) override {
    std::remove(req.rid.id.c_str());
    return {};
  }
};

}  // namespace hello

MESH_PLUGIN(provider, "hello", "1.0.0", "a greeting in a file (example)", hello::HelloProvider)
