// ControlPlane in-process, with a fake transport and store: heartbeats are batched, checks run
// in the order size → protocol version → JSON → fields, and stop() writes what is pending.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/common/nkey.h"
#include "mesh/common/fs.h"
#include "mesh/common/process.h"
#include "mesh/control/broker.h"
#include "mesh/control/control_plane.h"
#include "mesh/control/operations.h"
#include "heartbeat_body.h"  // core/control/src
#include "metrics.h"         // core/control/src
#include "rate_limit.h"      // core/control/src

namespace mesh::control {
namespace {

using namespace std::chrono_literals;
using sdk::ErrorCode;
using sdk::Message;

sdk::NullLogger null_logger;
const ControlKeys kKeys = control_keys_from_seed(std::string(32, 'k'));
const common::KeyPair kNodeKeys = common::keypair_from_seed(std::string(32, 'n'));
const common::KeyPair kAdminKeys = common::keypair_from_seed(std::string(32, 'a'));
const common::KeyPair kReaderKeys = common::keypair_from_seed(std::string(32, 'r'));
const sdk::HostContext kHost{MESH_SDK_ABI_MAJOR, MESH_SDK_ABI_MINOR, &null_logger, "", "tool"};

class FakeTransport final : public sdk::Transport {
 public:
  FakeTransport() : sdk::Transport(kHost) {}
  void on_link_event(sdk::LinkHandler) noexcept override {}
  bool connected() const noexcept override { return true; }
  std::size_t max_payload_bytes() const noexcept override { return 1024 * 1024; }
  void close() noexcept override {}

  /// Delivers `m` as the broker would, to the subscription whose pattern matches (of several
  /// subscriptions to that pattern, in the queue group, to the `which`-th, modulo their number),
  /// on the calling thread.
  void deliver(Message m, std::size_t which = 0) {
    sdk::MessageHandler h;
    {
      std::lock_guard lock(mu_);
      for (const auto& [pattern, handlers] : subs_)
        if (matches(pattern, m.subject) && !handlers.empty()) h = handlers[which % handlers.size()];
    }
    ASSERT_TRUE(h) << "no subscription for " << m.subject;
    h(std::move(m));
  }
  /// How many subscriptions were made to `pattern`.
  std::size_t subscriptions(const std::string& pattern) {
    std::lock_guard lock(mu_);
    auto it = subs_.find(pattern);
    return it == subs_.end() ? 0 : it->second.size();
  }
  std::vector<Message> published() {
    std::lock_guard lock(mu_);
    return published_;
  }
  std::vector<std::string> patterns() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [p, hs] : subs_) out.push_back(p);
    return out;
  }

 protected:
  sdk::Result<void> do_connect(std::chrono::milliseconds, bool) override { return {}; }
  sdk::Result<void> do_publish(const Message& m) override {
    std::lock_guard lock(mu_);
    published_.push_back(m);
    return {};
  }
  sdk::Result<std::unique_ptr<sdk::Subscription>> do_subscribe(const std::string& subject,
                                                               const std::string& queue,
                                                               sdk::MessageHandler h) override {
    // Every subject in the queue group but the instance's own (decision record 170).
    EXPECT_EQ(queue, subject.rfind(protocol::kInstanceSubjectPrefix, 0) == 0 ? "" : "mesh-control") << subject;
    std::lock_guard lock(mu_);
    subs_[subject].push_back(std::move(h));
    return std::make_unique<sdk::Subscription>();
  }
  sdk::Result<Message> do_request(const Message&, std::chrono::milliseconds) override {
    return sdk::fail(ErrorCode::Unsupported, "fake");
  }
  sdk::Result<void> do_flush(std::chrono::milliseconds) override { return {}; }

 private:
  static bool matches(const std::string& pattern, const std::string& subject) {
    if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".>") == 0)
      return subject.rfind(pattern.substr(0, pattern.size() - 1), 0) == 0;
    if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0) {
      const std::string prefix = pattern.substr(0, pattern.size() - 1);
      return subject.rfind(prefix, 0) == 0 && subject.find('.', prefix.size()) == std::string::npos &&
             subject.size() > prefix.size();
    }
    return pattern == subject;
  }
  std::mutex mu_;
  std::map<std::string, std::vector<sdk::MessageHandler>> subs_;
  std::vector<Message> published_;
};

/// Only touch() does anything; the rest says so.
class FakeStore final : public sdk::Store {
 public:
  FakeStore() : sdk::Store(kHost) {}
  std::vector<std::vector<sdk::ContactUpdate>> batches() {
    std::lock_guard lock(mu_);
    return batches_;
  }

#define MESH_FAKE(sig) \
  sig noexcept override { return sdk::fail(ErrorCode::Unsupported, "fake"); }
  MESH_FAKE(sdk::Result<void> open())
  MESH_FAKE(sdk::Result<std::vector<sdk::NodeRecord>> nodes())
  MESH_FAKE(sdk::Result<void> add_token(const sdk::TokenRecord&))
  MESH_FAKE(sdk::Result<std::vector<sdk::TokenRecord>> tokens(std::int64_t))
  MESH_FAKE(sdk::Result<void> revoke_token(const std::string&))
  MESH_FAKE(sdk::Result<sdk::NodeRecord> enrol(const std::string&, const std::string&, const std::string&, std::int64_t))
  MESH_FAKE(sdk::Result<void> set_briefing(const std::string&, const std::string&, bool))
  MESH_FAKE(sdk::Result<sdk::DeliveryRecord> declare(const std::vector<sdk::DeclarationWrite>&, std::int64_t, std::uint32_t))
  MESH_FAKE(sdk::Result<std::optional<sdk::RevisionRecord>> latest_revision(const std::string&))
  MESH_FAKE(sdk::Result<sdk::RevisionRecord> revision(const std::string&, std::uint64_t))
  MESH_FAKE(sdk::Result<std::vector<sdk::RevisionRecord>> history(const std::string&, std::uint32_t))
  MESH_FAKE(sdk::Result<sdk::DeliveryRecord> delivery(std::uint64_t))
  MESH_FAKE(sdk::Result<std::optional<sdk::DeliveryRecord>> latest_delivery())
  MESH_FAKE(sdk::Result<bool> record_apply(const sdk::ApplyReport&))
  MESH_FAKE(sdk::Result<std::optional<sdk::ApplyReport>> apply_report(const std::string&, std::uint64_t))
  MESH_FAKE(sdk::Result<std::vector<sdk::ApplyReport>> apply_reports(const std::string&, std::uint32_t))
  MESH_FAKE(sdk::Result<bool> record_drift(const sdk::DriftReport&))
  MESH_FAKE(sdk::Result<std::optional<sdk::DriftReport>> last_drift(const std::string&, bool))
  MESH_FAKE(sdk::Result<std::vector<std::string>> owned(const std::string&))
#undef MESH_FAKE

