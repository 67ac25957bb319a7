// Delivery truth against real processes (nats-server, mesh-control, mesh-host, mesh): what a
// stolen node key can no longer do to reports, last contact and the recovery copy; a retried
// success replacing a failure; and every state of a delivery's per-node outcome as `mesh report`,
// `mesh nodes` and `mesh node show` show it (docs/protocol.md, "Delivery outcomes").
#include <chrono>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/sdk/transport.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;
using DeliveryTruthTest = MeshTest;

/// A raw broker client, as someone holding a node's stolen key would use it.
class Raw : public BrokerClient {
 public:
  explicit Raw(const std::string& url) : BrokerClient(url) {
    if (!connected) throw std::runtime_error(connected.error().message);
  }
};

std::string secret_key_of(const Host& h) {
  std::string hex = read_text(h.state / "node.key");
  while (!hex.empty() && hex.back() == '\n') hex.pop_back();
  return *common::from_hex(hex);
}

/// An apply report body as a host sends it.
sdk::Value report_body(const std::string& node, std::uint64_t revision, const std::string& outcome,
                       std::vector<std::string> owned = {}, std::vector<std::string> digests = {},
                       const std::string& at = "2026-11-29T07:00:01Z") {
  sdk::Value r = sdk::Value::object();
  r.set("node", node);
  r.set("revision", static_cast<std::int64_t>(revision));
  r.set("at", at);
  r.set("outcome", outcome);
  sdk::Value o = sdk::Value::array();
  for (auto& s : owned) o.as_array().emplace_back(s);
  r.set("owned", std::move(o));
  if (!digests.empty()) {
    sdk::Value d = sdk::Value::array();
    for (auto& s : digests) d.as_array().emplace_back(s);
    r.set("owned_digests", std::move(d));
  }
  return r;
}

/// Sends `body` as node `node`'s report signed with `key`; returns the reply.
sdk::Message send_report(Raw& raw, const std::string& node, const std::string& key, const sdk::Value& body) {
  auto m = protocol::make_message(protocol::report_subject(node), body.to_json());
  trust::sign_report(m, key);
  auto reply = raw->request(m, 5s);
  EXPECT_TRUE(reply) << (reply ? "" : reply.error().describe());
  return reply ? *reply : sdk::Message{};
}

std::string error_code(const sdk::Message& reply) {
  auto v = common::parse_json(reply.body);
  return v && v->find("error") ? v->find("error")->get_string("code") : "";
}

