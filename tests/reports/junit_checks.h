// Checks of a JUnit document against what CI systems read, shared by the report plugins' unit
// tests and the end-to-end ones: `xmllint --schema tests/reports/junit.xsd`, then XPath checks
// that every count attribute agrees with the elements it counts (which XSD 1.0 cannot say), that
// no suite names a node twice and that no case takes longer than its suite. Needs xmllint
// (libxml2-utils) and MESH_TEST_SOURCE_DIR.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"

namespace mesh::testing::junit {

inline std::string schema_path() { return std::string(MESH_TEST_SOURCE_DIR) + "/tests/reports/junit.xsd"; }

struct Checked {
  TempDir dir;
  std::string file;
  std::string xml;
  explicit Checked(std::string text) : file((dir.path() / "report.xml").string()), xml(std::move(text)) {
    std::ofstream(file, std::ios::binary) << xml;
  }
  ProcessResult validate() const { return run_process({"xmllint", "--noout", "--schema", schema_path(), file}); }
  std::string xpath(const std::string& expr) const {
    auto r = run_process({"xmllint", "--xpath", "string(" + expr + ")", file});
    if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  }
  /// One XPath 1.0 boolean, evaluated by xmllint: "true" or "false".
  std::string holds(const std::string& expr) const { return xpath("boolean(" + expr + ")"); }
};

// The checks every JUnit document of ours must pass. `what` names the fixture in failures, which
// show the first 4 KB of the document.
inline void expect_ci_readable(const std::string& document, const std::string& what) {
  const std::string xml = document.substr(0, 4096);
  Checked c(document);
  auto v = c.validate();
  ASSERT_EQ(v.exit_code, 0) << what << ": not valid against junit.xsd:\n" << v.err << "\n" << xml;
  // Each suite's counts are its cases' outcomes.
  for (const char* attr_and_path : {"tests|testcase", "failures|testcase/failure", "errors|testcase/error",
                                    "skipped|testcase/skipped"}) {
    const std::string s = attr_and_path;
    const std::string attr = s.substr(0, s.find('|')), path = s.substr(s.find('|') + 1);
    EXPECT_EQ(c.holds("count(/testsuites/testsuite[@" + attr + " != count(" + path + ")]) = 0"), "true")
        << what << ": a testsuite's " << attr << " is not the count of its " << path << "\n" << xml;
    // And the root's are the sums of its suites'.
    EXPECT_EQ(c.holds("/testsuites/@" + attr + " = sum(/testsuites/testsuite/@" + attr + ")"), "true")
        << what << ": testsuites/@" << attr << " is not the sum over its suites\n" << xml;
    EXPECT_EQ(c.holds("/testsuites/@" + attr + " = count(/testsuites/testsuite/" + path + ")"), "true")
        << what << ": testsuites/@" << attr << " is not the count of " << path << "\n" << xml;
  }
  // One case per node in a suite (CI systems merge or drop cases of the same name).
  EXPECT_EQ(c.holds("count(//testcase[@name = preceding-sibling::testcase/@name]) = 0"), "true")
      << what << ": a suite names a node twice\n" << xml;
  // A case's time never exceeds its suite's (suites run their cases at once, from the delivery).
  EXPECT_EQ(c.holds("count(//testsuite[testcase/@time > @time]) = 0"), "true")
      << what << ": a case takes longer than its suite\n" << xml;
}

}  // namespace mesh::testing::junit
