#include "mesh/host/daemon.h"
#include "content_fetch.h"

#include <pthread.h>
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "mesh/common/text.h"
#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/common/version_token.h"
#include "mesh/host/node_messages.h"
#include "mesh/host/report.h"
#include "mesh/host/key_pin.h"
#include "mesh/host/upgrade.h"
#include "mesh/host/version.h"
#include "metrics.h"

namespace mesh::host {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class Daemon;
std::mutex g_wake_mu;
Daemon* g_daemon = nullptr;

struct Pending {
  std::uint64_t revision = 0;
  std::string body;
};

// A declaration message the host would not take: reported as outcome `refused`.
struct Refusal {
  std::uint64_t revision = 0;
  std::string reason;
  std::string digest;  // SHA-256 of the body that was refused
  std::string code;    // ErrorCode name of why it was refused
};
constexpr std::size_t kMaxQueuedRefusals = 16;
/// The value a SIGUSR2 carries when the daemon wakes its own timer thread (kick_timer()).
constexpr int kTimerKick = 0x6d657368;

class Daemon {
 public:
  Daemon(const HostConfig& cfg, std::atomic<bool>& stop, bool take_signals)
      : cfg_(cfg), stop_(stop), take_signals_(take_signals) {}
  /// Ends the timer thread if run() left it running (it never does: run() stops it).
  ~Daemon() { stop_timer(); }

  int run();
  /// Takes the lock so a notification cannot fall between a waiter's check and its wait. Once
  /// `stop` is set (SIGTERM), also cancels what runs: the apply stops at its next resource
  /// boundary (a provider's child that is not changing the system is killed), a drift scan too.
  void wake() {
    std::lock_guard lk(mu_);
    if (stop_) {
      cancel_.cancel();
      if (apply_cancel_) apply_cancel_->cancel();
    }
    cv_.notify_all();
    kick_timer();
  }

 private:
  // --- called on transport threads ---
  void on_link(sdk::LinkEvent e);
  void on_declaration(sdk::Message&& m);
  /// Size, version, addressee, revision header and signature (against the pinned control plane
  /// key), in that order, before anything parses the body. Returns the revision.
  sdk::Result<std::uint64_t> check_declaration_message(const sdk::Message& m);
  void queue_refusal(const sdk::Message& m, std::uint64_t revision, const sdk::Error& why);

  // --- worker thread ---
  void fetch_latest();
  /// After a failed fetch_latest (no answer, or a retryable refusal): the next one at fetch_at_,
  /// after common::retry_backoff of the failures in a row. Worker only.
  void retry_fetch_later(const std::string& why);
  /// Sends a request on `subject` signed by this node (mesh.latest.*, mesh.recovery.*) with the
  /// corrected clock. When the control plane refuses it as expired with its signed time
  /// (Mesh-Time), learns the offset, logs it and retries once.
  sdk::Result<sdk::Message> node_request(const std::string& subject);
  /// Sends the signed request `req` and returns its reply only when the reply is signed with the
  /// pinned control plane key for this very request (trust::verify_reply); anything else is
  /// logged with the reply's subject and status and returned as Unavailable (no answer: the
  /// caller asks again later, as after a timeout).
  sdk::Result<sdk::Message> trusted_reply(const sdk::Message& req);
  /// This host's clock plus the offset learnt from the control plane (0 until a refusal).
  std::int64_t node_now_ms() const { return common::now_ms() + clock_offset_ms_.load(); }
  void handle(Pending p);
  void apply_text(const std::string& text, std::uint64_t header_revision);
  void send_report(const std::string& key, const std::string& subject, const std::string& body);
  /// Keeps a report in the outbox; when the outbox cannot take it (the host's disk is full), in
  /// memory instead, so it is still sent (and resent until acknowledged) while the host runs.
  void keep_report(const std::string& key, const std::string& body);
  /// The identity generation whose apply report of the applied revision is in the outbox
  /// (<state_dir>/applied.generation), 0 when none: after an enrolment on a kept state
  /// directory the applied revision is applied and reported once more by the new identity.
  std::uint64_t confirmed_generation() const;
  void confirm_generation();
  void send_refusals();
  /// Sends what the outbox (and unsaved_) holds, when connected; then notes whether anything is
  /// left unacknowledged (outbox_waiting_), which arms the worker's 5 s retry.
  void flush_outbox();
  /// Something was kept: the worker retries sending every 5 s until it is acknowledged.
  void outbox_now_waiting();
  void drift_scan();
  void recover_orphans(const engine::Declaration& decl);
  void notify_ready(const std::string& status);
  /// The control plane refused this node's credentials (a signed permission_denied: the identity
  /// was revoked or replaced by a re-enrolment). Says so loudly (log, systemd STATUS=) once, and
  /// from then on the host changes nothing on the machine (no apply, no drift repair, no reports)
  /// but keeps running, idle, so a service manager does not take it for a crash.
  void credentials_refused(const std::string& what, const std::string& message);
  /// Moves a refused report from the outbox to <state_dir>/refused/ (kept locally, never resent).
  void keep_refused_report(const std::string& key);
  Clock::time_point next_drift();

  /// One heartbeat now (or the metric of one not sent); timer thread.
  void send_heartbeat();
  /// Asks the timer thread for a heartbeat now rather than at its next period (at most one a
  /// second beyond the period): after a declaration refused as older than the applied revision,
  /// so that the control plane learns that revision and numbers its next one above it (a store
  /// restored from a backup, decision record 191). Any thread that does not hold mu_.
  void heartbeat_soon();
  /// The timer thread: WATCHDOG=1 every `watchdog_period` (0: none) and, once heartbeats_on_,
  /// a heartbeat every cfg_.heartbeat, until quitting().
  /// WATCHDOG=1 at half of WATCHDOG_USEC from this thread, not the worker: a long apply never
  /// holds it up (issue #14 item 2).
  void timer_loop(std::chrono::microseconds watchdog_period);
  /// The timer thread's wait (mu_ held by `lk`): until `until`, or until kicked (kick_timer()),
  /// or until heartbeat_soon_ is set, or (`until_heartbeats_on`) until heartbeats_on_ is set.
  /// With take_signals_ it waits in sigtimedwait for SIGTERM/SIGINT/SIGUSR2 (the lock dropped
  /// meanwhile): SIGTERM or SIGINT, or a SIGUSR2 from outside the process, sets stop_ and wakes
  /// the daemon; a SIGUSR2 this process sent to the thread (kick_timer()) only ends the wait.
  void timer_wait(std::unique_lock<std::mutex>& lk, Clock::time_point until, bool until_heartbeats_on);
  /// Wakes the timer thread's wait (mu_ held by the caller): the condition variable, and with
  /// take_signals_ a SIGUSR2 to that thread while it runs.
  void kick_timer();
  /// Starts the timer thread (watchdog pings from now on; heartbeats once heartbeats_on_).
  void start_timer();
  /// Ends and joins the timer thread (sets done_); idempotent. Not from the timer thread.
  void stop_timer();

  /// Whether the threads should end: stopping (signal) or restarting into a new program.
  bool quitting() const { return stop_.load() || done_.load(); }

  // --- the host's own upgrade (docs/decisions/0076), on the worker thread ---
  /// At start, before anything needs the broker: reports a `stopped` left by the rollback
  /// script, remembers `rolled-back`, and settles `pending` — confirms it by applying the
  /// declaration the previous host left (the first reconcile, offline), or reports the
  /// rolled-back revision as failed.
  void settle_upgrade_state();
  /// The new program passed its self-test (engine outcome "restart"): leaves the declaration and
  /// `pending` for the next host and ends the daemon with status 75.
  void restart_into_new_program(const engine::ApplyResult& result, const std::string& text);
  /// A failed apply report of `revision` with `reason`, kept in the outbox (sent when connected).
  void report_failed(std::uint64_t revision, const std::string& resource, const std::string& reason,
                     sdk::ErrorCode code);
  /// "host version V failed to start on this node; rolled back to U" from `rolled-back`.
  std::string rollback_reason() const;

