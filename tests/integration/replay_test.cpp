// Replays and floods against real processes (nats-server, mesh-control, mesh-host, mesh): a
// control-plane restart forgets no nonce and no heartbeat order; a declare or rollback retried
// with the same signed bytes writes once and answers the same; a flood under one node's name
// starves neither operators nor other nodes, and the control plane's log stays bounded.
#include <atomic>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;

class ReplayTest : public MeshTest {
 public:
  /// Stops mesh-control (SIGTERM: it flushes what it holds) and starts it again on the same state.
  void restart_control() {
    ASSERT_EQ(control_->stop(SIGTERM, 10000), 0) << control_->stderr_text();
    start_control();
  }
  sdk::Value node_json(const std::string& node) {
    auto r = mesh({"node", "show", node, "--output", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json(r.out);
  }
  std::size_t revisions(const std::string& node) {
    auto r = mesh({"history", node, "--output", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json(r.out).as_array().size();
  }
  /// A declare request signed with the first admin's identity, as `mesh declare` sends it.
  sdk::Message signed_declare(const std::string& node, const std::string& text) {
    auto id = trust::load_operator_identity(admin_identity());
    EXPECT_TRUE(id) << id.error().message;
    sdk::Value params = sdk::Value::object();
    params.set("node", node);
    params.set("declaration", text);
    auto m = protocol::make_message(protocol::api_subject("declare"), params.to_json());
    trust::sign_request(m, trust::kHeaderOperator, id->name, id->secret_key, common::now_ms());
    return m;
  }
};

std::string status_of(const sdk::Message& m) {
  const std::string* s = m.header(protocol::kHeaderStatus);
  return s ? *s : "";
}

TEST_F(ReplayTest, ARetriedDeclareReturnsTheFirstAnswerAndWritesOneRevisionAlsoAfterARestart) {
  add_host("idem-01");
  BrokerClient raw(nats_->url());
  ASSERT_TRUE(raw.connected) << raw.connected.error().message;
  const sdk::Message request = signed_declare("idem-01", file_declaration({{(dir() / "i.txt").string(), "i\n"}}));

  auto first = raw->request(request, 10s);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_EQ(status_of(*first), "ok") << first->body;
  const sdk::Value answer = json(first->body);
  ASSERT_GT(answer.get_int("delivery", 0), 0) << first->body;
  EXPECT_EQ(answer.get_int("revision", 0), 1) << first->body;

  // The same signed bytes again (a retry after a lost answer): the same answer, nothing written.
  auto again = raw->request(request, 10s);
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_EQ(status_of(*again), "ok") << again->body;
  EXPECT_EQ(json(again->body).get_int("delivery", 0), answer.get_int("delivery", 0)) << again->body;
  EXPECT_EQ(json(again->body).get_int("revision", 0), 1) << again->body;
  EXPECT_EQ(revisions("idem-01"), 1u) << "the retry wrote nothing";

  // After a restart of mesh-control: still the first answer, still one revision.
  restart_control();
  BrokerClient raw2(nats_->url());
  ASSERT_TRUE(raw2.connected);
  auto after = raw2->request(request, 10s);
  ASSERT_TRUE(after) << after.error().message;
  ASSERT_EQ(status_of(*after), "ok") << after->body;
  EXPECT_EQ(json(after->body).get_int("delivery", 0), answer.get_int("delivery", 0)) << after->body;
  EXPECT_EQ(revisions("idem-01"), 1u) << "the retry after a restart wrote nothing";
  EXPECT_TRUE(control_->wait_for_output("retried: answered as the first time", 5000)) << control_->stderr_text();
}

TEST_F(ReplayTest, ASignedRollbackOrListingReplayedAfterAControlPlaneRestartChangesNothing) {
  add_host("rb-01");
  declare("rb-01", file_declaration({{(dir() / "a.txt").string(), "1\n"}}));
  declare("rb-01", file_declaration({{(dir() / "a.txt").string(), "2\n"}}));
  BrokerClient raw(nats_->url());
  ASSERT_TRUE(raw.connected);
  raw.capture("mesh.api.>");
  auto rb = mesh({"rollback", "rb-01", "--to", "1", "--output", "json"});
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(json(rb.out).get_int("revision", 0), 3) << rb.out;
  ASSERT_EQ(mesh({"token", "list"}).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return raw.captured().size() >= 2; }, 3000));
  sdk::Message rollback, listing;
  for (const auto& m : raw.captured()) {
    if (m.subject == "mesh.api.rollback") rollback = m;
    if (m.subject == "mesh.api.token.list") listing = m;
  }
  ASSERT_FALSE(rollback.subject.empty());
  ASSERT_FALSE(listing.subject.empty());
  ASSERT_EQ(revisions("rb-01"), 3u);

  restart_control();
  BrokerClient attacker(nats_->url());
  ASSERT_TRUE(attacker.connected);
  rollback.reply.clear();
  listing.reply.clear();
  auto replayed = attacker->request(rollback, 10s);
  ASSERT_TRUE(replayed) << replayed.error().message;
  // A rollback is idempotent on its nonce: the replay gets the first answer and writes nothing.
  if (status_of(*replayed) == "ok") {
    EXPECT_EQ(json(replayed->body).get_int("revision", 0), 3) << replayed->body;
  }
  EXPECT_EQ(revisions("rb-01"), 3u) << "the replayed rollback wrote no revision";
  auto listed = attacker->request(listing, 10s);
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(status_of(*listed), "error") << listed->body;
  EXPECT_NE(listed->body.find("replayed"), std::string::npos) << listed->body;
}

TEST_F(ReplayTest, CapturedHeartbeatsOfAStoppedNodeDoNotCountAfterAControlPlaneRestart) {
  Host& h = add_host("hb-01", "1s");
  BrokerClient raw(nats_->url());
  ASSERT_TRUE(raw.connected);
  raw.capture(protocol::heartbeat_subject("hb-01"));
  start_host(h);
  ASSERT_TRUE(eventually([&] { return raw.captured().size() >= 4; }, 15000));
  ASSERT_EQ(h.proc->stop(SIGTERM, 5000), 0);
  const auto captured = raw.captured();

  restart_control();
  const std::string before = node_json("hb-01").get_string("last_contact");
  ASSERT_FALSE(before.empty());
  std::this_thread::sleep_for(1500ms);  // so that a counted heartbeat would move last contact
  BrokerClient attacker(nats_->url());
  ASSERT_TRUE(attacker.connected);
  for (const auto& m : captured) ASSERT_TRUE(attacker->publish(m));
  (void)attacker->flush(2s);
  EXPECT_TRUE(control_->wait_for_output("heartbeat replayed", 5000)) << control_->stderr_text();
  std::this_thread::sleep_for(800ms);  // past a heartbeat flush
  EXPECT_EQ(node_json("hb-01").get_string("last_contact"), before)
      << "a replayed heartbeat of a stopped node made it look alive";
}

TEST_F(ReplayTest, MeshRetriesADeclareWithTheSameBytesAndSaysWhenItsOutcomeIsUnknown) {
  add_host("lost-01");
  // No control plane answers; a subscriber swallows the requests (an answer lost in transit).
  ASSERT_EQ(control_->stop(SIGTERM, 10000), 0);
  BrokerClient sink(nats_->url());
  ASSERT_TRUE(sink.connected);
  sink.capture("mesh.api.declare");
  const fs::path f = dir() / "lost.json";
  write_text(f, file_declaration({{(dir() / "l.txt").string(), "l\n"}}));
  auto r = mesh({"--timeout", "1s", "declare", "lost-01", f.string()});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("the declaration may have been written; see mesh history lost-01"), std::string::npos)
      << r.err;
  // Asked again until --timeout + 10 s (decision record 193), always with the very same bytes.
  const auto seen = sink.captured();
  ASSERT_GE(seen.size(), 2u) << "one request and its retries";
  for (std::size_t i = 1; i < seen.size(); ++i) {
    EXPECT_EQ(*seen[0].header(trust::kHeaderNonce), *seen[i].header(trust::kHeaderNonce)) << "the same nonce";
    EXPECT_EQ(seen[0].body, seen[i].body);
    EXPECT_EQ(*seen[0].header(trust::kHeaderSignature), *seen[i].header(trust::kHeaderSignature)) << "the same bytes";
  }
}

TEST_F(ReplayTest, MeshSaysNothingWasWrittenWhenNoControlPlaneTookTheRequest) {
  // No control plane at all: nobody takes the request ("no responders"). Without --wait `mesh`
  // says so at once, and that nothing was written; with `deploy --wait` it asks again within the
  // wait (a control plane restarting), then says the same.
  ASSERT_EQ(control_->stop(SIGTERM, 10000), 0);
  auto r = mesh({"--timeout", "1s", "node", "label", "web-01", "role=web"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("nothing was written: run it again"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("asking again"), std::string::npos) << r.err;
  auto d = mesh({"--timeout", "1s", "deploy", "web", "1.0", "--wait", "3s"});
  EXPECT_EQ(d.exit_code, 3) << d.out << d.err;
  EXPECT_NE(d.err.find("asking again with the same request"), std::string::npos) << d.err;
  EXPECT_NE(d.err.find("nothing was written: run it again"), std::string::npos) << d.err;
}

TEST_F(ReplayTest, AFloodUnderOneNodesNameStarvesNeitherOperatorsNorOtherNodesAndTheLogStaysBounded) {
  add_host("flood-01", "1s");
  Host& b = add_host("calm-01", "1s");
  start_host(b);
  ASSERT_TRUE(eventually([&] { return node_json("calm-01").find("last_contact")->is_string(); }, 15000));

  // Junk at full rate on flood-01's heartbeat and latest subjects, from a raw client.
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> sent{0};
  std::thread flooder([&] {
    BrokerClient junk(nats_->url());
    if (!junk.connected) return;
    auto hb = protocol::make_message(protocol::heartbeat_subject("flood-01"), "{\"node\":\"flood-01\"}");
    hb.set_header(trust::kHeaderMac, std::string(64, '0'));
    hb.set_header(trust::kHeaderTimestamp, "1");
    auto latest = protocol::make_message(protocol::latest_subject("flood-01"), "");
    latest.reply = "_INBOX.junk";
    while (!stop) {
      for (int i = 0; i < 200; ++i) {
        (void)junk->publish(hb);
        (void)junk->publish(latest);
      }
      sent += 400;
    }
    (void)junk->flush(2s);
  });
  const std::size_t log_before = control_->stderr_text().size();
  int ok = 0;
  const int kTries = 6;
  std::int64_t worst_age = 0;
  for (int i = 0; i < kTries; ++i) {
    std::this_thread::sleep_for(1s);
    auto r = mesh({"nodes", "--output", "json"});
    if (r.exit_code == 0) {
      ++ok;
      const sdk::Value nodes = json(r.out);
      for (const auto& n : nodes.as_array())
        if (n.get_string("name") == "calm-01") worst_age = std::max(worst_age, n.get_int("age_s", 999));
    } else {
      std::cerr << "mesh nodes failed during the flood: " << r.err << "\n";
    }
  }
  stop = true;
  flooder.join();
  EXPECT_GT(sent.load(), 10'000u) << "the flood ran";
  EXPECT_EQ(ok, kTries) << "every operator request got through the flood";
  EXPECT_LE(worst_age, 4) << "calm-01's heartbeats (every 1 s) kept counting during the flood";
  const std::size_t logged = control_->stderr_text().size() - log_before;
  EXPECT_LT(logged, 2u << 20) << "the control plane's log grew by " << logged << " bytes in ~6 s";
  EXPECT_TRUE(control_->wait_for_output("rate limit node=flood-01", 1000)) << "the drops name the node";
}

}  // namespace
}  // namespace mesh::itest
