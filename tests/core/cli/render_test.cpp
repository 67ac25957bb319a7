#include <gtest/gtest.h>

#include "mesh/cli/exit_codes.h"
#include "mesh/cli/render.h"
#include "mesh/common/json.h"

namespace mesh::cli {
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
  EXPECT_EQ(render_report_text(json(kReport), kNow),
            "delivery 17 (2026-11-29T07:00:00Z)\n"
            "delivered    declaration updated for 3 nodes\n"
            "applied      1 of 3\n"
            "failed       1 — web-02: file:/etc/x: open /etc/x: Permission denied\n"
            "outstanding  1 — web-04 last seen 4 minutes ago\n");
}

TEST(ReportTextTest, AppliedLineIsAlwaysThereAndEmptyListsAreLeftOut) {
  auto r = json(R"({"delivery": 2, "declared": 1, "at": "2026-11-29T07:00:00Z",
    "applied": [], "failed": [], "outstanding": [], "superseded": []})");
  EXPECT_EQ(render_report_text(r, kNow),
            "delivery 2 (2026-11-29T07:00:00Z)\n"
            "delivered    declaration updated for 1 node\n"
            "applied      0 of 1\n");
}

TEST(ReportTextTest, NeverSeenSeveralOutstandingSeveralFailedAndSuperseded) {
  auto r = json(R"({"delivery": 5, "declared": 6, "at": "2026-11-29T07:00:00Z", "applied": [],
    "failed": [{"node": "a", "revision": 1, "outcome": "failed", "resource": "package:nginx", "reason": "E: 404\nNot Found"},
               {"node": "b", "revision": 1, "outcome": "refused", "resource": "", "reason": "older than applied"}],
    "outstanding": [{"node": "c", "revision": 1, "last_contact": null, "age_s": null},
                    {"node": "d", "revision": 1, "last_contact": "2026-11-25T07:10:00Z"}],
    "superseded": [{"node": "e", "revision": 1, "applied_revision": 3},
                   {"node": "f", "revision": 1, "applied_revision": 4}]})");
  EXPECT_EQ(render_report_text(r, kNow),
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
  const std::string text = render_report_text(r, kNow);
  EXPECT_NE(text.find("failed       2 — a: file:/etc/x: permission_denied: open /etc/x: Permission denied\n"
                      "                 b: file:/etc/y: stored before codes\n"),
            std::string::npos)
      << text;
  EXPECT_NE(render_report_junit(r, kNow).find("message=\"file:/etc/x: permission_denied: open /etc/x: Permission denied\""),
            std::string::npos);
  auto n = json(R"({"name": "a", "applies": [
    {"revision": 2, "outcome": "failed", "at": "2026-11-29T07:00:02Z", "resource": "file:/etc/x",
     "reason": "busy", "code": "transient"},
    {"revision": 1, "outcome": "applied", "at": "2026-11-29T07:00:01Z", "resource": "", "reason": "", "code": null}]})");
  const std::string show = render_node_text(n, kNow);
  EXPECT_NE(show.find("  2  failed   2026-11-29T07:00:02Z  file:/etc/x: transient: busy\n"), std::string::npos) << show;
}

