// An in-memory provider for the engine tests, with the file provider's schema (content, mode,
// owner, group, ensure) and knobs to fail, to lie on read-back and to count calls.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <stdlib.h>

#include "mesh/sdk/provider.h"

namespace mesh::engine::testing {

inline const sdk::HostContext& test_host() {
  static sdk::NullLogger logger;
  static const sdk::HostContext host{MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, &logger, "", "tool"};
  return host;
}

class MemProvider final : public sdk::Provider {
 public:
  explicit MemProvider(std::string type) : Provider(test_host()), type_(std::move(type)) {
    schema_.name = type_;
    schema_.attributes = {
        {"content", sdk::ValueType::String, false, "file content"},
        {"mode", sdk::ValueType::String, false, "octal mode"},
        {"owner", sdk::ValueType::String, false, "user name"},
        {"group", sdk::ValueType::String, false, "group name"},
        {"ensure", sdk::ValueType::String, false, "present or absent", {"present", "absent"},
         sdk::Value("present")},
    };
  }

  const sdk::Schema& schema() const noexcept override { return schema_; }
  /// Adds the `restart_on` attribute (a list of "type:id") to the schema.
  void accept_restart_on() {
    schema_.attributes.push_back({"restart_on", sdk::ValueType::StringList, false, "resources whose change notifies this one"});
  }
  /// Marks attribute `name` sensitive (its values are never shown in reasons).
  void mark_sensitive(const std::string& name) {
    for (auto& a : schema_.attributes)
      if (a.name == name) a.sensitive = true;
  }

  // --- the backend and the knobs -------------------------------------------------------------
  std::map<std::string, sdk::Value> objects;  ///< id → properties
  std::set<std::string> fail_apply;           ///< apply fails for these ids
  sdk::ErrorCode fail_apply_code = sdk::ErrorCode::Failed;  ///< with this code
  std::set<std::string> fail_remove;          ///< remove fails for these ids
  std::set<std::string> fail_read;            ///< read fails for these ids
  std::set<std::string> lie_mode;             ///< apply writes mode 0600 whatever was declared
  std::set<std::string> lie_content;          ///< apply writes other content
  std::set<std::string> ignore_remove;        ///< remove/absent "succeeds" but keeps the object
  std::function<void(const std::string& id)> on_apply;  ///< called before each apply
  int reads = 0, plans = 0, applies = 0, removes = 0, validates = 0;
  std::vector<std::string> calls;  ///< "apply:<id>", "remove:<id>" in call order
  /// The removal capability. Release: remove() keeps the object, sets the properties in
  /// `release_to` (an object, or null for none) and reports as RemoveResponse::left `left` when
  /// set, else `release_to` (nothing when both are null).
  sdk::Removal removal = sdk::Removal::Delete;
  /// ProviderCapabilities::may_replace_host (the engine's host self-test, decision 0076).
  bool may_replace_host = false;
  sdk::Value release_to;
  sdk::Value left;
  /// ProviderCapabilities::max_batch, notified_by_restart_on (decision 0106; sdk/provider.h).
  std::uint32_t max_batch = 0;
  bool notified_by_restart_on = false;
  /// "batch:<id>,<id>" per apply_batch call, also in `calls`; the SDK's default batch then runs.
  std::vector<std::string> batches;
  /// id → the notified_by list of its (first) plan, when not empty.
  std::map<std::string, std::vector<std::string>> notified;

 protected:
  sdk::Result<void> do_capabilities(sdk::ProviderCapabilities& caps) const override {
    caps.removal = removal;
    caps.may_replace_host = may_replace_host;
    caps.max_batch = max_batch;
    caps.notified_by_restart_on = notified_by_restart_on;
    return {};
  }

  sdk::Result<void> do_apply_batch(const sdk::ApplyBatchRequest& req, sdk::ApplyBatchResponse& resp) override {
    std::string ids;
    for (const auto& p : req.plans) ids += (ids.empty() ? "" : ",") + p.rid.id;
    batches.push_back("batch:" + ids);
    calls.push_back("batch:" + ids);
    return sdk::Provider::do_apply_batch(req, resp);
  }

