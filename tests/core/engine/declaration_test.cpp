#include "mesh/engine/declaration.h"

#include <gtest/gtest.h>

#include <string>

#include "mem_provider.h"
#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"

namespace mesh::engine {
namespace {

using sdk::ErrorCode;
using testing::MemProvider;

class DeclarationTest : public ::testing::Test {
 protected:
  DeclarationTest() {
    EXPECT_TRUE(registry.add("file", file));
    EXPECT_TRUE(registry.add("package", package));
  }

  /// Parses and expects failure; returns the error.
  sdk::Error refuse(const std::string& text, const ParseOptions& opts = {}) {
    auto d = parse_declaration(text, registry, opts);
    EXPECT_FALSE(d) << "accepted: " << text;
    return d ? sdk::Error{} : d.error();
  }

  std::vector<std::string> order_of(const std::string& text) {
    auto d = parse_declaration(text, registry);
    EXPECT_TRUE(d) << d.error().message;
    std::vector<std::string> out;
    if (d)
      for (const auto& r : d->resources) out.push_back(r.rid.str());
    return out;
  }

  std::shared_ptr<MemProvider> file = std::make_shared<MemProvider>("file");
  std::shared_ptr<MemProvider> package = std::make_shared<MemProvider>("package");
  ProviderRegistry registry;
};

TEST_F(DeclarationTest, RegistryRefusesADuplicateType) {
  auto r = registry.add("file", std::make_shared<MemProvider>("file"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::AlreadyExists);
  EXPECT_EQ(registry.types(), (std::vector<std::string>{"file", "package"}));
  EXPECT_EQ(registry.find("file"), file.get());
  EXPECT_EQ(registry.find("nope"), nullptr);
}

TEST_F(DeclarationTest, ParsesWithDefaultsAndDigest) {
  const std::string text =
      R"({"node": "web-01", "resources": [{"type": "file", "id": "/etc/motd",)"
      R"( "properties": {"content": "hi\n", "mode": "0644"}}, {"type": "package", "id": "/nginx", "properties": {}}]})";
  auto d = parse_declaration(text, registry);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->node, "web-01");
  EXPECT_EQ(d->revision, 0u);
  EXPECT_EQ(d->digest, common::sha256_hex(text));
  ASSERT_EQ(d->resources.size(), 2u);
  EXPECT_EQ(d->resources[0].rid.str(), "file:/etc/motd");
  EXPECT_EQ(d->resources[0].properties.get_string("content"), "hi\n");
  EXPECT_EQ(d->resources[0].properties.get_string("ensure"), "present");  // default filled in
  EXPECT_EQ(d->resources[1].properties.get_string("ensure"), "present");
  EXPECT_EQ(file->validates, 1);
  EXPECT_EQ(package->validates, 1);
}

// A text read with read_file_padded is parsed in place: the same declaration, or the same
// diagnostics, as from the string.
TEST_F(DeclarationTest, APaddedTextParsesAsTheStringDoes) {
  testing::TempDir tmp;
  const std::string good =
      R"({"resources": [{"type": "file", "id": "/b", "properties": {"content": "b\n"}, "requires": ["file:/a"]},)"
      R"( {"type": "file", "id": "/a", "properties": {"content": "a", "mode": "0600"}}]})";
  const std::string bad = R"({"resources": [{"type": "file", "id": "/a", "properties": {"mode": 7}}, {"type": "x"}]})";
  for (const std::string& text : {good, bad, std::string("{\"resources\": [}")}) {
    const std::string path = tmp.path() + "/decl.json";
    ASSERT_TRUE(common::write_file_atomic(path, text, 0600));
    auto padded = common::read_file_padded(path);
    ASSERT_TRUE(padded);
    auto from_padded = parse_declaration_all(*padded, registry);
    auto from_string = parse_declaration_all(text, registry);
    ASSERT_EQ(from_padded.declaration.has_value(), from_string.declaration.has_value()) << text;
    ASSERT_EQ(from_padded.diagnostics.size(), from_string.diagnostics.size()) << text;
    for (std::size_t i = 0; i < from_padded.diagnostics.size(); ++i)
      EXPECT_EQ(from_padded.diagnostics[i].text, from_string.diagnostics[i].text);
    if (!from_padded.declaration) continue;
    const Declaration& a = *from_padded.declaration;
    const Declaration& b = *from_string.declaration;
    EXPECT_EQ(a.digest, b.digest);
    EXPECT_EQ(a.digest, common::sha256_hex(text));
    ASSERT_EQ(a.resources.size(), b.resources.size());
    for (std::size_t i = 0; i < a.resources.size(); ++i) {
      EXPECT_EQ(a.resources[i].rid, b.resources[i].rid);
      EXPECT_EQ(a.resources[i].properties, b.resources[i].properties);
      EXPECT_EQ(a.resources[i].depends_on, b.resources[i].depends_on);
    }
  }
}

TEST_F(DeclarationTest, OrderIsAStableTopologicalOrder) {
  // No requires: declaration order.
  EXPECT_EQ(order_of(R"({"resources": [{"type": "file", "id": "/c", "properties": {}}, {"type": "file", "id": "/a", "properties": {}},)"
                     R"( {"type": "file", "id": "/b", "properties": {}}]})"),
            (std::vector<std::string>{"file:/c", "file:/a", "file:/b"}));
  // b needs c; d needs a: a, c, then b (lowest index ready first), then d.
  EXPECT_EQ(order_of(R"({"resources": [)"
                     R"({"type": "file", "id": "/a", "properties": {}},)"
                     R"({"type": "file", "id": "/b", "properties": {}, "requires": ["file:/c"]},)"
                     R"({"type": "file", "id": "/c", "properties": {}},)"
                     R"({"type": "file", "id": "/d", "properties": {}, "requires": ["file:/a"]}]})"),
            (std::vector<std::string>{"file:/a", "file:/c", "file:/b", "file:/d"}));
  // A chain declared backwards comes out forwards; a repeated requirement is harmless.
  EXPECT_EQ(order_of(R"({"resources": [)"
                     R"({"type": "file", "id": "/3", "properties": {}, "requires": ["file:/2", "file:/2"]},)"
                     R"({"type": "file", "id": "/2", "properties": {}, "requires": ["package:/1"]},)"
                     R"({"type": "package", "id": "/1", "properties": {}}]})"),
            (std::vector<std::string>{"package:/1", "file:/2", "file:/3"}));
}

TEST_F(DeclarationTest, RequiresAreKeptOnTheResource) {
  auto d = parse_declaration(R"({"resources": [{"type": "package", "id": "/p", "properties": {}},)"
                             R"({"type": "file", "id": "/f", "properties": {}, "requires": ["package:/p"]}]})",
                             registry);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->resources[1].depends_on.size(), 1u);
  EXPECT_EQ(d->resources[1].depends_on[0].str(), "package:/p");
}

TEST_F(DeclarationTest, SizeIsCheckedFirst) {
  ParseOptions opts;
  opts.max_bytes = 64;
  std::string text = R"({"resources": [], "x": ")";
  text += std::string(60, '\xff');  // invalid UTF-8 too
  text += "\"}";
  auto e = refuse(text, opts);
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.message, "declaration is " + std::to_string(text.size()) +
                           " bytes, over the limit of 64 bytes");
}