TEST(ReportJunitTest, OneTestcasePerNode) {
  std::string x = render_report_junit(json(kReport), kNow);
  EXPECT_EQ(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  EXPECT_NE(x.find("<testsuite name=\"delivery 17\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" "
                   "timestamp=\"2026-11-29T07:00:00Z\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<testcase classname=\"mesh.delivery.17\" name=\"web-01\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<failure type=\"failed\" message=\"file:/etc/x: open /etc/x: Permission denied\">"
                   "open /etc/x: Permission denied</failure>"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<skipped message=\"outstanding: last seen 4 minutes ago (2026-11-29T07:06:00Z)\"/>"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("</testsuite>\n"), std::string::npos);
}

TEST(ReportJunitTest, EscapesXml) {
  auto r = json(R"({"delivery": 1, "declared": 1, "applied": [], "outstanding": [], "superseded": [],
    "failed": [{"node": "n", "revision": 1, "outcome": "failed", "resource": "file:/a<b>", "reason": "x & \"y\" 'z'"}]})");
  std::string x = render_report_junit(r, kNow);
  EXPECT_NE(x.find("message=\"file:/a&lt;b&gt;: x &amp; &quot;y&quot; &apos;z&apos;\""), std::string::npos) << x;
  EXPECT_EQ(x.find("<b>"), std::string::npos);
}

TEST(ReportTextTest, SupersededSaysByWhichRevisionAndHowThatOneEnded) {
  auto r = json(R"({"delivery": 5, "declared": 1, "at": "2026-11-29T07:00:00Z", "applied": [], "failed": [],
    "outstanding": [], "superseded": [{"node": "web-01", "revision": 3, "applied_revision": 0,
    "by": {"revision": 4, "delivery": 6, "outcome": "failed"}}]})");
  EXPECT_NE(render_report_text(r, kNow).find("superseded   1 — web-01 by revision 4 (delivery 6, failed)\n"),
            std::string::npos)
      << render_report_text(r, kNow);
}

TEST(NodesTextTest, TableWithAgeAndTimestampAndNever) {
  auto nodes = json(R"([
    {"name": "laptop-7", "last_contact": "2026-11-08T07:10:00Z", "age_s": 1814400, "applied_revision": 3,
     "last_outcome": "applied", "eligible": true},
    {"name": "web-01", "last_contact": "2026-11-29T07:06:00Z", "age_s": 240, "applied_revision": 43,
     "declared_revision": 44, "last_outcome": "failed", "eligible": false, "state": "applying",
     "state_at": "2026-11-29T07:07:00Z", "state_age_s": 180},
    {"name": "web-09", "last_contact": null, "age_s": null, "applied_revision": 0, "last_outcome": "", "eligible": true}])");
  EXPECT_EQ(render_nodes_text(nodes, kNow),
            "NAME      ELIGIBLE  LAST-CONTACT                          REVISION          OUTCOME  STATE\n"
            "laptop-7  yes       21 days ago (2026-11-08T07:10:00Z)    3                 applied  -\n"
            "web-01    no        4 minutes ago (2026-11-29T07:06:00Z)  43 (declared 44)  failed   applying, 3 minutes ago\n"
            "web-09    yes       never                                 -                 -        -\n");
  EXPECT_EQ(render_nodes_text(json("[]"), kNow), "no nodes enrolled (issue a token with: mesh token issue NODE)\n");
}

TEST(OtherTextTest, DeclareRollbackTokensHistory) {
  EXPECT_EQ(render_declared_text(json(R"({"delivery": 17, "nodes": ["web-01"], "revision": 43})")),
            "delivery 17: declared revision 43 for web-01\n");
  EXPECT_EQ(render_rollback_text(json(R"({"delivery": 18, "nodes": ["web-01"], "revision": 44, "to": 41})"), "web-01"),
            "delivery 18: web-01 rolled back to revision 41 as revision 44\n");
  EXPECT_EQ(render_tokens_text(json("[]")), "no outstanding tokens\n");
  EXPECT_EQ(render_tokens_text(json(R"([{"id": "Ab12Cd34", "node": "web-01", "expires_at": "2026-11-30T07:00:00Z", "reenrol": true}])")),
            "ID        NODE    EXPIRES               REENROL\n"
            "Ab12Cd34  web-01  2026-11-30T07:00:00Z  yes\n");
  std::string issued = render_token_issued_text(
      json(R"({"node": "web-01", "token": "SECRET", "id": "Ab12Cd34", "expires_at": "2026-11-30T07:00:00Z", "reenrol": false})"));
  EXPECT_EQ(issued.rfind("token    SECRET\n", 0), 0u) << issued;
  EXPECT_NE(issued.find("mesh-host enrol --config host.toml --token SECRET"), std::string::npos);
  EXPECT_EQ(render_history_text(json(R"([{"revision": 2, "at": "2026-11-29T07:00:00Z", "delivery": 5,
      "digest": "0123456789abcdef0123"}])")),
            "REVISION  CREATED               DELIVERY  DIGEST\n"
            "2         2026-11-29T07:00:00Z  5         0123456789ab\n");
  // With compositions: which module versions each revision carried, who asked and why.
  EXPECT_EQ(render_history_text(json(R"([{"revision": 3, "at": "2026-11-29T08:00:00Z", "delivery": 7,
      "digest": "abcdefabcdefabcdef", "modules": {"db": "2", "web": "1.4.2"}, "operator": "ci", "cause": "deploy",
      "deploy": 4}, {"revision": 2, "at": "2026-11-29T07:00:00Z", "delivery": 5, "digest": "0123456789abcdef0123",
      "modules": {}, "operator": null, "cause": null, "deploy": null}])")),
            "REVISION  CREATED               DELIVERY  CAUSE     OPERATOR  MODULES         DIGEST\n"
            "3         2026-11-29T08:00:00Z  7         deploy 4  ci        db@2,web@1.4.2  abcdefabcdef\n"
            "2         2026-11-29T07:00:00Z  5         -         -         -               0123456789ab\n");
  EXPECT_EQ(render_json(json(R"({"a": [1, null]})")), "{\"a\":[1,null]}\n");
}

