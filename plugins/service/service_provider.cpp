#include "service_provider.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "unit_logs.h"

namespace mesh::plugins::service {
namespace {

using sdk::ErrorCode;
using sdk::fail;
using sdk::Result;
using sdk::Value;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr milliseconds kPollInterval{100};

std::string ms_text(steady_clock::duration d) {
  return format_duration(std::chrono::duration_cast<milliseconds>(d));
}

bool is_stopped(const std::string& active_state) {
  return active_state == "inactive" || active_state == "failed";
}

std::optional<bool> declared_bool(const Value& props, std::string_view key) {
  const Value* v = props.find(key);
  if (v && v->is_bool()) return v->as_bool();
  return std::nullopt;
}

sdk::Schema make_schema() {
  using sdk::Attribute;
  using sdk::ValueType;
  return sdk::Schema{
      "service",
      "systemd units (service, socket, timer, target, path, mount), identified by unit name: "
      "started and verified to stay active, stopped, enabled or disabled",
      {
          Attribute{"running", ValueType::Bool, false,
                    "true: started and verified to stay active for `settle`; false: stopped. "
                    "Undeclared: not managed"},
          Attribute{"enabled", ValueType::Bool, false,
                    "whether the unit starts at boot through its [Install] section "
                    "(EnableUnitFiles/DisableUnitFiles). Undeclared: not managed; not applicable "
                    "to static units"},
          Attribute{"restart_on", ValueType::StringList, false,
                    "resources (\"type:id\", e.g. \"file:/etc/nginx/nginx.conf\") whose change "
                    "in the same apply restarts this unit; acted on by the engine"},
          Attribute{"settle", ValueType::Duration, false,
                    "settle window, a duration (500ms, 2s, 1m): how long a started unit must stay "
                    "active before it counts as running; default: the provider config's `settle`"},
          Attribute{"timeout", ValueType::Duration, false,
                    "how long a start, stop or restart job may take, a duration (90s, 5m); "
                    "default: the provider config's `timeout`"},
      },
      {},
      sdk::IdFormat::UnitName};
}

sdk::Schema make_config_schema() {
  using sdk::Attribute;
  using sdk::ValueType;
  return sdk::Schema{
      "provider.service",
      "settings of the service provider",
      {
          Attribute{"settle", ValueType::Duration, false,
                    "default settle window, a duration (0ms .. 1h): how long a started unit must "
                    "stay active",
                    {}, Value("2s")},
          Attribute{"timeout", ValueType::Duration, false,
                    "default limit for a start, stop or restart job, a duration (100ms .. 24h)",
                    {}, Value("90s")},
          Attribute{"bus_address", ValueType::String, false,
                    "D-Bus address of systemd (\"unix:path=/run/systemd/private\"); default: "
                    "the private socket when root, else the system bus"},
      }};
}

}  // namespace

ServiceProvider::ServiceProvider(const sdk::HostContext& host) : sdk::Provider(host) {}

ServiceProvider::~ServiceProvider() = default;

const sdk::Schema& ServiceProvider::schema() const noexcept {
  static const sdk::Schema schema = make_schema();
  return schema;
}

const sdk::Schema& ServiceProvider::config_schema() const noexcept {
  static const sdk::Schema schema = make_config_schema();
  return schema;
}

Result<void> ServiceProvider::do_configure(const Value& config) {
  if (const Value* v = config.find("settle"); v && v->is_string()) {
    auto d = parse_settle(v->as_string(), "settle");
    if (!d) return fail(d.error());
    settle_ = *d;
  }
  if (const Value* v = config.find("timeout"); v && v->is_string()) {
    auto d = parse_timeout(v->as_string(), "timeout");
    if (!d) return fail(d.error());
    timeout_ = *d;
  }
  if (const Value* v = config.find("bus_address"); v && v->is_string()) {
    if (v->as_string().empty() || v->as_string().find('\0') != std::string::npos)
      return fail(ErrorCode::InvalidArgument, "must be a D-Bus address like unix:path=/run/systemd/private",
                  "bus_address");
    bus_address_ = v->as_string();
  }
  bus_.reset();
  return {};
}

Result<void> ServiceProvider::validate_one(const sdk::Resource& want) {
  return validate_resource(want);
}

SystemdBus& ServiceProvider::bus() {
  if (!bus_) bus_ = std::make_unique<SystemdBus>(bus_address_);
  return *bus_;
}

Result<ServiceProvider::Target> ServiceProvider::open_unit(const sdk::ResourceId& rid) {
  if (auto problem = unit_name_problem(rid.id))
    return fail(ErrorCode::InvalidArgument, *problem, "id");
  Target t{rid.str(), rid.id, {}, std::chrono::system_clock::now()};
  if (auto ok = bus().connect(); !ok) return fail(ok.error());
  auto path = bus().load_unit(t.name);
  if (!path) return fail(path.error());
  t.path = *path;
  return t;
}

Result<std::optional<sdk::State>> ServiceProvider::read_one(const sdk::ResourceId& rid) {
  auto t = open_unit(rid);
  if (!t) return fail(t.error());
  auto st = bus().status(t->name, t->path);
  if (!st) return fail(st.error());
  if (st->load_state == "not-found") return std::optional<sdk::State>();
  return std::optional<sdk::State>(state_from(t->name, *st));
}

Result<sdk::Plan> ServiceProvider::plan_one(const sdk::Resource& want,
                                           const std::optional<sdk::State>& observed) {
  if (auto ok = validate_resource(want); !ok) return fail(ok.error());
  return make_plan(want, observed);
}

std::string ServiceProvider::logs(const Target& t) {
  std::vector<std::string> files;
  if (auto f = bus().unit_files(t.path)) files = std::move(*f);
  return last_log_lines(t.name, files, t.began);
}

Result<UnitStatus> ServiceProvider::wait_job(const Target& t, const std::string& job,
                                             const char* what, steady_clock::time_point deadline,
                                             const sdk::CancelToken& cancel) {
  for (;;) {
    auto st = bus().status(t.name, t.path);
    if (!st) return fail(st.error());
    if (st->job_path != job) return st;
    if (cancel.cancelled())
      return fail(ErrorCode::Cancelled, t.rid + ": cancelled while waiting for its " + what +
                                            " job (left to systemd): " + describe_status(t.name, *st));
    if (steady_clock::now() >= deadline)
      return fail(ErrorCode::Timeout, describe_status(t.name, *st));
    std::this_thread::sleep_for(kPollInterval);
  }
}

Result<UnitStatus> ServiceProvider::start_verified(const Target& t, const char* method,
                                                   const Limits& limits,
                                                   const sdk::CancelToken& cancel) {
  const auto start = steady_clock::now();
  auto job = bus().unit_job(method, t.name);
  if (!job) {
    auto e = job.error();
    e.message = t.rid + ": " + e.message;
    return fail(std::move(e));
  }
  // Every failure below leaves the unit stopped rather than half-started or restarting in a loop
  // (StopUnit replaces a pending start job and cancels an automatic restart); the reason keeps
  // the status seen when it failed.
  auto give_up = [&](ErrorCode code, std::string message) -> Result<UnitStatus> {
    auto now = bus().status(t.name, t.path);
    if (now && (!is_stopped(now->active_state) || !now->job_path.empty())) {
      auto stopped = stop_verified(t, limits.timeout, cancel);
      message += stopped ? "; the unit was stopped" : "; stopping it failed: " + stopped.error().message;
    }
    return fail(code, message + "; " + logs(t));
  };
  auto done = wait_job(t, *job, "start", start + limits.timeout, cancel);
  if (!done) {
    // Not ready in time: Type=notify without READY=1, a hanging ExecStartPre.
    if (done.error().code != ErrorCode::Timeout) return fail(done.error());
    return give_up(ErrorCode::Timeout, t.rid + " did not become active within " +
                                           format_duration(limits.timeout) + ": " +
                                           done.error().message);
  }
  UnitStatus st = std::move(*done);
  if (st.active_state != "active") {
    std::string hint;
    if (st.active_state == "inactive" && st.result == "success")
      hint = " (it exited successfully; a oneshot needs RemainAfterExit=yes to count as running)";
    return give_up(ErrorCode::Failed,
                   t.rid + " did not start: " + describe_status(t.name, st) + hint);
  }
  // The settle window: still active, same invocation, no automatic restart.
  const std::string invocation = st.invocation_id;
  const std::uint32_t restarts = st.n_restarts;
  const auto active_at = steady_clock::now();
  const auto settle_end = active_at + limits.settle;
  for (;;) {
    const auto now = steady_clock::now();
    if (now >= settle_end) break;
    std::this_thread::sleep_for(std::min<steady_clock::duration>(kPollInterval, settle_end - now));
    if (cancel.cancelled())
      return fail(ErrorCode::Cancelled,
                  t.rid + ": cancelled during the settle window; it was active until then");
    auto cur = bus().status(t.name, t.path);
    if (!cur) return fail(cur.error());
    const std::string after = ms_text(steady_clock::now() - active_at);
    if (cur->active_state != "active")
      return give_up(ErrorCode::Failed, t.rid + " did not stay active (left after " + after +
                                            " of the " + format_duration(limits.settle) +
                                            " settle window): " + describe_status(t.name, *cur));
    if (cur->invocation_id != invocation || cur->n_restarts != restarts)
      return give_up(ErrorCode::Failed, t.rid + " restarted within " + after + " of the " +
                                            format_duration(limits.settle) +
                                            " settle window: " + describe_status(t.name, *cur));
    st = std::move(*cur);
  }
  log().info("resource=" + t.rid + " action=" + method + " outcome=active settle=" +
             format_duration(limits.settle) + " " + describe_status(t.name, st));
  return st;
}

Result<UnitStatus> ServiceProvider::stop_verified(const Target& t, milliseconds timeout,
                                                  const sdk::CancelToken& cancel) {
  const auto start = steady_clock::now();
  auto job = bus().unit_job("StopUnit", t.name);
  if (!job) {
    auto e = job.error();
    e.message = t.rid + ": " + e.message;
    return fail(std::move(e));
  }
  auto done = wait_job(t, *job, "stop", start + timeout, cancel);
  if (!done) {
    auto e = done.error();
    if (e.code == ErrorCode::Timeout)
      e.message = t.rid + " did not stop within " + format_duration(timeout) + ": " + e.message;
    return fail(std::move(e));
  }
  if (!is_stopped(done->active_state))
    return fail(ErrorCode::Failed, t.rid + " is not stopped after its stop job: " +
                                       describe_status(t.name, *done) +
                                       " (started again, e.g. by a socket or another unit?)");
  log().info("resource=" + t.rid + " action=stop outcome=stopped " +
             describe_status(t.name, *done));
  return done;
}

Result<void> ServiceProvider::set_enabled(const Target& t, bool want, const UnitStatus& now) {
  const auto current = enabled_from(now.unit_file_state);
  if (!want && !current)
    return fail(ErrorCode::Failed,
                t.rid + " cannot be disabled: unit_file_state=" + now.unit_file_state +
                    " (no [Install] section of its own to disable); leave `enabled` undeclared");
  if (want) {
    auto carries = bus().enable_unit_file(t.name);
    if (!carries) {
      auto e = carries.error();
      e.message = t.rid + ": " + e.message;
      return fail(std::move(e));
    }
    if (!*carries)
      return fail(ErrorCode::Failed, t.rid + " cannot be enabled: it has no [Install] section "
                                             "(unit_file_state=" + now.unit_file_state +
                                             "); leave `enabled` undeclared");
  } else {
    auto off = bus().disable_unit_file(t.name, false);
    if (off && now.unit_file_state == "enabled-runtime") off = bus().disable_unit_file(t.name, true);
    if (!off) {
      auto e = off.error();
      e.message = t.rid + ": " + e.message;
      return fail(std::move(e));
    }
  }
  if (auto ok = bus().reload(); !ok) return fail(ok.error());
  auto after = bus().status(t.name, t.path);
  if (!after) return fail(after.error());
  if (enabled_from(after->unit_file_state) != std::optional<bool>(want))
    return fail(ErrorCode::Failed, t.rid + (want ? " enable" : " disable") +
                                       " did not take effect: unit_file_state=" +
                                       after->unit_file_state);
  log().info("resource=" + t.rid + " action=" + (want ? "enable" : "disable") +
             " unit_file_state=" + after->unit_file_state);
  return {};
}

Result<sdk::State> ServiceProvider::apply_one(const sdk::Plan& plan, const sdk::CancelToken& cancel) {
  if (plan.action == sdk::PlanAction::Remove) {
    if (auto ok = remove_one(plan.rid, cancel); !ok) return fail(ok.error());
    auto t = open_unit(plan.rid);
    if (!t) return fail(t.error());
    auto st = bus().status(t->name, t->path);
    if (!st) return fail(st.error());
    return state_from(t->name, *st);
  }
  const Value& props = plan.desired.properties;
  Limits limits{settle_, timeout_};
  if (const Value* v = props.find("settle"); v && v->is_string()) {
    auto d = parse_settle(v->as_string(), "properties.settle");
    if (!d) return fail(d.error());
    limits.settle = *d;
  }
  if (const Value* v = props.find("timeout"); v && v->is_string()) {
    auto d = parse_timeout(v->as_string(), "properties.timeout");
    if (!d) return fail(d.error());
    limits.timeout = *d;
  }
  std::optional<bool> want_enabled, want_running;
  for (const auto& c : plan.changes) {
    if (c.path == "properties.enabled" && c.declared.is_bool()) want_enabled = c.declared.as_bool();
    if (c.path == "properties.running" && c.declared.is_bool()) want_running = c.declared.as_bool();
  }
  const bool restart = wants_restart(plan);

  auto t = open_unit(plan.rid);
  if (!t) return fail(t.error());
  auto st = bus().status(t->name, t->path);
  if (!st) return fail(st.error());
  if ((want_enabled || want_running || restart) && st->load_state == "not-found")
    return fail(ErrorCode::Failed,
                t->rid + " not found (load_state=not-found): install its unit file first, e.g. "
                         "with a file resource it requires");
  if (cancel.cancelled()) return fail(ErrorCode::Cancelled, t->rid + ": cancelled before apply");

  if (want_enabled) {
    if (auto ok = set_enabled(*t, *want_enabled, *st); !ok) return fail(ok.error());
    if (cancel.cancelled())
      return fail(ErrorCode::Cancelled, t->rid + ": cancelled after enable/disable");
  }

  const auto declared_running = declared_bool(props, "running");
  const char* start_method = nullptr;
  if (want_running == true) {
    // A fresh start also serves a restart request, unless the unit came up since it was read.
    start_method = restart && st->active_state == "active" ? "RestartUnit" : "StartUnit";
  } else if (want_running == false) {
    auto stopped = stop_verified(*t, limits.timeout, cancel);
    if (!stopped) return fail(stopped.error());
  } else if (restart) {
    if (declared_running == true) {
      start_method = "RestartUnit";
    } else if (declared_running == false) {
      log().info("resource=" + t->rid + " action=restart skipped: declared running=false");
    } else if (st->active_state == "active" || st->active_state == "activating" ||
               st->active_state == "reloading") {
      start_method = "TryRestartUnit";
    } else {
      log().info("resource=" + t->rid + " action=restart skipped: not running (" +
                 describe_status(t->name, *st) + ")");
    }
  }
  if (start_method) {
    auto started = start_verified(*t, start_method, limits, cancel);
    if (!started) return fail(started.error());
  }
  auto final_status = bus().status(t->name, t->path);
  if (!final_status) return fail(final_status.error());
  return state_from(t->name, *final_status);
}

Result<void> ServiceProvider::remove_one(const sdk::ResourceId& rid, const sdk::CancelToken& cancel) {
  auto t = open_unit(rid);
  if (!t) return fail(t.error());
  auto st = bus().status(t->name, t->path);
  if (!st) return fail(st.error());
  if (st->load_state == "not-found") return {};
  if (!is_stopped(st->active_state) || !st->job_path.empty()) {
    auto stopped = stop_verified(*t, timeout_, cancel);
    if (!stopped) return fail(stopped.error());
  }
  if (enabled_from(st->unit_file_state) == true) {
    if (auto ok = set_enabled(*t, false, *st); !ok) return fail(ok.error());
  }
  return {};
}

// ---- ABI 2 entry points ---------------------------------------------------------------------

sdk::Result<void> ServiceProvider::do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) {
  return sdk::report(resp, validate_one(req.resource));
}

