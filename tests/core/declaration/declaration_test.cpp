// The shared declaration check (core/declaration): every problem collected, with resource, path,
// code and message; the restart_on-aware cycle check; id formats and schemas when given.
#include "mesh/declaration/declaration.h"

#include <gtest/gtest.h>

#include "mesh/common/json.h"

namespace mesh::declaration {
namespace {

using sdk::ErrorCode;

sdk::Value doc(const std::string& text) {
  auto v = common::parse_json(text);
  EXPECT_TRUE(v) << v.error().describe();
  return v ? *v : sdk::Value();
}

Checked shape(const std::string& text, const std::string& node = "web-01") {
  CheckOptions o;
  o.expected_node = node;
  o.reader_is_node = false;
  return check(doc(text), o);
}

sdk::Schema file_schema() {
  sdk::Schema s;
  s.name = "file";
  s.id_format = sdk::IdFormat::AbsolutePath;
  s.attributes = {{"mode", sdk::ValueType::String, false, "octal mode"},
                  {"timeout", sdk::ValueType::Duration, false, "how long", {}, std::nullopt, 1000.0, 60000.0},
                  {"token", sdk::ValueType::String, false, "a secret", {}, std::nullopt, std::nullopt, std::nullopt,
                   false, true},
                  {"digest", sdk::ValueType::String, false, "computed", {}, std::nullopt, std::nullopt,
                   std::nullopt, true}};
  return s;
}

TEST(DeclarationCheckTest, CollectsEveryProblemOfTheShapeAtOnce) {
  auto c = shape(R"({"revision": 2, "resources": [
      {"type": "file", "id": "", "properties": {}},
      {"type": "file", "id": "/a", "properties": []},
      {"type": "file", "id": "/b", "properties": {}, "requires": ["file:/zz"]},
      {"type": "file", "id": "/b", "properties": {}},
      {"type": "file", "id": "/c", "properties": {}, "extra": 1}]})");
  ASSERT_FALSE(c.ok());
  ASSERT_EQ(c.diagnostics.size(), 6u) << to_text(c.diagnostics);
  EXPECT_EQ(c.diagnostics[0].path, "revision");
  EXPECT_EQ(c.diagnostics[1].path, "resources[0].id");
  EXPECT_EQ(c.diagnostics[1].message, "must be a non-empty string");
  EXPECT_EQ(c.diagnostics[1].resource, "");
  EXPECT_EQ(c.diagnostics[2].path, "resources[1].properties");
  EXPECT_EQ(c.diagnostics[2].resource, "file:/a");
  EXPECT_EQ(c.diagnostics[2].text, "resources[1] (file:/a): properties: must be an object");
  EXPECT_EQ(c.diagnostics[3].path, "resources[4].extra");
  EXPECT_EQ(c.diagnostics[4].path, "resources[3].id");
  EXPECT_EQ(c.diagnostics[4].message, "duplicate resource file:/b (first at resources[2])");
  EXPECT_EQ(c.diagnostics[5].path, "resources[2].requires[0]");
  EXPECT_EQ(c.diagnostics[5].describe(), "resources[2].requires[0] (file:/b): requires 'file:/zz', which is not declared");
  for (const auto& d : c.diagnostics) EXPECT_EQ(d.code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(c.order.empty());
}

TEST(DeclarationCheckTest, TheShapeCheckKnowsRestartOn) {
  // Without providers (mesh declare, the control plane) a cycle closed by restart_on is found.
  auto c = shape(R"({"resources": [
      {"type": "file", "id": "/etc/a", "properties": {}, "requires": ["service:app.service"]},
      {"type": "service", "id": "app.service", "properties": {"restart_on": ["file:/etc/a"]}}]})");
  ASSERT_EQ(c.diagnostics.size(), 1u) << to_text(c.diagnostics);
  EXPECT_EQ(c.diagnostics[0].message,
            "requires cycle: file:/etc/a -> service:app.service -> file:/etc/a (restart_on orders like requires)");
  EXPECT_EQ(c.diagnostics[0].resource, "file:/etc/a");
  auto missing = shape(R"({"resources": [
      {"type": "service", "id": "app.service", "properties": {"restart_on": ["file:/etc/nope", 3]}}]})");
  ASSERT_EQ(missing.diagnostics.size(), 2u) << to_text(missing.diagnostics);
  EXPECT_EQ(missing.diagnostics[0].path, "resources[0].properties.restart_on[0]");
  EXPECT_EQ(missing.diagnostics[1].path, "resources[0].properties.restart_on[1]");
  // Ordered: restart_on like requires, otherwise declaration order.
  auto ok = shape(R"({"resources": [
      {"type": "service", "id": "app.service", "properties": {"restart_on": ["file:/etc/a"]}},
      {"type": "file", "id": "/etc/a", "properties": {}},
      {"type": "file", "id": "/etc/b", "properties": {}}]})");
  ASSERT_TRUE(ok.ok()) << to_text(ok.diagnostics);
  EXPECT_EQ(ok.order, (std::vector<std::size_t>{1, 0, 2}));
}