  /// Called (if set) at the start of every node() call, on the calling thread: set it before
  /// the first message is delivered.
  std::function<void()> on_node;

  /// Every node exists, with kNodeKeys at generation 1.
  sdk::Result<sdk::NodeRecord> node(const std::string& name) noexcept override {
    if (on_node) on_node();
    sdk::NodeRecord n;
    n.name = name;
    n.public_key = common::to_hex(kNodeKeys.public_key);
    n.generation = 1;
    return n;
  }

  sdk::Result<void> touch(const std::vector<sdk::ContactUpdate>& updates) noexcept override {
    std::lock_guard lock(mu_);
    batches_.push_back(updates);
    return {};
  }

  /// Requests are remembered in memory (no expiry: tests are short).
  sdk::Result<std::optional<sdk::RequestRecord>> remember_request(const sdk::RequestRecord& r,
                                                                  std::int64_t) noexcept override {
    std::lock_guard lock(mu_);
    auto [it, fresh] = requests_.emplace(r.signer + "\n" + r.nonce, r);
    if (fresh) {
      it->second.answer.reset();
      return std::optional<sdk::RequestRecord>();
    }
    return std::optional<sdk::RequestRecord>(it->second);
  }
  sdk::Result<void> answer_request(const std::string& signer, const std::string& nonce,
                                   const std::string& answer) noexcept override {
    std::lock_guard lock(mu_);
    auto it = requests_.find(signer + "\n" + nonce);
    if (it == requests_.end()) return sdk::fail(ErrorCode::NotFound, "not remembered");
    it->second.answer = answer;
    return {};
  }
  sdk::Result<sdk::DeliveryRecord> declare_answered(const std::vector<sdk::DeclarationWrite>&, std::int64_t,
                                                    std::uint32_t, const sdk::RequestAnswer&) noexcept override {
    return sdk::fail(ErrorCode::Unsupported, "fake");
  }

 private:
  std::mutex mu_;
  std::vector<std::vector<sdk::ContactUpdate>> batches_;
  std::map<std::string, sdk::RequestRecord> requests_;
};

Message heartbeat(const std::string& node, std::int64_t applied) {
  sdk::Value b = sdk::Value::object();
  b.set("node", node);
  b.set("at", "2026-11-29T07:00:00Z");
  b.set("applied_revision", applied);
  b.set("host_version", "0.1.0");
  b.set("state", "idle");
  auto m = protocol::make_message(protocol::heartbeat_subject(node), b.to_json());
  trust::mac_heartbeat(m, node,
                       trust::heartbeat_key(kKeys.heartbeat_master, node, 1, common::to_hex(kNodeKeys.public_key)),
                       common::now_ms() + applied);  // a newer timestamp each round
  return m;
}

// A heartbeat with the body `body` as given, MACed at `ts`, with a reply subject so that a
// refusal is answered (and can be read) rather than only logged.
Message raw_heartbeat(const std::string& node, const std::string& body, std::int64_t ts) {
  auto m = protocol::make_message(protocol::heartbeat_subject(node), body);
  m.reply = "_INBOX.test";
  trust::mac_heartbeat(m, node,
                       trust::heartbeat_key(kKeys.heartbeat_master, node, 1, common::to_hex(kNodeKeys.public_key)), ts);
  return m;
}

