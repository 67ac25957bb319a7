// The markdown renderer on the two report shapes (docs/reports.md of Nox Mesh).
#include <gtest/gtest.h>

#include "markdown_report.h"

namespace example {
namespace {

using mesh::sdk::Value;

Value entry(std::initializer_list<std::pair<const char*, Value>> fields) {
  Value v = Value::object();
  for (const auto& [k, x] : fields) v.set(k, x);
  return v;
}

constexpr std::int64_t kNow = 1795935600000 + 10 * 60 * 1000;  // 2026-11-29T07:10:00Z

TEST(MarkdownReportTest, DeliveryReportIsATableOfNodes) {
  Value r = Value::object();
  r.set("delivery", 17);
  r.set("declared", 3);
  r.set("applied", Value(Value::Array{entry({{"node", Value("web-01")}, {"revision", Value(43)}})}));
  r.set("failed", Value(Value::Array{entry({{"node", Value("web-02")}, {"resource", Value("file:/etc/x")},
                                              {"reason", Value("a | b")}, {"code", Value()}})}));
  r.set("outstanding", Value(Value::Array{entry({{"node", Value("web-04")},
                                                   {"last_contact", Value("2026-11-29T07:06:00Z")},
                                                   {"age_s", Value(240)}})}));
  EXPECT_EQ(render_markdown(r, kNow),
            "## Delivery 17\n\n"
            "Declaration updated for 3 nodes: **1 of 3 applied**.\n\n"
            "| node | outcome | detail |\n|---|---|---|\n"
            "| web-01 | applied | revision 43 |\n"
            "| web-02 | **failed** | file:/etc/x: a \\| b |\n"
            "| web-04 | outstanding | last seen 4 minutes ago (2026-11-29T07:06:00Z) |\n");
}

TEST(MarkdownReportTest, DeployReportShowsSkippedNotWrittenAndTheHalt) {
  Value r = Value::object();
  r.set("deploy", 4);
  r.set("module", "web");
  r.set("version", "1.4.2");
  r.set("declared", 1);
  r.set("failed", Value(Value::Array{entry({{"node", Value("web-01")}, {"resource", Value("package:nginx")},
                                              {"reason", Value("404")}})}));
  r.set("skipped", Value(Value::Array{entry({{"node", Value("web-09")}, {"reason", Value("ineligible: disk")}})}));
  r.set("waves", Value(Value::Array{entry({{"wave", Value(1)}, {"delivery", Value(17)},
                                             {"nodes", Value(Value::Array{Value("web-01")})}}),
                                      entry({{"wave", Value(2)}, {"delivery", Value()},
                                             {"nodes", Value(Value::Array{Value("web-02")})}})}));
  r.set("halted", entry({{"wave", Value(1)}, {"node", Value("web-01")}, {"reason", Value("package:nginx: 404")}}));
  const std::string md = render_markdown(r, kNow);
  EXPECT_EQ(md.rfind("## Deploy 4: web 1.4.2\n", 0), 0u) << md;
  EXPECT_NE(md.find("| web-09 | skipped | ineligible: disk |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| web-02 | not written | wave 2 |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\n**Halted at wave 1** by web-01: package:nginx: 404\n"), std::string::npos) << md;
}

TEST(MarkdownReportTest, NotAnObjectIsInvalidArgument) {
  mesh::sdk::HostContext host;
  MarkdownReport plugin(host);
  auto r = plugin.render(Value("x"), kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, mesh::sdk::ErrorCode::InvalidArgument);
}

}  // namespace
}  // namespace example
