// mesh-control as a process, driven by the mesh CLI and by a raw transport playing a host.
#include <signal.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "control_fixture.h"

namespace mesh::control::test {
namespace {

using ControlIntegrationTest = ControlTest;

TEST_F(ControlIntegrationTest, TokensAreIssuedListedWithoutSecretsAndRevoked) {
  auto issued = mesh({"token", "issue", "web-01", "--ttl", "1h", "--output", "json"});
  ASSERT_EQ(issued.exit_code, 0) << issued.err;
  auto t = json(issued.out);
  EXPECT_EQ(t.get_string("node"), "web-01");
  const std::string token = t.get_string("token");
  const std::string id = t.get_string("id");
  EXPECT_GE(token.size(), 40u);
  EXPECT_FALSE(id.empty());
  EXPECT_FALSE(t.get_string("expires_at").empty());

  auto list = mesh({"token", "list", "--output", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  ASSERT_EQ(json(list.out).as_array().size(), 1u) << list.out;
  EXPECT_EQ(json(list.out).as_array()[0].get_string("id"), id);
  EXPECT_EQ(list.out.find(token), std::string::npos) << "the secret is never listed";
  auto text = mesh({"token", "list"});
  EXPECT_NE(text.out.find(id), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("web-01"), std::string::npos) << text.out;

  auto revoked = mesh({"token", "revoke", id});
  EXPECT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, "token " + id + " revoked\n");
  EXPECT_EQ(json(mesh({"token", "list", "--output", "json"}).out).as_array().size(), 0u);
  EXPECT_EQ(mesh({"token", "revoke", "nosuchid"}).exit_code, 2);

  // A revoked token does not enrol, and the refusal never echoes the token.
  sdk::Value req = sdk::Value::object();
  req.set("node", "web-01");
  req.set("token", token);
  req.set("public_key", common::to_hex(common::generate_keypair().public_key));
  auto reply = raw().request_json(protocol::kEnrolSubject, req);
  ASSERT_TRUE(reply);
  EXPECT_EQ(status_of(*reply), "error");
  EXPECT_EQ(json(reply->body).find("error")->get_string("code"), "permission_denied") << reply->body;
  EXPECT_EQ(reply->body.find(token), std::string::npos);
  EXPECT_EQ(control_->stderr_text().find(token), std::string::npos) << "tokens are never logged";

  EXPECT_EQ(mesh({"token", "issue", "Web_01"}).exit_code, 2);
  EXPECT_EQ(mesh({"token", "issue", "web-01", "--ttl", "soon"}).exit_code, 2);
}

TEST_F(ControlIntegrationTest, EnrolmentWithAKeyThatIsNotAnEd25519PointIsRefusedNamingPublicKey) {
  const std::string token = json(mesh({"token", "issue", "web-01", "--output", "json"}).out).get_string("token");
  // All zeros (a point of small order) and "02" then zeros (not a point of the prime-order
  // subgroup) are 64 hex characters but no usable key; then not hex, and too short.
  for (const std::string& bad : {std::string(64, '0'), "02" + std::string(62, '0'), std::string("zz") + std::string(62, '0'),
                                std::string(62, 'a')}) {
    sdk::Value req = sdk::Value::object();
    req.set("node", "web-01");
    req.set("token", token);
    req.set("public_key", bad);
    auto r = raw().request_json(protocol::kEnrolSubject, req);
    ASSERT_TRUE(r);
    EXPECT_EQ(status_of(*r), "error") << bad << ": " << r->body;
    const sdk::Value body = json(r->body);  // kept: `e` points into it
    const sdk::Value* e = body.find("error");
    ASSERT_TRUE(e) << r->body;
    EXPECT_EQ(e->get_string("code"), "invalid_argument") << r->body;
    EXPECT_EQ(e->get_string("path"), "public_key") << r->body;
    // `mesh-host enrol` prints the message alone: it names the field itself.
    EXPECT_NE(e->get_string("message").find("public_key"), std::string::npos) << r->body;
  }
  // Refused before the token was spent: the same token enrols with a good key.
  enrol_with("web-01", token);
  EXPECT_EQ(nodes_["web-01"].generation, 1);
}

TEST_F(ControlIntegrationTest, EnrolmentIsSingleUseAndReenrolmentIsDecidedAtIssue) {
  const std::string token = enrol("web-01");
  // The same token again: refused (used).
  auto again = enrol_with("web-01", token, /*expect_ok=*/false);
  EXPECT_EQ(status_of(again), "error") << again.body;
  EXPECT_EQ(json(again.body).find("error")->get_string("code"), "permission_denied") << again.body;

  auto refused = mesh({"token", "issue", "web-01"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("node web-01 is already enrolled; issue with --reenrol to replace its identity"),
            std::string::npos)
      << refused.err;
  auto re = mesh({"token", "issue", "web-01", "--reenrol", "--output", "json"});
  ASSERT_EQ(re.exit_code, 0) << re.err;
  auto reply = enrol_with("web-01", json(re.out).get_string("token"));
  EXPECT_EQ(status_of(reply), "ok") << reply.body;
  EXPECT_EQ(json(reply.body).get_int("generation", 0), 2);

  auto nodes = mesh({"nodes", "--output", "json"});
  ASSERT_EQ(nodes.exit_code, 0);
  ASSERT_EQ(json(nodes.out).as_array().size(), 1u);
  EXPECT_EQ(json(nodes.out).as_array()[0].get_string("name"), "web-01");
}

TEST_F(ControlIntegrationTest, DeclareDeliversAndTheReportFollowsTheHostsReports) {
  // Unknown node: bad input, exit 2.
  auto unknown = declare("web-09", kDecl);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("web-09 is not enrolled"), std::string::npos) << unknown.err;

  enrol("web-01");
  enrol("web-02");
  // Play the host: listen for the push.
  std::mutex mu;
  std::vector<sdk::Message> pushed;
  auto sub = raw()->subscribe(protocol::decl_subject("web-01"), "", [&](sdk::Message&& m) {
    std::lock_guard lock(mu);
    pushed.push_back(std::move(m));
  });
  ASSERT_TRUE(sub);
  ASSERT_TRUE(raw()->flush(2s));

  auto d = declare("web-01", kDecl);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  auto dj = json(d.out);
  const std::int64_t delivery = dj.get_int("delivery", 0);
  EXPECT_GE(delivery, 1);
  EXPECT_EQ(dj.get_int("revision", 0), 1);
  ASSERT_EQ(dj.find("nodes")->as_array().size(), 1u);
  EXPECT_EQ(dj.find("nodes")->as_array()[0].as_string(), "web-01");

  ASSERT_TRUE(mesh::testing::eventually([&] { std::lock_guard l(mu); return !pushed.empty(); }, 5000));
  {
    std::lock_guard lock(mu);
    const auto& m = pushed[0];
    ASSERT_TRUE(m.header(protocol::kHeaderRevision));
    EXPECT_EQ(*m.header(protocol::kHeaderRevision), "1");
    EXPECT_EQ(*m.header(protocol::kHeaderNode), "web-01");
    EXPECT_EQ(*m.header(protocol::kHeaderDigest), common::sha256_hex(m.body));
    EXPECT_EQ(*m.header(protocol::kHeaderProtocol), "1.0");
    EXPECT_TRUE(trust::verify_declaration(m, "web-01", 1, nodes_["web-01"].control_key))
        << "every pushed declaration is signed with the key the node pinned at enrolment";
    auto body = json(m.body);
    EXPECT_EQ(body.get_string("node"), "web-01");
    EXPECT_EQ(body.get_int("revision", 0), 1);
    EXPECT_EQ(*body.find("resources"), *json(kDecl).find("resources"));
  }
  // mesh.latest answers with the same body and headers.
  auto latest = node_request(protocol::latest_subject("web-01"), "web-01");
  ASSERT_TRUE(latest);
  EXPECT_EQ(status_of(*latest), "ok");
  EXPECT_EQ(*latest->header(protocol::kHeaderRevision), "1");
  EXPECT_EQ(*latest->header(protocol::kHeaderDigest), common::sha256_hex(latest->body));
  EXPECT_TRUE(trust::verify_declaration(*latest, "web-01", 1, nodes_["web-01"].control_key))
      << "mesh.latest answers with a declaration signed by the control plane";
  auto none = node_request(protocol::latest_subject("web-02"), "web-02");
  ASSERT_TRUE(none);
  EXPECT_EQ(status_of(*none), "none");

  // Nothing reported yet: outstanding, never heard from, exit 0 (outstanding is not failure).
  auto rep = mesh({"report", std::to_string(delivery)});
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.out.find("delivery " + std::to_string(delivery) + " ("), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("delivered    declaration updated for 1 node\n"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("applied      0 of 1\n"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("outstanding  1 — web-01 last seen never"), std::string::npos) << rep.out;
  EXPECT_EQ(rep.out.find("failed"), std::string::npos) << rep.out;
  EXPECT_EQ(mesh({"report", std::to_string(delivery), "--fail-on-outstanding"}).exit_code, 1);
  auto latest_rep = mesh({"report", "--output", "json"});
  EXPECT_EQ(json(latest_rep.out).get_int("delivery", 0), delivery) << "no id: the latest delivery";
  auto junit = mesh({"report", "--output", "junit"});
  EXPECT_EQ(junit.exit_code, 0);
  EXPECT_NE(junit.out.find("<skipped message=\"outstanding: last seen never\"/>"), std::string::npos) << junit.out;

  // The host reports: applied. A re-sent report is acknowledged and changes nothing.
  auto ack = send_report("web-01", apply_report("web-01", 1, "applied", "", "", {"file:/etc/motd"}));
  EXPECT_TRUE(ack.get_bool("recorded", false)) << ack.to_json();
  auto dup = send_report("web-01", apply_report("web-01", 1, "applied", "", "", {"file:/etc/motd"}));
  EXPECT_FALSE(dup.get_bool("recorded", true)) << dup.to_json();
  auto applied = mesh({"report", std::to_string(delivery), "--output", "json", "--fail-on-outstanding"});
  EXPECT_EQ(applied.exit_code, 0) << applied.out;
  auto aj = json(applied.out);
  ASSERT_EQ(aj.find("applied")->as_array().size(), 1u) << applied.out;
  EXPECT_EQ(aj.find("applied")->as_array()[0].get_string("node"), "web-01");
  EXPECT_EQ(aj.find("outstanding")->as_array().size(), 0u);
  auto applied_text = mesh({"report", std::to_string(delivery)});
  EXPECT_NE(applied_text.out.find("applied      1 of 1\n"), std::string::npos) << applied_text.out;
  EXPECT_EQ(applied_text.out.find("outstanding"), std::string::npos) << applied_text.out;

  // The recovery copy.
  auto rec = node_request(protocol::recovery_subject("web-01"), "web-01");
  ASSERT_TRUE(rec);
  EXPECT_EQ(status_of(*rec), "ok") << rec->body;
  auto rj = json(rec->body);
  EXPECT_EQ(rj.get_int("revision", 0), 1);
  ASSERT_EQ(rj.find("owned")->as_array().size(), 1u);
  EXPECT_EQ(rj.find("owned")->as_array()[0].as_string(), "file:/etc/motd");

  // A second revision fails on the host: the report names the resource and the reason; exit 1.
  auto d2 = declare("web-01", kDecl2, {});
  ASSERT_EQ(d2.exit_code, 0) << d2.err;
  const std::int64_t delivery2 = delivery + 1;
  EXPECT_EQ(d2.out, "delivery " + std::to_string(delivery2) + ": declared revision 2 for web-01\n");
  send_report("web-01", apply_report("web-01", 2, "failed", "file:/etc/issue", "open /etc/issue: Permission denied"));
  auto failed = mesh({"report", std::to_string(delivery2)});
  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  EXPECT_NE(failed.out.find("failed       1 — web-01: file:/etc/issue: open /etc/issue: Permission denied"),
            std::string::npos)
      << failed.out;
  auto fj = mesh({"report", std::to_string(delivery2), "--output", "junit"});
  EXPECT_EQ(fj.exit_code, 1);
  EXPECT_NE(fj.out.find("<failure type=\"failed\" message=\"file:/etc/issue: open /etc/issue: Permission denied\">"),
            std::string::npos)
      << fj.out;

  // node show brings it together.
  auto show = mesh({"node", "show", "web-01", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  auto sj = json(show.out);
  EXPECT_EQ(sj.get_string("name"), "web-01");
  EXPECT_EQ(sj.get_int("applied_revision", 0), 1);
  EXPECT_EQ(sj.get_string("last_outcome"), "failed");
  EXPECT_EQ(sj.find("owned")->as_array().size(), 1u);
  ASSERT_EQ(sj.find("applies")->as_array().size(), 2u) << show.out;
  EXPECT_EQ(sj.find("applies")->as_array()[0].get_int("revision", 0), 2);
  EXPECT_TRUE(sj.find("last_drift")->is_null());
  EXPECT_TRUE(sj.find("briefing")->is_null());
  auto show_text = mesh({"node", "show", "web-01"});
  EXPECT_NE(show_text.out.find("file:/etc/motd"), std::string::npos) << show_text.out;
  EXPECT_EQ(mesh({"node", "show", "web-77"}).exit_code, 2);
}

TEST_F(ControlIntegrationTest, ANewerRevisionSupersedesAnOlderDelivery) {
  enrol("web-01");
  auto d1 = json(declare("web-01", kDecl).out);
  auto d2 = json(declare("web-01", kDecl2).out);
  send_report("web-01", apply_report("web-01", 2, "applied"));
  auto rep = mesh({"report", std::to_string(d1.get_int("delivery", 0)), "--output", "json", "--fail-on-outstanding"});
  EXPECT_EQ(rep.exit_code, 0) << rep.out;
  auto r = json(rep.out);
  ASSERT_EQ(r.find("superseded")->as_array().size(), 1u) << rep.out;
  EXPECT_EQ(r.find("superseded")->as_array()[0].get_int("applied_revision", 0), 2);
  EXPECT_EQ(r.find("outstanding")->as_array().size(), 0u);
  const sdk::Value* by = r.find("superseded")->as_array()[0].find("by");
  ASSERT_TRUE(by && by->is_object()) << rep.out;
  EXPECT_EQ(by->get_int("revision", 0), 2);
  EXPECT_EQ(by->get_int("delivery", 0), d2.get_int("delivery", -1));
  EXPECT_EQ(by->get_string("outcome"), "applied");
  auto text = mesh({"report", std::to_string(d1.get_int("delivery", 0))});
  EXPECT_NE(text.out.find("superseded   1 — web-01 by revision 2 (delivery 2, applied)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("applied      0 of 1"), std::string::npos) << text.out;
}

TEST_F(ControlIntegrationTest, ReportWaitReturnsAsSoonAsNothingIsOutstanding) {
  enrol("web-01");
  auto d = json(declare("web-01", kDecl).out);
  const auto start = std::chrono::steady_clock::now();
  std::thread host([&] {
    std::this_thread::sleep_for(600ms);
    RawTransport t(nats_->url());
    auto r = t->request(node_signed(protocol::report_subject("web-01"), "web-01", apply_report("web-01", 1, "applied").to_json()), 5s);
    EXPECT_TRUE(r);
  });
  auto rep = mesh({"report", std::to_string(d.get_int("delivery", 0)), "--wait", "20s", "--output", "json"});
  host.join();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(json(rep.out).find("applied")->as_array().size(), 1u) << rep.out;
  EXPECT_LT(took, 10s);

  auto d2 = json(declare("web-01", kDecl2).out);
  const auto start2 = std::chrono::steady_clock::now();
  auto timed = mesh({"report", std::to_string(d2.get_int("delivery", 0)), "--wait", "1s"});
  EXPECT_EQ(timed.exit_code, 0) << "outstanding after the wait is still not failure";
  EXPECT_GE(std::chrono::steady_clock::now() - start2, 900ms);
  EXPECT_NE(timed.out.find("outstanding  1"), std::string::npos) << timed.out;
}

TEST_F(ControlIntegrationTest, BadHostMessagesAreRefusedWithTheField) {
  enrol("web-01");
  enrol("web-02");
  // Another node's report on web-01's subject.
  auto mismatch = send_report("web-01", apply_report("web-02", 1, "applied"), "error");
  EXPECT_EQ(mismatch.find("error")->get_string("path"), "node") << mismatch.to_json();
  // A bad field.
  auto bad = apply_report("web-01", 1, "applied");
  bad.set("outcome", "great");
  EXPECT_EQ(send_report("web-01", bad, "error").find("error")->get_string("path"), "outcome");
  bad = apply_report("web-01", 1, "applied");
  bad.set("revision", "one");
  EXPECT_EQ(send_report("web-01", bad, "error").find("error")->get_string("path"), "revision");
  // Not JSON; no protocol header; another major version.
  auto notjson = raw()->request(node_signed(protocol::report_subject("web-01"), "web-01", "{nope"), 5s);
  ASSERT_TRUE(notjson);
  EXPECT_EQ(status_of(*notjson), "error");
  auto unversioned = raw().request(protocol::report_subject("web-01"), std::string("{}"), false);
  ASSERT_TRUE(unversioned);
  EXPECT_EQ(json(unversioned->body).find("error")->get_string("code"), "unsupported") << unversioned->body;
  sdk::Message v2 = protocol::make_message("mesh.api.nodes", "{}");
  v2.set_header(protocol::kHeaderProtocol, "2.0");
  auto other = raw()->request(v2, 5s);
  ASSERT_TRUE(other);
  EXPECT_EQ(json(other->body).find("error")->get_string("code"), "unsupported") << other->body;
  // Drift reports are acknowledged once per scan.
  sdk::Value drift = sdk::Value::object();
  drift.set("node", "web-01");
  drift.set("scan", "scan-1");
  drift.set("revision", 1);
  drift.set("at", "2026-11-29T07:00:05Z");
  sdk::Value item = sdk::Value::object();
  item.set("resource", "file:/etc/motd");
  item.set("found", "properties.content differs");
  item.set("action", "repaired");
  drift.set("resources", sdk::Value(sdk::Value::Array{item}));
  auto d1 = raw()->request(node_signed(protocol::drift_subject("web-01"), "web-01", drift.to_json()), 5s);
  ASSERT_TRUE(d1);
  EXPECT_EQ(status_of(*d1), "ok") << d1->body;
  EXPECT_TRUE(json(d1->body).get_bool("recorded", false));
  auto d2 = raw()->request(node_signed(protocol::drift_subject("web-01"), "web-01", drift.to_json()), 5s);
  ASSERT_TRUE(d2);
  EXPECT_FALSE(json(d2->body).get_bool("recorded", true));
  auto show = json(mesh({"node", "show", "web-01", "--output", "json"}).out);
  ASSERT_TRUE(show.find("last_drift")->is_object()) << show.to_json();
  EXPECT_EQ(show.find("last_drift")->find("resources")->as_array()[0].get_string("action"), "repaired");
  EXPECT_EQ(show.get_string("last_scan_at"), "2026-11-29T07:00:05Z");
  // The control plane is still serving.
  EXPECT_EQ(mesh({"nodes"}).exit_code, 0);
}

TEST_F(ControlIntegrationTest, HeartbeatUpdatesLastContactWithinASecond) {
  enrol("web-01");
  enrol("web-02");
  auto node_json = [&](const std::string& name) -> sdk::Value {
    const sdk::Value all = json(mesh({"nodes", "--output", "json"}).out);
    for (std::size_t i = 0; i < all.as_array().size(); ++i)
      if (all.as_array()[i].get_string("name") == name) return all.as_array()[i];
    return sdk::Value::object();
  };
  EXPECT_TRUE(node_json("web-02").find("last_contact")->is_null()) << "enrolled, never heard from";
  EXPECT_NE(mesh({"nodes"}).out.find("never"), std::string::npos);

  sdk::Value hb = sdk::Value::object();
  hb.set("node", "web-02");
  hb.set("at", "2020-01-01T00:00:00Z");  // a host clock far off: last contact uses ours
  hb.set("applied_revision", 0);
  hb.set("host_version", "0.1.9");
  hb.set("state", "idle");
  const auto sent = std::chrono::steady_clock::now();
  publish(heartbeat_message("web-02", hb));
  std::string last;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        const sdk::Value n = node_json("web-02");
        const sdk::Value* lc = n.find("last_contact");
        if (!lc || !lc->is_string()) return false;
        last = lc->as_string();
        return true;
      },
      3000))
      << control_->stderr_text();
  EXPECT_LT(std::chrono::steady_clock::now() - sent, 1000ms) << "heartbeats reach the store within a second";
  EXPECT_NE(last, "2020-01-01T00:00:00Z");
  EXPECT_LE(node_json("web-02").get_int("age_s", 99), 2);
  EXPECT_TRUE(node_json("web-01").find("last_contact")->is_null());
  auto show = json(mesh({"node", "show", "web-02", "--output", "json"}).out);
  EXPECT_EQ(show.get_string("host_version"), "0.1.9");
  EXPECT_EQ(show.get_string("state"), "idle");
  // `mesh nodes` shows the running host's version too (issue #14 item 5).
  EXPECT_EQ(node_json("web-02").get_string("host_version"), "0.1.9");
  auto text = mesh({"nodes"});
  EXPECT_NE(text.out.find("NAME    ELIGIBLE  LAST-CONTACT"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" (" + last + ")"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("HOST-VERSION"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" 0.1.9\n"), std::string::npos) << text.out;

  // A heartbeat naming another node on this subject is dropped and logged with the field.
  hb.set("node", "web-01");
  publish(heartbeat_message("web-02", hb));
  EXPECT_TRUE(control_->wait_for_output("dropped subject=mesh.heartbeat.web-02 field=node", 3000));
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(node_json("web-01").find("last_contact")->is_null());
}

TEST_F(ControlIntegrationTest, HistoryAndRollback) {
  enrol("web-01");
  auto d1 = json(declare("web-01", kDecl).out);
  auto d2 = json(declare("web-01", kDecl2).out);
  auto hist = mesh({"history", "web-01", "--output", "json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  auto h = json(hist.out);
  ASSERT_EQ(h.as_array().size(), 2u);
  EXPECT_EQ(h.as_array()[0].get_int("revision", 0), 2) << "newest first";
  EXPECT_EQ(h.as_array()[1].get_int("delivery", 0), d1.get_int("delivery", 0));
  EXPECT_EQ(h.as_array()[0].get_string("digest").size(), 64u);
  auto text = mesh({"history", "web-01"});
  EXPECT_NE(text.out.find("REVISION"), std::string::npos) << text.out;

  auto rb = mesh({"rollback", "web-01", "--to", "1"});
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(rb.out, "delivery " + std::to_string(d2.get_int("delivery", 0) + 1) +
                        ": web-01 rolled back to revision 1 as revision 3\n");
  auto latest = node_request(protocol::latest_subject("web-01"), "web-01");
  ASSERT_TRUE(latest);
  EXPECT_EQ(*latest->header(protocol::kHeaderRevision), "3");
  EXPECT_EQ(*json(latest->body).find("resources"), *json(kDecl).find("resources"));
  auto rep = json(mesh({"report", "--output", "json"}).out);
  EXPECT_EQ(rep.find("outstanding")->as_array()[0].get_int("revision", 0), 3);

  auto gone = mesh({"rollback", "web-01", "--to", "99"});
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_NE(gone.err.find("revision 99 of web-01 is not retained"), std::string::npos) << gone.err;
  EXPECT_EQ(mesh({"history", "web-77"}).exit_code, 2);
}

TEST_F(ControlIntegrationTest, RetentionPrunesOldRevisions) {
  control_.reset();
  start_control("", "retain = 2\n");
  enrol("web-01");
  for (int i = 0; i < 4; ++i) ASSERT_EQ(declare("web-01", kDecl).exit_code, 0);
  auto h = json(mesh({"history", "web-01", "--output", "json"}).out);
  ASSERT_EQ(h.as_array().size(), 2u) << h.to_json();
  EXPECT_EQ(h.as_array()[1].get_int("revision", 0), 3);
  EXPECT_EQ(mesh({"rollback", "web-01", "--to", "1"}).exit_code, 2) << "pruned";
  EXPECT_EQ(mesh({"rollback", "web-01", "--to", "3"}).exit_code, 0);
}

TEST_F(ControlIntegrationTest, OversizedMessagesAreRefusedBeforeParsing) {
  control_.reset();
  start_control("\n[limits]\nmax_message = 4096\n");
  enrol("web-01");
  std::string big = "{\"pad\":\"" + std::string(5000, 'x') + "\"}";
  auto r = raw().request("mesh.api.nodes", big);
  ASSERT_TRUE(r);
  EXPECT_EQ(status_of(*r), "error");
  EXPECT_NE(json(r->body).find("error")->get_string("message").find("over the limit of 4096 bytes"), std::string::npos)
      << r->body;
  // A declaration over the limit is refused, and says why.
  std::string decl = R"({"resources":[{"type":"file","id":"/x","properties":{"content":")" +
                     std::string(4100, 'y') + R"("}}]})";
  auto d = declare("web-01", decl, {});
  EXPECT_EQ(d.exit_code, 2) << d.out << d.err;
  EXPECT_NE(d.err.find("over the limit of 4096 bytes"), std::string::npos) << d.err;
  EXPECT_EQ(mesh({"history", "web-01", "--output", "json"}).out, "[]\n");
}

TEST_F(ControlIntegrationTest, SurvivesTheBrokerGoingAwayAndComingBack) {
  nats_->stop();
  const auto start = std::chrono::steady_clock::now();
  auto down = mesh({"nodes"});
  EXPECT_EQ(down.exit_code, 3) << down.out << down.err;
  EXPECT_NE(down.err.find(nats_->url()), std::string::npos) << "says which server: " << down.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);

