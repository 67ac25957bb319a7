// A briefing's facts as the control plane checks and shows them (core/control/src/node_facts.cpp,
// decision record 54).
#include <gtest/gtest.h>

#include "mesh/common/json.h"
#include "node_facts.h"

namespace mesh::control::detail {
namespace {

sdk::Value parse(const std::string& text) {
  auto v = common::parse_json(text);
  EXPECT_TRUE(v) << v.error().describe();
  return v ? *v : sdk::Value();
}

TEST(ControlNodeFactsTest, KeepsTheFactsOfABriefing) {
  auto f = briefing_facts(parse(R"({"facts": {"os.id": "debian", "os.version_id": "12", "arch": "amd64",
                                   "container_engine": "none", "kernel": "6.1.0-28-amd64"}})"));
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->get_string("os.id"), "debian");
  EXPECT_EQ(f->get_string("kernel"), "6.1.0-28-amd64");
  EXPECT_EQ(f->as_object().size(), 5u);
}

TEST(ControlNodeFactsTest, AHostWithoutFactsHasNone) {
  auto absent = briefing_facts(parse(R"({"lines": []})"));
  ASSERT_TRUE(absent);
  EXPECT_TRUE(absent->is_object() && absent->as_object().empty());
  auto null = briefing_facts(parse(R"({"facts": null})"));
  ASSERT_TRUE(null);
  EXPECT_TRUE(null->is_object() && null->as_object().empty());
}

TEST(ControlNodeFactsTest, BadFactsAreRefusedNamingTheField) {
  struct Case {
    std::string body, path, message;
  } cases[] = {
      {R"({"facts": ["os.id"]})", "facts", "must be an object"},
      {R"({"facts": {"OS.ID": "debian"}})", "facts.OS.ID", "is not a fact name"},
      {R"({"facts": {".hidden": "x"}})", "facts..hidden", "starting with a letter or digit"},
      {R"({"facts": {"os id": "x"}})", "facts.os id", "is not a fact name"},
      {R"({"facts": {"os.id": 12}})", "facts.os.id", "must be a string"},
      {R"({"facts": {"os.id": ""}})", "facts.os.id", "must be 1 to 256 bytes (it is 0)"},
      {R"({"facts": {"os.id": ")" + std::string(257, 'x') + R"("}})", "facts.os.id", "(it is 257)"},
      {R"({"facts": {"os.id": "a\nb"}})", "facts.os.id", "control characters"},
      {R"({"facts": {")" + std::string(65, 'k') + R"(": "x"}})", "facts." + std::string(64, 'k') + "…",
       "is not a fact name"},
  };
  for (const auto& c : cases) {
    auto f = briefing_facts(parse(c.body));
    ASSERT_FALSE(f) << c.body;
    EXPECT_EQ(f.error().code, sdk::ErrorCode::InvalidArgument) << c.body;
    EXPECT_EQ(f.error().path, c.path) << c.body;
    EXPECT_NE(f.error().message.find(c.message), std::string::npos) << c.body << ": " << f.error().message;
  }
  std::string many = R"({"facts": {)";
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\": \"v\"";
  auto f = briefing_facts(parse(many + "}}"));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().path, "facts");
  EXPECT_NE(f.error().message.find("65 facts, over the limit of 64"), std::string::npos) << f.error().message;
}

TEST(ControlNodeFactsTest, StoredFactsOfARecordedBriefing) {
  EXPECT_TRUE(stored_facts("").as_object().empty());
  EXPECT_TRUE(stored_facts("not json").as_object().empty());
  EXPECT_TRUE(stored_facts(R"({"outcome": "pass", "lines": []})").as_object().empty());
  EXPECT_EQ(stored_facts(R"({"outcome": "pass", "facts": {"arch": "arm64"}})").get_string("arch"), "arm64");
}

}  // namespace
}  // namespace mesh::control::detail