  const HostConfig& cfg_;
  std::atomic<bool>& stop_;
  const bool take_signals_;          // the timer thread takes SIGTERM/SIGINT (decision 160)
  std::thread timer_thread_;
  bool timer_alive_ = false;         // timer_thread_ may be sent a SIGUSR2 (under mu_)
  pthread_t timer_handle_{};         // its pthread, for that SIGUSR2 (under mu_)
  HostMetrics metrics_{cfg_.metrics_textfile};  // [metrics] textfile (metrics.h); off when unset
  std::shared_ptr<spdlog::logger> log_ = common::logger();
  common::PluginLogger engine_log_{"engine"};

  std::optional<Providers> providers_;
  std::shared_ptr<sdk::Transport> transport_;
  std::optional<engine::StateDir> state_;
  std::optional<engine::Engine> engine_;
  Identity identity_;
  // identity_.control_key as it follows rotations (decision record 98); set at start.
  std::unique_ptr<PinnedControlKey> pinned_;
  std::unique_ptr<sdk::Subscription> decl_sub_;
  std::size_t max_body_ = 1 << 20;
  /// A declaration, a recovery copy or a latest reply may come in parts (docs/protocol.md
  /// "Messages in parts"): this bounds the whole ([limits] max_declaration, 64 MiB by default).
  const std::size_t kMaxAssembled = cfg_.max_declaration;
  /// Pushed declarations larger than the broker's limit, until all their parts arrived.
  protocol::parts::Reassembler decl_parts_{protocol::parts::Limits{kMaxAssembled, kMaxAssembled, 4, 4,
                                                                   std::chrono::seconds(30), kMaxDeclarationKey}};

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Pending> pending_;   // desired-state slot: only the newest waits
  std::deque<Refusal> refusals_;     // refused declaration messages, reported by the worker
  common::LogBudget refusal_log_{10};
  bool need_fetch_ = false;
  int fetch_failures_ = 0;                          // latest requests failed in a row (worker only)
  std::optional<Clock::time_point> fetch_at_;       // a latest request to retry then (worker only)
  bool need_flush_ = false;
  bool was_fresh_ = false;
  bool ready_ = false;
  std::atomic<int> host_state_{0};   // 0 idle, 1 applying, 2 failed
  std::atomic<std::uint64_t> applied_revision_{0};
  std::atomic<std::int64_t> clock_offset_ms_{0};  // control plane's clock minus ours
  std::atomic<bool> revoked_{false};              // credentials refused: idle for good
  std::map<std::string, std::string> unsaved_;    // reports the outbox could not keep (worker only)
  // Reports kept and not yet acknowledged (worker only): only then does the worker wake every 5 s
  // to send them again, so an idle host wakes for heartbeats, drift scans and messages alone.
  bool outbox_waiting_ = false;
  int outbox_rounds_ = 0;  // retries of the outbox since it was last empty (worker only)
  Clock::time_point retry_outbox_at_{};  // the next retry while outbox_waiting_ (worker only)
  sdk::CancelToken cancel_;          // drift scans and orphan removal; cancelled on stop
  // The running apply's own token (guarded by mu_): cancelled by a newer revision (superseded) or
  // by stop. `applying_revision_` is the revision it applies, `superseded_by_` the newer one.
  std::shared_ptr<sdk::CancelToken> apply_cancel_;
  std::uint64_t applying_revision_ = 0;
  std::uint64_t superseded_by_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};

  std::atomic<bool> done_{false};        // the daemon is ending (after a stop or for a restart)
  bool heartbeats_on_ = false;           // the timer thread sends heartbeats (under mu_)
  bool heartbeat_soon_ = false;          // heartbeat_soon() asked for one (under mu_)
  bool restart_ = false;                 // exit 75: restart into the new program (worker only)
  std::string upgrade_dir_;              // <state_dir>/upgrade
  std::optional<StateFields> rolled_back_;  // `rolled-back` as read at start (worker only)
  // Why the upgrade state cannot be trusted (a file that does not parse or names no version):
  // nothing is applied or repaired until it is fixed (worker only; empty: trusted).
  std::string damaged_state_;
  std::set<std::uint64_t> rollback_reported_;  // revisions refused for the rollback, this run
};

const char* state_name(int s) { return s == 1 ? "applying" : s == 2 ? "failed" : "idle"; }

void Daemon::on_link(sdk::LinkEvent e) {
  log_->info("link event={} node={}", sdk::to_string(e), cfg_.node);
  if (e == sdk::LinkEvent::Connected || e == sdk::LinkEvent::Reconnected) {
    std::lock_guard lk(mu_);
    need_fetch_ = true;
    need_flush_ = true;
    cv_.notify_all();
  }
}

sdk::Result<std::uint64_t> Daemon::check_declaration_message(const sdk::Message& m) {
  std::uint64_t revision = 0;
  auto ok = pinned_->verify(m, [&](const std::string& key) -> sdk::Result<void> {
    auto rev = host::check_declaration_message(m, cfg_.node, key, kMaxAssembled);
    if (!rev) return sdk::fail(rev.error());
    revision = *rev;
    return {};
  });
  if (!ok) return sdk::fail(ok.error());
  return revision;
}

void Daemon::queue_refusal(const sdk::Message& m, std::uint64_t revision, const sdk::Error& why) {
  const std::string& reason = why.message;
  // Anyone who can publish on the declaration subject can cause these: rate-limited.
  if (std::uint64_t hidden = 0; refusal_log_.take(&hidden))
    log_->warn("refused declaration node={} revision={} reason=\"{}\"{}", cfg_.node, revision, common::printable(reason),
               common::LogBudget::suffix(hidden));
  if (revision == 0) return;  // nothing a report could name
  std::lock_guard lk(mu_);
  if (refusals_.size() >= kMaxQueuedRefusals) return;  // a flood is logged, not reported one by one
  refusals_.push_back(Refusal{revision, reason, common::sha256_hex(m.body), sdk::to_string(why.code)});
  cv_.notify_all();
}

void Daemon::on_declaration(sdk::Message&& m) {
  // Transport thread: the checks are cheap (one signature verification); the body is parsed on
  // the worker, and only after its signature verified.
  auto rev = check_declaration_message(m);
  if (!rev) {
    // A header that is not a revision names none (0: logged, not reported).
    const std::uint64_t claimed = protocol::revision_header(m).value_or(0);
    return queue_refusal(m, claimed, rev.error());
  }
  std::lock_guard lk(mu_);
  // Desired state, not a queue: keep only the newest; an older revision never replaces a newer.
  if (pending_ && pending_->revision >= *rev) return;
  pending_ = Pending{*rev, std::move(m.body)};
  // A newer revision supersedes the one being applied: it stops at its next resource boundary
  // (docs/decisions/0035) instead of blocking the newer one until it ends.
  if (apply_cancel_ && *rev > applying_revision_ && !apply_cancel_->cancelled()) {
    superseded_by_ = *rev;
    apply_cancel_->cancel();
    log_->info("apply superseded node={} revision={} by={} (cancelling at the next resource boundary)", cfg_.node,
               applying_revision_, *rev);
  }
  cv_.notify_all();
}

void Daemon::notify_ready(const std::string& status) {
  std::string msg = "STATUS=" + status;
  if (!ready_) {
    ready_ = true;
    msg = "READY=1\n" + msg;
    log_->info("ready node={} status=\"{}\"", cfg_.node, status);
  }
  sd_notify(0, msg.c_str());
}

void Daemon::retry_fetch_later(const std::string& why) {
  // Exponential backoff with jitter (decision record 132): a fleet refused at once after a broker
  // restart spreads its next tries out instead of asking again all together every 2 s.
  const auto wait = common::retry_backoff(++fetch_failures_);
  fetch_at_ = Clock::now() + wait;
  log_->warn("fetch latest declaration failed node={} reason=\"{}\" (try {}; retrying in {} ms)", cfg_.node,
             common::printable(why, 1024), fetch_failures_, wait.count());
}

