#include "apt_package_manager.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "command.h"
#include "debian_version.h"

namespace mesh::plugins::package {
namespace {

namespace fs = std::filesystem;
using sdk::Error;
using sdk::ErrorCode;
using sdk::fail;
using sdk::Result;

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string format_seconds(std::chrono::milliseconds d) {
  if (d.count() % 60000 == 0) return std::to_string(d.count() / 60000) + "m";
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

// The lock apt's own error lines (`E: ...`) say it could not take, or "" when they say none:
// "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4779 (python3)" (the
// lists lock `apt-get update` takes, and the dpkg locks once DPkg::Lock::Timeout ran out),
// "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process
// using it?", "E: Unable to lock the administration directory (/var/lib/dpkg/), ...". Only the
// E: lines count: apt also prints "Waiting for cache lock: Could not get lock ..." while it waits,
// and a run that waited and then got the lock may still fail for another reason ("E: Version
// '9.9' for 'x' was not found"), which is no lock failure.
std::string busy_lock(const CommandResult& r) {
  std::string other;
  for (const std::string* stream : {&r.err, &r.out})
    for (auto line : split_lines(*stream)) {
      if (!starts_with(line, "E: ")) continue;
      if (const auto at = line.find("Could not get lock "); at != std::string_view::npos) {
        std::string_view path = line.substr(at + 19);
        path = path.substr(0, path.find(' '));
        while (!path.empty() && path.back() == '.') path.remove_suffix(1);
        if (!path.empty()) return std::string(path);
      }
      for (std::string_view phrase :
           {"Unable to acquire the dpkg frontend lock (", "Unable to lock the administration "
                                                         "directory ("}) {
        const auto at = line.find(phrase);
        if (at == std::string_view::npos || !other.empty()) continue;
        std::string_view path = line.substr(at + phrase.size());
        path = path.substr(0, path.find(')'));
        other = path.empty() ? std::string("the dpkg lock") : std::string(path);
      }
    }
  return other;
}

// The lines worth quoting from an apt run: its own error lines (`E: ...`), and the blocks it
// prints to say why (unmet dependencies, packages it would remove). When there are none (a tool
// that does not prefix its errors), the last lines it wrote.
std::vector<std::string> error_lines(const CommandResult& r) {
  std::vector<std::string> lines;
  // While it waits for the dpkg lock apt says who holds it ("Waiting for cache lock: Could not
  // get lock /var/lib/dpkg/lock-frontend. It is held by process 4779 (python3)..."), but its
  // final E: line does not; quote the last of those (when it did not wait, its E: line does) —
  // only when the run failed on a lock: one that waited, got the lock and then failed for
  // another reason is quoted by that reason alone.
  std::string lock_holder;
  if (!busy_lock(r).empty())
    for (const std::string* stream : {&r.out, &r.err})
      for (auto line : split_lines(*stream)) {
        if (starts_with(line, "E: ") || line.find("Could not get lock") == std::string_view::npos)
          continue;
        while (!line.empty() && line.back() == '.') line.remove_suffix(1);
        lock_holder = std::string(line);
      }
  if (!lock_holder.empty()) lines.push_back(lock_holder);
  for (const std::string* stream : {&r.err, &r.out}) {
    const auto all = split_lines(*stream);
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::string_view line = all[i];
      if (starts_with(line, "E: ")) {
        lines.emplace_back(line);
      } else if (starts_with(line, "The following packages have unmet dependencies") ||
                 starts_with(line, "The following packages will be REMOVED")) {
        lines.emplace_back(trim(line));
        for (std::size_t k = i + 1; k < all.size() && starts_with(all[k], " "); ++k)
          lines.emplace_back(trim(all[k]));
      } else if (starts_with(line, "dpkg: error") || starts_with(line, "dpkg-query: ")) {
        lines.emplace_back(line);
      }
    }
  }
  if (lines.empty()) {
    for (const std::string* stream : {&r.err, &r.out}) {
      auto all = split_lines(*stream);
      std::vector<std::string> tail;
      for (auto it = all.rbegin(); it != all.rend() && tail.size() < 3; ++it)
        if (!trim(*it).empty() && trim(*it).find("Could not get lock") == std::string_view::npos)
          tail.insert(tail.begin(), std::string(trim(*it)));
      if (!tail.empty()) return tail;
    }
  }
  return lines;
}

// A wait as operators read it: "2.1s", "120.0s".
std::string format_waited(std::chrono::milliseconds d) {
  const long long tenths = (d.count() + 50) / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "s";
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out;
}

bool mentions_interrupted(const std::vector<std::string>& lines) {
  for (const auto& l : lines)
    if (l.find("dpkg was interrupted") != std::string::npos) return true;
  return false;
}

// What apt-config says a Dir:: option resolves to (absolute), or "" when unset.
struct AptPaths {
  std::string sourcelist;   // Dir::Etc::sourcelist (a file)
  std::string sourceparts;  // Dir::Etc::sourceparts (a directory, no trailing '/')
};

// `apt-config shell` prints NAME='value' with ' written as '"'"'.
std::string unquote_shell(std::string_view v) {
  std::string out;
  bool in_single = false;
  bool in_double = false;
  for (char c : v) {
    if (c == '\'' && !in_double) {
      in_single = !in_single;
    } else if (c == '"' && !in_single) {
      in_double = !in_double;
    } else {
      out += c;
    }
  }
  return out;
}

std::string normalise_dir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(path, ec);
  return ec ? path : normalise_dir(p.string());
}

// apt's rules for names in sourceparts (apt-pkg/contrib/fileutl.cc): [A-Za-z0-9_.-] and a known
// extension; anything else it ignores with a notice, so the view leaves it out too.
bool apt_reads_part(const std::string& file_name) {
  if (file_name.empty()) return false;
  for (char c : file_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  const auto ext = fs::path(file_name).extension().string();
  return ext == ".list" || ext == ".sources";
}

// A private sources.list.d for one command: the configured parts plus the extra source.
class SourceView {
 public:
  SourceView() = default;
  ~SourceView() {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  SourceView(const SourceView&) = delete;
  SourceView& operator=(const SourceView&) = delete;

  std::vector<std::string> options;
  std::string dir_;
};

class AptPackageManager final : public PackageManager {
 public:
  AptPackageManager(sdk::Logger& logger, AptOptions options)
      : log_(logger), options_(std::move(options)) {}

  const char* name() const noexcept override { return "apt"; }

  Result<PackageRecord> query(const std::string& name,
                              const std::optional<std::string>& source) override {
    sdk::CancelToken no_cancel;
    PackageRecord record;
    auto dpkg = tool("dpkg-query");
    if (!dpkg) return fail(dpkg.error());
    const std::vector<std::string> argv{*dpkg, "-W", "-f=${db:Status-Abbrev}|${Version}\n", "--",
                                        name};
    const CommandResult q = run(argv, no_cancel);
    if (q.outcome == CommandResult::Outcome::Exited && q.exit_code == 1 &&
        q.err.find("no packages found matching") != std::string::npos) {
      record.status = InstallStatus::Unknown;
    } else if (!q.succeeded()) {
      return fail(command_error(q, "dpkg-query -W " + name));
    } else {
      parse_dpkg_query(q.out, record);
    }

    auto cache = tool("apt-cache");
    if (!cache) return fail(cache.error());
    auto view = make_view(source, /*required=*/false);
    if (!view) return fail(view.error());
    std::vector<std::string> policy{*cache, "-q"};
    policy.insert(policy.end(), (*view)->options.begin(), (*view)->options.end());
    policy.insert(policy.end(), {"policy", "--", name});
    const CommandResult p = run(policy, no_cancel);
    if (!p.succeeded()) return fail(command_error(p, "apt-cache policy " + name));
    parse_policy(p.out, name, record);
    return record;
  }

  Result<void> refresh_index(const std::optional<std::string>& source,
                             const sdk::CancelToken& cancel) override {
    auto apt_get = tool("apt-get");
    if (!apt_get) return fail(apt_get.error());
    std::vector<std::string> argv{*apt_get, "-q", "update", "--error-on=any"};
    lock_options(argv);
    std::string label = "apt-get update";
    if (source) {
      if (!fs::exists(*source))
        return fail(ErrorCode::FailedPrecondition,
                    "the sources file " + *source + " does not exist", "properties.source");
      argv.insert(argv.end(), {"-o", "Dir::Etc::sourcelist=" + *source, "-o",
                               "Dir::Etc::sourceparts=-", "-o", "APT::Get::List-Cleanup=0"});
      label += " (only " + *source + ")";
    }
    // `apt-get update` takes the lists lock (Dir::State::Lists + "lock") without waiting:
    // DPkg::Lock::Timeout covers only the dpkg locks. While another apt run holds it (apt's
    // daily update, an operator's `apt update`), retry until lock_timeout has passed.
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    const auto deadline = started + options_.lock_timeout;
    std::string waited_for;
    for (;;) {
      const CommandResult r = run(argv, cancel);
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
      if (r.succeeded()) {
        if (!waited_for.empty())
          log_.info("step=refresh_index lock=" + waited_for + " waited=" + format_waited(waited) +
                    " (the lock was released)");
        return {};
      }
      const std::string lock =
          r.outcome == CommandResult::Outcome::Exited ? busy_lock(r) : std::string();
      if (lock.empty() || Clock::now() >= deadline) return fail(command_error(r, label, waited));
      if (waited_for.empty()) {
        waited_for = lock;
        log_.info("step=refresh_index waiting for lock=" + lock +
                  " (held by another program) up to lock_timeout=" +
                  std::to_string(options_.lock_timeout.count()) + "s");
      }
      // Poll again in 500 ms (less when the deadline is nearer); a cancel stops the wait.
      const auto next = std::min(Clock::now() + std::chrono::milliseconds(500), deadline);
      while (Clock::now() < next) {
        if (cancel.cancelled())
          return fail(ErrorCode::Cancelled,
                      label + " was cancelled while it waited for " + lock);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  Result<void> install(const InstallRequest& request, const sdk::CancelToken& cancel) override {
    auto apt_get = tool("apt-get");
    if (!apt_get) return fail(apt_get.error());
    auto view = make_view(request.source, /*required=*/true);
    if (!view) return fail(view.error());
    std::vector<std::string> argv{*apt_get, "-y", "-q", "--no-remove"};
    common_options(argv);
    argv.insert(argv.end(), (*view)->options.begin(), (*view)->options.end());
    if (request.allow_downgrade) argv.push_back("--allow-downgrades");
    if (request.allow_change_held) argv.push_back("--allow-change-held-packages");
    const std::string target =
        request.version.empty() ? request.name : request.name + "=" + request.version;
    argv.insert(argv.end(), {"install", "--", target});
    // docs/decisions/0035: a cancel (a newer revision, SIGTERM) kills apt-get while it resolves,
    // waits for the dpkg lock or downloads — a hung mirror cannot block the host — but not once
    // dpkg runs (unpacking, configuring): that finishes, bounded by command_timeout only.
    const CommandResult r = run(argv, cancel, Changes::OnceDpkgRuns);
    if (!r.succeeded()) return fail(command_error(r, "apt-get install " + target));
    return {};
  }

  Result<void> remove(const std::string& name, bool purge, const std::optional<std::string>& source,
                      const sdk::CancelToken& cancel) override {
    auto apt_get = tool("apt-get");
    if (!apt_get) return fail(apt_get.error());
    auto view = make_view(source, /*required=*/false);
    if (!view) return fail(view.error());
    const std::string verb = purge ? "purge" : "remove";
    const std::string label = "apt-get " + verb + " " + name;

    // Simulate first: `apt-get remove` also removes every package that depends on this one, and
    // a declaration about one package must not take others with it unannounced.
    std::vector<std::string> sim{*apt_get, "-s", "-q", "--allow-change-held-packages"};
    sim.insert(sim.end(), (*view)->options.begin(), (*view)->options.end());
    sim.insert(sim.end(), {verb, "--", name});
    const CommandResult s = run(sim, cancel);
    if (s.outcome == CommandResult::Outcome::Cancelled) return fail(command_error(s, label));
    if (!s.succeeded()) return fail(command_error(s, label + " (simulated)"));
    std::vector<std::string> others;
    for (auto line : split_lines(s.out)) {
      if (!starts_with(line, "Remv ") && !starts_with(line, "Purg ")) continue;
      line.remove_prefix(5);
      std::string_view pkg = line.substr(0, line.find(' '));
      if (pkg.substr(0, pkg.find(':')) != name) others.emplace_back(pkg);
    }
    if (!others.empty()) {
      std::string list;
      for (const auto& o : others) list += (list.empty() ? "" : ", ") + o;
      return fail(ErrorCode::FailedPrecondition,
                  label + " would also remove " + list +
                      " (they depend on it); declare those absent too, or remove them first");
    }

    std::vector<std::string> argv{*apt_get, "-y", "-q", "--allow-change-held-packages"};
    common_options(argv);
    argv.insert(argv.end(), (*view)->options.begin(), (*view)->options.end());
    argv.insert(argv.end(), {verb, "--", name});
    if (cancel.cancelled()) return fail(ErrorCode::Cancelled, "cancelled before " + label);
    const CommandResult r = run(argv, cancel, Changes::OnceDpkgRuns);
    if (!r.succeeded()) return fail(command_error(r, label));
    return {};
  }

  Result<std::vector<std::string>> audit() override {
    auto dpkg = tool("dpkg");
    if (!dpkg) return fail(dpkg.error());
    sdk::CancelToken no_cancel;
    const CommandResult r = run({*dpkg, "--audit"}, no_cancel);
    // dpkg --audit exits 1 when it reports something (dpkg >= 1.17.10), 0 when all is well;
    // anything else (or a signal) is the audit failing.
    if (r.outcome != CommandResult::Outcome::Exited || (r.exit_code != 0 && r.exit_code != 1))
      return fail(command_error(r, "dpkg --audit"));
    std::vector<std::string> lines;
    for (auto line : split_lines(r.out))
      if (!trim(line).empty()) lines.emplace_back(trim(line));
    if (r.exit_code == 1 && lines.empty())
      for (auto line : split_lines(r.err))
        if (!trim(line).empty()) lines.emplace_back(trim(line));
    return lines;
  }

  Result<void> repair(const sdk::CancelToken& cancel) override {
    auto dpkg = tool("dpkg");
    if (!dpkg) return fail(dpkg.error());
    const std::vector<std::string> argv{*dpkg, "--force-confdef", "--force-confold", "--configure",
                                        "-a"};
    // dpkg itself does not wait for its lock: retry while another dpkg holds it, up to
    // lock_timeout, as apt-get does with DPkg::Lock::Timeout.
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    const auto deadline = started + options_.lock_timeout;
    for (;;) {
      const CommandResult r = run(argv, cancel, Changes::Always);
      if (r.succeeded()) return {};
      const bool locked = r.outcome == CommandResult::Outcome::Exited &&
                          (r.err.find("lock was locked by another process") != std::string::npos ||
                           r.err.find("database is locked by another process") != std::string::npos);
      if (!locked) return fail(command_error(r, "dpkg --configure -a"));
      if (Clock::now() >= deadline)
        return fail(ErrorCode::Timeout,
                    "dpkg --configure -a: the dpkg lock stayed busy for " +
                        format_waited(std::chrono::duration_cast<std::chrono::milliseconds>(
                            Clock::now() - started)) +
                        " (lock_timeout " + std::to_string(options_.lock_timeout.count()) + "s)");
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  Result<void> set_hold(const std::string& name, bool hold,
                        const sdk::CancelToken& cancel) override {
    auto apt_mark = tool("apt-mark");
    if (!apt_mark) return fail(apt_mark.error());
    const std::string verb = hold ? "hold" : "unhold";
    std::vector<std::string> argv{*apt_mark};
    lock_options(argv);
    argv.insert(argv.end(), {verb, "--", name});
    const CommandResult r = run(argv, cancel, Changes::Always);
    if (!r.succeeded()) return fail(command_error(r, "apt-mark " + verb + " " + name));
    return {};
  }

 private:
  Result<std::string> tool(const std::string& program) const {
    std::string path = find_program(program);
    if (path.empty())
      return fail(ErrorCode::Unsupported, program + " not found in " + kToolPath +
                                              ": the package provider needs Debian's apt and dpkg");
    return path;
  }

  void lock_options(std::vector<std::string>& argv) const {
    argv.insert(argv.end(),
                {"-o", "DPkg::Lock::Timeout=" + std::to_string(options_.lock_timeout.count())});
  }

  void common_options(std::vector<std::string>& argv) const {
    lock_options(argv);
    argv.insert(argv.end(), {"-o", "Dpkg::Options::=--force-confdef", "-o",
                             "Dpkg::Options::=--force-confold"});
  }

  /// Whether (and from when) a command changes the system, so that `cancel` no longer stops it
  /// (docs/decisions/0035): never (queries, `update`, simulations: killed by a cancel), once dpkg
  /// runs (install, remove, purge), always (apt-mark: it rewrites dpkg's selections at once).
  enum class Changes { Never, OnceDpkgRuns, Always };
  CommandResult run(const std::vector<std::string>& argv, const sdk::CancelToken& cancel,
                    Changes changes = Changes::Never) {
    Command c;
    c.argv = argv;
    c.env = tool_environment();
    c.timeout = options_.command_timeout;
    c.cancellable = changes != Changes::Always;
    // dpkg's first lines when it starts work (apt-get runs it with this output on stdout).
    if (changes == Changes::OnceDpkgRuns)
      c.changing_after = {"(Reading database", "Preparing to unpack", "Unpacking ", "Setting up ", "Removing ",
                          "Purging configuration"};
    CommandResult r = run_command(c, cancel);
    if (log_.enabled(sdk::LogLevel::Debug))
      log_.debug("command=\"" + describe_command(argv) + "\" exit=" + std::to_string(r.exit_code) +
                 " ms=" + std::to_string(r.elapsed.count()));
    return r;
  }

  /// `waited`: how long the caller waited for the lock in all (its own retries included); the
  /// run's own time when not given.
  Error command_error(const CommandResult& r, const std::string& label,
                      std::optional<std::chrono::milliseconds> waited = std::nullopt) const {
    using Outcome = CommandResult::Outcome;
    const auto lines = error_lines(r);
    switch (r.outcome) {
      case Outcome::SpawnFailed:
        return Error{ErrorCode::Failed, label + ": " + r.spawn_error, {}};
      case Outcome::TimedOut:
        return Error{ErrorCode::Timeout,
                     label + " did not finish within " + format_seconds(options_.command_timeout) +
                         " (command_timeout) and was stopped" +
                         (lines.empty() ? "" : "; last output: " + join(lines)),
                     {}};
      case Outcome::Cancelled:
        return Error{ErrorCode::Cancelled, label + " was cancelled and stopped", {}};
      case Outcome::Signalled:
        return Error{ErrorCode::Failed,
                     label + " was killed by signal " + std::to_string(r.signal) +
                         (lines.empty() ? "" : ": " + join(lines)),
                     {}};
      case Outcome::Exited:
        break;
    }
    std::string message =
        label + " failed (exit " + std::to_string(r.exit_code) + ")" +
        (lines.empty() ? std::string() : ": " + join(lines));
    if (const std::string lock = busy_lock(r); !lock.empty())
      return Error{ErrorCode::Timeout,
                   label + ": the lock " + lock + " stayed busy for " +
                       format_waited(waited.value_or(r.elapsed)) + " (lock_timeout " +
                       std::to_string(options_.lock_timeout.count()) + "s): " + join(lines),
                   {}};
    if (mentions_interrupted(lines)) return Error{ErrorCode::FailedPrecondition, message, {}};
    return Error{ErrorCode::Failed, message, {}};
  }

  static void parse_dpkg_query(const std::string& out, PackageRecord& record) {
    // One line per architecture the package is known for; the most installed one wins.
    auto rank = [](InstallStatus s) {
      switch (s) {
        case InstallStatus::Unknown: return 0;
        case InstallStatus::NotInstalled: return 1;
        case InstallStatus::ConfigFiles: return 2;
        case InstallStatus::HalfInstalled: return 3;
        case InstallStatus::Unpacked: return 4;
        case InstallStatus::HalfConfigured: return 5;
        case InstallStatus::TriggersAwaiting: return 6;
        case InstallStatus::TriggersPending: return 7;
        case InstallStatus::Installed: return 8;
      }
      return 0;
    };
    bool first = true;
    for (auto line : split_lines(out)) {
      const auto bar = line.find('|');
      if (bar == std::string_view::npos || bar < 2) continue;
      const std::string_view abbrev = line.substr(0, bar);
      PackageRecord r;
      switch (abbrev[1]) {
        case 'n': r.status = InstallStatus::NotInstalled; break;
        case 'c': r.status = InstallStatus::ConfigFiles; break;
        case 'H': r.status = InstallStatus::HalfInstalled; break;
        case 'U': r.status = InstallStatus::Unpacked; break;
        case 'F': r.status = InstallStatus::HalfConfigured; break;
        case 'W': r.status = InstallStatus::TriggersAwaiting; break;
        case 't': r.status = InstallStatus::TriggersPending; break;
        case 'i': r.status = InstallStatus::Installed; break;
        default: r.status = InstallStatus::Unknown; break;
      }
      r.hold = abbrev[0] == 'h';
      r.reinstall_required = abbrev.size() > 2 && abbrev[2] == 'R';
      r.version = std::string(line.substr(bar + 1));
      if (r.status == InstallStatus::NotInstalled) r.version.clear();
      if (first || rank(r.status) > rank(record.status)) record = r;
      first = false;
    }
  }

  // apt-cache policy NAME:
  //   NAME:
  //     Installed: 1.0
  //     Candidate: 2.0
  //     Version table:
  //        2.0 500
  //           500 http://host ./ Packages
  //    *** 1.0 100
  //           100 /var/lib/dpkg/status
  static void parse_policy(const std::string& out, const std::string& name, PackageRecord& record) {
    const auto lines = split_lines(out);
    // Several sections when several architectures are known; the unqualified one is native.
    std::size_t start = lines.size();
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (lines[i] == name + ":") {
        start = i + 1;
        break;
      }
    if (start == lines.size()) return;
    bool in_table = false;
    std::string current;
    bool current_downloadable = false;
    auto flush = [&] {
      if (!current.empty() && current_downloadable) record.available.push_back(current);
      current.clear();
      current_downloadable = false;
    };
    for (std::size_t i = start; i < lines.size(); ++i) {
      const std::string_view line = lines[i];
      if (!line.empty() && line[0] != ' ') break;  // the next section
      const std::string_view t = trim(line);
      if (!in_table) {
        if (starts_with(t, "Candidate:")) {
          const std::string_view c = trim(t.substr(10));
          if (!c.empty() && c != "(none)") record.candidate = std::string(c);
        } else if (starts_with(t, "Version table:")) {
          in_table = true;
        }
        continue;
      }
      // Version lines are indented 5 (or start " *** "); their origin lines 8.
      const std::size_t indent = line.find_first_not_of(' ');
      if (starts_with(line, " *** ") || (indent != std::string_view::npos && indent < 8)) {
        flush();
        std::string_view v = starts_with(t, "*** ") ? trim(t.substr(4)) : t;
        current = std::string(v.substr(0, v.find(' ')));
      } else if (!current.empty()) {
        // "500 http://host ./ Packages" — anything but the dpkg status file can be downloaded.
        if (t.find("/var/lib/dpkg/status") == std::string_view::npos) current_downloadable = true;
      }
    }
    flush();
  }

  // The extra `source` joined to apt's configuration for one command, when it is not part of it.
  Result<std::unique_ptr<SourceView>> make_view(const std::optional<std::string>& source,
                                                bool required) {
    auto view = std::make_unique<SourceView>();
    if (!source) return view;
    if (!fs::exists(*source)) {
      if (!required) return view;
      return fail(ErrorCode::FailedPrecondition, "the sources file " + *source + " does not exist",
                  "properties.source");
    }
    auto paths = apt_paths();
    if (!paths) return fail(paths.error());
    const std::string src = canonical_or_same(*source);
    const std::string parent = normalise_dir(fs::path(src).parent_path().string());
    if (src == canonical_or_same(paths->sourcelist) ||
        (parent == canonical_or_same(paths->sourceparts) &&
         apt_reads_part(fs::path(src).filename().string())))
      return view;  // apt reads it anyway

    std::string base = options_.scratch_dir;
    std::error_code ec;
    if (base.empty()) base = fs::temp_directory_path(ec).string();
    if (base.empty()) base = "/tmp";
    std::string tmpl = base + "/nox-mesh-apt-sources.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      return fail(ErrorCode::Failed, "cannot create a directory in " + base + " for the sources of " +
                                         *source);
    view->dir_ = tmpl;
    if (!paths->sourceparts.empty() && fs::is_directory(paths->sourceparts, ec)) {
      for (const auto& entry : fs::directory_iterator(paths->sourceparts, ec)) {
        const std::string file = entry.path().filename().string();
        if (!apt_reads_part(file) || !fs::is_regular_file(entry.path(), ec)) continue;
        fs::create_symlink(fs::absolute(entry.path()), tmpl + "/" + file, ec);
        if (ec)
          return fail(ErrorCode::Failed, "cannot link " + entry.path().string() + " into " + tmpl +
                                             ": " + ec.message());
      }
    }
    std::string ext = fs::path(src).extension().string();
    if (ext != ".sources") ext = ".list";
    fs::create_symlink(src, tmpl + "/zz-nox-mesh-source" + ext, ec);
    if (ec)
      return fail(ErrorCode::Failed,
                  "cannot link " + src + " into " + tmpl + ": " + ec.message());
    view->options = {"-o", "Dir::Etc::sourceparts=" + tmpl};
    return view;
  }

  // Where apt reads its sources from. Asked once per manager: the paths are apt's own layout
  // (the files in them are listed afresh for every command).
  Result<AptPaths> apt_paths() {
    if (paths_) return *paths_;
    auto apt_config = tool("apt-config");
    if (!apt_config) return fail(apt_config.error());
    sdk::CancelToken no_cancel;
    const CommandResult r =
        run({*apt_config, "shell", "L", "Dir::Etc::sourcelist/f", "P", "Dir::Etc::sourceparts/d"},
            no_cancel);
    if (!r.succeeded()) return fail(command_error(r, "apt-config shell"));
    AptPaths paths;
    for (auto line : split_lines(r.out)) {
      if (starts_with(line, "L=")) paths.sourcelist = unquote_shell(line.substr(2));
      if (starts_with(line, "P=")) paths.sourceparts = normalise_dir(unquote_shell(line.substr(2)));
    }
    paths_ = paths;
    return paths;
  }

  sdk::Logger& log_;
  AptOptions options_;
  std::optional<AptPaths> paths_;
};

}  // namespace

std::unique_ptr<PackageManager> make_apt_package_manager(sdk::Logger& logger, AptOptions options) {
  return std::make_unique<AptPackageManager>(logger, std::move(options));
}

}  // namespace mesh::plugins::package
