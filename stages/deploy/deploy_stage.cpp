#include "deploy_stage.h"

#include <algorithm>

namespace mesh::stages::deploy {
namespace {

using sdk::Attribute;
using sdk::ErrorCode;
using sdk::Value;
using sdk::ValueType;

const char* const kReserved[] = {"version", "build_user"};

std::size_t count(const Value& v, const char* key) {
  const Value* a = v.find(key);
  return a && a->is_array() ? a->as_array().size() : 0;
}

}  // namespace

std::string deploy_failure(const Value& report, bool fail_on_outstanding) {
  std::string why;
  if (const Value* h = report.find("halted"); h && h->is_object())
    why = "halted at wave " + std::to_string(h->get_int("wave", 0)) + " — " + h->get_string("node") + ": " +
          h->get_string("reason");
  if (const Value* f = report.find("failed"); f && f->is_array() && !f->as_array().empty()) {
    if (!why.empty()) why += "; ";
    why += "failed " + std::to_string(f->as_array().size()) + " —";
    for (const auto& n : f->as_array()) {
      why += " " + n.get_string("node") + ":";
      if (!n.get_string("resource").empty()) why += " " + n.get_string("resource") + ":";
      why += " " + n.get_string("reason") + ";";
    }
    why.pop_back();
  }
  if (fail_on_outstanding && count(report, "outstanding") > 0) {
    if (!why.empty()) why += "; ";
    why += "outstanding " + std::to_string(count(report, "outstanding")) + " —";
    for (const auto& n : report.find("outstanding")->as_array()) why += " " + n.get_string("node");
  }
  return why;
}

const sdk::Schema& DeployStage::settings_schema() const noexcept {
  static const sdk::Schema s{
      "deploy",
      "deploys a module at the run's version (as mesh deploy)",
      {Attribute{"module", ValueType::String, true, "the module to deploy at the run's --version"},
       Attribute{"waves", ValueType::String, false, "wave sizes, cumulative (as mesh deploy --waves: 1,10%,100%)"},
       Attribute{"min_applied", ValueType::String, false, "as mesh deploy --min-applied (N or P%)"},
       Attribute{"wave_timeout", ValueType::Duration, false, "as mesh deploy --wave-timeout"},
       Attribute{"wait", ValueType::Duration, false, "how long to wait for the nodes to apply (default: not at all)"},
       Attribute{"fail_on_outstanding", ValueType::Bool, false,
                 "a node still outstanding at the end fails the stage", {}, Value(false)}}};
  return s;
}

sdk::Result<DeployStage::Request> DeployStage::request_of(const sdk::StageInput& in) const {
  Value settings = Value::object();
  for (const auto& [k, v] : in.params.as_object())
    if (std::find(std::begin(kReserved), std::end(kReserved), k) == std::end(kReserved)) settings.set(k, v);
  if (auto ok = sdk::validate_against(settings_schema(), settings, ""); !ok) return sdk::fail(ok.error());
  Request r;
  r.module = settings.get_string("module");
  r.version = in.params.get_string("version");
  if (r.version.empty()) return sdk::fail(ErrorCode::InvalidArgument, "no version to deploy", "version");
  r.options = Value::object();
  for (const char* k : {"waves", "min_applied", "wave_timeout", "wait"})
    if (const Value* v = settings.find(k)) r.options.set(k, *v);
  r.fail_on_outstanding = settings.get_bool("fail_on_outstanding", false);
  return r;
}

sdk::Result<void> DeployStage::do_check(const sdk::StageInput& in, sdk::StageContext& context) {
  MESH_TRY(r, request_of(in));
  MESH_TRY(dry, context.deploy(r.module, r.version, r.options));
  (void)dry;
  return {};
}

sdk::Result<sdk::StageOutput> DeployStage::do_run(const sdk::StageInput& in, sdk::StageContext& context,
                                                  const sdk::CancelToken& cancel) {
  MESH_TRY(r, request_of(in));
  const std::string& module = r.module;
  const std::string& version = r.version;
  const Value& options = r.options;
  if (cancel.cancelled()) return sdk::fail(ErrorCode::Cancelled, "cancelled before the deploy");
  context.log("deploy " + module + " " + version);
  MESH_TRY(report, context.deploy(module, version, options));
  context.log("deploy " + std::to_string(report.get_int("deploy", 0)) + ": declared " +
              std::to_string(report.get_int("declared", 0)) + ", applied " + std::to_string(count(report, "applied")) +
              ", failed " + std::to_string(count(report, "failed")) + ", outstanding " +
              std::to_string(count(report, "outstanding")) + ", skipped " + std::to_string(count(report, "skipped")));
  for (const char* list : {"skipped", "outstanding"})
    if (const Value* a = report.find(list); a && a->is_array())
      for (const auto& n : a->as_array())
        context.log(std::string(list) + " " + n.get_string("node") +
                    (n.get_string("reason").empty() ? "" : ": " + n.get_string("reason")));
  sdk::StageOutput out;
  out.artifacts.set("deploy", report);
  const std::string why = deploy_failure(report, r.fail_on_outstanding);
  if (!why.empty())
    return sdk::fail(ErrorCode::Failed, "deploy " + std::to_string(report.get_int("deploy", 0)) + " of " + module +
                                            " " + version + ": " + why);
  return out;
}

}  // namespace mesh::stages::deploy
