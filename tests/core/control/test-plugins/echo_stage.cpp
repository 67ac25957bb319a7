// A test-only stage plugin: configured with `greeting` (required) and `repository` (optional),
// it logs its greeting, writes a file in its work directory, and returns as artifacts what it was
// given (params, run id, operator, work dir, earlier artifacts); params {"deploy": "m@v"} calls
// StageContext::deploy and returns its answer; {"fail": "why"} fails with that message.
#include <fstream>

#include "mesh/sdk/sdk.h"

namespace {

using mesh::sdk::Value;

class EchoStage final : public mesh::sdk::Stage {
 public:
  using Stage::Stage;
  const mesh::sdk::Schema& config_schema() const noexcept override {
    static const mesh::sdk::Schema s{
        "echo",
        "test stage",
        {mesh::sdk::Attribute{"greeting", mesh::sdk::ValueType::String, true, "logged at every run"},
         mesh::sdk::Attribute{"repository", mesh::sdk::ValueType::String, false, "echoed back"}}};
    return s;
  }

 protected:
  mesh::sdk::Result<void> do_configure(const Value& config) override {
    if (config.get_string("greeting") == "refuse")
      return mesh::sdk::fail(mesh::sdk::ErrorCode::InvalidArgument, "greeting 'refuse' refused", "greeting");
    config_ = config;
    return {};
  }
  mesh::sdk::Result<mesh::sdk::StageOutput> do_run(const mesh::sdk::StageInput& in,
                                                   mesh::sdk::StageContext& context,
                                                   const mesh::sdk::CancelToken&) override {
    if (const Value* f = in.params.find("fail"))
      return mesh::sdk::fail(mesh::sdk::ErrorCode::Failed, f->as_string());
    context.log(config_.get_string("greeting") + " from " + in.pipeline);
    std::ofstream(context.work_dir() + "/touched") << "x";
    mesh::sdk::StageOutput out;
    out.artifacts.set("params", in.params);
    out.artifacts.set("run_id", static_cast<std::int64_t>(context.run_id()));
    out.artifacts.set("operator", context.operator_name());
    out.artifacts.set("work_dir", context.work_dir());
    out.artifacts.set("earlier", context.artifacts());
    out.artifacts.set("repository", config_.get_string("repository"));
    if (const Value* d = in.params.find("deploy")) {
      auto r = context.deploy(d->as_string(), "1.0", Value::object());
      if (!r) return mesh::sdk::fail(r.error());
      out.artifacts.set("deployed", *r);
    }
    return out;
  }

 private:
  Value config_ = Value::object();
};

}  // namespace

MESH_PLUGIN(stage, "echo", "0.1.0", "test stage: echoes what it is given", EchoStage)
