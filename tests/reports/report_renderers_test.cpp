// The built-in report renderers (plugins text, json, junit): the delivery report exactly as
// `mesh report` printed it before report plugins (these tests moved here from the CLI's
// render_test unchanged, but for the JUnit attributes added: <testsuites>, time), and the deploy
// report of `mesh deploy --output json`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "mesh/common/clock.h"
#include "mesh/common/json.h"
#include "mesh/support/report_text.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"
#include "renderers.h"

namespace mesh::reports {
namespace {

constexpr std::int64_t kNow = 1795935600000 + 10 * 60 * 1000;  // 2026-11-29T07:10:00Z

sdk::Value json(const std::string& text) {
  auto v = common::parse_json(text);
  EXPECT_TRUE(v) << text;
  return v ? *v : sdk::Value();
}

const char* kReport = R"({"delivery": 17, "declared": 3, "at": "2026-11-29T07:00:00Z",
  "applied": [{"node": "web-01", "revision": 43, "at": "2026-11-29T07:00:01Z"}],
  "failed": [{"node": "web-02", "revision": 43, "outcome": "failed", "resource": "file:/etc/x",
              "reason": "open /etc/x: Permission denied", "at": "2026-11-29T07:00:02Z"}],
  "outstanding": [{"node": "web-04", "revision": 43, "last_contact": "2026-11-29T07:06:00Z", "age_s": 240}],
  "superseded": []})";

TEST(ReportTextTest, MatchesTheDesignNotes) {
  EXPECT_EQ(render_text(json(kReport), kNow),
            "delivery 17 (2026-11-29T07:00:00Z)\n"
            "delivered    declaration updated for 3 nodes\n"
            "applied      1 of 3\n"
            "failed       1 — web-02: file:/etc/x: open /etc/x: Permission denied\n"
            "outstanding  1 — web-04 last seen 4 minutes ago\n");
}

TEST(ReportTextTest, AppliedLineIsAlwaysThereAndEmptyListsAreLeftOut) {
  auto r = json(R"({"delivery": 2, "declared": 1, "at": "2026-11-29T07:00:00Z",
    "applied": [], "failed": [], "outstanding": [], "superseded": []})");
  EXPECT_EQ(render_text(r, kNow),
            "delivery 2 (2026-11-29T07:00:00Z)\n"
            "delivered    declaration updated for 1 node\n"
            "applied      0 of 1\n");
}

TEST(ReportTextTest, NeverSeenSeveralOutstandingSeveralFailedAndSuperseded) {
  auto r = json(R"({"delivery": 5, "declared": 6, "at": "2026-11-29T07:00:00Z", "applied": [],
    "failed": [{"node": "a", "revision": 1, "outcome": "failed", "resource": "package:nginx", "reason": "E: 404\nNot Found"},
               {"node": "b", "revision": 1, "outcome": "refused", "resource": null, "reason": "older than applied"}],
    "outstanding": [{"node": "c", "revision": 1, "last_contact": null, "age_s": null},
                    {"node": "d", "revision": 1, "last_contact": "2026-11-25T07:10:00Z"}],
    "superseded": [{"node": "e", "revision": 1, "applied_revision": 3},
                   {"node": "f", "revision": 1, "applied_revision": 4}]})");
  EXPECT_EQ(render_text(r, kNow),
            "delivery 5 (2026-11-29T07:00:00Z)\n"
            "delivered    declaration updated for 6 nodes\n"
            "applied      0 of 6\n"
            "failed       2 — a: package:nginx: E: 404 Not Found\n"
            "                 b: refused: older than applied\n"
            "outstanding  2 — c last seen never, d last seen 4 days ago\n"
            "superseded   2 — e applied revision 3, f applied revision 4\n");
}

