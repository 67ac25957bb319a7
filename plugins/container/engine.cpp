#include "engine.h"

#include <algorithm>
#include <cctype>

#include "spec.h"

namespace mesh::plugins::container {
namespace {

using sdk::ErrorCode;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    std::size_t lead = 0;
    while (lead < line.size() && std::isspace(static_cast<unsigned char>(line[lead]))) ++lead;
    if (lead < line.size()) out.push_back(line.substr(lead));
    start = end + 1;
  }
  return out;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string format_ms(std::chrono::milliseconds d) {
  if (d.count() % 60000 == 0) return std::to_string(d.count() / 60000) + "m";
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

}  // namespace

std::string engine_message(const ProcessOutcome& outcome) {
  const auto err = lines_of(outcome.err);
  for (auto it = err.rbegin(); it != err.rend(); ++it)
    if (it->rfind("Error", 0) == 0) return *it;
  if (!err.empty()) return err.back();
  const auto out = lines_of(outcome.out);
  if (!out.empty()) return out.back();
  return "exit code " + std::to_string(outcome.exit_code);
}

std::string engine_warnings(const ProcessOutcome& outcome) {
  std::string joined;
  for (const auto& line : lines_of(outcome.err)) joined += (joined.empty() ? "" : "; ") + line;
  return joined;
}

bool says_not_found(const ProcessOutcome& outcome) {
  const std::string text = lower(outcome.err);
  return text.find("no such container") != std::string::npos ||
         text.find("no such object") != std::string::npos ||
         text.find("no such image") != std::string::npos ||
         text.find("image not known") != std::string::npos;
}

sdk::Result<ProcessOutcome> Engine::run(const std::vector<std::string>& args,
                                        const sdk::CancelToken* cancel) {
  std::vector<std::string> argv;
  argv.reserve(1 + config_.global_args.size() + args.size());
  argv.push_back(config_.program());
  argv.insert(argv.end(), config_.global_args.begin(), config_.global_args.end());
  argv.insert(argv.end(), args.begin(), args.end());
  auto outcome = run_process(argv, config_.timeout, cancel);
  if (!outcome) return outcome;
  const std::string what = config_.program() + " " + (args.empty() ? "" : args.front());
  if (outcome->cancelled)
    return sdk::fail(ErrorCode::Cancelled, what + ": cancelled; the engine command was killed");
  if (outcome->timed_out)
    return sdk::fail(ErrorCode::Timeout, what + ": did not finish within " +
                                             format_ms(config_.timeout) + " (timeout); killed");
  return outcome;
}

sdk::Result<ProcessOutcome> Engine::run_checked(const std::vector<std::string>& args,
                                                const sdk::CancelToken* cancel,
                                                const std::string& what, ErrorCode code) {
  auto outcome = run(args, cancel);
  if (!outcome) return outcome;
  if (outcome->exit_code != 0)
    return sdk::fail(code, what + " failed (" + config_.program() + " exit " +
                               std::to_string(outcome->exit_code) + "): " +
                               engine_message(*outcome));
  return outcome;
}

sdk::Result<void> Engine::ensure_available(const sdk::CancelToken* cancel) {
  if (available_) return {};
  std::vector<std::string> args = {"version", "--format",
                                   config_.docker() ? "{{json .}}" : "json"};
  auto outcome = run(args, cancel);
  if (!outcome) {
    if (outcome.error().code == ErrorCode::Unavailable)
      return sdk::fail(ErrorCode::Unavailable,
                       "container engine " + config_.engine + " is not available: " +
                           outcome.error().message);
    return sdk::fail(outcome.error());
  }
  if (outcome->exit_code != 0)
    return sdk::fail(ErrorCode::Unavailable,
                     "container engine " + config_.engine + " is not answering (" +
                         command_line({config_.program(), "version"}) + " exit " +
                         std::to_string(outcome->exit_code) + "): " + engine_message(*outcome));
  available_ = true;
  return {};
}

sdk::Result<std::optional<sdk::State>> Engine::inspect_container(const std::string& name,
                                                                 const sdk::CancelToken* cancel) {
  auto outcome = run({"container", "inspect", name}, cancel);
  if (!outcome) return sdk::fail(outcome.error());
  if (outcome->exit_code != 0) {
    if (says_not_found(*outcome)) return std::optional<sdk::State>();
    return sdk::fail(ErrorCode::Failed, "inspecting container " + name + " failed (" +
                                            config_.program() + " exit " +
                                            std::to_string(outcome->exit_code) +
                                            "): " + engine_message(*outcome));
  }
  return state_from_inspect(outcome->out, std::chrono::system_clock::now(), config_.settle);
}

sdk::Result<std::optional<std::string>> Engine::local_image_id(const std::string& reference,
                                                               const sdk::CancelToken* cancel) {
  auto outcome = run({"image", "inspect", reference}, cancel);
  if (!outcome) return sdk::fail(outcome.error());
  if (outcome->exit_code != 0) {
    if (says_not_found(*outcome)) return std::optional<std::string>();
    return sdk::fail(ErrorCode::Failed, "inspecting image " + reference + " failed (" +
                                            config_.program() + " exit " +
                                            std::to_string(outcome->exit_code) +
                                            "): " + engine_message(*outcome));
  }
  auto id = image_id_from_inspect(outcome->out);
  if (!id) return sdk::fail(id.error());
  return std::optional<std::string>(*id);
}

std::string Engine::logs_tail(const std::string& name, int lines, const sdk::CancelToken* cancel) {
  auto outcome = run({"logs", "--tail", std::to_string(lines), name}, cancel);
  if (!outcome || outcome->exit_code != 0) return {};
  std::string text;
  for (const auto* stream : {&outcome->out, &outcome->err})
    for (const auto& line : lines_of(*stream)) text += (text.empty() ? "" : "\n") + line;
  constexpr std::size_t kMax = 4096;
  if (text.size() > kMax) text = "…" + text.substr(text.size() - kMax);
  return text;
}

}  // namespace mesh::plugins::container
