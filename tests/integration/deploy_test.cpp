// Issue 13's deploy, against real processes: nats-server, mesh-control (sqlite), five mesh-host
// daemons with labels, and the mesh CLI. Modules pushed, assigned by label, deployed as one
// write; outstanding and failed nodes; dry runs; concurrent deploys; declare and rollback keeping
// compositions; a control plane killed between its write and its pushes.
#include <csignal>
#include <thread>

#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

class DeployTest : public MeshTest {
 public:
  /// Five hosts web-01..web-05, labelled role=web and dir=<their own folder>, started.
  void five_hosts(bool start = true) {
    for (int i = 1; i <= 5; ++i) {
      const std::string name = "web-0" + std::to_string(i);
      add_host(name);
      fs::create_directories(dir() / "files" / name);
      label(name, {"role=web", "dir=" + (dir() / "files" / name).string()});
      if (start) start_host(hosts_[name]);
    }
  }
  void label(const std::string& node, std::vector<std::string> labels) {
    std::vector<std::string> args{"node", "label", node};
    args.insert(args.end(), labels.begin(), labels.end());
    auto r = mesh(args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  /// Pushes a module whose resources are `resources` (JSON array text).
  void push(const std::string& name, const std::string& version, const std::string& resources) {
    const fs::path f = dir() / ("module-" + name + "-" + version + ".json");
    write_text(f, "{\"module\": \"" + name + "\", \"version\": \"" + version + "\", \"resources\": " + resources + "}");
    auto r = mesh({"module", "push", f.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  /// A module of one file at `<labels.dir>/<file>`.
  static std::string motd(const std::string& file, const std::string& content) {
    return "[{\"type\": \"file\", \"id\": \"{{labels.dir}}/" + file +
           "\", \"properties\": {\"content\": \"" + content + "\", \"mode\": \"0644\"}}]";
  }
  ProcessResult deploy(const std::string& module, const std::string& version, std::vector<std::string> more = {}) {
    std::vector<std::string> args{"deploy", module, version, "--output", "json"};
    args.insert(args.end(), more.begin(), more.end());
    return mesh(args);
  }
  sdk::Value history(const std::string& node) {
    auto r = mesh({"history", node, "--output", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json(r.out);
  }
  std::string file_of(const std::string& node, const std::string& file) {
    return read_text(dir() / "files" / node / file);
  }
};

TEST_F(DeployTest, ModuleToFiveNodesIsOneWriteOneDeliveryFiveRevisions) {
  five_hosts();
  push("web", "1.0", motd("motd", "{{node.name}} serves {{labels.role}}\\n"));
  auto listed = mesh({"module", "list", "--output", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(json(listed.out).as_array().at(0).get_string("module"), "web");

  auto assigned = mesh({"assign", "web", "role=web", "--output", "json"});
  ASSERT_EQ(assigned.exit_code, 0) << assigned.err;
  EXPECT_EQ(count(json(assigned.out), "add"), 5u) << assigned.out;
  EXPECT_EQ(count(json(assigned.out), "drop"), 0u) << assigned.out;
  for (int i = 1; i <= 5; ++i)
    EXPECT_TRUE(history("web-0" + std::to_string(i)).as_array().empty()) << "assigning writes no declaration";

  // A dry run writes nothing and says what each node would get.
  auto dry = deploy("web", "1.0", {"--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.out << dry.err;
  auto plan = json(dry.out);
  ASSERT_EQ(count(plan, "nodes"), 5u) << dry.out;
  EXPECT_EQ(count(plan.find("nodes")->as_array()[0], "added"), 1u) << dry.out;
  EXPECT_TRUE(history("web-01").as_array().empty()) << "a dry run writes no revision";

  auto d = deploy("web", "1.0", {"--wait", "30s"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  auto rep = json(d.out);
  EXPECT_EQ(rep.get_int("declared", 0), 5) << d.out;
  EXPECT_EQ(count(rep, "applied"), 5u) << d.out;
  EXPECT_EQ(count(rep, "failed"), 0u);
  EXPECT_EQ(count(rep, "outstanding"), 0u);
  EXPECT_EQ(count(rep, "skipped"), 0u);
  ASSERT_EQ(count(rep, "waves"), 1u) << d.out;
  const std::int64_t delivery = rep.find("waves")->as_array()[0].get_int("delivery", 0);
  EXPECT_EQ(count(rep.find("waves")->as_array()[0], "nodes"), 5u);
  // One delivery covering the five nodes: each one's new revision names it.
  auto whole = report(delivery);
  EXPECT_EQ(whole.get_int("declared", 0), 5) << whole.to_json();
  for (int i = 1; i <= 5; ++i) {
    const std::string node = "web-0" + std::to_string(i);
    EXPECT_EQ(file_of(node, "motd"), node + " serves web\n");
    auto h = history(node);
    ASSERT_EQ(h.as_array().size(), 1u) << h.to_json();
    EXPECT_EQ(h.as_array()[0].get_int("delivery", 0), delivery);
    EXPECT_EQ(h.as_array()[0].find("modules")->get_string("web"), "1.0") << h.to_json();
    EXPECT_EQ(h.as_array()[0].get_string("cause"), "deploy");
    EXPECT_EQ(h.as_array()[0].get_string("operator"), "admin") << h.to_json();
  }
  // The text report reads like the notes' example.
  auto text = mesh({"deploy", "--show", std::to_string(rep.get_int("deploy", 0))});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("applied      5 of 5"), std::string::npos) << text.out;

  // Deploying the same version again changes nothing and writes no revision.
  auto again = deploy("web", "1.0");
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(count(json(again.out), "unchanged"), 5u) << again.out;
  EXPECT_EQ(history("web-01").as_array().size(), 1u);
}

TEST_F(DeployTest, StoppedHostIsOutstandingAndFailingHostFailsTheDeploy) {
  five_hosts();
  push("web", "1.0", motd("motd", "one\\n"));
  push("web", "1.1", motd("motd", "two\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  ASSERT_EQ(deploy("web", "1.0", {"--wait", "30s"}).exit_code, 0);

  // web-05 stopped: outstanding with its last contact, and that alone exits 0.
  ASSERT_EQ(hosts_["web-05"].proc->stop(SIGTERM, 3000), 0);
  auto d = deploy("web", "1.1", {"--wait", "4s"});
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  auto rep = json(d.out);
  EXPECT_EQ(count(rep, "applied"), 4u) << d.out;
  ASSERT_EQ(count(rep, "outstanding"), 1u) << d.out;
  EXPECT_EQ(rep.find("outstanding")->as_array()[0].get_string("node"), "web-05");
  EXPECT_TRUE(rep.find("outstanding")->as_array()[0].find("last_contact")->is_string()) << d.out;
  auto strict = mesh({"deploy", "--show", std::to_string(rep.get_int("deploy", 0)), "--fail-on-outstanding"});
  EXPECT_EQ(strict.exit_code, 1) << strict.out;

  // web-04's folder is now a plain file: its apply fails, the deploy exits 1 naming it.
  write_text(dir() / "not-a-dir", "plain\n");
  label("web-04", {"dir=" + (dir() / "not-a-dir").string()});
  // (web-05 stays outstanding: the wait ends at its duration.)
  auto failed = deploy("web", "1.0", {"--wait", "6s"});
  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  auto frep = json(failed.out);
  ASSERT_EQ(count(frep, "failed"), 1u) << failed.out;
  EXPECT_EQ(frep.find("failed")->as_array()[0].get_string("node"), "web-04");
  EXPECT_EQ(frep.find("failed")->as_array()[0].get_string("resource"), "file:" + (dir() / "not-a-dir").string() + "/motd");
  auto text = mesh({"deploy", "--show", std::to_string(frep.get_int("deploy", 0))});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("failed       1 — web-04"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("outstanding  1 — web-05"), std::string::npos) << text.out;
}

TEST_F(DeployTest, TwoConcurrentDeploysToTheSameNodesBothLand) {
  five_hosts();
  push("motd", "1", motd("motd", "motd\\n"));
  push("issue", "1", motd("issue", "issue\\n"));
  ASSERT_EQ(mesh({"assign", "motd", "role=web"}).exit_code, 0);
  ASSERT_EQ(mesh({"assign", "issue", "name=web-*"}).exit_code, 0);
  ProcessResult a, b;
  std::thread ta([&] { a = deploy("motd", "1"); });
  std::thread tb([&] { b = deploy("issue", "1"); });
  ta.join();
  tb.join();
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_EQ(json(a.out).get_int("declared", 0), 5) << a.out;
  EXPECT_EQ(json(b.out).get_int("declared", 0), 5) << b.out;
  for (int i = 1; i <= 5; ++i) {
    const std::string node = "web-0" + std::to_string(i);
    auto h = history(node);
    ASSERT_EQ(h.as_array().size(), 2u) << h.to_json();
    // Newest first: the later revision carries both modules; revisions only grow.
    EXPECT_EQ(h.as_array()[0].get_int("revision", 0), 2);
    EXPECT_EQ(h.as_array()[1].get_int("revision", 0), 1);
    EXPECT_EQ(h.as_array()[0].find("modules")->get_string("motd"), "1") << h.to_json();
    EXPECT_EQ(h.as_array()[0].find("modules")->get_string("issue"), "1") << h.to_json();
    EXPECT_TRUE(mesh::testing::eventually(
        [&] { return fs::exists(dir() / "files" / node / "motd") && fs::exists(dir() / "files" / node / "issue"); },
        20000))
        << node;
  }
}

TEST_F(DeployTest, DeclareKeepsModulePartsRollbackRestoresACompositionAndDropsPrune) {
  five_hosts();
  push("web", "1.0", motd("motd", "v1\\n"));
  push("web", "2.0", motd("motd", "v2\\n"));
  ASSERT_EQ(mesh({"assign", "web", "name=web-01"}).exit_code, 0);
  ASSERT_EQ(deploy("web", "1.0", {"--wait", "20s"}).exit_code, 0);
  // The node's own part, set by mesh declare, sits beside the module's.
  const std::string own = (dir() / "files" / "web-01" / "own").string();
  auto d = declare("web-01", file_declaration({{own, "mine\n"}}));
  ASSERT_EQ(count(report(d.get_int("delivery", 0), "20s"), "applied"), 1u);
  EXPECT_EQ(file_of("web-01", "motd"), "v1\n") << "declare kept the module's resources";
  EXPECT_EQ(file_of("web-01", "own"), "mine\n");
  ASSERT_EQ(deploy("web", "2.0", {"--wait", "20s"}).exit_code, 0);
  EXPECT_EQ(file_of("web-01", "motd"), "v2\n");
  EXPECT_EQ(file_of("web-01", "own"), "mine\n") << "deploy kept the own part";

  // Own resources conflicting with the module's: refused naming both, nothing written.
  const std::string clash = (dir() / "files" / "web-01" / "motd").string();
  const fs::path f = dir() / "clash.json";
  write_text(f, file_declaration({{clash, "x\n"}}));
  auto refused = mesh({"declare", "web-01", f.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("module web@2.0"), std::string::npos) << refused.err;
  EXPECT_EQ(history("web-01").as_array().size(), 3u) << "nothing written";

  // Rollback to revision 2 (own + web 1.0): the whole composition returns.
  auto rb = mesh({"rollback", "web-01", "--to", "2", "--output", "json"});
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  ASSERT_EQ(count(report(json(rb.out).get_int("delivery", 0), "20s"), "applied"), 1u);
  EXPECT_EQ(file_of("web-01", "motd"), "v1\n");
  auto h = history("web-01");
  EXPECT_EQ(h.as_array()[0].get_string("cause"), "rollback");
  EXPECT_EQ(h.as_array()[0].find("modules")->get_string("web"), "1.0") << h.to_json();

  // Assigned elsewhere: the next deploy drops web-01 (its module file pruned) and adds web-02.
  auto moved = mesh({"assign", "web", "name=web-02", "--output", "json"});
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  auto m = json(moved.out);
  ASSERT_EQ(count(m, "drop"), 1u) << moved.out;
  EXPECT_EQ(m.find("drop")->as_array()[0].as_string(), "web-01");
  EXPECT_EQ(m.find("add")->as_array()[0].as_string(), "web-02");
  auto text = mesh({"assign", "web", "name=web-02"});
  EXPECT_NE(text.out.find("drops  1 — web-01"), std::string::npos) << text.out;
  auto dr = deploy("web", "2.0", {"--wait", "20s"});
  ASSERT_EQ(dr.exit_code, 0) << dr.out << dr.err;
  EXPECT_EQ(count(json(dr.out), "dropped"), 1u) << dr.out;
  EXPECT_FALSE(fs::exists(dir() / "files" / "web-01" / "motd")) << "the dropped node's module file is removed";
  EXPECT_EQ(file_of("web-01", "own"), "mine\n");
  EXPECT_EQ(file_of("web-02", "motd"), "v2\n");

  // Unassigned: the next deploy drops it from every node that carries it.
  auto un = mesh({"unassign", "web", "--output", "json"});
  ASSERT_EQ(un.exit_code, 0) << un.err;
  ASSERT_EQ(count(json(un.out), "drop"), 1u) << un.out;
  EXPECT_EQ(json(un.out).find("drop")->as_array()[0].as_string(), "web-02");
  auto gone = deploy("web", "2.0", {"--wait", "20s"});
  ASSERT_EQ(gone.exit_code, 0) << gone.out << gone.err;
  EXPECT_FALSE(fs::exists(dir() / "files" / "web-02" / "motd"));
  EXPECT_EQ(deploy("web", "2.0").exit_code, 2) << "nothing assigned and nothing carries it";
}

TEST_F(DeployTest, IneligibleNodeIsSkippedAndListedInEveryReport) {
  Host& good = add_host("web-01");
  fs::create_directories(dir() / "files" / "web-01");
  label("web-01", {"role=web", "dir=" + (dir() / "files" / "web-01").string()});
  start_host(good);
  // web-09's host names a plugin it does not have: its briefing fails, it is ineligible.
  Host& bad = hosts_["web-09"];
  bad.name = "web-09";
  bad.state = dir() / "host-web-09";
  bad.config = dir() / "web-09.toml";
  write_text(bad.config, "[node]\nname = \"web-09\"\nstate_dir = \"" + bad.state.string() +
                             "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\", \"nosuch\"]\n\n"
                             "[transport]\nplugin = \"nats\"\nservers = [\"" + nats_->url() + "\"]\n");
  enrol(bad, false);
  fs::create_directories(dir() / "files" / "web-09");
  label("web-09", {"role=web", "dir=" + (dir() / "files" / "web-09").string()});
  push("web", "1.0", motd("motd", "hi\\n"));

  auto assigned = mesh({"assign", "web", "role=web", "--output", "json"});
  ASSERT_EQ(assigned.exit_code, 0) << assigned.err;
  ASSERT_EQ(count(json(assigned.out), "skipped"), 1u) << assigned.out;
  EXPECT_EQ(json(assigned.out).find("skipped")->as_array()[0].get_string("node"), "web-09");
  auto dry = deploy("web", "1.0", {"--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(count(json(dry.out), "skipped"), 1u) << dry.out;

  auto d = deploy("web", "1.0", {"--wait", "20s"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  auto rep = json(d.out);
  EXPECT_EQ(rep.get_int("declared", 0), 1) << d.out;
  ASSERT_EQ(count(rep, "skipped"), 1u) << d.out;
  const auto& skipped = rep.find("skipped")->as_array()[0];
  EXPECT_EQ(skipped.get_string("node"), "web-09");
  EXPECT_EQ(skipped.get_string("reason").rfind("ineligible: plugin:nosuch", 0), 0u) << d.out;
  EXPECT_TRUE(history("web-09").as_array().empty()) << "nothing written for a skipped node";
  auto text = mesh({"deploy", "--show", std::to_string(rep.get_int("deploy", 0))});
  EXPECT_NE(text.out.find("skipped      1 — web-09: ineligible"), std::string::npos) << text.out;

  // The JUnit form is well-formed XML (checked with xmllint when it is installed).
  auto junit = mesh({"deploy", "--show", std::to_string(rep.get_int("deploy", 0)), "--output", "junit"});
  EXPECT_EQ(junit.exit_code, 0) << junit.err;
  EXPECT_NE(junit.out.find("<testcase"), std::string::npos) << junit.out;
  if (fs::exists("/usr/bin/xmllint")) {
    write_text(dir() / "deploy.xml", junit.out);
    auto lint = mesh::testing::run_process({"/usr/bin/xmllint", "--noout", (dir() / "deploy.xml").string()});
    EXPECT_EQ(lint.exit_code, 0) << lint.err << junit.out;
  }
}

// A node that enrolled but never sent a briefing (its mesh-host never ran): its eligibility is
// unknown, so it is skipped and listed with its reason by assign, the dry run and the report.
TEST_F(DeployTest, ANodeThatNeverBriefedIsSkippedAndListedWithItsReason) {
  Host& good = add_host("web-01");
  fs::create_directories(dir() / "files" / "web-01");
  label("web-01", {"role=web", "dir=" + (dir() / "files" / "web-01").string()});
  start_host(good);
  // web-07 enrols as a node does, but sends no briefing (mesh-host enrol always sends one: the
  // enrolment request is made here, over the broker, with a key of its own).
  {
    auto tok = mesh({"token", "issue", "web-07", "--output", "json"});
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    BrokerClient raw(nats_->url());
    ASSERT_TRUE(raw.connected) << raw.connected.error().message;
    const auto keys = common::generate_keypair();
    sdk::Value req = sdk::Value::object();
    req.set("node", "web-07");
    req.set("token", json(tok.out).get_string("token"));
    req.set("public_key", common::to_hex(keys.public_key));
    req.set("host_version", "0.1.0");
    auto reply = raw->request(protocol::make_message(protocol::kEnrolSubject, req.to_json()), std::chrono::seconds(5));
    ASSERT_TRUE(reply) << reply.error().message;
    const std::string* status = reply->header(protocol::kHeaderStatus);
    ASSERT_TRUE(status && *status == "ok") << reply->body;
  }
  fs::create_directories(dir() / "files" / "web-07");
  label("web-07", {"role=web", "dir=" + (dir() / "files" / "web-07").string()});
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        const sdk::Value nodes = json(mesh({"nodes", "--output", "json"}).out);
        for (const auto& n : nodes.as_array())
          if (n.get_string("name") == "web-01") return n.get_bool("eligible", false);
        return false;
      },
      15000))
      << "web-01 briefs";
  push("web", "1.0", motd("motd", "hi\\n"));
  const std::string reason = "never briefed";

  auto assigned = mesh({"assign", "web", "role=web", "--output", "json"});
  ASSERT_EQ(assigned.exit_code, 0) << assigned.err;
  ASSERT_EQ(count(json(assigned.out), "skipped"), 1u) << assigned.out;
  EXPECT_EQ(json(assigned.out).find("skipped")->as_array()[0].get_string("node"), "web-07") << assigned.out;
  EXPECT_EQ(json(assigned.out).find("skipped")->as_array()[0].get_string("reason").rfind(reason, 0), 0u)
      << assigned.out;
  auto assigned_text = mesh({"assign", "web", "role=web"});
  EXPECT_NE(assigned_text.out.find("web-07"), std::string::npos) << assigned_text.out;
  EXPECT_NE(assigned_text.out.find(reason), std::string::npos) << assigned_text.out;

  auto dry = deploy("web", "1.0", {"--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  ASSERT_EQ(count(json(dry.out), "skipped"), 1u) << dry.out;
  EXPECT_EQ(json(dry.out).find("skipped")->as_array()[0].get_string("node"), "web-07") << dry.out;
  EXPECT_EQ(json(dry.out).find("skipped")->as_array()[0].get_string("reason").rfind(reason, 0), 0u) << dry.out;
  auto dry_text = mesh({"deploy", "web", "1.0", "--dry-run"});
  EXPECT_NE(dry_text.out.find("web-07"), std::string::npos) << dry_text.out;
  EXPECT_NE(dry_text.out.find(reason), std::string::npos) << dry_text.out;

  auto d = deploy("web", "1.0", {"--wait", "20s"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  auto rep = json(d.out);
  EXPECT_EQ(rep.get_int("declared", 0), 1) << d.out;
  EXPECT_EQ(count(rep, "applied"), 1u) << d.out;
  ASSERT_EQ(count(rep, "skipped"), 1u) << d.out;
  EXPECT_EQ(rep.find("skipped")->as_array()[0].get_string("node"), "web-07");
  EXPECT_EQ(rep.find("skipped")->as_array()[0].get_string("reason").rfind(reason, 0), 0u) << d.out;
  EXPECT_TRUE(history("web-07").as_array().empty()) << "nothing written for a skipped node";
  const std::string id = std::to_string(rep.get_int("deploy", 0));
  auto text = mesh({"deploy", "--show", id});
  EXPECT_NE(text.out.find("skipped      1 — web-07: " + reason), std::string::npos) << text.out;
  auto junit = mesh({"deploy", "--show", id, "--output", "junit"});
  EXPECT_NE(junit.out.find("<skipped message=\"skipped: " + reason), std::string::npos) << junit.out;

  // `mesh module list` and `module show` are aligned tables, as `mesh nodes` is.
  auto list = mesh({"module", "list"});
  EXPECT_EQ(list.out, "MODULE  VERSIONS  ASSIGNED\nweb     1.0       role=web\n") << list.out;
  auto show = mesh({"module", "show", "web"});
  EXPECT_EQ(show.out.rfind("module web\nVERSION  PUSHED                OPERATOR  DIGEST\n1.0      20", 0), 0u) << show.out;
  EXPECT_NE(show.out.find("\nassigned to role=web\n"), std::string::npos) << show.out;
}

// `--wait` on a terminal shows the live counts, updated in place (a carriage return and an erase
// to the end of the line before each); without a terminal, or with --output json, only the result.
TEST_F(DeployTest, WaitOnATerminalShowsLiveCountsAndWithoutOneOnlyTheResult) {
  Host& h = add_host("web-01");
  fs::create_directories(dir() / "files" / "web-01");
  label("web-01", {"role=web", "dir=" + (dir() / "files" / "web-01").string()});
  start_host(h);
  push("web", "1.0", motd("motd", "one\\n"));
  push("web", "1.1", motd("motd", "two\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  // The deploy's answer has every written node outstanding: the first live line is always shown.
  const std::string live = "\r\033[Kapplied 0 / failed 0 / outstanding 1";
  // A real pseudo-terminal: util-linux script(1) runs mesh with its stdout on one.
  auto quoted = [](const std::string& a) { return "'" + a + "'"; };
  std::string cmd;
  for (const auto& a : {bin("mesh"), std::string("--server"), nats_->url(), std::string("--plugin-dir"),
                        std::string(MESH_TEST_PLUGIN_DIR), std::string("--identity"), admin_identity(),
                        std::string("deploy"), std::string("web"), std::string("1.0"), std::string("--wait"),
                        std::string("30s")})
    cmd += (cmd.empty() ? "" : " ") + quoted(a);
  auto tty = mesh::testing::run_process({"script", "-qfec", cmd, "/dev/null"});
  ASSERT_EQ(tty.exit_code, 0) << tty.out << tty.err;
  EXPECT_NE(tty.out.find(live), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("applied      1 of 1"), std::string::npos) << "then the result: " << tty.out;
  EXPECT_NE(tty.out.find("\r\033[K", tty.out.find(live) + live.size()), std::string::npos)
      << "the live line is erased before the result: " << tty.out;

  // Not a terminal (a pipe, as in CI): the result only.
  auto piped = mesh({"deploy", "web", "1.1", "--wait", "30s"});
  ASSERT_EQ(piped.exit_code, 0) << piped.out << piped.err;
  EXPECT_EQ(piped.out.find("\033["), std::string::npos) << piped.out;
  EXPECT_EQ(piped.out.find("outstanding 1"), std::string::npos) << piped.out;
  EXPECT_NE(piped.out.find("applied      1 of 1"), std::string::npos) << piped.out;
  // On a terminal with --output json: the result only, as JSON.
  std::string json_cmd = cmd;
  json_cmd.replace(json_cmd.find("'1.0'"), 5, "'1.0' '--output' 'json'");
  auto tty_json = mesh::testing::run_process({"script", "-qfec", json_cmd, "/dev/null"});
  ASSERT_EQ(tty_json.exit_code, 0) << tty_json.out << tty_json.err;
  EXPECT_EQ(tty_json.out.find("\033["), std::string::npos) << tty_json.out;
  EXPECT_NE(tty_json.out.find("\"deploy\""), std::string::npos) << tty_json.out;
}

TEST_F(DeployTest, StagedDeployWritesWaveByWaveAndAFailureInWaveOneHaltsIt) {
  five_hosts();
  push("web", "1.0", motd("motd", "{{node.name}}\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  // Three waves over five nodes: 1, then up to 60% (3), then all.
  auto d = deploy("web", "1.0", {"--waves", "1,60%,100%", "--wait", "60s"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  auto rep = json(d.out);
  EXPECT_EQ(rep.get_string("state"), "done") << d.out;
  EXPECT_EQ(count(rep, "applied"), 5u) << d.out;
  ASSERT_EQ(count(rep, "waves"), 3u) << d.out;
  const auto& waves = rep.find("waves")->as_array();
  EXPECT_EQ(count(waves[0], "nodes"), 1u);
  EXPECT_EQ(count(waves[1], "nodes"), 2u);
  EXPECT_EQ(count(waves[2], "nodes"), 2u);
  EXPECT_NE(waves[0].get_int("delivery", 0), waves[1].get_int("delivery", 0)) << "each wave is one write";
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(file_of("web-0" + std::to_string(i), "motd"), "web-0" + std::to_string(i) + "\n");

  // web-01 (the first wave) now fails: the deploy halts, naming it; the others keep 1.0.
  push("web", "2.0", motd("motd", "two\\n"));
  write_text(dir() / "not-a-dir", "plain\n");
  label("web-01", {"dir=" + (dir() / "not-a-dir").string()});
  auto h = deploy("web", "2.0", {"--waves", "1,100%", "--wait", "30s"});
  EXPECT_EQ(h.exit_code, 1) << h.out << h.err;
  auto hrep = json(h.out);
  ASSERT_TRUE(hrep.find("halted") && hrep.find("halted")->is_object()) << h.out;
  EXPECT_EQ(hrep.find("halted")->get_int("wave", 0), 1);
  EXPECT_EQ(hrep.find("halted")->get_string("node"), "web-01");
  EXPECT_EQ(hrep.get_string("state"), "halted");
  EXPECT_EQ(count(hrep, "failed"), 1u) << h.out;
  EXPECT_EQ(count(hrep, "applied"), 0u) << "wave 2 was never written";
  ASSERT_EQ(count(hrep, "waves"), 2u);
  EXPECT_TRUE(hrep.find("waves")->as_array()[1].find("delivery")->is_null()) << h.out;
  for (int i = 2; i <= 5; ++i) {
    const std::string node = "web-0" + std::to_string(i);
    EXPECT_EQ(history(node).as_array().size(), 1u) << node << " keeps its old declaration";
    EXPECT_EQ(file_of(node, "motd"), node + "\n");
  }
  auto text = mesh({"deploy", "--show", std::to_string(hrep.get_int("deploy", 0))});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("halted at wave 1 — web-01: file:"), std::string::npos) << text.out;
}

TEST_F(DeployTest, StagedDeployHaltsWhenAWaveStaysOutstandingAndSurvivesARestart) {
  five_hosts();
  push("web", "1.0", motd("motd", "one\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  // web-01 stopped: wave 1 stays outstanding; at the wave timeout nothing applied, so it halts.
  ASSERT_EQ(hosts_["web-01"].proc->stop(SIGTERM, 3000), 0);
  auto h = deploy("web", "1.0", {"--waves", "1,100%", "--wave-timeout", "2s", "--wait", "30s"});
  EXPECT_EQ(h.exit_code, 1) << h.out << h.err;
  auto hrep = json(h.out);
  ASSERT_TRUE(hrep.find("halted") && hrep.find("halted")->is_object()) << h.out;
  const std::string reason = hrep.find("halted")->get_string("reason");
  EXPECT_EQ(reason.rfind("wave 1: 0 of 1 applied within 2s; web-01 outstanding, last seen ", 0), 0u) << reason;
  EXPECT_TRUE(history("web-02").as_array().empty());

  // With web-01 back, a staged deploy whose control plane restarts between waves still ends.
  start_host(hosts_["web-01"]);
  push("web", "1.1", motd("motd", "two\\n"));
  auto d = deploy("web", "1.1", {"--waves", "1,100%"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  const std::int64_t id = json(d.out).get_int("deploy", 0);
  control_.reset();  // stopped with wave 2 perhaps not written
  start_control();
  auto show = mesh({"deploy", "--show", std::to_string(id), "--wait", "60s", "--output", "json"});
  EXPECT_EQ(show.exit_code, 0) << show.out << show.err;
  auto srep = json(show.out);
  EXPECT_EQ(srep.get_string("state"), "done") << show.out;
  EXPECT_EQ(count(srep, "applied"), 5u) << show.out;
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(file_of("web-0" + std::to_string(i), "motd"), "two\n");
}

TEST_F(DeployTest, BadInputIsRefusedWithExit2AndNothingWritten) {
  five_hosts(/*start=*/false);
  push("web", "1.0", motd("motd", "{{labels.missing}}\\n"));
  // The same version with other content is refused; versions are immutable.
  const fs::path other = dir() / "other.json";
  write_text(other, "{\"module\": \"web\", \"version\": \"1.0\", \"resources\": []}");
  auto again = mesh({"module", "push", other.string()});
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("immutable"), std::string::npos) << again.err;
  // A bad module file never leaves the machine.
  write_text(other, "{\"module\": \"Web!\", \"version\": \"1\", \"resources\": []}");
  EXPECT_EQ(mesh({"module", "push", other.string()}).exit_code, 2);
  EXPECT_EQ(mesh({"assign", "web", "role="}).exit_code, 2) << "bad selector";
  EXPECT_EQ(mesh({"assign", "nothing", "role=web"}).exit_code, 2) << "unknown module";
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  EXPECT_EQ(deploy("web", "9.9").exit_code, 2) << "unknown version";
  auto missing = deploy("web", "1.0");
  EXPECT_EQ(missing.exit_code, 2) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("web-01"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("missing"), std::string::npos) << missing.err;
  // A resource the node's providers refuse (these hosts load only `file`): refused before any
  // write, naming the node.
  push("pkg", "1", R"([{"type": "package", "id": "nginx", "properties": {"version": "present"}}])");
  ASSERT_EQ(mesh({"assign", "pkg", "name=web-0*"}).exit_code, 0);
  auto schema = deploy("pkg", "1");
  EXPECT_EQ(schema.exit_code, 2) << schema.out << schema.err;
  EXPECT_NE(schema.err.find("node web-01"), std::string::npos) << schema.err;
  EXPECT_NE(schema.err.find("package"), std::string::npos) << schema.err;
  // A reader may look, not deploy.
  auto reader = mesh({"operator", "add", "ro", "--role", "reader"});
  ASSERT_EQ(reader.exit_code, 0);
  write_text(dir() / "ro.identity", reader.out);
  fs::permissions(dir() / "ro.identity", fs::perms::owner_read | fs::perms::owner_write);
  auto ro = mesh_as((dir() / "ro.identity").string(), {"deploy", "web", "1.0"});
  EXPECT_EQ(ro.exit_code, 2) << ro.err;
  EXPECT_EQ(mesh_as((dir() / "ro.identity").string(), {"module", "list"}).exit_code, 0);
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(history("web-0" + std::to_string(i)).as_array().empty());
}

TEST_F(DeployTest, AnAssignmentThatSelectsNoNodeIsRefusedNamingItsSelector) {
  five_hosts(/*start=*/false);
  push("web", "1.2", motd("motd", "hi\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=wbe"}).exit_code, 0);  // a typo: no node has role=wbe
  const std::string said = "module web@1.2: its assignment `role=wbe` selects no node (5 nodes enrolled)";
  auto d = deploy("web", "1.2");
  EXPECT_EQ(d.exit_code, 2) << d.out << d.err;
  EXPECT_NE(d.err.find(said), std::string::npos) << d.err;
  // A dry run says so the same way.
  auto dry = deploy("web", "1.2", {"--dry-run"});
  EXPECT_EQ(dry.exit_code, 2) << dry.out << dry.err;
  EXPECT_NE(dry.err.find(said), std::string::npos) << dry.err;
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(history("web-0" + std::to_string(i)).as_array().empty());
  auto none = mesh({"deploy", "--show", "1"});
  EXPECT_EQ(none.exit_code, 2) << "no deploy record was written: " << none.out;

  // A typo in a new assignment of a deployed module would take it off every node: refused too.
  start_host(hosts_["web-01"]);
  ASSERT_EQ(mesh({"assign", "web", "name=web-01"}).exit_code, 0);
  ASSERT_EQ(deploy("web", "1.2", {"--wait", "20s"}).exit_code, 0);
  ASSERT_EQ(mesh({"assign", "web", "role=wbe"}).exit_code, 0);
  auto off = deploy("web", "1.2");
  EXPECT_EQ(off.exit_code, 2) << off.out << off.err;
  EXPECT_NE(off.err.find(said), std::string::npos) << off.err;
  EXPECT_NE(off.err.find("mesh unassign web"), std::string::npos) << off.err;
  EXPECT_EQ(history("web-01").as_array().size(), 1u) << "nothing written";
  EXPECT_EQ(file_of("web-01", "motd"), "hi\n");
}

TEST_F(DeployTest, ADeployThatChangesNothingReportsEachNodeAsTheRevisionItHoldsStands) {
  five_hosts();
  push("web", "1.0", motd("motd", "{{node.name}}\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  // web-05 stopped once it was heard from (its enrolment's briefing is not contact: decision
  // record 195): its revision 1 is written and never applied.
  ASSERT_TRUE(mesh::testing::eventually([&] {
    auto n = mesh({"node", "show", "web-05", "--output", "json"});
    return n.exit_code == 0 && json(n.out).find("last_contact")->is_string();
  }, 15000));
  ASSERT_EQ(hosts_["web-05"].proc->stop(SIGTERM, 3000), 0);
  ASSERT_EQ(deploy("web", "1.0", {"--wait", "4s"}).exit_code, 0);

  // The same deploy again changes nothing: web-05 is still outstanding, not silently fine.
  auto again = deploy("web", "1.0");
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  auto rep = json(again.out);
  EXPECT_EQ(count(rep, "unchanged"), 5u) << again.out;
  EXPECT_EQ(rep.get_int("declared", -1), 0) << again.out;
  EXPECT_EQ(count(rep, "applied"), 4u) << again.out;
  ASSERT_EQ(count(rep, "outstanding"), 1u) << again.out;
  const auto& web05 = rep.find("outstanding")->as_array()[0];
  EXPECT_EQ(web05.get_string("node"), "web-05");
  EXPECT_EQ(web05.get_int("revision", 0), 1);
  EXPECT_TRUE(web05.get_bool("unchanged", false)) << again.out;
  EXPECT_TRUE(web05.find("last_contact")->is_string()) << again.out;
  EXPECT_EQ(history("web-01").as_array().size(), 1u) << "nothing written";
  const std::string id = std::to_string(rep.get_int("deploy", 0));
  EXPECT_EQ(mesh({"deploy", "--show", id, "--fail-on-outstanding"}).exit_code, 1);
  auto text = mesh({"deploy", "--show", id});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("applied      4 of 5"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("outstanding  1 — web-05 (unchanged, revision 1) last seen"), std::string::npos) << text.out;
  auto junit = mesh({"deploy", "--show", id, "--output", "junit"});
  EXPECT_NE(junit.out.find("name=\"web-05\""), std::string::npos) << junit.out;
  EXPECT_NE(junit.out.find("outstanding: last seen"), std::string::npos) << junit.out;

  // --wait sees it: web-05 back, it applies the revision it holds, and the wait ends on that.
  start_host(hosts_["web-05"]);
  auto waited = deploy("web", "1.0", {"--wait", "30s", "--fail-on-outstanding"});
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  EXPECT_EQ(count(json(waited.out), "applied"), 5u) << waited.out;
  EXPECT_EQ(count(json(waited.out), "outstanding"), 0u) << waited.out;

  // A node whose held revision failed is failed: the unchanged deploy exits 1 naming it.
  write_text(dir() / "not-a-dir", "plain\n");
  label("web-04", {"dir=" + (dir() / "not-a-dir").string()});
  ASSERT_EQ(deploy("web", "1.0", {"--wait", "20s"}).exit_code, 1);
  auto same = deploy("web", "1.0");
  EXPECT_EQ(same.exit_code, 1) << same.out << same.err;
  auto srep = json(same.out);
  EXPECT_EQ(count(srep, "unchanged"), 5u) << same.out;
  ASSERT_EQ(count(srep, "failed"), 1u) << same.out;
  EXPECT_EQ(srep.find("failed")->as_array()[0].get_string("node"), "web-04");
  EXPECT_TRUE(srep.find("failed")->as_array()[0].get_bool("unchanged", false));
  EXPECT_EQ(srep.find("failed")->as_array()[0].get_string("resource"),
            "file:" + (dir() / "not-a-dir").string() + "/motd");
  // A dry run of it shows the same.
  auto dry = deploy("web", "1.0", {"--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.out << dry.err;
  EXPECT_EQ(count(json(dry.out), "failed"), 1u) << dry.out;
  auto drytext = mesh({"deploy", "web", "1.0", "--dry-run"});
  EXPECT_NE(drytext.out.find("web-04 holds revision 2: failed"), std::string::npos) << drytext.out;
}

TEST_F(DeployTest, AStagedDeployOvertakenByANewerDeployOfItsModuleSaysSupersededAndWritesNoMoreWaves) {
  five_hosts();
  push("web", "1.0", motd("motd", "one\\n"));
  push("web", "2.0", motd("motd", "two\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  // web-01 (wave 1) stopped: the staged deploy waits on it (its wave timeout is long).
  ASSERT_EQ(hosts_["web-01"].proc->stop(SIGTERM, 3000), 0);
  auto staged = deploy("web", "1.0", {"--waves", "1,100%"});
  ASSERT_EQ(staged.exit_code, 0) << staged.out << staged.err;
  const std::int64_t first = json(staged.out).get_int("deploy", 0);
  EXPECT_EQ(json(staged.out).get_string("state"), "running") << staged.out;
  // A newer deploy of the same module, to every node.
  auto newer = deploy("web", "2.0", {"--wait", "8s"});  // web-01 stays outstanding: the whole wait
  ASSERT_EQ(newer.exit_code, 0) << newer.out << newer.err;
  const std::int64_t second = json(newer.out).get_int("deploy", 0);
  ASSERT_GT(second, first);

  auto show = mesh({"deploy", "--show", std::to_string(first), "--wait", "20s", "--output", "json"});
  EXPECT_EQ(show.exit_code, 0) << show.out << show.err;
  auto rep = json(show.out);
  EXPECT_EQ(rep.get_string("state"), "superseded") << show.out;
  EXPECT_EQ(rep.get_int("superseded_by", 0), second) << show.out;
  EXPECT_TRUE(rep.find("halted")->is_null()) << show.out;
  ASSERT_EQ(count(rep, "waves"), 2u) << show.out;
  EXPECT_TRUE(rep.find("waves")->as_array()[1].find("delivery")->is_null()) << "wave 2 never written: " << show.out;
  auto text = mesh({"deploy", "--show", std::to_string(first)});
  EXPECT_NE(text.out.find("superseded by deploy " + std::to_string(second) + " of module web"), std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("halted"), std::string::npos) << text.out;
  // The nodes of its unwritten wave carry only the newer deploy's version.
  for (int i = 2; i <= 5; ++i) {
    const std::string node = "web-0" + std::to_string(i);
    auto h = history(node);
    ASSERT_EQ(h.as_array().size(), 1u) << node << ": " << h.to_json();
    EXPECT_EQ(h.as_array()[0].find("modules")->get_string("web"), "2.0") << h.to_json();
    EXPECT_EQ(file_of(node, "motd"), "two\n");
  }
}

TEST_F(DeployTest, AStagedDeployWhoseWaveAnotherModulesDeployRewroteCountsThatRevision) {
  five_hosts();
  push("web", "1.0", motd("motd", "one\\n"));
  push("issue", "1", motd("issue", "issue\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  ASSERT_EQ(mesh({"assign", "issue", "role=web"}).exit_code, 0);
  ASSERT_EQ(hosts_["web-01"].proc->stop(SIGTERM, 3000), 0);
  auto staged = deploy("web", "1.0", {"--waves", "1,100%"});
  ASSERT_EQ(staged.exit_code, 0) << staged.out << staged.err;
  const std::string id = std::to_string(json(staged.out).get_int("deploy", 0));
  // Another module deployed to every node writes web-01 a revision that still carries web 1.0:
  // the staged deploy's wave 1 is that revision's outcome (outstanding, then applied), not
  // "0 of 1 applied".
  ASSERT_EQ(deploy("issue", "1").exit_code, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // a few rounds of the wave thread
  auto running = json(mesh({"deploy", "--show", id, "--output", "json"}).out);
  EXPECT_EQ(running.get_string("state"), "running") << running.to_json();
  EXPECT_TRUE(running.find("halted")->is_null()) << running.to_json();
  start_host(hosts_["web-01"]);
  auto show = mesh({"deploy", "--show", id, "--wait", "60s", "--output", "json"});
  EXPECT_EQ(show.exit_code, 0) << show.out << show.err;
  auto rep = json(show.out);
  EXPECT_EQ(rep.get_string("state"), "done") << show.out;
  for (int i = 1; i <= 5; ++i) {
    const std::string node = "web-0" + std::to_string(i);
    EXPECT_TRUE(mesh::testing::eventually([&] { return fs::exists(dir() / "files" / node / "motd"); }, 20000)) << node;
  }
}

TEST_F(DeployTest, BadWaveOptionsAreRefusedNamingTheFlagAndNothingIsWritten) {
  five_hosts(/*start=*/false);
  push("web", "1.0", motd("motd", "hi\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  struct Case {
    std::vector<std::string> flags;
    std::string flag;
  };
  for (const Case& c : {Case{{"--waves", "50%,10%"}, "--waves"}, Case{{"--waves", "50%,10%,100%"}, "--waves"},
                        Case{{"--waves", "1,10%"}, "--waves"}, Case{{"--waves", "1,5"}, "--waves"},
                        Case{{"--waves", "1,100%", "--min-applied", "half"}, "--min-applied"},
                        Case{{"--waves", "1,100%", "--min-applied", "0"}, "--min-applied"},
                        Case{{"--waves", "1,100%", "--wave-timeout", "0s"}, "--wave-timeout"},
                        Case{{"--waves", "1,100%", "--wave-timeout", "soon"}, "--wave-timeout"}}) {
    std::vector<std::string> args{"deploy", "web", "1.0"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    auto r = mesh(args);
    EXPECT_EQ(r.exit_code, 2) << c.flags[1] << ": " << r.out << r.err;
    EXPECT_EQ(r.err.rfind("error: " + c.flag + ": ", 0), 0u) << r.err;
  }
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(history("web-0" + std::to_string(i)).as_array().empty());
  EXPECT_EQ(mesh({"deploy", "--show", "1"}).exit_code, 2) << "no deploy record";
}

TEST_F(DeployTest, ControlPlaneKilledBetweenWriteAndPushPushesOnRestart) {
  five_hosts();
  push("web", "1.0", motd("motd", "{{node.name}}\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  // A control plane that dies right after its store write (before any push).
  control_.reset();
  const fs::path cfg = dir() / "control.toml";
  control_ = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"},
      std::vector<std::string>{"NOX_MESH_CONTROL_EXIT_BEFORE_PUSH_FOR_TEST=1"});
  ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000));
  auto d = mesh({"deploy", "web", "1.0", "--timeout", "3s"});
  EXPECT_NE(d.exit_code, 0) << "no answer: the control plane died";
  EXPECT_TRUE(mesh::testing::eventually([&] { return !control_->running(); }, 5000));
  EXPECT_FALSE(fs::exists(dir() / "files" / "web-01" / "motd")) << "nothing was pushed";
  control_.reset();
  start_control();
  for (int i = 1; i <= 5; ++i) {
    const std::string node = "web-0" + std::to_string(i);
    EXPECT_TRUE(mesh::testing::eventually([&] { return fs::exists(dir() / "files" / node / "motd"); }, 20000)) << node;
  }
  auto show = mesh({"deploy", "--show", "1", "--wait", "20s", "--output", "json"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(count(json(show.out), "applied"), 5u) << show.out;
}

// A CI job's `mesh deploy --wait` rides out a restart of the control plane within its wait: it
// names the deploy before waiting, says it got no answer, asks again, and ends with the report of
// the restarted control plane (the deploy is in the store), not with a bare broker error.
TEST_F(DeployTest, AssignOfManyNodesPrintsACountAndTheFirstFew) {
  // newuser N8: `mesh assign sim 'name=sim-*'` printed all 300 names on one line.
  for (int i = 1; i <= 12; ++i) add_host("big-" + std::string(i < 10 ? "0" : "") + std::to_string(i));
  push("big", "1.0", "[{\"type\": \"file\", \"id\": \"/tmp/x\", \"properties\": {\"content\": \"x\"}}]");
  auto r = mesh({"assign", "big", "name=big-*"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("adds   12 — big-01, big-02, big-03, big-04, big-05, big-06, big-07, big-08, big-09, big-10 and 2 "
                       "more (--output json lists them all)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("big-12"), std::string::npos) << r.out;
  auto j = mesh({"assign", "big", "name=big-*", "--output", "json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_NE(j.out.find("big-12"), std::string::npos) << j.out;
}

TEST_F(DeployTest, DeployWaitRidesOutAControlPlaneRestart) {
  five_hosts();
  push("web", "1.0", motd("motd", "one\\n"));
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  ASSERT_EQ(hosts_["web-05"].proc->stop(SIGTERM, 3000), 0);  // stays outstanding: the wait runs to its end
  BackgroundProcess waiting(std::vector<std::string>{bin("mesh"), "--server", nats_->url(), "--plugin-dir",
                                                     MESH_TEST_PLUGIN_DIR, "--identity", admin_identity(), "--timeout",
                                                     "2s", "deploy", "web", "1.0", "--wait", "25s", "--output", "json"});
  ASSERT_TRUE(mesh::testing::eventually([&] { return waiting.stderr_text().find("written; waiting") != std::string::npos; },
                                        20000))
      << waiting.stderr_text();
  control_->stop(SIGKILL);
  control_.reset();
  // Said by the wait's loop, or by the request's own asking again (decision record 193).
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        const std::string err = waiting.stderr_text();
        return err.find("no answer from the control plane") != std::string::npos ||
               err.find("asking again") != std::string::npos;
      },
      20000))
      << waiting.stderr_text();
  start_control();
  ASSERT_TRUE(mesh::testing::eventually([&] { return !waiting.running(); }, 60000));
  EXPECT_EQ(waiting.exit_code(), 0) << waiting.stdout_text() << waiting.stderr_text();
  auto rep = json(waiting.stdout_text());
  EXPECT_EQ(count(rep, "applied"), 4u) << waiting.stdout_text();
  ASSERT_EQ(count(rep, "outstanding"), 1u) << waiting.stdout_text();
  EXPECT_EQ(rep.find("outstanding")->as_array()[0].get_string("node"), "web-05");
}

}  // namespace
}  // namespace mesh::itest