// #12.4: the error code between the resource and the reason, when the report has one.
TEST(ReportTextTest, AFailureShowsItsErrorCode) {
  auto r = json(R"({"delivery": 3, "declared": 2, "at": "2026-11-29T07:00:00Z", "applied": [],
    "failed": [{"node": "a", "revision": 1, "outcome": "failed", "resource": "file:/etc/x",
                "reason": "open /etc/x: Permission denied", "code": "permission_denied"},
               {"node": "b", "revision": 1, "outcome": "failed", "resource": "file:/etc/y",
                "reason": "stored before codes", "code": null}],
    "outstanding": [], "superseded": []})");
  const std::string text = render_text(r, kNow);
  EXPECT_NE(text.find("failed       2 — a: file:/etc/x: permission_denied: open /etc/x: Permission denied\n"
                      "                 b: file:/etc/y: stored before codes\n"),
            std::string::npos)
      << text;
  EXPECT_NE(render_junit(r, kNow).find("message=\"file:/etc/x: permission_denied: open /etc/x: Permission denied\""),
            std::string::npos);
}

TEST(ReportJunitTest, OneTestcasePerNode) {
  std::string x = render_junit(json(kReport), kNow);
  EXPECT_EQ(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  EXPECT_NE(x.find("<testsuite name=\"delivery 17\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" "
                   "time=\"2.000\" timestamp=\"2026-11-29T07:00:00Z\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<testcase classname=\"mesh.delivery.17\" name=\"web-01\" time=\"1.000\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<failure type=\"failed\" message=\"file:/etc/x: open /etc/x: Permission denied\">"
                   "open /etc/x: Permission denied</failure>"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<skipped message=\"outstanding: last seen 4 minutes ago (2026-11-29T07:06:00Z)\"/>"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("</testsuite>\n</testsuites>\n"), std::string::npos);
}

TEST(ReportJunitTest, EscapesXml) {
  auto r = json(R"({"delivery": 1, "declared": 1, "applied": [], "outstanding": [], "superseded": [],
    "failed": [{"node": "n", "revision": 1, "outcome": "failed", "resource": "file:/a<b>", "reason": "x & \"y\" 'z'"}]})");
  std::string x = render_junit(r, kNow);
  EXPECT_NE(x.find("message=\"file:/a&lt;b&gt;: x &amp; &quot;y&quot; &apos;z&apos;\""), std::string::npos) << x;
  EXPECT_EQ(x.find("<b>"), std::string::npos);
}

TEST(ReportTextTest, SupersededSaysByWhichRevisionAndHowThatOneEnded) {
  auto r = json(R"({"delivery": 5, "declared": 1, "at": "2026-11-29T07:00:00Z", "applied": [], "failed": [],
    "outstanding": [], "superseded": [{"node": "web-01", "revision": 3, "applied_revision": 0,
    "by": {"revision": 4, "delivery": 6, "outcome": "failed"}}]})");
  EXPECT_NE(render_text(r, kNow).find("superseded   1 — web-01 by revision 4 (delivery 6, failed)\n"),
            std::string::npos)
      << render_text(r, kNow);
}


// --- the deploy report (INTERFACE `mesh deploy --output json`) -------------------------------

const char* kDeploy = R"j({"deploy": 4, "module": "web", "version": "1.4.2", "operator": "alice", "selector": "role=web",
  "at": "2026-11-29T07:00:00Z", "declared": 5,
  "applied": [{"node": "web-01", "revision": 7, "at": "2026-11-29T07:00:03Z"},
              {"node": "web-03", "revision": 9, "at": "2026-11-29T07:01:00Z"},
              {"node": "web-05", "revision": 2, "at": "2026-11-29T07:01:30Z"}],
  "failed": [{"node": "web-02", "revision": 4, "outcome": "failed", "resource": "package:nginx",
              "code": "failed", "reason": "E: Failed to fetch nginx 404 Not Found", "at": "2026-11-29T07:01:05Z"}],
  "outstanding": [{"node": "web-04", "revision": 3, "last_contact": "2026-11-25T07:10:00Z", "age_s": 345600}],
  "superseded": [],
  "skipped": [{"node": "web-09", "reason": "ineligible: disk: 50 MiB free (at least 100 MiB)"}],
  "waves": [{"wave": 1, "delivery": 17, "nodes": ["web-01"], "at": "2026-11-29T07:00:00Z"},
            {"wave": 2, "delivery": 18, "nodes": ["web-02", "web-03", "web-04", "web-05"], "at": "2026-11-29T07:01:00Z"}],
  "halted": null})j";

