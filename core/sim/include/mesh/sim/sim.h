// mesh-sim: N simulated hosts in one process, speaking the real protocol (docs/protocol.md) with
// real keys and signatures — enrolment with one-time tokens, a signed briefing, heartbeats with
// their MAC, signed declarations verified and parsed against the real provider schemas, signed
// apply reports acknowledged by the control plane's signature — and applying to memory with a
// configurable apply time and failure rate. Several hosts share one broker connection (decision
// record 95). For benchmarks and for tests of fleets larger than real processes allow.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mesh/sdk/result.h"

namespace mesh::sim {

/// Everything `mesh-sim run` takes (its flags, one each).
struct SimOptions {
  /// NATS servers (nats://host:port); reconnects cycle through them.
  std::vector<std::string> servers;
  /// The broker user every connection of the simulator uses (a simulation-only user, decision
  /// record 95), and the file holding its password; both empty on an open broker.
  std::string user;
  std::string password_file;
  /// Where the `nats` transport and the provider plugins are (a mesh-host's plugin folder).
  std::string plugin_dir;
  /// Providers whose schemas the hosts brief and against which declarations are checked.
  std::vector<std::string> providers{"file"};
  /// Hosts simulated: names `<prefix><first>` .. zero-padded to 5 digits ("sim-00001").
  std::size_t hosts = 10;
  std::string prefix = "sim-";
  std::size_t first = 1;
  /// Hosts per broker connection (1: a connection each). Each connection costs nats.c two
  /// threads (reader, flusher); messages of every subscription go through nats.c's shared
  /// delivery pool.
  std::size_t hosts_per_connection = 100;
  /// Worker threads doing the blocking work (enrolment, reports, latest requests).
  std::size_t workers = 8;
  /// Tokens: operator identities (admins) with which the simulator issues one per host (the
  /// hosts spread over them: each identity's replay cache holds 10,000 nonces per 120 s), or a
  /// file of "NODE TOKEN" lines (as `mesh token issue` printed them). One of them, unless every
  /// host is already in `state_file`.
  std::vector<std::string> identity_paths;
  std::string tokens_path;
  /// JSON lines of the enrolled identities (secret keys: written 0600): read at start (hosts in
  /// it are not enrolled again), written after enrolment. Empty: none kept.
  std::string state_file;
  /// Heartbeat period of every host (spread evenly over one period at start).
  std::chrono::milliseconds heartbeat{30'000};
  /// How long an apply takes in memory (each apply: this, ±`apply_jitter`).
  std::chrono::milliseconds apply_time{0};
  std::chrono::milliseconds apply_jitter{0};
  /// Probability (0..1) that an apply fails (reported as a failed resource: the first one).
  /// Decided once per (host, revision), so a retried revision fails again.
  double failure_rate = 0.0;
  /// After a (re)connection each host waits a uniform random time in [0, this) before it asks for
  /// its latest declaration and resends its unacknowledged reports.
  std::chrono::milliseconds reconnect_jitter{1'000};
  /// A JSON status document (counts; see write_status) rewritten atomically every second.
  std::string status_file;
  /// Random seed (failures, jitter); 0: from the machine.
  std::uint64_t seed = 0;
  /// Stop after this long (0: until `stop`).
  std::chrono::milliseconds duration{0};
};

/// Checks `options` (bounds, one token source). Errors: InvalidArgument naming the flag.
sdk::Result<void> check_options(const SimOptions& options);

/// Runs the simulated fleet until `stop` becomes true (or `duration` passed): loads identities
/// from `state_file`, enrols the rest (tokens issued with `identity_paths` or read from
/// `tokens_path`), briefs the newly enrolled, then heartbeats, applies and reports. Returns the
/// process exit code (0 clean stop; 2 bad input — options, tokens, plugins, a refused enrolment;
/// 3 broker or control plane unreachable during enrolment). Blocks; logs through spdlog.
int run(const SimOptions& options, std::atomic<bool>& stop);

}  // namespace mesh::sim