TEST(DeclarationCheckTest, SchemasIdFormatsAndValidateEveryResource) {
  const sdk::Schema fs = file_schema();
  CheckOptions o;
  o.schema_of = [&](std::string_view t) -> const sdk::Schema* { return t == "file" ? &fs : nullptr; };
  o.known_types = "providers on web-01: file";
  int validated = 0;
  o.validate = [&](std::size_t, const sdk::Value&, std::vector<sdk::Error>& out) {
    ++validated;
    out.push_back(sdk::Error{ErrorCode::Internal, "provider bug", "properties"});
  };
  auto c = check(doc(R"({"resources": [
      {"type": "file", "id": "/srv/../etc/shadow", "properties": {}},
      {"type": "file", "id": "/a", "properties": {"mode": 1, "timeout": "2h", "digest": "x"}},
      {"type": "fiel", "id": "/b", "properties": {}},
      {"type": "file", "id": "/c", "properties": {"token": 5}},
      {"type": "file", "id": "/d", "properties": {"timeout": "5s"}}]})"),
                 o);
  ASSERT_EQ(c.diagnostics.size(), 7u) << to_text(c.diagnostics);
  EXPECT_EQ(c.diagnostics[0].path, "resources[2].type");
  EXPECT_EQ(c.diagnostics[0].text, "resources[2]: unknown resource type 'fiel' (providers on web-01: file)");
  EXPECT_EQ(c.diagnostics[1].path, "resources[0].id");
  EXPECT_NE(c.diagnostics[1].message.find("absolute path without '.' or '..'"), std::string::npos);
  EXPECT_EQ(c.diagnostics[2].path, "resources[1].properties.mode");
  EXPECT_EQ(c.diagnostics[3].path, "resources[1].properties.timeout");
  EXPECT_EQ(c.diagnostics[3].message, "must be at most 60000ms (is 7200000ms)");
  EXPECT_EQ(c.diagnostics[4].path, "resources[1].properties.digest");
  EXPECT_NE(c.diagnostics[4].message.find("read-only"), std::string::npos);
  EXPECT_EQ(c.diagnostics[5].path, "resources[3].properties.token");
  // Only the resource that passed its schema reaches validate, whose code is kept.
  EXPECT_EQ(validated, 1);
  EXPECT_EQ(c.diagnostics[6].path, "resources[4].properties");
  EXPECT_EQ(c.diagnostics[6].code, ErrorCode::Internal);
}

TEST(DeclarationCheckTest, DiagnosticsRoundTripAsJson) {
  auto c = shape(R"({"node": "web-02", "resources": [{"type": "file", "id": "/a", "properties": []}]})");
  ASSERT_EQ(c.diagnostics.size(), 2u);
  const sdk::Value j = to_json(c.diagnostics);
  EXPECT_EQ(j.to_json(),
            R"([{"resource":"","path":"node","code":"invalid_argument","message":"names 'web-02', but the declaration is for 'web-01'"},)"
            R"({"resource":"file:/a","path":"resources[0].properties","code":"invalid_argument","message":"must be an object"}])");
  auto back = from_json(j);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].describe(), "resources[0].properties (file:/a): must be an object");
  EXPECT_EQ(to_text(back, "  "),
            "  node: names 'web-02', but the declaration is for 'web-01'\n"
            "  resources[0].properties (file:/a): must be an object\n");
}

TEST(DeclarationCheckTest, StopsAtTheDocumentWhenThereAreNoResources) {
  auto c = shape(R"({"extra": 1})");
  ASSERT_EQ(c.diagnostics.size(), 2u);
  EXPECT_EQ(c.diagnostics[0].text, "declaration: unknown key 'extra' (valid: node, resources)");
  EXPECT_EQ(c.diagnostics[1].text, "resources: is required");
  EXPECT_EQ(shape("[]").diagnostics.at(0).text, "declaration: must be a JSON object");
}

