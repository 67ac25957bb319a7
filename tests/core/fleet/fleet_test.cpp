// Unit tests of the fleet composition library (mesh/fleet/fleet.h): module files, templates,
// selectors, composition and diff.
#include "mesh/fleet/fleet.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../../sdk/canonical_json_cases.h"
#include "mesh/common/json.h"

namespace mesh::fleet {
namespace {

using sdk::ErrorCode;
using sdk::Value;

Value json(std::string_view text) {
  auto v = common::parse_json(text);
  EXPECT_TRUE(v) << (v ? "" : v.error().describe());
  return v ? *v : Value();
}

NodeContext web01() {
  NodeContext n;
  n.name = "web-01";
  n.labels = {{"role", "web"}, {"env", "prod"}, {"team.owner", "ops"}};
  n.facts = {{"os.id", "debian"}, {"os.version_id", "12"}, {"arch", "amd64"}};
  return n;
}

std::string render_ok(std::string_view text, const NodeContext& n = web01()) {
  auto r = render_template(text, n, "t");
  EXPECT_TRUE(r) << text << " → " << (r ? "" : r.error().describe());
  return r ? *r : std::string();
}

std::string render_error(std::string_view text, const NodeContext& n = web01()) {
  auto r = render_template(text, n, "where");
  EXPECT_FALSE(r) << text << " rendered as '" << (r ? *r : "") << "'";
  if (r) return {};
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().message.rfind("where: ", 0), 0u) << r.error().message;
  return r.error().message;
}

constexpr const char* kWebModule = R"({"module": "web", "version": "1.4.2",
 "resources": [
   {"type": "file", "id": "/etc/motd",
    "properties": {"content": "{{node.name}} serves {{labels.role}} on {{facts.os.id}}\n"}},
   {"type": "package", "id": "nginx", "properties": {"version": "present"}}]})";

// --- templates --------------------------------------------------------------------------------

TEST(RenderTemplate, NodeNameLabelsAndFlatFacts) {
  EXPECT_EQ(render_ok("{{node.name}} serves {{labels.role}} on {{facts.os.id}} {{facts.os.version_id}}"),
            "web-01 serves web on debian 12");
  EXPECT_EQ(render_ok("{{facts.arch}}/{{labels.team.owner}}"), "amd64/ops");
  EXPECT_EQ(render_ok("{{ labels.role }}"), "web");  // spaces inside the tag
}

TEST(RenderTemplate, NoHtmlEscaping) {
  NodeContext n = web01();
  n.labels["motd"] = R"(<b>"A" & 'B'</b>)";
  EXPECT_EQ(render_ok("{{labels.motd}}", n), R"(<b>"A" & 'B'</b>)");
  EXPECT_EQ(render_ok("{{{labels.motd}}}", n), R"(<b>"A" & 'B'</b>)");
  EXPECT_EQ(render_ok("{{&labels.motd}}", n), R"(<b>"A" & 'B'</b>)");
}

TEST(RenderTemplate, ValuesAreNotRenderedAgain) {
  NodeContext n = web01();
  n.labels["tricky"] = "{{node.name}}";
  EXPECT_EQ(render_ok("x={{labels.tricky}}", n), "x={{node.name}}");
}

TEST(RenderTemplate, PlainTextAndNewlinesKept) {
  EXPECT_EQ(render_ok("no tags at all\n\tindented\n"), "no tags at all\n\tindented\n");
  EXPECT_EQ(render_ok("a\n{{node.name}}\nb\n"), "a\nweb-01\nb\n");
  EXPECT_EQ(render_ok(""), "");
  EXPECT_EQ(render_ok("{{! a comment }}x"), "x");
}

TEST(RenderTemplate, MissingLabelIsAnErrorNamingIt) {
  const auto m = render_error("role={{labels.rack}}");
  EXPECT_NE(m.find("no label 'rack'"), std::string::npos) << m;
}

TEST(RenderTemplate, MissingFactIsAnErrorNamingIt) {
  const auto m = render_error("{{facts.os.codename}}");
  EXPECT_NE(m.find("no fact 'os.codename'"), std::string::npos) << m;
  const auto u = render_error("{{{facts.kernel}}}");
  EXPECT_NE(u.find("no fact 'kernel'"), std::string::npos) << u;
  const auto a = render_error("{{&facts.kernel}}");
  EXPECT_NE(a.find("no fact 'kernel'"), std::string::npos) << a;
}

TEST(RenderTemplate, UnknownNamesAndGroupsAreErrors) {
  EXPECT_NE(render_error("{{hostname}}").find("unknown name 'hostname'"), std::string::npos);
  EXPECT_NE(render_error("{{node.ip}}").find("unknown name 'node.ip'"), std::string::npos);
  EXPECT_NE(render_error("{{labels}}").find("'labels' is a group of values"), std::string::npos);
  EXPECT_NE(render_error("{{facts}}").find("'facts' is a group of values"), std::string::npos);
  EXPECT_NE(render_error("{{.}}").find("'.' is not one value here"), std::string::npos);
  EXPECT_NE(render_error("{{#labels}}{{.}}{{/labels}}").find("'.' is not one value here"), std::string::npos);
  // facts are flat: facts.os is not an object of the data (os.id is one key)
  EXPECT_NE(render_error("{{facts.os}}").find("no fact 'os'"), std::string::npos);
}

