#include "service_rules.h"

#include <csignal>
#include <cstring>
#include <charconv>
#include <utility>

namespace mesh::plugins::service {
namespace {

using sdk::ErrorCode;
using sdk::fail;
using sdk::Result;
using sdk::Value;

// systemd's UNIT_NAME_MAX is 256 including the terminating NUL.
constexpr std::size_t kUnitNameMax = 255;

bool valid_unit_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
         c == '-' || c == '_' || c == '.' || c == '\\';
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool valid_resource_type(std::string_view type) {
  if (type.empty()) return false;
  for (char c : type)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : std::to_string(sig);
}

}  // namespace

std::optional<std::string> unit_name_problem(std::string_view name) {
  if (name.empty()) return "the unit name is empty";
  if (name.find('\0') != std::string_view::npos) return "the unit name contains a NUL byte";
  const std::string quoted = "'" + std::string(name) + "'";
  if (name.find('/') != std::string_view::npos)
    return quoted + " contains '/': give the unit name (nginx.service), not a path";
  if (name.size() > kUnitNameMax)
    return "the unit name is " + std::to_string(name.size()) + " bytes long; systemd's limit is " +
           std::to_string(kUnitNameMax);
  bool suffix_ok = false;
  for (auto suffix : kUnitSuffixes) suffix_ok = suffix_ok || ends_with(name, suffix);
  if (!suffix_ok)
    return quoted +
           " does not end in .service, .socket, .timer, .target, .path or .mount";
  const std::size_t dot = name.rfind('.');
  const std::string_view stem = name.substr(0, dot);
  const std::size_t at = stem.find('@');
  const std::string_view prefix = stem.substr(0, at);
  if (prefix.empty()) return quoted + " has an empty name before the suffix";
  for (char c : prefix)
    if (!valid_unit_char(c))
      return quoted + " contains '" + std::string(1, c) +
             "'; unit names use letters, digits and :-_.\\ (and one '@' before an instance)";
  if (at != std::string_view::npos) {
    const std::string_view instance = stem.substr(at + 1);
    if (instance.empty())
      return quoted + " is a template; name an instance (" + std::string(prefix) + "@NAME" +
             std::string(name.substr(dot)) + ")";
    for (char c : instance)
      if (!valid_unit_char(c) && c != '@')
        return quoted + " contains '" + std::string(1, c) + "' in its instance name";
  }
  return std::nullopt;
}

std::string_view type_interface(std::string_view unit) {
  if (ends_with(unit, ".service")) return "org.freedesktop.systemd1.Service";
  if (ends_with(unit, ".socket")) return "org.freedesktop.systemd1.Socket";
  if (ends_with(unit, ".timer")) return "org.freedesktop.systemd1.Timer";
  if (ends_with(unit, ".path")) return "org.freedesktop.systemd1.Path";
  if (ends_with(unit, ".mount")) return "org.freedesktop.systemd1.Mount";
  return "";
}

Result<std::chrono::milliseconds> parse_settle(std::string_view text, std::string path) {
  auto d = parse_duration(text);
  if (!d) return fail(ErrorCode::InvalidArgument, d.error().message, std::move(path));
  if (*d > kMaxSettle)
    return fail(ErrorCode::InvalidArgument,
                "settle window " + std::string(text) + " is longer than " +
                    format_duration(kMaxSettle),
                std::move(path));
  return *d;
}

Result<std::chrono::milliseconds> parse_timeout(std::string_view text, std::string path) {
  auto d = parse_duration(text);
  if (!d) return fail(ErrorCode::InvalidArgument, d.error().message, std::move(path));
  if (*d < kMinTimeout || *d > kMaxTimeout)
    return fail(ErrorCode::InvalidArgument,
                "timeout " + std::string(text) + " is outside " + format_duration(kMinTimeout) +
                    " .. " + format_duration(kMaxTimeout),
                std::move(path));
  return *d;
}

Result<void> validate_resource(const sdk::Resource& want) {
  if (auto problem = unit_name_problem(want.rid.id))
    return fail(ErrorCode::InvalidArgument, *problem, "id");
  const Value& props = want.properties;
  if (const Value* v = props.find("settle")) {
    if (!v->is_string()) return fail(ErrorCode::InvalidArgument, "must be a string", "properties.settle");
    if (auto d = parse_settle(v->as_string(), "properties.settle"); !d) return fail(d.error());
  }
  if (const Value* v = props.find("timeout")) {
    if (!v->is_string()) return fail(ErrorCode::InvalidArgument, "must be a string", "properties.timeout");
    if (auto d = parse_timeout(v->as_string(), "properties.timeout"); !d) return fail(d.error());
  }
  for (const char* key : {"running", "enabled"}) {
    const Value* v = props.find(key);
    if (v && !v->is_bool())
      return fail(ErrorCode::InvalidArgument, "must be a bool", std::string("properties.") + key);
  }
  if (const Value* v = props.find("restart_on")) {
    if (!v->is_array())
      return fail(ErrorCode::InvalidArgument, "must be a list of strings", "properties.restart_on");
    const auto& list = v->as_array();
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string path = "properties.restart_on[" + std::to_string(i) + "]";
      if (!list[i].is_string()) return fail(ErrorCode::InvalidArgument, "must be a string", path);
      const std::string& text = list[i].as_string();
      auto rid = sdk::ResourceId::parse(text);
      if (!rid) return fail(ErrorCode::InvalidArgument, rid.error().message, path);
      if (!valid_resource_type(rid->type))
        return fail(ErrorCode::InvalidArgument,
                    "'" + text + "': the type '" + rid->type + "' is not [a-z0-9_-]+", path);
      if (text.find('\0') != std::string::npos)
        return fail(ErrorCode::InvalidArgument, "contains a NUL byte", path);
      if (*rid == want.rid)
        return fail(ErrorCode::InvalidArgument, "'" + text + "' names this resource itself", path);
    }
  }
  return {};
}