// Waits until `pred` holds, up to 2 s.
template <class P>
bool soon(P pred) {
  for (int i = 0; i < 400; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// A report-like request signed by the node.
Message node_signed(const std::string& subject, const std::string& body) {
  Message m = protocol::make_message(subject, body);
  m.reply = "_INBOX.test";
  trust::sign_report(m, kNodeKeys.secret_key);
  return m;
}

// An API request signed by an operator.
Message api(const std::string& op, const std::string& body, const std::string& who = "admin",
            const common::KeyPair& keys = kAdminKeys, std::int64_t at_ms = 0) {
  Message m = protocol::make_message(protocol::api_subject(op), body);
  m.reply = "_INBOX.test";
  trust::sign_request(m, trust::kHeaderOperator, who, keys.secret_key, at_ms ? at_ms : common::now_ms());
  return m;
}

Message request(const std::string& subject, const std::string& body, bool versioned = true) {
  Message m = versioned ? protocol::make_message(subject, body) : Message{subject, "", {}, body};
  m.reply = "_INBOX.test";
  return m;
}

ControlOptions with_trust(ControlOptions o) {
  o.keys = kKeys;
  o.operators = *OperatorRegistry::open("");
  EXPECT_TRUE(o.operators->add(OperatorRecord{"admin", "admin", kAdminKeys.public_key, 0, ""}));
  EXPECT_TRUE(o.operators->add(OperatorRecord{"viewer", "reader", kReaderKeys.public_key, 0, "admin"}));
  return o;
}

struct Fixture {
  explicit Fixture(ControlOptions o = {}) : control(store, transport, with_trust(o)) {
    control.start();
    EXPECT_TRUE(control.subscribe());
  }
  // The error reply to the request whose reply subject is _INBOX.test, waiting for it.
  sdk::Value error_reply() {
    auto m = next_reply();
    EXPECT_EQ(*m.header(protocol::kHeaderStatus), "error") << m.body;
    auto v = common::parse_json(m.body);
    return v && v->find("error") ? *v->find("error") : sdk::Value();
  }
  // The next reply on _INBOX.test not yet returned.
  Message next_reply() {
    for (int i = 0; i < 200; ++i) {
      auto all = transport->published();
      std::size_t seen = 0;
      for (const auto& m : all)
        if (m.subject == "_INBOX.test" && seen++ == replies_taken) {
          ++replies_taken;
          return m;
        }
      std::this_thread::sleep_for(5ms);
    }
    ADD_FAILURE() << "no reply";
    return Message{};
  }
  std::size_t replies_taken = 0;
  std::shared_ptr<FakeStore> store = std::make_shared<FakeStore>();
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  ControlPlane control;
};

TEST(ControlPlaneTest, SubscribesToEverySubjectWithTheQueueGroup) {
  Fixture f;
  auto p = f.transport->patterns();
  for (const char* s : {"mesh.api.>", "mesh.latest.*", "mesh.report.*", "mesh.drift.*", "mesh.heartbeat.*",
                        "mesh.recovery.*", "mesh.enrol"})
    EXPECT_NE(std::find(p.begin(), p.end(), s), p.end()) << s;
}

// Messages in parts with several instances (decision record 170): the answer to a part names
// this instance, and its own subject (outside the queue group) takes the rest of the whole, which
// is then handled as if it had come on the subject its proof covers.
TEST(ControlPlaneTest, APartsAnswerNamesTheInstanceWhoseOwnSubjectTakesTheRest) {
  ControlOptions o;
  o.instance_id = "0123456789abcdef0123456789abcdef";
  Fixture f(o);
  const std::string own = "mesh.instance." + o.instance_id + ".>";
  EXPECT_EQ(f.transport->subscriptions(own), 1u);

  // A signed API request (whitespace before the JSON pads it), in parts of 2 KiB.
  Message whole = api("token.list", std::string(9000, ' ') + "{}");
  auto list = protocol::parts::split(whole, 2048);
  ASSERT_TRUE(list);
  ASSERT_GE(list->size(), 4u);
  f.transport->deliver((*list)[0]);
  Message ack = f.next_reply();
  ASSERT_NE(ack.header(protocol::kHeaderStatus), nullptr);
  EXPECT_EQ(*ack.header(protocol::kHeaderStatus), protocol::parts::kStatusPart);
  ASSERT_NE(ack.header(protocol::kHeaderInstance), nullptr);
  EXPECT_EQ(*ack.header(protocol::kHeaderInstance), o.instance_id);
  for (std::size_t i = 1; i < list->size(); ++i) {
    Message p = (*list)[i];
    p.subject = protocol::instance_subject(o.instance_id, whole.subject);
    f.transport->deliver(std::move(p));
    Message r = f.next_reply();
    ASSERT_NE(r.header(protocol::kHeaderStatus), nullptr);
    if (i + 1 < list->size()) {
      EXPECT_EQ(*r.header(protocol::kHeaderStatus), protocol::parts::kStatusPart);
    } else {
      // The whole went through the checks of mesh.api.token.list: its signature (over that
      // subject) verified, and the fake store answers "unsupported" (past the trust checks).
      EXPECT_EQ(*r.header(protocol::kHeaderStatus), "error") << r.body;
      EXPECT_NE(r.body.find("\"unsupported\""), std::string::npos) << r.body;
    }
  }
  // A whole message on the instance's subject is handled as on its own subject too.
  Message single = api("token.list", "{}");
  single.subject = protocol::instance_subject(o.instance_id, single.subject);
  f.transport->deliver(std::move(single));
  EXPECT_EQ(f.error_reply().get_string("code"), "unsupported");
  // Another instance's subject is not this one's.
  EXPECT_EQ(f.transport->subscriptions("mesh.instance.ffffffffffffffffffffffffffffffff.>"), 0u);
}

TEST(ControlPlaneTest, HeartbeatsAreBatchedAndCoalescedPerNode) {
  ControlOptions o;
  o.heartbeat_flush = 100ms;
  Fixture f(o);
  for (int round = 0; round < 20; ++round)
    for (int n = 0; n < 50; ++n) f.transport->deliver(heartbeat("node-" + std::to_string(n), round));
  std::this_thread::sleep_for(400ms);
  auto batches = f.store->batches();
  ASSERT_FALSE(batches.empty());
  EXPECT_LE(batches.size(), 10u) << "1000 heartbeats, a handful of store writes";
  std::size_t total = 0;
  std::map<std::string, std::int64_t> seen;
  for (const auto& b : batches) {
    total += b.size();
    for (const auto& u : b) seen[u.node] = std::max<std::int64_t>(seen[u.node], u.at_ms);
  }
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_LT(total, 1000u) << "coalesced per node";
  EXPECT_EQ(batches.back().front().host_version, "0.1.0");
}

// Decision record 122: heartbeats come in on several subscriptions of the queue group, each with
// a thread of its own; every one is counted, and the order of a node's heartbeats is still
// enforced whichever subscription brings them.
TEST(ControlPlaneTest, HeartbeatsSpreadOverSeveralSubscriptionsAreAllCountedAndOrderStillHolds) {
  ControlOptions o;
  o.heartbeat_flush = 50ms;
  o.heartbeat_subscriptions = 3;
  Fixture f(o);
  ASSERT_EQ(f.transport->subscriptions("mesh.heartbeat.*"), 3u);
  EXPECT_EQ(f.transport->subscriptions("mesh.report.*"), 1u);
  constexpr int kNodes = 30, kRounds = 20;
  auto name = [](int n) { return "node-" + std::to_string(n); };
  const std::int64_t base = common::now_ms();
  // A first heartbeat of each node (its identity is read from the store by a worker).
  for (int n = 0; n < kNodes; ++n) f.transport->deliver(raw_heartbeat(name(n), R"({"node":")" + name(n) + R"("})", base));
  ASSERT_TRUE(soon([&] { return f.control.stats().heartbeats_verified == kNodes; }));
  // Then three threads, as three delivery threads: each node's heartbeats in order, each one on
  // the next subscription.
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int r = 1; r <= kRounds; ++r)
        for (int n = t; n < kNodes; n += 3) {
          const std::string node = name(n);
          f.transport->deliver(
              raw_heartbeat(node, R"({"node":")" + node + R"(","applied_revision":)" + std::to_string(r) + "}", base + r),
              static_cast<std::size_t>(r + n));
        }
    });
  for (auto& t : threads) t.join();
  ASSERT_TRUE(soon([&] { return f.control.stats().heartbeats_verified == kNodes * (kRounds + 1); }));
  EXPECT_EQ(f.control.stats().heartbeats_refused, 0u);
  EXPECT_EQ(f.control.stats().heartbeats_busy, 0u);
  ASSERT_TRUE(soon([&] { return f.control.stats().heartbeats_stored == kNodes * (kRounds + 1); }));
  std::map<std::string, std::uint64_t> applied;
  for (const auto& b : f.store->batches())
    for (const auto& u : b) applied[u.node] = std::max(applied[u.node], u.applied_revision);
  ASSERT_EQ(applied.size(), static_cast<std::size_t>(kNodes));
  for (const auto& [node, rev] : applied) EXPECT_EQ(rev, static_cast<std::uint64_t>(kRounds)) << node;

  // A node's older heartbeat, and the same one again, through another subscription: replays.
  const auto before = f.control.stats();
  f.transport->deliver(raw_heartbeat(name(0), R"({"node":"node-0"})", base + kRounds - 1), 1);
  f.transport->deliver(raw_heartbeat(name(0), R"({"node":"node-0"})", base + kRounds), 2);
  auto e = f.error_reply();
  EXPECT_EQ(e.get_string("path"), trust::kHeaderTimestamp) << e.to_json();
  EXPECT_NE(e.get_string("message").find("replayed"), std::string::npos) << e.to_json();
  EXPECT_NE(f.error_reply().get_string("message").find("replayed"), std::string::npos);
  f.transport->deliver(raw_heartbeat(name(0), R"({"node":"node-0"})", base + kRounds + 1), 0);
  const auto after = f.control.stats();
  EXPECT_EQ(after.heartbeats_refused - before.heartbeats_refused, 2u);
  EXPECT_EQ(after.heartbeats_verified - before.heartbeats_verified, 1u);
}

