// The JSON reader (json.cpp): hostile input, limits, and syntax errors that name line and column.
#include <gtest/gtest.h>

#include "mesh/common/json.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

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

// parse_json_members: the root's members and one list's elements handed over one at a time, with
// the checks of parse_json (a problem in a late element is found after the earlier ones were
// handed over; its path names the element).
TEST(JsonMembersTest, HandsOverMembersAndElementsInDocumentOrder) {
  std::vector<std::string> seen;
  JsonMembers h;
  h.list_key = "items";
  h.member = [&](std::string_view key, sdk::Value v) -> sdk::Result<void> {
    seen.push_back("member " + std::string(key) + "=" + v.to_json());
    return {};
  };
  h.list_begin = [&](std::size_t) -> sdk::Result<void> {
    seen.push_back("begin");
    return {};
  };
  h.element = [&](std::size_t i, sdk::Value& v) -> sdk::Result<void> {
    seen.push_back("element " + std::to_string(i) + "=" + v.to_json());
    v = sdk::Value();  // the callback may take it apart
    return {};
  };
  ASSERT_TRUE(parse_json_members(R"({"a": 1, "items": [{"x": "y"}, 2, [3], {"z": null}], "b": {"c": true}})", {}, h));
  EXPECT_EQ(seen, (std::vector<std::string>{"member a=1", "begin", "element 0={\"x\":\"y\"}", "element 1=2",
                                            "element 2=[3]", "element 3={\"z\":null}",
                                            "member b={\"c\":true}"}));
  // `items` that is not a list is a member; an empty list is begun and has no element.
  seen.clear();
  ASSERT_TRUE(parse_json_members(R"({"items": {"k": 1}})", {}, h));
  EXPECT_EQ(seen, (std::vector<std::string>{"member items={\"k\":1}"}));
  seen.clear();
  ASSERT_TRUE(parse_json_members(R"({"items": []})", {}, h));
  EXPECT_EQ(seen, (std::vector<std::string>{"begin"}));
  // A root that is not an object goes to other_root alone.
  seen.clear();
  h.other_root = [&](sdk::Value v) -> sdk::Result<void> {
    seen.push_back("root " + v.to_json());
    return {};
  };
  ASSERT_TRUE(parse_json_members("[1, 2]", {}, h));
  EXPECT_EQ(seen, (std::vector<std::string>{"root [1,2]"}));
}

TEST(JsonMembersTest, TheChecksOfParseJsonWithPathsIntoTheList) {
  JsonMembers h;
  h.list_key = "owned";
  std::size_t elements = 0;
  h.element = [&](std::size_t, sdk::Value&) -> sdk::Result<void> {
    ++elements;
    return {};
  };
  // A duplicate key in the third element: found after two elements were handed over.
  auto dup = parse_json_members(R"({"owned": [{"a": 1}, {"a": 2}, {"p": {"m": 1, "m": 2}}]})", {}, h);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().path, "owned[2].p.m");
  EXPECT_EQ(elements, 2u);
  // A duplicate key at the root, a syntax error after the list, trailing content, depth.
  auto root_dup = parse_json_members(R"({"owned": [], "x": 1, "x": 2})", {}, h);
  ASSERT_FALSE(root_dup);
  EXPECT_EQ(root_dup.error().path, "x");
  auto broken = parse_json_members("{\"owned\": [{\"a\": 1}],\n \"b\": tru}", {}, h);
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find("not valid JSON at line 2, column 7"), std::string::npos)
      << broken.error().message;
  EXPECT_FALSE(parse_json_members(R"({"owned": []} [])", {}, h));
  auto deep = parse_json_members(R"({"owned": [{"a": [1]}]})", JsonLimits{1024, 3}, h);
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("nesting deeper than 3"), std::string::npos) << deep.error().message;
  EXPECT_TRUE(parse_json_members(R"({"owned": [{"a": 1}]})", JsonLimits{1024, 3}, h));
  auto big = parse_json_members(R"({"owned": []})", JsonLimits{4, 32}, h);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the limit"), std::string::npos);
  EXPECT_FALSE(parse_json_members("{\"owned\": [\"\xff\"]}", {}, h));
  // A callback's error stops the read and is what comes back.
  h.element = [&](std::size_t i, sdk::Value&) -> sdk::Result<void> {
    if (i == 1) return sdk::fail(sdk::ErrorCode::NotFound, "stop here", "owned[1]");
    return {};
  };
  auto stopped = parse_json_members(R"({"owned": [1, 2, 3]})", {}, h);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, sdk::ErrorCode::NotFound);
  EXPECT_EQ(stopped.error().message, "stop here");
}

