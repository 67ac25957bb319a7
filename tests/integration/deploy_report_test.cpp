// `mesh deploy --output NAME` against real processes: the deploy report printed through the report
// plugins (text, junit checked with xmllint), three hosts assigned by label, one of them stopped
// (outstanding, exit 0); an unknown --output is refused before the deploy is written.
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using DeployReportTest = MeshTest;

std::string xpath(const fs::path& file, const std::string& expr) {
  auto r = mesh::testing::run_process({"xmllint", "--xpath", "string(" + expr + ")", file.string()});
  if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  return r.out;
}

TEST_F(DeployReportTest, ThreeHostsOneOutstandingInTextAndJunit) {
  for (const char* name : {"ci-01", "ci-02", "ci-03"}) {
    Host& h = add_host(name);
    fs::create_directories(dir() / "files" / name);
    auto l = mesh({"node", "label", name, "role=web", "dir=" + (dir() / "files" / name).string()});
    ASSERT_EQ(l.exit_code, 0) << l.err;
    start_host(h);
  }
  const fs::path module = dir() / "web-1.json";
  write_text(module, R"({"module": "web", "version": "1.0", "resources": [{"type": "file",
    "id": "{{labels.dir}}/motd", "properties": {"content": "{{node.name}}\n", "mode": "0644"}}]})");
  ASSERT_EQ(mesh({"module", "push", module.string()}).exit_code, 0);
  ASSERT_EQ(mesh({"assign", "web", "role=web"}).exit_code, 0);
  ASSERT_EQ(hosts_["ci-03"].proc->stop(SIGTERM, 3000), 0);

  // An unknown output: bad usage before anything is written.
  auto unknown = mesh({"deploy", "web", "1.0", "--output", "nosuch"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("no report plugin 'nosuch'"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("json, junit, text"), std::string::npos) << unknown.err;
  EXPECT_EQ(json(mesh({"history", "ci-01", "--output", "json"}).out).as_array().size(), 0u) << "nothing written";

  auto x = mesh({"deploy", "web", "1.0", "--wait", "20s", "--output", "junit"});
  EXPECT_EQ(x.exit_code, 0) << "outstanding alone is not failure\n" << x.out << x.err;
  const fs::path file = dir() / "deploy.xml";
  write_text(file, x.out);
  ASSERT_EQ(mesh::testing::run_process({"xmllint", "--noout", file.string()}).exit_code, 0) << x.out;
  EXPECT_EQ(xpath(file, "count(/testsuites/testsuite)"), "1") << x.out;
  EXPECT_EQ(xpath(file, "/testsuites/testsuite/@tests"), "3") << x.out;
  EXPECT_EQ(xpath(file, "/testsuites/testsuite/@failures"), "0") << x.out;
  EXPECT_EQ(xpath(file, "/testsuites/testsuite/@skipped"), "1") << x.out;
  EXPECT_EQ(xpath(file, "//testcase[@name='ci-01']/@classname"), "mesh.deploy.web") << x.out;
  EXPECT_EQ(xpath(file, "count(//testcase[@name='ci-01']/*)"), "0") << "applied = passed\n" << x.out;
  EXPECT_EQ(xpath(file, "//testcase[@name='ci-03']/skipped/@message").rfind("outstanding: last seen ", 0), 0u)
      << x.out;

  auto text = mesh({"deploy", "--show", "1"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("deploy 1: module web 1.0 to role=web by ", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("applied      2 of 3\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("outstanding  1 — ci-03 last seen "), std::string::npos) << text.out;
  EXPECT_EQ(mesh({"deploy", "--show", "1", "--fail-on-outstanding"}).exit_code, 1);
}

}  // namespace
}  // namespace mesh::itest