TEST(NodeShowTextTest, ShowsTheRecoveryCopyAppliesAndDrift) {
  auto n = json(R"({"name": "web-01", "last_contact": null, "age_s": null, "applied_revision": 2,
    "last_outcome": "applied", "eligible": true, "enrolled_at": "2026-11-29T06:00:00Z", "generation": 1,
    "host_version": "0.1.0", "state": "idle", "owned": ["file:/etc/motd"],
    "applies": [{"revision": 2, "outcome": "applied", "at": "2026-11-29T07:00:00Z", "resource": "", "reason": ""}],
    "last_drift": {"at": "2026-11-29T07:05:00Z", "scan": "s", "revision": 2,
                   "resources": [{"resource": "file:/etc/motd", "found": "properties.content differs", "action": "repaired"}]},
    "last_scan_at": "2026-11-29T07:05:00Z", "briefing": null})");
  std::string t = render_node_text(n, kNow);
  EXPECT_NE(t.find("node          web-01\n"), std::string::npos) << t;
  EXPECT_NE(t.find("last contact  never\n"), std::string::npos) << t;
  EXPECT_NE(t.find("owned         1 resource\n  file:/etc/motd\n"), std::string::npos) << t;
  EXPECT_NE(t.find("  2  applied  2026-11-29T07:00:00Z"), std::string::npos) << t;
  EXPECT_NE(t.find("  file:/etc/motd: properties.content differs (repaired)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("briefing      none\n"), std::string::npos) << t;
}

TEST(ExitCodeTest, MapsErrorCodesAndReports) {
  using sdk::ErrorCode;
  EXPECT_EQ(exit_code_for(ErrorCode::InvalidArgument), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::NotFound), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::AlreadyExists), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::PermissionDenied), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::Unsupported), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::Unavailable), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::Timeout), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::Transient), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::Failed), 1);
  EXPECT_EQ(exit_code_for(ErrorCode::Internal), 1);

  auto clean = json(R"({"applied": [{"node": "a"}], "failed": [], "outstanding": []})");
  auto waiting = json(R"({"applied": [], "failed": [], "outstanding": [{"node": "a"}]})");
  auto failed = json(R"({"applied": [], "failed": [{"node": "a"}], "outstanding": [{"node": "b"}]})");
  EXPECT_EQ(report_exit_code(clean, true), 0);
  EXPECT_EQ(report_exit_code(waiting, false), 0) << "outstanding is not failure";
  EXPECT_EQ(report_exit_code(waiting, true), 1);
  EXPECT_EQ(report_exit_code(failed, false), 1);
}

}  // namespace
}  // namespace mesh::cli
