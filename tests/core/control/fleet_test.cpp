// The pure parts of the control plane's fleet operations: compositions as stored, wave sizes,
// --min-applied, deploy record keys.
#include <gtest/gtest.h>

#include "fleet_state.h"
#include "fleet_view.h"
#include "service_util.h"
#include "mesh/common/json.h"

namespace mesh::control::detail {
namespace {

using sdk::Value;

Value json(const std::string& text) { return *common::parse_json(text); }

TEST(DeliveryAnswerTest, IsDeliveryNodesRevisionThenExtra) {
  sdk::DeliveryRecord d;
  d.id = 7;
  d.targets = {{"web-02", 5}, {"web-01", 3}};
  EXPECT_EQ(delivery_nodes(d).to_json(), R"(["web-02","web-01"])");
  EXPECT_EQ(delivery_answer(d).to_json(), R"({"delivery":7,"nodes":["web-02","web-01"],"revision":5})");
  Value extra = json(R"({"ineligible":"no heartbeat","revision":9})");
  EXPECT_EQ(delivery_answer(d, &extra).to_json(),
            R"({"delivery":7,"nodes":["web-02","web-01"],"revision":9,"ineligible":"no heartbeat"})");
  Value not_object = Value("x");
  EXPECT_EQ(delivery_answer(sdk::DeliveryRecord{}, &not_object).to_json(), R"({"delivery":0,"nodes":[],"revision":0})");
}

TEST(FleetCompositionTest, RoundTripsAndAnOldRevisionIsAllOwn) {
  Composition c;
  c.own = {"file:/etc/hosts"};
  c.modules["web"] = ModulePart{"1.4.2", {"file:/etc/motd"}};
  c.operator_name = "alice";
  c.cause = "deploy";
  c.deploy = 4;
  const auto back = parse_composition(composition_json(c), Value::array());
  EXPECT_EQ(back.own, c.own);
  EXPECT_EQ(back.modules, c.modules);
  EXPECT_EQ(back.operator_name, "alice");
  EXPECT_EQ(back.cause, "deploy");
  EXPECT_EQ(back.deploy, 4u);
  EXPECT_EQ(composition_value(c).find("deploy")->as_int(), 4);

  const Value resources = json(R"([{"type":"file","id":"/a"},{"type":"package","id":"nginx"}])");
  const auto old = parse_composition("", resources);
  EXPECT_EQ(old.own, (std::vector<std::string>{"file:/a", "package:nginx"}));
  EXPECT_TRUE(old.modules.empty());
  EXPECT_EQ(parse_composition("not json", resources).own.size(), 2u) << "unreadable reads as all own";
  EXPECT_EQ(pick_resources(resources, {"package:nginx"}).as_array().size(), 1u);
  EXPECT_EQ(padded_id(17), "000000000017");
}

TEST(FleetWavesTest, SizesAreCumulativeRoundedUpAndEndWithEveryNode) {
  EXPECT_EQ(*wave_sizes("1,10%,100%", 50), (std::vector<std::size_t>{1, 5, 50}));
  EXPECT_EQ(*wave_sizes("1,10%,100%", 5), (std::vector<std::size_t>{1, 5})) << "an empty wave is left out";
  EXPECT_EQ(*wave_sizes("2,5,100%", 10), (std::vector<std::size_t>{2, 5, 10}));
  EXPECT_EQ(*wave_sizes("100%", 3), (std::vector<std::size_t>{3}));
  EXPECT_EQ(*wave_sizes("10,100%", 3), (std::vector<std::size_t>{3})) << "a count is capped at the fleet";
  EXPECT_TRUE(wave_sizes("1,100%", 0)->empty());
  for (const char* bad : {"", "0", "x", "1,,2", "5,2", "150%", "0%", "-1", "1;2", "1,,100%", "5,2,100%"}) {
    auto r = wave_sizes(bad, 10);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, sdk::ErrorCode::InvalidArgument) << bad;
    EXPECT_EQ(r.error().path, "waves") << bad;
  }
}

TEST(FleetWavesTest, PercentagesRoundUp) {
  // 10% of 25 is 2.5: rounded up to 3 (README "Modules, labels, deploy").
  EXPECT_EQ(*wave_sizes("10%,100%", 25), (std::vector<std::size_t>{3, 25}));
  EXPECT_EQ(*wave_sizes("1%,100%", 1000), (std::vector<std::size_t>{10, 1000}));
  EXPECT_EQ(*wave_sizes("1%,100%", 7), (std::vector<std::size_t>{1, 7})) << "1% of a small fleet is one node";
  EXPECT_EQ(*wave_sizes("50%,100%", 3), (std::vector<std::size_t>{2, 3}));
  // A count after a percentage that comes out smaller over this fleet adds no node.
  EXPECT_EQ(*wave_sizes("50%,2,100%", 10), (std::vector<std::size_t>{5, 10}));
}

TEST(FleetWavesTest, ADecreasingListOrOneNotEndingAtEveryNodeIsRefused) {
  auto down = wave_sizes("50%,10%", 100);
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().path, "waves");
  EXPECT_NE(down.error().message.find("'10%'"), std::string::npos) << down.error().message;
  EXPECT_FALSE(wave_sizes("50%,10%,100%", 100)) << "decreasing, even when it ends at 100%";
  for (const char* same : {"100%,100%", "1,100%,100%", "2,2,100%", "10%,10%,100%"}) {
    auto r = wave_sizes(same, 10);
    ASSERT_FALSE(r) << same << ": a wave as large as the one before it adds nothing";
    EXPECT_NE(r.error().message.find("the same as the wave before it"), std::string::npos) << r.error().message;
  }
  for (const char* short_end : {"1,10%", "1", "2,5", "100", "1,99%"}) {
    auto r = wave_sizes(short_end, 10);
    ASSERT_FALSE(r) << short_end;
    EXPECT_EQ(r.error().path, "waves") << short_end;
    EXPECT_NE(r.error().message.find("100%"), std::string::npos) << r.error().message;
  }
}

