// mesh-sim internals: the simulated hosts, the connections they share, one timer thread and a
// pool of workers. Private to core/sim.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "mesh/host/identity.h"
#include "mesh/host/runtime.h"
#include "mesh/loader/loader.h"
#include "mesh/sdk/transport.h"
#include "mesh/sdk/value.h"
#include "mesh/sim/sim.h"

namespace mesh::sim::detail {

using Clock = std::chrono::steady_clock;

struct Group;

/// One simulated host. Its protocol state is guarded by `mu`; tasks of one host run one at a time.
struct SimHost {
  std::string name;
  host::Identity id;
  Group* group = nullptr;
  /// Set once its identity is in `id` (written before, read after: release/acquire).
  std::atomic<bool> enrolled{false};
  std::atomic<bool> briefed{false};

  std::mutex mu;
  std::uint64_t applied_revision = 0;
  std::string applied_digest;
  std::vector<std::string> owned;  ///< "type:id" owned after the last applied revision
  int state = 0;                   ///< 0 idle, 1 applying, 2 failed
  /// The apply in progress (apply_time > 0): its revision, text, and whether it is to fail.
  std::uint64_t applying_revision = 0;
  std::string applying_text;
  /// Desired state: the newest verified declaration not yet started (revision 0: none).
  std::uint64_t pending_revision = 0;
  std::string pending_text;
  /// Apply reports not yet acknowledged (by revision): resent after a reconnect and every 5 s.
  std::map<std::uint64_t, std::string> outbox;
  /// Revisions of the outbox whose report is sent and not yet answered (not sent again meanwhile).
  std::set<std::uint64_t> in_flight;
  bool retry_scheduled = false;
  /// Its latest declaration was asked and a verified answer came since the last (re)connection.
  std::atomic<bool> synced{false};
  /// Raised at each (re)connection: a `latest` retry of an earlier one is dropped (one chain of
  /// retries per connection).
  std::atomic<std::uint64_t> sync_epoch{0};
  /// Failed `latest` requests and failed report rounds in a row (Fleet::backoff); guarded by `mu`.
  int latest_failures = 0;
  int report_failures = 0;
  std::unique_ptr<sdk::Subscription> sub;
};

/// What a request sent with Fleet::request_async gets: the reply, or Timeout, or the
/// transport's error. Runs on a worker.
using ReplyHandler = std::function<void(sdk::Result<sdk::Message>&&)>;

/// One broker connection and the hosts that share it.
struct Group {
  std::size_t index = 0;
  loader::LoadedPlugin plugin;
  std::shared_ptr<sdk::Transport> transport;
  std::vector<SimHost*> hosts;
  std::atomic<bool> up{false};

  /// Replies to the requests of this group's hosts (Fleet::request_async) arrive on
  /// `inbox` + a token, through the one subscription `replies` (`inbox` + ">"). A real host waits
  /// for its own replies on a thread of its own; a worker blocked on each request would let only
  /// `--workers` of the simulated fleet's requests be in flight at once.
  std::string inbox;
  std::unique_ptr<sdk::Subscription> replies;
  struct Pending {
    ReplyHandler done;
    Clock::time_point deadline;
  };
  std::mutex pending_mu;
  std::unordered_map<std::uint64_t, Pending> pending;  ///< by token; guarded by pending_mu
  std::uint64_t next_token = 1;                         ///< guarded by pending_mu
};

/// Counters of the status file (all monotonic but `connected`).
struct Counters {
  std::atomic<std::uint64_t> heartbeats{0}, heartbeats_unsent{0}, declarations{0}, refused{0}, applied{0},
      failed{0}, superseded{0}, reports_acked{0}, report_retries{0}, latest_ok{0}, latest_failed{0}, reconnects{0},
      disconnects{0}, enrolled_now{0}, briefed_now{0};
};

class Fleet {
 public:
  Fleet(const SimOptions& options, std::atomic<bool>& stop);
  ~Fleet();
  int run();

  // --- used by the per-host protocol code (host_protocol.cpp) ---
  const SimOptions& options() const { return options_; }
  Counters& counters() { return counters_; }
  const host::Providers& providers() const { return *providers_; }
  const sdk::Value& schemas() const { return schemas_; }
  /// Where a task runs. `First`: on a worker, ahead of every `Normal` task (a host's declaration,
  /// its apply and its reports: a real host has threads of its own, so its declaration never waits
  /// behind other hosts' `latest` requests). `Timer`: on the timer thread itself (must not block:
  /// heartbeats).
  enum class Lane { Normal, First, Timer };
  /// Runs `fn` on a worker as soon as one is free (`Timer` is taken as `Normal` here).
  void post(std::function<void()> fn, Lane lane = Lane::Normal);
  /// Runs `fn` at `at` (a time point) in `lane`.
  void post_at(Clock::time_point at, std::function<void()> fn, Lane lane = Lane::Normal);
  /// Whether `node`'s apply of `revision` fails: decided once per (node, revision) from the seed
  /// and --failure-rate, so a retry of the same revision (after a reconnection) fails again, as a
  /// lasting failure on a real host would. Thread-safe.
  bool fails(const std::string& node, std::uint64_t revision) const;
  /// A duration in [0, max). Thread-safe.
  std::chrono::milliseconds random_ms(std::chrono::milliseconds max);
  /// How long to wait before trying again after `failures` (≥ 1) failures in a row: the backoff
  /// mesh-host uses (common::retry_backoff, decision record 132). Thread-safe.
  std::chrono::milliseconds backoff(int failures);
  /// Sends the request `req` on `g`'s connection and returns at once: its reply comes to `g`'s
  /// inbox, and `done` runs on a worker (Lane::First) with it — or with Timeout when none came
  /// within `timeout`, or with the publish's error. `req->reply` is set here; the caller keeps
  /// `req` to check the reply against (signatures are over the request). A request too large
  /// for one broker message goes through parts::request on a worker instead (which then waits
  /// for it). Thread-safe.
  void request_async(Group& g, std::shared_ptr<sdk::Message> req, std::chrono::milliseconds timeout,
                     ReplyHandler done);

