// mesh-sim's fleet: hosts, the connections they share, the timer thread and the workers, the
// enrolment phase and the status file.
#include "fleet.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/common/exit_codes.h"
#include "mesh/host/describe.h"

namespace mesh::sim::detail {

using namespace std::chrono_literals;

Fleet::Fleet(const SimOptions& options, std::atomic<bool>& stop)
    : options_(options), stop_(stop), rng_(options.seed ? options.seed : std::random_device{}()) {
  failure_seed_ = rng_();
}

bool Fleet::fails(const std::string& node, std::uint64_t revision) const {
  if (options_.failure_rate <= 0) return false;
  if (options_.failure_rate >= 1) return true;
  const std::string digest =
      common::sha256_hex("mesh-sim failure\n" + std::to_string(failure_seed_) + "\n" + node + "\n" + std::to_string(revision));
  const double x = static_cast<double>(std::stoull(digest.substr(0, 13), nullptr, 16)) / static_cast<double>(1ULL << 52);
  return x < options_.failure_rate;
}

Fleet::~Fleet() { stop_all(); }

std::chrono::milliseconds Fleet::random_ms(std::chrono::milliseconds max) {
  if (max.count() <= 0) return 0ms;
  std::lock_guard lk(rng_mu_);
  return std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(0, max.count() - 1)(rng_));
}

std::chrono::milliseconds Fleet::backoff(int failures) { return common::retry_backoff(failures); }

void Fleet::post(std::function<void()> fn, Lane lane) {
  {
    std::lock_guard lk(work_mu_);
    (lane == Lane::First ? work_first_ : work_).push_back(std::move(fn));
  }
  work_cv_.notify_one();
}

void Fleet::post_at(Clock::time_point at, std::function<void()> fn, Lane lane) {
  {
    std::lock_guard lk(timer_mu_);
    timers_.push(Timed{at, timer_seq_++, std::move(fn), lane});
  }
  timer_cv_.notify_one();
}

void Fleet::request_async(Group& g, std::shared_ptr<sdk::Message> req, std::chrono::milliseconds timeout,
                          ReplyHandler done) {
  const std::size_t limit = g.transport->max_payload_bytes();
  if (limit != 0 && protocol::parts::wire_size(*req) > limit) {
    // In parts: each part waits for its `part` answer, so this one request holds a worker.
    post(
        [&g, req, timeout, done = std::move(done)] {
          protocol::parts::RequestOptions o;
          o.timeout = timeout;
          done(protocol::parts::request(*g.transport, *req, o));
        },
        Lane::First);
    return;
  }
  std::uint64_t token = 0;
  {
    std::lock_guard lk(g.pending_mu);
    token = g.next_token++;
    g.pending.emplace(token, Group::Pending{std::move(done), Clock::now() + timeout});
  }
  req->reply = g.inbox + std::to_string(token);
  if (auto sent = g.transport->publish(*req); !sent) {
    ReplyHandler fn;
    {
      std::lock_guard lk(g.pending_mu);
      auto it = g.pending.find(token);
      if (it == g.pending.end()) return;  // expired meanwhile: already answered
      fn = std::move(it->second.done);
      g.pending.erase(it);
    }
    auto error = sent.error();
    post([fn = std::move(fn), error] { fn(sdk::fail(error)); }, Lane::First);
  }
}

void Fleet::on_reply(Group& g, sdk::Message&& m) {
  const auto dot = m.subject.rfind('.');
  std::uint64_t token = 0;
  if (dot == std::string::npos) return;
  const char* end = m.subject.data() + m.subject.size();
  if (auto [p, ec] = std::from_chars(m.subject.data() + dot + 1, end, token); ec != std::errc{} || p != end) return;
  ReplyHandler fn;
  {
    std::lock_guard lk(g.pending_mu);
    auto it = g.pending.find(token);
    if (it == g.pending.end()) return;  // timed out already, or a second reply
    fn = std::move(it->second.done);
    g.pending.erase(it);
  }
  auto reply = std::make_shared<sdk::Message>(std::move(m));
  post([fn = std::move(fn), reply] { fn(std::move(*reply)); }, Lane::First);
}

