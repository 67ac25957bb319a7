// `mesh report --output junit` from real processes, checked as a CI system reads it: valid
// against tests/reports/junit.xsd (xmllint --schema) and its counts agreeing with its elements,
// for an applied, a failed and an outstanding node (tests/reports/junit_checks.h).
#include <csignal>
#include <cstdio>

#include "../reports/junit_checks.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using JunitCiTest = MeshTest;
using mesh::testing::junit::Checked;
using mesh::testing::junit::expect_ci_readable;

TEST_F(JunitCiTest, EveryOutcomeFromRealHostsIsWhatCiSystemsRead) {
  Host& ok = add_host("ci-01");
  Host& bad = add_host("ci-02");
  Host& away = add_host("ci-03");
  start_host(ok);
  start_host(bad);
  start_host(away);
  fs::create_directories(dir() / "files");
  write_text(dir() / "not-a-dir", "plain file\n");

  const auto applied = declare("ci-01", file_declaration({{(dir() / "files" / "a").string(), "a\n"}}));
  const auto failed = declare("ci-02", file_declaration({{(dir() / "not-a-dir" / "x.conf").string(), "x\n"}}));
  const auto first = declare("ci-03", file_declaration({{(dir() / "files" / "c").string(), "one\n"}}));
  for (const auto* d : {&applied, &failed, &first}) {
    auto r = mesh({"report", std::to_string(d->get_int("delivery", 0)), "--wait", "20s", "--output", "json"});
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
    ASSERT_TRUE(json(r.out).find("outstanding")->as_array().empty()) << r.out;
  }
  ASSERT_EQ(away.proc->stop(SIGTERM, 3000), 0);
  const auto outstanding = declare("ci-03", file_declaration({{(dir() / "files" / "c").string(), "two\n"}}));

  struct Case {
    const char* what;
    std::int64_t delivery;
    int exit_code;
    const char* outcome_path;  // the element the node's testcase holds, "" for a pass
  } cases[] = {
      {"applied", applied.get_int("delivery", 0), 0, ""},
      {"failed", failed.get_int("delivery", 0), 1, "failure"},
      {"outstanding", outstanding.get_int("delivery", 0), 0, "skipped"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = mesh({"report", std::to_string(c.delivery), "--output", "junit"});
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    expect_ci_readable(r.out, c.what);
    Checked x(r.out);
    EXPECT_EQ(x.xpath("count(//testcase)"), "1") << r.out;
    EXPECT_EQ(x.xpath("count(//testcase/*)"), std::string(*c.outcome_path ? "1" : "0")) << r.out;
    if (*c.outcome_path) {
      EXPECT_EQ(x.xpath("count(//testcase/" + std::string(c.outcome_path) + ")"), "1") << r.out;
    }
    // A testcase's time: from the delivery's write to the control plane's receipt of the node's
    // report, in milliseconds as the report data gives them (`at_ms`); 0 for an outstanding node.
    const sdk::Value data = json(mesh({"report", std::to_string(c.delivery), "--output", "json"}).out);
    ASSERT_TRUE(data.find("at_ms") && data.find("at_ms")->is_int()) << data.to_json();
    std::string want = "0.000";
    for (const char* list : {"applied", "failed"})
      for (const auto& e : data.find(list)->as_array()) {
        ASSERT_TRUE(e.find("at_ms") && e.find("at_ms")->is_int()) << data.to_json();
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f",
                      static_cast<double>(e.get_int("at_ms", 0) - data.get_int("at_ms", 0)) / 1000.0);
        want = buf;
      }
    EXPECT_EQ(x.xpath("//testcase/@time"), want) << r.out << data.to_json();
    EXPECT_EQ(x.xpath("//testsuite/@time"), want) << r.out;
  }
}

}  // namespace
}  // namespace mesh::itest
