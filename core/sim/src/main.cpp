// mesh-sim: N simulated hosts speaking the real protocol (core/sim, decision records 95-97).
#include <CLI/CLI.hpp>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include <spdlog/spdlog.h>

#include "mesh/common/duration.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/logging.h"
#include "mesh/host/runtime.h"
#include "mesh/sim/sim.h"

namespace {

bool duration_flag(const std::string& flag, const std::string& text, std::chrono::milliseconds& out) {
  auto d = mesh::common::parse_duration(text);
  if (!d || d->count() < 0) {
    std::fprintf(stderr, "mesh-sim: %s: '%s' is not a duration (e.g. 250ms, 30s, 5m)\n", flag.c_str(), text.c_str());
    return false;
  }
  out = *d;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken by one thread (below); every other thread has them blocked.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  mesh::sim::SimOptions o;
  o.plugin_dir = mesh::host::default_plugin_dir();
  std::string heartbeat = "30s", apply_time = "0ms", apply_jitter = "0ms", jitter = "1s", duration = "0s";
  std::string log_level = "info";
  CLI::App app{"mesh-sim: N simulated hosts in one process, speaking the real protocol (enrolment, briefing, "
               "heartbeats with their MAC, signed declarations and reports) and applying to memory"};
  app.set_version_flag("--version", std::string("mesh-sim ") + MESH_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options (--log-level) may follow the subcommand (set before it is made)
  auto* run = app.add_subcommand("run", "run the simulated fleet until SIGTERM/SIGINT (or --duration)");
  run->add_option("--server", o.servers, "NATS server URL (repeatable, or several joined with commas)")->delimiter(',')->required();
  run->add_option("--user", o.user, "broker user of every connection (the simulation's own user)");
  run->add_option("--password-file", o.password_file, "file holding that user's password");
  run->add_option("--plugin-dir", o.plugin_dir, "folder of the nats transport and the provider plugins")
      ->capture_default_str();
  run->add_option("--provider", o.providers, "provider whose schema the hosts brief (repeatable; default: file)");
  run->add_option("--hosts", o.hosts, "hosts simulated")->capture_default_str();
  run->add_option("--prefix", o.prefix, "node name prefix (names PREFIX00001, ...)")->capture_default_str();
  run->add_option("--first", o.first, "number of the first host")->capture_default_str();
  run->add_option("--hosts-per-connection", o.hosts_per_connection, "hosts sharing one broker connection")
      ->capture_default_str();
  run->add_option("--workers", o.workers, "worker threads (enrolment, reports, latest requests)")->capture_default_str();
  run->add_option("--identity", o.identity_paths,
                  "operator identity (admin) with which a token is issued per host (repeatable: the hosts are "
                  "spread over the identities)");
  run->add_option("--tokens", o.tokens_path, "file of \"NODE TOKEN\" lines, one per host");
  run->add_option("--state", o.state_file, "JSON-lines file of the enrolled identities: read at start, written after "
                                           "enrolment (0600; holds secret keys)");
  run->add_option("--heartbeat", heartbeat, "heartbeat period of each host")->capture_default_str();
  run->add_option("--apply-time", apply_time, "how long an apply takes (in memory)")->capture_default_str();
  run->add_option("--apply-jitter", apply_jitter, "each apply takes --apply-time plus or minus up to this")
      ->capture_default_str();
  run->add_option("--failure-rate", o.failure_rate, "probability (0..1) that an apply fails")->capture_default_str();
  run->add_option("--reconnect-jitter", jitter, "after a (re)connection each host waits up to this before it asks "
                                                "for its latest declaration and resends its reports")
      ->capture_default_str();
  run->add_option("--status", o.status_file, "JSON status file, rewritten every second");
  run->add_option("--seed", o.seed, "random seed (0: from the machine)");
  run->add_option("--duration", duration, "stop after this long (0: run until a signal)")->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? mesh::common::kExitOk : mesh::common::kExitUsage;
  }
  if (auto ok = mesh::common::init_logging("mesh-sim", log_level); !ok) {
    std::fprintf(stderr, "mesh-sim: --log-level: %s\n", ok.error().message.c_str());
    return mesh::common::kExitUsage;
  }
  if (!duration_flag("--heartbeat", heartbeat, o.heartbeat) || !duration_flag("--apply-time", apply_time, o.apply_time) ||
      !duration_flag("--apply-jitter", apply_jitter, o.apply_jitter) ||
      !duration_flag("--reconnect-jitter", jitter, o.reconnect_jitter) || !duration_flag("--duration", duration, o.duration))
    return mesh::common::kExitUsage;
  if (auto ok = mesh::sim::check_options(o); !ok) {
    std::fprintf(stderr, "mesh-sim: %s\n", ok.error().message.c_str());
    return mesh::common::kExitUsage;
  }
  std::atomic<bool> stop{false};
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != SIGUSR2) mesh::common::logger()->info("signal {} received: stopping", sig);
    stop = true;
  });
  const int rc = mesh::sim::run(o, stop);
  if (!stop.exchange(true)) pthread_kill(signals.native_handle(), SIGUSR2);
  signals.join();
  return rc;
}
