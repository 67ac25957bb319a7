// ControlPlane in-process, with a fake transport and store: heartbeats are batched, checks run
// in the order size → protocol version → JSON → fields, and stop() writes what is pending.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/common/nkey.h"
#include "mesh/control/broker.h"
#include "mesh/control/control_plane.h"
#include "mesh/control/operations.h"

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

  /// Delivers `m` as the broker would, to the subscription whose pattern matches.
  void deliver(Message m) {
    sdk::MessageHandler h;
    {
      std::lock_guard lock(mu_);
      for (const auto& [pattern, handler] : subs_)
        if (matches(pattern, m.subject)) h = handler;
    }
    ASSERT_TRUE(h) << "no subscription for " << m.subject;
    h(std::move(m));
  }
  std::vector<Message> published() {
    std::lock_guard lock(mu_);
    return published_;
  }
  std::vector<std::string> patterns() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [p, h] : subs_) out.push_back(p);
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
    EXPECT_EQ(queue, "mesh-control");
    std::lock_guard lock(mu_);
    subs_[subject] = std::move(h);
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
  std::map<std::string, sdk::MessageHandler> subs_;
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

  /// Every node exists, with kNodeKeys at generation 1.
  sdk::Result<sdk::NodeRecord> node(const std::string& name) noexcept override {
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
                       "\"mesh.recovery.web-01\", \"mesh.content.web-01\", \"mesh.briefing.web-01\"]}, subscribe: {allow: "
                       "[\"mesh.decl.web-01\", \"_INBOX.node.web-01.>\"]}}}"),
            std::string::npos)
      << *text;
  EXPECT_EQ(text->find("mesh-enrol"), std::string::npos) << "no enrolment user without its password file";
  // Re-enrolment: another generation, another nkey.
  EXPECT_NE(node_broker_seed(kKeys, "web-01", 2, a.public_key), node_broker_seed(kKeys, "web-01", 1, a.public_key));
  EXPECT_EQ(common::nkey_user_seed(std::string(32, 'x')).substr(0, 2), "SU");
}

}  // namespace
}  // namespace mesh::control
