// The `junit` report plugin's XML against what CI systems read (tests/reports/junit.xsd, with
// `xmllint --schema`) and against itself: every count attribute agrees with the elements it
// counts, at every level, and no suite names a node twice. Run over every shape of report the
// plugin renders (delivery, deploy with waves and skipped nodes, halted, dry run, empty, hostile
// strings, a few hundred nodes), rendered by the plugin's renderer.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "junit_checks.h"
#include "mesh/common/json.h"
#include "renderers.h"

namespace mesh::reports {
namespace {

using testing::junit::Checked;
using testing::junit::expect_ci_readable;

constexpr std::int64_t kNow = 1795935600000 + 10 * 60 * 1000;  // 2026-11-29T07:10:00Z

sdk::Value json(const std::string& text) {
  auto v = common::parse_json(text);
  EXPECT_TRUE(v) << v.error().describe() << ": " << text;
  return v ? *v : sdk::Value();
}

const char* kDelivery = R"({"delivery": 17, "declared": 5, "at": "2026-11-29T07:00:00Z",
  "applied": [{"node": "web-01", "revision": 43, "at": "2026-11-29T07:00:01Z"}],
  "failed": [{"node": "web-02", "revision": 43, "outcome": "failed", "resource": "file:/etc/x", "code": "permission_denied",
              "reason": "open /etc/x: Permission denied", "at": "2026-11-29T07:00:02Z"},
             {"node": "web-03", "revision": 43, "outcome": "refused", "resource": null, "code": null, "reason": "older than applied"}],
  "outstanding": [{"node": "web-04", "revision": 43, "last_contact": "2026-11-29T07:06:00Z", "age_s": 240},
                  {"node": "web-06", "revision": 43, "last_contact": null, "age_s": null}],
  "superseded": [{"node": "web-05", "revision": 43, "applied_revision": 44,
                  "by": {"revision": 44, "delivery": 18, "outcome": "applied"}}]})";

const char* kDeploy = R"j({"deploy": 4, "module": "web", "version": "1.4.2", "operator": "alice", "selector": "role=web",
  "at": "2026-11-29T07:00:00Z", "declared": 5,
  "applied": [{"node": "web-01", "revision": 7, "at": "2026-11-29T07:00:03Z"},
              {"node": "web-03", "revision": 9, "at": "2026-11-29T07:01:00Z"},
              {"node": "web-05", "revision": 2, "at": "2026-11-29T07:01:30Z"}],
  "failed": [{"node": "web-02", "revision": 4, "outcome": "failed", "resource": "package:nginx",
              "code": "failed", "reason": "E: Failed to fetch nginx 404 Not Found", "at": "2026-11-29T07:01:05Z"}],
  "outstanding": [{"node": "web-04", "revision": 3, "last_contact": "2026-11-25T07:10:00Z", "age_s": 345600}],
  "superseded": [],
  "skipped": [{"node": "web-09", "reason": "ineligible: disk: 50 MiB free (at least 100 MiB)"},
              {"node": "web-10", "reason": "never briefed"}],
  "waves": [{"wave": 1, "delivery": 17, "nodes": ["web-01"], "at": "2026-11-29T07:00:00Z"},
            {"wave": 2, "delivery": 18, "nodes": ["web-02", "web-03", "web-04", "web-05"], "at": "2026-11-29T07:01:00Z"}],
  "halted": null})j";

const char* kHaltedByFailure = R"j({"deploy": 5, "module": "web", "version": "1.4.3", "operator": "ci", "declared": 1,
  "at": "2026-11-29T07:00:00Z",
  "applied": [], "outstanding": [], "superseded": [], "skipped": [],
  "failed": [{"node": "web-01", "revision": 8, "outcome": "failed", "resource": "package:nginx", "code": "failed",
              "reason": "E: 404 Not Found", "at": "2026-11-29T07:00:04Z"}],
  "waves": [{"wave": 1, "delivery": 19, "nodes": ["web-01"], "at": "2026-11-29T07:00:00Z"},
            {"wave": 2, "delivery": null, "nodes": ["web-02", "web-03"]},
            {"wave": 3, "nodes": ["web-04"]}],
  "halted": {"wave": 1, "node": "web-01", "reason": "package:nginx: E: 404 Not Found"}})j";