TEST_F(DeclarationTest, JsonErrors) {
  EXPECT_NE(refuse("{\"resources\": [\"\xff\"]}").message.find("UTF-8"), std::string::npos);
  EXPECT_NE(refuse(R"({"resources": [)").message.find("not valid JSON"), std::string::npos);
  ParseOptions opts;
  opts.max_depth = 4;
  EXPECT_NE(refuse(R"({"resources": [{"properties": {"a": [[1]]}}]})", opts).message.find("deeper"),
            std::string::npos);
  auto e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {"mode": "1", "mode": "2"}}]})");
  EXPECT_EQ(e.path, "resources[0].properties.mode");
  EXPECT_NE(e.message.find("duplicate key 'mode'"), std::string::npos) << e.message;
}

// The declaration is read element by element: a JSON problem found late in the text (after
// resources with problems of their own were checked) is still reported alone, as before any
// other check; `node` and `revision` may come after `resources`.
TEST_F(DeclarationTest, AJsonProblemLateInTheTextIsReportedAlone) {
  const std::string bad_resources = R"({"resources": [{"type": "nope", "id": "x", "properties": {}},
      {"type": "file", "id": "/a", "properties": {"mode": 1}}, )";
  auto parsed = parse_declaration_all(bad_resources + R"({"type": "file", "id": "/b", "properties": {}, "id": "/c"}]})",
                                      registry);
  ASSERT_FALSE(parsed.declaration);
  ASSERT_EQ(parsed.diagnostics.size(), 1u) << declaration::to_text(parsed.diagnostics);
  EXPECT_EQ(parsed.diagnostics[0].path, "resources[2].id");
  EXPECT_NE(parsed.diagnostics[0].message.find("duplicate key 'id'"), std::string::npos);
  auto truncated = parse_declaration_all(bad_resources + "{\"type\": \"file\"", registry);
  ASSERT_EQ(truncated.diagnostics.size(), 1u) << declaration::to_text(truncated.diagnostics);
  EXPECT_NE(truncated.diagnostics[0].message.find("not valid JSON at line 2"), std::string::npos)
      << truncated.diagnostics[0].message;
  ParseOptions opts;
  opts.allow_revision = true;
  opts.expected_node = "web-01";
  auto d = parse_declaration(R"({"resources": [{"type": "file", "id": "/a", "properties": {}}], "revision": 7, "node": "web-01"})",
                             registry, opts);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->revision, 7u);
  EXPECT_EQ(d->node, "web-01");
  ASSERT_EQ(d->resources.size(), 1u);
  EXPECT_EQ(d->resources[0].rid.str(), "file:/a");
  auto wrong = parse_declaration_all(R"({"resources": [{"type": "file", "id": "/a", "properties": {}}], "node": "web-02"})",
                                     registry, opts);
  ASSERT_EQ(wrong.diagnostics.size(), 1u);
  EXPECT_EQ(wrong.diagnostics[0].path, "node");
}