TEST(DeployTextTest, ReadsLikeTheDeliveryReportWithSkippedNodes) {
  EXPECT_EQ(render_text(json(kDeploy), kNow),
            "deploy 4: module web 1.4.2 to role=web by alice (2026-11-29T07:00:00Z)\n"
            "delivered    declaration updated for 5 nodes in 2 waves (deliveries 17, 18)\n"
            "applied      3 of 5\n"
            "failed       1 — web-02: package:nginx: failed: E: Failed to fetch nginx 404 Not Found\n"
            "outstanding  1 — web-04 last seen 4 days ago\n"
            "skipped      1 — web-09: ineligible: disk: 50 MiB free (at least 100 MiB)\n");
}

TEST(DeployTextTest, HaltedNamesTheWaveTheNodeAndWhatWasNotWritten) {
  auto r = json(R"({"deploy": 5, "module": "web", "version": "1.4.3", "declared": 1,
    "applied": [], "outstanding": [], "superseded": [], "skipped": [],
    "failed": [{"node": "web-01", "revision": 8, "outcome": "failed", "resource": "file:/etc/motd",
                "code": null, "reason": "open: Permission denied"}],
    "waves": [{"wave": 1, "delivery": 19, "nodes": ["web-01"]},
              {"wave": 2, "delivery": null, "nodes": ["web-02", "web-03"]}],
    "halted": {"wave": 1, "node": "web-01", "reason": "file:/etc/motd: open: Permission denied"}})");
  EXPECT_EQ(render_text(r, kNow),
            "deploy 5: module web 1.4.3\n"
            "delivered    declaration updated for 1 node (delivery 19)\n"
            "applied      0 of 1\n"
            "failed       1 — web-01: file:/etc/motd: open: Permission denied\n"
            "halted at wave 1 — web-01: file:/etc/motd: open: Permission denied\n"
            "not written  2 — web-02, web-03\n");
  // A wave that timed out short of --min-applied: no node, the reason says it all.
  auto t = json(R"({"deploy": 6, "module": "web", "version": "1.4.3", "declared": 1, "applied": [], "failed": [],
    "outstanding": [{"node": "web-01", "revision": 9, "last_contact": "2026-11-25T07:10:00Z"}],
    "waves": [{"wave": 1, "delivery": 20, "nodes": ["web-01"]}, {"wave": 2, "nodes": ["web-02"]}],
    "halted": {"wave": 1, "reason": "wave 1: 0 of 1 applied within 10m; web-01 outstanding, last seen 4 days ago"}})");
  const std::string text = render_text(t, kNow);
  EXPECT_NE(text.find("halted at wave 1 — wave 1: 0 of 1 applied within 10m; web-01 outstanding, last seen 4 days ago\n"
                      "not written  1 — web-02\n"),
            std::string::npos)
      << text;
}

TEST(DeployTextTest, DryRunShowsPerNodeChangesAndSkipped) {
  auto r = json(R"({"dry_run": true, "deploy": null, "module": "web", "version": "2.0", "selector": "role=web",
    "nodes": [{"node": "web-01", "revision": 3, "action": "update", "added": ["file:/etc/motd"], "changed": ["package:nginx"], "removed": []},
              {"node": "web-02", "revision": 1, "action": "drop", "added": [], "changed": [], "removed": ["file:/etc/old"]},
              {"node": "web-03", "revision": 2, "action": "add", "added": [], "changed": [], "removed": []}],
    "unchanged": ["web-04"], "dropped": ["web-02"],
    "skipped": [{"node": "web-09", "reason": "never briefed"}], "halted": null})");
  EXPECT_EQ(render_text(r, kNow),
            "dry run: deploying module web 2.0 to role=web would write 3 nodes (nothing was written)\n"
            "  web-01 (update): added file:/etc/motd; changed package:nginx\n"
            "  web-02 (drop): removed file:/etc/old\n"
            "  web-03 (add): module versions only\n"
            "unchanged    1 — web-04\n"
            "dropped      1 — web-02 (module resources removed)\n"
            "skipped      1 — web-09: never briefed\n");
}