TEST(RenderTemplate, TheFirstMissingOfSeveralIsNamed) {
  const auto m = render_error("{{labels.a}} {{labels.b}}");
  EXPECT_NE(m.find("no label 'a'"), std::string::npos) << m;
}

TEST(RenderTemplate, SectionsArePresenceTests) {
  // present: the body, with {{.}} the value
  EXPECT_EQ(render_ok("{{#labels.env}}env={{.}}{{/labels.env}}"), "env=prod");
  EXPECT_EQ(render_ok("{{#labels.env}}{{node.name}} in {{labels.env}}{{/labels.env}}"), "web-01 in prod");
  // absent: nothing, and no error
  EXPECT_EQ(render_ok("[{{#labels.rack}}rack={{.}}{{/labels.rack}}]"), "[]");
  // inverted: only when absent
  EXPECT_EQ(render_ok("{{^labels.rack}}no rack{{/labels.rack}}"), "no rack");
  EXPECT_EQ(render_ok("{{^labels.env}}no env{{/labels.env}}"), "");
  EXPECT_EQ(render_ok("{{#facts.os.id}}{{.}}{{/facts.os.id}}{{^facts.kernel}}?{{/facts.kernel}}"), "debian?");
  // an empty label value is present (a string is never false)
  NodeContext n = web01();
  n.labels["empty"] = "";
  EXPECT_EQ(render_ok("{{#labels.empty}}set{{/labels.empty}}{{^labels.empty}}unset{{/labels.empty}}", n), "set");
}

TEST(RenderTemplate, VariablesInsideSectionsAreStillChecked) {
  // The body of a section that renders is checked...
  EXPECT_NE(render_error("{{#labels.env}}{{labels.rack}}{{/labels.env}}").find("no label 'rack'"),
            std::string::npos);
  // ...and so is an inverted section's body when it renders.
  EXPECT_NE(render_error("{{^labels.rack}}{{facts.kernel}}{{/labels.rack}}").find("no fact 'kernel'"),
            std::string::npos);
  // A body that does not render is not: a missing name there is never used.
  EXPECT_EQ(render_ok("{{#labels.rack}}{{labels.rack}}-{{labels.row}}{{/labels.rack}}ok"), "ok");
  EXPECT_EQ(render_ok("{{^labels.env}}{{labels.rack}}{{/labels.env}}ok"), "ok");
  // A variable inside an inverted section over the same missing name is still checked.
  EXPECT_NE(render_error("{{^labels.rack}}rack={{labels.rack}}{{/labels.rack}}").find("no label 'rack'"),
            std::string::npos);
  EXPECT_NE(render_error("{{^labels.rack}}{{^labels.rack}}{{labels.rack}}{{/labels.rack}}{{/labels.rack}}")
                .find("no label 'rack'"),
            std::string::npos);
  // A name missing in one place and used as a section elsewhere is still an error as a variable.
  EXPECT_NE(render_error("{{#labels.rack}}r{{/labels.rack}}{{labels.rack}}").find("no label 'rack'"),
            std::string::npos);
}

TEST(RenderTemplate, SectionOverAGroupPushesIt) {
  EXPECT_EQ(render_ok("{{#labels}}{{role}}/{{env}}{{/labels}}"), "web/prod");
  EXPECT_NE(render_error("{{#labels}}{{rack}}{{/labels}}").find("unknown name 'rack'"), std::string::npos);
}

TEST(RenderTemplate, SetDelimitersAllowLiteralBraces) {
  EXPECT_EQ(render_ok("{{=<% %>=}}{{ raw }} <%node.name%>"), "{{ raw }} web-01");
}

TEST(RenderTemplate, TheExamplesOfTheDocs) {
  EXPECT_EQ(render_ok("{{=<% %>=}}{{ $labels.instance }} on <%node.name%>"), "{{ $labels.instance }} on web-01");
  EXPECT_EQ(render_ok("a\n{{#labels.env}}\nenv={{.}}\n{{/labels.env}}\nb\n"), "a\nenv=prod\nb\n");
  // kainjow: the standalone tag lines of a section that does not render leave one empty line...
  EXPECT_EQ(render_ok("a\n{{#labels.rack}}\nrack={{.}}\n{{/labels.rack}}\nb\n"), "a\n\nb\n");
  // ...which tags written inline with the text avoid.
  EXPECT_EQ(render_ok("a\n{{#labels.rack}}rack={{.}}\n{{/labels.rack}}b\n"), "a\nb\n");
  EXPECT_EQ(render_ok("a\n{{#labels.env}}env={{.}}\n{{/labels.env}}b\n"), "a\nenv=prod\nb\n");
  EXPECT_EQ(render_ok("{{#labels.env}}{{labels.env}}{{/labels.env}}"), "prod");
  EXPECT_EQ(render_ok("{{^labels.env}}env=unset{{/labels.env}}"), "");
  NodeContext n = web01();
  n.labels.erase("env");
  EXPECT_EQ(render_ok("{{^labels.env}}env=unset{{/labels.env}}", n), "env=unset");
  EXPECT_NE(render_error("{{hostname}}").find("unknown name 'hostname' (names: node.name, labels.KEY, facts.KEY)"),
            std::string::npos);
}

