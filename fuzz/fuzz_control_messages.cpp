// The control plane's message handling, fed exactly as the transport's subscription callback
// feeds it: a mesh::control::ControlPlane (one worker) over an in-process transport that keeps
// the handlers ControlPlane::subscribe() registers, and an in-memory store that answers every
// call with plausible records (or, per input, NotFound / Unavailable), so that the handlers run
// past the store into their field checks, replies and pushes. The control plane has its keys and
// two operators (an admin and a reader); the harness signs each message as its rightful sender
// would (operator request signature, node request signature, node report signature, heartbeat
// MAC; docs/protocol.md "Trust") unless the input asks for no proof or a broken one, so that the
// fuzzed bodies reach the handlers behind the checks. Messages go through the real queue and
// worker; after each one a sentinel request (no protocol header: refused at once) is queued
// behind it, and its reply marks the fuzz message as handled.
//
// Input: byte 0 picks the subject (docs/protocol.md "Subjects": every API operation, each host
// subject for node web-01, mesh.enrol; or a subject taken from the first line of the input);
// byte 1: bit 0 a publish (no reply subject) instead of a request; bits 1-2 the Mesh-Protocol
// header: 1.0 / absent / from the input / 1.0 plus extra headers from the input ("Name: value"
// lines up to an empty line); bits 3-4 the store: answers / NotFound / Unavailable; bits 5-6 the
// proof: signed (0, 1) / none (2) / signed, then the body altered (3); bit 7 API requests signed
// by the reader instead of the admin. The rest is the body.
// Invariants besides "no crash, leak or UB": every reply has a Mesh-Status of ok, error or none
// and a body that parses as JSON; no error reply says `internal` (an exception escaped into
// Service::handle, or a store answer the handler could not use); pushed declarations and
// replies to mesh.latest parse and carry a control-key signature that verifies, as do ok
// replies to mesh.enrol.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_support.h"
#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/control/control_plane.h"
#include "mesh/control/trust.h"

using namespace mesh;
using namespace std::chrono_literals;
using sdk::ErrorCode;
using sdk::Message;

namespace {

constexpr std::size_t kMaxPayload = 2048;  // small, so that the size check is reachable
constexpr const char* kSentinelReply = "_INBOX.fuzz.sentinel";

sdk::NullLogger g_null_logger;
const sdk::HostContext g_host{MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, &g_null_logger, "", "control"};

// Fixed keys: the control plane's, every node's (the store gives all nodes this key, generation
// 1), and the two operators'.
const control::ControlKeys& control_keys() {
  static const control::ControlKeys k = control::control_keys_from_seed(std::string(32, '\x01'));
  return k;
}
const common::KeyPair& node_keys() {
  static const common::KeyPair k = common::keypair_from_seed(std::string(32, '\x02'));
  return k;
}
const common::KeyPair& admin_keys() {
  static const common::KeyPair k = common::keypair_from_seed(std::string(32, '\x03'));
  return k;
}
const common::KeyPair& reader_keys() {
  static const common::KeyPair k = common::keypair_from_seed(std::string(32, '\x04'));
  return k;
}

void check_reply(const Message& m);

class FuzzTransport final : public sdk::Transport {
 public:
  FuzzTransport() : sdk::Transport(g_host) {}
  void on_link_event(sdk::LinkHandler) noexcept override {}
  bool connected() const noexcept override { return true; }
  std::size_t max_payload_bytes() const noexcept override { return kMaxPayload; }
  void close() noexcept override {}

  /// Hands `m` to the handler of the subscription matching its subject, as the broker would.
  /// Returns false when no subscription matches (the broker would drop it).
  bool deliver(Message m) {
    sdk::MessageHandler h;
    {
      std::lock_guard lock(mu_);
      for (const auto& [pattern, handler] : subs_)
        if (matches(pattern, m.subject)) h = handler;
    }
    if (!h) return false;
    h(std::move(m));
    return true;
  }
  /// Queues the sentinel behind everything delivered so far and waits for its reply.
  void drain() {
    std::unique_lock lock(mu_);
    sentinel_seen_ = false;
    lock.unlock();
    Message s{"mesh.api.nodes", kSentinelReply, {}, "{}"};
    if (!deliver(std::move(s))) fuzz::finding("no subscription for mesh.api.nodes");
    lock.lock();
    if (!cv_.wait_for(lock, 20s, [&] { return sentinel_seen_; }))
      fuzz::finding("the control plane did not answer the sentinel within 20 s");
  }