void Fleet::expire_requests() {
  const auto now = Clock::now();
  for (auto& g : groups_) {
    std::vector<ReplyHandler> expired;
    {
      std::lock_guard lk(g->pending_mu);
      for (auto it = g->pending.begin(); it != g->pending.end();) {
        if (it->second.deadline <= now) {
          expired.push_back(std::move(it->second.done));
          it = g->pending.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& fn : expired)
      post([fn = std::move(fn)] { fn(sdk::fail(sdk::ErrorCode::Timeout, "no reply in time")); }, Lane::First);
  }
  if (!quit_) post_at(now + 250ms, [this] { expire_requests(); }, Lane::Timer);
}

int Fleet::subscribe_replies() {
  const std::string run = common::sha256_hex(common::random_token(16)).substr(0, 16);
  for (auto& g : groups_) {
    g->inbox = "_INBOX.sim." + run + "." + std::to_string(g->index) + ".";
    Group* gp = g.get();
    auto sub = g->transport->subscribe(g->inbox + ">", "", [this, gp](sdk::Message&& m) { on_reply(*gp, std::move(m)); });
    if (!sub) {
      common::logger()->error("subscribe {}> failed: {}", g->inbox, sub.error().describe());
      return common::kExitUnreachable;
    }
    g->replies = std::move(*sub);
  }
  return 0;
}

void Fleet::timer_loop() {
  std::unique_lock lk(timer_mu_);
  while (!quit_) {
    if (timers_.empty()) {
      timer_cv_.wait(lk);
      continue;
    }
    if (timers_.top().at > Clock::now()) {
      // Woken early by a new (possibly earlier) entry or by quit: look again.
      timer_cv_.wait_until(lk, timers_.top().at);
      continue;
    }
    Timed t = std::move(const_cast<Timed&>(timers_.top()));
    timers_.pop();
    lk.unlock();
    // Heartbeats run here (a publish, no wait), so blocked workers never delay them.
    if (t.lane == Lane::Timer) t.fn();
    else post(std::move(t.fn), t.lane);
    lk.lock();
  }
}

void Fleet::worker_loop() {
  std::unique_lock lk(work_mu_);
  while (!quit_) {
    work_cv_.wait(lk, [&] { return quit_.load() || !work_.empty() || !work_first_.empty(); });
    if (quit_) break;
    auto& queue = work_first_.empty() ? work_ : work_first_;
    auto fn = std::move(queue.front());
    queue.pop_front();
    lk.unlock();
    fn();
    lk.lock();
  }
}

int Fleet::load_plugins() {
  // The providers are loaded only for their schemas (briefed, and the declarations are checked
  // against them); nothing is applied through them. Their state goes to a temporary folder.
  char tmpl[] = "/tmp/mesh-sim.XXXXXX";
  const char* tmp = ::mkdtemp(tmpl);
  if (!tmp) {
    common::logger()->error("cannot create a temporary folder for the providers' state");
    return common::kExitFailed;
  }
  tmp_dir_ = tmp;
  auto providers = host::load_providers({options_.plugin_dir}, options_.providers, nullptr, tmp_dir_);
  if (!providers) {
    common::logger()->error("{}", providers.error().describe());
    return common::kExitUsage;
  }
  providers_.emplace(std::move(*providers));
  schemas_ = sdk::Value::array();
  for (const auto& type : providers_->registry.types())
    if (const sdk::Provider* p = providers_->registry.find(type)) {
      sdk::Value s = host::schema_json(p->schema());
      s.set("name", type);
      schemas_.as_array().push_back(std::move(s));
    }
  return 0;
}

int Fleet::make_groups() {
  const std::size_t per = std::max<std::size_t>(1, options_.hosts_per_connection);
  for (std::size_t i = 0; i < options_.hosts; ++i) {
    auto h = std::make_unique<SimHost>();
    char name[96];
    std::snprintf(name, sizeof name, "%s%05zu", options_.prefix.c_str(), options_.first + i);
    h->name = name;
    if (!protocol::valid_node_name(h->name)) {
      common::logger()->error("--prefix: '{}' makes '{}', not a node name (a-z, 0-9, '-', '_')",
                              common::printable(options_.prefix), common::printable(h->name));
      return common::kExitUsage;
    }
    hosts_.push_back(std::move(h));
  }
  for (std::size_t i = 0; i < hosts_.size(); i += per) {
    auto g = std::make_unique<Group>();
    g->index = groups_.size();
    auto lp = loader::load_plugin(loader::PluginDirs{options_.plugin_dir}, "transport", "nats", {"tool", ""});
    if (!lp) {
      common::logger()->error("transport: {}", lp.error().describe());
      return common::kExitUsage;
    }
    g->plugin = std::move(*lp);
    g->transport = g->plugin.as<sdk::Transport>();
    if (!g->transport) {
      common::logger()->error("{} is not a transport", g->plugin.path);
      return common::kExitUsage;
    }
    sdk::Value cfg = sdk::Value::object();
    sdk::Value servers = sdk::Value::array();
    for (const auto& s : options_.servers) servers.as_array().push_back(sdk::Value(s));
    cfg.set("servers", std::move(servers));
    cfg.set("name", "mesh-sim-" + std::to_string(::getpid()) + "-" + std::to_string(g->index));
    if (!options_.user.empty()) cfg.set("user", options_.user);
    if (!options_.password_file.empty()) cfg.set("password_file", options_.password_file);
    // One thread per subscription (nats.c's default) would be one per simulated host: the
    // messages of every subscription go through nats.c's shared delivery pool instead.
    cfg.set("shared_delivery", true);
    if (auto ok = g->transport->configure(sdk::apply_defaults(g->transport->config_schema(), cfg)); !ok) {
      common::logger()->error("transport: {}", ok.error().describe());
      return common::kExitUsage;
    }
    for (std::size_t j = i; j < std::min(hosts_.size(), i + per); ++j) {
      hosts_[j]->group = g.get();
      g->hosts.push_back(hosts_[j].get());
    }
    Group* gp = g.get();
    g->transport->on_link_event([this, gp](sdk::LinkEvent e) { on_link(*gp, e); });
    groups_.push_back(std::move(g));
  }
  for (auto& g : groups_) {
    if (stop_) break;  // the rest never connect; run() sees the stop
    auto c = g->transport->connect(5s, /*retry_in_background=*/true);
    if (c) g->up = true;
    else common::logger()->warn("connection={} not connected yet reason=\"{}\" (retrying)", g->index, c.error().describe());
  }
  common::logger()->info("mesh-sim hosts={} connections={} hosts_per_connection={} workers={}", hosts_.size(),
                         groups_.size(), per, options_.workers);
  return 0;
}

void Fleet::on_link(Group& g, sdk::LinkEvent e) {
  if (e == sdk::LinkEvent::Connected || e == sdk::LinkEvent::Reconnected) {
    g.up = true;
    counters_.reconnects++;
    // Each host asks for its latest declaration and resends its reports after its own jitter,
    // so a fleet reconnecting at once does not ask at once.
    for (SimHost* h : g.hosts) {
      h->synced = false;
      const std::uint64_t epoch = ++h->sync_epoch;
      post_at(Clock::now() + random_ms(options_.reconnect_jitter), [this, h, epoch] { resync(*this, *h, epoch); });
    }
  } else {
    g.up = false;
    counters_.disconnects++;
  }
  common::logger()->info("link event={} connection={} hosts={}", sdk::to_string(e), g.index, g.hosts.size());
}

int Fleet::enrol_all() {
  auto log = common::logger();
  std::map<std::string, std::pair<host::Identity, bool>> known;
  if (!options_.state_file.empty()) {
    auto s = read_state_file(options_.state_file);
    if (!s) {
      log->error("{}", s.error().message);
      return common::kExitUsage;
    }
    known = std::move(*s);
  }
  std::vector<std::string> missing;
  for (auto& h : hosts_) {
    if (auto it = known.find(h->name); it != known.end()) {
      h->id = it->second.first;
      h->briefed = it->second.second;
      h->enrolled = true;
    } else {
      missing.push_back(h->name);
    }
  }
  if (!missing.empty()) {
    std::map<std::string, std::string> tokens;
    if (!options_.tokens_path.empty()) {
      auto t = read_tokens_file(options_.tokens_path);
      if (!t) {
        log->error("{}", t.error().message);
        return common::kExitUsage;
      }
      tokens = std::move(*t);
    } else if (!options_.identity_paths.empty()) {
      log->info("issuing tokens count={} identities={}", missing.size(), options_.identity_paths.size());
      auto t = issue_tokens(options_, missing, stop_);
      if (!t && stop_) return 0;
      if (!t) {
        log->error("cannot issue tokens: {}", t.error().describe());
        return common::exit_code_for(t.error().code);
      }
      tokens = std::move(*t);
    }
    for (const auto& n : missing)
      if (!tokens.count(n)) {
        log->error("no token for node {} (give --tokens FILE with a line for it, or --identity FILE to issue them)", n);
        return common::kExitUsage;
      }
    // Enrolment on the workers: each one blocks on its exchange.
    std::mutex mu;
    std::condition_variable cv;
    std::size_t done = 0;
    std::optional<sdk::Error> first_error;
    const std::set<std::string> wanted(missing.begin(), missing.end());
    const auto t0 = Clock::now();
    for (auto& hp : hosts_) {
      if (!wanted.count(hp->name)) continue;
      SimHost* h = hp.get();
      const std::string token = tokens[h->name];
      post([&, h, token] {
        // After a stop the connections are closed: the exchange fails at once (not counted).
        auto r = stop_ ? sdk::Result<void>(sdk::fail(sdk::ErrorCode::Cancelled, "stopped")) : enrol_host(*h, token);
        if (r) counters_.enrolled_now++;
        std::lock_guard lk(mu);
        if (!r && !first_error) first_error = r.error();
        ++done;
        cv.notify_all();
      });
    }
    wait_for_tasks(mu, cv, done, missing.size());
    if (stop_) {
      if (!options_.state_file.empty()) (void)write_state_file(options_.state_file, hosts_);
      return 0;
    }
    if (first_error) {
      log->error("enrolment failed: {}", first_error->describe());
      if (!options_.state_file.empty()) (void)write_state_file(options_.state_file, hosts_);
      return common::exit_code_for(first_error->code);
    }
    log->info("enrolled count={} ms={}", missing.size(),
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
  }
  // Every host not yet briefed briefs once (a node never briefed is skipped by deploys).
  std::mutex mu;
  std::condition_variable cv;
  std::size_t want = 0, done = 0;
  std::optional<sdk::Error> first_error;
  for (auto& hp : hosts_) {
    if (hp->briefed) continue;
    ++want;
    SimHost* h = hp.get();
    post([&, h] {
      auto r = stop_ ? sdk::Result<void>(sdk::fail(sdk::ErrorCode::Cancelled, "stopped")) : brief_host(*this, *h);
      if (r) counters_.briefed_now++;
      std::lock_guard lk(mu);
      if (!r && !first_error) first_error = r.error();
      ++done;
      cv.notify_all();
    });
  }
  wait_for_tasks(mu, cv, done, want);
  if (!options_.state_file.empty())
    if (auto w = write_state_file(options_.state_file, hosts_); !w) log->error("{}", w.error().describe());
  if (stop_) return 0;
  if (first_error) {
    log->error("briefing failed: {}", first_error->describe());
    return common::exit_code_for(first_error->code);
  }
  return 0;
}

void Fleet::subscribe_all() {
  for (auto& hp : hosts_) {
    SimHost* h = hp.get();
    // Declarations larger than the broker's limit (in parts) are not reassembled: the fleets
    // mesh-sim simulates get small ones. A part is refused as a declaration (no Mesh-Revision).
    auto sub = h->group->transport->subscribe(protocol::decl_subject(h->name), "",
                                              [this, h](sdk::Message&& m) { on_declaration(*this, *h, std::move(m)); });
    if (!sub) {
      common::logger()->error("subscribe {} failed: {}", protocol::decl_subject(h->name), sub.error().describe());
      continue;
    }
    h->sub = std::move(*sub);
  }
}

void Fleet::start_heartbeats() {
  const auto period = options_.heartbeat;
  const auto n = static_cast<std::int64_t>(hosts_.size());
  const auto now = Clock::now();
  for (std::int64_t i = 0; i < n; ++i) {
    SimHost* h = hosts_[static_cast<std::size_t>(i)].get();
    // Spread over one period; each heartbeat schedules the next (on the timer thread).
    auto first = now + std::chrono::milliseconds(period.count() * i / std::max<std::int64_t>(1, n));
    beats_.push_back(std::make_unique<std::function<void(Clock::time_point)>>());
    auto* beat = beats_.back().get();
    *beat = [this, h, period, beat](Clock::time_point at) {
      heartbeat(*this, *h);
      const auto next = std::max(at + period, Clock::now());
      post_at(next, [beat, next] { (*beat)(next); }, Lane::Timer);
    };
    post_at(first, [beat, first] { (*beat)(first); }, Lane::Timer);
  }
}

void Fleet::write_status() {
  if (options_.status_file.empty()) return;
  std::size_t enrolled = 0, connected = 0, synced = 0, up = 0, outbox = 0, failed_now = 0;
  std::uint64_t min_rev = UINT64_MAX, max_rev = 0;
  for (auto& g : groups_) up += g->up ? 1 : 0;
  for (auto& h : hosts_) {
    enrolled += h->enrolled ? 1 : 0;
    connected += h->group->up ? 1 : 0;
    synced += h->synced ? 1 : 0;
    std::lock_guard lk(h->mu);
    outbox += h->outbox.size();
    failed_now += h->state == 2 ? 1 : 0;
    min_rev = std::min(min_rev, h->applied_revision);
    max_rev = std::max(max_rev, h->applied_revision);
  }
  sdk::Value v = sdk::Value::object();
  auto set = [&](const char* k, std::uint64_t n) { v.set(k, static_cast<std::int64_t>(n)); };
  v.set("at_ms", common::now_ms());
  set("hosts", hosts_.size());
  set("enrolled", enrolled);
  set("connections", groups_.size());
  set("connections_up", up);
  set("hosts_connected", connected);
  set("hosts_synced", synced);
  set("hosts_failed", failed_now);
  set("reports_pending", outbox);
  set("applied_revision_min", hosts_.empty() ? 0 : min_rev);
  set("applied_revision_max", max_rev);
  set("heartbeats", counters_.heartbeats);
  set("heartbeats_unsent", counters_.heartbeats_unsent);
  set("declarations", counters_.declarations);
  set("refused", counters_.refused);
  set("applied", counters_.applied);
  set("failed", counters_.failed);
  set("superseded", counters_.superseded);
  set("reports_acked", counters_.reports_acked);
  set("latest_ok", counters_.latest_ok);
  set("latest_failed", counters_.latest_failed);
  set("report_retries", counters_.report_retries);
  set("enrolled_this_run", counters_.enrolled_now);
  set("briefed_this_run", counters_.briefed_now);
  set("reconnects", counters_.reconnects);
  set("disconnects", counters_.disconnects);
  if (auto w = common::write_file_atomic(options_.status_file, v.to_json() + "\n", 0644); !w)
    common::logger()->warn("status not written file={} reason=\"{}\"", options_.status_file, w.error().describe());
}

void Fleet::close_connections() {
  // nats.c's close releases every request blocked on the connection (it returns "transport is
  // closed"): no worker waits out its timeout. Each close is idempotent.
  for (auto& g : groups_)
    if (g->transport) g->transport->close();
}

void Fleet::wait_for_tasks(std::mutex& mu, std::condition_variable& cv, const std::size_t& done, std::size_t want) {
  std::unique_lock lk(mu);
  bool closed = false;
  while (done < want) {
    cv.wait_for(lk, 100ms);
    if (stop_ && !closed) {
      // A stop while hosts enrol or brief (each waiting up to 20 s for its reply, longer while
      // the broker is away and the connections reconnect): the connections close, every
      // exchange in flight fails at once and the tasks still queued skip theirs.
      closed = true;
      lk.unlock();
      common::logger()->info("stopping: closing the connections of the enrolment in progress");
      close_connections();
      lk.lock();
    }
  }
}

void Fleet::stop_all() {
  if (stopped_) return;
  stopped_ = true;
  quit_ = true;
  timer_cv_.notify_all();
  work_cv_.notify_all();
  // Closed before the workers are joined: a worker waiting for a reply returns at once.
  close_connections();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  beats_.clear();
  for (auto& h : hosts_) h->sub.reset();
  for (auto& g : groups_) g->replies.reset();
  if (!tmp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_dir_, ec);
  }
}

int Fleet::run() {
  if (int rc = load_plugins()) return rc;
  if (int rc = make_groups()) return rc;
  threads_.emplace_back([this] { timer_loop(); });
  for (std::size_t i = 0; i < std::max<std::size_t>(1, options_.workers); ++i)
    threads_.emplace_back([this] { worker_loop(); });
  // Enrolment needs the broker: wait for every connection (they retry in the background).
  const auto deadline = Clock::now() + 60s;
  while (!stop_ && Clock::now() < deadline &&
         !std::all_of(groups_.begin(), groups_.end(), [](const auto& g) { return g->up.load(); }))
    std::this_thread::sleep_for(50ms);
  if (stop_) return 0;
  if (!std::all_of(groups_.begin(), groups_.end(), [](const auto& g) { return g->up.load(); })) {
    common::logger()->error("the broker was not reachable within 60 s (servers {})",
                            options_.servers.empty() ? "-" : options_.servers.front());
    return common::kExitUnreachable;
  }
  if (int rc = enrol_all()) return rc;
  if (stop_) return 0;
  if (int rc = subscribe_replies()) return rc;
  post_at(Clock::now() + 250ms, [this] { expire_requests(); }, Lane::Timer);
  subscribe_all();
  // The first sync after start, spread like a reconnection's.
  for (auto& hp : hosts_) {
    SimHost* h = hp.get();
    const std::uint64_t epoch = ++h->sync_epoch;
    post_at(Clock::now() + random_ms(options_.reconnect_jitter), [this, h, epoch] { resync(*this, *h, epoch); });
  }
  start_heartbeats();
  common::logger()->info("mesh-sim running hosts={} heartbeat={}ms apply_time={}ms failure_rate={} "
                         "reconnect_jitter={}ms",
                         hosts_.size(), options_.heartbeat.count(), options_.apply_time.count(), options_.failure_rate,
                         options_.reconnect_jitter.count());
  const auto started = Clock::now();
  while (!stop_) {
    write_status();
    if (options_.duration.count() > 0 && Clock::now() - started >= options_.duration) break;
    for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(100ms);
  }
  write_status();
  common::logger()->info("mesh-sim stopping hosts={} applied={} failed={} heartbeats={}", hosts_.size(),
                         counters_.applied.load(), counters_.failed.load(), counters_.heartbeats.load());
  stop_all();
  return 0;
}

}  // namespace mesh::sim::detail
