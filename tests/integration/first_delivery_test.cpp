// Issue 2's "done when", against real processes: nats-server, mesh-control (sqlite), mesh-host,
// and the mesh CLI.
#include <sys/stat.h>

#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using FirstDeliveryTest = MeshTest;

TEST_F(FirstDeliveryTest, DeclaredFilesAreAppliedReadBackAndReported) {
  Host& h = add_host("web-01");
  start_host(h);
  const auto a = (dir() / "files" / "motd").string();
  const auto b = (dir() / "files" / "hello.txt").string();
  fs::create_directories(dir() / "files");
  auto d = declare("web-01", file_declaration({{a, "hello\n"}, {b, "world\n"}}, "0640"));
  EXPECT_EQ(d.get_int("revision", 0), 1);
  auto rep = report(d.get_int("delivery", 0), "20s");
  ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json();
  EXPECT_EQ(rep.get_int("declared", 0), 1);
  EXPECT_EQ(count(rep, "failed"), 0u);
  EXPECT_EQ(count(rep, "outstanding"), 0u);
  EXPECT_EQ(rep.find("applied")->as_array()[0].get_string("node"), "web-01");
  EXPECT_EQ(read_text(a), "hello\n");
  EXPECT_EQ(read_text(b), "world\n");
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);

  auto text = mesh({"report", std::to_string(d.get_int("delivery", 0))});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("applied      1 of 1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("delivered"), std::string::npos) << text.out;
}

TEST_F(FirstDeliveryTest, StoppedHostIsOutstandingWithLastContactThenCatchesUp) {
  Host& h = add_host("web-02");
  start_host(h);
  const auto f = (dir() / "f.txt").string();
  auto d1 = declare("web-02", file_declaration({{f, "one\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  ASSERT_EQ(h.proc->stop(SIGTERM, 3000), 0) << "SIGTERM must stop the host cleanly within a second";

  auto d2 = declare("web-02", file_declaration({{f, "two\n"}}));
  auto rep = report(d2.get_int("delivery", 0));
  ASSERT_EQ(count(rep, "outstanding"), 1u) << rep.to_json();
  const auto& out = rep.find("outstanding")->as_array()[0];
  EXPECT_EQ(out.get_string("node"), "web-02");
  EXPECT_TRUE(out.find("last_contact") && out.find("last_contact")->is_string()) << rep.to_json();
  auto text = mesh({"report", std::to_string(d2.get_int("delivery", 0))});
  EXPECT_EQ(text.exit_code, 0) << "outstanding alone is not failure";
  EXPECT_NE(text.out.find("outstanding  1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("web-02 last seen"), std::string::npos) << text.out;
  auto strict = mesh({"report", std::to_string(d2.get_int("delivery", 0)), "--fail-on-outstanding"});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_EQ(read_text(f), "one\n");

  start_host(h);
  auto after = report(d2.get_int("delivery", 0), "20s");
  EXPECT_EQ(count(after, "applied"), 1u) << after.to_json();
  EXPECT_EQ(read_text(f), "two\n");
}

TEST_F(FirstDeliveryTest, FileThatCannotBeWrittenIsReportedFailedWithResourceAndReason) {
  Host& h = add_host("web-03");
  start_host(h);
  const auto good = (dir() / "good.txt").string();
  write_text(dir() / "not-a-dir", "plain file\n");
  const auto bad = (dir() / "not-a-dir" / "x.conf").string();
  const auto later = (dir() / "later.txt").string();
  auto d = declare("web-03", file_declaration({{good, "ok\n"}, {bad, "never\n"}, {later, "not attempted\n"}}));
  auto rep = report(d.get_int("delivery", 0), "20s");
  ASSERT_EQ(count(rep, "failed"), 1u) << rep.to_json();
  const auto& failed = rep.find("failed")->as_array()[0];
  EXPECT_EQ(failed.get_string("resource"), "file:" + bad);
  EXPECT_FALSE(failed.get_string("reason").empty());
  EXPECT_FALSE(fs::exists(later)) << "resources after a failure are not attempted";
  auto text = mesh({"report", std::to_string(d.get_int("delivery", 0))});
  EXPECT_EQ(text.exit_code, 1) << text.out;
  EXPECT_NE(text.out.find("failed       1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("file:" + bad), std::string::npos) << text.out;
}

TEST_F(FirstDeliveryTest, DroppedResourceIsPrunedAndBadInputChangesNothing) {
  Host& h = add_host("web-04");
  start_host(h);
  const auto a = (dir() / "a.txt").string();
  const auto b = (dir() / "b.txt").string();
  auto d1 = declare("web-04", file_declaration({{a, "a\n"}, {b, "b\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  auto d2 = declare("web-04", file_declaration({{a, "a2\n"}}));
  ASSERT_EQ(count(report(d2.get_int("delivery", 0), "20s"), "applied"), 1u);
  EXPECT_EQ(read_text(a), "a2\n");
  EXPECT_FALSE(fs::exists(b)) << "a resource dropped from the declaration is removed";

  // Malformed JSON, an unknown node, a declaration carrying a revision: exit 2, nothing stored.
  write_text(dir() / "broken.json", "{\"resources\": [");
  auto r1 = mesh({"declare", "web-04", (dir() / "broken.json").string()});
  EXPECT_EQ(r1.exit_code, 2);
  EXPECT_NE(r1.err.find("broken.json"), std::string::npos) << r1.err;
  write_text(dir() / "ok.json", file_declaration({{a, "x\n"}}));
  auto r2 = mesh({"declare", "nobody", (dir() / "ok.json").string()});
  EXPECT_EQ(r2.exit_code, 2) << r2.err;
  write_text(dir() / "rev.json", "{\"revision\": 9, \"resources\": []}");
  auto r3 = mesh({"declare", "web-04", (dir() / "rev.json").string()});
  EXPECT_EQ(r3.exit_code, 2) << r3.err;
  auto hist = mesh({"history", "web-04", "--output", "json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  EXPECT_EQ(json(hist.out).as_array().size(), 2u) << hist.out;
  EXPECT_EQ(read_text(a), "a2\n");
}

// Until decision record 48 the host reported such a revision failed; now the control plane knows
// the briefed node's providers and refuses the declaration before storing it.
TEST_F(FirstDeliveryTest, UnknownResourceTypeIsRefusedAtDeclareForABriefedNode) {
  Host& h = add_host("web-05");
  start_host(h);
  write_text(dir() / "fiel.json", R"({"resources":[{"type":"fiel","id":"/x","properties":{}}]})");
  auto r = mesh({"declare", "web-05", (dir() / "fiel.json").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("unknown resource type 'fiel' (node web-05's providers: file)"), std::string::npos) << r.err;
  auto hist = mesh({"history", "web-05", "--output", "json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  EXPECT_TRUE(json(hist.out).as_array().empty()) << hist.out;
}

}  // namespace
}  // namespace mesh::itest
