// The briefing's facts end to end (issue #13 point 2, decision record 54): a real mesh-host
// finds them on this machine and sends them with its briefing, mesh-control checks and keeps
// them, `mesh node show` and `mesh nodes --output json` show them.
#include <sys/stat.h>
#include <sys/utsname.h>

#include <chrono>
#include <fstream>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/sdk/sdk.h"
#include "mesh/sdk/transport.h"
#include "mesh/testing/plugins.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using NodeFactsTest = MeshTest;

// KEY's value in this machine's os-release, quotes removed ("" when absent).
std::string os_release(const std::string& key) {
  for (const char* file : {"/etc/os-release", "/usr/lib/os-release"}) {
    std::ifstream in(file);
    if (!in) continue;
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(key + "=", 0) == 0) {
        std::string v = line.substr(key.size() + 1);
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() - 2);
        return v;
      }
    return "";
  }
  return "";
}

sdk::Value node_show(MeshTest& t, const std::string& node) {
  auto r = t.mesh({"node", "show", node, "--output", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return json(r.out);
}

// Sends a briefing body for `h` signed with its key, as a host would; returns the reply status
// and body.
std::pair<std::string, std::string> send_briefing(const std::string& url, const Host& h, const sdk::Value& body) {
  BrokerClient raw(url);
  EXPECT_TRUE(raw.connected) << raw.connected.error().message;
  std::string hex = read_text(h.state / "node.key");
  while (!hex.empty() && hex.back() == '\n') hex.pop_back();
  auto m = protocol::make_message(protocol::briefing_subject(h.name), body.to_json());
  m.set_header(protocol::kHeaderNode, h.name);
  trust::sign_report(m, *common::from_hex(hex));
  auto reply = raw->request(m, 10s);
  EXPECT_TRUE(reply) << reply.error().describe();
  if (!reply) return {"", ""};
  const std::string* status = reply->header(protocol::kHeaderStatus);
  return {status ? *status : "", reply->body};
}

sdk::Value briefing_body(const std::string& node) {
  sdk::Value body = sdk::Value::object();
  body.set("node", node);
  body.set("at_ms", common::now_ms());
  body.set("host_version", "0.1.0");
  body.set("lines", sdk::Value::array());
  return body;
}

TEST_F(NodeFactsTest, TheHostsFactsAreThoseOfThisMachineAndShownByNodeShowAndNodes) {
  add_host("web");  // enrolment sends the briefing, with the facts
  const sdk::Value shown = node_show(*this, "web");
  const sdk::Value* facts = shown.find("facts");
  ASSERT_TRUE(facts && facts->is_object()) << shown.to_json();

  struct utsname u {};
  ASSERT_EQ(::uname(&u), 0);
  EXPECT_EQ(facts->get_string("kernel"), u.release) << facts->to_json();
  for (const auto& [fact, key] : {std::pair<const char*, const char*>{"os.id", "ID"},
                                  {"os.version_id", "VERSION_ID"},
                                  {"os.codename", "VERSION_CODENAME"}}) {
    // Absent from os-release: absent from the facts, never "".
    if (os_release(key).empty()) {
      EXPECT_EQ(facts->find(fact), nullptr) << facts->to_json();
    } else {
      EXPECT_EQ(facts->get_string(fact), os_release(key)) << facts->to_json();
    }
  }
  auto dpkg = mesh::testing::run_process({"dpkg", "--print-architecture"});
  if (dpkg.exit_code == 0) {
    std::string arch = dpkg.out.substr(0, dpkg.out.find('\n'));
    EXPECT_EQ(facts->get_string("arch"), arch) << facts->to_json();
  } else {
    EXPECT_FALSE(facts->get_string("arch").empty()) << facts->to_json();
  }
  const std::string pm = facts->get_string("package_manager");
  EXPECT_TRUE(pm == "apt" || pm == "none") << pm;
  struct stat st {};
  const bool systemd = ::stat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
  EXPECT_EQ(facts->get_string("service_manager"), systemd ? "systemd" : "none") << facts->to_json();
  const std::string engine = facts->get_string("container_engine");
  EXPECT_TRUE(engine == "podman" || engine == "docker" || engine == "none") << engine;
  // The briefing on record carries them too, and no key is empty.
  const sdk::Value* briefing = shown.find("briefing");
  ASSERT_TRUE(briefing && briefing->is_object()) << shown.to_json();
  ASSERT_NE(briefing->find("facts"), nullptr) << briefing->to_json();
  EXPECT_EQ(*briefing->find("facts"), *facts);
  for (const auto& [key, value] : facts->as_object()) EXPECT_FALSE(value.as_string().empty()) << key;

  // `mesh nodes --output json`: every node with its facts.
  auto nodes = mesh({"nodes", "--output", "json"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  const sdk::Value list = json(nodes.out);
  ASSERT_TRUE(list.is_array() && list.as_array().size() == 1u) << nodes.out;
  ASSERT_NE(list.as_array()[0].find("facts"), nullptr) << nodes.out;
  EXPECT_EQ(*list.as_array()[0].find("facts"), *facts);

  // The text: one line per fact.
  auto text = mesh({"node", "show", "web"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("\nfacts\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\n  kernel "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\n  service_manager "), std::string::npos) << text.out;
}

TEST_F(NodeFactsTest, TheBriefingOfAnEnrolmentIsNotContactAndALaterBriefIs) {
  // newuser N7: a node enrolled and never run showed "last seen 29 seconds ago" (the briefing
  // `mesh-host enrol` sends) where docs/protocol.md promises "never" (decision record 195).
  Host& h = add_host("quiet-01");  // enrolled, briefed by enrol, daemon never started
  auto nodes = json(mesh({"nodes", "--output", "json"}).out);
  ASSERT_TRUE(nodes.is_array() && !nodes.as_array().empty()) << nodes.to_json();
  EXPECT_TRUE(nodes.as_array()[0].find("last_contact")->is_null()) << nodes.to_json();
  EXPECT_NE(mesh({"node", "show", "quiet-01", "--output", "json"}).out.find("\"outcome\":\"pass\""), std::string::npos)
      << "its briefing is kept (eligible), only not counted as contact";
  auto d = declare("quiet-01", file_declaration({{(dir() / "q.txt").string(), "q\n"}}));
  auto rep = mesh({"report", std::to_string(d.get_int("delivery", 0))});
  EXPECT_NE(rep.out.find("outstanding  1 — quiet-01 last seen never"), std::string::npos) << rep.out;
  // `mesh-host brief` on the machine is contact.
  auto brief = mesh::testing::run_process({bin("mesh-host"), "brief", "--config", h.config.string()});
  ASSERT_EQ(brief.exit_code, 0) << brief.out << brief.err;
  auto after = json(mesh({"nodes", "--output", "json"}).out);
  EXPECT_TRUE(after.as_array()[0].find("last_contact")->is_string()) << after.to_json();
}

TEST_F(NodeFactsTest, ABriefingWithBadFactsIsRefusedNamingTheFactAndNothingIsStored) {
  Host& h = add_host("web");
  const sdk::Value before = node_show(*this, "web");

  sdk::Value body = briefing_body("web");
  sdk::Value facts = sdk::Value::object();
  facts.set("os.id", "evil");
  facts.set("OS ID", "x");
  body.set("facts", facts);
  auto [status, reply] = send_briefing(nats_->url(), h, body);
  EXPECT_EQ(status, "error") << reply;
  EXPECT_NE(reply.find("facts.OS ID"), std::string::npos) << reply;
  EXPECT_NE(reply.find("is not a fact name"), std::string::npos) << reply;

  sdk::Value body2 = briefing_body("web");
  sdk::Value facts2 = sdk::Value::object();
  facts2.set("arch", 64);
  body2.set("facts", facts2);
  auto [status2, reply2] = send_briefing(nats_->url(), h, body2);
  EXPECT_EQ(status2, "error") << reply2;
  EXPECT_NE(reply2.find("facts.arch"), std::string::npos) << reply2;

  // The briefing on record is the enrolment's, facts and all.
  const sdk::Value after = node_show(*this, "web");
  ASSERT_NE(after.find("briefing"), nullptr);
  EXPECT_EQ(*after.find("briefing"), *before.find("briefing"));
  EXPECT_EQ(after.find("facts")->get_string("os.id"), before.find("facts")->get_string("os.id"));
}

TEST_F(NodeFactsTest, AHostFromBeforeFactsHasNoneRatherThanOldOnes) {
  Host& h = add_host("old");
  ASSERT_FALSE(node_show(*this, "old").find("facts")->as_object().empty());
  auto [status, reply] = send_briefing(nats_->url(), h, briefing_body("old"));
  ASSERT_EQ(status, "ok") << reply;
  const sdk::Value shown = node_show(*this, "old");
  ASSERT_TRUE(shown.find("facts")->is_object()) << shown.to_json();
  EXPECT_TRUE(shown.find("facts")->as_object().empty()) << shown.to_json();
  auto text = mesh({"node", "show", "old"});
  EXPECT_NE(text.out.find("facts         none"), std::string::npos) << text.out;
}

// Writes node -> labels into the control plane's own sqlite file, through the store plugin, as
// the control plane's `node.label` does (record ns `labels`, a JSON object of strings). An empty
// object erases the record.
void write_labels(const fs::path& db, const std::string& node, const std::string& labels_json) {
  mesh::testing::PluginLibrary lib("store", "sqlite");
  mesh::testing::TestHost host;
  sdk::Plugin* plugin = lib.info()->create(&host.context);
  ASSERT_NE(plugin, nullptr);
  auto* store = static_cast<sdk::Store*>(plugin);
  sdk::Value config = sdk::Value::object();
  config.set("path", db.string());
  config = sdk::apply_defaults(store->config_schema(), config);
  auto ok = store->configure(config);
  ASSERT_TRUE(ok) << ok.error().describe();
  auto opened = store->open();
  ASSERT_TRUE(opened) << opened.error().describe();
  sdk::RecordWrite w;
  w.ns = "labels";
  w.key = node;
  w.value = labels_json;
  w.erase = labels_json == "{}";
  auto put = store->put_records({w}, common::now_ms());
  EXPECT_TRUE(put) << put.error().describe();
  lib.info()->destroy(plugin);
}

TEST_F(NodeFactsTest, NodeShowAndNodesShowTheOperatorLabels) {
  add_host("web");
  add_host("db");
  EXPECT_TRUE(node_show(*this, "web").find("labels")->as_object().empty());

  write_labels(dir() / "control" / "mesh.db", "web", R"({"role":"web","zone":"a"})");
  const sdk::Value shown = node_show(*this, "web");
  ASSERT_TRUE(shown.find("labels") && shown.find("labels")->is_object()) << shown.to_json();
  EXPECT_EQ(shown.find("labels")->get_string("role"), "web") << shown.to_json();
  EXPECT_EQ(shown.find("labels")->get_string("zone"), "a") << shown.to_json();

  auto nodes = mesh({"nodes", "--output", "json"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  const sdk::Value list = json(nodes.out);
  ASSERT_TRUE(list.is_array() && list.as_array().size() == 2u) << nodes.out;
  for (const auto& n : list.as_array()) {
    ASSERT_TRUE(n.find("labels") && n.find("labels")->is_object()) << nodes.out;
    if (n.get_string("name") == "web")
      EXPECT_EQ(n.find("labels")->get_string("role"), "web") << nodes.out;
    else
      EXPECT_TRUE(n.find("labels")->as_object().empty()) << nodes.out;
    EXPECT_FALSE(n.find("facts")->as_object().empty()) << nodes.out;
  }

  auto text = mesh({"node", "show", "web"});
  EXPECT_NE(text.out.find("labels        role=web, zone=a\n"), std::string::npos) << text.out;
  auto other = mesh({"node", "show", "db"});
  EXPECT_NE(other.out.find("labels        none\n"), std::string::npos) << other.out;

  write_labels(dir() / "control" / "mesh.db", "web", "{}");
  EXPECT_TRUE(node_show(*this, "web").find("labels")->as_object().empty());
}

}  // namespace
}  // namespace mesh::itest
