// Replies to operators' API requests, against a real nats-server with mesh-control's broker
// permissions: anyone holding the operators' broker user (shared by every operator) reads every
// operator's inbox, and with any operator identity (a reader's is enough) can make the control
// plane answer its own request into another operator's inbox. Such a reply — genuine, but for
// another request — must never be believed by `mesh` (decision record 31).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "mesh/common/clock.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/sdk/transport.h"
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using namespace std::chrono_literals;
using mesh::testing::eventually;

using ApiReplyTest = PermissionedMeshTest;

/// The attacker: connected as the operators' user (which may publish only mesh.api.> and read
/// every operator inbox) and holding a reader's identity. Each time the control plane answers one
/// of the victim's polls on `_INBOX.<id>.<n>`, it sends its own signed `report` request for
/// another delivery with the reply subject `_INBOX.<id>.<n+1>` — where the victim's next poll
/// (nats.c numbers a connection's requests in decimal) will wait — every 2 ms until the control
/// plane has answered that poll too: the control plane's genuine answer to the attacker's
/// request lands in the victim's inbox first.
class Injector {
 public:
  Injector(BrokerClient& client, trust::OperatorIdentity reader, std::int64_t delivery)
      : client_(client), reader_(std::move(reader)), delivery_(delivery) {
    auto sub = client_->subscribe("_INBOX.>", "", [this](sdk::Message&& m) {
      // The answers to its own requests land in the same inbox: only the victim's poll counts.
      auto v = common::parse_json(m.body);
      if (!v || v->get_int("delivery", 0) == delivery_) return;
      std::lock_guard lock(mu_);
      const auto dot = m.subject.rfind('.');
      if (dot == std::string::npos) return;
      const std::string last = m.subject.substr(dot + 1);
      if (last.empty() || last.size() > 18 || last.find_first_not_of("0123456789") != std::string::npos) return;
      const std::string next = m.subject.substr(0, dot + 1) + std::to_string(std::stoull(last) + 1);
      target_ = next;
    });
    if (!sub) throw std::runtime_error(sub.error().message);
    sub_ = std::move(*sub);
    (void)client_->flush(2s);
    thread_ = std::thread([this] {
      while (!stop_) {
        std::string to;
        {
          std::lock_guard lock(mu_);
          to = target_;
        }
        if (!to.empty()) {
          sdk::Value params = sdk::Value::object();
          params.set("delivery", delivery_);
          sdk::Message m = protocol::make_message(protocol::api_subject("report"), params.to_json());
          trust::sign_request(m, trust::kHeaderOperator, reader_.name, reader_.secret_key, common::now_ms());
          m.reply = to;
          if (client_->publish(m)) ++sent_;
        }
        std::this_thread::sleep_for(2ms);
      }
    });
  }
  ~Injector() {
    stop_ = true;
    thread_.join();
    sub_.reset();
  }
  std::uint64_t sent() const { return sent_; }

 private:
  BrokerClient& client_;
  trust::OperatorIdentity reader_;
  std::int64_t delivery_;
  std::unique_ptr<sdk::Subscription> sub_;
  std::mutex mu_;
  std::string target_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> sent_{0};
  std::thread thread_;
};