sdk::Result<void> ServiceProvider::do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) {
  auto state = read_one(req.rid);
  if (!state) return sdk::fail(state.error());
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> ServiceProvider::do_capabilities(sdk::ProviderCapabilities& caps) const {
  // The unit file belongs to whoever installed it (a package, a file resource): a prune stops
  // and disables the unit and leaves it there.
  caps.removal = sdk::Removal::Release;
  caps.notified_by_restart_on = true;
  caps.notification = "restart";
  caps.exists_before_management = true;
  return {};
}

sdk::Result<void> ServiceProvider::do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) {
  auto plan = plan_one(req.desired, req.observed);
  if (!plan) return sdk::fail(plan.error());
  // What `restart_on` names changed in this apply: the restart change (service_provider.h).
  if (sdk::notified(req, *plan)) sdk::add_notification_change(*plan, std::string(kRestartChange));
  resp.plan = std::move(*plan);
  return {};
}

sdk::Result<void> ServiceProvider::do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) {
  auto state = apply_one(req.plan, *req.cancel);
  if (!state) {
    const bool only_restart = req.plan.changes.size() == 1 && wants_restart(req.plan);
    if (!only_restart || req.notified_by.empty()) return sdk::fail(state.error());
    sdk::Error e = state.error();
    e.message = "restart after " + sdk::names_of(req.notified_by) + " changed: " + e.message;
    return sdk::fail(std::move(e));
  }
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> ServiceProvider::do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse& resp) {
  if (auto ok = remove_one(req.rid, *req.cancel); !ok) return ok;
  // Released: stopped, and disabled where it has an [Install] section of its own.
  auto t = open_unit(req.rid);
  if (!t) return sdk::fail(t.error());
  auto st = bus().status(t->name, t->path);
  if (!st) return sdk::fail(st.error());
  if (st->load_state == "not-found") return {};
  Value left = Value::object();
  left.set("running", false);
  if (enabled_from(st->unit_file_state).has_value()) left.set("enabled", false);
  resp.left = std::move(left);
  return {};
}

}  // namespace mesh::plugins::service