void Daemon::fetch_latest() {
  fetch_at_.reset();
  // Signed by this node: nobody else may read its declaration.
  auto reply = node_request(protocol::latest_subject(cfg_.node));
  if (!reply) return retry_fetch_later(reply.error().describe());
  const std::string* status = reply->header(protocol::kHeaderStatus);
  if (status && *status == "error") {
    auto v = common::parse_json(reply->body, {max_body_, 8});
    const sdk::Value* e = v ? v->find("error") : nullptr;
    const std::string code = e && e->is_object() ? e->get_string("code") : "";
    // Busy (a full queue), the store unreachable, a timeout: not an answer about this node, so
    // asked again later — until then it would not learn a declaration written while it was away.
    if (code == "transient" || code == "unavailable" || code == "timeout") {
      notify_ready("the control plane is busy; asking again for the latest declaration");
      return retry_fetch_later("refused: " + common::printable(reply->body, 512));
    }
  }
  fetch_failures_ = 0;
  if (status && *status == "none") {
    log_->info("no declaration yet node={}", cfg_.node);
    if (was_fresh_) recover_orphans(engine::Declaration{});
    notify_ready("no declaration yet");
    return;
  }
  if (status && *status == "error") {
    auto v = common::parse_json(reply->body, {max_body_, 8});
    const sdk::Value* e = v ? v->find("error") : nullptr;
    if (e && e->is_object() && e->get_string("code") == "permission_denied")
      return credentials_refused("fetching the latest declaration", e->get_string("message"));
    log_->warn("fetch latest declaration refused node={} body={}", cfg_.node, common::printable(reply->body, 1024));
    notify_ready("control plane refused the fetch");
    return;
  }
  // The reply carries the same signed declaration as a push, and gets the same checks.
  auto rev = check_declaration_message(*reply);
  if (!rev) {
    const std::uint64_t claimed = protocol::revision_header(*reply).value_or(0);
    queue_refusal(*reply, claimed, rev.error());
    notify_ready("latest declaration refused");
    return;
  }
  {
    std::lock_guard lk(mu_);
    if (pending_ && pending_->revision >= *rev) return;  // a newer push already arrived
  }
  handle(Pending{*rev, std::move(reply->body)});
}

sdk::Result<sdk::Message> Daemon::node_request(const std::string& subject) {
  auto req = protocol::make_message(subject);
  trust::sign_request(req, protocol::kHeaderNode, cfg_.node, identity_.secret_key, node_now_ms());
  auto reply = trusted_reply(req);
  if (!reply) return reply;
  const std::string* status = reply->header(protocol::kHeaderStatus);
  if (!status || *status != "error" || !reply->header(trust::kHeaderTime)) return reply;
  // Refused as expired, with the control plane's time: believed only when signed with the
  // pinned key for this very request (subject and nonce), so nobody else can set our clock.
  std::int64_t their_ms = 0;
  auto their = pinned_->verify(*reply, [&](const std::string& key) -> sdk::Result<void> {
    auto t = trust::verify_time(*reply, req, key);
    if (!t) return sdk::fail(t.error());
    their_ms = *t;
    return {};
  });
  if (!their) {
    log_->warn("control plane time not trusted node={} subject={} reply_subject={} reason=\"{}\"", cfg_.node, subject,
               common::printable(reply->subject), common::printable(their.error().message, 1024));
    return reply;
  }
  const std::int64_t offset = their_ms - common::now_ms();
  const std::int64_t old = clock_offset_ms_.exchange(offset);
  log_->warn("clock offset node={} offset_ms={} (this host's clock is {} ms {} the control plane's; signed node "
             "requests now use the control plane's time: fix the host's clock, e.g. NTP) previous_offset_ms={}",
             cfg_.node, offset, offset < 0 ? -offset : offset, offset < 0 ? "ahead of" : "behind", old);
  // Once: a second refusal is the answer (a new nonce, so the replay cache is not involved).
  auto again = protocol::make_message(subject);
  trust::sign_request(again, protocol::kHeaderNode, cfg_.node, identity_.secret_key, node_now_ms());
  return trusted_reply(again);
}

sdk::Result<sdk::Message> Daemon::trusted_reply(const sdk::Message& req) {
  // The answer (a declaration, a recovery copy) may be larger than the broker's limit: taken in
  // parts on a private inbox of this node.
  protocol::parts::RequestOptions opts;
  opts.timeout = 5s;
  opts.reply_in_parts = true;
  opts.inbox_prefix = protocol::node_inbox_prefix(cfg_.node);
  auto reply = protocol::parts::request(*transport_, req, opts);
  if (!reply) return reply;
  // Anyone who can answer on the broker could otherwise tell this host that it has no
  // declaration, or hand it a recovery copy that names files to remove.
  if (auto ok = pinned_->verify(*reply, [&](const std::string& key) { return trust::verify_reply(*reply, req, key); });
      !ok) {
    const std::string* status = reply->header(protocol::kHeaderStatus);
    const std::string* from = reply->header(protocol::kHeaderNode);
    std::string status_shown = status ? common::printable(*status, 16) : "-";
    std::string node_shown = from ? common::printable(*from, 64) : "-";
    log_->warn("reply not trusted node={} subject={} reply_subject={} status={} reply_node={} bytes={} "
               "reason=\"{}\" (ignored: treated as no answer)",
               cfg_.node, req.subject, common::printable(reply->subject), status_shown, node_shown, reply->body.size(),
               common::printable(ok.error().message, 1024));
    return sdk::fail(sdk::ErrorCode::Unavailable, "the reply to " + req.subject + " is not trusted: " +
                                                       ok.error().message);
  }
  return reply;
}

void Daemon::handle(Pending p) { apply_text(p.body, p.revision); }

