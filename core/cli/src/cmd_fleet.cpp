// `mesh module push|list|show`, `mesh node label`, `mesh assign|unassign|assignments` and
// `mesh deploy` (INTERFACE.md "Fleet delivery", decision records 63-66). Files are checked here
// first (a bad module file never leaves the machine); the control plane checks again.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "mesh/cli/commands.h"
#include "mesh/cli/exit_codes.h"
#include "mesh/cli/render.h"
#include "mesh/common/error_text.h"
#include "mesh/common/clock.h"
#include "mesh/common/duration.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/fleet/fleet.h"

namespace mesh::cli {
namespace {

using sdk::ErrorCode;
using sdk::Value;

constexpr std::size_t kMaxModuleBytes = 1 << 20;
constexpr auto kDeployPoll = std::chrono::milliseconds(200);

struct FleetArgs {
  std::string file, module, version, node, selector, wait, waves, min_applied, wave_timeout;
  std::vector<std::string> labels, remove;
  std::int64_t show = 0;
  bool dry_run = false, fail_on_outstanding = false;
};

int usage(CommandEnv& env, const std::string& message) {
  env.err << "error: " << common::printable(message, 4096) << "\n";
  return kExitUsage;
}

int refused(CommandEnv& env, const sdk::Error& e) {
  env.err << "error: " << common::printable(e.code == ErrorCode::InvalidArgument ? common::described(e) : e.message, 4096)
          << "\n";
  return exit_code_for(e.code);
}

// A refused deploy option names the flag the operator typed, not the API field behind it.
int refused_deploy(CommandEnv& env, sdk::Error e) {
  if (e.code == ErrorCode::InvalidArgument)
    for (const auto& [field, flag] : {std::pair<const char*, const char*>{"waves", "--waves"},
                                      {"min_applied", "--min-applied"},
                                      {"wave_timeout", "--wave-timeout"}})
      if (e.path == field) e.path = flag;
  return refused(env, e);
}

const Value::Array& list(const Value& v, const char* key) {
  static const Value::Array empty;
  const Value* a = v.find(key);
  return a && a->is_array() ? a->as_array() : empty;
}

std::string names(const Value::Array& a) {
  std::string out;
  for (const auto& n : a) out += (out.empty() ? "" : ", ") + (n.is_string() ? n.as_string() : n.get_string("node"));
  return out;
}

// The first `shown` names, then how many more (newuser N8: `mesh assign` printed 300 names on one
// line; at 10,000 nodes a wall): `--output json` lists them all.
std::string some_names(const Value::Array& a, std::size_t shown = 10) {
  if (a.size() <= shown) return names(a);
  Value::Array first(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(shown));
  return names(first) + " and " + std::to_string(a.size() - shown) + " more (--output json lists them all)";
}

std::string count_of(std::size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// Skipped and halted lines of a deploy report (the delivery part is render_report_text's).
std::string skipped_text(const Value& report) {
  std::string out;
  const auto& skipped = list(report, "skipped");
  if (!skipped.empty()) {
    out += "skipped      " + std::to_string(skipped.size()) + " — ";
    bool first = true;
    for (const auto& s : skipped) {
      out += (first ? "" : "; ") + s.get_string("node") + ": " + s.get_string("reason");
      first = false;
    }
    out += "\n";
  }
  if (const Value* h = report.find("halted"); h && h->is_object())
    out += "halted at wave " + std::to_string(h->get_int("wave", 0)) + " — " + h->get_string("node") + ": " +
           h->get_string("reason") + "\n";
  return out;
}

std::string dry_run_text(const Value& plan) {
  const auto& nodes = list(plan, "nodes");
  std::string out = "dry run: deploying module " + plan.get_string("module") + " " + plan.get_string("version") +
                    " would write " + count_of(nodes.size(), "node") + " (nothing was written)\n";
  for (const auto& n : nodes) {
    out += "  " + n.get_string("node") + " (" + n.get_string("action") + ")";
    bool any = false;
    for (const char* k : {"added", "changed", "removed"}) {
      const auto& l = list(n, k);
      if (l.empty()) continue;
      out += std::string(any ? ";" : ":") + " " + k + " " + names(l);
      any = true;
    }
    if (!any) out += ": module versions only";
    out += "\n";
  }
  const auto& unchanged = list(plan, "unchanged");
  if (!unchanged.empty()) out += "unchanged    " + std::to_string(unchanged.size()) + " — " + some_names(unchanged) + "\n";
  // An unchanged node that has not applied the revision it holds is not fine (decision record 68).
  for (const char* state : {"failed", "outstanding", "superseded"})
    for (const auto& e : list(plan, state)) {
      if (!e.get_bool("unchanged", false)) continue;
      out += "  " + e.get_string("node") + " holds revision " + std::to_string(e.get_int("revision", 0)) + ": " + state;
      if (std::string(state) == "failed") {
        const std::string resource = e.get_string("resource");
        out += " — " + (resource.empty() ? "" : resource + ": ") + e.get_string("reason");
      } else if (std::string(state) == "outstanding") {
        const Value* lc = e.find("last_contact");
        out += ", last seen " + (lc && lc->is_string() ? lc->as_string() : std::string("never"));
      }
      out += "\n";
    }
  return out + skipped_text(plan);
}

std::string membership_text(const Value& r, bool assigned) {
  std::string out;
  if (assigned)
    out += "module " + r.get_string("module") + " assigned to " + r.get_string("selector") + "\n";
  else
    out += "module " + r.get_string("module") + " unassigned\n";
  out += "nothing was deployed; the next deploy of " + r.get_string("module") + ":\n";
  const auto& add = list(r, "add");
  const auto& drop = list(r, "drop");
  const auto& keep = list(r, "keep");
  out += "  adds   " + std::to_string(add.size()) + (add.empty() ? "" : " — " + some_names(add)) + "\n";
  out += "  drops  " + std::to_string(drop.size()) + (drop.empty() ? "" : " — " + some_names(drop)) + "\n";
  if (!keep.empty()) out += "  keeps  " + std::to_string(keep.size()) + " — " + some_names(keep) + "\n";
  const auto& skipped = list(r, "skipped");
  constexpr std::size_t kSkipLines = 10;
  for (std::size_t i = 0; i < skipped.size() && i < kSkipLines; ++i)
    out += "  skips  " + skipped[i].get_string("node") + ": " + skipped[i].get_string("reason") + "\n";
  if (skipped.size() > kSkipLines)
    out += "  skips  " + std::to_string(skipped.size() - kSkipLines) + " more (--output json lists them all)\n";
  return out;
}

int deploy_exit(const Value& report, bool fail_on_outstanding) {
  if (const Value* h = report.find("halted"); h && h->is_object()) return kExitFailed;
  // A staged deploy still running has nodes in waves not written yet: they have not applied, so
  // they count as outstanding.
  if (fail_on_outstanding && report.get_string("state") == "running")
    if (const Value* waves = report.find("waves"); waves && waves->is_array())
      for (const auto& w : waves->as_array())
        if (const Value* d = w.find("delivery"); !d || !d->is_int()) return kExitFailed;
  return report_exit_code(report, fail_on_outstanding);
}

int run_fleet(CommandEnv& env, const std::string& which, FleetArgs& a) {
  const bool json = env.output == "json";
  const bool junit = env.output != "text" && env.output != "json";  // a report plugin other than text
  Value params = Value::object();
  std::string op;
  std::optional<std::chrono::milliseconds> wait;
  if (which == "module.push") {
    auto text = common::read_file(a.file, kMaxModuleBytes);
    if (!text) return usage(env, a.file + ": " + text.error().message);
    if (auto m = fleet::parse_module(*text, a.file); !m) return usage(env, m.error().message);
    op = which;
    params.set("module", std::move(*text));
  } else if (which == "module.list" || which == "assignments") {
    op = which;
  } else if (which == "module.show") {
    if (!fleet::valid_module_name(a.module)) return usage(env, "'" + a.module + "' is not a module name");
    op = which;
    params.set("module", a.module);
    if (!a.version.empty()) params.set("version", a.version);
  } else if (which == "node.label") {
    if (!protocol::valid_node_name(a.node)) return usage(env, "'" + a.node + "' is not a valid node name");
    if (a.labels.empty() && a.remove.empty()) return usage(env, "give KEY=VALUE labels to set, or --remove KEY");
    Value set = Value::object();
    for (const auto& kv : a.labels) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return usage(env, "'" + kv + "' is not KEY=VALUE (to remove a label: --remove KEY)");
      if (eq + 1 == kv.size())
        return usage(env, "'" + kv + "': a label's value is never empty (1-256 characters; to remove the label: --remove " +
                              kv.substr(0, eq) + ")");
      set.set(kv.substr(0, eq), kv.substr(eq + 1));
    }
    op = which;
    params.set("node", a.node);
    params.set("set", std::move(set));
    Value::Array remove;
    for (const auto& k : a.remove) remove.emplace_back(k);
    params.set("remove", Value(std::move(remove)));
  } else if (which == "assign") {
    if (!fleet::valid_module_name(a.module)) return usage(env, "'" + a.module + "' is not a module name");
    if (auto s = fleet::parse_selector(a.selector); !s) return usage(env, s.error().message);
    op = which;
    params.set("module", a.module);
    params.set("selector", a.selector);
  } else if (which == "unassign") {
    op = which;
    params.set("module", a.module);
  } else if (which == "deploy") {
    if (!a.wait.empty()) {
      auto d = common::parse_duration(a.wait);
      if (!d) return usage(env, "--wait: " + d.error().message);
      wait = *d;
    }
    if (a.show > 0) {
      op = "deploy.show";
      params.set("deploy", a.show);
    } else {
      if (a.module.empty() || a.version.empty()) return usage(env, "mesh deploy MODULE VERSION (or --show DEPLOY)");
      if (!fleet::valid_module_name(a.module)) return usage(env, "'" + a.module + "' is not a module name");
      if (!a.min_applied.empty() || !a.wave_timeout.empty()) {
        if (a.waves.empty()) return usage(env, "--min-applied and --wave-timeout are for a staged deploy (--waves)");
      }
      if (!a.wave_timeout.empty()) {
        auto d = common::parse_duration(a.wave_timeout);
        if (!d || d->count() <= 0)
          return usage(env, "--wave-timeout: '" + a.wave_timeout + "' is not a positive duration (500ms, 15s, 2m, 1h)");
      }
      op = "deploy";
      params.set("module", a.module);
      params.set("version", a.version);
      if (a.dry_run) params.set("dry_run", true);
      if (!a.waves.empty()) params.set("waves", a.waves);
      if (!a.min_applied.empty()) params.set("min_applied", a.min_applied);
      if (!a.wave_timeout.empty()) params.set("wave_timeout", a.wave_timeout);
    }
  }

  int code = kExitOk;
  auto client = env.connect(code);
  if (!client) return code;
  if (wait) client->set_retry_for_at_least(*wait);  // a failover within --wait is ridden out
  Value refusal;
  auto result = client->call(op, params, &refusal);
  if (!result && op == "deploy" && !(refusal.is_object() && refusal.find("diagnostics")))
    return refused_deploy(env, result.error());
  if (!result) {
    if (const Value* d = refusal.is_object() ? refusal.find("diagnostics") : nullptr; d && d->is_array() && json) {
      Value answer = Value::object();
      answer.set("status", "error");
      answer.set("message", result.error().message);
      answer.set("node", refusal.get_string("node"));
      answer.set("diagnostics", *d);
      env.out << render_json(answer);
    }
    return refused(env, result.error());
  }
  if (op == "deploy" && result->get_bool("dry_run", false)) {
    if (json)
      env.out << render_json(*result);
    else
      env.out << dry_run_text(printable_values(*result));
    return kExitOk;
  }
  if (op == "deploy" || op == "deploy.show") {
    const std::int64_t id = result->get_int("deploy", 0);
    // --wait: deploy.show polled until nothing is outstanding or the time is up; live counts on
    // a terminal when the output is text.
    const bool live = !json && !junit && ::isatty(STDOUT_FILENO) == 1;
    if (wait) {
      const auto deadline = std::chrono::steady_clock::now() + *wait;
      Value show = Value::object();
      show.set("deploy", id);
      // Said before the wait (on stderr: stdout is the report), so that a CI log names the
      // deploy whatever happens to the wait.
      if (op == "deploy")
        env.err << "mesh: deploy " << id << " written; waiting up to " << a.wait << " (mesh deploy --show " << id
                << ")\n";
      std::optional<sdk::Error> unanswered;
      std::chrono::steady_clock::duration last_call{};
      for (;;) {
        // A staged deploy is waited for until it is done or halted (its later waves are written
        // as the earlier ones apply).
        // A halted one, or one a newer deploy of its module superseded, is final at once.
        const std::string state = result->get_string("state");
        if (state == "halted" || state == "superseded" || (list(*result, "outstanding").empty() && state != "running"))
          break;
        if (live)
          env.out << "\r\033[K" << "applied " << list(*result, "applied").size() << " / failed "
                  << list(*result, "failed").size() << " / outstanding " << list(*result, "outstanding").size()
                  << std::flush;
        const auto t = std::chrono::steady_clock::now();
        if (t >= deadline) break;
        // At least kDeployPoll apart, and at least as long as the last answer took: a report of
        // 50,000 nodes costs the control plane a few hundred ms, so the poll never keeps it busy
        // for more than about half of one core.
        std::this_thread::sleep_for(
            std::min<std::chrono::steady_clock::duration>(std::max<std::chrono::steady_clock::duration>(kDeployPoll, last_call), deadline - t));
        const auto asked = std::chrono::steady_clock::now();
        auto next = client->call("deploy.show", show);
        last_call = std::chrono::steady_clock::now() - asked;
        if (!next) {
          // A control plane that restarts (or a broker that fails over) within --wait is waited
          // for: the deploy is in the store and goes on. Anything else ends here.
          if (exit_code_for(next.error().code) != kExitUnreachable) return refused(env, next.error());
          if (!unanswered)
            env.err << "mesh: deploy " << id << ": no answer from the control plane (" << next.error().message
                    << "); asking again until the --wait deadline\n";
          unanswered = next.error();
          continue;
        }
        unanswered.reset();
        if (next->get_int("deploy", 0) != id)
          return usage(env, "the control plane's reply to deploy.show is about another deploy: not believed");
        result = std::move(next);
      }
      if (live) env.out << "\r\033[K" << std::flush;
      if (unanswered) {
        // No answer up to the deadline: the last report there was, said to be that, and exit 3.
        env.err << "mesh: deploy " << id << ": the control plane did not answer until the --wait deadline ("
                << unanswered->message << "); the report below is its last answer, not the deploy's end (mesh "
                << "deploy --show " << id << ")\n";
        const std::int64_t t = common::now_ms();
        if (json) {
          env.out << render_json(*result);
        } else if (auto rendered = env.render_report(*result, t)) {
          env.out << *rendered;
        }
        return kExitUnreachable;
      }
    }
    const std::int64_t t = common::now_ms();
    if (json) {
      env.out << render_json(*result);
    } else {
      // Through the report plugin --output names (text, junit, or any installed one).
      auto rendered = env.render_report(*result, t);
      if (!rendered) return usage(env, "--output " + env.output + ": " + rendered.error().message);
      env.out << *rendered;
    }
    return deploy_exit(*result, a.fail_on_outstanding);
  }

  if (json) {
    env.out << render_json(*result);
    return kExitOk;
  }
  Value r = printable_values(*result);
  if (op == "module.push") {
    env.out << "module " << r.get_string("module") << " " << r.get_string("version")
            << (r.get_bool("stored", false) ? " stored" : " already stored (same content)") << " ("
            << r.get_int("resources", 0) << " resources, digest " << r.get_string("digest").substr(0, 12) << ")\n";
  } else if (op == "module.list") {
    env.out << render_modules_text(r);
  } else if (op == "module.show") {
    if (r.find("resources")) {
      env.out << "module " << r.get_string("module") << " " << r.get_string("version") << "\ndigest  "
              << r.get_string("digest") << "\npushed  " << r.get_string("at") << " by " << r.get_string("operator")
              << "\n";
      for (const auto& res : list(r, "resources"))
        env.out << "  " << res.get_string("type") << ":" << res.get_string("id") << "\n";
    } else {
      env.out << render_module_versions_text(r);
    }
  } else if (op == "node.label") {
    env.out << "node " << r.get_string("node") << " labels:";
    const Value* l = r.find("labels");
    if (!l || !l->is_object() || l->as_object().empty()) env.out << " none";
    if (l && l->is_object())
      for (const auto& [k, v] : l->as_object()) env.out << " " << k << "=" << (v.is_string() ? v.as_string() : "");
    env.out << "\n(takes effect at each assigned module's next deploy)\n";
  } else if (op == "assign" || op == "unassign") {
    env.out << membership_text(r, op == "assign");
    // Kept (a fleet may be assigned before its nodes enrol), but a typo is said at once: the next
    // deploy is refused until the selector selects a node (decision record 68).
    if (op == "assign" && list(r, "add").empty() && list(r, "keep").empty() && list(r, "skipped").empty())
      env.err << "mesh: warning: " << r.get_string("selector") << " selects no node now: the next deploy of "
              << r.get_string("module") << " is refused until it selects one (labels: mesh nodes)\n";
  } else if (op == "assignments") {
    env.out << render_assignments_text(r);
  }
  return kExitOk;
}

}  // namespace

void register_fleet_commands(CLI::App& app, CommandRun& run) {
  auto args = std::make_shared<FleetArgs>();
  auto set = [&run, args](std::string which) {
    return [&run, args, which]() { run = [args, which](CommandEnv& env) { return run_fleet(env, which, *args); }; };
  };

  auto* module = app.add_subcommand("module", "modules: named, versioned sets of resources");
  module->require_subcommand(1);
  module->fallthrough();
  auto* push = module->add_subcommand("push", "store a module version (immutable once stored)");
  push->add_option("FILE", args->file, "module (JSON)")->required();
  push->callback(set("module.push"));
  auto* mlist = module->add_subcommand("list", "stored modules, their versions and assignments");
  mlist->callback(set("module.list"));
  auto* show = module->add_subcommand("show", "a module's versions, or one version's resources");
  show->add_option("NAME", args->module, "module name")->required();
  show->add_option("VERSION", args->version, "module version");
  show->callback(set("module.show"));

  if (CLI::App* node = app.get_subcommand("node")) {
    auto* label = node->add_subcommand("label", "set or remove NODE's operator labels");
    label->add_option("NODE", args->node, "node name")->required();
    label->add_option("LABELS", args->labels, "KEY=VALUE labels to set");
    label->add_option("--remove", args->remove, "a label to remove (repeatable)");
    label->callback(set("node.label"));
    label->fallthrough();
  }

  auto* assign = app.add_subcommand("assign", "assign MODULE to the nodes SELECTOR matches (at its next deploy)");
  assign->add_option("MODULE", args->module, "module name")->required();
  assign->add_option("SELECTOR", args->selector, "name=GLOB,KEY=VALUE,facts.KEY=VALUE (all must match)")->required();
  assign->callback(set("assign"));
  auto* unassign = app.add_subcommand("unassign", "unassign MODULE (its next deploy drops it from every node)");
  unassign->add_option("MODULE", args->module, "module name")->required();
  unassign->callback(set("unassign"));
  auto* assignments = app.add_subcommand("assignments", "every module's selector");
  assignments->callback(set("assignments"));

  auto* deploy = app.add_subcommand("deploy", "deploy MODULE VERSION to its assigned nodes in one write");
  deploy->add_option("MODULE", args->module, "module name");
  deploy->add_option("VERSION", args->version, "module version");
  deploy->add_option("--show", args->show, "the report of an earlier deploy, by id");
  deploy->add_flag("--dry-run", args->dry_run, "write nothing; show per node what would change");
  deploy->add_option("--wait", args->wait, "wait until no node is outstanding, at most this long");
  deploy->add_flag("--fail-on-outstanding", args->fail_on_outstanding, "exit 1 when a node is outstanding");
  deploy->add_option("--waves", args->waves, "staged: cumulative wave sizes, e.g. 1,10%,100%");
  deploy->add_option("--min-applied", args->min_applied, "staged: N or P% of a wave that must apply");
  deploy->add_option("--wave-timeout", args->wave_timeout, "staged: how long a wave may stay outstanding");
  deploy->callback(set("deploy"));

  for (CLI::App* sub : {push, mlist, show, assign, unassign, assignments, deploy}) sub->fallthrough();
}

}  // namespace mesh::cli