  nats_->start();
  EXPECT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}, 10000).exit_code == 0; }, 15000))
      << control_->stderr_text();
  EXPECT_TRUE(control_->running());
}

TEST_F(ControlIntegrationTest, StartsWithTheBrokerDownAndSubscribesWhenItComesUp) {
  control_.reset();
  nats_->stop();
  const fs::path cfg = dir() / "control.toml";
  write_text(cfg, control_config(dir() / "state", nats_->url()));
  control_ = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string()});
  ASSERT_TRUE(control_->wait_for_output("control started", 15000)) << control_->stderr_text();
  EXPECT_TRUE(control_->running());
  nats_->start();
  EXPECT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}, 10000).exit_code == 0; }, 15000))
      << control_->stderr_text();
}

TEST_F(ControlIntegrationTest, StopsOnSigtermWithinASecond) {
  enrol("web-01");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(control_->stop(SIGTERM, 3000), 0) << control_->stderr_text();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_NE(control_->stderr_text().find("control stopped"), std::string::npos);
  // Everything written survives a restart.
  start_control();
  auto nodes = json(mesh({"nodes", "--output", "json"}).out);
  EXPECT_EQ(nodes.as_array().size(), 1u);
}

TEST_F(ControlIntegrationTest, MalformedConfigExitsTwoNamingFileLineAndKey) {
  const fs::path cfg = dir() / "bad.toml";
  write_text(cfg, "[control]\nstate_dir = \"" + (dir() / "s2").string() + "\"\nretian = 5\n\n[plugins]\ndir = \"/x\"\n");
  auto r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(cfg.string() + ":3: control.retian: unknown"), std::string::npos) << r.err;

  write_text(cfg, control_config(dir() / "s2", nats_->url(), "\n[limits]\nmax_message = \"big\"\n"));
  r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(cfg.string() + ":16: limits.max_message: must be a integer"), std::string::npos) << r.err;

  write_text(cfg, control_config(dir() / "s2", nats_->url()) + "sevrers = 1\n");
  r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("transport.sevrers: unknown"), std::string::npos) << r.err;

  write_text(cfg, control_config(dir() / "s2", nats_->url()) + "\n[store]\n");
  r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2) << "a table given twice is a TOML error";

  std::string wrong_plugin = control_config(dir() / "s2", nats_->url());
  wrong_plugin.replace(wrong_plugin.find("\"sqlite\""), 8, "\"nosuch\"");
  write_text(cfg, wrong_plugin);
  r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mesh-store-nosuch.so"), std::string::npos) << r.err;
  // A refused config writes no trust material: the next, correct start makes the first admin.
  EXPECT_FALSE(fs::exists(dir() / "s2" / "control.key"));
  EXPECT_FALSE(fs::exists(dir() / "s2" / "admin.identity"));
  EXPECT_FALSE(fs::exists(dir() / "s2" / "operators.json"));

  r = mesh::testing::run_process({bin("mesh-control"), "run", "--config", (dir() / "missing.toml").string()}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.toml"), std::string::npos) << r.err;
  r = mesh::testing::run_process({bin("mesh-control"), "run"}, {}, 10000);
  EXPECT_EQ(r.exit_code, 2);
  r = mesh::testing::run_process({bin("mesh-control"), "--version"}, {}, 10000);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("mesh-control 0.1.0"), std::string::npos);
}