// The body of a heartbeat is read without an sdk::Value when it has the plain shape hosts send
// (decision record 122); every other shape goes the general way. Either way the same bodies are
// taken, with the same values, and the same are refused with the same field and message.
TEST(ControlPlaneTest, HeartbeatBodiesOfEveryShapeGetTheSameChecks) {
  ControlOptions o;
  o.heartbeat_flush = 20ms;
  Fixture f(o);
  std::int64_t ts = common::now_ms();
  f.transport->deliver(raw_heartbeat("web-01", R"({"node":"web-01"})", ts));
  ASSERT_TRUE(soon([&] { return f.control.stats().heartbeats_verified == 1; })) << "identity cached from here on";

  struct Refused {
    std::string body, code, path, message;
  };
  const std::vector<Refused> refused = {
      {R"({"node":"web-01","node":"web-01"})", "invalid_argument", "node", "duplicate key 'node'"},
      {R"({"node":"web-02","state":"idle"})", "invalid_argument", "node",
       "body names node 'web-02' on the subject of node 'web-01'"},
      {R"({"state":"idle"})", "invalid_argument", "node", "is required (a string)"},
      {R"({"node":1})", "invalid_argument", "node", "is required (a string)"},
      {"   ", "invalid_argument", "node", "is required (a string)"},
      {R"({"node":"web-01"} x)", "invalid_argument", "", "not valid JSON"},
      {R"({"node":"web-01","applied_revision":012})", "invalid_argument", "", "not valid JSON"},
      {R"({"node":"web-01","applied_revision":"5"})", "invalid_argument", "applied_revision", "must be an integer"},
      {R"({"node":"web-01","applied_revision":1.5})", "invalid_argument", "applied_revision", "must be an integer"},
      {R"({"node":"web-01","applied_revision":12345678901234567890})", "invalid_argument", "applied_revision",
       "must be an integer"},
      {R"({"node":"web-01","applied_revision":-1})", "invalid_argument", "applied_revision", "must be at least 0"},
      {R"({"node":"web-01","host_version":")" + std::string(65, 'v') + R"("})", "invalid_argument", "host_version",
       "is longer than 64 characters"},
      {R"({"node":"web-01","state":")" + std::string(33, 's') + R"("})", "invalid_argument", "state",
       "is longer than 32 characters"},
      {R"({"node":"web-01","at":"yesterday"})", "invalid_argument", "at", "'yesterday' is not an RFC 3339 UTC time"},
      {R"({"node":"web-01","at":5})", "invalid_argument", "at", "must be a string"},
  };
  for (const auto& r : refused) {
    const auto before = f.control.stats();
    f.transport->deliver(raw_heartbeat("web-01", r.body, ++ts));
    auto e = f.error_reply();
    EXPECT_EQ(e.get_string("code"), r.code) << r.body << " → " << e.to_json();
    EXPECT_EQ(e.get_string("path"), r.path) << r.body << " → " << e.to_json();
    EXPECT_NE(e.get_string("message").find(r.message), std::string::npos) << r.body << " → " << e.to_json();
    EXPECT_EQ(f.control.stats().heartbeats_verified, before.heartbeats_verified) << r.body;
  }

  struct Taken {
    std::string body;
    std::uint64_t applied;
    std::string version, state;
  };
  const std::vector<Taken> taken = {
      {R"({"node":"web-01","at":"2026-11-29T07:00:00Z","applied_revision":12,"host_version":"0.4.1","state":"idle"})",
       12, "0.4.1", "idle"},
      {" {\n \"node\" : \"web-01\" ,\t\"applied_revision\" : 0 , \"state\":\"applying\" }\r\n", 0, "", "applying"},
      {R"({"node":"web\u002d01","state":"escaped"})", 0, "", "escaped"},
      {R"({"node":"web-01","state":null,"host_version":"1.0","extra":{"a":[1,null,true]}})", 0, "1.0", ""},
      {R"({"node":"web-01","applied_revision":null,"state":"hé"})", 0, "", "hé"},
      {R"({"node":"web-01","applied_revision":999999999999999999,"other":"x"})", 999999999999999999u, "", ""},
  };
  for (const auto& t : taken) {
    const auto before = f.control.stats();
    f.transport->deliver(raw_heartbeat("web-01", t.body, ++ts));
    ASSERT_TRUE(soon([&] { return f.control.stats().heartbeats_stored == before.heartbeats_verified + 1; }))
        << t.body;
    const auto last = f.store->batches().back().back();
    EXPECT_EQ(last.node, "web-01") << t.body;
    EXPECT_EQ(last.applied_revision, t.applied) << t.body;
    EXPECT_EQ(last.host_version, t.version) << t.body;
    EXPECT_EQ(last.host_state, t.state) << t.body;
    EXPECT_EQ(last.heartbeat_ms, ts) << t.body;
  }
}

