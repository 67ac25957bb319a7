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

// #12.4: node show puts the error code between the resource and the reason (the report's own
// lines are the text report plugin's: tests/reports).
TEST(NodeShowTextTest, AnApplyShowsItsErrorCode) {
  auto n = json(R"({"name": "a", "applies": [
    {"revision": 2, "outcome": "failed", "at": "2026-11-29T07:00:02Z", "resource": "file:/etc/x",
     "reason": "busy", "code": "transient"},
    {"revision": 1, "outcome": "applied", "at": "2026-11-29T07:00:01Z", "resource": "", "reason": "", "code": null}]})");
  const std::string show = render_node_text(n, kNow);
  EXPECT_NE(show.find("  2  failed   2026-11-29T07:00:02Z  file:/etc/x: transient: busy\n"), std::string::npos) << show;
}

TEST(NodesTextTest, TableWithAgeAndTimestampAndNever) {
  auto nodes = json(R"([
    {"name": "laptop-7", "last_contact": "2026-11-08T07:10:00Z", "age_s": 1814400, "applied_revision": 3,
     "last_outcome": "applied", "eligible": true, "host_version": "0.2.0-1"},
    {"name": "web-01", "last_contact": "2026-11-29T07:06:00Z", "age_s": 240, "applied_revision": 43,
     "declared_revision": 44, "last_outcome": "failed", "eligible": false, "state": "applying",
     "state_at": "2026-11-29T07:07:00Z", "state_age_s": 180},
    {"name": "web-09", "last_contact": null, "age_s": null, "applied_revision": 0, "last_outcome": "", "eligible": true}])");
  EXPECT_EQ(render_nodes_text(nodes, kNow),
            "NAME      ELIGIBLE  LAST-CONTACT                          REVISION          OUTCOME  STATE                    HOST-VERSION\n"
            "laptop-7  yes       21 days ago (2026-11-08T07:10:00Z)    3                 applied  -                        0.2.0-1\n"
            "web-01    no        4 minutes ago (2026-11-29T07:06:00Z)  43 (declared 44)  failed   applying, 3 minutes ago  -\n"
            "web-09    yes       never                                 -                 -        -                        -\n");
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
  // The --token-file form: --token would put it in /proc/PID/cmdline (newuser N1).
  EXPECT_NE(issued.find("mesh-host enrol --config host.toml --token-file token.txt"), std::string::npos) << issued;
  EXPECT_EQ(issued.find("--token SECRET"), std::string::npos) << issued;
  EXPECT_NE(issued.find("(umask 077; echo SECRET > token.txt)"), std::string::npos) << issued;
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

// `mesh module list` and `mesh assignments` are tables like `mesh nodes`: every column starts at
// the same place whatever the lengths of the names and versions before it.
TEST(ModuleListTextTest, ColumnsAreAligned) {
  EXPECT_EQ(render_modules_text(json(R"([
      {"module": "web", "versions": [{"version": "1.4.2"}, {"version": "1.4.10"}], "selector": "role=web"},
      {"module": "database-primary", "versions": [{"version": "2"}], "selector": null}])")),
            "MODULE            VERSIONS       ASSIGNED\n"
            "web               1.4.2, 1.4.10  role=web\n"
            "database-primary  2              not assigned\n");
  EXPECT_EQ(render_modules_text(json("[]")), "no modules\n");
  EXPECT_EQ(render_assignments_text(json(R"([
      {"module": "web", "selector": "role=web,facts.os.id=debian", "operator": "ci", "at": "2026-11-29T07:00:00Z"},
      {"module": "database-primary", "selector": "name=db-*", "operator": "admin", "at": "2026-11-29T07:01:00Z"}])")),
            "MODULE            SELECTOR                     OPERATOR  AT\n"
            "web               role=web,facts.os.id=debian  ci        2026-11-29T07:00:00Z\n"
            "database-primary  name=db-*                    admin     2026-11-29T07:01:00Z\n");
  EXPECT_EQ(render_assignments_text(json("[]")), "no assignments\n");
  EXPECT_EQ(render_module_versions_text(json(R"({"module": "web", "versions": [
      {"version": "1.4.2", "at": "2026-11-29T07:00:00Z", "operator": "ci", "digest": "0123456789abcdef"},
      {"version": "1.4.10-rc1", "at": "2026-11-30T07:00:00Z", "operator": "admin", "digest": "abcdefabcdefabcd"}],
      "assignment": {"selector": "role=web"}})")),
            "module web\n"
            "VERSION     PUSHED                OPERATOR  DIGEST\n"
            "1.4.2       2026-11-29T07:00:00Z  ci        0123456789ab\n"
            "1.4.10-rc1  2026-11-30T07:00:00Z  admin     abcdefabcdef\n"
            "assigned to role=web\n");
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

TEST(NodeShowTextTest, ShowsLabelsAndFacts) {
  auto n = json(R"({"name": "web-01", "eligible": true, "owned": [], "applies": [], "briefing": null,
    "labels": {"role": "web", "zone": "a"},
    "facts": {"arch": "amd64", "os.id": "debian", "os.version_id": "12"}})");
  std::string t = render_node_text(n, kNow);
  EXPECT_NE(t.find("labels        role=web, zone=a\n"), std::string::npos) << t;
  EXPECT_NE(t.find("facts\n  arch           amd64\n  os.id          debian\n  os.version_id  12\n"),
            std::string::npos)
      << t;
  // A node never briefed (or briefed by a host from before facts), without labels.
  auto bare = json(R"({"name": "web-02", "eligible": null, "owned": [], "applies": [], "briefing": null})");
  std::string b = render_node_text(bare, kNow);
  EXPECT_NE(b.find("labels        none\n"), std::string::npos) << b;
  EXPECT_NE(b.find("facts         none (no briefing with facts yet)\n"), std::string::npos) << b;
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