TEST_F(ControlIntegrationTest, EnrolmentReplyIsSignedAndNodeRequestsAreSignedByTheNodeItself) {
  // The reply names the control plane's key (the one in control.pub) and is signed with it.
  auto tok = json(mesh({"token", "issue", "web-01", "--output", "json"}).out).get_string("token");
  auto reply = enrol_with("web-01", tok);
  std::string pub = common::to_hex(nodes_["web-01"].control_key) + "\n";
  std::ifstream in(dir() / "state" / "control.pub");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), pub);
  ASSERT_TRUE(reply.header(trust::kHeaderSignature));
  EXPECT_TRUE(common::verify(trust::enrol_reply_text("web-01", reply.body),
                             *common::from_hex(*reply.header(trust::kHeaderSignature)), nodes_["web-01"].control_key));
  EXPECT_GE(json(reply.body).get_int("clock_tolerance_ms", 0), 1000);
  // A key is required.
  auto t2 = json(mesh({"token", "issue", "web-02", "--output", "json"}).out).get_string("token");
  sdk::Value keyless = sdk::Value::object();
  keyless.set("node", "web-02");
  keyless.set("token", t2);
  auto r = raw().request_json(protocol::kEnrolSubject, keyless);
  ASSERT_TRUE(r);
  EXPECT_EQ(json(r->body).find("error")->get_string("path"), "public_key") << r->body;
  enrol_with("web-02", t2);

  ASSERT_EQ(declare("web-01", kDecl).exit_code, 0);
  auto denied = [&](const sdk::Result<sdk::Message>& m, const std::string& why) {
    ASSERT_TRUE(m);
    EXPECT_EQ(status_of(*m), "error") << m->body;
    EXPECT_EQ(json(m->body).find("error")->get_string("code"), "permission_denied") << m->body;
    EXPECT_NE(m->body.find(why), std::string::npos) << m->body;
  };
  denied(raw().request(protocol::latest_subject("web-01"), ""), "unsigned request");
  denied(raw().request(protocol::recovery_subject("web-01"), ""), "unsigned request");
  denied(node_request(protocol::latest_subject("web-01"), "web-02"), "signed by node web-02 on the subject of node web-01");
  // web-01's name, web-02's key.
  auto m = protocol::make_message(protocol::latest_subject("web-01"));
  trust::sign_request(m, protocol::kHeaderNode, "web-01", nodes_["web-02"].keys.secret_key, common::now_ms());
  denied(raw()->request(m, 5s), "does not verify");
  // Too old, and replayed.
  auto old = protocol::make_message(protocol::latest_subject("web-01"));
  trust::sign_request(old, protocol::kHeaderNode, "web-01", nodes_["web-01"].keys.secret_key, common::now_ms() - 120'000);
  denied(raw()->request(old, 5s), "expired");
  auto once = protocol::make_message(protocol::latest_subject("web-01"));
  trust::sign_request(once, protocol::kHeaderNode, "web-01", nodes_["web-01"].keys.secret_key, common::now_ms());
  auto first = raw()->request(once, 5s);
  ASSERT_TRUE(first);
  EXPECT_EQ(status_of(*first), "ok");
  denied(raw()->request(once, 5s), "replayed");
}