TEST_F(DeclarationTest, TopLevelShape) {
  EXPECT_EQ(refuse("[]").message, "declaration: must be a JSON object");
  auto e = refuse(R"({"resources": [], "extra": 1})");
  EXPECT_EQ(e.message, "declaration: unknown key 'extra' (valid: node, resources)");
  EXPECT_EQ(e.path, "extra");
  EXPECT_EQ(refuse(R"({"node": 3, "resources": []})").message, "node: must be a string");
  EXPECT_EQ(refuse(R"({"node": "a"})").message, "resources: is required");
  EXPECT_EQ(refuse(R"({"resources": {}})").message, "resources: must be a list of resources");
}

TEST_F(DeclarationTest, RevisionOnlyWhenAllowed) {
  auto e = refuse(R"({"revision": 3, "resources": []})");
  EXPECT_EQ(e.path, "revision");
  // One text for the host and `mesh declare` (the shared declaration check, #12).
  EXPECT_EQ(e.message, "revision: is assigned by the control plane; remove it from the file");

  ParseOptions opts;
  opts.allow_revision = true;
  auto d = parse_declaration(R"({"revision": 3, "resources": []})", registry, opts);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->revision, 3u);
  EXPECT_EQ(refuse(R"({"revision": 0, "resources": []})", opts).message,
            "revision: must be an integer ≥ 1");
  EXPECT_EQ(refuse(R"({"revision": "3", "resources": []})", opts).path, "revision");
  EXPECT_EQ(refuse(R"({"revision": 1.5, "resources": []})", opts).path, "revision");
  EXPECT_EQ(refuse(R"({"revision": -2, "resources": []})", opts).path, "revision");
}

