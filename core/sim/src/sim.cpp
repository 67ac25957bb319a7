#include "mesh/sim/sim.h"

#include "fleet.h"

namespace mesh::sim {

sdk::Result<void> check_options(const SimOptions& o) {
  using sdk::ErrorCode;
  auto bad = [](const std::string& flag, const std::string& what) {
    return sdk::fail(ErrorCode::InvalidArgument, flag + ": " + what, flag);
  };
  if (o.servers.empty()) return bad("--server", "at least one NATS server URL is needed");
  if (o.hosts == 0 || o.hosts > 100'000) return bad("--hosts", "must be 1 to 100000");
  if (o.hosts_per_connection == 0 || o.hosts_per_connection > 100'000)
    return bad("--hosts-per-connection", "must be 1 to 100000");
  if (o.workers == 0 || o.workers > 256) return bad("--workers", "must be 1 to 256");
  if (!(o.failure_rate >= 0.0 && o.failure_rate <= 1.0)) return bad("--failure-rate", "must be between 0 and 1");
  if (o.heartbeat.count() < 10) return bad("--heartbeat", "must be at least 10ms");
  if (o.apply_time.count() < 0 || o.apply_jitter.count() < 0 || o.apply_jitter > o.apply_time)
    return bad("--apply-jitter", "must be at most --apply-time");
  if (!o.identity_paths.empty() && !o.tokens_path.empty()) return bad("--tokens", "give --tokens or --identity, not both");
  if (o.identity_paths.empty() && o.tokens_path.empty() && o.state_file.empty())
    return bad("--identity", "no token source: give --identity FILE (issue tokens), --tokens FILE, or --state FILE "
                             "(hosts enrolled by an earlier run)");
  if (o.plugin_dir.empty()) return bad("--plugin-dir", "must name the folder of the nats transport and the providers");
  return {};
}

int run(const SimOptions& options, std::atomic<bool>& stop) {
  detail::Fleet fleet(options, stop);
  return fleet.run();
}

}  // namespace mesh::sim
