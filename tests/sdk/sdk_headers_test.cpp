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

TEST(CancelTokenTest, DeadlineCancels) {
  CancelToken t(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_TRUE(t.cancelled());
  CancelToken u;
  EXPECT_FALSE(u.cancelled());
  u.cancel();
  EXPECT_TRUE(u.cancelled());
}

}  // namespace
}  // namespace mesh::sdk