void Daemon::apply_text(const std::string& text, std::uint64_t header_revision) {
  engine::ParseOptions opts;
  opts.max_bytes = kMaxAssembled;
  opts.expected_node = cfg_.node;
  opts.allow_revision = true;
  auto parsed = engine::parse_declaration_all(text, providers_->registry, opts);
  auto& decl = parsed.declaration;
  const auto& st = state_->state();
  if (!decl) {
    // A declaration this host cannot even read is a failed apply of that revision, reported
    // with every problem found ("; " between them).
    std::string reasons;
    for (const auto& d : parsed.diagnostics) reasons += (reasons.empty() ? "" : "; ") + d.text;
    if (text.size() > kMaxAssembled) reasons += std::string(" (") + kMaxDeclarationKey + " in the host config raises it)";
    log_->error("declaration refused node={} revision={} problems={} reason=\"{}\"", cfg_.node, header_revision,
                parsed.diagnostics.size(), common::printable(reasons, 4096));
    if (header_revision == 0) return;
    engine::ApplyResult r;
    r.revision = header_revision;
    r.outcome = "failed";
    r.reason = "invalid declaration: " + reasons;
    r.code = sdk::to_string(parsed.diagnostics.empty() ? sdk::ErrorCode::InvalidArgument : parsed.diagnostics.front().code);
    for (const auto& o : st.owned) {
      r.owned.push_back(o.resource);
      r.owned_digests.push_back(o.digest);
    }
    auto body = apply_report_json(cfg_.node, r, common::now_ms());
    keep_report(outbox_key_for_revision(r.revision), body);
    host_state_ = 2;
    flush_outbox();
    notify_ready("declaration " + std::to_string(header_revision) + " refused");
    return;
  }
  if (decl->revision != header_revision) {
    sdk::Message m;
    m.body = text;
    queue_refusal(m, header_revision,
                  sdk::Error{sdk::ErrorCode::InvalidArgument,
                             "the body says revision " + std::to_string(decl->revision) +
                                 " but the signed header says " + std::to_string(header_revision),
                             {}});
    return;
  }
  if (decl->revision < st.applied_revision) {
    // Signed, but older than what was applied: a replay (or a very late duplicate).
    sdk::Message m;
    m.body = text;
    queue_refusal(m, decl->revision,
                  sdk::Error{sdk::ErrorCode::FailedPrecondition,
                             "older than the applied revision " + std::to_string(st.applied_revision) + " (replayed?)",
                             {}});
    notify_ready("up to date at revision " + std::to_string(st.applied_revision));
    heartbeat_soon();
    return;
  }
  if (!damaged_state_.empty()) {
    log_->warn("declaration not applied node={} revision={} outcome=failed reason=\"{}\"", cfg_.node, decl->revision,
               common::printable(damaged_state_, 1024));
    if (rollback_reported_.insert(decl->revision).second)
      report_failed(decl->revision, "", damaged_state_, sdk::ErrorCode::FailedPrecondition);
    notify_ready("revision " + std::to_string(decl->revision) + " refused: upgrade state damaged");
    return;
  }
  // Rolled back (decision 0076): the revision whose host failed to start is not applied again —
  // it would reinstall that version and loop — until a newer revision arrives.
  if (rolled_back_) {
    const auto failed_revision = decimal_field(*rolled_back_, "failed_revision");
    if (failed_revision && decl->revision <= *failed_revision) {
      log_->warn("declaration not applied node={} revision={} outcome=failed reason=\"{}\" (not applied again until "
                 "a revision newer than {} arrives)",
                 cfg_.node, decl->revision, rollback_reason(), *failed_revision);
      if (rollback_reported_.insert(decl->revision).second)
        report_failed(decl->revision, "", rollback_reason(), sdk::ErrorCode::FailedPrecondition);
      notify_ready("revision " + std::to_string(decl->revision) + " refused: " + rollback_reason());
      return;
    }
  }
  // Applied already — but a report of it under this identity is owed when the node was enrolled
  // again on a kept state directory: the control plane counts nothing the old identity reported,
  // and would show the delivery outstanding for ever. The same revision is applied once more
  // (nothing to change, every resource read back) and reported by the current identity.
  const bool reported_by_this_identity = confirmed_generation() == identity_.generation;
  if (decl->revision == st.applied_revision && decl->digest == st.applied_digest && !reported_by_this_identity)
    log_->info("declaration applied under an earlier identity node={} revision={} generation={}: applying it again "
               "to report it", cfg_.node, decl->revision, identity_.generation);
  if (decl->revision == st.applied_revision && decl->digest == st.applied_digest && reported_by_this_identity) {
    log_->info("declaration already applied node={} revision={}", cfg_.node, decl->revision);
    if (was_fresh_) recover_orphans(*decl);
    notify_ready("applied revision " + std::to_string(st.applied_revision));
    return;
  }
  // Content by digest (content_fetch.h): fetched and verified before anything is applied.
  for (const auto& c : declared_content(*decl)) {
    ContentFetch how{transport_.get(), cfg_.node, identity_.secret_key, [this] { return node_now_ms(); },
                     [this](const sdk::Message& r, const sdk::Message& q) {
                       return pinned_->verify(r, [&](const std::string& key) { return trust::verify_reply(r, q, key); });
                     },
                     cfg_.state_dir, max_body_ > (64u << 10) ? max_body_ - (32u << 10) : max_body_ / 2};
    if (auto ok = fetch_content(how, c.hex); !ok) {
      log_->error("declaration not applied node={} revision={} resource={} outcome=failed reason=\"{}\"", cfg_.node,
                  decl->revision, c.resource, common::printable(ok.error().message, 1024));
      report_failed(decl->revision, c.resource, ok.error().message, ok.error().code);
      notify_ready("revision " + std::to_string(decl->revision) + " failed: content missing");
      return;
    }
  }
  host_state_ = 1;
  log_->info("apply start node={} revision={} resources={}", cfg_.node, decl->revision, decl->resources.size());
  auto token = std::make_shared<sdk::CancelToken>();
  {
    std::lock_guard lk(mu_);
    apply_cancel_ = token;
    applying_revision_ = decl->revision;
    superseded_by_ = 0;
    // Already stopping, or a newer revision came while this one was parsed.
    if (stop_ || (pending_ && pending_->revision > decl->revision)) {
      superseded_by_ = stop_ ? 0 : pending_->revision;
      token->cancel();
    }
  }
  auto t0 = Clock::now();
  // The report lists every failed outcome and the first kReportedChanges changed ones and counts
  // the rest: the engine keeps no more than that (ApplyOptions::keep_changes).
  engine::ApplyOptions options;
  options.keep_changes = kReportedChanges;
  auto result = engine_->apply_taking(*decl, text, *token, options);
  auto ms = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count() / 1000.0;
  std::uint64_t superseded_by = 0;
  {
    std::lock_guard lk(mu_);
    apply_cancel_.reset();
    applying_revision_ = 0;
    superseded_by = std::exchange(superseded_by_, 0);
  }
  if (result.outcome == "restart") return restart_into_new_program(result, text);
  if (result.outcome == "cancelled" && (stop_ || superseded_by == 0)) {
    // Stopping (SIGTERM): nothing is reported; what changed so far is owned and recorded, and the
    // revision is applied again at the next start (it is still the latest declared).
    host_state_ = 0;
    log_->info("apply stopped node={} revision={} outcome=cancelled resource={} ms={:.1f} (applied again at the "
               "next start)",
               cfg_.node, result.revision, result.failed_resource.empty() ? "-" : result.failed_resource, ms);
    return;
  }
  if (result.outcome == "cancelled") {
    // A newer revision arrived: this one is superseded (not failed); the newer one runs next.
    result.outcome = "superseded";
    result.reason = "cancelled: revision " + std::to_string(superseded_by) + " arrived while it was applied";
    result.code = sdk::to_string(sdk::ErrorCode::Cancelled);
    host_state_ = 0;
    log_->info("apply done node={} revision={} outcome=superseded by={} resource={} ms={:.1f}", cfg_.node,
               result.revision, superseded_by, result.failed_resource.empty() ? "-" : result.failed_resource, ms);
  } else if (result.outcome == "applied") {
    host_state_ = 0;
    applied_revision_ = result.revision;
    log_->info("apply done node={} revision={} outcome=applied owned={} ms={:.1f}", cfg_.node, result.revision,
               result.owned.size(), ms);
  } else {
    host_state_ = 2;
    log_->error("apply done node={} revision={} outcome=failed resource={} code={} reason=\"{}\"", cfg_.node,
                result.revision, common::printable(result.failed_resource), result.code.empty() ? "-" : result.code,
                common::printable(result.reason, 1024));
  }
  metrics_.apply_done(result.outcome, result.revision, state_->state().owned.size());
  auto body = apply_report_json(cfg_.node, result, common::now_ms());
  keep_report(outbox_key_for_revision(result.revision), body);
  if (result.outcome == "applied") confirm_generation();
  if (was_fresh_ && result.outcome != "superseded") recover_orphans(*decl);
  flush_outbox();
  if (result.outcome == "superseded") return;  // the newer revision is in the slot: ready after it
  notify_ready(result.outcome == "applied" ? "applied revision " + std::to_string(result.revision)
                                           : "revision " + std::to_string(result.revision) + " failed: " +
                                                 result.failed_resource);
}

void Daemon::recover_orphans(const engine::Declaration& decl) {
  // A host that started with no local state asks the control plane what it owned (the recovery
  // copy) and removes what is no longer declared. Done once per start.
  was_fresh_ = false;
  auto reply = node_request(protocol::recovery_subject(cfg_.node));
  if (!reply) {
    log_->warn("recovery copy unavailable node={} reason=\"{}\"", cfg_.node,
               common::printable(reply.error().describe(), 1024));
    was_fresh_ = true;  // try again after the next apply
    return;
  }
  auto v = common::parse_json(reply->body, {kMaxAssembled, 8});
  if (!v || !v->find("owned") || !v->find("owned")->is_array()) return;
  // "digests" (parallel to "owned"): what the mesh wrote, as this node reported it. An orphan is
  // removed only when it is still exactly that (Engine::remove_orphans); no digest, no removal.
  const auto& owned_list = v->find("owned")->as_array();
  const sdk::Value* digest_list = v->find("digests");
  const bool have_digests = digest_list && digest_list->is_array() && digest_list->as_array().size() == owned_list.size();
  std::vector<std::string> orphans, digests;
  for (std::size_t i = 0; i < owned_list.size(); ++i) {
    const auto& o = owned_list[i];
    if (!o.is_string()) continue;
    bool declared = false;
    for (const auto& r : decl.resources) declared = declared || r.rid.str() == o.as_string();
    bool owned_now = false;
    for (const auto& r : state_->state().owned) owned_now = owned_now || r.resource == o.as_string();
    if (declared || owned_now) continue;
    orphans.push_back(o.as_string());
    const sdk::Value* d = have_digests ? &digest_list->as_array()[i] : nullptr;
    digests.push_back(d && d->is_string() ? d->as_string() : std::string());
  }
  if (orphans.empty()) return;
  log_->info("removing orphans from recovery copy node={} count={}", cfg_.node, orphans.size());
  for (const auto& out : engine_->remove_orphans(orphans, digests, decl, cancel_))
    log_->info("orphan node={} resource={} outcome={} reason=\"{}\"", cfg_.node, common::printable(out.resource), out.outcome,
               common::printable(out.reason, 1024));
}

