#include <gtest/gtest.h>

#include "mesh/common/json.h"
#include "mesh/control/declaration.h"

namespace mesh::control {
namespace {

sdk::Error check(const std::string& text, const std::string& node = "web-01") {
  auto r = parse_declaration_text(text, node);
  if (r) return sdk::Error{sdk::ErrorCode::Internal, "accepted", ""};
  return r.error();
}

TEST(DeclarationShapeTest, AcceptsTheInterfaceExample) {
  auto r = parse_declaration_text(R"({
    "node": "web-01",
    "resources": [
      {"type": "file", "id": "/etc/motd", "properties": {"content": "hello\n", "mode": "0644"}},
      {"type": "package", "id": "nginx", "properties": {"version": "1.22.1-9+deb12u1"}},
      {"type": "service", "id": "nginx.service", "properties": {"running": true},
       "requires": ["package:nginx", "file:/etc/motd"]}
    ]})",
                                  "web-01");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(parse_declaration_text(R"({"resources": []})", "web-01"));
}

TEST(DeclarationShapeTest, RefusesWithAJsonPath) {
  EXPECT_EQ(check(R"({"resources": [)").code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(check(R"([])").message, "a declaration must be a JSON object");
  EXPECT_EQ(check(R"({"revision": 3, "resources": []})").path, "revision");
  EXPECT_EQ(check(R"({"node": "web-02", "resources": []})").path, "node");
  EXPECT_EQ(check(R"({"node": 1, "resources": []})").path, "node");
  EXPECT_EQ(check(R"({"resources": [], "extra": 1})").path, "extra");
  EXPECT_EQ(check(R"({})").path, "resources");
  EXPECT_EQ(check(R"({"resources": {}})").path, "resources");
  EXPECT_EQ(check(R"({"resources": [1]})").path, "resources[0]");
  EXPECT_EQ(check(R"({"resources": [{"type": "", "id": "x", "properties": {}}]})").path, "resources[0].type");
  EXPECT_EQ(check(R"({"resources": [{"type": "file", "id": 3, "properties": {}}]})").path, "resources[0].id");
  EXPECT_EQ(check(R"({"resources": [{"type": "file", "id": "x"}]})").path, "resources[0].properties");
  EXPECT_EQ(check(R"({"resources": [{"type": "file", "id": "x", "properties": []}]})").path,
            "resources[0].properties");
  EXPECT_EQ(check(R"({"resources": [{"type": "file", "id": "x", "properties": {}, "requires": "a:b"}]})").path,
            "resources[0].requires");
  EXPECT_EQ(check(R"({"resources": [{"type": "file", "id": "x", "properties": {}, "requires": ["nocolon"]}]})").path,
            "resources[0].requires[0]");
  EXPECT_EQ(check(R"({"resources": [{"type": "file", "id": "x", "properties": {}, "ensure": "absent"}]})").path,
            "resources[0].ensure");
  auto dup = check(R"({"resources": [{"type": "file", "id": "x", "properties": {}},
                                     {"type": "file", "id": "x", "properties": {}}]})");
  EXPECT_EQ(dup.path, "resources[1]");
  EXPECT_NE(dup.message.find("file:x is declared twice"), std::string::npos);
  // Duplicate keys are refused by the JSON parser itself.
  EXPECT_EQ(check(R"({"resources": [], "resources": []})").code, sdk::ErrorCode::InvalidArgument);
}

TEST(DeclarationShapeTest, RequiresMustNameDeclaredResourcesWithoutACycle) {
  auto missing = check(R"({"resources": [
      {"type": "a", "id": "1", "properties": {}},
      {"type": "b", "id": "2", "properties": {}, "requires": ["a:1", "c:3"]}]})");
  EXPECT_EQ(missing.path, "resources[1].requires[1]");
  EXPECT_NE(missing.message.find("'c:3', which is not declared"), std::string::npos);

  auto cycle = check(R"({"resources": [
      {"type": "a", "id": "1", "properties": {}, "requires": ["b:2"]},
      {"type": "b", "id": "2", "properties": {}, "requires": ["c:3"]},
      {"type": "c", "id": "3", "properties": {}, "requires": ["b:2"]}]})");
  EXPECT_NE(cycle.message.find("requires cycle: b:2 -> c:3 -> b:2"), std::string::npos) << cycle.message;

  auto self = check(R"({"resources": [{"type": "a", "id": "1", "properties": {}, "requires": ["a:1"]}]})");
  EXPECT_NE(self.message.find("requires cycle: a:1 -> a:1"), std::string::npos) << self.message;

  EXPECT_TRUE(parse_declaration_text(R"({"resources": [
      {"type": "a", "id": "1", "properties": {}},
      {"type": "b", "id": "2", "properties": {}, "requires": ["a:1"]},
      {"type": "c", "id": "3", "properties": {}, "requires": ["a:1", "b:2"]}]})",
                                     "web-01"));
}

TEST(DeclarationShapeTest, RenderSetsNodeAndRevisionAndKeepsResources) {
  auto d = parse_declaration_text(
      R"({"resources": [{"type": "file", "id": "/etc/motd", "properties": {"content": "hi\n", "n": 3}}]})",
      "web-01");
  ASSERT_TRUE(d);
  std::string body = render_declaration(*d->find("resources"), "web-01", 43);
  EXPECT_EQ(body,
            R"({"node":"web-01","revision":43,"resources":[{"type":"file","id":"/etc/motd","properties":{"content":"hi\n","n":3}}]})");
  auto back = common::parse_json(body);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back->find("resources"), *d->find("resources"));
}

}  // namespace
}  // namespace mesh::control