TEST(RenderTemplate, PartialsAreRefused) {
  const auto m = render_error("{{> header}}");
  EXPECT_NE(m.find("partials"), std::string::npos) << m;
}

TEST(RenderTemplate, ParseErrorsAreInvalidArgument) {
  for (const char* t : {"{{", "{{node.name", "{{#labels.env}}open", "{{/labels.env}}", "{{#a}}{{/b}}",
                        "{{{node.name}}", "{{=<% %>"}) {
    const auto m = render_error(t);
    EXPECT_NE(m.find("template"), std::string::npos) << t << " → " << m;
  }
}

TEST(RenderTemplate, DeepNestingIsRefusedNotACrash) {
  std::string deep;
  for (int i = 0; i < 3000; ++i) deep += "{{#labels.env}}";
  for (int i = 0; i < 3000; ++i) deep += "{{/labels.env}}";
  EXPECT_NE(render_error(deep).find("more than 100 sections"), std::string::npos);
  // Changed delimiters do not get around the bound.
  for (const char* change : {"{{=<% %>=}}", "{{ =<%   %>= }}", "{{=[ ]=}}"}) {
    const std::string open = std::string(change).find('[') != std::string::npos ? "[" : "<%";
    const std::string close = open == "[" ? "]" : "%>";
    std::string sneaky = change;
    for (int i = 0; i < 2000; ++i) sneaky += open + "#labels.env" + close;
    for (int i = 0; i < 2000; ++i) sneaky += open + "/labels.env" + close;
    EXPECT_NE(render_error(sneaky).find("more than 100 sections"), std::string::npos) << change;
  }
  std::string twice = "{{=<% %>=}}<%={{ }}=%>";
  for (int i = 0; i < 200; ++i) twice += "{{^labels.x}}";
  for (int i = 0; i < 200; ++i) twice += "{{/labels.x}}";
  EXPECT_NE(render_error(twice).find("more than 100 sections"), std::string::npos);
  // Within the bound, nested sections render.
  std::string ok;
  for (int i = 0; i < 50; ++i) ok += "{{#labels.env}}";
  ok += "{{labels.env}}";
  for (int i = 0; i < 50; ++i) ok += "{{/labels.env}}";
  EXPECT_EQ(render_ok(ok), "prod");
  // Triple mustaches and comments are not sections.
  std::string many;
  for (int i = 0; i < 300; ++i) many += "{{{labels.env}}}{{! #x }}";
  EXPECT_EQ(render_ok(many).size(), 300u * 4);
  EXPECT_NE(render_error(std::string(128 * 1024 + 1, 'x') + "{{node.name}}").find("longer than"), std::string::npos);
  // A long string without a tag is no template and has no bound of its own.
  EXPECT_EQ(render_ok(std::string(300 * 1024, 'x')).size(), 300u * 1024);
}

TEST(RenderTemplate, FuzzishTemplatesNeverCrashAndAreOkOrInvalidArgument) {
  // Random mixes of tag pieces: every outcome is a string or an InvalidArgument.
  const std::vector<std::string> pieces = {"{{", "}}", "{{{", "}}}", "#", "^", "/", "!", ">", "&", "=",
                                           "node.name", "labels.role", "labels.x", "facts.os.id", ".",
                                           " ", "\n", "a", "{{#labels.env}}", "{{/labels.env}}",
                                           "{{^labels.x}}", "{{/labels.x}}", "<%", "%>", "\xff"};
  std::mt19937 rng(13);
  for (int round = 0; round < 3000; ++round) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) t += pieces[rng() % pieces.size()];
    auto r = render_template(t, web01(), "t");
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument) << t;
    }
  }
}

// --- node context -----------------------------------------------------------------------------

TEST(NodeContextTest, FromLabelsRecordAndBriefing) {
  const auto n = node_context("web-02", json(R"({"role": "web", "weight": 3, "rack": "r1"})"),
                              json(R"({"facts": {"os.id": "debian", "bad": true, "arch": "amd64"},
                                      "schemas": []})"));
  EXPECT_EQ(n.name, "web-02");
  EXPECT_EQ(n.labels, (std::map<std::string, std::string>{{"rack", "r1"}, {"role", "web"}}));
  EXPECT_EQ(n.facts, (std::map<std::string, std::string>{{"arch", "amd64"}, {"os.id", "debian"}}));
  const auto none = node_context("x", Value(), Value());
  EXPECT_TRUE(none.labels.empty());
  EXPECT_TRUE(none.facts.empty());
}