// Group commit of nonces (decision record 119): node requests that arrive together share one
// store write, and each is answered only after it. Every one answered is refused when replayed —
// at once, and after the control plane was killed (SIGKILL: nothing flushed) and started again,
// when only the store remembers them.
TEST_F(ControlIntegrationTest, NodeRequestsAnsweredFromOneBatchOfNoncesAreRefusedAsReplaysAlsoAfterAKill) {
  enrol("web-01");
  enrol("web-02");
  ASSERT_EQ(declare("web-01", kDecl).exit_code, 0);
  constexpr int kThreads = 4;
  constexpr int kEach = 10;
  std::vector<sdk::Message> sent;
  for (int i = 0; i < kThreads * kEach; ++i) {
    const std::string node = i % 2 ? "web-02" : "web-01";
    auto m = protocol::make_message(i % 3 == 2 ? protocol::recovery_subject(node) : protocol::latest_subject(node));
    trust::sign_request(m, protocol::kHeaderNode, node, nodes_[node].keys.secret_key, common::now_ms());
    sent.push_back(std::move(m));
  }
  // Sent from several threads at once, so that nonces wait for the same write.
  std::vector<std::string> statuses(sent.size());
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t)
    senders.emplace_back([&, t] {
      for (int i = t * kEach; i < (t + 1) * kEach; ++i) {
        auto r = raw()->request(sent[i], 10s);
        statuses[i] = r ? status_of(*r) + (status_of(*r) == "error" ? ": " + r->body : "") : r.error().message;
      }
    });
  for (auto& t : senders) t.join();
  for (std::size_t i = 0; i < sent.size(); ++i)
    EXPECT_TRUE(statuses[i] == "ok" || statuses[i] == "none") << sent[i].subject << ": " << statuses[i];

  auto replayed = [&](const sdk::Message& m, const std::string& when) {
    auto r = raw()->request(m, 10s);
    ASSERT_TRUE(r) << when << ": " << r.error().message;
    EXPECT_EQ(status_of(*r), "error") << when << ": " << r->body;
    EXPECT_NE(r->body.find("replayed"), std::string::npos) << when << ": " << r->body;
  };
  for (const auto& m : sent) replayed(m, "right after");

  ASSERT_EQ(control_->stop(SIGKILL, 5000), -SIGKILL) << control_->stderr_text();
  start_control();
  raw_.reset();  // a new connection, as a host that reconnected
  for (const auto& m : sent) replayed(m, "after a kill and a restart");
  // A new request of the same node is answered.
  auto fresh = node_request(protocol::latest_subject("web-01"), "web-01");
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_EQ(status_of(*fresh), "ok") << fresh->body;
}

