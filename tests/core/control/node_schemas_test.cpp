// The briefing's provider schemas as the control plane reads them, and the declaration check
// against them (core/control/src/node_schemas.cpp, decision record 48).
#include <gtest/gtest.h>

#include "mesh/common/json.h"
#include "node_schemas.h"

namespace mesh::control::detail {
namespace {

// As `mesh-host plugins describe file --output json` prints it (abridged).
const char* kFile = R"json([{"name":"file","description":"a file","id_format":"absolute_path",
  "attributes":[{"name":"content","type":"string","required":false,"description":"","read_only":false,"sensitive":false},
                {"name":"mode","type":"string","required":false,"description":"","read_only":false,"sensitive":false},
                {"name":"ensure","type":"string","required":false,"description":"","allowed":["present","absent"],
                 "default":"present","read_only":false,"sensitive":false},
                {"name":"token","type":"string","required":false,"description":"","default":"(sensitive value)",
                 "read_only":false,"sensitive":true}],
  "exclusive":[["content","mode"]]}])json";

sdk::Value parse(const char* text) {
  auto v = common::parse_json(text);
  EXPECT_TRUE(v) << v.error().describe();
  return v ? *v : sdk::Value();
}

TEST(ControlNodeSchemasTest, ReadsWhatDescribePrints) {
  auto s = schemas_from_json(parse(kFile));
  ASSERT_TRUE(s) << s.error().describe();
  ASSERT_EQ(s->size(), 1u);
  const auto& f = s->front();
  EXPECT_EQ(f.name, "file");
  EXPECT_EQ(f.id_format, sdk::IdFormat::AbsolutePath);
  ASSERT_EQ(f.attributes.size(), 4u);
  EXPECT_EQ(f.attributes[2].allowed.size(), 2u);
  EXPECT_TRUE(f.attributes[2].default_value);
  EXPECT_TRUE(f.attributes[3].sensitive);
  EXPECT_FALSE(f.attributes[3].default_value);  // "(sensitive value)" is not a default
  ASSERT_EQ(f.exclusive.size(), 1u);
}

TEST(ControlNodeSchemasTest, ABadShapeIsRefusedNamingTheField) {
  auto bad = schemas_from_json(parse(R"([{"name":"file","attributes":[{"name":"mode","type":"octal"}]}])"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().path, "schemas[0].attributes[0].type");
  EXPECT_NE(bad.error().message.find("'octal'"), std::string::npos) << bad.error().message;

  auto body = parse(R"({"node":"web","at_ms":1,"lines":[],"schemas":{"file":{}}})");
  auto r = briefing_schemas(body);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "schemas");

  auto twice = schemas_from_json(parse(R"([{"name":"file","attributes":[]},{"name":"file","attributes":[]}])"));
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().path, "schemas[1].name");

  auto format = schemas_from_json(parse(R"([{"name":"file","id_format":"url","attributes":[]}])"));
  ASSERT_FALSE(format);
  EXPECT_EQ(format.error().path, "schemas[0].id_format");

  // Absent: a host from before the field.
  auto old = briefing_schemas(parse(R"({"node":"web","at_ms":1,"lines":[]})"));
  ASSERT_TRUE(old);
  EXPECT_FALSE(*old);
}

TEST(ControlNodeSchemasTest, CheckFindsEveryProblemAgainstTheNodesSchemas) {
  auto s = schemas_from_json(parse(kFile));
  ASSERT_TRUE(s);
  auto decl = parse(R"({"resources":[
    {"type":"file","id":"/etc/../x","properties":{"mode":644}},
    {"type":"package","id":"nginx","properties":{}}]})");
  auto found = check_for_node(decl, "web", *s);
  EXPECT_TRUE(found.schemas_checked);
  ASSERT_EQ(found.diagnostics.size(), 3u) << declaration::to_text(found.diagnostics);
  std::string all = declaration::to_text(found.diagnostics);
  EXPECT_NE(all.find("unknown resource type 'package' (node web's providers: file)"), std::string::npos) << all;
  EXPECT_NE(all.find("resources[0].id (file:/etc/../x)"), std::string::npos) << all;
  EXPECT_NE(all.find("resources[0].properties.mode"), std::string::npos) << all;
  auto e = refusal_of(found.diagnostics);
  EXPECT_EQ(e.code, sdk::ErrorCode::InvalidArgument);
  EXPECT_NE(e.message.find("(and 2 more problems)"), std::string::npos) << e.message;

  // Without schemas: shape only, so none of these.
  auto shape = check_for_node(decl, "web", std::nullopt);
  EXPECT_FALSE(shape.schemas_checked);
  EXPECT_TRUE(shape.diagnostics.empty()) << declaration::to_text(shape.diagnostics);
}

}  // namespace
}  // namespace mesh::control::detail
