#include <gtest/gtest.h>

#include "mesh/common/clock.h"
#include "mesh/control/report.h"

namespace mesh::control {
namespace {

constexpr std::int64_t kT0 = 1795935600000;  // 2026-11-29T07:00:00Z

sdk::NodeRecord node(const std::string& name, std::uint64_t applied,
                     std::optional<std::int64_t> last_contact) {
  sdk::NodeRecord n;
  n.name = name;
  n.applied_revision = applied;
  n.last_contact_ms = last_contact;
  return n;
}

sdk::ApplyReport report(const std::string& node, std::uint64_t rev, const std::string& outcome,
                        const std::string& resource = "", const std::string& reason = "") {
  sdk::ApplyReport r;
  r.node = node;
  r.revision = rev;
  r.at_ms = kT0 + 1000;
  r.outcome = outcome;
  r.resource = resource;
  r.reason = reason;
  return r;
}

TargetStatus status(sdk::DeliveryTarget target, std::optional<sdk::ApplyReport> r,
                    std::optional<sdk::NodeRecord> n, std::optional<sdk::RevisionRef> next = std::nullopt,
                    std::optional<sdk::ApplyReport> next_report = std::nullopt) {
  TargetStatus t;
  t.target = std::move(target);
  t.report = std::move(r);
  t.node = std::move(n);
  t.next = next;
  t.next_report = std::move(next_report);
  return t;
}

// #12.4: a failed entry carries the stored report's error code; null when it has none (a report
// stored before codes were kept).
TEST(DeliveryReportTest, AFailedEntryCarriesItsCodeOrNull) {
  sdk::DeliveryRecord d{17, kT0, {}};
  auto coded = report("web-01", 43, "failed", "file:/etc/x", "open /etc/x: Permission denied");
  coded.code = "permission_denied";
  std::vector<TargetStatus> t;
  t.push_back(status({"web-01", 43}, coded, node("web-01", 42, kT0)));
  t.push_back(status({"web-02", 43}, report("web-02", 43, "failed", "file:/etc/y", "old"), node("web-02", 42, kT0)));
  sdk::Value r = build_delivery_report(d, t, kT0);
  const auto& failed = r.find("failed")->as_array();
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].get_string("code"), "permission_denied");
  ASSERT_TRUE(failed[1].find("code"));
  EXPECT_TRUE(failed[1].find("code")->is_null());
}

TEST(DeliveryReportTest, ReportCodesHaveTheShapeOfAnErrorCodeName) {
  EXPECT_TRUE(valid_report_code(""));
  EXPECT_TRUE(valid_report_code("permission_denied"));
  EXPECT_TRUE(valid_report_code("quota_exceeded2"));  // a newer host's name: kept as it is
  EXPECT_FALSE(valid_report_code("Permission denied"));
  EXPECT_FALSE(valid_report_code("_x"));
  EXPECT_FALSE(valid_report_code("x\n"));
  EXPECT_FALSE(valid_report_code(std::string(33, 'a')));
}

TEST(DeliveryReportTest, SortsTargetsIntoAppliedFailedOutstandingSuperseded) {
  sdk::DeliveryRecord d{17, kT0, {}};
  std::vector<TargetStatus> t;
  t.push_back(status({"web-01", 43}, report("web-01", 43, "applied"), node("web-01", 43, kT0)));
  t.push_back(status({"web-02", 43}, report("web-02", 43, "failed", "file:/etc/x", "open /etc/x: Permission denied"),
                     node("web-02", 42, kT0)));
  t.push_back(status({"web-04", 43}, std::nullopt, node("web-04", 40, kT0 - 4 * 60 * 1000)));
  t.push_back(status({"web-03", 43}, std::nullopt, node("web-03", 0, std::nullopt)));
  t.push_back(status({"web-05", 43}, std::nullopt, node("web-05", 45, kT0), sdk::RevisionRef{44, 18},
                     report("web-05", 44, "failed")));
  t.push_back(status({"web-06", 43}, report("web-06", 43, "refused", "", "signature does not verify"),
                     node("web-06", 0, kT0)));
  t.push_back(status({"gone", 43}, std::nullopt, std::nullopt));

  sdk::Value r = build_delivery_report(d, t, kT0 + 60 * 1000);
  EXPECT_EQ(r.get_int("delivery", 0), 17);
  EXPECT_EQ(r.get_int("declared", 0), 7);
  EXPECT_EQ(r.get_string("at"), "2026-11-29T07:00:00Z");

  const auto& applied = r.find("applied")->as_array();
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].get_string("node"), "web-01");
  EXPECT_EQ(applied[0].get_int("revision", 0), 43);
  EXPECT_EQ(applied[0].get_string("at"), "2026-11-29T07:00:01Z");

  const auto& failed = r.find("failed")->as_array();
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].get_string("node"), "web-02");
  EXPECT_EQ(failed[0].get_string("resource"), "file:/etc/x");
  EXPECT_EQ(failed[0].get_string("reason"), "open /etc/x: Permission denied");
  EXPECT_EQ(failed[0].get_string("outcome"), "failed");
  EXPECT_EQ(failed[1].get_string("node"), "web-06");
  EXPECT_EQ(failed[1].get_string("outcome"), "refused");
  // The whole declaration was refused, not one resource: `resource` is null, never "".
  ASSERT_TRUE(failed[1].find("resource"));
  EXPECT_TRUE(failed[1].find("resource")->is_null()) << failed[1].to_json();
  EXPECT_EQ(failed[1].get_string("reason"), "signature does not verify");

  const auto& out = r.find("outstanding")->as_array();
  ASSERT_EQ(out.size(), 3u);  // sorted by name
  EXPECT_EQ(out[0].get_string("node"), "gone");
  EXPECT_TRUE(out[0].find("last_contact")->is_null());
  EXPECT_EQ(out[1].get_string("node"), "web-03");
  EXPECT_TRUE(out[1].find("last_contact")->is_null()) << "never heard from: null, not 'down'";
  EXPECT_TRUE(out[1].find("age_s")->is_null());
  EXPECT_EQ(out[2].get_string("node"), "web-04");
  EXPECT_EQ(out[2].get_string("last_contact"), "2026-11-29T06:56:00Z");
  EXPECT_EQ(out[2].get_int("age_s", -1), 5 * 60);
  EXPECT_EQ(out[2].get_int("revision", 0), 43);

  const auto& sup = r.find("superseded")->as_array();
  ASSERT_EQ(sup.size(), 1u);
  EXPECT_EQ(sup[0].get_string("node"), "web-05");
  EXPECT_EQ(sup[0].get_int("applied_revision", 0), 45);
  const sdk::Value* by = sup[0].find("by");
  ASSERT_TRUE(by && by->is_object());
  EXPECT_EQ(by->get_int("revision", 0), 44);
  EXPECT_EQ(by->get_int("delivery", 0), 18);
  EXPECT_EQ(by->get_string("outcome"), "failed");
}

