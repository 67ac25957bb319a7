// The apply report body stays small whatever the declaration's size (docs/protocol.md "Apply
// report"): counts, failed resources in full, the first changed ones, the owned list complete.
#include <gtest/gtest.h>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/host/report.h"

namespace mesh::host {
namespace {

TEST(HostReportTest, AReportListsFailuresAndTheFirstChangesAndCountsTheRest) {
  engine::ApplyResult r;
  r.revision = 7;
  r.outcome = "failed";
  r.failed_resource = "file:/f/fail";
  r.reason = "denied";
  for (int i = 0; i < 9000; ++i) {
    const std::string id = "file:/f/" + std::to_string(i);
    r.resources.push_back({id, i < 300 ? "changed" : "unchanged", {}, ""});
    r.owned.push_back(id);
  }
  r.resources.push_back({"file:/f/fail", "failed", {}, "denied"});
  for (int i = 0; i < 5; ++i) r.resources.push_back({"file:/g/" + std::to_string(i), "not_attempted", {}, ""});

  const std::string body = apply_report_json("web-01", r, 1796022001000);
  auto v = common::parse_json(body, common::JsonLimits{SIZE_MAX, 32});
  ASSERT_TRUE(v) << v.error().message;
  const auto& listed = v->find("resources")->as_array();
  ASSERT_EQ(listed.size(), kReportedChanges + 1);
  EXPECT_EQ(listed.back().get_string("outcome"), "failed");
  EXPECT_EQ(listed.back().get_string("reason"), "denied");
  const sdk::Value* counts = v->find("counts");
  ASSERT_TRUE(counts);
  EXPECT_EQ(counts->get_int("changed", -1), 300);
  EXPECT_EQ(counts->get_int("unchanged", -1), 8700);
  EXPECT_EQ(counts->get_int("failed", -1), 1);
  EXPECT_EQ(counts->get_int("not_attempted", -1), 5);
  EXPECT_EQ(v->get_int("resources_omitted", -1), 9006 - static_cast<std::int64_t>(kReportedChanges) - 1);
  // The owned list is never cut: it is the recovery copy.
  EXPECT_EQ(v->find("owned")->as_array().size(), 9000u);
  EXPECT_EQ(v->get_int("owned_count", -1), 9000);
  EXPECT_EQ(v->get_string("owned_digest"), common::sha256_hex(v->find("owned")->to_json()));
}

// An engine that kept only what the report lists (ApplyOptions::keep_changes, as the daemon asks)
// gives the same report body as one that kept every outcome; the text report's last line counts
// what was not kept too.
TEST(HostReportTest, OutcomesCountedButNotKeptGiveTheSameReport) {
  engine::ApplyResult all, kept;
  for (auto* r : {&all, &kept}) {
    r->revision = 9;
    r->outcome = "failed";
    r->failed_resource = "file:/f/fail";
    r->reason = "denied";
    r->code = "failed";
  }
  for (int i = 0; i < 400; ++i) {
    const std::string id = "file:/f/" + std::to_string(i);
    const char* outcome = i < 150 ? "changed" : i < 170 ? "removed" : "unchanged";
    all.resources.push_back({id, outcome, {}, ""});
    if (i < static_cast<int>(kReportedChanges)) kept.resources.push_back({id, outcome, {}, ""});
    else kept.not_kept.add(outcome);
    all.owned.push_back(id);
    kept.owned.push_back(id);
  }
  all.resources.push_back({"file:/f/fail", "failed", {}, "denied", "failed"});
  kept.resources.push_back({"file:/f/fail", "failed", {}, "denied", "failed"});
  all.resources.push_back({"file:/f/late", "not_attempted", {}, ""});
  kept.not_kept.add("not_attempted");
  EXPECT_EQ(apply_report_json("web-01", kept, 1796022001000), apply_report_json("web-01", all, 1796022001000));
  EXPECT_EQ(apply_report_tail(kept, false), "failed at file:/f/fail\n");
  kept.outcome = all.outcome = "applied";
  EXPECT_EQ(apply_report_tail(kept, false), "applied: 150 changed, 20 removed, 230 unchanged\n");
  EXPECT_EQ(apply_report_tail(kept, false), apply_report_tail(all, false));
  EXPECT_EQ(apply_report_tail(kept, true), "planned: 150 to change, 20 to remove, 230 unchanged (nothing was changed)\n");
  // The lines and the tail make the text report.
  std::string text;
  for (const auto& o : all.resources) text += apply_report_line(o);
  EXPECT_EQ(text + apply_report_tail(all, false), apply_report_text(all, false));
}

// #12.4: the failure's ErrorCode travels in the report, at the top and per failed resource.
TEST(HostReportTest, AFailureCarriesItsErrorCode) {
  engine::ApplyResult r;
  r.revision = 3;
  r.outcome = "failed";
  r.failed_resource = "file:/etc/x";
  r.reason = "open /etc/x: Permission denied";
  r.code = "permission_denied";
  r.resources.push_back({"file:/etc/motd", "changed", {}, ""});
  r.resources.push_back({"file:/etc/x", "failed", {}, "open /etc/x: Permission denied", "permission_denied"});
  auto v = common::parse_json(apply_report_json("web-01", r, 1796022001000));
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->get_string("code"), "permission_denied");
  const auto& listed = v->find("resources")->as_array();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].find("code"), nullptr);  // a success has none: absent
  EXPECT_EQ(listed[1].get_string("code"), "permission_denied");
  EXPECT_EQ(apply_report_text(r, false),
            "changed        file:/etc/motd\n"
            "failed         file:/etc/x: permission_denied: open /etc/x: Permission denied\n"
            "failed at file:/etc/x\n");

  engine::ApplyResult ok;
  ok.revision = 4;
  ok.outcome = "applied";
  auto a = common::parse_json(apply_report_json("web-01", ok, 1796022001000));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->get_string("code", "absent"), "");  // like resource and reason: "" when applied
}

}  // namespace
}  // namespace mesh::host