TEST_F(ControlIntegrationTest, ARefusalCountsOnlyForTheDeclarationThatWasSent) {
  enrol("web-01");
  auto d1 = json(declare("web-01", kDecl).out);
  auto latest = node_request(protocol::latest_subject("web-01"), "web-01");
  ASSERT_TRUE(latest);
  const std::string digest1 = common::sha256_hex(latest->body);
  // A refusal of something the control plane never sent (another digest, a revision not stored).
  auto forged = apply_report("web-01", 1, "refused", "", "declaration signature does not verify");
  forged.set("digest", common::sha256_hex("something else"));
  EXPECT_FALSE(send_report("web-01", forged).get_bool("recorded", true));
  auto future = apply_report("web-01", 9, "refused", "", "unsigned declaration");
  future.set("digest", digest1);
  EXPECT_FALSE(send_report("web-01", future).get_bool("recorded", true));
  auto rep = json(mesh({"report", std::to_string(d1.get_int("delivery", 0)), "--output", "json"}).out);
  EXPECT_EQ(rep.find("outstanding")->as_array().size(), 1u) << rep.to_json();
  // A refusal of exactly revision 1 as stored counts: the delivery failed.
  auto genuine = apply_report("web-01", 1, "refused", "", "declaration signature does not verify");
  genuine.set("digest", digest1);
  EXPECT_TRUE(send_report("web-01", genuine).get_bool("recorded", false));
  rep = json(mesh({"report", std::to_string(d1.get_int("delivery", 0)), "--output", "json"}).out);
  ASSERT_EQ(rep.find("failed")->as_array().size(), 1u) << rep.to_json();
  EXPECT_EQ(rep.find("failed")->as_array()[0].get_string("outcome"), "refused");
  // A report signed by another node's key, or by nobody, is refused and changes nothing.
  enrol("web-02");
  auto other = send_report("web-01", apply_report("web-01", 1, "applied"), "error", "web-02");
  EXPECT_EQ(other.find("error")->get_string("code"), "permission_denied") << other.to_json();
  auto none = raw().request_json(protocol::report_subject("web-01"), apply_report("web-01", 1, "applied"));
  ASSERT_TRUE(none);
  EXPECT_EQ(json(none->body).find("error")->get_string("code"), "permission_denied") << none->body;
  auto show = json(mesh({"node", "show", "web-01", "--output", "json"}).out);
  EXPECT_EQ(show.get_string("last_outcome"), "refused");
}

