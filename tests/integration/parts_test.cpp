// Messages larger than the broker's limit (docs/protocol.md "Messages in parts"), end to end
// against a nats-server started with max_payload 65536: a declaration, its report and its
// recovery copy all larger than that; corrupted, forged and oversize parts refused.
#include <gtest/gtest.h>

#include "mesh/common/crypto.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

namespace parts = protocol::parts;
constexpr std::size_t kMaxPayload = 65536;

class PartsTest : public MeshTest {
 public:
  void SetUp() override {
    const fs::path conf = dir() / "nats-small.conf";
    write_text(conf, "max_payload: " + std::to_string(kMaxPayload) + "\n");
    nats_ = std::make_unique<NatsServer>(std::vector<std::string>{"-c", conf.string()});
    start_control();
  }
};

TEST_F(PartsTest, DeclarationReportAndRecoveryCopyLargerThanTheBrokerLimitEndApplied) {
  constexpr int kFiles = 2500;
  const fs::path files = dir() / "files";
  fs::create_directories(files);
  std::vector<std::pair<std::string, std::string>> decl;
  for (int i = 0; i < kFiles; ++i) decl.emplace_back((files / ("file-" + std::to_string(i))).string(), "x\n");
  const std::string text = file_declaration(decl);
  ASSERT_GT(text.size(), 3 * kMaxPayload);

  Host& h = add_host("big-01");
  // Uploaded in parts (mesh declare), stored, pushed in parts (nobody listens yet).
  const sdk::Value d = declare("big-01", text);
  const std::int64_t delivery = d.get_int("delivery", 0);
  ASSERT_GT(delivery, 0);
  // The host starts afterwards: the latest reply comes in parts, its report goes in parts.
  start_host(h);
  const sdk::Value rep = report(delivery, "180s");
  ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json() << h.proc->stderr_text();
  EXPECT_TRUE(fs::exists(files / "file-0"));
  EXPECT_TRUE(fs::exists(files / ("file-" + std::to_string(kFiles - 1))));

  // The recovery copy is complete, and `mesh node show` (a reply larger than the limit) shows it.
  auto show = mesh({"node", "show", "big-01", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const sdk::Value view = json(show.out);
  ASSERT_TRUE(view.find("owned") && view.find("owned")->is_array()) << show.out.substr(0, 512);
  EXPECT_EQ(view.find("owned")->as_array().size(), static_cast<std::size_t>(kFiles));
  EXPECT_GT(show.out.size(), kMaxPayload);

  // A host that lost its state asks for its recovery copy: that reply comes in parts too.
  h.proc.reset();
  fs::remove(h.state / "state.json");
  start_host(h);
  ASSERT_TRUE(mesh::testing::eventually(
      [&] { return h.proc->stderr_text().find("declaration already applied") != std::string::npos ||
                   h.proc->stderr_text().find("apply done") != std::string::npos; },
      120000))
      << h.proc->stderr_text();
  ASSERT_TRUE(mesh::testing::eventually(
      [&] { return h.proc->stderr_text().find("recovery copy unavailable") == std::string::npos &&
                   h.proc->stderr_text().find("not trusted") == std::string::npos; },
      2000));
  EXPECT_EQ(control_->stderr_text().find("reply not sent"), std::string::npos) << control_->stderr_text();

  // A new revision pushed while the host runs: published in parts, reassembled by the host.
  for (auto& [path, content] : decl) content = "y\n";
  const sdk::Value d2 = declare("big-01", file_declaration(decl));
  const sdk::Value rep2 = report(d2.get_int("delivery", 0), "180s");
  ASSERT_EQ(count(rep2, "applied"), 1u) << rep2.to_json() << h.proc->stderr_text();
  EXPECT_EQ(read_text(files / "file-7"), "y\n");
}

/// A report in two parts, as a host would send it, but not signed (no host key here).
std::vector<sdk::Message> report_parts(const std::string& node) {
  std::string owned;
  for (int i = 0; i < 8000; ++i) owned += std::string(owned.empty() ? "" : ",") + "\"file:/f/" + std::to_string(i) + "\"";
  auto m = protocol::make_message(protocol::report_subject(node),
                                  "{\"node\":\"" + node + "\",\"revision\":1,\"outcome\":\"applied\",\"owned\":[" +
                                      owned + "]}");
  m.set_header(protocol::kHeaderNode, node);
  auto list = parts::split(m, kMaxPayload);
  if (!list) throw std::runtime_error(list.error().message);
  return *list;
}

std::string error_of(const sdk::Message& reply) {
  const std::string* status = reply.header(protocol::kHeaderStatus);
  if (!status || *status != "error") return "status " + (status ? *status : std::string("-"));
  return json(reply.body).find("error")->get_string("code") + ": " + json(reply.body).find("error")->get_string("message");
}

TEST_F(PartsTest, CorruptedForgedAndOversizePartsAreRefused) {
  add_host("web-01");
  BrokerClient client(nats_->url());
  ASSERT_TRUE(client.connected);

  // Corrupted: one byte of the second part changed. The whole does not match its digest.
  {
    auto list = report_parts("web-01");
    ASSERT_GE(list.size(), 2u);
    for (std::size_t i = 0; i + 1 < list.size(); ++i) {
      auto ack = client->request(list[i], std::chrono::seconds(5));
      ASSERT_TRUE(ack);
      ASSERT_EQ(*ack->header(protocol::kHeaderStatus), parts::kStatusPart);
    }
    auto last = list.back();
    last.body[last.body.size() / 2] ^= 0x01;
    auto reply = client->request(last, std::chrono::seconds(5));
    ASSERT_TRUE(reply);
    const std::string err = error_of(*reply);
    EXPECT_NE(err.find("permission_denied"), std::string::npos) << err;
    EXPECT_NE(err.find("Mesh-Parts-Digest"), std::string::npos) << err;
  }
  // Forged: parts that join correctly into a whole that is not signed by the node: refused by
  // the same proof check as any report, after reassembly and before parsing.
  {
    auto list = report_parts("web-01");
    sdk::Result<sdk::Message> reply = sdk::fail(sdk::ErrorCode::Internal, "not sent");
    for (const auto& p : list) reply = client->request(p, std::chrono::seconds(5));
    ASSERT_TRUE(reply);
    const std::string err = error_of(*reply);
    EXPECT_NE(err.find("permission_denied"), std::string::npos) << err;
  }
  // Oversize: a whole announced larger than limits.max_assembled is refused at its first part.
  {
    auto list = report_parts("web-01");
    auto first = list.front();
    first.set_header(parts::kHeaderPartsSize, std::to_string(std::size_t{1} << 30));
    auto reply = client->request(first, std::chrono::seconds(5));
    ASSERT_TRUE(reply);
    const std::string err = error_of(*reply);
    EXPECT_NE(err.find("invalid_argument"), std::string::npos) << err;
    EXPECT_NE(err.find("limits.max_assembled"), std::string::npos) << err;
    EXPECT_NE(err.find(std::to_string(parts::kDefaultMaxAssembled)), std::string::npos) << err;
  }
  // The control plane still works.
  EXPECT_EQ(mesh({"nodes"}).exit_code, 0);
}

TEST_F(PartsTest, AFloodOfJunkOperatorPartsDoesNotMakeANodesReportsInPartsBusy) {
  // Found by an attacker: 64 first parts on mesh.api.* (16 subjects, 4 each) filled the one
  // buffer of parts, so every other upload in parts was busy for 30 s.
  add_host("web-01");
  BrokerClient client(nats_->url());
  ASSERT_TRUE(client.connected);
  std::size_t busy = 0;
  for (int s = 0; s < 20; ++s) {
    for (int k = 0; k < 5; ++k) {
      auto junk = protocol::make_message(protocol::api_subject("junk" + std::to_string(s)), std::string(1000, 'j'));
      auto list = parts::split(protocol::make_message(junk.subject, std::string(200000, 'j')), kMaxPayload);
      ASSERT_TRUE(list);
      auto first = list->front();
      first.set_header(parts::kHeaderPartsId, "floodpartsid" + std::to_string(1000 + s * 10 + k));
      auto r = client->request(first, std::chrono::seconds(5));
      if (r && error_of(*r).find("transient") != std::string::npos) ++busy;
    }
  }
  EXPECT_GT(busy, 0u) << "the flood filled the operators' buffer";
  // An operator's upload in parts is busy meanwhile, and `mesh` says so as the control plane's
  // answer to a part, not as an untrusted reply (found by an attacker: "not trusted … someone
  // else may be answering" sent operators looking for an attacker).
  write_text(dir() / "big.json", file_declaration({{(dir() / "big.txt").string(), std::string(200000, 'b')}}));
  auto busy_declare = mesh({"declare", "web-01", (dir() / "big.json").string()});
  EXPECT_EQ(busy_declare.exit_code, 3) << busy_declare.out << busy_declare.err;
  EXPECT_NE(busy_declare.err.find("part 1 of"), std::string::npos) << busy_declare.err;
  EXPECT_EQ(busy_declare.err.find("not trusted"), std::string::npos) << busy_declare.err;
  // A node's report in parts still reaches the proof check (refused there: the test does not
  // sign it), not "busy".
  auto list = report_parts("web-01");
  sdk::Result<sdk::Message> reply = sdk::fail(sdk::ErrorCode::Internal, "not sent");
  for (const auto& p : list) reply = client->request(p, std::chrono::seconds(5));
  ASSERT_TRUE(reply);
  const std::string err = error_of(*reply);
  EXPECT_EQ(err.find("transient"), std::string::npos) << err;
  EXPECT_NE(err.find("permission_denied"), std::string::npos) << err;
}

}  // namespace
}  // namespace mesh::itest