TEST(DeployTextTest, NothingToDeliverUnchangedAndDropped) {
  auto r = json(R"({"deploy": 7, "module": "web", "version": "1.4.2", "selector": "role=web", "operator": "ci",
    "delivery": null, "declared": 0, "applied": [], "failed": [], "outstanding": [], "superseded": [],
    "unchanged": ["web-01", "web-02"], "dropped": [], "skipped": [], "waves": [], "halted": null})");
  EXPECT_EQ(render_text(r, kNow),
            "deploy 7: module web 1.4.2 to role=web by ci\n"
            "delivered    nothing: no selected node's declaration changes\n"
            "unchanged    2 — web-01, web-02\n");
  auto one = json(R"({"deploy": 8, "module": "web", "version": "1.4.3", "delivery": 21, "declared": 2,
    "applied": [{"node": "web-01", "revision": 5}, {"node": "web-03", "revision": 2}], "failed": [], "outstanding": [],
    "superseded": [], "unchanged": [], "dropped": ["web-03"], "skipped": [],
    "waves": [{"wave": 1, "delivery": 21, "nodes": ["web-01", "web-03"]}], "halted": null})");
  EXPECT_EQ(render_text(one, kNow),
            "deploy 8: module web 1.4.3\n"
            "delivered    declaration updated for 2 nodes (delivery 21)\n"
            "applied      2 of 2\n"
            "dropped      1 — web-03 (module resources removed)\n");
}

