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
  Result<void> do_validate(const Resource& want) override {
    if (want.rid.id.empty() || want.rid.id[0] != '/')
      return fail(ErrorCode::InvalidArgument, "must be an absolute path", "id");
    return {};
  }

  Result<std::optional<State>> do_read(const ResourceId& rid) override {
    std::ifstream in(rid.id);
    if (!in) return std::optional<State>{};
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    State st;
    const std::string prefix = "hello, ";
    if (text.rfind(prefix, 0) == 0 && !text.empty() && text.back() == '\n')
      st.properties.set("name", text.substr(prefix.size(), text.size() - prefix.size() - 1));
    return std::optional<State>(st);
  }

  Result<Plan> do_plan(const Resource& want, const std::optional<State>& observed) override {
    Plan p{want.rid, PlanAction::None, {}, want};
    if (!observed) {
      p.action = PlanAction::Create;
      p.changes.push_back({"properties.name", Value(), *want.properties.find("name")});
      return p;
    }
    diff_properties(want.properties, observed->properties, {"name"}, p.changes);
    if (!p.changes.empty()) p.action = PlanAction::Update;
    return p;
  }

  Result<State> do_apply(const Plan& plan, const CancelToken&) override {
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
    State st;
    st.properties.set("name", name);
    return st;
  }

  Result<void> do_remove(const ResourceId& rid, const CancelToken&) override {
    std::remove(rid.id.c_str());
    return {};
  }
};

}  // namespace hello

MESH_PLUGIN(provider, "hello", "1.0.0", "a greeting in a file (example)", hello::HelloProvider)