 protected:
  sdk::Result<void> do_connect(std::chrono::milliseconds, bool) override { return {}; }
  sdk::Result<void> do_publish(const Message& m) override {
    if (m.body.size() > kMaxPayload)
      return sdk::fail(ErrorCode::InvalidArgument, "body over max_payload");  // as NATS does
    if (m.subject == kSentinelReply) {
      std::lock_guard lock(mu_);
      sentinel_seen_ = true;
      cv_.notify_all();
      return {};
    }
    check_reply(m);
    return {};
  }
  sdk::Result<std::unique_ptr<sdk::Subscription>> do_subscribe(const std::string& subject,
                                                               const std::string&,
                                                               sdk::MessageHandler h) override {
    std::lock_guard lock(mu_);
    subs_[subject] = std::move(h);
    return std::make_unique<sdk::Subscription>();
  }
  sdk::Result<Message> do_request(const Message&, std::chrono::milliseconds) override {
    return sdk::fail(ErrorCode::Unavailable, "no responders");
  }
  sdk::Result<void> do_flush(std::chrono::milliseconds) override { return {}; }

 private:
  // NATS subject matching for the patterns the control plane uses ("a.b.*", "a.>", literal).
  static bool matches(const std::string& pattern, const std::string& subject) {
    if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".>") == 0) {
      const std::string prefix = pattern.substr(0, pattern.size() - 1);
      return subject.size() > prefix.size() && subject.rfind(prefix, 0) == 0;
    }
    if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0) {
      const std::string prefix = pattern.substr(0, pattern.size() - 1);
      return subject.size() > prefix.size() && subject.rfind(prefix, 0) == 0 &&
             subject.find('.', prefix.size()) == std::string::npos;
    }
    return pattern == subject;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool sentinel_seen_ = false;
  std::map<std::string, sdk::MessageHandler> subs_;
};

enum class StoreMode { Answers, NotFound, Unavailable };
std::atomic<StoreMode> g_mode{StoreMode::Answers};
// What the message being handled asked for (its replies are checked accordingly).
enum class RequestKind { Other, Latest, Enrol };
std::atomic<RequestKind> g_request_kind{RequestKind::Other};

/// An in-memory store that answers like a store holding enrolled nodes with history: enough for
/// every handler to get past the store. Thread-safe (the worker and the heartbeat flusher call it).
class FuzzStore final : public sdk::Store {
 public:
  FuzzStore() : sdk::Store(g_host) {}