TEST(DeployTextTest, UnchangedNodesAreCountedAsTheRevisionTheyHoldStands) {
  // Decision record 68: nothing written, but web-02 never applied the revision it holds.
  auto r = json(R"({"deploy": 9, "module": "web", "version": "1.4.2", "selector": "role=web", "operator": "ci",
    "delivery": null, "declared": 0,
    "applied": [{"node": "web-01", "revision": 4, "unchanged": true}], "failed": [],
    "outstanding": [{"node": "web-02", "revision": 3, "unchanged": true, "last_contact": null, "age_s": null}],
    "superseded": [], "unchanged": ["web-01", "web-02"], "dropped": [], "skipped": [], "waves": [], "halted": null})");
  EXPECT_EQ(render_text(r, kNow),
            "deploy 9: module web 1.4.2 to role=web by ci\n"
            "delivered    nothing: no selected node's declaration changes\n"
            "applied      1 of 2\n"
            "outstanding  1 — web-02 (unchanged, revision 3) last seen never\n"
            "unchanged    2 — web-01, web-02\n");
  // Written and unchanged nodes together: "of" counts both; a held failure names its revision.
  auto mixed = json(R"({"deploy": 10, "module": "web", "version": "1.4.2", "delivery": 22, "declared": 1,
    "applied": [{"node": "web-01", "revision": 5}], "outstanding": [], "superseded": [],
    "failed": [{"node": "web-03", "revision": 2, "unchanged": true, "outcome": "failed", "resource": "file:/x",
                "reason": "denied", "code": null}],
    "unchanged": ["web-03"], "dropped": [], "skipped": [],
    "waves": [{"wave": 1, "delivery": 22, "nodes": ["web-01"]}], "halted": null})");
  const std::string text = render_text(mixed, kNow);
  EXPECT_NE(text.find("applied      1 of 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("failed       1 — web-03 (unchanged, revision 2): file:/x: denied"), std::string::npos) << text;
}

TEST(DeployTextTest, ASupersededStagedDeployNamesTheNewerDeployAndItsUnwrittenNodes) {
  auto r = json(R"({"deploy": 11, "module": "web", "version": "1.0", "delivery": 30, "declared": 1,
    "applied": [], "failed": [], "outstanding": [],
    "superseded": [{"node": "web-01", "revision": 1, "applied_revision": 0,
                    "by": {"revision": 2, "delivery": 31, "outcome": "applied"}}],
    "unchanged": [], "dropped": [], "skipped": [], "state": "superseded", "superseded_by": 12,
    "waves": [{"wave": 1, "delivery": 30, "nodes": ["web-01"]}, {"wave": 2, "delivery": null, "nodes": ["web-02"]}],
    "halted": null})");
  const std::string text = render_text(r, kNow);
  EXPECT_NE(text.find("superseded by deploy 12 of module web (its later waves are not written)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("not written  1 — web-02\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("halted"), std::string::npos) << text;
  const std::string xml = render_junit(r, kNow);
  EXPECT_NE(xml.find("not written (wave 2): superseded by deploy 12"), std::string::npos) << xml;
  EXPECT_EQ(xml.find("<failure"), std::string::npos) << "superseded is not a failure: " << xml;
}

// A staged deploy still rolling out (a --wait that ended before its last wave): never read as
// done — how far it is and which nodes are still to come.
TEST(DeployTextTest, ARunningStagedDeploySaysWhichWavesAreNotWrittenYet) {
  auto r = json(R"({"deploy": 13, "module": "web", "version": "1.1", "delivery": 40, "declared": 1,
    "applied": [{"node": "web-01", "revision": 2}], "failed": [], "outstanding": [], "superseded": [],
    "unchanged": [], "dropped": [], "skipped": [], "state": "running",
    "waves": [{"wave": 1, "delivery": 40, "nodes": ["web-01"]}, {"wave": 2, "delivery": null, "nodes": ["web-02"]},
              {"wave": 3, "delivery": null, "nodes": ["web-03", "web-04"]}],
    "halted": null})");
  const std::string text = render_text(r, kNow);
  EXPECT_NE(text.find("applied      1 of 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("running: wave 1 of 3 written"), std::string::npos) << text;
  EXPECT_NE(text.find("mesh deploy --show 13"), std::string::npos) << text;
  EXPECT_NE(text.find("not written  3 — web-02, web-03, web-04\n"), std::string::npos) << text;
  // Done: nothing of the kind.
  auto done = json(R"({"deploy": 14, "module": "web", "version": "1.1", "delivery": 41, "declared": 1,
    "applied": [{"node": "web-01", "revision": 2}], "failed": [], "outstanding": [], "superseded": [],
    "unchanged": [], "dropped": [], "skipped": [], "state": "done",
    "waves": [{"wave": 1, "delivery": 41, "nodes": ["web-01"]}], "halted": null})");
  EXPECT_EQ(render_text(done, kNow).find("running"), std::string::npos);
}

TEST(DeployJunitTest, UnchangedNodesHaveOneCaseEachInTheirOwnSuite) {
  auto r = json(R"({"deploy": 9, "module": "web", "version": "1.4.2", "delivery": null, "declared": 0,
    "applied": [{"node": "web-01", "revision": 4, "unchanged": true, "at": "2026-11-29T07:00:01Z"}], "failed": [],
    "outstanding": [{"node": "web-02", "revision": 3, "unchanged": true, "last_contact": null, "age_s": null}],
    "superseded": [], "unchanged": ["web-01", "web-02"], "dropped": [], "skipped": [], "waves": [], "halted": null})");
  const std::string xml = render_junit(r, kNow);
  EXPECT_NE(xml.find("deploy 9 unchanged (the revision each node holds)"), std::string::npos) << xml;
  std::size_t cases = 0;
  for (std::size_t at = xml.find("<testcase"); at != std::string::npos; at = xml.find("<testcase", at + 1)) ++cases;
  EXPECT_EQ(cases, 2u) << "one case per node, not one more for `unchanged`: " << xml;
  EXPECT_NE(xml.find("outstanding: last seen"), std::string::npos) << xml;
}