TEST_F(DeclarationTest, NodeMustMatch) {
  ParseOptions opts;
  opts.expected_node = "web-01";
  auto e = refuse(R"({"node": "web-02", "resources": []})", opts);
  EXPECT_EQ(e.path, "node");
  EXPECT_EQ(e.message, "node: the declaration is for node 'web-02', this node is 'web-01'");
  EXPECT_TRUE(parse_declaration(R"({"node": "web-01", "resources": []})", registry, opts));
  EXPECT_TRUE(parse_declaration(R"({"resources": []})", registry, opts));  // absent is fine
}

TEST_F(DeclarationTest, AnEmptyNodeIsRefusedAsMeshDeclareRefusesIt) {
  ParseOptions opts;
  opts.expected_node = "web-01";
  for (const ParseOptions& o : {opts, ParseOptions{}}) {
    auto e = refuse(R"({"node": "", "resources": []})", o);
    EXPECT_EQ(e.path, "node");
    EXPECT_EQ(e.message.rfind("node: '' is not a node name", 0), 0u) << e.message;
  }
  EXPECT_EQ(refuse(R"({"node": "Web 01", "resources": []})").path, "node");
  EXPECT_TRUE(parse_declaration(R"({"node": "web-01", "resources": []})", registry));
}

TEST_F(DeclarationTest, ResourceShape) {
  auto e = refuse(R"({"resources": [3]})");
  EXPECT_EQ(e.message, "resources[0]: must be an object");
  EXPECT_EQ(e.path, "resources[0]");
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "depends": []}]})");
  EXPECT_EQ(e.message, "resources[0]: unknown key 'depends' (valid: type, id, properties, requires)");
  EXPECT_EQ(e.path, "resources[0].depends");
  e = refuse(R"({"resources": [{"id": "/a", "properties": {}}]})");
  EXPECT_EQ(e.message, "resources[0]: type: is required");
  EXPECT_EQ(e.path, "resources[0].type");
  e = refuse(R"({"resources": [{"type": "file", "id": "", "properties": {}}]})");
  EXPECT_EQ(e.message, "resources[0]: id: must be a non-empty string");
  EXPECT_EQ(refuse(R"({"resources": [{"type": "file", "id": 7}]})").path, "resources[0].id");
  e = refuse(R"({"resources": [{"type": "fi\u0000le", "id": "/a", "properties": {}}]})");
  EXPECT_EQ(e.message, "resources[0]: type: 'fi\\x00le' contains a control character (\\x00 at byte 2); names "
                       "and ids may not contain control, line-separator or bidirectional characters");
  e = refuse(R"({"resources": [{"type": "file", "id": "/a\u0000b", "properties": {}}]})");
  EXPECT_EQ(e.message, "resources[0]: id: '/a\\x00b' contains a control character (\\x00 at byte 2); names "
                       "and ids may not contain control, line-separator or bidirectional characters");
  EXPECT_EQ(e.path, "resources[0].id");
  e = refuse(R"({"resources": [{"type": "file", "id": "/tmp/new\nline", "properties": {}}]})");
  EXPECT_EQ(e.message, "resources[0]: id: '/tmp/new\\nline' contains a control character (\\n at byte 8); names "
                       "and ids may not contain control, line-separator or bidirectional characters");
  e = refuse(R"({"resources": [{"type": "file", "id": "/tmp/\u001b[31m", "properties": {}}]})");
  EXPECT_EQ(e.path, "resources[0].id");
  EXPECT_NE(e.message.find("\\x1b at byte 5"), std::string::npos) << e.message;
  e = refuse(R"({"resources": [{"type": "file", "id": "/tmp/a\u202eb", "properties": {}}]})");
  EXPECT_EQ(e.path, "resources[0].id");
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": []}]})");
  EXPECT_EQ(e.message, "resources[0] (file:/a): properties: must be an object");
  // Required, as `mesh declare` requires it; {} declares no property.
  e = refuse(R"({"resources": [{"type": "file", "id": "/a"}]})");
  EXPECT_EQ(e.message, "resources[0] (file:/a): properties: is required (an object; {} when no property is set)");
  EXPECT_EQ(e.path, "resources[0].properties");
  EXPECT_EQ(refuse(R"({"resources": [{"type": "file", "id": "/a", "requires": []}]})").path, "resources[0].properties");
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}, "requires": "file:/b"}]})");
  EXPECT_EQ(e.path, "resources[0].requires");
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}, "requires": [1]}]})");
  EXPECT_EQ(e.path, "resources[0].requires[0]");
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}, "requires": ["file:/b", "nocolon"]}]})");
  EXPECT_EQ(e.message,
            "resources[0] (file:/a): requires[1]: 'nocolon' is not a resource name of the form type:id");
  EXPECT_EQ(e.path, "resources[0].requires[1]");
}