  sdk::Result<void> open() noexcept override { return {}; }
  sdk::Result<std::vector<sdk::NodeRecord>> nodes() noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    return std::vector<sdk::NodeRecord>{record("web-01"), record("db-01")};
  }
  sdk::Result<sdk::NodeRecord> node(const std::string& name) noexcept override {
    if (auto e = refuse(true)) return sdk::fail(*e);
    // Only the harness's nodes are enrolled, as in a real store: answering for every fuzzed name
    // would fill the control plane's per-node caches without bound, and each input that grows the
    // heap makes libFuzzer run a full leak scan (40x fewer executions).
    if (name != "web-01" && name != "db-01" && name != "new-01")
      return sdk::fail(ErrorCode::NotFound, "node " + name + " is not enrolled");
    return record(name);
  }
  sdk::Result<void> add_token(const sdk::TokenRecord&) noexcept override {
    if (g_mode == StoreMode::NotFound) return sdk::fail(ErrorCode::AlreadyExists, "token id taken");
    if (auto e = refuse()) return sdk::fail(*e);
    return {};
  }
  sdk::Result<std::vector<sdk::TokenRecord>> tokens(std::int64_t now_ms) noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    sdk::TokenRecord t{"abc123", "web-01", std::string(64, 'a'), now_ms - 1000, now_ms + 1000, true, {}, false};
    return std::vector<sdk::TokenRecord>{t};
  }
  sdk::Result<void> revoke_token(const std::string&) noexcept override {
    if (auto e = refuse(true)) return sdk::fail(*e);
    return {};
  }
  sdk::Result<sdk::NodeRecord> enrol(const std::string&, const std::string& node, const std::string&,
                                     std::int64_t) noexcept override {
    if (g_mode == StoreMode::NotFound) return sdk::fail(ErrorCode::PermissionDenied, "token unknown");
    if (auto e = refuse()) return sdk::fail(*e);
    return record(node);
  }
  sdk::Result<void> set_briefing(const std::string&, const std::string&, bool) noexcept override {
    if (auto e = refuse(true)) return sdk::fail(*e);
    return {};
  }
  sdk::Result<sdk::DeliveryRecord> declare(const std::vector<sdk::DeclarationWrite>& writes,
                                           std::int64_t now_ms, std::uint32_t) noexcept override {
    if (auto e = refuse(true)) return sdk::fail(*e);
    std::lock_guard lock(mu_);
    sdk::DeliveryRecord d{++deliveries_, now_ms, {}};
    for (const auto& w : writes) {
      const std::uint64_t rev = ++revisions_;
      std::string body;
      try {
        body = w.render(rev);
      } catch (...) {
        return sdk::fail(ErrorCode::Internal, "render threw");
      }
      last_ = sdk::RevisionRecord{w.node, rev, now_ms, d.id, body, std::string(64, '0')};
      d.targets.push_back({w.node, rev});
    }
    return d;
  }
  sdk::Result<std::optional<sdk::RevisionRecord>> latest_revision(const std::string& node) noexcept override {
    if (g_mode == StoreMode::NotFound) return std::optional<sdk::RevisionRecord>();
    if (auto e = refuse()) return sdk::fail(*e);
    return std::optional<sdk::RevisionRecord>(stored(node, 0));
  }
  sdk::Result<sdk::RevisionRecord> revision(const std::string& node, std::uint64_t rev) noexcept override {
    if (auto e = refuse(true)) return sdk::fail(*e);
    return stored(node, rev);
  }
  sdk::Result<std::vector<sdk::RevisionRecord>> history(const std::string& node, std::uint32_t limit) noexcept override {
    if (auto e = refuse(true)) return sdk::fail(*e);
    std::vector<sdk::RevisionRecord> out;
    for (std::uint32_t i = 0; i < std::min<std::uint32_t>(limit, 3); ++i) out.push_back(stored(node, 3 - i));
    return out;
  }
  sdk::Result<sdk::DeliveryRecord> delivery(std::uint64_t id) noexcept override {
    if (auto e = refuse(true)) return sdk::fail(*e);
    return sdk::DeliveryRecord{id, 1'700'000'000'000, {{"web-01", 3}, {"db-01", 2}, {"new-01", 1}}};
  }
  sdk::Result<std::optional<sdk::DeliveryRecord>> latest_delivery() noexcept override {
    if (g_mode == StoreMode::NotFound) return std::optional<sdk::DeliveryRecord>();
    if (auto e = refuse()) return sdk::fail(*e);
    return std::optional<sdk::DeliveryRecord>(
        sdk::DeliveryRecord{9, 1'700'000'000'000, {{"web-01", 3}, {"db-01", 2}}});
  }
  sdk::Result<bool> record_apply(const sdk::ApplyReport& r) noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    return r.revision % 2 == 0;
  }
  sdk::Result<std::optional<sdk::ApplyReport>> apply_report(const std::string& node,
                                                            std::uint64_t revision) noexcept override {
    if (g_mode == StoreMode::NotFound || node == "new-01") return std::optional<sdk::ApplyReport>();
    if (auto e = refuse()) return sdk::fail(*e);
    return std::optional<sdk::ApplyReport>(report(node, revision, node == "db-01" ? "failed" : "applied"));
  }
  sdk::Result<std::vector<sdk::ApplyReport>> apply_reports(const std::string& node, std::uint32_t) noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    return std::vector<sdk::ApplyReport>{report(node, 3, "applied"), report(node, 2, "failed")};
  }
  sdk::Result<bool> record_drift(const sdk::DriftReport& d) noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    return !d.items.empty();
  }
  sdk::Result<std::optional<sdk::DriftReport>> last_drift(const std::string& node, bool) noexcept override {
    if (g_mode == StoreMode::NotFound) return std::optional<sdk::DriftReport>();
    if (auto e = refuse()) return sdk::fail(*e);
    return std::optional<sdk::DriftReport>(sdk::DriftReport{
        node, "scan-1", 3, 1'700'000'000'000, {{"file:/etc/motd", "properties.content differs", "repaired"}}});
  }
  sdk::Result<void> touch(const std::vector<sdk::ContactUpdate>& updates) noexcept override {
    for (const auto& u : updates)
      if (!protocol::valid_node_name(u.node)) std::abort();  // only checked nodes get this far
    if (auto e = refuse()) return sdk::fail(*e);
    return {};
  }
  sdk::Result<std::vector<std::string>> owned(const std::string&) noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    return std::vector<std::string>{"file:/etc/motd", "file:/etc/issue"};
  }
  // Every request is fresh (a fuzzer's inputs are independent), or the store is unavailable.
  sdk::Result<std::optional<sdk::RequestRecord>> remember_request(const sdk::RequestRecord&,
                                                                  std::int64_t) noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    return std::optional<sdk::RequestRecord>();
  }
  sdk::Result<void> answer_request(const std::string&, const std::string&, const std::string&) noexcept override {
    if (auto e = refuse()) return sdk::fail(*e);
    return {};
  }
  sdk::Result<sdk::DeliveryRecord> declare_answered(const std::vector<sdk::DeclarationWrite>& writes, std::int64_t now_ms,
                                                    std::uint32_t retain, const sdk::RequestAnswer& answer) noexcept override {
    auto d = declare(writes, now_ms, retain);
    if (d && answer.render) (void)answer.render(*d);
    return d;
  }

 private:
  static std::optional<sdk::Error> refuse(bool not_found = false) {
    switch (g_mode.load()) {
      case StoreMode::Answers: return std::nullopt;
      case StoreMode::NotFound:
        if (not_found) return sdk::Error{ErrorCode::NotFound, "not found", {}};
        return std::nullopt;
      case StoreMode::Unavailable: return sdk::Error{ErrorCode::Unavailable, "store unavailable", {}};
    }
    return std::nullopt;
  }
  static sdk::NodeRecord record(const std::string& name) {
    sdk::NodeRecord n;
    n.name = name;
    n.enrolled_at_ms = 1'700'000'000'000;
    n.last_contact_ms = 1'700'000'100'000;
    n.applied_revision = 3;
    n.last_outcome = "applied";
    n.public_key = common::to_hex(node_keys().public_key);
    n.host_version = "0.1.0";
    n.host_state = "idle";
    n.briefing = R"({"node":"web-01","at_ms":1700000000000,"outcome":"pass","lines":[{"check":"disk","outcome":"pass","detail":""}]})";
    n.generation = 1;
    return n;
  }
  static sdk::ApplyReport report(const std::string& node, std::uint64_t rev, const std::string& outcome) {
    sdk::ApplyReport r;
    r.node = node;
    r.revision = rev;
    r.at_ms = 1'700'000'050'000;
    r.received_at_ms = r.at_ms;
    r.generation = 1;
    r.outcome = outcome;
    r.resource = outcome == "failed" ? "file:/etc/motd" : "";
    r.reason = outcome == "failed" ? "open /etc/motd: Permission denied" : "";
    r.owned = {"file:/etc/motd"};
    return r;
  }
  sdk::RevisionRecord stored(const std::string& node, std::uint64_t rev) {
    std::lock_guard lock(mu_);
    if (last_ && last_->node == node && (rev == 0 || rev == last_->revision)) return *last_;
    const std::uint64_t r = rev == 0 ? 3 : rev;
    return sdk::RevisionRecord{
        node, r, 1'700'000'000'000, 1,
        R"({"node":")" + node + R"(","revision":)" + std::to_string(r) +
            R"(,"resources":[{"type":"file","id":"/etc/motd","properties":{"content":"hi\n"}}]})",
        std::string(64, '0')};
  }

  std::mutex mu_;
  std::uint64_t deliveries_ = 0;
  std::uint64_t revisions_ = 100;
  std::optional<sdk::RevisionRecord> last_;
};