// A heartbeat refused because its queue is full is counted as a heartbeat refused as busy (the
// refusal used to see the message after it was moved into the queue's item: no subject, counted
// under kind "other").
TEST(ControlPlaneTest, HeartbeatsRefusedAsBusyAreCountedAsHeartbeats) {
  ControlOptions o;
  o.workers = 1;
  o.queue_limit = 1;
  o.metrics = std::make_shared<detail::ControlMetrics>();
  Fixture f(o);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> reads{0};
  f.store->on_node = [&] {
    ++reads;
    released.wait();
  };
  f.transport->deliver(heartbeat("a-01", 1));  // the one worker takes it and waits in Store::node
  ASSERT_TRUE(soon([&] { return reads.load() == 1; }));
  f.transport->deliver(heartbeat("b-01", 1));  // queued: the queue is full
  f.transport->deliver(heartbeat("c-01", 1));  // refused as busy
  EXPECT_EQ(f.control.stats().heartbeats_busy, 1u);
  release.set_value();
  ASSERT_TRUE(soon([&] { return f.control.stats().heartbeats_verified == 2; }));
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, o.metrics->registry()->Collect());
  EXPECT_NE(text.str().find("mesh_control_heartbeats_refused_total{reason=\"busy\"} 1\n"), std::string::npos)
      << text.str();
  EXPECT_EQ(text.str().find("kind=\"other\""), std::string::npos) << text.str();
  f.control.stop();
  f.store->on_node = nullptr;
}

TEST(ControlPlaneTest, PlainHeartbeatBodiesAreReadAndEverythingElseIsLeftToTheGeneralParser) {
  detail::PlainHeartbeat b;
  ASSERT_TRUE(detail::parse_plain_heartbeat(
      R"({"node":"web-01","at":"2026-11-29T07:00:00Z","applied_revision":7,"host_version":"0.4.1","state":"idle"})", &b));
  EXPECT_EQ(b.node, "web-01");
  EXPECT_EQ(b.at, "2026-11-29T07:00:00Z");
  EXPECT_EQ(b.applied_revision, 7);
  EXPECT_EQ(b.host_version, "0.4.1");
  EXPECT_EQ(b.state, "idle");
  detail::PlainHeartbeat empty;
  ASSERT_TRUE(detail::parse_plain_heartbeat(" {} ", &empty));
  EXPECT_FALSE(empty.node);
  for (const char* other : {"", "  ", "[]", "{", "{\"node\":\"a\",}", "{\"node\":\"a\"}{}", "{\"node\":\"a\"} x",
                            "{\"node\":\"a\",\"node\":\"a\"}", "{\"node\":\"a\\u0062\"}", "{\"node\":\"\xc3\xa9\"}",
                            "{\"node\":null}", "{\"node\":true}", "{\"a\":-1}", "{\"a\":1.5}", "{\"a\":1e3}", "{\"a\":01}",
                            "{\"a\":1234567890123456789}", "{\"a\":{}}", "{\"a\":[]}", "{\"node\":5}",
                            "{\"applied_revision\":\"5\"}", "{\"state\":\"tab\there\"}", "\xef\xbb\xbf{}",
                            "{\"k0\":0,\"k1\":0,\"k2\":0,\"k3\":0,\"k4\":0,\"k5\":0,\"k6\":0,\"k7\":0,\"k8\":0,"
                            "\"k9\":0,\"ka\":0,\"kb\":0,\"kc\":0,\"kd\":0,\"ke\":0,\"kf\":0,\"kg\":0}"}) {
    detail::PlainHeartbeat untouched;
    untouched.state = std::string_view("kept");
    EXPECT_FALSE(detail::parse_plain_heartbeat(other, &untouched)) << other;
    EXPECT_EQ(untouched.state, "kept") << other;
  }
}

TEST(ControlPlaneTest, StopWritesPendingHeartbeats) {
  ControlOptions o;
  o.heartbeat_flush = 500ms;
  Fixture f(o);
  f.transport->deliver(heartbeat("web-01", 7));
  std::this_thread::sleep_for(50ms);  // handled by a worker, not yet flushed
  const auto start = std::chrono::steady_clock::now();
  f.control.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  auto batches = f.store->batches();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].size(), 1u);
  EXPECT_EQ(batches[0][0].node, "web-01");
  EXPECT_EQ(batches[0][0].applied_revision, 7u);
}

TEST(ControlPlaneTest, SizeIsCheckedBeforeTheProtocolVersion) {
  ControlOptions o;
  o.max_message = 2048;
  Fixture f(o);
  f.transport->deliver(request("mesh.api.nodes", std::string(3000, ' '), /*versioned=*/false));
  auto e = f.error_reply();
  EXPECT_EQ(e.get_string("code"), "invalid_argument");
  EXPECT_NE(e.get_string("message").find("over the limit of 2048 bytes"), std::string::npos) << e.to_json();
}

TEST(ControlPlaneTest, VersionIsCheckedBeforeTheJson) {
  Fixture f;
  f.transport->deliver(request("mesh.api.nodes", "{not json", /*versioned=*/false));
  EXPECT_EQ(f.error_reply().get_string("code"), "unsupported");
}