void Daemon::send_report(const std::string& key, const std::string& subject, const std::string& body) {
  auto req = protocol::make_message(subject, body);
  req.set_header(protocol::kHeaderNode, cfg_.node);
  if (key.rfind("apply-", 0) == 0) req.set_header(protocol::kHeaderRevision, std::to_string(std::stoull(key.substr(6))));
  // Signed when sent (not when kept), so a report waiting in the outbox across a re-enrolment
  // goes out under the node's current key.
  trust::sign_report(req, identity_.secret_key);
  // In parts when larger than the broker's limit (a long owned list).
  auto reply = protocol::parts::request(*transport_, req, protocol::parts::RequestOptions{});
  if (!reply) {
    log_->warn("report not delivered node={} key={} reason=\"{}\" (kept in outbox)", cfg_.node, key,
               common::printable(reply.error().describe(), 1024));
    return;
  }
  // Only the control plane's signed answer to this very report lets it go: anyone on the broker
  // can reply, and an unsigned "ack" (or one signed for another report) would lose it.
  if (auto ok = pinned_->verify(*reply, [&](const std::string& key) { return trust::verify_ack(*reply, req, key); });
      !ok) {
    log_->warn("report ack not trusted node={} key={} reply_subject={} reason=\"{}\" (kept in outbox)", cfg_.node, key,
               common::printable(reply->subject), common::printable(ok.error().message, 1024));
    return;
  }
  const std::string* status = reply->header(protocol::kHeaderStatus);
  if (status && *status == "error") {
    auto v = common::parse_json(reply->body, {max_body_, 8});
    const std::string code = v && v->find("error") ? v->find("error")->get_string("code") : "";
    // Only a report refused for what it is (invalid) or for who sent it (not allowed) leaves the
    // outbox: any other answer — the control plane's store full or failing, busy, a code this
    // host does not know — is not the report's fault, and it is kept until it is recorded.
    if (code != "invalid_argument" && code != "permission_denied") {
      log_->warn("report not taken yet node={} key={} code={} reply={} (kept in outbox)", cfg_.node, key,
                 code.empty() ? "-" : code, common::printable(reply->body));
      return;
    }
    if (code == "permission_denied") {
      // This identity is no longer the node's: resending would be refused for ever.
      keep_refused_report(key);
      credentials_refused("sending report " + key, v->find("error")->get_string("message"));
      return;
    }
    // Refused for good (bad report, unknown node): keeping it would resend it forever.
    log_->error("report refused node={} key={} reply={}", cfg_.node, key, common::printable(reply->body, 1024));
  }
  unsaved_.erase(key);
  if (auto r = state_->outbox_remove(key); !r)
    log_->error("outbox remove failed node={} key={} reason=\"{}\"", cfg_.node, key, r.error().describe());
}

std::uint64_t Daemon::confirmed_generation() const {
  auto text = common::read_file(cfg_.state_dir + "/applied.generation", 64);
  if (!text) return 0;
  try {
    return std::stoull(*text);
  } catch (...) {
    return 0;
  }
}

void Daemon::confirm_generation() {
  if (confirmed_generation() == identity_.generation) return;
  if (auto ok = common::write_file_atomic(cfg_.state_dir + "/applied.generation",
                                          std::to_string(identity_.generation) + "\n", 0600);
      !ok)
    log_->warn("cannot record the reporting identity node={} reason=\"{}\"", cfg_.node, ok.error().describe());
}

void Daemon::outbox_now_waiting() {
  if (!outbox_waiting_) retry_outbox_at_ = Clock::now() + 5s;
  outbox_waiting_ = true;
}

void Daemon::keep_report(const std::string& key, const std::string& body) {
  outbox_now_waiting();
  auto put = state_->outbox_put(key, body);
  if (put) return;
  // Disk full (or the outbox otherwise unwritable): the report must still reach the control
  // plane, or it keeps showing the previous revision applied over what this apply changed.
  log_->error("cannot keep report node={} key={} reason=\"{}\" (sending it from memory: lost if the host stops "
              "before the control plane has it)",
              cfg_.node, key, put.error().describe());
  unsaved_[key] = body;
  constexpr std::size_t kMaxUnsaved = 32;  // drift reports every scan: the oldest go first
  while (unsaved_.size() > kMaxUnsaved) {
    auto oldest = unsaved_.begin();
    for (auto it = unsaved_.begin(); it != unsaved_.end(); ++it)
      if (it->first.rfind("drift-", 0) == 0) {
        oldest = it;
        break;
      }
    unsaved_.erase(oldest);
  }
}

void Daemon::credentials_refused(const std::string& what, const std::string& message) {
  if (revoked_.exchange(true)) return;
  log_->error("credentials refused node={} while {}: \"{}\" — this host's identity (generation {}) is no longer the "
              "node's (revoked, or the node was enrolled again elsewhere). It stops changing this machine: no "
              "applies, no drift repair, no reports; it stays running and idle. To manage this machine again: "
              "`mesh token issue {} --reenrol`, then `mesh-host enrol --config {} --token-file FILE` and restart",
              cfg_.node, what, message.substr(0, 512), identity_.generation, cfg_.node, cfg_.path);
  {
    std::lock_guard lk(mu_);
    pending_.reset();
    refusals_.clear();
  }
  ready_ = true;  // a service manager waiting for READY=1 gets it: running, idle
  sd_notify(0, ("READY=1\nSTATUS=credentials refused: identity of " + cfg_.node +
                " revoked; idle, changing nothing (re-enrol: mesh token issue " + cfg_.node + " --reenrol)")
                   .c_str());
}

void Daemon::keep_refused_report(const std::string& key) {
  unsaved_.erase(key);
  const std::string dir = cfg_.state_dir + "/refused";
  const std::string from = cfg_.state_dir + "/outbox/" + key + ".json";
  const std::string to = dir + "/" + key + ".json";
  if (auto ok = common::make_dirs(dir, 0700); ok && ::rename(from.c_str(), to.c_str()) == 0) {
    log_->warn("report refused node={} key={} kept={} (out of the outbox, not resent)", cfg_.node, key, to);
    return;
  }
  if (auto r = state_->outbox_remove(key); !r)
    log_->error("outbox remove failed node={} key={} reason=\"{}\"", cfg_.node, key, r.error().describe());
}

void Daemon::send_refusals() {
  std::deque<Refusal> batch;
  {
    std::lock_guard lk(mu_);
    batch.swap(refusals_);
  }
  for (auto& r : batch) {
    engine::ApplyResult result;
    result.revision = r.revision;
    result.outcome = "refused";
    metrics_.apply_done(result.outcome, r.revision, state_->state().owned.size());
    result.reason = r.reason;
    result.code = r.code;
    for (const auto& o : state_->state().owned) result.owned.push_back(o.resource);
    // Our own JSON, but parse_json still checks its size (1 MiB by default, which a long `owned`
    // list exceeds) and UTF-8: never dereference an unchecked result.
    auto built = common::parse_json(apply_report_json(cfg_.node, result, common::now_ms()),
                                    common::JsonLimits{SIZE_MAX, 32});
    if (!built) {
      log_->error("refusal report not built node={} revision={} reason=\"{}\"", cfg_.node, r.revision,
                  built.error().describe());
      continue;
    }
    sdk::Value v = std::move(*built);
    v.set("digest", r.digest);
    auto req = protocol::make_message(protocol::report_subject(cfg_.node), v.to_json());
    req.set_header(protocol::kHeaderNode, cfg_.node);
    req.set_header(protocol::kHeaderRevision, std::to_string(r.revision));
    trust::sign_report(req, identity_.secret_key);
    // Best effort, not kept in the outbox: a refusal is news, not state.
    auto reply = protocol::parts::request(*transport_, req, protocol::parts::RequestOptions{});
    if (!reply)
      log_->warn("refusal report not delivered node={} revision={} reason=\"{}\"", cfg_.node, r.revision,
                 reply.error().describe());
  }
}