// --- modules ----------------------------------------------------------------------------------

TEST(ParseModule, TheInterfaceExample) {
  auto m = parse_module(kWebModule, "web.json");
  ASSERT_TRUE(m) << m.error().describe();
  EXPECT_EQ(m->name, "web");
  EXPECT_EQ(m->version, "1.4.2");
  ASSERT_TRUE(m->resources.is_array());
  EXPECT_EQ(m->resources.as_array().size(), 2u);
  EXPECT_EQ(m->digest.size(), 64u);
}

TEST(ParseModule, DigestIgnoresKeyOrderAndSpacing) {
  auto a = parse_module(kWebModule, "a");
  auto b = parse_module(R"({"resources":[{"id":"/etc/motd","type":"file","properties":{"content":"{{node.name}} serves {{labels.role}} on {{facts.os.id}}\n"}},{"properties":{"version":"present"},"type":"package","id":"nginx"}],"version":"1.4.2","module":"web"})",
                        "b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->digest, b->digest);
  auto c = parse_module(R"({"module": "web", "version": "1.4.2", "resources": []})", "c");
  ASSERT_TRUE(c);
  EXPECT_NE(a->digest, c->digest);
  auto d = parse_module(R"({"module": "web", "version": "1.4.3", "resources": []})", "d");
  ASSERT_TRUE(d);
  EXPECT_NE(c->digest, d->digest);
  auto one = parse_module(R"({"module": "w", "version": "1", "resources": [{"type": "t", "id": "i", "properties": {"n": 1}}]})", "1");
  auto one_point_zero = parse_module(R"({"module": "w", "version": "1", "resources": [{"type": "t", "id": "i", "properties": {"n": 1.0}}]})", "1.0");
  auto two = parse_module(R"({"module": "w", "version": "1", "resources": [{"type": "t", "id": "i", "properties": {"n": 2}}]})", "2");
  ASSERT_TRUE(one && one_point_zero && two);
  EXPECT_EQ(one->digest, one_point_zero->digest);
  EXPECT_NE(one->digest, two->digest);
}

TEST(CanonicalJson, GivesTheExactTextDigestsDependOn) {
  for (const auto& c : test::canonical_json_cases()) EXPECT_EQ(canonical_json(c.value), c.text) << c.name;
}

TEST(CanonicalJson, SortsKeysRecursively) {
  EXPECT_EQ(canonical_json(json(R"({"b": 1, "a": {"d": [3, {"z": null, "y": "s"}], "c": true}})")),
            R"({"a":{"c":true,"d":[3,{"y":"s","z":null}]},"b":1})");
}

void expect_module_error(std::string_view text, std::string_view needle, std::string_view path = {}) {
  auto m = parse_module(text, "mod.json");
  ASSERT_FALSE(m) << text;
  EXPECT_EQ(m.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(m.error().message.rfind("mod.json: ", 0), 0u) << m.error().message;
  EXPECT_NE(m.error().message.find(needle), std::string::npos) << m.error().message;
  if (!path.empty()) {
    EXPECT_EQ(m.error().path, path) << m.error().message;
  }
}

TEST(ParseModule, BadDocuments) {
  expect_module_error("not json", "not valid JSON");
  expect_module_error("[]", "must be a JSON object");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [], "extra": 1})",
                      "unknown key 'extra' (valid: module, version, resources)", "extra");
  expect_module_error(R"({"version": "1", "resources": []})", "is required", "module");
  expect_module_error(R"({"module": "web", "resources": []})", "is required", "version");
  expect_module_error(R"({"module": "web", "version": "1"})", "is required", "resources");
  expect_module_error(R"({"module": "web", "version": "1", "resources": {}})", "must be a list", "resources");
}