// --- JUnit, checked with xmllint: well-formed, and the attributes CI systems read -----------------

struct Xml {
  testing::TempDir dir;
  std::string file;
  explicit Xml(const std::string& text) : file((dir.path() / "report.xml").string()) {
    std::ofstream(file) << text;
  }
  /// xmllint --noout: exit 0 when well-formed.
  int lint() const { return testing::run_process({"xmllint", "--noout", file}).exit_code; }
  /// An XPath expression's string value.
  std::string xpath(const std::string& expr) const {
    auto r = testing::run_process({"xmllint", "--xpath", "string(" + expr + ")", file});
    if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();  // some versions add one
    return r.out;
  }
  std::string count(const std::string& expr) const { return xpath("count(" + expr + ")"); }
};

TEST(JunitXmlTest, DeliveryReportIsWellFormedWithTheAttributesCiReads) {
  auto r = json(kReport);
  Xml x(render_junit(r, kNow));
  ASSERT_EQ(x.lint(), 0) << render_junit(r, kNow);
  EXPECT_EQ(x.count("/testsuites/testsuite"), "1");
  EXPECT_EQ(x.xpath("/testsuites/@tests"), "3");
  EXPECT_EQ(x.xpath("/testsuites/@failures"), "1");
  EXPECT_EQ(x.xpath("/testsuites/@skipped"), "1");
  EXPECT_EQ(x.xpath("/testsuites/testsuite/@name"), "delivery 17");
  EXPECT_EQ(x.xpath("/testsuites/testsuite/@time"), "2.000");
  EXPECT_EQ(x.count("/testsuites/testsuite/testcase"), "3");
  EXPECT_EQ(x.xpath("//testcase[@name='web-01']/@classname"), "mesh.delivery.17");
  EXPECT_EQ(x.xpath("//testcase[@name='web-01']/@time"), "1.000");
  EXPECT_EQ(x.count("//testcase[@name='web-01']/*"), "0") << "applied = passed";
  EXPECT_EQ(x.xpath("//testcase[@name='web-02']/failure/@message"), "file:/etc/x: open /etc/x: Permission denied");
  EXPECT_EQ(x.xpath("//testcase[@name='web-02']/failure/@type"), "failed");
  EXPECT_EQ(x.xpath("//testcase[@name='web-04']/skipped/@message"),
            "outstanding: last seen 4 minutes ago (2026-11-29T07:06:00Z)");
}

TEST(JunitXmlTest, DeployIsOneSuitePerDeliveryPlusTheNodesNotDelivered) {
  Xml x(render_junit(json(kDeploy), kNow));
  ASSERT_EQ(x.lint(), 0) << render_junit(json(kDeploy), kNow);
  EXPECT_EQ(x.xpath("/testsuites/@name"), "deploy 4: web 1.4.2");
  EXPECT_EQ(x.count("/testsuites/testsuite"), "3");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[1]/@name"), "deploy 4 wave 1 (delivery 17)");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[1]/@tests"), "1");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[1]/@time"), "3.000");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[2]/@name"), "deploy 4 wave 2 (delivery 18)");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[2]/@tests"), "4");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[2]/@failures"), "1");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[2]/@skipped"), "1");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[2]/@time"), "30.000");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[2]/@timestamp"), "2026-11-29T07:01:00Z");
  EXPECT_EQ(x.xpath("/testsuites/testsuite[3]/@name"), "deploy 4 not delivered");
  EXPECT_EQ(x.xpath("//testcase[@name='web-09']/skipped/@message"),
            "skipped: ineligible: disk: 50 MiB free (at least 100 MiB)");
  EXPECT_EQ(x.xpath("//testcase[@name='web-02']/failure/@message"),
            "package:nginx: failed: E: Failed to fetch nginx 404 Not Found");
  EXPECT_EQ(x.xpath("//testcase[@name='web-04']/skipped/@message"),
            "outstanding: last seen 4 days ago (2026-11-25T07:10:00Z)");
  EXPECT_EQ(x.xpath("//testcase[@name='web-03']/@classname"), "mesh.deploy.web");
  EXPECT_EQ(x.xpath("/testsuites/@tests"), "6");
  EXPECT_EQ(x.xpath("/testsuites/@failures"), "1");
  EXPECT_EQ(x.xpath("/testsuites/@skipped"), "2");
  EXPECT_EQ(x.xpath("/testsuites/@errors"), "0");
  EXPECT_EQ(x.xpath("/testsuites/@time"), "33.000");
}