TEST(FleetWavesTest, MinAppliedIsACountOrAPercentageRoundedUpAndCapped) {
  EXPECT_EQ(*min_applied_of("50%", 3), 2u);
  EXPECT_EQ(*min_applied_of("90%", 5), 5u) << "4.5 rounds up";
  EXPECT_EQ(*min_applied_of("1", 3), 1u);
  EXPECT_EQ(*min_applied_of("9", 3), 3u) << "at most the wave";
  for (const char* bad : {"half", "0", "0%", "101%", "", "-1"}) {
    auto r = min_applied_of(bad, 3);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "min_applied") << bad;
  }
}

TEST(FleetWavesTest, AFailureHaltsOutstandingWaitsUntilTheTimeoutThenMinAppliedDecides) {
  // declared, applied, failed, outstanding, timed out, --min-applied
  EXPECT_EQ(wave_verdict(3, 2, 1, 0, false, "")->step, WaveStep::halt) << "a failure halts at once";
  EXPECT_EQ(wave_verdict(3, 0, 1, 2, false, "1")->step, WaveStep::halt) << "even with nodes outstanding";
  EXPECT_EQ(wave_verdict(3, 3, 0, 0, false, "")->step, WaveStep::next);
  EXPECT_EQ(wave_verdict(3, 2, 0, 1, false, "")->step, WaveStep::wait);
  EXPECT_EQ(wave_verdict(3, 2, 0, 1, false, "1")->step, WaveStep::wait) << "an outstanding node may still fail";
  // At the timeout the default needs every node not outstanding, and at least one.
  auto at = wave_verdict(3, 2, 0, 1, true, "");
  EXPECT_EQ(at->step, WaveStep::next);
  EXPECT_EQ(at->need, 2u);
  auto none = wave_verdict(1, 0, 0, 1, true, "");
  EXPECT_EQ(none->step, WaveStep::halt);
  EXPECT_EQ(none->need, 1u);
  EXPECT_EQ(wave_verdict(3, 1, 0, 2, true, "2")->step, WaveStep::halt);
  EXPECT_EQ(wave_verdict(3, 2, 0, 1, true, "2")->step, WaveStep::next);
  EXPECT_EQ(wave_verdict(4, 3, 0, 1, true, "90%")->step, WaveStep::halt) << "90% of 4 is 4";
  EXPECT_EQ(wave_verdict(4, 2, 0, 2, true, "50%")->step, WaveStep::next);
  EXPECT_EQ(wave_verdict(0, 0, 0, 0, false, "")->step, WaveStep::next) << "a wave with nothing written";
  EXPECT_FALSE(wave_verdict(3, 2, 0, 1, true, "most"));

  EXPECT_FALSE(wave_timed_out(1000, 600000, 1000));
  EXPECT_FALSE(wave_timed_out(1000, 600000, 600999));
  EXPECT_TRUE(wave_timed_out(1000, 600000, 601000));
  EXPECT_TRUE(wave_timed_out(1000, 0, 1000));
}

}  // namespace
}  // namespace mesh::control::detail
