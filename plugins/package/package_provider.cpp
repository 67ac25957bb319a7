#include "package_provider.h"

#include <charconv>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "apt_package_manager.h"
#include "safe_path.h"
#include "debian_version.h"
#include "mesh/sdk/duration.h"

namespace mesh::plugins::package {
namespace {

using sdk::Change;
using sdk::ErrorCode;
using sdk::fail;
using sdk::Plan;
using sdk::PlanAction;
using sdk::Result;
using sdk::State;
using sdk::Value;

constexpr std::string_view kPresent = "present";
constexpr std::string_view kAbsent = "absent";
constexpr std::string_view kPurged = "purged";
constexpr std::string_view kLatest = "latest";

bool is_exact(std::string_view version) { return version != kPresent && version != kLatest; }

// The index's own spelling of `version` ("1:2.0" when "1:2.0" or "01:2.0" was declared), or
// nullopt when apt cannot download it.
std::optional<std::string> find_available(const PackageRecord& r, std::string_view version) {
  for (const auto& v : r.available)
    if (same_version(v, version)) return v;
  return std::nullopt;
}

sdk::Attribute attr(std::string name, sdk::ValueType type, std::string description,
                    std::vector<std::string> allowed = {},
                    std::optional<Value> default_value = std::nullopt) {
  sdk::Attribute a;
  a.name = std::move(name);
  a.type = type;
  a.description = std::move(description);
  a.allowed = std::move(allowed);
  a.default_value = std::move(default_value);
  return a;
}

std::string describe_changes(const Plan& plan) {
  std::string out;
  for (const auto& c : plan.changes)
    out += (out.empty() ? "" : ", ") + c.path + " is " + c.observed.to_json() + ", declared " +
           c.declared.to_json();
  return out;
}

}  // namespace

std::optional<State> state_from_record(const PackageRecord& r) {
  std::string ensure;
  switch (r.status) {
    case InstallStatus::Unknown:
    case InstallStatus::NotInstalled: return std::nullopt;
    case InstallStatus::ConfigFiles: ensure = kAbsent; break;
    case InstallStatus::HalfInstalled: ensure = "half-installed"; break;
    case InstallStatus::Unpacked: ensure = "unpacked"; break;
    case InstallStatus::HalfConfigured: ensure = "half-configured"; break;
    case InstallStatus::TriggersAwaiting:
    case InstallStatus::TriggersPending:
    case InstallStatus::Installed: ensure = kPresent; break;
  }
  if (r.reinstall_required) ensure = "reinstall-required";
  State s;
  s.properties.set("ensure", ensure);
  s.properties.set("version", r.version.empty() ? Value() : Value(r.version));
  s.properties.set("hold", r.hold);
  s.properties.set("candidate", r.candidate ? Value(*r.candidate) : Value());
  return s;
}

PackageProvider::PackageProvider(const sdk::HostContext& host) : sdk::Provider(host) {
  AptOptions options;
  options.scratch_dir = host.state_dir;
  manager_ = make_apt_package_manager(log(), options);
}

const sdk::Schema& PackageProvider::schema() const noexcept {
  static const sdk::Schema schema{
      "package",
      "A system package (Debian: apt and dpkg), identified by its package name "
      "(`package:nginx`): installed at a version, held, removed or purged.",
      {
          attr("version", sdk::ValueType::String,
               "\"present\" (any installed version will do), \"latest\" (the newest version in "
               "apt's index; the index is refreshed when apply runs) or an exact Debian version "
               "such as \"1.22.1-9+deb12u1\" (compared by Debian's rules, so \"0:1.0\" is "
               "\"1.0\"; a lower version than the installed one is a downgrade)",
               {}, Value("present")),
          attr("ensure", sdk::ValueType::String,
               "\"present\", \"absent\" (removed, configuration files kept) or \"purged\" "
               "(removed together with its configuration files)",
               {"present", "absent", "purged"}, Value("present")),
          attr("hold", sdk::ValueType::Bool,
               "true: hold the package at its version (`apt-mark hold`), so upgrades leave it "
               "alone; false: release a hold. Ignored unless ensure = \"present\"",
               {}, Value(false)),
          attr("source", sdk::ValueType::String,
               "absolute path of an apt sources file (one-line .list, or deb822 .sources) the "
               "package comes from: when apply needs a fresh index only this file's index is "
               "downloaded, and the file is consulted even when it is not in "
               "/etc/apt/sources.list.d. Usually a `file` resource this package requires"),
      },
      {},
      sdk::IdFormat::PackageName};
  return schema;
}

const sdk::Schema& PackageProvider::config_schema() const noexcept {
  static const sdk::Schema schema{
      "provider.package",
      "Settings of the package provider.",
      {
          attr("lock_timeout", sdk::ValueType::Duration,
               "how long apt-get waits for the dpkg lock another program holds (apt's "
               "DPkg::Lock::Timeout, whole seconds, rounded up), and how long an index refresh "
               "retries while apt's lists lock is busy, as a duration like \"60s\"; running out "
               "fails the resource with a timeout that names the lock",
               {}, Value("120s")),
          attr("command_timeout", sdk::ValueType::Duration,
               "limit for one apt or dpkg command (a download, or an install), as a duration like "
               "\"5m\"; then the command and everything it started is killed and the resource "
               "fails with a timeout. Must be longer than lock_timeout. A newer revision or SIGTERM "
               "stops an index refresh or download at once, never a running dpkg",
               {}, Value("5m")),
      }};
  return schema;
}

Result<void> PackageProvider::do_configure(const Value& config) {
  const std::string lock_text = config.get_string("lock_timeout", "120s");
  const auto lock = sdk::parse_duration(lock_text);
  if (!lock)
    return fail(ErrorCode::InvalidArgument,
                "'" + lock_text + "' is not a duration like 500ms, 15s, 2m, 1h", "lock_timeout");
  const std::string command_text = config.get_string("command_timeout", "5m");
  const auto command = sdk::parse_duration(command_text);
  if (!command || command->count() == 0)
    return fail(ErrorCode::InvalidArgument,
                "'" + command_text + "' is not a positive duration like 30s, 15m, 1h",
                "command_timeout");
  // apt counts the lock wait in whole seconds; round up so "500ms" still waits.
  const auto lock_seconds = std::chrono::seconds((lock->count() + 999) / 1000);
  if (*command <= lock_seconds)
    return fail(ErrorCode::InvalidArgument,
                "must be longer than lock_timeout (" + lock_text +
                    "), or every lock wait would be killed before apt reports it",
                "command_timeout");
  lock_timeout_ = lock_seconds;
  command_timeout_ = *command;
  AptOptions options;
  options.lock_timeout = lock_timeout_;
  options.command_timeout = command_timeout_;
  options.scratch_dir = host().state_dir;
  manager_ = make_apt_package_manager(log(), options);
  return {};
}

Result<PackageProvider::Spec> PackageProvider::spec_of(const sdk::Resource& want) const {
  Spec spec;
  spec.name = want.rid.id;
  if (auto problem = package_name_problem(spec.name))
    return fail(ErrorCode::InvalidArgument, *problem, "id");
  const Value& p = want.properties;
  spec.ensure = p.get_string("ensure", std::string(kPresent));
  if (spec.ensure != kPresent && spec.ensure != kAbsent && spec.ensure != kPurged)
    return fail(ErrorCode::InvalidArgument,
                "'" + spec.ensure + "' is not one of: present, absent, purged",
                "properties.ensure");
  spec.version = p.get_string("version", std::string(kPresent));
  if (is_exact(spec.version)) {
    if (auto problem = version_problem(spec.version))
      return fail(ErrorCode::InvalidArgument,
                  *problem + "; expected \"present\", \"latest\" or a Debian version like 1.2-3",
                  "properties.version");
  }
  // Only an installed package can be held; with ensure = absent or purged the hold is moot (and
  // dropped by the removal), so `hold` is ignored rather than refused.
  spec.hold = spec.ensure == kPresent && p.get_bool("hold", false);
  if (const Value* source = p.find("source"); source && !source->is_null()) {
    if (!source->is_string())
      return fail(ErrorCode::InvalidArgument, "must be a string", "properties.source");
    const std::string& s = source->as_string();
    if (s.empty() || s.front() != '/' || s.find('\0') != std::string::npos)
      return fail(ErrorCode::InvalidArgument, "'" + s + "' is not an absolute path",
                  "properties.source");
    const bool list = s.size() > 5 && s.compare(s.size() - 5, 5, ".list") == 0;
    const bool sources = s.size() > 8 && s.compare(s.size() - 8, 8, ".sources") == 0;
    if (!list && !sources)
      return fail(ErrorCode::InvalidArgument,
                  "'" + s + "' must end in .list (one-line format) or .sources (deb822), as apt "
                  "reads only those",
                  "properties.source");
    spec.source = s;
  }
  return spec;
}

void PackageProvider::remember_source(const Spec& spec) {
  if (spec.source)
    sources_[spec.name] = *spec.source;
  else
    sources_.erase(spec.name);
}

std::optional<std::string> PackageProvider::source_for(const std::string& name) const {
  auto it = sources_.find(name);
  if (it == sources_.end()) return std::nullopt;
  return it->second;
}

Result<PackageRecord> PackageProvider::query(const std::string& name,
                                             const std::optional<std::string>& source) {
  return manager_->query(name, source);
}

Result<void> PackageProvider::validate_one(const sdk::Resource& want) {
  auto spec = spec_of(want);
  if (!spec) return fail(spec.error());
  // The engine validates every resource before reading any; read() only gets the id, and must
  // look at the same sources as apply will.
  remember_source(*spec);
  return {};
}

Result<std::optional<State>> PackageProvider::read_one(const sdk::ResourceId& rid) {
  if (auto problem = package_name_problem(rid.id))
    return fail(ErrorCode::InvalidArgument, *problem, "id");
  auto record = query(rid.id, source_for(rid.id));
  if (!record) return fail(record.error());
  return state_from_record(*record);
}

Result<Plan> PackageProvider::plan_one(const sdk::Resource& want,
                                      const std::optional<State>& observed) {
  auto spec = spec_of(want);
  if (!spec) return fail(spec.error());
  Plan plan;
  plan.rid = want.rid;
  plan.desired = want;

  const Value* have = observed ? &observed->properties : nullptr;
  const std::string have_ensure = have ? have->get_string("ensure") : std::string();
  // apply() reports "purged" where read() says nullopt: both mean nothing is there.
  const bool nothing = !have || have_ensure == kPurged;
  auto observed_value = [&](std::string_view key) {
    const Value* v = have ? have->find(key) : nullptr;
    return v ? *v : Value();
  };
  auto change = [&](const char* key, Value declared) {
    plan.changes.push_back(
        Change{std::string("properties.") + key, observed_value(key), std::move(declared)});
  };

  if (spec->ensure == kPresent) {
    if (have_ensure != kPresent) {
      change("ensure", Value(spec->ensure));
      if (spec->version != kPresent) change("version", Value(spec->version));
      if (spec->hold || (have && have->get_bool("hold", false))) change("hold", Value(spec->hold));
      plan.action = nothing ? PlanAction::Create : PlanAction::Update;
      return plan;
    }
    const std::string installed = have->get_string("version");
    if (spec->version == kLatest) {
      const std::string candidate = have->get_string("candidate");
      if (!candidate.empty() && compare_versions(candidate, installed) > 0)
        change("version", Value(spec->version));
    } else if (is_exact(spec->version) && !same_version(installed, spec->version)) {
      change("version", Value(spec->version));
    }
    if (have->get_bool("hold", false) != spec->hold) change("hold", Value(spec->hold));
    plan.action = plan.changes.empty() ? PlanAction::None : PlanAction::Update;
    return plan;
  }

  // absent: configuration files may stay; purged: nothing may stay.
  const bool satisfied = nothing || (spec->ensure == kAbsent && have_ensure == kAbsent);
  if (!satisfied) {
    change("ensure", Value(spec->ensure));
    plan.action = PlanAction::Remove;
  }
  return plan;
}

Result<void> PackageProvider::converge_present(const Spec& spec, bool refresh_requested,
                                               const sdk::CancelToken& cancel) {
  auto record = query(spec.name, spec.source);
  if (!record) return fail(record.error());
  const bool exact = is_exact(spec.version);
  bool refresh = refresh_requested || spec.version == kLatest;
  if (!refresh) {
    if (exact)
      refresh = !(is_installed(*record) && same_version(record->version, spec.version)) &&
                !find_available(*record, spec.version);
    else
      refresh = !is_installed(*record) && !record->candidate;
  }
  if (refresh) {
    if (cancel.cancelled())
      return fail(ErrorCode::Cancelled, "cancelled before refreshing the package index");
    log().info("resource=package:" + spec.name + " step=refresh_index source=" +
               (spec.source ? *spec.source : std::string("all")));
    if (auto r = manager_->refresh_index(spec.source, cancel); !r) return r;
    record = query(spec.name, spec.source);
    if (!record) return fail(record.error());
  }

  bool install = !is_installed(*record);
  if (exact && !same_version(record->version, spec.version)) install = true;
  if (spec.version == kLatest && record->candidate &&
      compare_versions(*record->candidate, record->version) > 0)
    install = true;
  if (install) {
    if (cancel.cancelled()) return fail(ErrorCode::Cancelled, "cancelled before installing");
    InstallRequest request;
    request.name = spec.name;
    if (exact) request.version = find_available(*record, spec.version).value_or(spec.version);
    request.allow_downgrade = exact && is_installed(*record) &&
                              compare_versions(spec.version, record->version) < 0;
    request.allow_change_held = record->hold;
    request.source = spec.source;
    log().info("resource=package:" + spec.name + " step=install version=" +
               (request.version.empty() ? spec.version : request.version) +
               " installed=" + (record->version.empty() ? "none" : record->version));
    if (auto r = manager_->install(request, cancel); !r) return r;
    record = query(spec.name, spec.source);
    if (!record) return fail(record.error());
  }

  if (is_installed(*record) && record->hold != spec.hold) {
    if (cancel.cancelled())
      return fail(ErrorCode::Cancelled, "cancelled before changing the hold mark");
    log().info("resource=package:" + spec.name + " step=" + (spec.hold ? "hold" : "unhold"));
    if (auto r = manager_->set_hold(spec.name, spec.hold, cancel); !r) return r;
  }
  return {};
}

Result<void> PackageProvider::repair_interrupted(const std::string& what,
                                                 const sdk::CancelToken& cancel) {
  auto audit = manager_->audit();
  if (!audit) return fail(audit.error());
  if (audit->empty()) return {};
  std::string said;
  for (const auto& line : *audit) {
    if (said.size() > 300) {
      said += " …";
      break;
    }
    said += (said.empty() ? "" : " ") + line;
  }
  if (cancel.cancelled()) return fail(ErrorCode::Cancelled, "cancelled before repairing dpkg");
  log().warn("resource=" + what + " step=repair outcome=repairing dpkg was interrupted (dpkg --audit: " +
             said + "): running dpkg --configure -a before the change");
  if (auto r = manager_->repair(cancel); !r) {
    log().error("resource=" + what + " step=repair outcome=failed " + r.error().message);
    return fail(r.error().code == ErrorCode::Timeout ? ErrorCode::Timeout
                                                     : ErrorCode::FailedPrecondition,
                "dpkg was left interrupted (dpkg --audit: " + said +
                    ") and the repair failed: " + r.error().message +
                    "; repair the package database by hand (dpkg --configure -a, dpkg --audit)");
  }
  auto after = manager_->audit();
  if (!after) return fail(after.error());
  log().info("resource=" + what + " step=repair outcome=repaired dpkg --configure -a finished" +
             (after->empty() ? std::string("; dpkg --audit is clean")
                             : "; dpkg --audit still reports: " + after->front()));
  return {};
}

Result<State> PackageProvider::apply_one(const Plan& plan, const sdk::CancelToken& cancel) {
  auto spec = spec_of(plan.desired);
  if (!spec) return fail(spec.error());
  if (plan.rid.id != spec->name)
    return fail(ErrorCode::InvalidArgument,
                "the plan is for " + plan.rid.str() + " but carries " + plan.desired.rid.str(),
                "id");
  remember_source(*spec);
  const bool refresh_requested = asks_refresh(plan);
  if (cancel.cancelled()) return fail(ErrorCode::Cancelled, "cancelled before starting");
  // apt reads the sources file as root and installs what it points to: it must be a file only
  // root (or the host's user) can change, reached without a symbolic link (safe_path.h).
  if (spec->source) {
    paths::Trust trust;
    trust.opt_out_hint.clear();
    auto checked = paths::inspect(*spec->source, trust, paths::DeniedRoots{}, "properties.source " + *spec->source,
                                  /*object_trusted=*/true);
    if (!checked) return fail(checked.error().code, checked.error().message, "properties.source");
  }

  if (!plan.empty() || refresh_requested) {
    if (auto r = repair_interrupted(plan.rid.str(), cancel); !r) return fail(r.error());
    if (spec->ensure == kPresent) {
      if (auto r = converge_present(*spec, refresh_requested, cancel); !r) return fail(r.error());
    } else {
      auto record = query(spec->name, spec->source);
      if (!record) return fail(record.error());
      const bool purge = spec->ensure == kPurged;
      const bool needed = purge ? (record->status != InstallStatus::Unknown &&
                                   record->status != InstallStatus::NotInstalled)
                                : has_files(*record);
      if (needed) {
        log().info("resource=package:" + spec->name + " step=" + (purge ? "purge" : "remove"));
        if (auto r = manager_->remove(spec->name, purge, spec->source, cancel); !r)
          return fail(r.error());
      }
    }
  }

  // Read back and re-plan: apt-get exiting 0 is not proof (the design notes record a package
  // install that 404ed from every mirror while the job went green).
  auto record = query(spec->name, spec->source);
  if (!record) return fail(record.error());
  std::optional<State> observed = state_from_record(*record);
  State result;
  if (observed) {
    result = *observed;
  } else {
    result.properties.set("ensure", std::string(kPurged));
    result.properties.set("version", Value());
    result.properties.set("hold", false);
    result.properties.set("candidate", record->candidate ? Value(*record->candidate) : Value());
  }
  auto check = plan_one(plan.desired, result);
  if (!check) return fail(check.error());
  if (!check->empty())
    return fail(ErrorCode::Failed, manager_->name() + std::string(" reported success for ") +
                                       plan.rid.str() + " but the package is not as declared: " +
                                       describe_changes(*check));
  return result;
}

Result<void> PackageProvider::remove_one(const sdk::ResourceId& rid, const sdk::CancelToken& cancel) {
  if (auto problem = package_name_problem(rid.id))
    return fail(ErrorCode::InvalidArgument, *problem, "id");
  const auto source = source_for(rid.id);
  auto record = query(rid.id, source);
  if (!record) return fail(record.error());
  if (!has_files(*record)) return {};
  if (cancel.cancelled()) return fail(ErrorCode::Cancelled, "cancelled before removing");
  if (auto r = repair_interrupted(rid.str(), cancel); !r) return r;
  log().info("resource=package:" + rid.id + " step=remove");
  if (auto r = manager_->remove(rid.id, /*purge=*/false, source, cancel); !r) return r;
  record = query(rid.id, source);
  if (!record) return fail(record.error());
  if (has_files(*record))
    return fail(ErrorCode::Failed, std::string(manager_->name()) + " reported success for " +
                                       rid.str() + " but dpkg still lists it as installed");
  return {};
}

// ---- ABI 2 entry points ---------------------------------------------------------------------

sdk::Result<void> PackageProvider::do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) {
  return sdk::report(resp, validate_one(req.resource));
}