TEST_F(ControlIntegrationTest, FirstStartWritesTheKeyAndAnAdminIdentityOnce) {
  const std::string id1 = [&] {
    std::ifstream in(admin_identity());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  EXPECT_NE(id1.find("\"role\":\"admin\""), std::string::npos) << id1;
  EXPECT_EQ(fs::status(admin_identity()).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(dir() / "state" / "control.key").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  control_.reset();
  start_control();
  std::ifstream in(admin_identity());
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), id1) << "a restart keeps the identity";
  EXPECT_EQ(mesh({"nodes"}).exit_code, 0);
  // An operator added now is refused once removed.
  auto add = mesh({"operator", "add", "ro", "--role", "reader"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  write_text(dir() / "ro.identity", add.out);
  fs::permissions(dir() / "ro.identity", fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(mesh_as((dir() / "ro.identity").string(), {"nodes"}).exit_code, 0);
  EXPECT_EQ(mesh_as((dir() / "ro.identity").string(), {"token", "issue", "web-01"}).exit_code, 2);
  EXPECT_EQ(mesh({"operator", "remove", "ro"}).exit_code, 0);
  EXPECT_EQ(mesh_as((dir() / "ro.identity").string(), {"nodes"}).exit_code, 2);
  // A bad identity file: exit 2 naming it.
  write_text(dir() / "bad.identity", "{\"kind\":\"something\"}");
  auto bad = mesh_as((dir() / "bad.identity").string(), {"nodes"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad.identity"), std::string::npos) << bad.err;
}

TEST_F(ControlIntegrationTest, TokensNameTheControlKeyAndMayTravelSealedToIt) {
  const std::string token = json(mesh({"token", "issue", "web-01", "--output", "json"}).out).get_string("token");
  const auto dot = token.rfind('.');
  ASSERT_NE(dot, std::string::npos) << token;
  auto key = common::base64url_decode(token.substr(dot + 1));
  ASSERT_TRUE(key);
  std::ifstream in(dir() / "state" / "control.pub");
  std::string pub(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(common::to_hex(*key) + "\n", pub) << "the token names the control plane's public key";

  // Sealed to another key: refused, and the token is still good afterwards.
  auto keys = common::generate_keypair();
  auto wrong = *common::seal_to(token, common::generate_keypair().public_key);
  sdk::Value req = sdk::Value::object();
  req.set("node", "web-01");
  req.set("token_sealed", common::to_hex(wrong));
  req.set("public_key", common::to_hex(keys.public_key));
  auto r = raw().request_json(protocol::kEnrolSubject, req);
  ASSERT_TRUE(r);
  EXPECT_EQ(json(r->body).find("error")->get_string("code"), "permission_denied") << r->body;
  // Sealed to the right key: enrolled.
  req.set("token_sealed", common::to_hex(*common::seal_to(token, *key)));
  auto ok = raw().request_json(protocol::kEnrolSubject, req);
  ASSERT_TRUE(ok);
  EXPECT_EQ(status_of(*ok), "ok") << ok->body;
  EXPECT_EQ(json(ok->body).get_string("control_key"), common::to_hex(*key));
}

TEST_F(ControlIntegrationTest, TheBriefingsClockLineIsTheControlPlanesAndOldBriefingsAreRefused) {
  enrol("web-01");
  auto briefing = [&](std::int64_t at_ms, const std::string& disk) {
    sdk::Value b = sdk::Value::object();
    b.set("node", "web-01");
    b.set("at_ms", at_ms);
    b.set("host_version", "0.1.0");
    sdk::Value lines = sdk::Value::array();
    for (auto [check, outcome] : {std::pair<const char*, std::string>{"disk", disk}, {"clock", "pass"}, {"os", "info"}}) {
      sdk::Value l = sdk::Value::object();
      l.set("check", check);
      l.set("outcome", outcome);
      l.set("detail", "d");
      lines.as_array().push_back(std::move(l));
    }
    b.set("lines", std::move(lines));
    return raw()->request(node_signed(protocol::briefing_subject("web-01"), "web-01", b.to_json()), 5s);
  };
  auto eligible = [&] { return json(mesh({"nodes", "--output", "json"}).out).as_array()[0].get_bool("eligible", true); };
  // A host clock ten minutes slow: whatever the host claims, the clock line fails.
  const std::int64_t now = common::now_ms();
  auto slow = briefing(now - 600'000, "pass");
  ASSERT_TRUE(slow);
  EXPECT_EQ(status_of(*slow), "ok") << slow->body;
  auto sj = json(slow->body);
  EXPECT_EQ(sj.get_string("outcome"), "fail") << slow->body;
  std::size_t clocks = 0;
  for (const auto& l : sj.find("lines")->as_array())
    if (l.get_string("check") == "clock") {
      ++clocks;
      EXPECT_EQ(l.get_string("outcome"), "fail");
      EXPECT_NE(l.get_string("detail").find("from the control plane's clock"), std::string::npos);
    }
  EXPECT_EQ(clocks, 1u) << "the host's own clock line is replaced, not added to";
  EXPECT_FALSE(eligible());
  // A passing briefing clears it; an older one replayed afterwards is refused and changes nothing.
  auto good = briefing(now, "pass");
  ASSERT_TRUE(good);
  EXPECT_EQ(json(good->body).get_string("outcome"), "pass") << good->body;
  EXPECT_TRUE(eligible());
  auto replay = briefing(now - 1000, "fail");
  ASSERT_TRUE(replay);
  EXPECT_EQ(status_of(*replay), "error") << replay->body;
  EXPECT_TRUE(eligible());
  // Unsigned: refused.
  auto unsigned_reply = raw().request(protocol::briefing_subject("web-01"), "{\"node\":\"web-01\",\"at_ms\":1,\"lines\":[]}");
  ASSERT_TRUE(unsigned_reply);
  EXPECT_EQ(json(unsigned_reply->body).find("error")->get_string("code"), "permission_denied");
  // node show carries the recorded briefing.
  auto show = json(mesh({"node", "show", "web-01", "--output", "json"}).out);
  EXPECT_EQ(show.find("briefing")->get_string("outcome"), "pass") << show.to_json();
  // A briefing is contact: no heartbeat was sent, and the node was last heard from when its
  // latest briefing arrived (the control plane's clock), not "never".
  ASSERT_TRUE(show.find("last_contact")->is_string()) << show.to_json();
  EXPECT_EQ(show.get_string("last_contact"), json(good->body).get_string("at")) << show.to_json();
  EXPECT_EQ(mesh({"nodes"}).out.find("never"), std::string::npos);
}

// Finding 13 of issue 15 (decision record 186): a stolen node key sending big briefings (or
// reports, drift reports) again and again makes the store write at most the node's byte budget;
// beyond it the message is refused as transient, saying when to try again, and nothing is stored.
TEST_F(ControlIntegrationTest, ANodesBriefingsBeyondItsStoreBudgetAreRefusedAsTransientAndNotStored) {
  control_.reset();
  start_control("\n[limits]\nnode_store_rate = 1024\nnode_store_burst = 65536\n");
  enrol("web-01");
  const std::string detail(40'000, 'x');
  auto briefing = [&](std::int64_t at_ms) {
    sdk::Value b = sdk::Value::object();
    b.set("node", "web-01");
    b.set("at_ms", at_ms);
    b.set("host_version", "0.1.0");
    sdk::Value line = sdk::Value::object();
    line.set("check", "disk");
    line.set("outcome", "pass");
    line.set("detail", detail);
    b.set("lines", sdk::Value(sdk::Value::Array{line}));
    return raw()->request(node_signed(protocol::briefing_subject("web-01"), "web-01", b.to_json()), 5s);
  };
  const std::int64_t now = common::now_ms();
  // 64 KiB at once: the first two (40 kB each) pass, the second into debt.
  for (int i = 0; i < 2; ++i) {
    auto ok = briefing(now + i);
    ASSERT_TRUE(ok);
    EXPECT_EQ(status_of(*ok), "ok") << ok->body;
  }
  auto over = briefing(now + 2);
  ASSERT_TRUE(over);
  ASSERT_EQ(status_of(*over), "error") << over->body;
  const sdk::Value body = json(over->body);
  const sdk::Value* error = body.find("error");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->get_string("code"), "transient") << over->body;
  EXPECT_NE(error->get_string("message").find("node_store_rate"), std::string::npos) << over->body;
  EXPECT_NE(error->get_string("message").find("try again in"), std::string::npos) << over->body;
  EXPECT_TRUE(control_->wait_for_output("store budget node=web-01 subject=mesh.briefing.web-01", 3000))
      << control_->stderr_text();
  // The refused one was not stored: the node's briefing is the second.
  auto show = json(mesh({"node", "show", "web-01", "--output", "json"}).out);
  EXPECT_EQ(show.find("briefing")->get_int("at_ms", 0), now + 1) << show.to_json();
}

}  // namespace
}  // namespace mesh::control::test