// The control plane gives millisecond instants (`at_ms`) beside the whole-second `at`: an apply
// that answered 250 ms after its delivery's write is 0.250 s, not 0.000.
TEST(JunitXmlTest, TimesCountInMillisecondsFromTheDeliverysWriteToEachAnswer) {
  auto r = json(R"({"deploy": 7, "module": "web", "version": "2", "declared": 3, "at": "2026-11-29T07:00:00Z",
    "at_ms": 1795935600000,
    "applied": [{"node": "web-01", "revision": 3, "at": "2026-11-29T07:00:00Z", "at_ms": 1795935600250},
                {"node": "web-03", "revision": 3, "at": "2026-11-29T07:00:02Z", "at_ms": 1795935602100}],
    "failed": [{"node": "web-02", "revision": 3, "outcome": "failed", "resource": "file:/x", "reason": "no",
                "at": "2026-11-29T07:00:01Z", "at_ms": 1795935601500}],
    "outstanding": [{"node": "web-04", "revision": 3, "last_contact": null}], "superseded": [],
    "waves": [{"wave": 1, "delivery": 21, "nodes": ["web-01", "web-02"], "at": "2026-11-29T07:00:00Z",
               "at_ms": 1795935600100},
              {"wave": 2, "delivery": 22, "nodes": ["web-03", "web-04"], "at": "2026-11-29T07:00:01Z",
               "at_ms": 1795935601900}]})");
  Xml x(render_junit(r, kNow));
  ASSERT_EQ(x.lint(), 0) << render_junit(r, kNow);
  EXPECT_EQ(x.xpath("//testcase[@name='web-01']/@time"), "0.150") << "from its wave's write";
  EXPECT_EQ(x.xpath("//testcase[@name='web-02']/@time"), "1.400");
  EXPECT_EQ(x.xpath("//testcase[@name='web-03']/@time"), "0.200");
  EXPECT_EQ(x.xpath("//testcase[@name='web-04']/@time"), "0.000") << "outstanding: no answer";
  EXPECT_EQ(x.xpath("/testsuites/testsuite[1]/@time"), "1.400") << "a suite's span: its longest case";
  EXPECT_EQ(x.xpath("/testsuites/testsuite[2]/@time"), "0.200");
  EXPECT_EQ(x.xpath("/testsuites/@time"), "1.600") << "the sum of its suites";
  // A delivery report alone: from the delivery's own at_ms.
  auto d = json(R"({"delivery": 9, "declared": 1, "at": "2026-11-29T07:00:00Z", "at_ms": 1795935600000,
    "applied": [{"node": "web-01", "revision": 3, "at": "2026-11-29T07:00:00Z", "at_ms": 1795935600420}],
    "failed": [], "outstanding": [], "superseded": []})");
  Xml y(render_junit(d, kNow));
  EXPECT_EQ(y.xpath("//testcase[@name='web-01']/@time"), "0.420");
}