TEST(ParseModule, BadNamesAndVersions) {
  for (const char* name : {"", "Web", "-web", ".web", "we b", "web/1", "\u00e9t\u00e9"})
    expect_module_error(std::string(R"({"module": ")") + name + R"(", "version": "1", "resources": []})",
                        "is not a module name", "module");
  expect_module_error(std::string(R"({"module": ")") + std::string(64, 'a') + R"(", "version": "1", "resources": []})",
                      "is not a module name", "module");
  EXPECT_TRUE(parse_module(std::string(R"({"module": ")") + std::string(63, 'a') + R"(", "version": "1", "resources": []})", "m"));
  EXPECT_TRUE(parse_module(R"({"module": "web.front_end-2", "version": "2026.12.01+git.abc~rc1", "resources": []})", "m"));
  expect_module_error(R"({"module": "web", "version": "", "resources": []})", "must not be empty", "version");
  expect_module_error(R"({"module": "web", "version": 1, "resources": []})", "must be a string", "version");
  expect_module_error(R"({"module": "web", "version": "1 2", "resources": []})", "space", "version");
  // A module version has a pipeline run's --version form (a pipeline deploys the module at it).
  expect_module_error(R"({"module": "web", "version": "../1", "resources": []})", "is not a version", "version");
  expect_module_error(R"({"module": "web", "version": "-rc1", "resources": []})", "is not a version", "version");
  expect_module_error(R"({"module": "web", "version": "1\n", "resources": []})", "unprintable", "version");
  expect_module_error(std::string(R"({"module": "web", "version": ")") + std::string(129, '1') + R"(", "resources": []})",
                      "longer than 128", "version");
}

TEST(ParseModule, ResourceShape) {
  expect_module_error(R"({"module": "web", "version": "1", "resources": [{"type": "file", "id": "/x"}]})",
                      "properties", "resources[0].properties");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [{"type": "file", "id": "/x", "properties": {}, "colour": 1}]})",
                      "unknown key 'colour'");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/x", "properties": {}}, {"type": "file", "id": "/x", "properties": {}}]})",
                      "duplicate resource file:/x", "resources[1].id");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [{"type": "file", "id": "/x", "properties": {}, "requires": ["nocolon"]}]})",
                      "type:id", "resources[0].requires[0]");
}

TEST(ParseModule, NonObjectResourcesAndTypesAreNotTemplates) {
  expect_module_error(R"({"module": "web", "version": "1", "resources": [3]})", "", "resources[0]");
  // `type` is a provider's name, never a template.
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "{{labels.kind}}", "id": "x", "properties": {}}]})",
                      "is not a resource type", "resources[0].type");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "File", "id": "x", "properties": {}}]})",
                      "is not a resource type", "resources[0].type");
  // Deeper than 32 levels of JSON is refused by the parser, naming the file.
  std::string deep = R"({"module": "web", "version": "1", "resources": [{"type": "file", "id": "/a", "properties": {"x": )";
  deep += std::string(40, '[') + std::string(40, ']') + "}}]}";
  expect_module_error(deep, "nesting");
}

TEST(ParseModule, RequiresMayNameOtherSourcesButNotCycleInside) {
  // package:nginx may come from the node's own resources or another module
  EXPECT_TRUE(parse_module(R"({"module": "web", "version": "1", "resources": [
      {"type": "service", "id": "nginx.service", "properties": {"restart_on": ["file:/etc/nginx.conf"]},
       "requires": ["package:nginx"]}]})", "m"));
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/a", "properties": {}, "requires": ["file:/b"]},
      {"type": "file", "id": "/b", "properties": {}, "requires": ["file:/a"]}]})",
                      "cycle");
}

TEST(ParseModule, TemplatesMustParse) {
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/etc/motd", "properties": {"content": "{{node.name"}}]})",
                      "template", "resources[0].properties.content");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/etc/{{#x}}", "properties": {}}]})",
                      "template", "resources[0].id");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/a", "properties": {"lines": ["ok", {"deep": "{{/x}}"}]}}]})",
                      "template", "resources[0].properties.lines[1].deep");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/a", "properties": {}, "requires": ["file:{{"]}]})",
                      "template", "resources[0].requires[0]");
  expect_module_error(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/a", "properties": {"content": "{{>p}}"}}]})",
                      "partials", "resources[0].properties.content");
  // a missing label is not an error of the module: it is the node's, at render
  EXPECT_TRUE(parse_module(R"({"module": "web", "version": "1", "resources": [
      {"type": "file", "id": "/a", "properties": {"content": "{{labels.nowhere}}"}}]})", "m"));
}

TEST(RenderModule, RendersIdsRequiresAndNestedStrings) {
  auto m = parse_module(R"({"module": "app", "version": "7", "resources": [
      {"type": "file", "id": "/etc/app/{{node.name}}.conf",
       "properties": {"content": "role={{labels.role}}\n", "mode": "0644", "size_hint": 3,
                      "lines": ["{{facts.arch}}", {"k{{x}}": "{{labels.env}}"}], "flag": true},
       "requires": ["package:app-{{facts.arch}}"]},
      {"type": "package", "id": "app-{{facts.arch}}", "properties": {}}]})", "m");
  ASSERT_TRUE(m) << m.error().describe();
  auto r = render_module(*m, web01());
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(*r, json(R"([
      {"type": "file", "id": "/etc/app/web-01.conf",
       "properties": {"content": "role=web\n", "mode": "0644", "size_hint": 3,
                      "lines": ["amd64", {"k{{x}}": "prod"}], "flag": true},
       "requires": ["package:app-amd64"]},
      {"type": "package", "id": "app-amd64", "properties": {}}])"));
  // The module itself is unchanged.
  EXPECT_EQ(m->resources.as_array()[1].get_string("id"), "app-{{facts.arch}}");
}