sdk::Value node_show(MeshTest& t, const std::string& node) {
  auto r = t.mesh({"node", "show", node, "--output", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json(r.out);
}

sdk::Value node_in_list(MeshTest& t, const std::string& node) {
  auto r = t.mesh({"nodes", "--output", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const sdk::Value list = json(r.out);
  for (const auto& n : list.as_array())
    if (n.get_string("name") == node) return n;
  ADD_FAILURE() << "node " << node << " not in mesh nodes: " << r.out;
  return sdk::Value::object();
}

std::vector<std::string> owned_of(const sdk::Value& show) {
  std::vector<std::string> out;
  if (const sdk::Value* o = show.find("owned"); o && o->is_array())
    for (const auto& e : o->as_array()) out.push_back(e.as_string());
  return out;
}

/// The list (applied/failed/outstanding/superseded) `node` is in, and its entry.
std::pair<std::string, sdk::Value> where(const sdk::Value& report, const std::string& node) {
  for (const char* k : {"applied", "failed", "outstanding", "superseded"})
    if (const sdk::Value* l = report.find(k); l && l->is_array())
      for (const auto& e : l->as_array())
        if (e.get_string("node") == node) return {k, e};
  return {"none", sdk::Value::object()};
}

/// `mesh report DELIVERY` exit code (with or without --fail-on-outstanding).
int report_exit(MeshTest& t, std::int64_t delivery, bool fail_on_outstanding = false) {
  std::vector<std::string> args{"report", std::to_string(delivery)};
  if (fail_on_outstanding) args.push_back("--fail-on-outstanding");
  return t.mesh(args).exit_code;
}

// --- #10.2 / #10.3: a stolen node key -----------------------------------------------------------

TEST_F(DeliveryTruthTest, AStolenKeyCannotRecordUndeclaredRevisionsPoisonTheRecoveryCopyOrFakeLastContact) {
  Host& h = add_host("stolen-01");
  start_host(h);
  const std::string mine = (dir() / "mine.txt").string();
  const std::string victim = (dir() / "victim.txt").string();
  write_text(victim, "not the mesh's\n");
  auto d1 = declare("stolen-01", file_declaration({{mine, "mine\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  const std::string key = secret_key_of(h);
  Raw raw(nats_->url());

  // A signed `applied` for revision 9×10^18 with a forged owned list: refused, nothing recorded.
  auto reply = send_report(raw, "stolen-01", key,
                           report_body("stolen-01", 9'000'000'000'000'000'000ULL, "applied", {"file:" + mine, "file:" + victim}));
  EXPECT_EQ(error_code(reply), "invalid_argument") << reply.body;
  EXPECT_NE(reply.body.find("never declared"), std::string::npos) << reply.body;
  auto show = node_show(*this, "stolen-01");
  EXPECT_EQ(show.get_int("applied_revision", -1), 1);
  EXPECT_EQ(owned_of(show), std::vector<std::string>{"file:" + mine});
  EXPECT_TRUE(control_->wait_for_output("report refused node=stolen-01", 5000)) << control_->stderr_text();

  // Pre-recorded for a revision not declared yet: refused, so the genuine failure shows failed.
  reply = send_report(raw, "stolen-01", key, report_body("stolen-01", 2, "applied", {"file:" + victim}));
  EXPECT_EQ(error_code(reply), "invalid_argument") << reply.body;
  const std::string broken = (dir() / "no-such-dir" / "x.txt").string();
  auto d2 = declare("stolen-01", file_declaration({{mine, "mine\n"}, {broken, "x\n"}}));
  sdk::Value r2;
  ASSERT_TRUE(eventually([&] {
    r2 = report(d2.get_int("delivery", 0));
    return count(r2, "failed") == 1;
  }, 20000)) << r2.to_json();
  EXPECT_EQ(count(r2, "applied"), 0u);
  EXPECT_EQ(report_exit(*this, d2.get_int("delivery", 0)), 1);

  // A later delivery is not "superseded" by the fake high revision: it ends applied.
  auto d3 = declare("stolen-01", file_declaration({{mine, "mine\n"}}));
  auto r3 = report(d3.get_int("delivery", 0), "20s");
  EXPECT_EQ(count(r3, "applied"), 1u) << r3.to_json();
  EXPECT_EQ(count(r3, "superseded"), 0u) << r3.to_json();
  EXPECT_EQ(fs::exists(victim), true);

  // A report whose `at` is in 2099: last contact is when the control plane received it.
  ASSERT_EQ(h.proc->stop(), 0);
  auto d4 = declare("stolen-01", file_declaration({{mine, "mine\n"}}));
  (void)d4;
  const std::int64_t before = common::now_ms();
  reply = send_report(raw, "stolen-01", key, report_body("stolen-01", 4, "applied", {"file:" + mine}, {}, "2099-01-01T00:00:00Z"));
  EXPECT_EQ(error_code(reply), "") << reply.body;
  const std::int64_t after = common::now_ms();
  auto n = node_in_list(*this, "stolen-01");
  auto lc = common::parse_rfc3339(n.get_string("last_contact"));
  ASSERT_TRUE(lc) << n.to_json();
  EXPECT_GE(*lc, before - 1000);
  EXPECT_LE(*lc, after + 1000) << "last contact is the receipt time, not the claimed 2099";
  std::this_thread::sleep_for(2500ms);
  EXPECT_GE(node_in_list(*this, "stolen-01").get_int("age_s", -1), 2) << "and it ages like any contact";
}

TEST_F(DeliveryTruthTest, ReenrolmentAfterAStolenKeyAndAWipeDeletesNothingTheMeshDoesNotOwn) {
  Host& h = add_host("wiped-01");
  start_host(h);
  const std::string keep = (dir() / "keep.txt").string();
  const std::string orphan = (dir() / "orphan.txt").string();
  const std::string victim = (dir() / "victim.txt").string();
  write_text(victim, "root's own file\n");
  auto d1 = declare("wiped-01", file_declaration({{keep, "keep\n"}, {orphan, "orphan\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  ASSERT_EQ(h.proc->stop(), 0);

  // The thief answers a revision the host has not reported yet, listing a file it wants gone,
  // with a digest as good as it can make it.
  const std::string key = secret_key_of(h);
  Raw raw(nats_->url());
  auto d2 = declare("wiped-01", file_declaration({{keep, "keep\n"}}));
  auto reply = send_report(raw, "wiped-01", key,
                           report_body("wiped-01", 2, "applied", {"file:" + keep, "file:" + victim},
                                       {std::string(64, 'a'), std::string(64, 'b')}));
  EXPECT_EQ(error_code(reply), "") << "recorded: the key is still valid until re-enrolment";
  EXPECT_EQ(owned_of(node_show(*this, "wiped-01")).size(), 2u);

  // The operator does what the docs say: re-enrol, wipe, enrol, start.
  fs::remove_all(h.state);
  enrol(h, /*reenrol=*/true);
  auto show = node_show(*this, "wiped-01");
  EXPECT_TRUE(owned_of(show).empty()) << "the revoked identity's recovery copy is cleared: " << show.to_json();
  EXPECT_EQ(show.get_int("applied_revision", -1), 0);
  EXPECT_EQ(where(report(d2.get_int("delivery", 0)), "wiped-01").first, "outstanding")
      << "the old identity's report does not count";
  start_host(h);
  ASSERT_EQ(count(report(d2.get_int("delivery", 0), "20s"), "applied"), 1u);
  std::this_thread::sleep_for(2s);  // time for any orphan removal
  EXPECT_EQ(read_text(victim), "root's own file\n") << h.proc->stderr_text();
  EXPECT_TRUE(fs::exists(orphan)) << "not shown to be the mesh's under the new identity: kept";
  EXPECT_EQ(read_text(keep), "keep\n");
  EXPECT_EQ(owned_of(node_show(*this, "wiped-01")), std::vector<std::string>{"file:" + keep});
}

TEST_F(DeliveryTruthTest, AHostReenrolledOnItsKeptStateReportsItsAppliedRevisionAgain) {
  // Found by a new user: re-enrolled without a wipe, the host had applied the revision already
  // and sent nothing, while the control plane no longer counted the old identity's report — the
  // delivery read `outstanding` for ever.
  Host& h = add_host("kept-01");
  start_host(h);
  const std::string f = (dir() / "kept.txt").string();
  auto d1 = declare("kept-01", file_declaration({{f, "kept\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  ASSERT_EQ(h.proc->stop(), 0);
  enrol(h, /*reenrol=*/true);
  EXPECT_EQ(where(report(d1.get_int("delivery", 0)), "kept-01").first, "outstanding")
      << "the old identity's report does not count";
  start_host(h);
  EXPECT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u) << h.proc->stderr_text();
  auto show = node_show(*this, "kept-01");
  EXPECT_EQ(show.get_int("applied_revision", -1), 1);
  EXPECT_EQ(owned_of(show), std::vector<std::string>{"file:" + f});
  EXPECT_EQ(read_text(f), "kept\n");
  // Once reported by this identity, a restart applies nothing again.
  ASSERT_EQ(h.proc->stop(), 0);
  start_host(h);
  ASSERT_TRUE(eventually([&] { return h.proc->stderr_text().find("declaration already applied") != std::string::npos; },
                         20000))
      << h.proc->stderr_text();
}

TEST_F(DeliveryTruthTest, AHostWithWipedStateRemovesAnOrphanOnlyWhenItIsStillWhatTheMeshWrote) {
  Host& h = add_host("fresh-01");
  start_host(h);
  const std::string keep = (dir() / "keep.txt").string();
  const std::string ours = (dir() / "ours.txt").string();
  const std::string edited = (dir() / "edited.txt").string();
  auto d1 = declare("fresh-01", file_declaration({{keep, "keep\n"}, {ours, "ours\n"}, {edited, "edited\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  ASSERT_EQ(h.proc->stop(), 0);
  write_text(edited, "someone changed this since\n");
  // The ownership record is lost, the identity is kept (no re-enrolment).
  for (const char* f : {"state.json", "state.journal", "applied.json"}) fs::remove(h.state / f);
  auto d2 = declare("fresh-01", file_declaration({{keep, "keep\n"}}));
  start_host(h);
  ASSERT_EQ(count(report(d2.get_int("delivery", 0), "20s"), "applied"), 1u);
  EXPECT_TRUE(eventually([&] { return !fs::exists(ours); }, 10000)) << "our unchanged orphan is removed\n"
                                                                     << h.proc->stderr_text();
  EXPECT_TRUE(h.proc->wait_for_output("outcome=kept", 5000)) << h.proc->stderr_text();
  EXPECT_EQ(read_text(edited), "someone changed this since\n") << "changed since the mesh wrote it: kept";
  EXPECT_EQ(read_text(keep), "keep\n");
}

// --- #11.1: a retried success -------------------------------------------------------------------

TEST_F(DeliveryTruthTest, ARetriedSuccessReplacesTheFailureEverywhere) {
  Host& h = add_host("retry-01");
  start_host(h);
  const fs::path missing = dir() / "later";
  const std::string a = (dir() / "a.txt").string();
  const std::string b = (missing / "b.txt").string();
  auto d1 = declare("retry-01", file_declaration({{a, "a\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  auto d2 = declare("retry-01", file_declaration({{a, "a\n"}, {b, "b\n"}}));
  const std::int64_t del = d2.get_int("delivery", 0);
  sdk::Value r;
  ASSERT_TRUE(eventually([&] { return count(r = report(del), "failed") == 1; }, 20000)) << r.to_json();
  EXPECT_EQ(node_in_list(*this, "retry-01").get_string("last_outcome"), "failed");

  // The cause is fixed; the host re-applies revision 2 on its next start and succeeds.
  ASSERT_EQ(h.proc->stop(), 0);
  fs::create_directories(missing);
  start_host(h);
  ASSERT_TRUE(h.proc->wait_for_output("outcome=applied", 20000)) << h.proc->stderr_text();
  ASSERT_TRUE(eventually([&] { return count(r = report(del), "applied") == 1; }, 10000)) << r.to_json();
  EXPECT_EQ(count(r, "failed"), 0u);
  EXPECT_EQ(report_exit(*this, del), 0);
  auto n = node_in_list(*this, "retry-01");
  EXPECT_EQ(n.get_int("applied_revision", 0), 2);
  EXPECT_EQ(n.get_string("last_outcome"), "applied");
  auto show = node_show(*this, "retry-01");
  EXPECT_EQ(show.get_int("applied_revision", 0), 2);
  EXPECT_EQ(show.get_string("last_outcome"), "applied");
  EXPECT_EQ(show.find("applies")->as_array()[0].get_string("outcome"), "applied");
  EXPECT_EQ(owned_of(show), (std::vector<std::string>{"file:" + a, "file:" + b}))
      << "the recovery copy has what the retried apply took ownership of";
  EXPECT_TRUE(control_->wait_for_output("revision=2 outcome=applied recorded=true", 5000));
}

// --- #11.1 / #11.3: every state, in every view ----------------------------------------------------

TEST_F(DeliveryTruthTest, EveryStateOfTheOutcomeStateMachineAgreesAcrossReportNodesNodeShowAndExitCodes) {
  Host& h = add_host("walk-01");
  const std::string key = secret_key_of(h);
  Raw raw(nats_->url());
  const fs::path missing = dir() / "later";
  const std::string a = (dir() / "a.txt").string();
  const std::string good = file_declaration({{a, "a\n"}});
  const std::string bad = file_declaration({{a, "a\n"}, {(missing / "b.txt").string(), "b\n"}});

  auto check = [&](std::int64_t delivery, const std::string& expected, std::int64_t by_revision,
                   const std::string& by_outcome, const std::string& step) {
    auto r = report(delivery);
    auto [list, entry] = where(r, "walk-01");
    EXPECT_EQ(list, expected) << step << ": " << r.to_json();
    if (by_revision) {
      const sdk::Value* by = entry.find("by");
      ASSERT_TRUE(by && by->is_object()) << step << ": " << r.to_json();
      EXPECT_EQ(by->get_int("revision", 0), by_revision) << step;
      EXPECT_EQ(by->get_string("outcome"), by_outcome) << step;
    }
    EXPECT_EQ(report_exit(*this, delivery), list == "failed" ? 1 : 0) << step;
    EXPECT_EQ(report_exit(*this, delivery, true), list == "failed" || list == "outstanding" ? 1 : 0) << step;
  };
  auto views = [&](std::int64_t applied, std::int64_t declared, const std::string& outcome, const std::string& step) {
    for (const sdk::Value& v : {node_in_list(*this, "walk-01"), node_show(*this, "walk-01")}) {
      EXPECT_EQ(v.get_int("applied_revision", -1), applied) << step << ": " << v.to_json();
      EXPECT_EQ(v.get_int("declared_revision", -1), declared) << step;
      EXPECT_EQ(v.get_string("last_outcome"), outcome) << step;
    }
  };

  // outstanding: declared, the host not running.
  auto d1 = declare("walk-01", good).get_int("delivery", 0);
  check(d1, "outstanding", 0, "", "outstanding");
  views(0, 1, "", "outstanding");
  // superseded at once when a newer revision is written; `by` is outstanding until it ends.
  auto d2 = declare("walk-01", bad).get_int("delivery", 0);
  check(d1, "superseded", 2, "outstanding", "superseded at once");
  check(d2, "outstanding", 0, "", "newer outstanding");
  views(0, 2, "", "pending");
  // The newer one fails: the older reads superseded by 2 (failed).
  start_host(h);
  ASSERT_TRUE(eventually([&] { return where(report(d2), "walk-01").first == "failed"; }, 20000))
      << h.proc->stderr_text();
  check(d2, "failed", 0, "", "failed");
  check(d1, "superseded", 2, "failed", "superseded by a failure");
  views(0, 2, "failed", "failed");
  {
    auto n = node_in_list(*this, "walk-01");
    ASSERT_TRUE(eventually([&] { return !(n = node_in_list(*this, "walk-01")).get_string("state").empty(); }, 10000));
    EXPECT_TRUE(n.find("state_age_s")->is_int()) << "the heartbeat state comes with its age: " << n.to_json();
    EXPECT_TRUE(n.find("state_at")->is_string());
  }
  // failed → applied (a retried success); the older one follows.
  ASSERT_EQ(h.proc->stop(), 0);
  fs::create_directories(missing);
  start_host(h);
  ASSERT_TRUE(eventually([&] { return where(report(d2), "walk-01").first == "applied"; }, 20000))
      << h.proc->stderr_text();
  check(d2, "applied", 0, "", "retried success");
  check(d1, "superseded", 2, "applied", "superseded by an applied");
  views(2, 2, "applied", "applied");
  // applied is final: a newer revision never makes it superseded, a late failure is ignored.
  auto d3 = declare("walk-01", good).get_int("delivery", 0);
  ASSERT_TRUE(eventually([&] { return where(report(d3), "walk-01").first == "applied"; }, 20000));
  check(d2, "applied", 0, "", "applied stays applied");
  auto late = send_report(raw, "walk-01", key, report_body("walk-01", 2, "failed"));
  EXPECT_EQ(late.body.find("\"recorded\":true"), std::string::npos) << late.body;
  check(d2, "applied", 0, "", "failed never replaces applied");
  views(3, 3, "applied", "applied 3");
  // The host's own "superseded" (an apply cancelled for a newer revision) gives way to the late truth.
  ASSERT_EQ(h.proc->stop(), 0);
  auto d4 = declare("walk-01", good).get_int("delivery", 0);
  auto sup = send_report(raw, "walk-01", key, report_body("walk-01", 4, "superseded"));
  EXPECT_EQ(error_code(sup), "") << sup.body;
  check(d4, "superseded", 0, "", "cancelled by the host");
  auto d5 = declare("walk-01", good).get_int("delivery", 0);
  check(d4, "superseded", 5, "outstanding", "cancelled, then a newer one");
  auto truth = send_report(raw, "walk-01", key, report_body("walk-01", 4, "applied", {"file:" + a}));
  EXPECT_NE(truth.body.find("\"recorded\":true"), std::string::npos) << truth.body;
  check(d4, "applied", 0, "", "superseded gives way to the late applied");
  start_host(h);
  ASSERT_TRUE(eventually([&] { return where(report(d5), "walk-01").first == "applied"; }, 20000));
  check(d4, "applied", 0, "", "a later revision never rewrites an earlier outcome");
  check(d1, "superseded", 2, "applied", "the first delivery still reads the same");
  views(5, 5, "applied", "end");
}

}  // namespace
}  // namespace mesh::itest