void Daemon::flush_outbox() {
  // First what only memory holds (the outbox could not take it).
  for (const auto& [key, body] : std::map<std::string, std::string>(unsaved_)) {
    if (!transport_->connected()) break;
    send_report(key, key.rfind("drift-", 0) == 0 ? protocol::drift_subject(cfg_.node) : protocol::report_subject(cfg_.node),
                body);
  }
  auto items = state_->outbox_list();
  if (!items) {
    log_->error("outbox unreadable node={} reason=\"{}\"", cfg_.node, items.error().describe());
    return outbox_now_waiting();
  }
  for (const auto& [key, body] : *items) {
    if (!transport_->connected()) break;
    const std::string subject = key.rfind("drift-", 0) == 0 ? protocol::drift_subject(cfg_.node)
                                                             : protocol::report_subject(cfg_.node);
    send_report(key, subject, body);
  }
  // Acknowledged reports left the outbox (send_report): whatever is still there waits for a retry.
  auto left = state_->outbox_list();
  if (!unsaved_.empty() || !left || !left->empty()) return outbox_now_waiting();
  outbox_waiting_ = false;
  outbox_rounds_ = 0;
}

void Daemon::drift_scan() {
  if (state_->state().owned.empty()) return;
  if (!damaged_state_.empty()) {
    log_->warn("drift scan skipped node={} reason=\"{}\"", cfg_.node, common::printable(damaged_state_, 1024));
    return;
  }
  auto t0 = Clock::now();
  auto items = engine_->scan_drift(cancel_);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  const std::string scan = common::random_token(8);
  log_->info("drift scan node={} scan={} drifted={} us={}", cfg_.node, scan, items.size(), us);
  metrics_.drift_scanned(items);
  auto body = drift_report_json(cfg_.node, scan, state_->state().applied_revision, items, common::now_ms());
  // Every scan is reported (so the control plane knows when the last one ran); keyed by scan.
  keep_report("drift-" + std::to_string(common::now_ms()) + "-" + scan, body);
  flush_outbox();
}

Clock::time_point Daemon::next_drift() {
  // Jitter up to 10% so a fleet started together does not scan together.
  auto base = cfg_.drift;
  std::uniform_int_distribution<std::int64_t> d(0, base.count() / 10);
  return Clock::now() + base + std::chrono::milliseconds(d(rng_));
}

void Daemon::send_heartbeat() {
  if (transport_->connected() && !revoked_) {
    // Stamped with the control plane's clock as far as this host knows it: a heartbeat outside
    // its clock tolerance is refused (docs/protocol.md "Trust").
    auto m = heartbeat_message(cfg_.node, applied_revision_.load(), running_version().version,
                               state_name(host_state_.load()), identity_.heartbeat_key, common::now_ms(), node_now_ms());
    auto r = transport_->publish(m);
    metrics_.heartbeat(r.has_value());
    if (!r) log_->debug("heartbeat not sent node={} reason=\"{}\"", cfg_.node, r.error().describe());
  } else if (!revoked_) {
    metrics_.heartbeat(false);  // due, but no broker link
  }
}

void Daemon::heartbeat_soon() {
  std::lock_guard lk(mu_);
  heartbeat_soon_ = true;
  cv_.notify_all();
  kick_timer();
}

void Daemon::timer_loop(std::chrono::microseconds watchdog_period) {
  // One thread for both periodic duties (decision 113): systemd's watchdog ping from the start,
  // heartbeats once start_heartbeats() is called; neither waits for the worker.
  const bool watchdog = watchdog_period.count() > 0;
  constexpr auto kFar = std::chrono::hours(24);  // "not due": wait_until with time_point::max overflows
  auto next_ping = Clock::now();
  std::optional<Clock::time_point> next_beat;
  std::optional<Clock::time_point> last_beat;
  std::unique_lock lk(mu_);
  while (!quitting()) {
    auto now = Clock::now();
    if (heartbeats_on_ && !next_beat) next_beat = now;
    if (heartbeat_soon_) {
      // Asked for one now (heartbeat_soon()): at most one a second beyond the period, so that a
      // flood of replayed declarations does not become a flood of heartbeats.
      heartbeat_soon_ = false;
      const auto earliest = last_beat ? *last_beat + std::chrono::seconds(1) : now;
      if (next_beat && earliest < *next_beat) next_beat = std::max(now, earliest);
    }
    if (watchdog && now >= next_ping) {
      next_ping = now + watchdog_period;
      lk.unlock();
      sd_notify(0, "WATCHDOG=1");
      lk.lock();
      continue;
    }
    if (next_beat && now >= *next_beat) {
      next_beat = now + cfg_.heartbeat;
      last_beat = now;
      lk.unlock();
      send_heartbeat();
      lk.lock();
      continue;
    }
    const auto until = std::min(watchdog ? next_ping : now + kFar, next_beat ? *next_beat : now + kFar);
    timer_wait(lk, until, /*until_heartbeats_on=*/!next_beat);
  }
}

void Daemon::timer_wait(std::unique_lock<std::mutex>& lk, Clock::time_point until, bool until_heartbeats_on) {
  if (!take_signals_) {
    cv_.wait_until(lk, until,
                   [&] { return quitting() || heartbeat_soon_ || (until_heartbeats_on && heartbeats_on_); });
    return;
  }
  // One thread for the timers and the signals (decision 160): instead of a thread blocked in
  // sigwait beside this one, this one waits for the signals with its next deadline as timeout.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR2);
  const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now());
  const std::int64_t ns = std::max<std::int64_t>(0, left.count());
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  siginfo_t info{};
  lk.unlock();
  const int sig = sigtimedwait(&set, &info, &ts);
  // kick_timer()'s signal carries kTimerKick (pthread_sigqueue): one from outside the process
  // cannot (its si_pid is the sender's).
  const bool kick = sig == SIGUSR2 && info.si_code == SI_QUEUE && info.si_pid == ::getpid() &&
                    info.si_value.sival_int == kTimerKick;
  if (sig > 0 && !kick) {
    if (sig != SIGUSR2) log_->info("signal {} received: stopping", sig);
    stop_ = true;
    wake();
  }
  lk.lock();
}

void Daemon::kick_timer() {
  if (take_signals_ && timer_alive_ && !pthread_equal(pthread_self(), timer_handle_))
    pthread_sigqueue(timer_handle_, SIGUSR2, sigval{kTimerKick});
}

void Daemon::start_timer() {
  // WATCHDOG_USEC set by systemd: a ping at half the interval, from now on.
  std::uint64_t wd_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0;
  std::lock_guard lk(mu_);
  timer_thread_ = std::thread([this, watchdog, wd_usec] {
    timer_loop(std::chrono::microseconds(watchdog ? wd_usec / 2 : 0));
  });
  timer_handle_ = timer_thread_.native_handle();
  timer_alive_ = true;
}

void Daemon::stop_timer() {
  {
    std::lock_guard lk(mu_);
    done_ = true;
    cv_.notify_all();
    kick_timer();
    timer_alive_ = false;  // no SIGUSR2 to a thread that may have ended
  }
  if (timer_thread_.joinable()) timer_thread_.join();
}

std::string Daemon::rollback_reason() const {
  const StateFields none;
  const StateFields& f = rolled_back_ ? *rolled_back_ : none;
  auto get = [&](const char* k) {
    auto it = f.find(k);
    return it == f.end() || it->second.empty() ? std::string("(unknown)") : it->second;
  };
  return "host version " + get("failed_version") + " failed to start on this node; rolled back to " +
         get("restored_version");
}

void Daemon::report_failed(std::uint64_t revision, const std::string& resource, const std::string& reason,
                           sdk::ErrorCode code) {
  engine::ApplyResult r;
  r.revision = revision;
  r.outcome = "failed";
  r.failed_resource = resource;
  r.reason = reason;
  r.code = sdk::to_string(code);
  for (const auto& o : state_->state().owned) {
    r.owned.push_back(o.resource);
    r.owned_digests.push_back(o.digest);
  }
  keep_report(outbox_key_for_revision(revision), apply_report_json(cfg_.node, r, common::now_ms()));
  host_state_ = 2;
  flush_outbox();
}