TEST(JunitXmlTest, AHaltLeavesLaterWavesSkippedAndATimeoutHaltFails) {
  auto r = json(R"({"deploy": 6, "module": "web", "version": "1.4.3", "declared": 1, "applied": [], "failed": [],
    "outstanding": [{"node": "web-01", "revision": 9, "last_contact": null}],
    "waves": [{"wave": 1, "delivery": 20, "nodes": ["web-01"]}, {"wave": 2, "delivery": null, "nodes": ["web-02"]}],
    "halted": {"wave": 1, "reason": "wave 1: 0 of 1 applied within 10m; web-01 outstanding, last seen never"}})");
  Xml x(render_junit(r, kNow));
  ASSERT_EQ(x.lint(), 0) << render_junit(r, kNow);
  EXPECT_EQ(x.xpath("//testcase[@name='web-01']/skipped/@message"), "outstanding: last seen never");
  EXPECT_EQ(x.xpath("//testcase[@name='web-02']/skipped/@message"),
            "not written (wave 2): deploy halted at wave 1 — wave 1: 0 of 1 applied within 10m; web-01 "
            "outstanding, last seen never");
  EXPECT_EQ(x.xpath("//testcase[@name='(deploy halted)']/failure/@type"), "halted");
  EXPECT_EQ(x.xpath("/testsuites/@failures"), "1") << "the deploy exits 1; CI shows it failed too";
}

TEST(JunitXmlTest, HostileStringsStayWellFormed) {
  auto r = json(R"({"delivery": 9, "declared": 1, "applied": [], "outstanding": [], "superseded": [],
    "failed": [{"node": "n", "revision": 1, "outcome": "failed", "resource": "file:/x]]>",
                "reason": "\u0001\u001b[31m</failure><x a='1'>&amp;"}]})");
  Xml x(render_junit(r, kNow));
  EXPECT_EQ(x.lint(), 0) << render_junit(r, kNow);
  EXPECT_EQ(x.count("//x"), "0");
}

// --- shared pieces -----------------------------------------------------------------------------

TEST(ReportSupportTest, AgesReadAsMeshNodesReadsThem) {
  for (std::int64_t s : {0, 1, 2, 59, 60, 61, 3599, 3600, 86399, 86400, 86400 * 4 + 5, -5})
    EXPECT_EQ(support::age_text(kNow - s * 1000, kNow), common::format_age(kNow - s * 1000, kNow)) << s;
  EXPECT_EQ(support::parse_rfc3339_ms("2026-11-29T07:10:00Z"), kNow);
  EXPECT_EQ(support::parse_rfc3339_ms("2026-11-29T07:10:00.250Z"), kNow + 250);
  EXPECT_EQ(support::parse_rfc3339_ms("2026-11-29T07:10:00+00:00"), kNow);
  EXPECT_FALSE(support::parse_rfc3339_ms("yesterday"));
  EXPECT_EQ(support::parse_rfc3339_ms("2026-11-29T07:10:00Z"), common::parse_rfc3339("2026-11-29T07:10:00Z"));
}

}  // namespace
}  // namespace mesh::reports

namespace mesh::reports {
namespace {

TEST(JunitXmlTest2, DryRunAndUnchangedNodesAreWellFormed) {
  auto r = json(R"({"dry_run": true, "deploy": null, "module": "web", "version": "2.0",
    "nodes": [{"node": "web-01", "action": "update", "added": ["file:/etc/motd"], "changed": [], "removed": []}],
    "unchanged": ["web-04"], "dropped": [], "skipped": [{"node": "web-09", "reason": "never briefed"}], "halted": null})");
  Xml x(render_junit(r, kNow));
  ASSERT_EQ(x.lint(), 0) << render_junit(r, kNow);
  EXPECT_EQ(x.xpath("/testsuites/@name"), "deploy web 2.0 (dry run)");
  EXPECT_EQ(x.xpath("//testcase[@name='web-01']/system-out"), "added file:/etc/motd\n");
  EXPECT_EQ(x.xpath("//testcase[@name='web-04']/skipped/@message"), "unchanged: its declaration already carries web 2.0");
  EXPECT_EQ(x.xpath("//testcase[@name='web-09']/skipped/@message"), "skipped: never briefed");
}

}  // namespace
}  // namespace mesh::reports