TEST(RenderModule, ErrorNamesNodeModuleResourceAndField) {
  auto m = parse_module(kWebModule, "web.json");
  ASSERT_TRUE(m);
  NodeContext n = web01();
  n.name = "web-07";
  n.labels.erase("role");
  auto r = render_module(*m, n);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().message,
            "node web-07: module web@1.4.2: file:/etc/motd: properties.content: no label 'role'");
  EXPECT_EQ(r.error().path, "properties.content");
  n = web01();
  n.facts.clear();
  r = render_module(*m, n);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no fact 'os.id'"), std::string::npos) << r.error().message;
}

TEST(RenderModule, TheMessagesOfTheDocs) {
  auto m = parse_module(R"({"module": "web", "version": "1.4.2", "resources": [
      {"type": "file", "id": "/etc/motd", "properties": {"content": "{{facts.os.codename}}"}},
      {"type": "file", "id": "/etc/{{hostname}}", "properties": {}}]})", "web.json");
  ASSERT_TRUE(m);
  NodeContext n = web01();
  n.name = "web-07";
  auto r = render_module(*m, n);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "node web-07: module web@1.4.2: file:/etc/motd: properties.content: no fact 'os.codename'");
  n.facts["os.codename"] = "bookworm";
  r = render_module(*m, n);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "node web-07: module web@1.4.2: file:/etc/{{hostname}}: id: unknown name 'hostname' (names: node.name, "
            "labels.KEY, facts.KEY)");
  auto bad = parse_module(R"({"module": "web", "version": "1.4.2", "resources": [
      {"type": "file", "id": "/etc/motd", "properties": {}},
      {"type": "file", "id": "/etc/x", "properties": {"content": "{{labels.role"}}]})", "web.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message.rfind("web.json: resources[1].properties.content: template: Unclosed tag at ", 0), 0u)
      << bad.error().message;
}

TEST(RenderModule, DifferentNodesGetTheirOwnValues) {
  auto m = parse_module(kWebModule, "web.json");
  ASSERT_TRUE(m);
  NodeContext a = web01(), b = web01();
  b.name = "db-01";
  b.labels["role"] = "db";
  auto ra = render_module(*m, a), rb = render_module(*m, b);
  ASSERT_TRUE(ra && rb);
  EXPECT_EQ(ra->as_array()[0].find("properties")->get_string("content"), "web-01 serves web on debian\n");
  EXPECT_EQ(rb->as_array()[0].find("properties")->get_string("content"), "db-01 serves db on debian\n");
}

TEST(RenderModule, CacheGivesTheSameResultsAndParsesOnce) {
  auto m = parse_module(kWebModule, "web.json");
  ASSERT_TRUE(m);
  TemplateCache cache;
  NodeContext a = web01(), b = web01(), bad = web01();
  b.name = "web-02";
  bad.labels.erase("role");
  for (int round = 0; round < 3; ++round) {
    for (const auto& n : {a, bad, b}) {
      auto plain = render_module(*m, n);
      auto cached = render_module(*m, n, cache);
      ASSERT_EQ(bool(plain), bool(cached)) << n.name;
      if (plain) {
        EXPECT_EQ(*plain, *cached);
      } else {
        EXPECT_EQ(plain.error().message, cached.error().message);
      }
    }
  }
  EXPECT_EQ(cache.size(), 1u);  // one template in the module; a node's error does not spoil it
  TemplateCache moved = std::move(cache);
  auto again = render_module(*m, a, moved);
  ASSERT_TRUE(again);
  EXPECT_EQ(moved.size(), 1u);
}

// --- selectors --------------------------------------------------------------------------------

TEST(Selector, TheInterfaceExample) {
  auto s = parse_selector("name=web-*,role=web,facts.os.id=debian");
  ASSERT_TRUE(s) << s.error().describe();
  ASSERT_EQ(s->terms.size(), 3u);
  EXPECT_EQ(s->terms[0].kind, SelectorTerm::Kind::Name);
  EXPECT_EQ(s->terms[0].value, "web-*");
  EXPECT_EQ(s->terms[1].kind, SelectorTerm::Kind::Label);
  EXPECT_EQ(s->terms[1].key, "role");
  EXPECT_EQ(s->terms[2].kind, SelectorTerm::Kind::Fact);
  EXPECT_EQ(s->terms[2].key, "os.id");
  EXPECT_EQ(s->terms[2].value, "debian");
  EXPECT_TRUE(matches(*s, web01()));
  NodeContext other = web01();
  other.name = "db-01";
  EXPECT_FALSE(matches(*s, other));
  other = web01();
  other.facts["os.id"] = "ubuntu";
  EXPECT_FALSE(matches(*s, other));
  other = web01();
  other.labels.erase("role");
  EXPECT_FALSE(matches(*s, other));  // a missing label does not match
  EXPECT_EQ(to_string(*s), "name=web-*,role=web,facts.os.id=debian");
}