std::optional<bool> enabled_from(std::string_view s) {
  if (s == "enabled" || s == "enabled-runtime") return true;
  if (s == "disabled" || s == "masked" || s == "masked-runtime") return false;
  return std::nullopt;
}

sdk::State state_from(std::string_view unit, const UnitStatus& status) {
  sdk::State state;
  Value& p = state.properties;
  p.set("running", status.active_state == "active");
  const auto enabled = enabled_from(status.unit_file_state);
  p.set("enabled", enabled ? Value(*enabled) : Value());
  p.set("active_state", status.active_state);
  p.set("sub_state", status.sub_state);
  p.set("result", status.result);
  p.set("load_state", status.load_state);
  p.set("unit_file_state", status.unit_file_state);
  if (ends_with(unit, ".service")) p.set("main_pid", static_cast<std::int64_t>(status.main_pid));
  return state;
}

sdk::Plan make_plan(const sdk::Resource& want, const std::optional<sdk::State>& observed) {
  sdk::Plan plan;
  plan.rid = want.rid;
  plan.desired = want;
  if (!observed) {
    // No such unit: it is neither running nor enabled, which satisfies `false` declarations.
    for (const char* key : {"running", "enabled"}) {
      const Value* v = want.properties.find(key);
      if (v && v->is_bool() && v->as_bool())
        plan.changes.push_back(sdk::Change{std::string("properties.") + key, Value(), *v});
    }
    plan.action = plan.changes.empty() ? sdk::PlanAction::None : sdk::PlanAction::Create;
    return plan;
  }
  sdk::diff_properties(want.properties, observed->properties, {"enabled", "running"},
                       plan.changes);
  plan.action = plan.changes.empty() ? sdk::PlanAction::None : sdk::PlanAction::Update;
  return plan;
}

std::string describe_status(std::string_view unit, const UnitStatus& s) {
  std::string out = "active_state=" + s.active_state + " sub_state=" + s.sub_state;
  if (!s.result.empty()) out += " result=" + s.result;
  if (ends_with(unit, ".service")) {
    if (s.exec_main_code == CLD_EXITED) out += " status=" + std::to_string(s.exec_main_status);
    else if (s.exec_main_code == CLD_KILLED || s.exec_main_code == CLD_DUMPED)
      out += " signal=" + signal_name(s.exec_main_status);
  }
  if (s.load_state != "loaded") out += " load_state=" + s.load_state;
  return out;
}

bool wants_restart(const sdk::Plan& plan) {
  for (const auto& c : plan.changes)
    if (c.path == kRestartChange) return true;
  return false;
}

}  // namespace mesh::plugins::service
