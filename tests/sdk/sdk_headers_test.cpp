// Compiles every SDK header and checks the small pieces of logic they carry.
#include <gtest/gtest.h>

#include "mesh/sdk/sdk.h"

namespace mesh::sdk {
namespace {

TEST(ValueTest, ObjectEqualityIgnoresOrderAndJsonEscapes) {
  Value a = Value::object();
  a.set("b", 1);
  a.set("a", "x\n\"y\"");
  Value b = Value::object();
  b.set("a", "x\n\"y\"");
  b.set("b", 1.0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.to_json(), R"({"b":1,"a":"x\n\"y\""})");
  b.set("b", 2);
  EXPECT_NE(a, b);
  EXPECT_EQ(Value(std::string("\x01")).to_json(), "\"\\u0001\"");
}

TEST(SchemaTest, ValidateNamesThePath) {
  Schema s{"file", "files", {{"mode", ValueType::String, false, "mode", {}},
                             {"ensure", ValueType::String, false, "", {"present", "absent"}},
                             {"content", ValueType::String, true, ""},
                             {"content_base64", ValueType::String, false, ""}},
           {{"content", "content_base64"}}};
  Value p = Value::object();
  p.set("content", "x");
  EXPECT_TRUE(validate_against(s, p, "properties"));
  p.set("mode", 644);
  auto r = validate_against(s, p, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.mode");
  p.set("mode", "0644");
  p.set("colour", "red");
  r = validate_against(s, p, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.colour");
  EXPECT_NE(r.error().message.find("valid: mode, ensure"), std::string::npos);
  p.erase("colour");
  p.set("ensure", "gone");
  r = validate_against(s, p, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.ensure");
  p.set("ensure", "absent");
  p.set("content_base64", "eA==");
  r = validate_against(s, p, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.content_base64");
  p.erase("content_base64");
  p.erase("content");
  r = validate_against(s, p, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.content");
}

TEST(ResourceIdTest, ParsesTypeAndId) {
  auto r = ResourceId::parse("file:/etc/a:b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, "file");
  EXPECT_EQ(r->id, "/etc/a:b");
  EXPECT_FALSE(ResourceId::parse("file"));
  EXPECT_FALSE(ResourceId::parse(":x"));
  EXPECT_FALSE(ResourceId::parse("file:"));
}

TEST(DurationTest, ParsesOneIntegerAndOneUnit) {
  using namespace std::chrono;
  EXPECT_EQ(*parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(*parse_duration("0s"), seconds(0));
  EXPECT_EQ(*parse_duration("15s"), seconds(15));
  EXPECT_EQ(*parse_duration("2m"), minutes(2));
  EXPECT_EQ(*parse_duration("1h"), hours(1));
  EXPECT_EQ(*parse_duration("7d"), hours(168));
  EXPECT_EQ(*parse_duration("999999999999ms"), milliseconds(999'999'999'999));
  for (const char* bad : {"", "s", "10", "1.5s", "-1s", "+1s", "10 s", " 10s", "10sec", "1m30s",
                          "10S", "1000000000000ms", "999999999999d"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(r.error().message.find("'" + std::string(bad) + "'"), std::string::npos) << r.error().message;
  }
}

TEST(DurationTest, FormatsWithTheLargestExactUnitAndParsesBack) {
  using namespace std::chrono;
  EXPECT_EQ(format_duration(milliseconds(0)), "0ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(seconds(90)), "90s");
  EXPECT_EQ(format_duration(minutes(2)), "2m");
  EXPECT_EQ(format_duration(hours(48)), "2d");
  for (std::int64_t ms : {0, 1, 999, 1000, 61'000, 3'600'000, 86'400'001})
    EXPECT_EQ(*parse_duration(format_duration(milliseconds(ms))), milliseconds(ms)) << ms;
}

TEST(CancelTokenTest, DeadlineCancels) {
  CancelToken t(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_TRUE(t.cancelled());
  CancelToken u;
  EXPECT_FALSE(u.cancelled());
  u.cancel();
  EXPECT_TRUE(u.cancelled());
}

TEST(CxxAbiTest, TheFingerprintOfThisBuildAndItsText) {
  constexpr mesh_cxx_abi a = cxx_abi_of_this_build();
  static_assert(a.struct_size == sizeof(mesh_cxx_abi));
  EXPECT_EQ(a.sizeof_string, sizeof(std::string));
  EXPECT_EQ(a.sizeof_value, sizeof(Value));
  EXPECT_EQ(a.pointer_size, sizeof(void*));
#if defined(__GLIBCXX__)
  EXPECT_EQ(a.stdlib, MESH_CXX_STDLIB_LIBSTDCXX);
  EXPECT_EQ(a.stdlib_abi, _GLIBCXX_USE_CXX11_ABI ? 1u : 0u);
  EXPECT_NE(describe_cxx_abi(a).find("libstdc++ "), std::string::npos) << describe_cxx_abi(a);
#endif
  EXPECT_NE(describe_cxx_abi(a).find(", compiler "), std::string::npos) << describe_cxx_abi(a);
  EXPECT_TRUE(cxx_abi_differences(a, a).empty());

  mesh_cxx_abi b = a;
  b.sizeof_string = 8;
  b.stdlib_abi = a.stdlib_abi ? 0u : 1u;
  const auto diff = cxx_abi_differences(b, a);
  ASSERT_EQ(diff.size(), 2u);
  EXPECT_EQ(diff[1], "sizeof(std::string) 8, this program " + std::to_string(sizeof(std::string)));
}

}  // namespace
}  // namespace mesh::sdk
