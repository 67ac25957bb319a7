// `mesh report --output NAME` against real processes: the report plugins (text, json, junit)
// render what the control plane answered; JUnit checked with xmllint (well-formed, and the
// elements and attributes CI systems read); an unknown name is refused before anything is sent.
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using ReportOutputTest = MeshTest;

/// xmllint on `xml`: `lint` is --noout's exit code; xpath() an expression's string value.
struct XmlFile {
  fs::path file;
  int lint = -1;
  XmlFile(const fs::path& path, const std::string& xml) : file(path) {
    write_text(file, xml);
    lint = mesh::testing::run_process({"xmllint", "--noout", file.string()}).exit_code;
  }
  std::string xpath(const std::string& expr) const {
    auto r = mesh::testing::run_process({"xmllint", "--xpath", "string(" + expr + ")", file.string()});
    if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  }
};

TEST_F(ReportOutputTest, AppliedFailedAndOutstandingInEveryOutput) {
  Host& ok = add_host("rep-01");
  Host& bad = add_host("rep-02");
  Host& away = add_host("rep-03");
  start_host(ok);
  start_host(bad);
  start_host(away);
  fs::create_directories(dir() / "files");
  write_text(dir() / "not-a-dir", "plain file\n");

  auto applied = declare("rep-01", file_declaration({{(dir() / "files" / "a").string(), "a\n"}}));
  auto failed = declare("rep-02", file_declaration({{(dir() / "not-a-dir" / "x.conf").string(), "x\n"}}));
  auto first = declare("rep-03", file_declaration({{(dir() / "files" / "c").string(), "one\n"}}));
  ASSERT_EQ(count(report(applied.get_int("delivery", 0), "20s"), "applied"), 1u);
  ASSERT_EQ(count(report(failed.get_int("delivery", 0), "20s"), "failed"), 1u);
  ASSERT_EQ(count(report(first.get_int("delivery", 0), "20s"), "applied"), 1u);
  ASSERT_EQ(away.proc->stop(SIGTERM, 3000), 0);
  auto outstanding = declare("rep-03", file_declaration({{(dir() / "files" / "c").string(), "two\n"}}));
  const std::string d_ok = std::to_string(applied.get_int("delivery", 0));
  const std::string d_bad = std::to_string(failed.get_int("delivery", 0));
  const std::string d_away = std::to_string(outstanding.get_int("delivery", 0));

  // text: the report as `mesh report` has always printed it (the default output).
  auto text = mesh({"report", d_ok});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("delivery " + d_ok + " (", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("\ndelivered    declaration updated for 1 node\napplied      1 of 1\n"), std::string::npos)
      << text.out;
  EXPECT_EQ(mesh({"report", d_ok, "--output", "text"}).out, text.out);

  // json: the reply as it came, the same document the fixture reads.
  auto js = mesh({"report", d_bad, "--output", "json"});
  EXPECT_EQ(js.exit_code, 1) << "a failed node exits 1 whatever the output";
  EXPECT_EQ(json(js.out).find("failed")->as_array()[0].get_string("node"), "rep-02");

  // junit: one testsuite per delivery, one testcase per node.
  auto x_ok = mesh({"report", d_ok, "--output", "junit"});
  EXPECT_EQ(x_ok.exit_code, 0);
  XmlFile a(dir() / "ok.xml", x_ok.out);
  ASSERT_EQ(a.lint, 0) << x_ok.out;
  EXPECT_EQ(a.xpath("count(/testsuites/testsuite)"), "1");
  EXPECT_EQ(a.xpath("/testsuites/testsuite/@name"), "delivery " + d_ok);
  EXPECT_EQ(a.xpath("/testsuites/testsuite/@tests"), "1");
  EXPECT_EQ(a.xpath("/testsuites/testsuite/@failures"), "0");
  EXPECT_EQ(a.xpath("/testsuites/testsuite/@skipped"), "0");
  EXPECT_NE(a.xpath("/testsuites/testsuite/@time"), "");
  EXPECT_EQ(a.xpath("/testsuites/testsuite/testcase/@name"), "rep-01");
  EXPECT_EQ(a.xpath("/testsuites/testsuite/testcase/@classname"), "mesh.delivery." + d_ok);
  EXPECT_NE(a.xpath("/testsuites/testsuite/testcase/@time"), "");
  EXPECT_EQ(a.xpath("count(//testcase/*)"), "0") << "applied = passed";

  auto x_bad = mesh({"report", d_bad, "--output", "junit"});
  EXPECT_EQ(x_bad.exit_code, 1);
  XmlFile b(dir() / "bad.xml", x_bad.out);
  ASSERT_EQ(b.lint, 0) << x_bad.out;
  EXPECT_EQ(b.xpath("/testsuites/@failures"), "1");
  EXPECT_EQ(b.xpath("//testcase[@name='rep-02']/failure/@type"), "failed");
  const std::string message = b.xpath("//testcase[@name='rep-02']/failure/@message");
  EXPECT_EQ(message.rfind("file:" + (dir() / "not-a-dir" / "x.conf").string() + ": ", 0), 0u)
      << "the resource, then the reason: " << message;

  auto x_away = mesh({"report", d_away, "--output", "junit"});
  EXPECT_EQ(x_away.exit_code, 0) << "outstanding is not failure";
  XmlFile c(dir() / "away.xml", x_away.out);
  ASSERT_EQ(c.lint, 0) << x_away.out;
  EXPECT_EQ(c.xpath("/testsuites/testsuite/@skipped"), "1");
  EXPECT_EQ(c.xpath("//testcase[@name='rep-03']/skipped/@message").rfind("outstanding: last seen ", 0), 0u)
      << x_away.out;
  EXPECT_EQ(mesh({"report", d_away, "--output", "junit", "--fail-on-outstanding"}).exit_code, 1);

  // An unknown output is bad usage, with the installed plugins listed.
  auto unknown = mesh({"report", d_ok, "--output", "markdown"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no report plugin 'markdown'"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("json, junit, text"), std::string::npos) << unknown.err;
  EXPECT_EQ(unknown.out, "");
}

}  // namespace
}  // namespace mesh::itest