 private:
  int load_plugins();
  int make_groups();
  int enrol_all();
  void subscribe_all();
  void on_link(Group& g, sdk::LinkEvent e);
  void start_heartbeats();
  /// Subscribes each group's reply inbox (request_async).
  int subscribe_replies();
  /// A reply on `g`'s inbox (transport thread): its request's handler goes to a worker.
  void on_reply(Group& g, sdk::Message&& m);
  /// Fails with Timeout every request whose deadline passed; runs on the timer thread, every
  /// 250 ms, and schedules itself again.
  void expire_requests();
  void timer_loop();
  void worker_loop();
  void write_status();
  /// Closes every group's connection (idempotent): requests blocked on them return at once.
  void close_connections();
  /// Waits until `done` (guarded by `mu`, signalled on `cv`) reaches `want`; on a stop, closes
  /// the connections first so that the tasks in flight end at once.
  void wait_for_tasks(std::mutex& mu, std::condition_variable& cv, const std::size_t& done, std::size_t want);
  void stop_all();

  const SimOptions& options_;
  std::atomic<bool>& stop_;
  Counters counters_;
  std::optional<host::Providers> providers_;
  sdk::Value schemas_;
  std::vector<std::unique_ptr<SimHost>> hosts_;
  std::vector<std::unique_ptr<Group>> groups_;

  std::mutex rng_mu_;
  std::mt19937_64 rng_;
  std::uint64_t failure_seed_ = 0;

  // Timer: (due, sequence, task); heartbeats are timer entries too, run on the timer thread.
  struct Timed {
    Clock::time_point at;
    std::uint64_t seq;
    std::function<void()> fn;
    Lane lane = Lane::Normal;
    bool operator>(const Timed& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>> timers_;
  std::uint64_t timer_seq_ = 0;

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<std::function<void()>> work_, work_first_;
  std::atomic<bool> quit_{false};
  bool stopped_ = false;
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<std::function<void(Clock::time_point)>>> beats_;
  std::string tmp_dir_;
};

// --- host_protocol.cpp: one host's side of the protocol ------------------------------------------

/// Enrols `h` with `token` through its group's connection (make_enrol_request, enrol_exchange,
/// read_enrolment). Errors: those of the exchange; PermissionDenied/InvalidArgument... for a
/// refused token (the control plane's code).
sdk::Result<void> enrol_host(SimHost& h, const std::string& token);
/// Sends the signed briefing (simulated lines, the providers' schemas, fixed facts).
sdk::Result<void> brief_host(Fleet& fleet, SimHost& h);
/// Publishes one heartbeat (MAC'd).
void heartbeat(Fleet& fleet, SimHost& h);
/// A message on mesh.decl.<node> (transport thread): hands it to a worker.
void on_declaration(Fleet& fleet, SimHost& h, sdk::Message&& m);
/// After a (re)connection (its `sync_epoch` value `epoch`): asks mesh.latest.<node> (signed; the
/// reply verified) and resends the outbox; a failure is asked again after Fleet::backoff, unless a
/// newer (re)connection started its own.
void resync(Fleet& fleet, SimHost& h, std::uint64_t epoch);
/// Sends every unacknowledged report of `h`; schedules a retry in 5 s while some remain.
void flush_outbox(Fleet& fleet, SimHost& h);

// --- identities.cpp: the state file and the token sources --------------------------------------

/// Reads the state file (JSON lines, one identity each). A missing file is empty. Errors:
/// InvalidArgument naming the file and line.
sdk::Result<std::map<std::string, std::pair<host::Identity, bool>>> read_state_file(const std::string& path);
/// Writes every enrolled host's identity (and whether it briefed) atomically, mode 0600.
sdk::Result<void> write_state_file(const std::string& path, const std::vector<std::unique_ptr<SimHost>>& hosts);
/// "NODE TOKEN" lines (blank lines and #-comments skipped). Errors: InvalidArgument naming line.
sdk::Result<std::map<std::string, std::string>> read_tokens_file(const std::string& path);
/// Issues a token for each of `nodes` with the operator identities of `identity_paths` (token.issue,
/// as `mesh token issue` does; replies verified, tokens sealed to a per-request key), at most 8
/// requests in flight per identity (`workers`), the nodes spread over the identities. Busy answers
/// (transient: an identity's replay cache full) and timeouts (kTokenRequestTimeout) are retried
/// each second. When `stop` becomes true no request is sent any more and it returns Cancelled once
/// the requests in flight are answered or timed out (at most kTokenRequestTimeout later).
/// Errors: the first refusal; Cancelled.
/// How long one token.issue waits for its reply before it is asked again.
inline constexpr std::chrono::milliseconds kTokenRequestTimeout{4000};
sdk::Result<std::map<std::string, std::string>> issue_tokens(const SimOptions& options,
                                                             const std::vector<std::string>& nodes,
                                                             const std::atomic<bool>& stop);

}  // namespace mesh::sim::detail