TEST(Selector, SpacesAreIgnoredAndToStringRoundTrips) {
  auto s = parse_selector("  name = web-0? , env=prod ,team.owner=ops  ");
  ASSERT_TRUE(s) << s.error().describe();
  EXPECT_EQ(to_string(*s), "name=web-0?,env=prod,team.owner=ops");
  EXPECT_TRUE(matches(*s, web01()));
  auto again = parse_selector(to_string(*s));
  ASSERT_TRUE(again);
  EXPECT_EQ(to_string(*again), to_string(*s));
  auto inner = parse_selector("motd=hello world");
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->terms[0].value, "hello world");
}

TEST(Selector, EveryNode) {
  auto s = parse_selector("name=*");
  ASSERT_TRUE(s);
  EXPECT_TRUE(matches(*s, web01()));
  EXPECT_TRUE(matches(*s, node_context("anything", Value(), Value())));
}

TEST(Selector, LabelAndFactValuesAreExact) {
  auto s = parse_selector("role=we*");
  ASSERT_TRUE(s);
  EXPECT_FALSE(matches(*s, web01()));
  s = parse_selector("facts.os.version_id=12");
  ASSERT_TRUE(s);
  EXPECT_TRUE(matches(*s, web01()));
}

void expect_selector_error(std::string_view text, std::size_t position, std::string_view needle) {
  auto s = parse_selector(text);
  ASSERT_FALSE(s) << text;
  EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument);
  const std::string want = "selector: at position " + std::to_string(position) + ": ";
  EXPECT_EQ(s.error().message.rfind(want, 0), 0u) << text << " → " << s.error().message;
  EXPECT_NE(s.error().message.find(needle), std::string::npos) << text << " → " << s.error().message;
}

TEST(Selector, GrammarErrorsNameThePosition) {
  expect_selector_error("", 1, "empty selector");
  expect_selector_error("   ", 4, "empty selector");
  expect_selector_error("role", 1, "term 'role' has no '='");
  expect_selector_error("name=web-*,role", 12, "term 'role' has no '='");
  expect_selector_error("name=web-*,,role=web", 12, "empty term");
  expect_selector_error("name=web-*,", 12, "empty term after ','");
  expect_selector_error("=web", 1, "expected a key before '='");
  expect_selector_error("role=", 6, "expected a value after 'role='");
  expect_selector_error("role=,env=prod", 6, "expected a value");
  expect_selector_error("role=web=db", 9, "'=' in the value");
  expect_selector_error("ro le=web", 3, "' ' is not allowed in key 'ro le'");
  expect_selector_error("name=a,r*le=web", 9, "'*' is not allowed in key");
  expect_selector_error("-role=web", 1, "'-' is not allowed");
  expect_selector_error("facts.=debian", 7, "expected a fact's key");
  expect_selector_error("facts=debian", 1, "facts.KEY");
  expect_selector_error("facts.os id=debian", 9, "is not allowed in key 'os id'");
  expect_selector_error("role=web,env=prod,role=db", 19, "'role' is given twice");
  expect_selector_error("name=a,name=b", 8, "'name' is given twice");
  expect_selector_error("role=a\x01", 7, "unprintable");
  expect_selector_error(std::string("k") + std::string(63, 'x') + "=v", 1, "longer than 63");
}

TEST(Selector, TheMessagesOfTheDocs) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"name=web-*,role",
       "selector: at position 12: term 'role' has no '=' (a term is name=GLOB, KEY=VALUE or facts.KEY=VALUE)"},
      {"role=web=db", "selector: at position 9: '=' in the value of 'role' (terms are separated by ',')"},
      {"ro le=web", "selector: at position 3: ' ' is not allowed in key 'ro le' ([A-Za-z0-9][A-Za-z0-9._/-]*)"},
      {"role=web,env=prod,role=db", "selector: at position 19: 'role' is given twice"}};
  for (const auto& [text, message] : cases) {
    auto s = parse_selector(text);
    ASSERT_FALSE(s) << text;
    EXPECT_EQ(s.error().message, message);
  }
}

TEST(Glob, StarAndQuestionMark) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "abc"));
  EXPECT_TRUE(glob_match("web-*", "web-01"));
  EXPECT_FALSE(glob_match("web-*", "db-01"));
  EXPECT_TRUE(glob_match("web-0?", "web-01"));
  EXPECT_FALSE(glob_match("web-0?", "web-010"));
  EXPECT_TRUE(glob_match("*-01", "web-01"));
  EXPECT_TRUE(glob_match("w*b*1", "web-01"));
  EXPECT_FALSE(glob_match("w*b*2", "web-01"));
  EXPECT_TRUE(glob_match("web-01", "web-01"));
  EXPECT_FALSE(glob_match("web-01", "web-011"));
  EXPECT_FALSE(glob_match("", "a"));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_TRUE(glob_match("[a]", "[a]"));  // brackets are literal
  // no exponential backtracking
  EXPECT_FALSE(glob_match(std::string(50, '*') + "b", std::string(10000, 'a')));
}

// --- composition ------------------------------------------------------------------------------