TEST(DeliveryReportTest, EachStateOfTheStateMachine) {
  sdk::DeliveryRecord d{5, kT0, {}};
  auto n = node("n", 0, kT0);
  auto one = [&](TargetStatus t) { return build_delivery_report(d, {std::move(t)}, kT0); };
  auto list_of = [](const sdk::Value& r) {
    for (const char* k : {"applied", "failed", "outstanding", "superseded"})
      if (!r.find(k)->as_array().empty()) return std::string(k);
    return std::string("none");
  };
  // outstanding: nothing reported, nothing newer.
  EXPECT_EQ(list_of(one(status({"n", 3}, std::nullopt, n))), "outstanding");
  // superseded at once when a newer revision is written, `by` outstanding until it ends.
  auto at_once = one(status({"n", 3}, std::nullopt, n, sdk::RevisionRef{4, 6}));
  ASSERT_EQ(list_of(at_once), "superseded");
  EXPECT_EQ(at_once.find("superseded")->as_array()[0].find("by")->get_string("outcome"), "outstanding");
  // ... and `by` says superseded when the newer revision was itself passed over for a third
  // (found by a new user: "by revision 10 (…, outstanding)" for ever while 11 was applied).
  auto chain = status({"n", 3}, std::nullopt, n, sdk::RevisionRef{4, 6});
  chain.next_superseded = true;
  EXPECT_EQ(one(chain).find("superseded")->as_array()[0].find("by")->get_string("outcome"), "superseded");
  // ... and the host's own "superseded" (a cancelled apply) is superseded too.
  EXPECT_EQ(list_of(one(status({"n", 3}, report("n", 3, "superseded"), n, sdk::RevisionRef{4, 6},
                               report("n", 4, "applied")))),
            "superseded");
  // applied and failed stay so, whatever was written later.
  EXPECT_EQ(list_of(one(status({"n", 3}, report("n", 3, "applied"), n, sdk::RevisionRef{4, 6},
                               report("n", 4, "failed")))),
            "applied");
  EXPECT_EQ(list_of(one(status({"n", 3}, report("n", 3, "failed"), n, sdk::RevisionRef{4, 6}))), "failed");
  // Applied entries show when the control plane received the report, not the host's claim.
  auto claimed = report("n", 3, "applied");
  claimed.at_ms = 4'102'444'800'000;
  claimed.received_at_ms = kT0 + 2000;
  auto r = one(status({"n", 3}, claimed, n));
  EXPECT_EQ(r.find("applied")->as_array()[0].get_string("at"), "2026-11-29T07:00:02Z");
}

TEST(DeliveryReportTest, OnlyAReportForExactlyThatRevisionCounts) {
  sdk::DeliveryRecord d{3, kT0, {}};
  // The node applied revision 43 (equal: not superseded) but the report passed in is another's.
  std::vector<TargetStatus> t{status({"web-01", 43}, report("web-01", 42, "applied"), node("web-01", 43, kT0))};
  sdk::Value r = build_delivery_report(d, t, kT0);
  EXPECT_EQ(r.find("applied")->as_array().size(), 0u);
  EXPECT_EQ(r.find("outstanding")->as_array().size(), 1u);
  EXPECT_EQ(r.find("outstanding")->as_array()[0].get_int("age_s", -1), 0);
}

TEST(DeliveryReportTest, EmptyDeliveryHasEmptyLists) {
  sdk::Value r = build_delivery_report(sdk::DeliveryRecord{1, kT0, {}}, {}, kT0);
  EXPECT_EQ(r.get_int("declared", -1), 0);
  for (const char* k : {"applied", "failed", "outstanding", "superseded"})
    EXPECT_TRUE(r.find(k) && r.find(k)->is_array() && r.find(k)->as_array().empty()) << k;
}

}  // namespace
}  // namespace mesh::control
