// `mesh pipeline run` and `mesh pipeline show` (cmd_pipeline.h).
#include "cmd_pipeline.h"

#include <chrono>
#include <cstdlib>
#include <ostream>
#include <thread>

#include "mesh/cli/exit_codes.h"
#include "mesh/common/error_text.h"
#include "mesh/common/duration.h"
#include "mesh/common/text.h"
#include "mesh/common/version_token.h"

namespace mesh::cli::pipeline_cmd {
namespace {

using sdk::Value;

constexpr auto kPoll = std::chrono::milliseconds(300);

std::string p(const Value& v, const char* key, std::size_t max = 256) {
  return common::printable(v.get_string(key), max);
}

// A one-line summary (a run's or a stage's `error`) as one printable line: the lines of a
// record kept before stage errors were one line are joined by "; ", not shown as "\n".
std::string one_line(const Value& v, const char* key, std::size_t max) {
  std::string text = v.get_string(key), out;
  for (std::size_t start = 0; start <= text.size();) {
    const auto nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    const auto first = line.find_first_not_of(" \r");
    const auto last = line.find_last_not_of(" \r");
    if (first != std::string::npos) out += (out.empty() ? "" : "; ") + line.substr(first, last - first + 1);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return common::printable(out, max);
}

// "16:40:01" of an RFC 3339 timestamp, or "" when absent.
std::string clock_of(const Value& v, const char* key) {
  std::string t = v.get_string(key);
  if (t.size() >= 19 && t[10] == 'T') return t.substr(11, 8);
  return common::printable(t, 32);
}

int exit_for_state(const std::string& state) {
  if (state == "succeeded") return kExitOk;
  if (state == "failed") return kExitFailed;
  return kExitOk;
}

}  // namespace

std::string render_run(const Value& run, std::size_t log_lines) {
  std::string out = "run " + std::to_string(run.get_int("run", 0)) + ": pipeline " + p(run, "pipeline") +
                    " version " + p(run, "version") + " by " + p(run, "operator") + " — " + p(run, "state") + "\n";
  if (run.find("error") && run.find("error")->is_string()) out += "  " + one_line(run, "error", 2048) + "\n";
  const Value* stages = run.find("stages");
  if (!stages || !stages->is_array()) return out;
  for (const auto& s : stages->as_array()) {
    std::string state = s.get_string("state");
    std::string line = "  " + p(s, "name", 64) + " (" + p(s, "plugin", 64) + "): " +
                       (state == "not_started" ? "not started" : common::printable(state, 32));
    if (s.find("started_at") && s.find("started_at")->is_string()) {
      line += " " + clock_of(s, "started_at");
      if (s.find("ended_at") && s.find("ended_at")->is_string()) line += " → " + clock_of(s, "ended_at");
    }
    out += line + "\n";
    if (s.find("error") && s.find("error")->is_string()) out += "    " + one_line(s, "error", 2048) + "\n";
    if (const Value* a = s.find("artifacts"); a && a->is_object())
      if (const Value* files = a->find("files"); files && files->is_array())
        for (const auto& f : files->as_array())
          out += "    artifact " + p(f, "name") + " sha256 " + p(f, "sha256", 64) + " (" +
                 std::to_string(f.get_int("size", 0)) + " bytes)\n";
    if (state == "failed")
      if (const Value* log = s.find("log"); log && log->is_array() && !log->as_array().empty()) {
        const auto& l = log->as_array();
        std::size_t from = l.size() > log_lines ? l.size() - log_lines : 0;
        out += "    log (last " + std::to_string(l.size() - from) + " lines):\n";
        for (std::size_t i = from; i < l.size(); ++i)
          out += "      " + common::printable(l[i].is_string() ? l[i].as_string() : "", 1024) + "\n";
      }
  }
  return out;
}

bool PipelineCommands::parsed() const { return run_->parsed() || show_->parsed(); }

std::shared_ptr<PipelineCommands> register_commands(CLI::App& app) {
  auto c = std::make_shared<PipelineCommands>();
  c->pipeline_ = app.add_subcommand("pipeline", "pipelines run by the control plane (build, publish, deploy)");
  c->pipeline_->require_subcommand(1);
  c->run_ = c->pipeline_->add_subcommand("run", "run the pipeline file NAME of the control plane's [pipelines] dir");
  c->run_->add_option("NAME", c->name_, "the pipeline (its file NAME.toml on the control plane)")->required();
  c->run_->add_option("--version", c->version_, "the version this run builds and deploys")->required();
  c->run_->add_option("--wait", c->wait_, "wait this long for the run to end (e.g. 10m); exit 1 if it failed");
  c->show_ = c->pipeline_->add_subcommand("show", "a run: each stage's outcome, times, log and artifacts");
  c->show_->add_option("RUN", c->run_id_, "the run id")->required();
  for (CLI::App* sub : {c->pipeline_, c->run_, c->show_}) sub->fallthrough();
  return c;
}

int PipelineCommands::run(const ConnectFn& connect, bool json, std::ostream& out, std::ostream& err) {
  auto fail = [&](int code, const std::string& message) {
    err << "error: " << common::printable(message, 4096) << "\n";
    return code;
  };
  auto print = [&](const Value& record) {
    if (json) out << record.to_json() << "\n";
    else out << render_run(record);
  };
  if (show_->parsed()) {
    char* end = nullptr;
    long long id = std::strtoll(run_id_.c_str(), &end, 10);
    if (run_id_.empty() || *end != '\0' || id < 1 || run_id_[0] == '+')
      return fail(kExitUsage, "RUN: '" + run_id_ + "' is not a run id (a positive integer)");
    auto client = connect();
    if (!client) return fail(client.error().code, client.error().message);
    Value params = Value::object();
    params.set("run", static_cast<std::int64_t>(id));
    auto r = (*client)->call("pipeline.show", params);
    if (!r) return fail(exit_code_for(r.error().code), r.error().message);
    if (r->get_int("run", 0) != id)
      return fail(kExitFailed, "the control plane's reply is about run " + std::to_string(r->get_int("run", 0)) +
                                   ", not " + std::to_string(id) + ": not believed");
    print(*r);
    return exit_for_state(r->get_string("state"));
  }

  // Checked here too (the control plane refuses it as well): the version goes into build
  // commands and file names.
  if (!common::valid_version_token(version_))
    return fail(kExitUsage, "--version: '" + version_ + "' is not a version (" + common::kVersionTokenForm +
                                ": no '/', no leading '-', at most 128 characters)");
  std::optional<std::chrono::milliseconds> wait;
  if (!wait_.empty()) {
    auto d = common::parse_duration(wait_);
    if (!d) return fail(kExitUsage, "--wait: " + d.error().message);
    wait = *d;
  }
  auto client = connect();
  if (!client) return fail(client.error().code, client.error().message);
  Value params = Value::object();
  params.set("pipeline", name_);
  params.set("version", version_);
  if (wait) (*client)->set_retry_for_at_least(*wait);  // a failover within --wait is ridden out
  auto r = (*client)->call("pipeline.run", params);
  if (!r)
    return fail(exit_code_for(r.error().code), r.error().code == sdk::ErrorCode::InvalidArgument ? common::described(r.error())
                                                                                                 : r.error().message);
  if (r->get_string("pipeline") != name_)
    return fail(kExitFailed, "the control plane's reply is about pipeline " + p(*r, "pipeline", 64) + ", not " +
                                 name_ + ": not believed");
  const std::int64_t id = r->get_int("run", 0);
  if (!wait) {
    if (json) out << r->to_json() << "\n";
    else out << "started run " << id << " of pipeline " << p(*r, "pipeline") << " version " << p(*r, "version")
             << " (mesh pipeline show " << id << ")\n";
    return kExitOk;
  }
  const auto deadline = std::chrono::steady_clock::now() + *wait;
  Value record = *r;
  // Said before the wait, so that a CI log names the run whatever happens to the wait.
  err << "mesh: run " << id << " of pipeline " << p(*r, "pipeline") << " started; waiting up to " << wait_
      << " (mesh pipeline show " << id << ")\n";
  bool unanswered = false;
  for (;;) {
    Value q = Value::object();
    q.set("run", id);
    auto s = (*client)->call("pipeline.show", q);
    if (!s) {
      // A control plane that restarts (or a broker that fails over) within --wait is waited for:
      // the run's record is in the store. Anything else, or no answer by the deadline, ends here.
      const int code = exit_code_for(s.error().code);
      if (code != kExitUnreachable || std::chrono::steady_clock::now() >= deadline)
        return fail(code, "run " + std::to_string(id) + ": " + s.error().message + " (mesh pipeline show " +
                              std::to_string(id) + ")");
      if (!unanswered)
        err << "mesh: run " << id << ": no answer from the control plane (" << s.error().message
            << "); asking again until the --wait deadline\n";
      unanswered = true;
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    unanswered = false;
    record = std::move(*s);
    if (record.get_string("state") != "running") break;
    if (std::chrono::steady_clock::now() >= deadline) {
      print(record);
      return fail(kExitUnreachable, "run " + std::to_string(id) + " still runs after --wait " + wait_ +
                                        " (mesh pipeline show " + std::to_string(id) + ")");
    }
    std::this_thread::sleep_for(kPoll);
  }
  print(record);
  return exit_for_state(record.get_string("state"));
}

}  // namespace mesh::cli::pipeline_cmd
