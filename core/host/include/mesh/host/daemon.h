// `mesh-host run`: the node agent's daemon loop.
//
// Threads: the transport's callback threads only enqueue (a declaration into the desired-state
// slot, link events as flags); one worker thread applies, scans for drift and sends reports; one
// heartbeat thread publishes on its own timer so heartbeats go out even mid-apply. Nothing polls
// for declarations: they arrive by push, or are asked for once on (re)connect.
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
int run_daemon(const HostConfig& config, std::atomic<bool>& stop);

/// Wakes a running daemon (after `stop` was set from a signal thread).
void wake_daemon() noexcept;

}  // namespace mesh::host
