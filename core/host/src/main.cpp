// mesh-host: the node agent. Subcommands per INTERFACE.md: run, apply, enrol, brief, self-test, plugins.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <iostream>
#include <pthread.h>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "mesh/common/error_text.h"
#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/common/trust.h"
#include "mesh/host/briefing.h"
#include "mesh/engine/engine.h"
#include "mesh/host/daemon.h"
#include "mesh/host/describe.h"
#include "mesh/host/enrol.h"
#include "mesh/host/host_config.h"
#include "mesh/host/identity.h"
#include "mesh/host/report.h"
#include "mesh/host/runtime.h"
#include "mesh/host/version.h"
#include "mesh/loader/loader.h"

namespace {

using namespace std::chrono_literals;
using mesh::sdk::ErrorCode;

// The one table of the three programs (mesh/common/exit_codes.h).
constexpr int kOk = mesh::common::kExitOk, kFailed = mesh::common::kExitFailed, kBadInput = mesh::common::kExitUsage,
              kUnreachable = mesh::common::kExitUnreachable;

int exit_code_for(const mesh::sdk::Error& e) { return mesh::common::exit_code_for(e.code); }

// Config and declaration errors already name their path in the message; don't say it twice.
// The path once (common::described): a config file's errors name it with their line already.
std::string error_text(const mesh::sdk::Error& e) { return mesh::common::described(e); }

int report_error(const mesh::sdk::Error& e) {
  std::fprintf(stderr, "mesh-host: %s\n", error_text(e).c_str());
  return exit_code_for(e);
}

int cmd_run(const std::string& config_path) {
  // The program as named now, before an upgrade can replace it (decision 76).
  (void)mesh::host::self_executable();
  auto cfg = mesh::host::load_host_config(config_path);
  if (!cfg) return report_error(cfg.error());
  // Signals are blocked in every thread (set in main before any thread starts) and taken by the
  // daemon's timer thread (decision 160: no thread of its own for them).
  std::atomic<bool> stop{false};
  return mesh::host::run_daemon(*cfg, stop, /*take_signals=*/true);
}

int cmd_apply(const std::string& file, const std::string& config_path, bool dry_run, const std::string& state_dir_opt,
              const std::string& plugin_dir_opt, const std::vector<std::string>& load_opt, std::optional<std::size_t> max_opt) {
  std::optional<mesh::host::HostConfig> cfg;
  if (!config_path.empty()) {
    auto c = mesh::host::load_host_config(config_path);
    if (!c) return report_error(c.error());
    cfg = std::move(*c);
  }
  std::string state_dir = !state_dir_opt.empty() ? state_dir_opt : cfg ? cfg->state_dir : "/var/lib/nox-mesh";
  const mesh::loader::PluginDirs plugin_dirs = !plugin_dir_opt.empty() ? mesh::loader::PluginDirs{plugin_dir_opt}
                                               : cfg ? cfg->plugin_dirs
                                                     : mesh::loader::PluginDirs{mesh::host::default_plugin_dir()};
  std::vector<std::string> load = !load_opt.empty() ? load_opt : cfg ? cfg->load : std::vector<std::string>{"file"};

  // The local limit (--max-declaration, else [limits] max_declaration, else 64 MiB), apart from
  // the broker's max_message: a local apply has no broker.
  if (max_opt && *max_opt < 1024)
    return report_error({ErrorCode::InvalidArgument, "must be at least 1024 bytes", "--max-declaration"});
  const std::size_t limit = max_opt ? *max_opt : cfg ? cfg->max_declaration : mesh::host::kDefaultMaxDeclaration;
  const std::string raise = std::string(mesh::host::kMaxDeclarationKey) + " in the host config, or --max-declaration";
  if (std::error_code ec; std::filesystem::is_regular_file(file, ec)) {
    if (const auto size = std::filesystem::file_size(file, ec); !ec && size > limit) {
      std::fprintf(stderr, "mesh-host: %s: declaration is %llu bytes, over the local apply limit of %zu bytes (%s "
                   "raises it)\n", file.c_str(), static_cast<unsigned long long>(size), limit, raise.c_str());
      return kBadInput;
    }
  }
  // Read with simdjson's padding after it: parsed in place, with no padded copy of the text.
  auto text = mesh::common::read_file_padded(file, limit);
  if (!text) {
    if (text.error().code != ErrorCode::InvalidArgument) return report_error(text.error());
    // Grown between the check and the read (or not a regular file): still a size refusal.
    std::fprintf(stderr, "mesh-host: %s (%s raises it)\n", error_text(text.error()).c_str(), raise.c_str());
    return kBadInput;
  }
  auto providers = mesh::host::load_providers(plugin_dirs, load, cfg ? &*cfg : nullptr, state_dir);
  if (!providers) return report_error(providers.error());
  mesh::engine::ParseOptions opts;
  opts.max_bytes = limit;
  opts.expected_node = cfg ? cfg->node : "";
  opts.allow_revision = false;
  auto parsed = mesh::engine::parse_declaration_all(*text, providers->registry, opts);
  if (!parsed.declaration) {
    // Every problem at once, one line each (a single one as it always was).
    if (parsed.diagnostics.size() == 1) {
      std::fprintf(stderr, "mesh-host: %s: %s\n", file.c_str(), parsed.diagnostics.front().text.c_str());
    } else {
      std::fprintf(stderr, "mesh-host: %s: %zu problems:\n", file.c_str(), parsed.diagnostics.size());
      for (const auto& d : parsed.diagnostics) std::fprintf(stderr, "  %s\n", d.text.c_str());
    }
    return kBadInput;
  }
  auto& decl = parsed.declaration;
  if (auto r = mesh::common::make_dirs(state_dir, 0700); !r) return report_error(r.error());
  auto sd = mesh::engine::StateDir::open(state_dir);
  if (!sd) return report_error(sd.error());
  if (!dry_run) {
    if (auto lk = sd->lock(10'000); !lk) return report_error(lk.error());
  }
  // A local apply keeps the applied revision: the next pushed declaration takes over from it.
  decl->revision = sd->state().applied_revision;
  mesh::common::PluginLogger log("engine");
  mesh::engine::Engine engine(providers->registry, *sd, log);
  mesh::sdk::CancelToken cancel;
  // What the end of the apply holds is what the report needs (docs/benchmarks.md, "The end of an
  // apply"): each outcome is printed as it is decided and not kept (a failed one is, for the last
  // line), the owned list is not copied, and the text is freed once the engine has staged it
  // beside applied.json, before the first resource is touched.
  mesh::engine::ApplyOptions options;
  options.dry_run = dry_run;
  options.keep_changes = 0;
  options.list_owned = false;
  options.on_outcome = [](const mesh::engine::ResourceOutcome& o) {
    std::fputs(mesh::host::apply_report_line(o).c_str(), stdout);
  };
  options.text_staged = [&text] { text->data.reset(); };
  auto result = engine.apply_taking(*decl, text->view(), cancel, options);
  std::fputs(mesh::host::apply_report_tail(result, dry_run).c_str(), stdout);
  if (!dry_run) sd->unlock();
  return result.outcome == "failed" ? kFailed : kOk;
}

// Sends the briefing on mesh.briefing.<node>, signed with the node's key; returns the control
// plane's final briefing (with its clock line) or the reason it could not. Like a report, a
// briefing larger than the broker's limit (many providers' schemas) goes in parts, to the one
// control-plane instance that took the first (decision record 170); its answer may come in parts
// too, on a private inbox under `inbox_prefix` (one the connection may read).
mesh::sdk::Result<mesh::sdk::Value> send_briefing(const mesh::host::HostConfig& cfg, const mesh::host::Identity& id,
                                                  mesh::sdk::Transport& transport,
                                                  const std::vector<mesh::host::BriefingLine>& lines,
                                                  const mesh::sdk::Value& schemas, const mesh::host::Facts& facts,
                                                  const std::string& inbox_prefix, bool at_enrolment = false) {
  auto req = mesh::protocol::make_message(
      mesh::protocol::briefing_subject(cfg.node),
      mesh::host::briefing_request_json(cfg.node, lines, mesh::common::now_ms(), &schemas, &facts, at_enrolment));
  req.set_header(mesh::protocol::kHeaderNode, cfg.node);
  mesh::trust::sign_report(req, id.secret_key);
  mesh::protocol::parts::RequestOptions opts;
  opts.timeout = 10s;
  opts.reply_in_parts = true;
  opts.inbox_prefix = inbox_prefix;
  auto reply = mesh::protocol::parts::request(transport, req, opts);
  if (!reply) return mesh::sdk::fail(reply.error());
  auto v = mesh::common::parse_json(reply->body);
  const std::string* status = reply->header(mesh::protocol::kHeaderStatus);
  if (!v) return mesh::sdk::fail(ErrorCode::Failed, "the control plane's reply is not JSON");
  if (status && *status == "error") {
    const mesh::sdk::Value* e = v->find("error");
    return mesh::sdk::fail(e ? mesh::protocol::error_code_from_string(e->get_string("code")) : ErrorCode::Failed,
                           e ? e->get_string("message") : reply->body);
  }
  return std::move(*v);
}

// Prints the briefing: the control plane's when it answered, else the local lines with a note.
void print_briefing(const mesh::host::HostConfig& cfg, const std::vector<mesh::host::BriefingLine>& lines,
                    const mesh::host::Facts& facts, const mesh::sdk::Result<mesh::sdk::Value>& sent) {
  if (sent) {
    std::fputs(mesh::host::briefing_text(cfg.node, *sent).c_str(), stdout);
  } else {
    std::fputs(mesh::host::briefing_text(cfg.node, mesh::host::local_briefing(cfg.node, lines, &facts)).c_str(), stdout);
    std::fprintf(stderr, "mesh-host: the briefing was not recorded by the control plane: %s (run `mesh-host brief "
                 "--config %s` to send it again)\n",
                 sent.error().describe().c_str(), cfg.path.c_str());
  }
}

int cmd_enrol(const std::string& config_path, std::string token, const std::string& token_file) {
  auto cfg = mesh::host::load_host_config(config_path);
  if (!cfg) return report_error(cfg.error());
  if (!token.empty() && !token_file.empty())
    return report_error({ErrorCode::InvalidArgument, "give --token or --token-file, not both", "--token"});
  if (token.empty() && token_file.empty())
    return report_error({ErrorCode::InvalidArgument,
                         "no token: give --token-file FILE (or --token-file - to read it from standard input)",
                         "--token-file"});
  const std::string flag = token_file.empty() ? "--token" : "--token-file " + token_file;
  if (!token_file.empty()) {
    auto t = mesh::host::read_token_file(token_file);
    if (!t) return report_error(t.error());
    token = std::move(*t);
  } else {
    // Any local user can read a process's arguments (/proc/PID/cmdline) while it runs.
    std::fprintf(stderr, "mesh-host: warning: --token puts the token where every local user can read it "
                 "(/proc/PID/cmdline) while enrolment runs; use --token-file FILE or --token-file -\n");
  }
  if (auto r = mesh::common::make_dirs(cfg->state_dir, 0700); !r) return report_error(r.error());
  // Enrolment uses host.toml's credentials (the enrolment user), never a previous identity's.
  auto transport = mesh::host::load_transport(*cfg, /*node_credentials=*/false);
  if (!transport) return report_error(transport.error());
  if (auto c = (*transport)->connect(10s, false); !c) {
    if (c.error().code == ErrorCode::PermissionDenied) {
      std::fprintf(stderr, "mesh-host: the broker refused the credentials of %s [transport]: %s (enrolment connects "
                   "as the enrolment broker user: user = \"mesh-enrol\" and its password_file, the [broker] "
                   "enrol_user of the control plane's config)\n",
                   cfg->path.c_str(), c.error().describe().c_str());
      return exit_code_for(c.error());
    }
    std::fprintf(stderr, "mesh-host: cannot reach the broker: %s\n", c.error().describe().c_str());
    return exit_code_for(c.error()) == kBadInput ? kBadInput : kUnreachable;
  }
  // A new key pair for every enrolment: re-enrolment replaces the identity. Nothing is written
  // until the control plane accepted the token, so a failed attempt can simply be repeated.
  auto made = mesh::host::make_enrol_request(cfg->node, token, mesh::host::running_version().version, flag);
  if (!made) return report_error(made.error());
  const auto& kp = made->keys;
  const std::string& expected_control_key = made->control_key;
  auto& req = made->message;
  // Replies come on the enrolment inbox prefix (the only one the enrolment broker user may read),
  // unless host.toml names one.
  std::string inbox_prefix = mesh::protocol::kEnrolInboxPrefix;
  if (const mesh::sdk::Value* p = cfg->file.table("transport").find("inbox_prefix"); p && p->is_string())
    inbox_prefix = p->as_string();
  const std::int64_t sent_ms = mesh::common::now_ms();
  // Only the control plane's signed answer counts: the enrolment reply signed with the key the
  // token names, or a refusal signed for this very request. Anything else (anyone on an open
  // broker can answer) is ignored, and the wait goes on (docs/security.md "Enrolment").
  auto answer = mesh::host::enrol_exchange(**transport, req, cfg->node, expected_control_key, inbox_prefix, 10s);
  const std::int64_t got_ms = mesh::common::now_ms();
  if (!answer) {
    (*transport)->close();
    std::fprintf(stderr, "mesh-host: enrolment request failed: %s; nothing was saved\n",
                 answer.error().describe().c_str());
    return exit_code_for(answer.error()) == kBadInput ? kBadInput : kUnreachable;
  }
  if (!answer->accepted) {
    (*transport)->close();
    std::fprintf(stderr, "mesh-host: enrolment refused%s: %s; nothing was saved\n",
                 answer->verified ? "" : " (answer not verified: a legacy token names no control plane key)",
                 mesh::host::shown_remote(answer->message, 512).c_str());
    // A used, expired or unknown token is refused credentials: 2 (INTERFACE.md).
    return mesh::common::exit_code_for(answer->code);
  }
  const mesh::sdk::Value* v = &answer->body;
  auto enrolled = mesh::host::read_enrolment(cfg->node, *v, kp, mesh::common::now_ms());
  if (!enrolled) {
    (*transport)->close();
    if (enrolled.error().code != ErrorCode::Failed) return report_error(enrolled.error());
    std::fprintf(stderr, "mesh-host: %s; nothing was saved\n", enrolled.error().message.c_str());
    return kFailed;
  }
  const mesh::host::Identity& id = enrolled->identity;
  const std::optional<std::string>& broker_seed = enrolled->broker_seed;
  // One step: the broker credentials and keys first, identity.json last (the commit point), so a
  // kill part-way leaves an enrolment `run` names as incomplete, never a node without its key.
  if (auto r = mesh::host::save_identity(cfg->state_dir, id, broker_seed); !r) {
    (*transport)->close();
    return report_error(r.error());
  }
  const std::string seed_path = cfg->state_dir + "/broker.nk";
  if (broker_seed)
    std::printf("broker credentials in %s (this node may publish only under its own name)\n", seed_path.c_str());
  std::printf("enrolled %s (generation %llu); identity in %s/identity.json\n", cfg->node.c_str(),
              static_cast<unsigned long long>(id.generation), cfg->state_dir.c_str());
  std::printf("control plane key %s pinned\n", mesh::common::to_hex(id.control_key).c_str());
  if (const std::int64_t t = v->get_int("time_ms", 0); t > 0) {
    const std::int64_t offset = (sent_ms + got_ms) / 2 - t;
    std::printf("clock offset from the control plane: %lld ms\n", static_cast<long long>(offset));
  }
  // Enrolment always completes with a briefing, whatever its lines say.
  mesh::sdk::Value schemas;
  mesh::host::Facts facts;
  auto lines = mesh::host::run_briefing_checks(*cfg, &schemas, &facts);
  mesh::sdk::Result<mesh::sdk::Value> sent = mesh::sdk::fail(ErrorCode::Unavailable, "not sent");
  if (!broker_seed) {
    sent = send_briefing(*cfg, id, **transport, lines, schemas, facts, inbox_prefix, /*at_enrolment=*/true);
    (*transport)->close();
  } else {
    // The enrolment user may only enrol: the briefing goes out under the node's own broker
    // credentials, which the broker knows once it reloaded its authorization (a moment).
    (*transport)->close();
    auto own = mesh::host::load_transport(*cfg, /*node_credentials=*/true);
    if (!own) {
      sent = mesh::sdk::fail(own.error());
    } else {
      mesh::sdk::Result<void> c = mesh::sdk::fail(ErrorCode::Unavailable, "not connected");
      for (int attempt = 0; attempt < 20 && !c; ++attempt) {
        if (attempt) std::this_thread::sleep_for(250ms);
        c = (*own)->connect(2s, false);
      }
      sent = c ? send_briefing(*cfg, id, **own, lines, schemas, facts, mesh::protocol::node_inbox_prefix(cfg->node),
                               /*at_enrolment=*/true)
               : mesh::sdk::Result<mesh::sdk::Value>(mesh::sdk::fail(c.error()));
      (*own)->close();
    }
  }
  print_briefing(*cfg, lines, facts, sent);
  return kOk;
}

int cmd_brief(const std::string& config_path) {
  auto cfg = mesh::host::load_host_config(config_path);
  if (!cfg) return report_error(cfg.error());
  auto id = mesh::host::load_identity(cfg->state_dir);
  if (!id) return report_error(id.error());
  if (!*id) {
    std::fprintf(stderr, "mesh-host: node %s is not enrolled (no %s/identity.json): run `mesh-host enrol`\n",
                 cfg->node.c_str(), cfg->state_dir.c_str());
    return kBadInput;
  }
  auto transport = mesh::host::load_transport(*cfg);
  if (!transport) return report_error(transport.error());
  if (auto c = (*transport)->connect(10s, false); !c) {
    std::fprintf(stderr, "mesh-host: cannot reach the broker: %s\n", c.error().describe().c_str());
    return kUnreachable;
  }
  mesh::sdk::Value schemas;
  mesh::host::Facts facts;
  auto lines = mesh::host::run_briefing_checks(*cfg, &schemas, &facts);
  // The inbox prefix the transport was given (load_transport): the node's own with its broker
  // nkey; else host.toml's, if it names one; else the node's own (an open broker).
  std::string inbox_prefix = mesh::protocol::node_inbox_prefix(cfg->node);
  if (::access((cfg->state_dir + "/broker.nk").c_str(), R_OK) != 0)
    if (const mesh::sdk::Value* p = cfg->file.table("transport").find("inbox_prefix"); p && p->is_string())
      inbox_prefix = p->as_string();
  auto sent = send_briefing(*cfg, **id, **transport, lines, schemas, facts, inbox_prefix);
  (*transport)->close();
  print_briefing(*cfg, lines, facts, sent);
  if (!sent) return exit_code_for(sent.error());
  return kOk;
}

int cmd_self_test(const std::string& config_path) {
  int failures = 0;
  auto line = [&](bool ok, const std::string& what) {
    std::printf("%-5s %s\n", ok ? "pass" : "fail", what.c_str());
    if (!ok) ++failures;
  };
  std::optional<mesh::host::HostConfig> cfg;
  // The version this program reports (dpkg's, or the build's): a running host that self-tests
  // a newly installed program shows it in its log.
  const auto& version = mesh::host::running_version();
  std::printf("info  mesh-host %s%s\n", version.version.c_str(),
              version.package.empty() ? " (not installed from a package)" : (" (package " + version.package + ")").c_str());
  if (!config_path.empty()) {
    auto c = mesh::host::load_host_config(config_path);
    if (!c) return report_error(c.error());
    cfg = std::move(*c);
    line(true, "config " + config_path);
  }
  const mesh::loader::PluginDirs plugin_dirs =
      cfg ? cfg->plugin_dirs : mesh::loader::PluginDirs{mesh::host::default_plugin_dir()};
  const std::vector<std::string> load = cfg ? cfg->load : std::vector<std::string>{"file"};
  auto providers = mesh::host::load_providers(plugin_dirs, load, cfg ? &*cfg : nullptr, "");
  line(bool(providers), providers ? "providers loaded: " + std::to_string(load.size()) + " from " +
                                        mesh::loader::describe_dirs(plugin_dirs)
                                  : error_text(providers.error()));
  if (cfg) {
    auto t = mesh::host::load_transport(*cfg);
    line(bool(t), t ? "transport " + cfg->transport_plugin + " loaded and configured" : error_text(t.error()));
    auto dir = mesh::common::make_dirs(cfg->state_dir, 0700);
    std::string probe = cfg->state_dir + "/.self-test";
    auto w = dir ? mesh::common::write_file_atomic(probe, "ok\n", 0600) : dir;
    ::unlink(probe.c_str());
    line(bool(w), w ? "state directory " + cfg->state_dir + " writable" : w.error().describe());
    auto id = mesh::host::load_identity(cfg->state_dir);
    if (!id) line(false, id.error().describe());
    else std::printf("info  %s\n", *id ? ("enrolled as " + (**id).node).c_str() : "not enrolled yet");
  }
  std::printf("%s\n", failures ? "self-test failed" : "self-test passed");
  return failures ? kFailed : kOk;
}

int cmd_plugins(const std::string& config_path, const std::string& output, const std::string& plugin_dir) {
  mesh::loader::PluginDirs dirs{mesh::host::default_plugin_dir()};
  if (!plugin_dir.empty()) {
    dirs = {plugin_dir};
  } else if (!config_path.empty()) {
    auto c = mesh::host::load_host_config(config_path);
    if (!c) return report_error(c.error());
    dirs = c->plugin_dirs;
  }
  auto all = mesh::loader::load_all(dirs, {"tool", ""});
  int bad = 0;
  mesh::sdk::Value arr = mesh::sdk::Value::array();
  for (const auto& r : all) {
    mesh::sdk::Value e = mesh::sdk::Value::object();
    if (r) {
      e.set("kind", r->kind);
      e.set("name", r->name);
      e.set("version", r->version);
      e.set("abi", std::to_string(r->abi_major) + "." + std::to_string(r->abi_minor));
      e.set("path", r->path);
      e.set("description", r->description);
      e.set("cxx_abi", r->cxx_abi);
      if (output == "text")
        std::printf("%-10s %-10s %-8s abi %u.%u  %s\n", r->kind.c_str(), r->name.c_str(), r->version.c_str(),
                    r->abi_major, r->abi_minor, r->path.c_str());
    } else {
      ++bad;
      e.set("error", r.error().describe());
      if (output == "text") std::printf("error      %s\n", r.error().describe().c_str());
    }
    arr.as_array().push_back(std::move(e));
  }
  if (output == "json") std::printf("%s\n", arr.to_json().c_str());
  else if (all.empty()) std::printf("no plugins in %s\n", mesh::loader::describe_dirs(dirs).c_str());
  return bad ? kFailed : kOk;
}

// `mesh-host plugins describe TYPE...`: each provider's resource schema (text, json or markdown),
// loaded from the plugin directory and configured with defaults.
int cmd_describe(const std::string& config_path, const std::string& output, const std::string& plugin_dir,
                 const std::vector<std::string>& types) {
  mesh::loader::PluginDirs dirs{mesh::host::default_plugin_dir()};
  std::optional<mesh::host::HostConfig> cfg;
  if (!config_path.empty()) {
    auto c = mesh::host::load_host_config(config_path);
    if (!c) return report_error(c.error());
    cfg = std::move(*c);
    dirs = cfg->plugin_dirs;
  }
  if (!plugin_dir.empty()) dirs = mesh::loader::PluginDirs{plugin_dir};
  auto providers = mesh::host::load_providers(dirs, types, cfg ? &*cfg : nullptr,
                                              cfg ? cfg->state_dir : std::string("/var/lib/nox-mesh"));
  if (!providers) return report_error(providers.error());
  mesh::sdk::Value all = mesh::sdk::Value::array();
  std::string text;
  for (const auto& type : types) {
    const mesh::sdk::Provider* p = providers->registry.find(type);
    if (!p) {
      std::fprintf(stderr, "mesh-host: no provider for resource type '%s' in %s\n",
                   mesh::common::printable(type).c_str(), mesh::loader::describe_dirs(dirs).c_str());
      return kBadInput;
    }
    if (output == "json") all.as_array().push_back(mesh::host::schema_json(p->schema()));
    else if (output == "markdown") text += (text.empty() ? "" : "\n") + mesh::host::schema_markdown(p->schema());
    else text += (text.empty() ? "" : "\n") + mesh::host::schema_text(p->schema());
  }
  if (output == "json")
    std::printf("%s\n", (types.size() == 1 ? all.as_array().front() : all).to_json().c_str());
  else
    std::fputs(text.c_str(), stdout);
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"mesh-host: the Nox Mesh node agent"};
  // The version of the Debian package that owns this executable, else the build's (decision 76):
  // asked of dpkg only when --version is given.
  app.set_version_flag("--version", std::function<std::string()>([] {
    const auto& v = mesh::host::running_version();
    return std::string("mesh-host ") + v.version + " (protocol " + mesh::protocol::kVersion + ", SDK ABI " +
           std::to_string(MESH_SDK_ABI_MAJOR) + "." + std::to_string(MESH_SDK_ABI_MINOR) +
           (v.package.empty() ? ", not installed from a package" : ", package " + v.package) + ")";
  }));
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")->capture_default_str();
  app.require_subcommand(1);
  app.fallthrough();  // global options (--log-level) may follow the subcommand

  std::string config;
  auto* run = app.add_subcommand("run", "the daemon: connect, learn the latest declaration, apply, heartbeat, watch for drift");
  run->add_option("--config", config, "host config (TOML)")->required();

  std::string file, state_dir, plugin_dir, output = "text", token;
  std::vector<std::string> load;
  bool dry_run = false;
  auto* apply = app.add_subcommand("apply", "apply one declaration locally, with no control plane");
  std::size_t max_declaration = 0;
  CLI::Option* max_declaration_opt = nullptr;
  apply->add_option("declaration", file,
                    "declaration JSON file, at most 64 MiB unless [limits] max_declaration of --config or "
                    "--max-declaration says otherwise (the broker's [limits] max_message does not apply here)")
      ->required();
  apply->add_option("--config", config, "host config (TOML): state_dir, plugins, provider settings");
  apply->add_flag("--dry-run", dry_run, "print the plan and change nothing");
  apply->add_option("--state-dir", state_dir, "state directory (overrides the config; default /var/lib/nox-mesh)");
  apply->add_option("--plugin-dir", plugin_dir, "plugin directory (overrides the config)");
  apply->add_option("--load", load, "provider plugins to load (overrides the config; default: file)");
  max_declaration_opt = apply->add_option("--max-declaration", max_declaration,
                    "largest declaration file accepted, in bytes (overrides [limits] max_declaration; default "
                    "67108864, 64 MiB)")
      ->type_name("BYTES");

  auto* enrol = app.add_subcommand("enrol", "enrol this machine with a one-time token");
  enrol->add_option("--config", config, "host config (TOML)")->required();
  std::string token_file;
  enrol->add_option("--token-file", token_file,
                    "file whose first line is the enrolment token printed by `mesh token issue`; - reads it from "
                    "standard input (the token never appears in the process's arguments)");
  enrol->add_option("--token", token,
                    "the token itself (discouraged: any local user can read it from /proc/PID/cmdline while "
                    "enrolment runs; use --token-file)");

  auto* brief = app.add_subcommand("brief", "re-run the briefing checks and send the new briefing");
  brief->add_option("--config", config, "host config (TOML)")->required();

  auto* self_test = app.add_subcommand("self-test", "load every configured plugin and check the state directory");
  self_test->add_option("--config", config, "host config (TOML)");

  auto* plugins = app.add_subcommand("plugins", "list plugins: kind, name, version, SDK ABI");
  plugins->add_option("--config", config, "host config (TOML)");
  plugins->add_option("--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));
  plugins->add_option("--plugin-dir", plugin_dir, "plugin directory (overrides the config)");
  auto* describe = plugins->add_subcommand("describe", "print providers' resource schemas (text, json or markdown)");
  std::vector<std::string> describe_types;
  std::string describe_output = "text";
  describe->add_option("TYPE", describe_types, "resource types (provider names)")->required();
  describe->add_option("--output", describe_output, "text, json or markdown")
      ->check(CLI::IsMember({"text", "json", "markdown"}));
  describe->add_option("--config", config, "host config (TOML)");
  describe->add_option("--plugin-dir", plugin_dir, "plugin directory (overrides the config)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    // CLI11 checks required options before unexpected arguments, so `run --confg x` would only
    // say "--config is required": name what was not understood first.
    if (auto extra = app.remaining(/*recurse=*/true); !extra.empty()) {
      (void)app.exit(CLI::ExtrasError(extra));
      return kBadInput;
    }
    (void)app.exit(e);
    return kBadInput;
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kBadInput;
  }
  if (auto r = mesh::common::init_logging("mesh-host", log_level); !r) return report_error(r.error());
  if (*run) return cmd_run(config);
  if (*apply) return cmd_apply(file, config, dry_run, state_dir, plugin_dir, load,
                                 max_declaration_opt->count() ? std::optional<std::size_t>(max_declaration) : std::nullopt);
  if (*enrol) return cmd_enrol(config, token, token_file);
  if (*brief) return cmd_brief(config);
  if (*self_test) return cmd_self_test(config);
  if (*describe) return cmd_describe(config, describe_output, plugin_dir, describe_types);
  if (*plugins) return cmd_plugins(config, output, plugin_dir);
  return kBadInput;
}