void Daemon::settle_upgrade_state() {
  const std::string& mine = running_version().version;
  auto remove = [&](const char* name) {
    if (auto ok = remove_state_file(upgrade_dir_, name); !ok)
      log_->error("cannot remove upgrade state node={} file={}/{} reason=\"{}\"", cfg_.node, upgrade_dir_, name,
                  ok.error().describe());
  };
  // Any file that does not parse fails safe: a `rolled-back` that cannot be read must not be taken
  // for no rollback (the refused revision would be applied again and reinstall the version that
  // cannot start), nor a damaged `pending` for no upgrade.
  // Each file is read once, here; what follows works on what was read.
  std::map<std::string, std::optional<StateFields>> files;
  for (const char* name : {kPendingFile, kRolledBackFile, kStoppedFile, kConfirmedFile}) {
    auto f = read_state_file(upgrade_dir_, name);
    if (f) {
      files[name] = std::move(*f);
      continue;
    }
    damaged_state_ = "upgrade state " + upgrade_dir_ + "/" + name + " is damaged (" + f.error().message +
                     "): nothing is applied on this node until it is fixed or removed (docs/operations.md)";
    log_->error("upgrade state damaged node={} file={}/{} outcome=failed reason=\"{}\"", cfg_.node, upgrade_dir_,
                name, common::printable(damaged_state_, 1024));
    return;
  }
  auto read = [&](const char* name) { return files[name]; };
  rolled_back_ = read(kRolledBackFile);
  if (auto stopped = read(kStoppedFile)) {
    // A second start failure: the rollback script left the service stopped. Now that a host runs
    // again (started by hand), it says so once and forgets it.
    const auto revision = decimal_field(*stopped, "failed_revision");
    const std::string reason = "host version " + (*stopped)["failed_version"] +
                               " failed to start on this node after a rollback; the service was left stopped" +
                               ((*stopped)["reason"].empty() ? std::string() : ": " + (*stopped)["reason"]);
    log_->error("upgrade stopped node={} revision={} outcome=failed reason=\"{}\"", cfg_.node,
                revision ? std::to_string(*revision) : "-", common::printable(reason, 1024));
    if (revision && *revision > 0) {
      report_failed(*revision, "", reason, sdk::ErrorCode::Failed);
      rollback_reported_.insert(*revision);
    }
    // This host runs another version than the one that failed (put back by hand): that revision
    // must not be applied again either, or it would reinstall the version that cannot start.
    // `rolled-back` names it from now on (decision 80), so the refusal outlives this start.
    const std::string failed_version = (*stopped)["failed_version"];
    const auto recorded = rolled_back_ ? decimal_field(*rolled_back_, "failed_revision") : std::nullopt;
    if (revision && *revision > 0 && common::valid_version_token(failed_version) && failed_version != mine &&
        (!recorded || *revision >= *recorded)) {
      StateFields rb{{"failed_version", failed_version},
                     {"failed_revision", std::to_string(*revision)},
                     {"restored_version", mine},
                     {"at_ms", std::to_string(common::now_ms())}};
      if (auto ok = write_state_file(upgrade_dir_, kRolledBackFile, rb); !ok)
        log_->error("cannot record the failed version node={} file={}/{} reason=\"{}\"", cfg_.node, upgrade_dir_,
                    kRolledBackFile, ok.error().describe());
      rolled_back_ = std::move(rb);
      log_->warn("upgrade refused from now on node={} revision={} failed_version={} running_version={} (until a newer "
                 "revision arrives)",
                 cfg_.node, *revision, failed_version, mine);
    }
    remove(kStoppedFile);
  }
  auto pending = read(kPendingFile);
  if (!pending) return;
  const std::string to = (*pending)["to_version"];
  const auto revision = decimal_field(*pending, "revision");
  const std::string resource = (*pending)["package"].empty() ? "" : "package:" + (*pending)["package"];
  if (!to.empty() && to == mine) {
    // The upgrade to this version: confirmed once its first reconcile completed, offline if need
    // be; READY=1 only then.
    log_->info("upgrade start node={} revision={} version={} from={}: first reconcile of the declaration the "
               "previous host left",
               cfg_.node, revision ? std::to_string(*revision) : "-", mine, (*pending)["from_version"]);
    const bool clears_rollback = rolled_back_ && (*rolled_back_)["restored_version"] != mine;
    if (clears_rollback) rolled_back_.reset();
    auto text = common::read_file(upgrade_dir_ + "/" + kPendingDeclarationFile, kMaxAssembled);
    if (text && revision) {
      apply_text(*text, *revision);
      // That reconcile replaced the program once more (and left a new `pending`): the next one
      // confirms.
      if (restart_) return;
    } else {
      log_->warn("upgrade declaration missing node={} file={}/{} reason=\"{}\" (confirming without it; the latest "
                 "declaration is fetched when the broker is reachable)",
                 cfg_.node, upgrade_dir_, kPendingDeclarationFile,
                 text ? "no revision in pending" : text.error().describe());
    }
    if (auto ok = write_state_file(upgrade_dir_, kConfirmedFile,
                                   {{"version", mine}, {"at_ms", std::to_string(common::now_ms())}});
        !ok)
      log_->error("cannot record the confirmed version node={} reason=\"{}\"", cfg_.node, ok.error().describe());
    remove(kPendingFile);
    remove(kPendingDeclarationFile);
    if (clears_rollback) remove(kRolledBackFile);
    log_->info("upgrade confirmed node={} revision={} version={} outcome={}", cfg_.node,
               revision ? std::to_string(*revision) : "-", mine, host_state_.load() == 2 ? "failed" : "applied");
    return;
  }
  if (rolled_back_) {
    // The new version could not start and the rollback script put this one back.
    const auto failed_revision = decimal_field(*rolled_back_, "failed_revision");
    const std::uint64_t rev = failed_revision ? *failed_revision : revision.value_or(0);
    log_->error("upgrade rolled back node={} revision={} outcome=failed reason=\"{}\"", cfg_.node, rev,
                rollback_reason());
    // Not when `stopped` was just reported for it: that report says more (and has the same key).
    if (rev > 0 && rollback_reported_.insert(rev).second)
      report_failed(rev, resource, rollback_reason(), sdk::ErrorCode::Failed);
  } else {
    // Killed before its exit, or the package went back by other means: no upgrade took place.
    log_->warn("upgrade not in place node={} revision={} pending_version={} running_version={}: no rollback is "
               "recorded; forgetting the pending upgrade",
               cfg_.node, revision ? std::to_string(*revision) : "-", to, mine);
  }
  remove(kPendingFile);
  remove(kPendingDeclarationFile);
}

void Daemon::restart_into_new_program(const engine::ApplyResult& result, const std::string& text) {
  // The new program's version as dpkg now says (the running one read its own at start).
  const HostVersion now = query_host_version(self_executable());
  const HostVersion& mine = running_version();
  std::string package = !now.package.empty() ? now.package : mine.package;
  if (package.empty() && result.replaced_by.rfind("package:", 0) == 0) package = result.replaced_by.substr(8);
  StateFields pending{{"package", package},
                      {"from_version", mine.version},
                      {"to_version", now.version},
                      {"revision", std::to_string(result.revision)},
                      {"at_ms", std::to_string(common::now_ms())}};
  // The declaration first: `pending` is what makes the next host (or the rollback script) act.
  auto saved = common::make_dirs(upgrade_dir_, 0700);
  if (saved) saved = common::write_file_atomic(upgrade_dir_ + "/" + kPendingDeclarationFile, text, 0600);
  if (saved) saved = write_state_file(upgrade_dir_, kPendingFile, pending);
  if (!saved)
    log_->error("cannot record the pending upgrade node={} dir={} reason=\"{}\" (restarting anyway: the new host "
                "applies the latest declaration once the broker is reachable, but cannot be rolled back by the "
                "script)",
                cfg_.node, upgrade_dir_, saved.error().describe());
  log_->info("host restarting node={} revision={} resource={} from_version={} to_version={} exit={} (self-test "
             "passed: \"{}\")",
             cfg_.node, result.revision, result.replaced_by, mine.version, now.version, kExitRestart,
             common::printable(result.self_test_output, 512));
  sd_notify(0, ("STATUS=restarting into host version " + now.version + " (revision " +
                std::to_string(result.revision) + ")")
                   .c_str());
  host_state_ = 0;
  restart_ = true;
}