TEST_F(DeclarationTest, UnknownTypeListsTheLoadedProviders) {
  auto e = refuse(R"({"resources": [{"type": "fiel", "id": "/etc/motd", "properties": {}}]})");
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.message, "resources[0]: unknown resource type 'fiel' (loaded providers: file, package)");
  EXPECT_EQ(e.path, "resources[0].type");
  ProviderRegistry none;
  auto d = parse_declaration(R"({"resources": [{"type": "file", "id": "/a", "properties": {}}]})", none);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().message, "resources[0]: unknown resource type 'file' (loaded providers: none)");
}

TEST_F(DeclarationTest, PhasesRunInTheDocumentedOrder) {
  // A shape error later in the list wins over an unknown type earlier in it.
  auto e = refuse(R"({"resources": [{"type": "fiel", "id": "/a", "properties": {}}, {"type": "file"}]})");
  EXPECT_EQ(e.message, "resources[1]: id: is required");
  // An unknown type wins over a duplicate; a duplicate over a schema error.
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}}, {"type": "file", "id": "/a", "properties": {}},)"
             R"( {"type": "fiel", "id": "/b", "properties": {}}]})");
  EXPECT_EQ(e.path, "resources[2].type");
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {"mode": 1}},)"
             R"( {"type": "file", "id": "/a", "properties": {}}]})");
  EXPECT_EQ(e.path, "resources[1].id");
  // Schema errors before validate(); validate() before requires. Every resource whose schema
  // check passed is validated (every problem is collected), the others are not.
  const int validated_before = file->validates;
  e = refuse(R"({"resources": [{"type": "file", "id": "relative", "properties": {}},)"
             R"( {"type": "file", "id": "/b", "properties": {"mode": 1}}]})");
  EXPECT_EQ(e.path, "resources[1].properties.mode");
  EXPECT_EQ(file->validates, validated_before + 1);
  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}, "requires": ["file:/zz"]},)"
             R"( {"type": "file", "id": "relative", "properties": {}}]})");
  EXPECT_EQ(e.path, "resources[1].id");
}

TEST_F(DeclarationTest, DuplicateNamesTheFirst) {
  auto e = refuse(R"({"resources": [{"type": "file", "id": "/x", "properties": {}}, {"type": "file", "id": "/etc/motd", "properties": {}},)"
                  R"( {"type": "package", "id": "/etc/motd", "properties": {}}, {"type": "file", "id": "/y", "properties": {}},)"
                  R"( {"type": "file", "id": "/etc/motd", "properties": {}}]})");
  EXPECT_EQ(e.message, "resources[4]: duplicate resource file:/etc/motd (first at resources[1])");
  EXPECT_EQ(e.path, "resources[4].id");
}