// Every reply and push the control plane sends: the status, the body as JSON, no `internal`.
// A declaration as the host checks it (daemon.cpp check_declaration_message): addressed, with a
// revision, signed by the control key.
void check_declaration(const Message& m) {
  const std::string* node = m.header(protocol::kHeaderNode);
  const std::string* rev = m.header(protocol::kHeaderRevision);
  if (!node || !rev) fuzz::finding("a declaration without Mesh-Node or Mesh-Revision", m.subject);
  const std::uint64_t revision = std::strtoull(rev->c_str(), nullptr, 10);
  if (revision == 0) fuzz::finding("a declaration with revision 0", *rev);
  if (auto ok = trust::verify_declaration(m, *node, revision, control_keys().signing.public_key); !ok)
    fuzz::finding("a declaration whose signature the host would refuse", ok.error().describe());
  auto v = common::parse_json(m.body, common::JsonLimits{kMaxPayload, 32});
  if (!v) fuzz::finding("a declaration that does not parse", v.error().describe() + "\n" + m.body);
}

// MESH_FUZZ_TRACE=1 prints every reply and push (to see what an input reaches).
const bool g_trace = std::getenv("MESH_FUZZ_TRACE") != nullptr;

void check_reply(const Message& m) {
  if (g_trace) {
    const std::string* st = m.header(protocol::kHeaderStatus);
    std::fprintf(stderr, "-> %s [%s] %.300s\n", m.subject.c_str(), st ? st->c_str() : "-", m.body.c_str());
  }
  if (m.header(protocol::parts::kHeaderParts)) {
    // A push or reply larger than max_payload goes in parts: checked as its receiver checks
    // it, once reassembled (docs/protocol.md "Messages in parts").
    static std::mutex parts_mu;
    static protocol::parts::Reassembler parts{protocol::parts::Limits{}};
    std::optional<Message> done;
    {
      std::lock_guard lock(parts_mu);
      auto whole = parts.add(m, common::now_ms());
      if (!whole) fuzz::finding("a message in parts its receiver could not reassemble", whole.error().describe());
      done = std::move(*whole);
    }
    if (done) check_reply(*done);
    return;
  }
  if (m.subject.rfind("mesh.decl.", 0) == 0) return check_declaration(m);
  if (!protocol::check_version(m)) fuzz::finding("a reply without the protocol header", m.subject);
  const std::string* status = m.header(protocol::kHeaderStatus);
  if (!status || (*status != "ok" && *status != "error" && *status != "none"))
    fuzz::finding("a reply without a valid Mesh-Status", m.subject);
  if (*status == "none") return;
  auto v = common::parse_json(m.body, common::JsonLimits{64 << 20, 64});
  if (!v) fuzz::finding("a reply body does not parse", v.error().describe() + "\n" + m.body);
  if (*status == "ok" && g_request_kind == RequestKind::Latest) check_declaration(m);
  if (*status == "ok" && g_request_kind == RequestKind::Enrol) {
    const std::string* sig = m.header(trust::kHeaderSignature);
    auto raw = sig ? common::from_hex(*sig) : sdk::Result<std::string>(sdk::fail(ErrorCode::NotFound, ""));
    if (!raw || !common::verify(trust::enrol_reply_text(v->get_string("node"), m.body), *raw,
                                control_keys().signing.public_key))
      fuzz::finding("an enrolment reply without a valid control-key signature", m.body);
  }
  if (*status == "error") {
    const sdk::Value* e = v->find("error");
    if (!e || !e->is_object()) fuzz::finding("an error reply without an error object", m.body);
    const std::string code = e->get_string("code");
    if (code == "internal") fuzz::finding("an error reply says internal", m.body);
    if (code.empty() || e->get_string("message").empty()) fuzz::finding("an error reply without code or message", m.body);
  }
}

