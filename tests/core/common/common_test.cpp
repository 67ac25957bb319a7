#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mesh/common/clock.h"
#include "mesh/common/config.h"
#include "mesh/common/crypto.h"
#include "mesh/common/duration.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"

namespace mesh::common {
namespace {

TEST(JsonTest, ParsesAndRefusesHostileInput) {
  auto v = parse_json(R"({"a":[1,2.5,"x",true,null],"b":{"c":"d"}})");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->find("b")->get_string("c"), "d");
  EXPECT_EQ(v->find("a")->as_array().size(), 5u);

  auto dup = parse_json(R"({"r":{"x":1,"x":2}})");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().path, "r.x");
  EXPECT_NE(dup.error().message.find("duplicate key 'x'"), std::string::npos);

  EXPECT_FALSE(parse_json("{\"a\":\"\xff\"}"));
  EXPECT_NE(parse_json("{\"a\":\"\xff\"}").error().message.find("UTF-8"), std::string::npos);
  std::string deep(40, '[');
  deep += std::string(40, ']');
  auto d = parse_json(deep);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("nesting"), std::string::npos);
  EXPECT_TRUE(parse_json(std::string(30, '[') + std::string(30, ']')));
  auto big = parse_json(std::string(100, ' '), JsonLimits{10, 32});
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the limit"), std::string::npos);
  EXPECT_FALSE(parse_json("{\"a\":1"));
}

TEST(DurationTest, ParsesUnits) {
  EXPECT_EQ(parse_duration("500ms")->count(), 500);
  EXPECT_EQ(parse_duration("15s")->count(), 15000);
  EXPECT_EQ(parse_duration("2m")->count(), 120000);
  EXPECT_EQ(parse_duration("1h")->count(), 3600000);
  EXPECT_FALSE(parse_duration("15"));
  EXPECT_FALSE(parse_duration("s"));
  EXPECT_FALSE(parse_duration("-1s"));
  EXPECT_FALSE(parse_duration("1.5s"));
  EXPECT_EQ(format_duration(std::chrono::milliseconds(120000)), "2m");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(1500)), "1500ms");
}

TEST(LogBudgetTest, LetsNPerSecondThroughAndCountsTheRest) {
  LogBudget budget(3);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t hidden = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(budget.take(&hidden, t0 + std::chrono::milliseconds(i)));
    EXPECT_EQ(hidden, 0u);
  }
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(budget.take(&hidden, t0 + std::chrono::milliseconds(500)));
  // The next window: the first line through says how many were hidden, once.
  ASSERT_TRUE(budget.take(&hidden, t0 + std::chrono::milliseconds(1001)));
  EXPECT_EQ(hidden, 5u);
  EXPECT_EQ(LogBudget::suffix(hidden), " (5 more like it suppressed)");
  ASSERT_TRUE(budget.take(&hidden, t0 + std::chrono::milliseconds(1002)));
  EXPECT_EQ(hidden, 0u);
  EXPECT_EQ(LogBudget::suffix(0), "");
}

TEST(ClockTest, Rfc3339RoundTripAndAges) {
  EXPECT_EQ(format_rfc3339(1795935601000), "2026-11-29T07:00:01Z");
  EXPECT_EQ(parse_rfc3339("2026-11-29T07:00:01Z"), 1795935601000);
  EXPECT_EQ(parse_rfc3339("2026-11-29T07:00:01.250Z"), 1795935601000);
  EXPECT_FALSE(parse_rfc3339("yesterday"));
  EXPECT_EQ(format_age(0, 4 * 60 * 1000), "4 minutes ago");
  EXPECT_EQ(format_age(0, 4 * 86400 * 1000LL), "4 days ago");
  EXPECT_EQ(format_age(0, 500), "just now");
}

TEST(CryptoTest, HashSignVerify) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto kp = generate_keypair();
  auto sig = sign("node\n1\nbody", kp.secret_key);
  EXPECT_TRUE(verify("node\n1\nbody", sig, kp.public_key));
  EXPECT_FALSE(verify("node\n1\nbodz", sig, kp.public_key));
  EXPECT_NE(random_token(), random_token());
  EXPECT_GE(random_token().size(), 43u);
  EXPECT_EQ(*from_hex(to_hex("\x01\xff")), "\x01\xff");
}

TEST(FsTest, AtomicWriteReplacesAndLeavesNoTemp) {
  auto dir = std::filesystem::temp_directory_path() / ("mesh-fs-" + random_token(6));
  std::filesystem::create_directories(dir);
  auto file = (dir / "f").string();
  ASSERT_TRUE(write_file_atomic(file, "one", 0600));
  ASSERT_TRUE(write_file_atomic(file, "two", 0600));
  EXPECT_EQ(*read_file(file), "two");
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++n;
  EXPECT_EQ(n, 1);
  auto bad = write_file_atomic((dir / "missing" / "f").string(), "x");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("missing"), std::string::npos);
  std::filesystem::remove_all(dir);
}

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

TEST(ProtocolTest, VersionCheck) {
  auto m = protocol::make_message("mesh.decl.a", "{}");
  EXPECT_TRUE(protocol::check_version(m));
  m.set_header(protocol::kHeaderProtocol, "2.0");
  EXPECT_FALSE(protocol::check_version(m));
  m.set_header(protocol::kHeaderProtocol, "1.7");
  EXPECT_TRUE(protocol::check_version(m));
  EXPECT_TRUE(protocol::valid_node_name("web-01"));
  EXPECT_FALSE(protocol::valid_node_name("web.01"));
  EXPECT_FALSE(protocol::valid_node_name("-web"));
  EXPECT_FALSE(protocol::valid_node_name("Web"));
  EXPECT_EQ(protocol::subject_node("mesh.report.web-01"), "web-01");
}

}  // namespace
}  // namespace mesh::common
