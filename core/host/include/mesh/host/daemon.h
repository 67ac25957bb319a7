// `mesh-host run`: the node agent's daemon loop.
//
// Threads: the transport's callback threads only enqueue (a declaration into the desired-state
// slot, link events as flags); one worker thread applies, scans for drift and sends reports; one
// timer thread publishes heartbeats on its own clock so they go out even mid-apply, pings
// systemd's watchdog and, in `mesh-host run`, also takes SIGTERM/SIGINT (decision 160). Nothing
// polls for declarations: they arrive by push, or are asked for once on (re)connect.
#pragma once

#include <atomic>
#include <memory>

#include "mesh/engine/engine.h"
#include "mesh/host/host_config.h"
#include "mesh/host/identity.h"
#include "mesh/host/runtime.h"

namespace mesh::host {

/// Runs the daemon until `stop` becomes true. Returns the process exit code (0 on a clean stop,
/// 2 for bad config/plugins, 1 when start-up failed otherwise).
///
/// `take_signals`: the daemon's timer thread also takes SIGTERM and SIGINT (waiting for them
/// with `sigtimedwait` between its timers, decision 160): either sets `stop`, logs
/// `signal N received: stopping` and cancels what runs. The caller must have blocked SIGTERM,
/// SIGINT and SIGUSR2 in every thread (pthread_sigmask before any thread starts): the daemon
/// wakes its timer thread with a SIGUSR2 sent to that thread alone, and a SIGUSR2 sent to the
/// process from outside stops it like SIGTERM, without the log line. Signals that arrive before
/// the timer thread starts or after it ended stay pending. `false`: no signal is taken (`stop`
/// is set by the caller, who then calls wake_daemon()).
/// Call from one thread at a time (one daemon per process).
int run_daemon(const HostConfig& config, std::atomic<bool>& stop, bool take_signals = false);

/// Wakes a running daemon after `stop` was set by the caller (cancels what runs). Thread-safe;
/// does nothing when no daemon runs.
void wake_daemon() noexcept;

}  // namespace mesh::host
