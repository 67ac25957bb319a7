#include "container_provider.h"

#include <sodium.h>

#include <stdexcept>
#include <thread>

namespace mesh::plugins::container {
namespace {

using sdk::ErrorCode;
using sdk::Value;
using Clock = std::chrono::steady_clock;
using sdk::format_duration;

const char* const kRestartPolicies[] = {"no", "always", "on-failure", "unless-stopped"};

std::string whole_seconds(std::chrono::milliseconds d) {
  return std::to_string((d.count() + 999) / 1000);
}

std::string describe_changes(const sdk::Plan& plan) {
  std::string out;
  for (const auto& c : plan.changes) {
    if (!out.empty()) out += "; ";
    out += c.path + ": engine has " + c.observed.to_json() + ", declared " + c.declared.to_json();
  }
  return out;
}

std::string change_list(const sdk::Plan& plan) {
  std::string out;
  for (const auto& c : plan.changes) {
    std::string_view p = c.path;
    if (p.substr(0, 11) == "properties.") p.remove_prefix(11);
    out += (out.empty() ? "" : ",") + std::string(p);
  }
  return out.empty() ? "none" : out;
}

sdk::State absent_state() {
  sdk::State s;
  s.properties.set("ensure", "absent");
  return s;
}

sdk::Result<std::vector<std::string>> string_list(const Value& config, const char* key) {
  std::vector<std::string> out;
  const Value* v = config.find(key);
  if (!v || v->is_null()) return out;
  if (!v->is_array()) return sdk::fail(ErrorCode::InvalidArgument, "must be a list of strings", key);
  for (const auto& e : v->as_array()) {
    if (!e.is_string() || e.as_string().find('\0') != std::string::npos)
      return sdk::fail(ErrorCode::InvalidArgument, "must be a list of strings without NUL bytes",
                       key);
    out.push_back(e.as_string());
  }
  return out;
}

}  // namespace

ContainerProvider::ContainerProvider(const sdk::HostContext& host)
    : sdk::Provider(host), engine_(std::make_unique<Engine>(EngineConfig{})) {
  if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised");
}

const sdk::Schema& ContainerProvider::schema() const noexcept {
  static const sdk::Schema schema = [] {
    sdk::Schema s;
    s.name = "container";
    s.description =
        "A container of a Docker-compatible engine (podman first), named by the resource id "
        "(container:web). Created with labels io.nox-mesh.image and io.nox-mesh.config; after "
        "start, apply waits the provider's settle window and verifies the container still runs "
        "with what was declared.";
    s.attributes = {
        {"image", sdk::ValueType::String, true,
         "Image reference: name@sha256:<digest> (preferred), an image ID sha256:<id>, or "
         "name:tag. Pulled only when no local image has it; a tag is resolved to the local image "
         "ID at apply time (state: image_id), and a tag moved to another image later is drift."},
        {"command", sdk::ValueType::StringList, false,
         "Command and arguments run in the container (replaces the image's CMD; an ENTRYPOINT "
         "is kept). Absent or empty: the image's default."},
        {"env", sdk::ValueType::StringMap, false,
         "Environment variables set in the container, NAME to value (NAME matches "
         "[A-Za-z_][A-Za-z0-9_]*). Variables the image sets are left alone."},
        {"ports", sdk::ValueType::StringList, false,
         "Published ports, [host_ip:]host_port:container_port[/tcp|/udp|/sctp] (tcp when "
         "omitted). Verified after start: a port the engine did not publish fails the apply."},
        {"volumes", sdk::ValueType::StringList, false,
         "Mounts, host_path:container_path[:ro|:rw] (absolute, normalised paths) or "
         "volume_name:container_path[:ro|:rw]. Verified after start."},
        {"restart", sdk::ValueType::String, false,
         "Restart policy the engine applies when the process exits.",
         {kRestartPolicies[0], kRestartPolicies[1], kRestartPolicies[2], kRestartPolicies[3]},
         Value("no")},
        {"running", sdk::ValueType::Bool, false,
         "Whether the container's process runs. true is verified: still running, not restarted, "
         "after the settle window. A stopped container is started (not re-created).",
         {}, Value(true)},
        {"ensure", sdk::ValueType::String, false,
         "present: the container exists as declared; absent: it is removed (rm --force).",
         {"present", "absent"}, Value("present")},
        {"allow_untrusted_parents", sdk::ValueType::Bool, false,
         "true: mount a host path even when a directory above it can be changed by a user other "
         "than root and the host's user (who could swap what the engine mounts between the "
         "check and the mount). A symbolic link on a host path is refused either way.",
         {}, Value(false)},
    };
    s.id_format = sdk::IdFormat::ContainerName;
    return s;
  }();
  return schema;
}

const sdk::Schema& ContainerProvider::config_schema() const noexcept {
  static const sdk::Schema schema = [] {
    sdk::Schema s;
    s.name = "provider.container";
    s.description = "How the container provider reaches its engine.";
    s.attributes = {
        {"engine", sdk::ValueType::String, false,
         "Which command-line dialect to speak.", {"podman", "docker"}, Value("podman")},
        {"binary", sdk::ValueType::String, false,
         "Program to run (absolute path, or a name looked up on PATH). Default: the engine's "
         "name."},
        {"global_args", sdk::ValueType::StringList, false,
         "Arguments placed before every subcommand (e.g. --root, --runroot, "
         "--cgroup-manager=cgroupfs, --runtime runc).",
         {}, Value(Value::Array{})},
        {"run_args", sdk::ValueType::StringList, false,
         "Arguments appended to every run/create (e.g. --ulimit nofile=1024:20000, "
         "--network=none). Not part of the configuration hash: changing them re-creates nothing.",
         {}, Value(Value::Array{})},
        {"settle", sdk::ValueType::Duration, false,
         "How long a started container must keep running before apply reports it (duration: "
         "500ms, 2s, 1m).",
         {}, Value("2s")},
        {"timeout", sdk::ValueType::Duration, false,
         "Longest any single engine command may run before it is killed (duration).", {},
         Value("5m")},
        {"stop_timeout", sdk::ValueType::Duration, false,
         "Grace between SIGTERM and SIGKILL when stopping or removing a container (duration, "
         "rounded up to whole seconds).",
         {}, Value("10s")},
        {"denied_roots", sdk::ValueType::StringList, false,
         "Absolute paths no volume may mount from. mesh-host adds its path policy here (its "
         "state directory, the control plane's, [paths] deny)."},
    };
    return s;
  }();
  return schema;
}

sdk::Result<void> ContainerProvider::do_configure(const Value& config) {
  EngineConfig c;
  c.engine = config.get_string("engine", "podman");
  if (c.engine != "podman" && c.engine != "docker")
    return sdk::fail(ErrorCode::InvalidArgument, "'" + c.engine + "' is not one of: podman, docker",
                     "engine");
  if (const Value* b = config.find("binary"); b && !b->is_null()) {
    if (!b->is_string() || b->as_string().empty() ||
        b->as_string().find('\0') != std::string::npos)
      return sdk::fail(ErrorCode::InvalidArgument, "must be a program name or path", "binary");
    c.binary = b->as_string();
  }
  auto global = string_list(config, "global_args");
  if (!global) return sdk::fail(global.error());
  c.global_args = std::move(*global);
  auto run = string_list(config, "run_args");
  if (!run) return sdk::fail(run.error());
  c.run_args = std::move(*run);
  struct {
    const char* key;
    const char* fallback;
    std::chrono::milliseconds* into;
  } durations[] = {{"settle", "2s", &c.settle},
                   {"timeout", "5m", &c.timeout},
                   {"stop_timeout", "10s", &c.stop_timeout}};
  for (auto& d : durations) {
    auto parsed = parse_duration(config.get_string(d.key, d.fallback));
    if (!parsed) return sdk::fail(ErrorCode::InvalidArgument, parsed.error().message, d.key);
    *d.into = *parsed;
  }
  if (c.timeout.count() == 0)
    return sdk::fail(ErrorCode::InvalidArgument, "must be longer than 0", "timeout");
  auto denied = paths::DeniedRoots::from_config(config.find("denied_roots"), "denied_roots");
  if (!denied) return sdk::fail(denied.error());
  denied_ = std::move(*denied);
  engine_ = std::make_unique<Engine>(std::move(c));
  return {};
}

namespace {
// The host path of a canonical `source:destination[:ro]` volume, or "" for a named volume.
std::string bind_source(const std::string& volume) {
  if (volume.empty() || volume[0] != '/') return {};
  return volume.substr(0, volume.find(':'));
}
}  // namespace

sdk::Result<void> ContainerProvider::validate_one(const sdk::Resource& want) {
  auto spec = parse_spec(want);
  if (!spec) return sdk::fail(spec.error());
  for (const auto& v : spec->volumes) {
    const std::string source = bind_source(v);
    if (const std::string* root = source.empty() ? nullptr : denied_.lexical_match(source))
      return sdk::fail(ErrorCode::PermissionDenied,
                       "'" + source + "' is under " + *root +
                           ", which the host's path policy denies (its own state directory, the "
                           "control plane's, and [paths] deny in host.toml)",
                       "properties.volumes");
  }
  return {};
}

sdk::Result<void> ContainerProvider::check_bind_sources(const sdk::Resource& want,
                                                        const ContainerSpec& spec) const {
  // The engine resolves a bind source itself, as root, following links: each must be reached
  // without a symbolic link through directories nobody else can change (safe_path.h), so what it
  // mounts is what was checked. A missing source is left to the engine to report.
  paths::Trust trust;
  trust.allow_untrusted = want.properties.get_bool("allow_untrusted_parents", false);
  for (const auto& v : spec.volumes) {
    const std::string source = bind_source(v);
    if (source.empty()) continue;
    auto checked = paths::inspect(source, trust, denied_, "volume " + v + " of container:" + spec.name);
    if (!checked) return sdk::fail(checked.error().code, checked.error().message, "properties.volumes");
  }
  return {};
}

sdk::Result<void> ContainerProvider::ready(const sdk::CancelToken* cancel) {
  return engine_->ensure_available(cancel);
}

sdk::Result<std::optional<sdk::State>> ContainerProvider::observe(const std::string& name,
                                                                  const sdk::CancelToken* cancel) {
  auto state = engine_->inspect_container(name, cancel);
  if (!state || !*state) return state;
  Value& props = (*state)->properties;
  const std::string reference = props.get_string("image");
  Value ref_id;
  if (!reference.empty()) {
    auto id = engine_->local_image_id(reference, cancel);
    if (!id) return sdk::fail(id.error());
    if (*id) ref_id = **id;
  }
  props.set("image_ref_id", std::move(ref_id));
  return state;
}

sdk::Result<std::optional<sdk::State>> ContainerProvider::read_one(const sdk::ResourceId& rid) {
  if (auto ok = check_name(rid.id); !ok) return sdk::fail(ok.error());
  if (auto ok = ready(nullptr); !ok) return sdk::fail(ok.error());
  return observe(rid.id, nullptr);
}

sdk::Result<sdk::Plan> ContainerProvider::plan_one(const sdk::Resource& want,
                                                  const std::optional<sdk::State>& observed) {
  auto spec = parse_spec(want);
  if (!spec) return sdk::fail(spec.error());
  return compute_plan(want, *spec, observed);
}

sdk::Result<sdk::State> ContainerProvider::apply_one(const sdk::Plan& plan,
                                                    const sdk::CancelToken& cancel) {
  auto spec = parse_spec(plan.desired);
  if (!spec) return sdk::fail(spec.error());
  if (cancel.cancelled()) return sdk::fail(ErrorCode::Cancelled, "cancelled before apply");
  // A create, re-create or start makes the engine mount the bind sources again.
  if (plan.action == sdk::PlanAction::Create || plan.action == sdk::PlanAction::Update)
    if (auto ok = check_bind_sources(plan.desired, *spec); !ok) return sdk::fail(ok.error());
  if (auto ok = ready(&cancel); !ok) return sdk::fail(ok.error());
  const std::string resource = "resource=" + plan.rid.str();

  sdk::Result<sdk::State> result = sdk::State{};
  switch (plan.action) {
    case sdk::PlanAction::None: {
      auto observed = observe(spec->name, &cancel);
      if (!observed) return sdk::fail(observed.error());
      if (!*observed) {
        if (spec->absent) return absent_state();
        return sdk::fail(ErrorCode::Failed, "container " + spec->name +
                                                " does not exist, yet the plan says nothing to do "
                                                "(made on a stale observation?)");
      }
      return std::move(**observed);
    }
    case sdk::PlanAction::Remove: {
      if (auto ok = remove_container(spec->name, cancel); !ok) {
        result = sdk::fail(ok.error());
      } else {
        result = absent_state();
      }
      break;
    }
    case sdk::PlanAction::Create:
      result = create(plan.desired, *spec, /*replace=*/false, cancel);
      break;
    case sdk::PlanAction::Update:
      if (only_running_changes(plan))
        result = spec->running ? start(plan.desired, *spec, cancel)
                               : stop(plan.desired, *spec, cancel);
      else
        result = create(plan.desired, *spec, /*replace=*/true, cancel);
      break;
  }
  if (result) {
    log().info(resource + " action=" + sdk::to_string(plan.action) +
               " changes=" + change_list(plan) + " outcome=applied");
  } else {
    log().warn(resource + " action=" + sdk::to_string(plan.action) + " outcome=" +
               sdk::to_string(result.error().code) + " reason=" + result.error().message);
  }
  return result;
}

sdk::Result<void> ContainerProvider::remove_one(const sdk::ResourceId& rid,
                                               const sdk::CancelToken& cancel) {
  if (auto ok = check_name(rid.id); !ok) return sdk::fail(ok.error());
  if (cancel.cancelled()) return sdk::fail(ErrorCode::Cancelled, "cancelled before remove");
  if (auto ok = ready(&cancel); !ok) return sdk::fail(ok.error());
  return remove_container(rid.id, cancel);
}

sdk::Result<std::string> ContainerProvider::resolve_image(const ContainerSpec& spec,
                                                          const sdk::CancelToken& cancel) {
  auto id = engine_->local_image_id(spec.image, &cancel);
  if (!id) return sdk::fail(id.error());
  if (*id) return **id;
  log().info("resource=container:" + spec.name + " pulling image=" + spec.image);
  auto pulled = engine_->run_checked({"pull", "--quiet", spec.image}, &cancel,
                                     "pulling image " + spec.image);
  if (!pulled) return sdk::fail(pulled.error());
  id = engine_->local_image_id(spec.image, &cancel);
  if (!id) return sdk::fail(id.error());
  if (!*id)
    return sdk::fail(ErrorCode::Failed, "image " + spec.image +
                                            " is not in local storage after a pull that "
                                            "reported success");
  return **id;
}

sdk::Result<sdk::State> ContainerProvider::create(const sdk::Resource& want,
                                                  const ContainerSpec& spec, bool replace,
                                                  const sdk::CancelToken& cancel) {
  // The image first: when it cannot be had, the old container stays as it was.
  auto image_id = resolve_image(spec, cancel);
  if (!image_id) return sdk::fail(image_id.error());
  if (cancel.cancelled()) return sdk::fail(ErrorCode::Cancelled, "cancelled before create");
  if (replace) {
    if (auto ok = remove_container(spec.name, cancel); !ok) return sdk::fail(ok.error());
  }
  const auto& cfg = engine_->config();
  std::vector<std::string> args;
  if (spec.running) args = {"run", "--detach"};
  else args = {"create"};
  args.insert(args.end(), {"--name", spec.name, "--pull", "never",
                           "--label", std::string(kConfigLabel) + "=" + config_hash(spec),
                           "--label", std::string(kImageLabel) + "=" + spec.image,
                           "--restart", spec.restart});
  for (const auto& [k, v] : spec.env) args.insert(args.end(), {"--env", k + "=" + v});
  for (const auto& p : spec.ports) args.insert(args.end(), {"--publish", p});
  for (const auto& v : spec.volumes) args.insert(args.end(), {"--volume", v});
  args.insert(args.end(), cfg.run_args.begin(), cfg.run_args.end());
  args.push_back(spec.image);
  args.insert(args.end(), spec.command.begin(), spec.command.end());
  // Changing the system: not killed by a cancel (docs/decisions/0035); its own timeout bounds it.
  auto created = engine_->run_checked(
      args, nullptr, std::string(spec.running ? "running" : "creating") + " container " + spec.name);
  if (!created) return sdk::fail(created.error());
  return verify(want, spec, 0, *image_id, engine_warnings(*created), cancel);
}

sdk::Result<sdk::State> ContainerProvider::start(const sdk::Resource& want,
                                                 const ContainerSpec& spec,
                                                 const sdk::CancelToken& cancel) {
  auto current = engine_->inspect_container(spec.name, &cancel);
  if (!current) return sdk::fail(current.error());
  if (!*current)
    return sdk::fail(ErrorCode::Failed, "container " + spec.name +
                                            " no longer exists; the plan to start it is stale");
  const Value& props = (*current)->properties;
  const bool paused = props.get_bool("paused", false);
  auto started = engine_->run_checked({paused ? "unpause" : "start", spec.name}, nullptr,
                                      (paused ? "unpausing container " : "starting container ") +
                                          spec.name);
  if (!started) return sdk::fail(started.error());
  return verify(want, spec, props.get_int("restart_count", 0), "", engine_warnings(*started),
                cancel);
}

sdk::Result<sdk::State> ContainerProvider::stop(const sdk::Resource& want,
                                                const ContainerSpec& spec,
                                                const sdk::CancelToken& cancel) {
  auto stopped = engine_->run_checked(
      {"stop", "--time", whole_seconds(engine_->config().stop_timeout), spec.name}, nullptr,
      "stopping container " + spec.name);
  if (!stopped) return sdk::fail(stopped.error());
  return verify(want, spec, 0, "", engine_warnings(*stopped), cancel);
}

sdk::Result<void> ContainerProvider::remove_container(const std::string& name,
                                                      const sdk::CancelToken& cancel) {
  const auto& cfg = engine_->config();
  const std::string grace = whole_seconds(cfg.stop_timeout);
  if (cfg.docker()) {
    // docker rm --force kills at once; give the process its grace first (errors: rm decides).
    if (cancel.cancelled()) return sdk::fail(ErrorCode::Cancelled, "cancelled before removing container " + name);
    auto stopped = engine_->run({"stop", "--time", grace, name}, nullptr);
  }
  std::vector<std::string> args = {"rm", "--force"};
  if (!cfg.docker()) args.insert(args.end(), {"--time", grace});
  args.push_back(name);
  // A container its restart policy is cycling can be caught between exit and restart, and podman
  // 4.3 then refuses `rm --force` with "container state improper" (its kill finds nothing to
  // signal). The state is transient: retry for up to 3 s, and fail with the engine's last message.
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (;;) {
    auto removed = engine_->run(args, nullptr);
    if (!removed) return sdk::fail(removed.error());
    if (removed->exit_code == 0 || says_not_found(*removed)) break;
    const std::string message = engine_message(*removed);
    const bool transient = message.find("state improper") != std::string::npos;
    if (!transient || Clock::now() >= deadline || cancel.cancelled())
      return sdk::fail(ErrorCode::Failed, "removing container " + name + " failed (" +
                                              cfg.program() + " exit " +
                                              std::to_string(removed->exit_code) + "): " + message);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto after = engine_->inspect_container(name, &cancel);
  if (!after) return sdk::fail(after.error());
  if (*after)
    return sdk::fail(ErrorCode::Failed,
                     "container " + name + " still exists after rm (state " +
                         (*after)->properties.get_string("state") + ")");
  return {};
}

std::string ContainerProvider::stop_crash_loop(const std::string& name,
                                               const sdk::CancelToken& cancel) {
  // `podman stop` (4.3) is a no-op for a container caught between two restarts (state "stopped":
  // exited, cleanup pending), and then the restart policy starts it again; a stop that catches it
  // running does hold. So: stop it whenever it is seen up, for up to 2 s; if it keeps coming back,
  // remove it — its log lines are already in the failure message.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  const std::string grace = whole_seconds(engine_->config().stop_timeout);
  while (Clock::now() < deadline) {
    auto now = engine_->inspect_container(name, &cancel);
    if (!now) return "; stopping it failed: " + now.error().message;
    if (!*now) return "; the container is gone";
    const std::string state = (*now)->properties.get_string("state");
    if (state == "exited" || state == "created") return "; the container was stopped";
    if (state == "running" || state == "paused") {
      auto stopped = engine_->run({"stop", "--time", grace, name}, nullptr);
      if (!stopped) return "; stopping it failed: " + stopped.error().message;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (auto removed = remove_container(name, cancel); !removed)
    return "; it kept restarting and removing it failed: " + removed.error().message;
  return "; it kept restarting through `stop`, so the container was removed";
}

sdk::Result<sdk::State> ContainerProvider::verify(const sdk::Resource& want,
                                                  const ContainerSpec& spec,
                                                  std::int64_t restarts_before,
                                                  const std::string& image_id,
                                                  const std::string& warnings,
                                                  const sdk::CancelToken& cancel) {
  const auto settle = engine_->config().settle;
  if (spec.running) {
    const auto until = Clock::now() + settle;
    while (Clock::now() < until) {
      if (cancel.cancelled())
        return sdk::fail(ErrorCode::Cancelled,
                         "cancelled while waiting for container " + spec.name + " to settle");
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::milliseconds(50), until - Clock::now()));
    }
  }
  auto observed = observe(spec.name, &cancel);
  if (!observed) return sdk::fail(observed.error());
  if (!*observed)
    return sdk::fail(ErrorCode::Failed, "container " + spec.name +
                                            " is gone right after it was " +
                                            (spec.running ? "started" : "created"));
  const Value& props = (*observed)->properties;
  if (spec.running) {
    const bool running = props.get_bool("running", false);
    const std::int64_t restarts = props.get_int("restart_count", 0) - restarts_before;
    if (!running || restarts > 0) {
      std::string why = "container " + spec.name + " did not keep running for the " +
                        format_duration(settle) + " settle window after start (state " +
                        props.get_string("state") + ", exit code " +
                        std::to_string(props.get_int("exit_code", -1)) + ")";
      if (restarts > 0)
        why += "; its restart policy restarted it " + std::to_string(restarts) + " time(s)";
      const std::string logs = engine_->logs_tail(spec.name, 20, &cancel);
      if (running || restarts > 0 || spec.restart != "no") {
        // A crash loop under a restart policy (caught running or between two restarts): stop it
        // rather than leave it flapping, as the service provider does with a unit that keeps
        // restarting. A stop by hand also keeps the policy from starting it again.
        why += stop_crash_loop(spec.name, cancel);
      }
      why += logs.empty() ? std::string("; it wrote no log lines")
                          : "; last log lines:\n" + logs;
      return sdk::fail(ErrorCode::Failed, why);
    }
  }
  if (!image_id.empty() && props.get_string("image_id") != image_id)
    return sdk::fail(ErrorCode::Failed, "container " + spec.name + " runs image " +
                                            props.get_string("image_id") + ", not " + image_id +
                                            " that " + spec.image + " resolved to");
  const sdk::Plan check = compute_plan(want, spec, *observed);
  if (!check.empty())
    return sdk::fail(ErrorCode::Failed,
                     "the engine did not apply the declaration to container " + spec.name + ": " +
                         describe_changes(check) +
                         (warnings.empty() ? std::string() : "; the engine said: " + warnings));
  return std::move(**observed);
}

// ---- ABI 2 entry points ---------------------------------------------------------------------

sdk::Result<void> ContainerProvider::do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) {
  return sdk::report(resp, validate_one(req.resource));
}

sdk::Result<void> ContainerProvider::do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) {
  auto state = read_one(req.rid);
  if (!state) return sdk::fail(state.error());
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> ContainerProvider::do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) {
  auto plan = plan_one(req.desired, req.observed);
  if (!plan) return sdk::fail(plan.error());
  resp.plan = std::move(*plan);
  return {};
}

sdk::Result<void> ContainerProvider::do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) {
  auto state = apply_one(req.plan, *req.cancel);
  if (!state) return sdk::fail(state.error());
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> ContainerProvider::do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse&) {
  return remove_one(req.rid, *req.cancel);
}

}  // namespace mesh::plugins::container