// The Checker fed as the host feeds it — the document's members as they come, each resource
// element by element and gone after its call (the host moves its properties out in validate) —
// gives what check() gives on the whole tree: the same diagnostics in the same order (by phase,
// then declaration order), whatever the order of the members in the text, and the same order.
TEST(DeclarationCheckTest, ACheckerFedPieceByPieceAnswersAsCheckDoes) {
  const sdk::Schema fs = file_schema();
  CheckOptions o;
  o.expected_node = "web-01";
  o.schema_of = [&](std::string_view t) -> const sdk::Schema* { return t == "file" ? &fs : nullptr; };
  o.known_types = "loaded providers: file";
  o.validate = [&](std::size_t, const sdk::Value& r, std::vector<sdk::Error>& out) {
    if (r.get_string("id") == "/v") out.push_back(sdk::Error{ErrorCode::InvalidArgument, "refused", "id"});
  };
  const std::string resources = R"([
      {"type": "file", "id": "/a", "properties": {"mode": 1}},
      {"type": "file", "id": "/v", "properties": {}, "requires": ["file:/b"]},
      {"type": "fiel", "id": "/x", "properties": {}},
      {"type": "file", "id": "/a", "properties": {}},
      {"type": "file", "id": "", "properties": {}},
      {"type": "file", "id": "/b", "properties": {}, "requires": ["file:/nope"]},
      {"type": "file", "id": "/c", "properties": {"restart_on": ["file:/d"]}},
      {"type": "file", "id": "/d", "properties": {}, "requires": ["file:/c"]}])";
  for (const std::string& text :
       {R"({"node": "web-02", "extra": 1, "resources": )" + resources + "}",
        R"({"resources": )" + resources + R"(, "node": "web-02", "extra": 1})"}) {
    const sdk::Value tree = doc(text);
    const Checked whole = check(tree, o);
    Checker checker(o);
    for (const auto& [key, value] : tree.as_object()) {
      if (key != "resources") {
        checker.member(key, value);
        continue;
      }
      checker.begin_resources();
      for (const auto& r : value.as_array()) {
        sdk::Value element = r;  // a copy that is gone after the call, as the host's
        checker.resource(element);
        element = sdk::Value();
      }
    }
    const Checked fed = checker.finish();
    ASSERT_EQ(to_text(fed.diagnostics), to_text(whole.diagnostics)) << text;
    ASSERT_EQ(fed.diagnostics.size(), 10u) << to_text(fed.diagnostics);
    EXPECT_EQ(fed.diagnostics[0].path, "node");
    EXPECT_EQ(fed.diagnostics[1].path, "extra");
    EXPECT_EQ(fed.diagnostics[2].path, "resources[4].id");                 // shape
    EXPECT_EQ(fed.diagnostics[3].path, "resources[2].type");               // type
    EXPECT_EQ(fed.diagnostics[4].path, "resources[3].id");                 // unique
    EXPECT_EQ(fed.diagnostics[5].path, "resources[0].properties.mode");    // schema
    EXPECT_EQ(fed.diagnostics[6].path, "resources[6].properties.restart_on");  // schema
    EXPECT_EQ(fed.diagnostics[7].path, "resources[1].id");                 // validate
    EXPECT_EQ(fed.diagnostics[8].path, "resources[5].requires[0]");        // requires
    EXPECT_EQ(fed.diagnostics[9].message,
              "requires cycle: file:/c -> file:/d -> file:/c (restart_on orders like requires)");
    for (std::size_t i = 0; i < fed.diagnostics.size(); ++i)
      EXPECT_EQ(fed.diagnostics[i].text, whole.diagnostics[i].text);
  }
  // A clean declaration: the same apply order both ways.
  const sdk::Value clean = doc(R"({"resources": [
      {"type": "file", "id": "/b", "properties": {}, "requires": ["file:/a"]},
      {"type": "file", "id": "/a", "properties": {}}]})");
  Checker checker(o);
  checker.begin_resources();
  for (const auto& r : clean.find("resources")->as_array()) checker.resource(r);
  const Checked fed = checker.finish();
  ASSERT_TRUE(fed.ok()) << to_text(fed.diagnostics);
  EXPECT_EQ(fed.order, (std::vector<std::size_t>{1, 0}));
  EXPECT_EQ(fed.order, check(clean, o).order);
}

}  // namespace
}  // namespace mesh::declaration