const char* kHaltedByTimeout = R"({"deploy": 6, "module": "web", "version": "1.4.3", "declared": 1, "applied": [], "failed": [],
  "outstanding": [{"node": "web-01", "revision": 9, "last_contact": null}], "superseded": [], "skipped": [],
  "waves": [{"wave": 1, "delivery": 20, "nodes": ["web-01"]}, {"wave": 2, "delivery": null, "nodes": ["web-02"]}],
  "halted": {"wave": 1, "node": "", "reason": "wave 1: 0 of 1 applied within 10m; web-01 outstanding, last seen never"}})";

const char* kDryRun = R"({"dry_run": true, "deploy": null, "module": "web", "version": "2.0",
  "nodes": [{"node": "web-01", "action": "update", "added": ["file:/etc/motd"], "changed": ["file:/etc/x"], "removed": []},
            {"node": "web-02", "action": "drop", "added": [], "changed": [], "removed": ["file:/etc/motd"]}],
  "changes": [{"node": "web-01", "added": ["file:/etc/motd"], "changed": ["file:/etc/x"], "removed": []}],
  "unchanged": ["web-04"], "dropped": ["web-02"], "skipped": [{"node": "web-09", "reason": "never briefed"}],
  "halted": null})";

TEST(JunitSchemaTest, EveryReportShapeIsWhatCiSystemsRead) {
  const std::vector<std::pair<std::string, std::string>> fixtures = {
      {"delivery", kDelivery},
      {"empty delivery", R"({"delivery": 2, "declared": 0, "at": "2026-11-29T07:00:00Z", "applied": [], "failed": [],
                             "outstanding": [], "superseded": []})"},
      {"delivery without at", R"({"delivery": 3, "declared": 1, "applied": [{"node": "a", "revision": 1}],
                                  "failed": [], "outstanding": [], "superseded": []})"},
      {"deploy", kDeploy},
      {"deploy halted by a failure", kHaltedByFailure},
      {"deploy halted by a timeout", kHaltedByTimeout},
      {"dry run", kDryRun},
      {"deploy with nothing to deliver", R"({"deploy": 7, "module": "web", "version": "1.0", "declared": 0,
          "applied": [], "failed": [], "outstanding": [], "superseded": [], "skipped": [],
          "unchanged": ["web-01", "web-02"], "waves": [], "halted": null})"},
  };
  for (const auto& [what, report] : fixtures) {
    SCOPED_TRACE(what);
    expect_ci_readable(render_junit(json(report), kNow), what);
  }
}

TEST(JunitSchemaTest, HostileStringsStayValid) {
  // What a node may put in a reason or a resource id: markup, a CDATA end, quotes, control
  // characters, non-ASCII text, 100 KB.
  sdk::Value r = json(R"({"delivery": 9, "declared": 3, "applied": [], "outstanding": [], "superseded": []})");
  sdk::Value failed = sdk::Value::array();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"file:/x]]><x a='1'>\"", "\x01\x1b[31m</failure><x a='1'>&amp;\x7f"},
      {"file:/etc/motd", "caf\xc3\xa9 \xe2\x9c\x93 line one\nline two\r\n\ttabbed"},
      {"package:nginx", std::string(100 * 1024, 'z')},
  };
  int i = 0;
  for (const auto& [resource, reason] : bad) {
    sdk::Value f = sdk::Value::object();
    f.set("node", "n-" + std::to_string(++i));
    f.set("revision", 1);
    f.set("outcome", "failed");
    f.set("resource", resource);
    f.set("reason", reason);
    failed.as_array().push_back(std::move(f));
  }
  r.set("failed", std::move(failed));
  const std::string xml = render_junit(r, kNow);
  expect_ci_readable(xml, "hostile strings");
  Checked c(xml);
  EXPECT_EQ(c.xpath("count(//x)"), "0");
  EXPECT_EQ(c.xpath("//testcase[@name='n-2']/failure/@message"),
            "file:/etc/motd: caf\xc3\xa9 \xe2\x9c\x93 line one line two  \ttabbed");
}