const char* const kSubjects[] = {
    "mesh.api.token.issue", "mesh.api.token.list", "mesh.api.token.revoke", "mesh.api.nodes",
    "mesh.api.node.show",   "mesh.api.declare",    "mesh.api.report",       "mesh.api.history",
    "mesh.api.rollback",    "mesh.latest.web-01",  "mesh.report.web-01",    "mesh.drift.web-01",
    "mesh.heartbeat.web-01", "mesh.recovery.web-01", "mesh.enrol",
    "mesh.briefing.web-01", "mesh.api.operator.add", "mesh.api.operator.list",
    "mesh.api.operator.remove",
};
constexpr std::size_t kSubjectCount = sizeof kSubjects / sizeof kSubjects[0];

std::shared_ptr<control::OperatorRegistry> g_operators;

/// The two operators the harness signs as; operator.add/remove inputs may change the registry,
/// so they are put back (and additions beyond a few dropped) before each input.
void keep_operators() {
  for (const auto& [name, role, keys] :
       {std::tuple{"fuzz-admin", "admin", &admin_keys()}, std::tuple{"fuzz-reader", "reader", &reader_keys()}}) {
    auto have = g_operators->find(name);
    if (have && have->public_key == keys->public_key && have->role == role) continue;
    if (have) (void)g_operators->remove(name);
    if (auto ok = g_operators->add(control::OperatorRecord{name, role, keys->public_key, 0, ""}); !ok)
      fuzz::finding("operator add", ok.error().describe());
  }
  auto all = g_operators->list();
  if (all.size() > 8)
    for (const auto& op : all)
      if (op.name != "fuzz-admin" && op.name != "fuzz-reader") (void)g_operators->remove(op.name);
}

