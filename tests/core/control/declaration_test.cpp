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

TEST(DeclarationShapeTest, RefusesControlCharactersInIdsNamingThem) {
  const std::string rule = "; names and ids may not contain control, line-separator or bidirectional characters";
  auto nul = check(R"({"resources": [{"type": "file", "id": "/a\u0000b", "properties": {}}]})");
  EXPECT_EQ(nul.path, "resources[0].id");
  EXPECT_EQ(nul.message, "'/a\\x00b' contains a control character (\\x00 at byte 2)" + rule) << "not \"empty\"";
  auto newline = check(R"({"resources": [{"type": "file", "id": "/tmp/new\nline", "properties": {}}]})");
  EXPECT_EQ(newline.message, "'/tmp/new\\nline' contains a control character (\\n at byte 8)" + rule);
  auto esc = check(R"({"resources": [{"type": "fi\u001ble", "id": "/a", "properties": {}}]})");
  EXPECT_EQ(esc.path, "resources[0].type");
  EXPECT_EQ(esc.message, "'fi\\x1ble' contains a control character (\\x1b at byte 2)" + rule);
  EXPECT_EQ(check(R"({"resources": [{"type": "file", "id": "", "properties": {}}]})").message,
            "must be a non-empty string");
  EXPECT_TRUE(parse_declaration_text(R"({"resources": [{"type": "file", "id": "/srv/caf\u00e9", "properties": {}}]})",
                                     "web-01"));
}

TEST(DeclarationShapeTest, JsonErrorsNameLineAndColumnAndABom) {
  auto e = check("{\"resources\": [\n  {\"type\": \"file\" \"id\": \"/a\"}\n]}");
  EXPECT_NE(e.message.find("not valid JSON at line 2, column 19"), std::string::npos) << e.message;
  auto bom = check("\xef\xbb\xbf{\"resources\": []}");
  EXPECT_NE(bom.message.find("byte order mark (BOM)"), std::string::npos) << bom.message;
}

TEST(DeclarationShapeTest, RefusesWithAJsonPath) {
  EXPECT_EQ(check(R"({"resources": [)").code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(check(R"([])").message, "must be a JSON object");
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
  // The host's words since the check is shared (#12).
  EXPECT_EQ(dup.path, "resources[1].id");
  EXPECT_EQ(dup.message, "duplicate resource file:x (first at resources[0])");
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
