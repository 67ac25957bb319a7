// A test-only provider that replaces a program file the way a package manager does, and says so
// with ProviderCapabilities::may_replace_host (decision 0076), so an integration test can drive
// the host's self-upgrade without apt or root.
//   {"type": "hostprog", "id": "/abs/bin/mesh-host", "properties": {"version": "2"}}
// The installed version is the content of `<id>.version`; apply copies `<id>.<version>` (the
// test prepares it) to a new file and renames it over `<id>`, then writes `<id>.version`. read()
// returns {version}, which is a valid declaration (how the engine reverts).
// Built with mesh_add_plugin(... NO_INSTALL): never part of an install.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <mesh/sdk/sdk.h>

namespace hostprog_test {

using namespace mesh::sdk;

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HostProgProvider final : public Provider {
 public:
  using Provider::Provider;

  const Schema& schema() const noexcept override {
    static const Schema s{"hostprog", "a program file replaced by version, as dpkg would (tests only)", {
        {"version", ValueType::String, true, "which prepared copy (<id>.<version>) is installed"},
    }};
    return s;
  }

 protected:
  Result<void> do_capabilities(ProviderCapabilities& caps) const override {
    caps.may_replace_host = true;
    return {};
  }

  Result<void> do_validate(const ValidateRequest& req, ValidateResponse& resp) override {
    const Resource& want = req.resource;
    if (want.rid.id.empty() || want.rid.id[0] != '/')
      resp.errors.push_back({ErrorCode::InvalidArgument, "must be an absolute path", "id"});
    return {};
  }

  Result<void> do_read(const ReadRequest& req, ReadResponse& resp) override {
    auto text = slurp(req.rid.id + ".version");
    if (!text) return {};
    while (!text->empty() && text->back() == '\n') text->pop_back();
    State st;
    st.properties.set("version", *text);
    resp.state = std::move(st);
    return {};
  }

  Result<void> do_plan(const PlanRequest& req, PlanResponse& resp) override {
    const Resource& want = req.desired;
    Plan& p = resp.plan;
    p = Plan{want.rid, PlanAction::None, {}, want};
    if (!req.observed) {
      p.action = PlanAction::Create;
      p.changes.push_back({"properties.version", Value(), *want.properties.find("version")});
      return {};
    }
    diff_properties(want.properties, req.observed->properties, {"version"}, p.changes);
    if (!p.changes.empty()) p.action = PlanAction::Update;
    return {};
  }

  Result<void> do_apply(const ApplyRequest& req, ApplyResponse& resp) override {
    const Plan& plan = req.plan;
    const std::string& dest = plan.rid.id;
    const std::string version = plan.desired.properties.get_string("version");
    auto program = slurp(dest + "." + version);
    if (!program) return fail(ErrorCode::NotFound, "no prepared program " + dest + "." + version);
    const std::string tmp = dest + ".hostprog-new";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << *program;
      if (!out) return fail(ErrorCode::Failed, "cannot write " + tmp);
    }
    ::chmod(tmp.c_str(), 0755);
    if (std::rename(tmp.c_str(), dest.c_str()) != 0) return fail(ErrorCode::Failed, "cannot rename onto " + dest);
    std::ofstream(dest + ".version", std::ios::trunc) << version << "\n";
    resp.state.properties.set("version", version);
    return {};
  }

  Result<void> do_remove(const RemoveRequest& req, RemoveResponse&) override {
    std::remove((req.rid.id + ".version").c_str());
    return {};
  }
};

}  // namespace hostprog_test

MESH_PLUGIN(provider, "hostprog", "1.0.0", "replaces a program file by version (tests only)",
            hostprog_test::HostProgProvider)