// A callback may parse another document on the same thread (the thread's cached parser is busy
// with the outer one: the inner gets its own), and strings with escapes are unescaped.
TEST(JsonMembersTest, ACallbackMayParseAnotherDocumentAndEscapesAreUnescaped) {
  JsonMembers h;
  h.list_key = "l";
  std::vector<std::string> inner;
  h.element = [&](std::size_t, sdk::Value& v) -> sdk::Result<void> {
    auto w = parse_json(v.as_string());
    if (!w) return sdk::fail(w.error());
    inner.push_back(w->get_string("k"));
    return {};
  };
  ASSERT_TRUE(parse_json_members(R"({"l": ["{\"k\": \"a\\u00e9\\n\"}", "{\"k\": \"b\"}"], "z": "\u0041\"q"})", {}, h));
  EXPECT_EQ(inner, (std::vector<std::string>{"a\xc3\xa9\n", "b"}));
  auto v = parse_json(R"({"s": "tab\there", "t": "plain", "u": "\ud83d\ude00"})");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->get_string("s"), "tab\there");
  EXPECT_EQ(v->get_string("t"), "plain");
  EXPECT_EQ(v->get_string("u"), "\xf0\x9f\x98\x80");
}

// Numbers keep their kind: integers up to INT64_MAX as Int, larger ones and fractions as Double.
TEST(JsonTest, NumbersKeepTheirKind) {
  auto v = parse_json(R"([0, -0, 9223372036854775807, 9223372036854775808, 1.5, -2e3, 17])");
  ASSERT_TRUE(v) << v.error().message;
  const auto& a = v->as_array();
  EXPECT_TRUE(a[0].is_int());
  EXPECT_TRUE(a[2].is_int());
  EXPECT_EQ(a[2].as_int(), INT64_MAX);
  EXPECT_TRUE(a[3].is_double());
  EXPECT_TRUE(a[4].is_double());
  EXPECT_EQ(a[5].as_double(), -2000.0);
  EXPECT_EQ(a[6].as_int(), 17);
  EXPECT_FALSE(parse_json("[01]"));
  EXPECT_FALSE(parse_json("[1.]"));
  EXPECT_FALSE(parse_json("[tru]"));
  EXPECT_FALSE(parse_json("[nul]"));
  EXPECT_FALSE(parse_json("[1,]"));
  EXPECT_TRUE(parse_json("  17  "));
  EXPECT_FALSE(parse_json("17 18"));
}

// A text read with read_file_padded is parsed in place, with the same result; count_list hands
// the number of elements to list_begin.
TEST(JsonMembersTest, APaddedTextIsReadInPlaceAndAListCanBeCounted) {
  const std::string text = R"({"owned": [{"a": 1}, {"b": [2, 3]}, 4], "z": "end"})";
  PaddedText padded;
  padded.data = std::make_unique<char[]>(text.size() + PaddedText::kPadding);
  std::copy(text.begin(), text.end(), padded.data.get());
  padded.size = text.size();
  std::vector<std::string> seen;
  JsonMembers h;
  h.list_key = "owned";
  h.count_list = true;
  h.list_begin = [&](std::size_t count) -> sdk::Result<void> {
    seen.push_back("count " + std::to_string(count));
    return {};
  };
  h.element = [&](std::size_t i, sdk::Value& v) -> sdk::Result<void> {
    seen.push_back(std::to_string(i) + " " + v.to_json());
    return {};
  };
  h.member = [&](std::string_view key, sdk::Value v) -> sdk::Result<void> {
    seen.push_back(std::string(key) + " " + v.to_json());
    return {};
  };
  ASSERT_TRUE(parse_json_members(padded, {}, h));
  const std::vector<std::string> expected = {"count 3", "0 {\"a\":1}", "1 {\"b\":[2,3]}", "2 4", "z \"end\""};
  EXPECT_EQ(seen, expected);
  seen.clear();
  ASSERT_TRUE(parse_json_members(std::string_view(text), {}, h));
  EXPECT_EQ(seen, expected);
  // A broken list is refused while counting, as while reading.
  EXPECT_FALSE(parse_json_members(R"({"owned": [1, 2,, 3]})", {}, h));
}

}  // namespace
}  // namespace mesh::common