/// Adds the proof the rightful sender of `m` would add (docs/protocol.md "Trust").
void sign_as_sender(Message& m, bool as_reader) {
  const std::string& s = m.subject;
  auto starts = [&](std::string_view p) { return s.rfind(p, 0) == 0; };
  const std::string node(protocol::subject_node(s));
  const std::int64_t now = common::now_ms();
  if (starts("mesh.api.")) {
    trust::sign_request(m, trust::kHeaderOperator, as_reader ? "fuzz-reader" : "fuzz-admin",
                        as_reader ? reader_keys().secret_key : admin_keys().secret_key, now);
  } else if (starts("mesh.latest.") || starts("mesh.recovery.")) {
    trust::sign_request(m, protocol::kHeaderNode, node, node_keys().secret_key, now);
  } else if (starts("mesh.heartbeat.")) {
    const std::string key = trust::heartbeat_key(control_keys().heartbeat_master, node, 1,
                                                 common::to_hex(node_keys().public_key));
    trust::mac_heartbeat(m, node, key, now);
  } else if (starts("mesh.report.") || starts("mesh.drift.") || starts("mesh.briefing.")) {
    trust::sign_report(m, node_keys().secret_key);
  }
}

struct Plane {
  std::shared_ptr<FuzzStore> store = std::make_shared<FuzzStore>();
  std::shared_ptr<FuzzTransport> transport = std::make_shared<FuzzTransport>();
  std::unique_ptr<control::ControlPlane> control;
};
Plane* g_plane = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  g_plane = new Plane;
  control::ControlOptions o;
  o.workers = 1;  // one worker: messages are handled in queue order, so the sentinel works
  o.heartbeat_flush = 20ms;
  o.retain = 5;
  o.keys = control_keys();
  auto ops = control::OperatorRegistry::open("");  // in memory
  if (!ops) fuzz::finding("operator registry", ops.error().describe());
  o.operators = *ops;
  // A short window keeps the replay cache small at thousands of signed requests a second.
  o.clock_tolerance = 2s;
  o.replay_capacity = 1'000'000;
  g_operators = *ops;
  keep_operators();
  g_plane->control = std::make_unique<control::ControlPlane>(g_plane->store, g_plane->transport, o);
  g_plane->control->start();
  if (auto ok = g_plane->control->subscribe(); !ok) fuzz::finding("subscribe", ok.error().describe());
  // Stop the threads before static destructors run (this runs before those registered earlier).
  std::atexit([] {
    g_plane->control->stop();
    delete g_plane;
    g_plane = nullptr;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in(data, size);
  const std::uint8_t pick = in.byte();
  const std::uint8_t flags = in.byte();

  Message m;
  const std::size_t s = pick % (kSubjectCount + 1);
  m.subject = s < kSubjectCount ? std::string(kSubjects[s]) : std::string(in.field());
  if (!(flags & 1)) m.reply = "_INBOX.fuzz.reply";
  switch ((flags >> 1) & 3) {
    case 0: m.headers.emplace_back(protocol::kHeaderProtocol, protocol::kVersion); break;
    case 1: break;
    case 2: m.headers.emplace_back(protocol::kHeaderProtocol, std::string(in.field())); break;
    case 3:
      m.headers.emplace_back(protocol::kHeaderProtocol, protocol::kVersion);
      for (std::string_view line = in.field(); !line.empty(); line = in.field()) {
        const auto colon = line.find(':');
        std::string_view name = line.substr(0, colon);
        std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        m.headers.emplace_back(std::string(name), std::string(value));
      }
      break;
  }
  switch ((flags >> 3) & 3) {
    case 1: g_mode = StoreMode::NotFound; break;
    case 2: g_mode = StoreMode::Unavailable; break;
    default: g_mode = StoreMode::Answers; break;
  }
  m.body = std::string(in.rest());
  switch ((flags >> 5) & 3) {
    case 2: break;  // no proof beyond what the input's headers carry
    case 3:
      sign_as_sender(m, flags & 0x80);
      m.body += m.body.empty() ? "{}" : " ";  // what was signed is not what arrives
      break;
    default: sign_as_sender(m, flags & 0x80); break;
  }
  keep_operators();
  g_request_kind = m.subject.rfind("mesh.latest.", 0) == 0 ? RequestKind::Latest
                   : m.subject == protocol::kEnrolSubject   ? RequestKind::Enrol
                                                            : RequestKind::Other;

  if (m.subject == kSentinelReply) return 0;  // would be taken for the sentinel's reply
  if (!g_plane->transport->deliver(std::move(m))) return 0;  // no subscription: never delivered
  g_plane->transport->drain();
  return 0;
}
