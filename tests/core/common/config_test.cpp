// Config files (config.cpp): unknown keys and wrong types name file, line and key.
#include <gtest/gtest.h>

#include "mesh/common/config.h"

namespace mesh::common {
namespace {

TEST(ConfigTest, UnknownKeysAndWrongTypesNameFileLineAndKey) {
  sdk::Schema timers{"timers", "", {{"heartbeat", sdk::ValueType::String, false, "", {}, sdk::Value("30s")},
                                    {"drift", sdk::ValueType::String, false, ""}}};
  auto cf = ConfigFile::parse("[node]\nname = \"a\"\n[timers]\nheartbeat = \"5s\"\ndrfit = \"1m\"\n", "host.toml");
  ASSERT_TRUE(cf);
  auto r = cf->check_table("timers", timers);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "timers.drfit");
  EXPECT_NE(r.error().message.find("host.toml:5: timers.drfit: unknown key 'drfit'"), std::string::npos)
      << r.error().message;
  auto cf2 = ConfigFile::parse("[timers]\nheartbeat = 5\n", "h.toml");
  auto r2 = cf2->check_table("timers", timers);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message.find("h.toml:2: timers.heartbeat: must be a string"), std::string::npos)
      << r2.error().message;
  auto cf3 = ConfigFile::parse("[timers]\n", "h.toml");
  auto r3 = cf3->check_table("timers", timers);
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->get_string("heartbeat"), "30s");
  auto tables = cf->check_tables({"node"});
  ASSERT_FALSE(tables);
  EXPECT_NE(tables.error().message.find("unknown table"), std::string::npos);
  auto broken = ConfigFile::parse("[node\n", "b.toml");
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find("b.toml:1"), std::string::npos) << broken.error().message;
}

}  // namespace
}  // namespace mesh::common