TEST(JunitSchemaTest, AFleetOfThreeHundredNodes) {
  sdk::Value r = json(R"({"delivery": 30, "declared": 300, "at": "2026-11-29T07:00:00Z", "superseded": []})");
  sdk::Value applied = sdk::Value::array(), failed = sdk::Value::array(), outstanding = sdk::Value::array();
  for (int i = 0; i < 300; ++i) {
    sdk::Value e = sdk::Value::object();
    e.set("node", "node-" + std::to_string(i));
    e.set("revision", 2);
    if (i % 10 == 3) {
      e.set("outcome", "failed");
      e.set("resource", "file:/etc/x");
      e.set("reason", "boom " + std::to_string(i));
      failed.as_array().push_back(std::move(e));
    } else if (i % 10 == 7) {
      e.set("last_contact", "2026-11-29T06:00:00Z");
      outstanding.as_array().push_back(std::move(e));
    } else {
      e.set("at", "2026-11-29T07:00:0" + std::to_string(i % 10) + "Z");
      applied.as_array().push_back(std::move(e));
    }
  }
  r.set("applied", std::move(applied));
  r.set("failed", std::move(failed));
  r.set("outstanding", std::move(outstanding));
  const std::string xml = render_junit(r, kNow);
  expect_ci_readable(xml, "300 nodes");
  Checked c(xml);
  EXPECT_EQ(c.xpath("/testsuites/@tests"), "300");
  EXPECT_EQ(c.xpath("/testsuites/@failures"), "30");
  EXPECT_EQ(c.xpath("/testsuites/@skipped"), "30");
}

// The schema is not a rubber stamp: what CI systems would misread is refused.
TEST(JunitSchemaTest, TheSchemaRefusesWhatCiSystemsMisread) {
  const std::string ok =
      "<testsuites tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0.000\">"
      "<testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0.000\">"
      "<testcase name=\"a\" classname=\"c\" time=\"0.000\"/></testsuite></testsuites>";
  EXPECT_EQ(Checked(ok).validate().exit_code, 0) << Checked(ok).validate().err;
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_NE(Checked(replace(ok, "classname=\"c\" ", "")).validate().exit_code, 0);
  EXPECT_NE(Checked(replace(ok, "<testsuite name=\"s\" tests=\"1\"", "<testsuite name=\"s\" tests=\"one\""))
                .validate()
                .exit_code,
            0);
  EXPECT_NE(Checked(replace(ok, "time=\"0.000\"/>", "time=\"0.000\"><failure message=\"x\"/><skipped/></testcase>"))
                .validate()
                .exit_code,
            0);
  EXPECT_NE(Checked(replace(ok, "time=\"0.000\"/>", "time=\"0.000\"><flaky/></testcase>")).validate().exit_code, 0);
  EXPECT_NE(Checked(replace(ok, "<testsuite name=\"s\"", "<testsuite name=\"\"")).validate().exit_code, 0);
  // A count the schema cannot see is wrong: the XPath checks do.
  const Checked miscounted(replace(ok, "<testsuite name=\"s\" tests=\"1\"", "<testsuite name=\"s\" tests=\"2\""));
  EXPECT_EQ(miscounted.validate().exit_code, 0);
  EXPECT_EQ(miscounted.holds("count(/testsuites/testsuite[@tests != count(testcase)]) = 0"), "false");
}

}  // namespace
}  // namespace mesh::reports