TEST(Compose, ConcatenatesInSourceOrder) {
  auto r = compose({{"own", json(R"([{"type": "file", "id": "/etc/hosts", "properties": {}}])")},
                    {"module web@1.4.2", json(R"([{"type": "file", "id": "/etc/motd", "properties": {}},
                                                  {"type": "package", "id": "nginx", "properties": {}}])")},
                    {"module empty@1", Value::array()}});
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(*r, json(R"([{"type": "file", "id": "/etc/hosts", "properties": {}},
                         {"type": "file", "id": "/etc/motd", "properties": {}},
                         {"type": "package", "id": "nginx", "properties": {}}])"));
  auto none = compose({});
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, Value::array());
}

TEST(Compose, ConflictNamesBothSources) {
  auto r = compose({{"own", json(R"([{"type": "file", "id": "/etc/motd", "properties": {}}])")},
                    {"module web@1.4.2", json(R"([{"type": "package", "id": "nginx", "properties": {}},
                                                  {"type": "file", "id": "/etc/motd", "properties": {"content": "x"}}])")}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().message, "file:/etc/motd is declared by both own and module web@1.4.2");
  auto m = compose({{"module a@1", json(R"([{"type": "package", "id": "nginx", "properties": {}}])")},
                    {"module b@2", json(R"([{"type": "package", "id": "nginx", "properties": {}}])")}});
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message, "package:nginx is declared by both module a@1 and module b@2");
  // same type, other id, is no conflict; same id, other type, neither
  EXPECT_TRUE(compose({{"own", json(R"([{"type": "file", "id": "/a", "properties": {}}])")},
                       {"module m@1", json(R"([{"type": "file", "id": "/b", "properties": {}},
                                             {"type": "package", "id": "/a", "properties": {}}])")}}));
}

TEST(Compose, TwiceInOneSourceAndBadShapes) {
  auto r = compose({{"module web@1", json(R"([{"type": "file", "id": "/a", "properties": {}},
                                             {"type": "file", "id": "/a", "properties": {}}])")}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "file:/a is declared twice by module web@1");
  auto s = compose({{"own", json(R"({"type": "file"})")}});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("own: resources must be a list"), std::string::npos);
  auto t = compose({{"own", json(R"([{"type": "file"}])")}});
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("own: resources[0]"), std::string::npos) << t.error().message;
}

TEST(Compose, RenderedModulesConflictAfterRendering) {
  // Two modules whose ids only collide once rendered for this node.
  auto a = parse_module(R"({"module": "a", "version": "1", "resources": [
      {"type": "file", "id": "/etc/{{labels.role}}.conf", "properties": {}}]})", "a");
  auto b = parse_module(R"({"module": "b", "version": "2", "resources": [
      {"type": "file", "id": "/etc/web.conf", "properties": {}}]})", "b");
  ASSERT_TRUE(a && b);
  auto ra = render_module(*a, web01()), rb = render_module(*b, web01());
  ASSERT_TRUE(ra && rb);
  auto r = compose({{"module a@1", *ra}, {"module b@2", *rb}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "file:/etc/web.conf is declared by both module a@1 and module b@2");
}

// --- diff -------------------------------------------------------------------------------------

TEST(Diff, AddedChangedRemovedSorted) {
  const auto before = json(R"([
      {"type": "file", "id": "/etc/motd", "properties": {"content": "a"}},
      {"type": "package", "id": "nginx", "properties": {}},
      {"type": "file", "id": "/etc/b", "properties": {"mode": "0644", "owner": "root"}},
      {"type": "file", "id": "/etc/z", "properties": {}}])");
  const auto after = json(R"([
      {"type": "package", "id": "curl", "properties": {}},
      {"type": "file", "id": "/etc/motd", "properties": {"content": "b"}},
      {"type": "file", "id": "/etc/b", "properties": {"owner": "root", "mode": "0644"}},
      {"type": "file", "id": "/etc/a", "properties": {}},
      {"type": "file", "id": "/etc/z", "properties": {}, "requires": ["package:curl"]}])");
  const auto c = diff(before, after);
  EXPECT_EQ(c.added, (std::vector<std::string>{"file:/etc/a", "package:curl"}));
  EXPECT_EQ(c.changed, (std::vector<std::string>{"file:/etc/motd", "file:/etc/z"}));
  EXPECT_EQ(c.removed, (std::vector<std::string>{"package:nginx"}));
  EXPECT_FALSE(c.empty());
  EXPECT_TRUE(diff(before, before).empty());
}

TEST(Diff, NonArraysAreEmpty) {
  const auto list = json(R"([{"type": "file", "id": "/a", "properties": {}}, 3, {"type": 1}])");
  const auto c = diff(Value(), list);
  EXPECT_EQ(c.added, (std::vector<std::string>{"file:/a"}));
  EXPECT_TRUE(c.changed.empty());
  EXPECT_EQ(diff(list, Value()).removed, (std::vector<std::string>{"file:/a"}));
}

}  // namespace
}  // namespace mesh::fleet
