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
  EXPECT_EQ(*wave_sizes("2,5", 10), (std::vector<std::size_t>{2, 5, 10})) << "the rest is a last wave";
  EXPECT_EQ(*wave_sizes("100", 3), (std::vector<std::size_t>{3}));
  EXPECT_TRUE(wave_sizes("1,100%", 0)->empty());
  for (const char* bad : {"", "0", "x", "1,,2", "5,2", "150%", "0%", "-1", "1;2"}) {
    auto r = wave_sizes(bad, 10);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "waves") << bad;
  }
  EXPECT_EQ(*min_applied_of("50%", 3), 2u);
  EXPECT_EQ(*min_applied_of("9", 3), 3u) << "at most the wave";
  EXPECT_FALSE(min_applied_of("half", 3));
}

}  // namespace
}  // namespace mesh::control::detail