TEST(ControlPlaneTest, JsonIsCheckedBeforeTheFields) {
  Fixture f;
  f.transport->deliver(node_signed("mesh.report.web-01", R"({"node": "web-01", "node": "x"})"));
  auto e = f.error_reply();
  EXPECT_EQ(e.get_string("code"), "invalid_argument");
  EXPECT_NE(e.get_string("message").find("duplicate key"), std::string::npos) << e.to_json();
}

TEST(ControlPlaneTest, FieldErrorsNameTheField) {
  Fixture f;
  f.transport->deliver(node_signed("mesh.report.web-01", R"({"node": "web-01", "revision": 0, "outcome": "applied"})"));
  auto e = f.error_reply();
  EXPECT_EQ(e.get_string("path"), "revision") << e.to_json();
}

TEST(ControlPlaneTest, UnknownOperationAndBadSubject) {
  Fixture f;
  f.transport->deliver(api("frobnicate", "{}"));
  EXPECT_EQ(f.error_reply().get_string("code"), "unsupported");
  Fixture g;
  g.transport->deliver(request("mesh.report.Bad_Node", "{}"));
  EXPECT_EQ(g.error_reply().get_string("path"), "subject");
}

TEST(ControlPlaneTrustTest, UnsignedUnknownForgedExpiredAndReplayedApiRequestsAreRefused) {
  Fixture f;
  f.transport->deliver(request("mesh.api.nodes", "{}"));
  auto e = f.error_reply();
  EXPECT_EQ(e.get_string("code"), "permission_denied");
  EXPECT_NE(e.get_string("message").find("unsigned request"), std::string::npos) << e.to_json();

  f.transport->deliver(api("nodes", "{}", "mallory", common::generate_keypair()));
  e = f.error_reply();
  EXPECT_NE(e.get_string("message").find("unknown operator 'mallory'"), std::string::npos) << e.to_json();

  // Signed by admin's name with another key; then one byte of the body changed after signing.
  f.transport->deliver(api("nodes", "{}", "admin", kReaderKeys));
  EXPECT_NE(f.error_reply().get_string("message").find("does not verify"), std::string::npos);
  Message altered = api("token.list", "{}");
  altered.body = "{ }";
  f.transport->deliver(altered);
  EXPECT_NE(f.error_reply().get_string("message").find("does not verify"), std::string::npos);

  f.transport->deliver(api("token.list", "{}", "admin", kAdminKeys, common::now_ms() - 61'000));
  e = f.error_reply();
  EXPECT_NE(e.get_string("message").find("expired"), std::string::npos) << e.to_json();
  f.transport->deliver(api("token.list", "{}", "admin", kAdminKeys, common::now_ms() + 61'000));
  EXPECT_NE(f.error_reply().get_string("message").find("expired"), std::string::npos);

  // The same signed request twice: the second is a replay. (token.list reaches the fake store,
  // which answers "unsupported": past the trust checks.)
  Message once = api("token.list", "{}");
  f.transport->deliver(once);
  EXPECT_EQ(f.error_reply().get_string("code"), "unsupported");
  f.transport->deliver(once);
  e = f.error_reply();
  EXPECT_NE(e.get_string("message").find("replayed"), std::string::npos) << e.to_json();
}

TEST(ControlPlaneTrustTest, ANodeFillingItsReplayQuotaMakesOnlyItsOwnRequestsBusy) {
  ControlOptions o;
  o.replay_capacity = 5;  // nonces per signer within the window
  Fixture f(o);
  auto latest = [] {
    Message m = protocol::make_message(protocol::latest_subject("web-01"));
    m.reply = "_INBOX.test";
    trust::sign_request(m, protocol::kHeaderNode, "web-01", kNodeKeys.secret_key, common::now_ms());
    return m;
  };
  for (int i = 0; i < 5; ++i) {
    f.transport->deliver(latest());
    EXPECT_EQ(f.error_reply().get_string("code"), "unsupported") << "past the trust checks (the fake store answers)";
  }
  f.transport->deliver(latest());
  auto e = f.error_reply();
  EXPECT_EQ(e.get_string("code"), "transient") << e.to_json();
  EXPECT_NE(e.get_string("message").find("busy for node web-01"), std::string::npos) << e.to_json();
  // Operators (and other nodes) have their own quotas.
  f.transport->deliver(api("token.list", "{}"));
  EXPECT_EQ(f.error_reply().get_string("code"), "unsupported") << "the operator is not busy";
}

TEST(ControlPlaneTrustTest, RolesAreEnforcedNamingTheRoleNeeded) {
  Fixture f;
  f.transport->deliver(api("token.issue", R"({"node":"web-01"})", "viewer", kReaderKeys));
  auto e = f.error_reply();
  EXPECT_EQ(e.get_string("code"), "permission_denied");
  EXPECT_NE(e.get_string("message").find("operator viewer (role reader) may not run token.issue: it needs role admin"),
            std::string::npos)
      << e.to_json();
  f.transport->deliver(api("declare", R"({"node":"web-01","declaration":"{}"})", "viewer", kReaderKeys));
  EXPECT_NE(f.error_reply().get_string("message").find("it needs role deployer or higher"), std::string::npos);
  f.transport->deliver(api("nodes", "{}", "viewer", kReaderKeys));
  EXPECT_EQ(f.error_reply().get_string("code"), "unsupported") << "allowed: the fake store answers";
  EXPECT_TRUE(role_allows("admin", "operator.add"));
  EXPECT_FALSE(role_allows("deployer", "operator.add"));
  EXPECT_TRUE(role_allows("deployer", "rollback"));
  EXPECT_FALSE(role_allows("reader", "rollback"));
  EXPECT_FALSE(role_allows("root", "nodes"));
}

// The table of operations is the only list (decision record 46): every row is routed to a
// handler, needs its row's role, and treats a repeated nonce as its row's `mutating` says.
sdk::Value error_of(const Message& reply) {
  auto v = common::parse_json(reply.body);
  return v && v->find("error") ? *v->find("error") : sdk::Value();
}

TEST(ControlPlaneOperationsTest, EveryOperationOfTheTableIsRouted) {
  Fixture f;
  for (const auto& op : api_operations()) {
    f.transport->deliver(api(std::string(op.name), "{}"));
    Message r = f.next_reply();
    if (*r.header(protocol::kHeaderStatus) == "ok") continue;  // operator.list needs nothing
    sdk::Value e = error_of(r);
    EXPECT_NE(e.get_string("path"), "operation") << op.name << ": " << r.body;
    EXPECT_EQ(e.get_string("message").find("unknown operation"), std::string::npos) << op.name << ": " << r.body;
    EXPECT_NE(e.get_string("code"), "permission_denied") << op.name << ": admin may run it: " << r.body;
  }
}

TEST(ControlPlaneOperationsTest, EachOperationNeedsTheRoleOfItsRow) {
  Fixture f;
  for (const auto& op : api_operations()) {
    f.transport->deliver(api(std::string(op.name), "{}", "viewer", kReaderKeys));
    Message r = f.next_reply();
    sdk::Value e = error_of(r);
    const bool refused = e.get_string("message").find("may not run " + std::string(op.name)) != std::string::npos;
    EXPECT_EQ(refused, op.role != Role::reader) << op.name << ": " << r.body;
    if (refused) {
      EXPECT_EQ(e.get_string("code"), "permission_denied");
      EXPECT_NE(e.get_string("message").find("it needs role " + std::string(to_string(op.role))), std::string::npos)
          << r.body;
    }
  }
}

TEST(ControlPlaneOperationsTest, OnlyIdempotentRowsAnswerARepeatedNonceTheRestCallItAReplay) {
  Fixture f;
  for (const auto& op : api_operations()) {
    const Message once = api(std::string(op.name), "{}");
    f.transport->deliver(once);
    const Message first = f.next_reply();
    f.transport->deliver(once);
    const Message second = f.next_reply();
    sdk::Value e = error_of(second);
    if (op.mutating == Mutating::idempotent) {
      // Refused the first time ({} names no node): the stored refusal is the answer again.
      EXPECT_EQ(*second.header(protocol::kHeaderStatus), *first.header(protocol::kHeaderStatus)) << op.name;
      EXPECT_EQ(e.to_json(), error_of(first).to_json()) << op.name;
      EXPECT_EQ(e.get_string("message").find("replayed"), std::string::npos) << op.name << ": " << second.body;
    } else {
      EXPECT_NE(e.get_string("message").find("replayed"), std::string::npos) << op.name << ": " << second.body;
    }
  }
}

TEST(ControlPlaneTrustTest, HeartbeatsWithoutAValidMacOrReplayedDoNotCount) {
  ControlOptions o;
  o.heartbeat_flush = 50ms;
  Fixture f(o);
  Message good = heartbeat("web-01", 1);
  Message unsigned_hb = good;
  unsigned_hb.headers.clear();
  unsigned_hb.set_header(protocol::kHeaderProtocol, protocol::kVersion);
  Message forged = good;
  forged.body[forged.body.size() - 2] ^= 1;
  f.transport->deliver(unsigned_hb);
  f.transport->deliver(forged);
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(f.store->batches().empty()) << "no MAC, or a wrong one: not contact";
  f.transport->deliver(good);
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(f.store->batches().size(), 1u);
  f.transport->deliver(good);  // the same heartbeat again
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(f.store->batches().size(), 1u) << "a replayed heartbeat is not contact";
  f.transport->deliver(heartbeat("web-01", 2));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(f.store->batches().size(), 2u);
}

TEST(ControlPlaneTrustTest, ReplayCacheIsBoundedAndForgets) {
  trust::ReplayCache c(2, 1000ms);
  EXPECT_EQ(c.check_and_remember("a", 0), trust::ReplayCache::Outcome::Fresh);
  EXPECT_EQ(c.check_and_remember("a", 10), trust::ReplayCache::Outcome::Replay);
  EXPECT_EQ(c.check_and_remember("b", 20), trust::ReplayCache::Outcome::Fresh);
  EXPECT_EQ(c.check_and_remember("c", 30), trust::ReplayCache::Outcome::Full);
  EXPECT_EQ(c.check_and_remember("c", 1001), trust::ReplayCache::Outcome::Fresh) << "a expired";
  EXPECT_EQ(c.check_and_remember("a", 1002), trust::ReplayCache::Outcome::Full) << "b and c held";
  EXPECT_EQ(c.check_and_remember("a", 1021), trust::ReplayCache::Outcome::Fresh) << "b expired";
  EXPECT_LE(c.size(), 2u);
}

TEST(BrokerAuthorizationTest, EachNodeMayPublishOnlyUnderItsOwnName) {
  sdk::NodeRecord a;
  a.name = "web-01";
  a.generation = 1;
  a.public_key = common::to_hex(kNodeKeys.public_key);
  BrokerSettings b;
  b.authorization_file = "/tmp/auth.conf";
  auto text = authorization_text(b, kKeys, {a});
  ASSERT_TRUE(text) << text.error().message;
  const std::string node_public = common::nkey_user_public(
      common::keypair_from_seed(node_broker_seed(kKeys, "web-01", 1, a.public_key)).public_key);
  EXPECT_EQ(node_public.size(), 56u);
  EXPECT_EQ(node_public[0], 'U');
  EXPECT_NE(text->find("{nkey: \"" + node_public + "\", permissions: {publish: {allow: [\"mesh.report.web-01\", "
                       "\"mesh.drift.web-01\", \"mesh.heartbeat.web-01\", \"mesh.latest.web-01\", "
                       "\"mesh.recovery.web-01\", \"mesh.content.web-01\", \"mesh.briefing.web-01\", "
                       "\"mesh.instance.*.mesh.report.web-01\", \"mesh.instance.*.mesh.drift.web-01\", "
                       "\"mesh.instance.*.mesh.briefing.web-01\"]}, subscribe: {allow: "
                       "[\"mesh.decl.web-01\", \"_INBOX.node.web-01.>\"]}}}"),
            std::string::npos)
      << *text;
  EXPECT_EQ(text->find("mesh-enrol"), std::string::npos) << "no enrolment user without its password file";
  // Re-enrolment: another generation, another nkey.
  EXPECT_NE(node_broker_seed(kKeys, "web-01", 2, a.public_key), node_broker_seed(kKeys, "web-01", 1, a.public_key));
  EXPECT_EQ(common::nkey_user_seed(std::string(32, 'x')).substr(0, 2), "SU");
}

// Decision record 188: a file mesh-control wrote gives back its control plane user and each node
// (nkey, name, generation); written again from them, with another stream's rights, it keeps every
// node's permissions exactly. Anything else is refused, never copied.
TEST(BrokerAuthorizationTest, AFileItWroteParsesBackToItsNodesAndIsWrittenAgainForAnotherStream) {
  sdk::NodeRecord a;
  a.name = "web-01";
  a.generation = 3;
  a.public_key = common::to_hex(kNodeKeys.public_key);
  sdk::NodeRecord b = a;
  b.name = "db_2";
  b.generation = 1;
  BrokerSettings broker;
  broker.authorization_file = "/tmp/auth.conf";
  broker.store_stream = "MESH_STORE";
  auto text = authorization_text(broker, kKeys, {a, b});
  ASSERT_TRUE(text) << text.error().message;
  auto parsed = parse_authorization(*text);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->control_nkey, control_broker_public(kKeys));
  ASSERT_EQ(parsed->nodes.size(), 2u);
  const auto expected = broker_nodes(kKeys, {a, b});
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(parsed->nodes[i].nkey, expected[i].nkey);
    EXPECT_EQ(parsed->nodes[i].name, expected[i].name);
    EXPECT_EQ(parsed->nodes[i].generation, expected[i].generation);
  }
  broker.store_stream = "MESH_R1";
  auto again = authorization_text_for(broker, kKeys, parsed->nodes);
  ASSERT_TRUE(again);
  auto direct = authorization_text(broker, kKeys, {a, b});
  ASSERT_TRUE(direct);
  EXPECT_EQ(*again, *direct) << "the same file as from the store's nodes";
  EXPECT_NE(again->find("$JS.API.STREAM.INFO.MESH_R1"), std::string::npos);
  EXPECT_EQ(again->find("MESH_STORE"), std::string::npos);

  for (const std::string& bad : {std::string("authorization { users = [] }\n"),
                                *text + "    {nkey: \"UBAD\", permissions: {}}  # node x generation 1\n",
                                [&] {
                                  std::string t = *text;
                                  t.replace(t.find("# node web-01 generation 3"), 26, "# node WEB generation 3");
                                  return t;
                                }()}) {
    EXPECT_FALSE(parse_authorization(bad)) << bad;
  }
}

// Decision record 186: a byte budget lets a node write while it is not in debt, charges each
// message in full (one larger than the burst passes once), and says how long until it may again.
TEST(StoreBudgetTest, ABudgetInBytesGoesIntoDebtAndRefillsAtItsRate) {
  detail::RateLimiter budget(1000, 4000, 10);
  const auto t0 = std::chrono::steady_clock::now();
  double wait = -1;
  EXPECT_TRUE(budget.spend("web-01", 3000, t0, &wait));
  EXPECT_TRUE(budget.spend("web-01", 10'000, t0, &wait)) << "1000 left: passes, into debt";
  EXPECT_FALSE(budget.spend("web-01", 1, t0, &wait));
  EXPECT_NEAR(wait, 9.0, 0.01) << "9000 bytes of debt at 1000/s";
  EXPECT_FALSE(budget.spend("web-01", 1, t0 + std::chrono::seconds(8), &wait));
  EXPECT_NEAR(wait, 1.0, 0.01);
  EXPECT_TRUE(budget.spend("web-01", 1, t0 + std::chrono::milliseconds(9100), &wait));
  EXPECT_TRUE(budget.spend("web-02", 4000, t0, &wait)) << "each node its own";
  // Refilled buckets are dropped when the table is full: memory stays bounded.
  for (int i = 0; i < 50; ++i) budget.spend("n" + std::to_string(i), 1, t0 + std::chrono::hours(1));
  EXPECT_LE(budget.size(), 10u);
}

// The operators' user reads `mesh`'s replies on _INBOX.> but never the control plane's own inboxes
// (decision record 185), nor may it publish there.
TEST(BrokerAuthorizationTest, TheOperatorsUserIsDeniedTheControlPlanesInboxesBothWays) {
  BrokerSettings broker;
  broker.authorization_file = "/tmp/auth.conf";
  broker.operator_password_file = ::testing::TempDir() + "/operator-pw-185";
  { std::ofstream(broker.operator_password_file) << "secret\n"; }
  auto text = authorization_text(broker, kKeys, {});
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_NE(text->find("{user: \"mesh-operator\", password: \"secret\", permissions: {publish: {allow: "
                       "[\"mesh.api.>\", \"mesh.instance.*.mesh.api.>\"], deny: [\"_INBOX.control.>\"]}, "
                       "subscribe: {allow: [\"_INBOX.>\"], deny: [\"_INBOX.node.>\", \"_INBOX.enrol.>\", "
                       "\"_INBOX.control.>\"]}}}"),
            std::string::npos)
      << *text;
}

// A pid file naming a process that is not a nats-server (a stale file whose number another
// program took) is not signalled: SIGHUP would end most programs (newuser finding 17).
TEST(BrokerAuthorizationTest, APidFileNamingAnotherProgramIsNotSignalled) {
  char tmpl[] = "/tmp/mesh-broker-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 200 && !common::process_runs(child, "sleep"); ++i) ::usleep(10'000);
  BrokerSettings b;
  b.authorization_file = dir + "/auth.conf";
  b.pid_files = {dir + "/n0.pid"};
  ASSERT_TRUE(common::write_file_atomic(b.pid_files[0], std::to_string(child), 0644));
  auto updated = update_broker(b, kKeys, {});
  ASSERT_TRUE(updated) << updated.error().message;
  EXPECT_FALSE(*updated) << "nothing was signalled";
  ::usleep(100'000);
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, WNOHANG), 0) << "the sleep still runs";
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mesh::control
