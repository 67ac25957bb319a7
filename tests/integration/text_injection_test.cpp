// Values from outside in logs and on the operator's terminal: a node's signed report whose
// `resource` and `reason` hold newlines, ANSI escapes, NUL and 900 KB must not forge log lines
// on the control plane nor reach `mesh node show`'s text output raw (common::printable).
#include <chrono>

#include "mesh/common/crypto.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;
using TextInjectionTest = MeshTest;

TEST_F(TextInjectionTest, AReportsValuesAreEscapedInTheControlLogAndInNodeShow) {
  Host& h = add_host("inj-01");
  // A declared revision (the host is not running: the report below is the only one).
  declare("inj-01", file_declaration({{(dir() / "x").string(), "x\n"}}));
  std::string key = read_text(h.state / "node.key");
  while (!key.empty() && key.back() == '\n') key.pop_back();

  const std::string forged_line = "\n2026-12-01T00:00:00.000+00:00 info mesh-control report node=web-09 revision=7 "
                                  "outcome=applied recorded=true";
  sdk::Value report = sdk::Value::object();
  report.set("node", "inj-01");
  report.set("revision", 1);
  report.set("at", "2026-11-29T07:00:01Z");
  report.set("outcome", "failed");
  report.set("resource", "file:/tmp/a\x1b]0;owned\x07" + forged_line + std::string(1, '\0') + "\x1b[2J");
  report.set("reason", "boom\r\n\x1b[31mred" + forged_line + std::string(900 * 1024, 'z'));
  report.set("owned", sdk::Value::array());
  BrokerClient raw(nats_->url());
  ASSERT_TRUE(raw.connected);
  auto m = protocol::make_message(protocol::report_subject("inj-01"), report.to_json());
  trust::sign_report(m, *common::from_hex(key));
  auto r = raw->request(m, 10s);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_NE(r->body.find("\"recorded\":true"), std::string::npos) << r->body;

  // The control plane's log: one line for the event, nothing forged, nothing raw, bounded.
  ASSERT_TRUE(eventually([&] { return control_->stderr_text().find("report node=inj-01") != std::string::npos; }, 5000));
  const std::string log = control_->stderr_text();
  EXPECT_EQ(log.find("\x1b"), std::string::npos);
  EXPECT_EQ(log.find('\0'), std::string::npos);
  EXPECT_EQ(log.find("\ninfo mesh-control report node=web-09"), std::string::npos);
  std::size_t longest = 0, start = 0;
  for (std::size_t nl; (nl = log.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = log.substr(start, nl - start);
    longest = std::max(longest, line.size());
    if (line.find("node=web-09") != std::string::npos) {
      EXPECT_NE(line.find("report node=inj-01"), std::string::npos) << "a forged line: " << line;
    }
  }
  EXPECT_LT(longest, 4096u);

  // `mesh node show`: no ESC, NUL or line of the value's own on the terminal; JSON stays exact.
  auto text = mesh({"node", "show", "inj-01"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find('\0'), std::string::npos);
  EXPECT_EQ(text.out.find('\r'), std::string::npos);
  EXPECT_EQ(text.out.find("\n2026-12-01T00:00:00.000"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("file:/tmp/a\\x1b]0;owned\\x07\\n2026-12-01"), std::string::npos) << text.out;
  auto js = mesh({"node", "show", "inj-01", "--output", "json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  auto v = json(js.out);
  ASSERT_FALSE(v.find("applies")->as_array().empty());
  EXPECT_EQ(v.find("applies")->as_array()[0].get_string("resource"), report.get_string("resource"));
}

}  // namespace
}  // namespace mesh::itest