  sdk::Result<void> do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) override {
    ++validates;
    const sdk::Resource& want = req.resource;
    if (want.rid.id.empty() || want.rid.id[0] != '/')
      resp.errors.push_back({sdk::ErrorCode::InvalidArgument, "must be an absolute path", "id"});
    return {};
  }

  sdk::Result<void> do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) override {
    ++reads;
    const sdk::ResourceId& rid = req.rid;
    if (fail_read.count(rid.id))
      return sdk::fail(sdk::ErrorCode::PermissionDenied, "stat " + rid.id + ": permission denied");
    auto it = objects.find(rid.id);
    if (it == objects.end()) return {};
    sdk::State s;
    s.properties = it->second;
    s.properties.set("ensure", "present");
    resp.state = std::move(s);
    return {};
  }

  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override {
    ++plans;
    if (!req.notified_by.empty() && !notified.count(req.desired.rid.id))
      for (const auto& r : req.notified_by) notified[req.desired.rid.id].push_back(r.str());
    const sdk::Resource& want = req.desired;
    const std::optional<sdk::State>& observed = req.observed;
    sdk::Plan& plan = resp.plan;
    plan = sdk::Plan{want.rid, sdk::PlanAction::None, {}, want};
    if (want.properties.get_string("ensure", "present") == "absent") {
      if (observed) {
        plan.action = sdk::PlanAction::Remove;
        plan.changes.push_back({"properties.ensure", sdk::Value("present"), sdk::Value("absent")});
      }
      return {};
    }
    if (!observed) {
      plan.action = sdk::PlanAction::Create;
      for (const auto& [k, v] : want.properties.as_object())
        if (k != "ensure") plan.changes.push_back({"properties." + k, sdk::Value(), v});
      return {};
    }
    sdk::diff_properties(want.properties, observed->properties, {"content", "mode", "owner", "group"},
                         plan.changes);
    if (!plan.changes.empty()) plan.action = sdk::PlanAction::Update;
    return {};
  }

  sdk::Result<void> do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) override {
    ++applies;
    const sdk::Plan& plan = req.plan;
    const std::string& id = plan.rid.id;
    calls.push_back("apply:" + id);
    if (on_apply) on_apply(id);
    if (req.cancel->cancelled()) return sdk::fail(sdk::ErrorCode::Cancelled, "cancelled");
    if (fail_apply.count(id))
      return sdk::fail(fail_apply_code, "write " + id + ": No space left on device");
    if (plan.action == sdk::PlanAction::Remove) {
      if (!ignore_remove.count(id)) objects.erase(id);
      return {};
    }
    sdk::Value props = plan.desired.properties;
    props.erase("ensure");
    if (lie_mode.count(id)) props.set("mode", "0600");
    if (lie_content.count(id)) props.set("content", std::string(300, 'x'));
    objects[id] = props;
    resp.state = sdk::State{props};
    return {};
  }

  sdk::Result<void> do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse& resp) override {
    ++removes;
    const sdk::ResourceId& rid = req.rid;
    calls.push_back("remove:" + rid.id);
    if (fail_remove.count(rid.id))
      return sdk::fail(sdk::ErrorCode::Failed, "unlink " + rid.id + ": Device or resource busy");
    if (removal == sdk::Removal::Release) {
      // Released: left as it is, except what `release_to` resets.
      if (auto it = objects.find(rid.id); it != objects.end() && release_to.is_object())
        for (const auto& [k, v] : release_to.as_object()) it->second.set(k, v);
      if (!release_to.is_null()) resp.left = left.is_null() ? release_to : left;
      return {};
    }
    if (!ignore_remove.count(rid.id)) objects.erase(rid.id);
    return {};
  }

 private:
  std::string type_;
  sdk::Schema schema_;
};

/// Logs into a vector, for checking the lines operators grep.
class CaptureLogger final : public sdk::Logger {
 public:
  void log(sdk::LogLevel, std::string_view message) noexcept override {
    lines.emplace_back(message);
  }
  bool enabled(sdk::LogLevel) const noexcept override { return true; }
  std::vector<std::string> lines;
};

/// A fresh temporary directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "engine-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace mesh::engine::testing