TEST_F(ApiReplyTest, AnAnswerToAnotherRequestPutInAnOperatorsInboxIsNotBelieved) {
  Host& h = enrolled_host("web-01");
  start_host(h);
  const auto f = (dir() / "motd").string();
  write_text(dir() / "one.json", file_declaration({{f, "one\n"}}));
  auto d1 = op({"declare", "web-01", (dir() / "one.json").string(), "--output", "json"});
  ASSERT_EQ(d1.exit_code, 0) << d1.err;
  const std::int64_t first = json(d1.out).get_int("delivery", 0);
  auto applied = op({"report", std::to_string(first), "--wait", "30s"});
  ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err << h.proc->stderr_text();
  ASSERT_NE(applied.out.find("applied      1 of 1"), std::string::npos) << applied.out;

  // The attacker has the operators' broker user and a reader's identity.
  auto add = op({"operator", "add", "nosy", "--role", "reader"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  auto reader = trust::parse_operator_identity(add.out, "nosy.identity");
  ASSERT_TRUE(reader) << reader.error().message;
  BrokerClient attacker(nats_->url(), {{"user", "mesh-operator"}, {"password_file", (dir() / "operator.pw").string()}});
  ASSERT_TRUE(attacker.connected) << attacker.connected.error().message;

  // A second delivery stays outstanding: its host is stopped.
  ASSERT_EQ(h.proc->stop(SIGTERM, 5000), 0);
  write_text(dir() / "two.json", file_declaration({{f, "two\n"}}));
  auto d2 = op({"declare", "web-01", (dir() / "two.json").string(), "--output", "json"});
  ASSERT_EQ(d2.exit_code, 0) << d2.err;
  const std::int64_t second = json(d2.out).get_int("delivery", 0);
  ASSERT_NE(second, first);

  // The victim waits for the second delivery; the attacker makes the control plane answer the
  // victim's next poll with the first delivery's report (genuine and signed, but for the
  // attacker's request).
  {
    Injector injector(attacker, *reader, first);
    auto victim = op({"report", std::to_string(second), "--wait", "25s"});
    // Since `mesh` waits for each answer on a fresh random inbox (messages in parts, decision
    // record 33) the next inbox cannot be predicted, so the reflected answer usually has nowhere
    // to land; when it does land, the signature bound to the victim's own request refuses it.
    // Either way the victim is never shown the other delivery's result.
    EXPECT_EQ(victim.out.find("applied      1 of 1"), std::string::npos) << victim.out;
    if (victim.exit_code == 1) {
      EXPECT_NE(victim.err.find("the reply to mesh.api.report is not trusted"), std::string::npos) << victim.err;
      EXPECT_NE(victim.err.find("not believed"), std::string::npos) << victim.err;
    } else {
      EXPECT_EQ(victim.exit_code, 0) << victim.out << victim.err;
      EXPECT_NE(victim.out.find("outstanding  1"), std::string::npos) << victim.out;
    }
  }

  // Without an attacker the victim still gets the truth: outstanding, exit 0.
  auto honest = op({"report", std::to_string(second)});
  EXPECT_EQ(honest.exit_code, 0) << honest.err;
  EXPECT_NE(honest.out.find("outstanding  1"), std::string::npos) << honest.out;
}

TEST_F(ApiReplyTest, AnIdentityWithoutTheControlKeyIsRefusedBeforeAnythingIsSent) {
  // The admin identity and identities made by `mesh operator add` pin the control key.
  auto admin = json(read_text(admin_identity()));
  const std::string key = admin.get_string("control_key");
  EXPECT_EQ(key + "\n", read_text(dir() / "control" / "control.pub"));
  auto add = op({"operator", "add", "ci", "--role", "reader"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_EQ(json(add.out).get_string("control_key"), key);
  const fs::path ci = dir() / "ci.identity";
  write_text(ci, add.out);
  fs::permissions(ci, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(op({"nodes"}, ci.string()).exit_code, 0);

  // Without it: refused locally (exit 2), saying what to do; with --control-key it works.
  sdk::Value old = json(add.out);
  old.erase("control_key");
  const fs::path bare = dir() / "old.identity";
  write_text(bare, old.to_json());
  fs::permissions(bare, fs::perms::owner_read | fs::perms::owner_write);
  auto refused = op({"nodes"}, bare.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("names no control plane key"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("control.pub"), std::string::npos) << refused.err;
  auto with_flag = op({"--control-key", (dir() / "control" / "control.pub").string(), "nodes"}, bare.string());
  EXPECT_EQ(with_flag.exit_code, 0) << with_flag.err;

  // A wrong key: the genuine replies do not verify, nothing is believed.
  auto wrong = op({"--control-key", std::string(64, 'a'), "nodes"}, bare.string());
  EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
  EXPECT_NE(wrong.err.find("is not trusted"), std::string::npos) << wrong.err;
}

}  // namespace
}  // namespace mesh::itest