TEST_F(DeclarationTest, SchemaErrorsNameTheResourceAndPath) {
  auto e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}}, {"type": "file", "id": "/b", "properties": {}},)"
                  R"( {"type": "file", "id": "/etc/motd", "properties": {"mode": 420}}]})");
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.message, "resources[2] (file:/etc/motd): properties.mode: must be a string");
  EXPECT_EQ(e.path, "resources[2].properties.mode");

  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {"colour": "red"}}]})");
  EXPECT_EQ(e.path, "resources[0].properties.colour");
  EXPECT_NE(e.message.find("unknown property 'colour' (valid: content, mode, owner, group, ensure)"),
            std::string::npos)
      << e.message;

  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {"ensure": "maybe"}}]})");
  EXPECT_EQ(e.message, "resources[0] (file:/a): properties.ensure: 'maybe' is not one of: present, absent");
}

TEST_F(DeclarationTest, ProviderValidateErrorsNameTheResourceAndPath) {
  auto e = refuse(R"({"resources": [{"type": "file", "id": "etc/motd", "properties": {}}]})");
  EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
  EXPECT_EQ(e.message, "resources[0] (file:etc/motd): id: must be an absolute path");
  EXPECT_EQ(e.path, "resources[0].id");
}

TEST_F(DeclarationTest, RequiresMustBeDeclared) {
  auto e = refuse(R"({"resources": [{"type": "file", "id": "/b", "properties": {}},)"
                  R"( {"type": "file", "id": "/a", "properties": {}, "requires": ["file:/b", "file:/missing"]}]})");
  EXPECT_EQ(e.message, "resources[1] (file:/a): requires 'file:/missing', which is not declared");
  EXPECT_EQ(e.path, "resources[1].requires[1]");
}

TEST_F(DeclarationTest, CyclesAreNamedInOrder) {
  auto e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}, "requires": ["file:/b"]},)"
                  R"( {"type": "file", "id": "/b", "properties": {}, "requires": ["file:/a"]}]})");
  EXPECT_EQ(e.message, "requires cycle: file:/a -> file:/b -> file:/a");
  EXPECT_EQ(e.path, "resources[0].requires");

  e = refuse(R"({"resources": [{"type": "file", "id": "/a", "properties": {}, "requires": ["file:/a"]}]})");
  EXPECT_EQ(e.message, "requires cycle: file:/a -> file:/a");

  // A cycle not involving the first resource, entered from outside it.
  e = refuse(R"({"resources": [{"type": "file", "id": "/ok", "properties": {}},)"
             R"( {"type": "file", "id": "/in", "properties": {}, "requires": ["file:/c"]},)"
             R"( {"type": "file", "id": "/d", "properties": {}, "requires": ["file:/ok", "file:/e"]},)"
             R"( {"type": "file", "id": "/c", "properties": {}, "requires": ["file:/d"]},)"
             R"( {"type": "file", "id": "/e", "properties": {}, "requires": ["file:/c"]}]})");
  EXPECT_EQ(e.message, "requires cycle: file:/d -> file:/e -> file:/c -> file:/d");
}

TEST_F(DeclarationTest, TenThousandResourcesParseQuickly) {
  std::string text = R"({"node": "web-01", "resources": [)";
  for (int i = 0; i < 10000; ++i) {
    if (i) text += ',';
    text += R"({"type": "file", "id": "/srv/f/)" + std::to_string(i) +
            R"(", "properties": {"content": "hello", "mode": "0644"}})";
  }
  text += "]}";
  ParseOptions opts;
  opts.max_bytes = 16 << 20;
  auto d = parse_declaration(text, registry, opts);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->resources.size(), 10000u);
  EXPECT_EQ(d->resources.back().rid.id, "/srv/f/9999");
  // Over 256 KiB the digest is computed on a second thread; it is the same digest.
  ASSERT_GT(text.size(), 256u * 1024);
  EXPECT_EQ(d->digest, common::sha256_hex(text));
}

}  // namespace
}  // namespace mesh::engine
