// Compiles every SDK header and checks the small pieces of logic they carry.
#include <gtest/gtest.h>

#include "mesh/sdk/sdk.h"

#include "canonical_json_cases.h"

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

TEST(ValueTest, CanonicalJsonGivesTheExactTextDigestsDependOn) {
  for (const auto& c : test::canonical_json_cases()) {
    EXPECT_EQ(canonical_json(c.value), c.text) << c.name;
    std::string out = "x";
    write_canonical_json(out, c.value);
    EXPECT_EQ(out, "x" + c.text) << c.name;
  }
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

TEST(SchemaTest, ValidateAllCollectsEveryError) {
  Schema s{"file", "files", {{"mode", ValueType::String, false, "mode", {}},
                             {"content", ValueType::String, true, ""}}};
  Value p = Value::object();
  p.set("mode", 644);
  p.set("colour", "red");
  auto errors = validate_all(s, p, "properties");
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].path, "properties.mode");
  EXPECT_EQ(errors[1].path, "properties.colour");
  EXPECT_EQ(errors[2].path, "properties.content");
  EXPECT_EQ(errors[2].message, "is required");
  // The first-error wrapper returns the first of them.
  EXPECT_EQ(validate_against(s, p, "properties").error().path, "properties.mode");
}

TEST(SchemaTest, DurationsAndSizesWithBounds) {
  Schema s{"x", "", {{"timeout", ValueType::Duration, false, "", {}, std::nullopt, 1000.0, 3'600'000.0},
                     {"max_size", ValueType::Size, false, "", {}, std::nullopt, std::nullopt, 1048576.0},
                     {"count", ValueType::Int, false, "", {}, std::nullopt, 1.0, 10.0}}};
  Value p = Value::object();
  p.set("timeout", "90s");
  p.set("max_size", "512KiB");
  p.set("count", 3);
  EXPECT_TRUE(validate_all(s, p, "properties").empty());
  p.set("timeout", "500ms");
  p.set("max_size", "2MiB");
  p.set("count", 11);
  auto errors = validate_all(s, p, "properties");
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].message, "must be at least 1000ms (is 500ms)");
  EXPECT_EQ(errors[1].message, "must be at most 1048576 bytes (is 2097152 bytes)");
  EXPECT_EQ(errors[2].message, "must be at most 10 (is 11)");
  p.set("timeout", "1h30m");
  p.set("max_size", 64);
  p.set("count", 2);
  errors = validate_all(s, p, "properties");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].message, "'1h30m' is not a duration like 500ms, 15s, 2m, 1h");
  EXPECT_EQ(errors[1].message, "must be a size string like 512B, 64MiB, 1GB");
}

TEST(SchemaTest, ParseSizeGrammar) {
  EXPECT_EQ(*parse_size("0B"), 0);
  EXPECT_EQ(*parse_size("64MiB"), 64 << 20);
  EXPECT_EQ(*parse_size("1kB"), 1000);
  EXPECT_EQ(*parse_size("3GB"), 3'000'000'000);
  EXPECT_EQ(*parse_size("2TiB"), std::int64_t{2} << 40);
  for (const char* bad : {"", "64", "64 MiB", "-1B", "1.5MiB", "64mib", "1KB", "9999999999999999B", "8388608TiB"})
    EXPECT_FALSE(parse_size(bad)) << bad;
  EXPECT_EQ(parse_size("64mb").error().message, "'64mb' is not a size like 512B, 64MiB, 1GB");
}

TEST(SchemaTest, ReadOnlyIsRefusedAndSensitiveIsNeverQuoted) {
  Schema s{"x", "", {{"password", ValueType::String, false, "", {"a", "b"}, std::nullopt, std::nullopt, std::nullopt,
                      false, true},
                     {"id", ValueType::String, false, "computed", {}, std::nullopt, std::nullopt, std::nullopt, true}}};
  Value p = Value::object();
  p.set("password", "hunter2");
  p.set("id", "x");
  auto errors = validate_all(s, p, "properties");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].message, "(sensitive value) is not one of: a, b");
  EXPECT_EQ(errors[1].message, "is read-only (computed by the provider); remove it");
  Value r = redact(s, p);
  EXPECT_EQ(r.get_string("password"), "(sensitive value)");
  EXPECT_EQ(r.get_string("id"), "x");
  // Unknown-key messages do not offer read-only attributes.
  p = Value::object();
  p.set("colour", 1);
  EXPECT_NE(validate_all(s, p, "properties")[0].message.find("(valid: password)"), std::string::npos);
}

TEST(SchemaTest, IdFormats) {
  EXPECT_EQ(check_id_format(IdFormat::AbsolutePath, "/etc/motd"), "");
  EXPECT_EQ(check_id_format(IdFormat::AbsolutePath, "/"), "");
  for (const char* bad : {"relative", "/srv/../etc", "/a/./b", "/a//b", "/a/", ""})
    EXPECT_NE(check_id_format(IdFormat::AbsolutePath, bad), "") << bad;
  EXPECT_EQ(check_id_format(IdFormat::UnitName, "nginx.service"), "");
  EXPECT_EQ(check_id_format(IdFormat::UnitName, "getty@tty1.service"), "");
  for (const char* bad : {"nginx", "../x.service", "a b.service", ".service", "x."})
    EXPECT_NE(check_id_format(IdFormat::UnitName, bad), "") << bad;
  EXPECT_EQ(check_id_format(IdFormat::PackageName, "libc6"), "");
  EXPECT_EQ(check_id_format(IdFormat::PackageName, "g++"), "");
  for (const char* bad : {"n", "Nginx", "-x", "../x", "libc6:amd64", "a b"})
    EXPECT_NE(check_id_format(IdFormat::PackageName, bad), "") << bad;
  EXPECT_EQ(check_id_format(IdFormat::ContainerName, "web_1.a-b"), "");
  EXPECT_NE(check_id_format(IdFormat::ContainerName, "_x"), "");
  EXPECT_EQ(check_id_format(IdFormat::Any, "anything at all"), "");
  EXPECT_STREQ(to_string(IdFormat::AbsolutePath), "absolute_path");
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