sdk::Result<void> PackageProvider::do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) {
  auto state = read_one(req.rid);
  if (!state) return sdk::fail(state.error());
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> PackageProvider::do_capabilities(sdk::ProviderCapabilities& caps) const {
  caps.notified_by_requires = true;
  caps.notification = kRefreshIndexKey;
  // Installing a package can replace the running host's own executable (nox-mesh-host): the
  // engine then self-tests the new one (docs/decisions/0076). What read() returns (ensure,
  // version, hold) is a valid declaration, which is how the engine reverts.
  caps.may_replace_host = true;
  return {};
}

sdk::Result<void> PackageProvider::do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) {
  auto plan = plan_one(req.desired, req.observed);
  if (!plan) return sdk::fail(plan.error());
  // A changed requirement (typically the apt sources file): refresh the index, unless the
  // package is declared absent or purged, or the plan removes it.
  const std::string ensure = req.desired.properties.get_string("ensure");
  if (sdk::notified(req, *plan) && (ensure.empty() || ensure == kPresent))
    sdk::add_notification_change(*plan, kRefreshIndexKey, Value(true));
  resp.plan = std::move(*plan);
  return {};
}

sdk::Result<void> PackageProvider::do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) {
  const Plan& plan = req.plan;
  // Only the refresh was planned: what it changed is found out here, by comparing the declared
  // properties before and after (a newer `latest`, a version that just appeared, or nothing).
  const bool only_refresh = asks_refresh(plan) && plan.changes.size() == 1;
  std::optional<State> before;
  if (only_refresh) {
    auto now = read_one(plan.rid);
    if (!now) return sdk::fail(now.error());
    before = std::move(*now);
  }
  auto state = apply_one(plan, *req.cancel);
  if (!state) {
    if (!only_refresh) return sdk::fail(state.error());
    sdk::Error e = state.error();
    e.message = "refreshing the index after " + sdk::names_of(req.notified_by) + " changed: " + e.message;
    return sdk::fail(std::move(e));
  }
  if (only_refresh) {
    std::vector<Change> changed;
    static const Value kNull;
    for (const auto& [key, declared] : plan.desired.properties.as_object()) {
      (void)declared;
      const Value* a = before ? before->properties.find(key) : nullptr;
      const Value* b = state->properties.find(key);
      const Value& va = a ? *a : kNull;
      const Value& vb = b ? *b : kNull;
      if (!(va == vb)) changed.push_back(Change{"properties." + key, va, vb});
    }
    if (!changed.empty()) changed.push_back(plan.changes.front());
    resp.changed = std::move(changed);
  }
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> PackageProvider::do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse&) {
  return remove_one(req.rid, *req.cancel);
}

}  // namespace mesh::plugins::package