int Daemon::run() {
  // The timer thread from the start (the destructor joins it on an early return): watchdog
  // pings, heartbeats once heartbeats_on_ is set below (after the subscription), and with
  // take_signals_ SIGTERM/SIGINT, so a signal during start-up cancels it as before.
  start_timer();
  // The rest of the config (each provider's table, the transport's) is checked first: a config
  // error is reported as such, before the enrolment and lock checks.
  auto config_error = [&](const sdk::Error& e) {
    // "host.toml:7: plugins.load: ..." already names its key: say it once.
    log_->error("{}", e.path.empty() || e.message.find(e.path) != std::string::npos ? e.message : e.describe());
    return 2;
  };
  auto providers = load_providers(cfg_.plugin_dirs, cfg_.load, &cfg_, cfg_.state_dir);
  if (!providers) return config_error(providers.error());
  providers_.emplace(std::move(*providers));
  auto transport = load_transport(cfg_);
  if (!transport) return config_error(transport.error());
  transport_ = *transport;
  auto id = load_identity(cfg_.state_dir);
  if (!id) {
    log_->error("{}", id.error().describe());
    return 2;
  }
  if (!*id) {
    log_->error("node {} is not enrolled (no {}/identity.json): run `mesh-host enrol --config {} --token TOKEN`",
                cfg_.node, cfg_.state_dir, cfg_.path);
    return 2;
  }
  identity_ = **id;
  if (identity_.control_key.empty() || identity_.heartbeat_key.empty()) {
    log_->error("node {} was enrolled without a pinned control plane key or heartbeat key (an older enrolment): "
                "re-enrol it with a token issued by `mesh token issue {} --reenrol`",
                cfg_.node, cfg_.node);
    return 2;
  }
  if (identity_.node != cfg_.node) {
    log_->error("{}/identity.json is for node {}, but {} names node {}", cfg_.state_dir, identity_.node,
                cfg_.path, cfg_.node);
    return 2;
  }
  pinned_ = std::make_unique<PinnedControlKey>(cfg_.state_dir, cfg_.node, identity_.control_key, log_.get());
  auto sd = engine::StateDir::open(cfg_.state_dir);
  if (!sd) {
    log_->error("{}", sd.error().describe());
    return 2;
  }
  state_.emplace(std::move(*sd));
  if (auto lk = state_->lock(2000); !lk) {
    log_->error("{}", lk.error().describe());
    return 1;
  }
  was_fresh_ = state_->fresh();
  applied_revision_ = state_->state().applied_revision;
  if (state_->state().last_outcome == "failed") host_state_ = 2;
  metrics_.started(state_->state().applied_revision, state_->state().owned.size());

  engine_.emplace(providers_->registry, *state_, engine_log_);
  {
    // Decision 0076: the program this host runs from, as named at start (once dpkg replaced it,
    // /proc/self/exe says "(deleted)"), for the self-test of a new one.
    engine::HostProgram program;
    program.executable = self_executable();
    std::error_code ec;
    program.config = std::filesystem::absolute(cfg_.path, ec).string();
    if (ec) program.config = cfg_.path;
    program.at_start = engine::FileIdentity::of(program.executable);
    if (!program.executable.empty()) engine_->set_host_program(std::move(program));
  }
  upgrade_dir_ = upgrade_dir(cfg_.state_dir);

  // READY=1 never waits for the broker (issue #14 item 2): the first reconcile is the upgrade's
  // confirmation when one is pending (the declaration the previous host left, applied offline),
  // else what the state directory holds; the broker link comes up in the background.
  log_->info("host version node={} version={} package={} executable={}", cfg_.node, running_version().version,
             running_version().package.empty() ? "-" : running_version().package,
             self_executable().empty() ? "-" : self_executable());
  settle_upgrade_state();
  if (restart_) {
    stop_timer();
    state_->unlock();
    return kExitRestart;
  }
  notify_ready(state_->state().applied_revision
                   ? "applied revision " + std::to_string(state_->state().applied_revision) + "; connecting to the broker"
                   : "started, nothing applied yet; connecting to the broker");
  transport_->on_link_event([this](sdk::LinkEvent e) { on_link(e); });
  auto conn = transport_->connect(5s, /*retry_in_background=*/true);
  if (!conn) log_->warn("broker not reachable yet node={} reason=\"{}\" (retrying)", cfg_.node, conn.error().describe());
  if (transport_->max_payload_bytes() > 0) max_body_ = transport_->max_payload_bytes();
  if (cfg_.max_message > 0) max_body_ = std::min(max_body_, cfg_.max_message);
  auto sub = transport_->subscribe(protocol::decl_subject(cfg_.node), "",
                                   [this](sdk::Message&& m) {
                                     if (!protocol::parts::is_part(m)) return on_declaration(std::move(m));
                                     // Nothing is checked on a part but its shape; the whole gets
                                     // every check of a declaration once it is complete.
                                     auto whole = decl_parts_.add(m, common::now_ms());
                                     if (!whole)
                                       return queue_refusal(m, 0, whole.error());
                                     if (*whole) on_declaration(std::move(**whole));
                                   });
  if (!sub) {
    log_->error("subscribe {} failed: {}", protocol::decl_subject(cfg_.node), sub.error().describe());
    stop_timer();
    return 1;
  }
  decl_sub_ = std::move(*sub);
  if (transport_->connected()) {
    std::lock_guard lk(mu_);
    need_fetch_ = true;
    need_flush_ = true;
  }
  log_->info("host started node={} plugins={} applied_revision={} heartbeat={}ms drift={}ms", cfg_.node,
             providers_->registry.types().size(), applied_revision_.load(), cfg_.heartbeat.count(), cfg_.drift.count());

  {
    std::lock_guard lk(mu_);
    heartbeats_on_ = true;
    cv_.notify_all();
    kick_timer();
  }

  auto drift_at = next_drift();

  while (!stop_ && !restart_) {
    std::optional<Pending> work;
    bool fetch = false, flush = false;
    {
      std::unique_lock lk(mu_);
      // The outbox retry only while a report waits for its ack (outbox_waiting_).
      auto wake_at = outbox_waiting_ ? std::min(drift_at, retry_outbox_at_) : drift_at;
      if (fetch_at_) wake_at = std::min(wake_at, *fetch_at_);
      cv_.wait_until(lk, wake_at, [&] { return stop_ || pending_ || need_fetch_ || need_flush_ || !refusals_.empty(); });
      if (stop_) break;
      if (pending_) {
        work = std::move(pending_);
        pending_.reset();
      }
      fetch = std::exchange(need_fetch_, false) || (fetch_at_ && Clock::now() >= *fetch_at_);
      flush = std::exchange(need_flush_, false);
      if (revoked_) refusals_.clear();
    }
    if (revoked_) {
      // Credentials refused: running and idle; nothing on this machine is changed any more.
      drift_at = next_drift();
      retry_outbox_at_ = Clock::now() + 5s;
      continue;
    }
    if (flush) flush_outbox();
    send_refusals();
    if (work) {
      handle(std::move(*work));
    } else if (fetch) {
      fetch_latest();
    }
    if (restart_) break;  // the new program passed its self-test: exit 75, nothing else
    if (Clock::now() >= drift_at) {
      drift_scan();
      drift_at = next_drift();
    }
    if (outbox_waiting_ && Clock::now() >= retry_outbox_at_) {
      // Reports whose ack did not come (control plane down while the broker was up) are retried:
      // every 5 s at first, then further apart while they stay unacknowledged (5–10 s, 10–20 s,
      // … up to a minute: decision record 132), so a fleet whose control plane is away or busy
      // does not keep its queues full with the same reports.
      if (transport_->connected()) flush_outbox();
      retry_outbox_at_ =
          Clock::now() + std::max<Clock::duration>(5s, common::retry_backoff(++outbox_rounds_, 5s, 60s));
    }
  }
  cancel_.cancel();
  log_->info("host stopping node={}{}", cfg_.node, restart_ ? " (restarting into the new host program: exit 75)" : "");
  sd_notify(0, "STOPPING=1");
  stop_timer();
  decl_sub_.reset();
  transport_->close();
  state_->unlock();
  return restart_ ? kExitRestart : 0;
}

}  // namespace

int run_daemon(const HostConfig& config, std::atomic<bool>& stop, bool take_signals) {
  Daemon d(config, stop, take_signals);
  {
    std::lock_guard lk(g_wake_mu);
    g_daemon = &d;
  }
  int rc = d.run();
  std::lock_guard lk(g_wake_mu);
  g_daemon = nullptr;
  return rc;
}

void wake_daemon() noexcept {
  std::lock_guard lk(g_wake_mu);
  if (g_daemon) g_daemon->wake();
}

}  // namespace mesh::host
