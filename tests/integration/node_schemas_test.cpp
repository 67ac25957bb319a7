// The control plane checks a declaration against the provider schemas its node sent with its
// briefing before storing it (issue #12 point 5, decision record 48): real nats-server,
// mesh-control, mesh-host and mesh.
#include <chrono>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/sdk/transport.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using NodeSchemasTest = MeshTest;

// A `file` resource whose id has a ".." component and whose mode is a number: two problems the
// node's `file` schema finds, neither of which the shape check alone sees.
const char* kBadFile = R"({"resources": [
  {"type": "file", "id": "/etc/../x", "properties": {"content": "hi\n", "mode": 644}}
]})";

std::int64_t declared_revision(MeshTest& t, const std::string& node) {
  auto r = t.mesh({"node", "show", node, "--output", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return json(r.out).get_int("declared_revision", -1);
}

TEST_F(NodeSchemasTest, DeclarationRefusedAgainstBriefedNodesSchemasWithEveryProblemAndNothingStored) {
  add_host("web");  // enrolment sends the briefing, with the `file` provider's schema
  const std::int64_t before = declared_revision(*this, "web");
  ASSERT_EQ(before, 0);

  const fs::path f = dir() / "bad.json";
  write_text(f, kBadFile);
  auto text = mesh({"declare", "web", f.string()});
  EXPECT_NE(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.err.find("2 problems"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("resources[0].id (file:/etc/../x)"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("absolute path"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("resources[0].properties.mode"), std::string::npos) << text.err;

  auto js = mesh({"declare", "web", f.string(), "--output", "json"});
  EXPECT_NE(js.exit_code, 0) << js.out << js.err;
  const sdk::Value answer = json(js.out);
  EXPECT_EQ(answer.get_string("status"), "error") << js.out;
  EXPECT_EQ(answer.get_string("checked"), "schemas") << js.out;
  const sdk::Value* diags = answer.find("diagnostics");
  ASSERT_TRUE(diags && diags->is_array()) << js.out;
  ASSERT_EQ(diags->as_array().size(), 2u) << js.out;
  EXPECT_EQ(diags->as_array()[0].get_string("path"), "resources[0].id") << js.out;
  EXPECT_EQ(diags->as_array()[0].get_string("resource"), "file:/etc/../x") << js.out;
  EXPECT_EQ(diags->as_array()[1].get_string("path"), "resources[0].properties.mode") << js.out;

  // Nothing stored: no revision, no history.
  EXPECT_EQ(declared_revision(*this, "web"), before);
  auto h = mesh({"history", "web", "--output", "json"});
  EXPECT_EQ(h.exit_code, 0) << h.err;
  const sdk::Value hist = json(h.out);
  EXPECT_TRUE(hist.is_array() && hist.as_array().empty()) << h.out;

  // A type the node has no provider for: named, with the node.
  const fs::path g = dir() / "package.json";
  write_text(g, R"({"resources": [{"type": "package", "id": "nginx", "properties": {}}]})");
  auto pkg = mesh({"declare", "web", g.string()});
  EXPECT_NE(pkg.exit_code, 0) << pkg.out << pkg.err;
  EXPECT_NE(pkg.err.find("unknown resource type 'package'"), std::string::npos) << pkg.err;
  EXPECT_NE(pkg.err.find("node web's providers: file"), std::string::npos) << pkg.err;

  // A good declaration still goes through, checked against the schemas.
  const sdk::Value ok = declare("web", file_declaration({{(dir() / "ok.txt").string(), "ok\n"}}));
  EXPECT_EQ(ok.get_string("checked"), "schemas") << ok.to_json();
  EXPECT_EQ(declared_revision(*this, "web"), 1);
}

TEST_F(NodeSchemasTest, ADeployRefusalNamesTheModulesOwnResourceIndex) {
  // newuser N9: a module of one resource with a typo in its type was refused as `resources[1].type`
  // — the index in the node's composed declaration (its own resource came first) — where the
  // module file has resources[0] only.
  add_host("web");
  declare("web", file_declaration({{(dir() / "own.txt").string(), "own\n"}}));
  const fs::path m = dir() / "typ.json";
  write_text(m, R"({"module": "typ", "version": "1", "resources": [{"type": "fiel", "id": "/tmp/typ", "properties": {}}]})");
  ASSERT_EQ(mesh({"module", "push", m.string()}).exit_code, 0);
  ASSERT_EQ(mesh({"assign", "typ", "name=web"}).exit_code, 0);
  auto r = mesh({"deploy", "typ", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("resources[0].type"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("resources[1]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node web: module typ@1: unknown resource type 'fiel'"), std::string::npos) << r.err;
  auto js = mesh({"deploy", "typ", "1", "--output", "json"});
  const sdk::Value answer = json(js.out);
  const sdk::Value* diags = answer.find("diagnostics");
  ASSERT_TRUE(diags && diags->is_array() && !diags->as_array().empty()) << js.out;
  EXPECT_EQ(diags->as_array()[0].get_string("path"), "resources[0].type") << js.out;
  EXPECT_EQ(diags->as_array()[0].get_string("source"), "module typ@1") << js.out;
}

TEST_F(NodeSchemasTest, NodeWithoutSchemasGetsTheShapeCheckAndAWarning) {
  Host& h = add_host("old");
  // What a host from before the schemas sends: a briefing without them. The control plane then
  // forgets the ones it had.
  BrokerClient raw(nats_->url());
  ASSERT_TRUE(raw.connected) << raw.connected.error().message;
  std::string hex = read_text(h.state / "node.key");
  while (!hex.empty() && hex.back() == '\n') hex.pop_back();
  sdk::Value body = sdk::Value::object();
  body.set("node", "old");
  body.set("at_ms", common::now_ms());
  body.set("host_version", "0.9.0");
  body.set("lines", sdk::Value::array());
  auto m = protocol::make_message(protocol::briefing_subject("old"), body.to_json());
  m.set_header(protocol::kHeaderNode, "old");
  trust::sign_report(m, *common::from_hex(hex));
  auto reply = raw->request(m, 10s);
  ASSERT_TRUE(reply) << reply.error().describe();
  ASSERT_EQ(*reply->header(protocol::kHeaderStatus), "ok") << reply->body;

  const fs::path f = dir() / "bad.json";
  write_text(f, kBadFile);
  auto text = mesh({"declare", "old", f.string()});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.err.find("warning: node old has sent no provider schemas"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("shape only"), std::string::npos) << text.err;
  EXPECT_EQ(declared_revision(*this, "old"), 1);

  auto js = mesh({"declare", "old", f.string(), "--output", "json"});
  EXPECT_EQ(js.exit_code, 0) << js.out << js.err;
  EXPECT_EQ(json(js.out).get_string("checked"), "shape") << js.out;

  // The shape check still refuses what it sees (here `mesh` itself does, before sending) and
  // nothing is stored.
  const fs::path g = dir() / "shape.json";
  write_text(g, R"({"resources": [{"type": "file", "id": "/a", "properties": {}, "extra": 1},
                                  {"type": "file", "id": "/b", "properties": {}, "requires": ["file:/nope"]}]})");
  auto shape = mesh({"declare", "old", g.string(), "--output", "json"});
  EXPECT_NE(shape.exit_code, 0) << shape.out << shape.err;
  EXPECT_EQ(declared_revision(*this, "old"), 2);
}

}  // namespace
}  // namespace mesh::itest
