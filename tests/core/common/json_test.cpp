// The JSON reader (json.cpp): hostile input, limits, and syntax errors that name line and column.
#include <gtest/gtest.h>

#include "mesh/common/json.h"

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

// A document larger than the thread's cached parser takes (json.cpp: it gets a parser of its own)
// is read the same, with the same checks (depth, duplicates, syntax), and small documents before
// and after it still parse with the cached one at their own depth limits.
TEST(JsonTest, ALargeDocumentParsesLikeASmallOneAndTheNextSmallOneStillParses) {
  EXPECT_TRUE(parse_json(R"({"small":[1,2,3]})"));
  std::string text = "{\"items\":[";
  for (int i = 0; i < 60000; ++i) text += (i ? ",{\"n\":" : "{\"n\":") + std::to_string(i) + ",\"s\":\"" + std::string(40, 'x') + "\"}";
  text += "]}";
  ASSERT_GT(text.size(), 2u << 20);
  JsonLimits limits{8u << 20, 4};
  auto v = parse_json(text, limits);
  ASSERT_TRUE(v) << v.error().message;
  ASSERT_EQ(v->find("items")->as_array().size(), 60000u);
  EXPECT_EQ(v->find("items")->as_array()[59999].get_int("n", -1), 59999);
  EXPECT_EQ(v->find("items")->as_array()[7].get_string("s"), std::string(40, 'x'));
  // The same checks on the large path: depth, duplicate keys, syntax with its position.
  auto deep = parse_json(text, JsonLimits{8u << 20, 2});
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("nesting deeper than 2"), std::string::npos) << deep.error().message;
  std::string dup = text;
  dup.replace(dup.size() - 2, 2, ",{\"n\":1,\"n\":2}]}");
  auto d = parse_json(dup, limits);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().path, "items[60000].n");
  std::string broken = text;
  broken.back() = ',';
  auto b = parse_json(broken, limits);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("not valid JSON at line 1"), std::string::npos) << b.error().message;
  // Small documents afterwards, at another depth limit and at the default one.
  EXPECT_TRUE(parse_json(R"([[["a"]]])", JsonLimits{1024, 3}));
  EXPECT_FALSE(parse_json(R"([[[["a"]]]])", JsonLimits{1024, 3}));
  auto again = parse_json(R"({"small":[1,2,3]})");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->find("small")->as_array().size(), 3u);
}

TEST(JsonErrorTest, SyntaxErrorsNameLineAndColumnAndABomHasItsOwnMessage) {
  auto missing_comma = parse_json("{\n  \"a\": 1\n  \"b\": 2\n}");
  ASSERT_FALSE(missing_comma);
  EXPECT_NE(missing_comma.error().message.find("not valid JSON at line 3, column 3"), std::string::npos)
      << missing_comma.error().message;
  auto trailing = parse_json("{\"a\": [1, 2,]}");
  ASSERT_FALSE(trailing);
  EXPECT_NE(trailing.error().message.find("at line 1, column 13"), std::string::npos) << trailing.error().message;
  auto unclosed = parse_json("{\"a\": \"caf\xc3\xa9");
  ASSERT_FALSE(unclosed);
  EXPECT_NE(unclosed.error().message.find("at line 1, column 12"), std::string::npos) << unclosed.error().message;
  auto extra = parse_json("{}\n\n  x");
  ASSERT_FALSE(extra);
  EXPECT_NE(extra.error().message.find("at line 3, column 3"), std::string::npos) << extra.error().message;
  auto bom = parse_json("\xef\xbb\xbf{}");
  ASSERT_FALSE(bom);
  EXPECT_NE(bom.error().message.find("byte order mark (BOM)"), std::string::npos) << bom.error().message;
}

}  // namespace
}  // namespace mesh::common
