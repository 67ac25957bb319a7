// Rotating the control plane's signing key (docs/decisions/0098) against real processes:
// nats-server, mesh-control (sqlite), two mesh-host daemons and the mesh CLI. `mesh-control
// rotate-key` makes a new key endorsed by the old one; a running host pins it from the next
// declaration, a host stopped through one or more rotations pins it from its latest reply when it
// starts, both keep the pin across a restart, `mesh` follows it into the operator identity, and a
// forged chain (or a message in the old key once the new one is pinned) is refused, logged and
// pins nothing.
#include "mesh_fixture.h"

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/key_rotation.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"

namespace mesh::itest {
namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class KeyRotationTest : public MeshTest {
 protected:
  ProcessResult rotate_key() {
    return mesh::testing::run_process(
        {bin("mesh-control"), "rotate-key", "--config", (dir() / "control.toml").string()}, {}, 60000);
  }
  /// The key the control plane signs with now (control.pub, hex).
  std::string control_pub() const { return trimmed(read_text(dir() / "control" / "control.pub")); }
  /// The key a host pinned (identity.json's control_key, hex).
  static std::string pinned(const Host& h) { return json(read_text(h.state / "identity.json")).get_string("control_key"); }
  void restart_control() {
    control_.reset();
    start_control();
  }
  /// Rotates and restarts the control plane; returns the new key (hex).
  std::string rotate_and_restart() {
    const std::string before = control_pub();
    auto r = rotate_key();
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string after = control_pub();
    EXPECT_NE(r.out.find(before + " -> " + after), std::string::npos) << r.out;
    EXPECT_NE(before, after);
    restart_control();
    return after;
  }
  std::int64_t deploy(const std::string& node, const std::string& path, const std::string& content) {
    return declare(node, file_declaration({{path, content}})).get_int("delivery", 0);
  }
  static std::size_t occurrences(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
    return n;
  }
};

TEST_F(KeyRotationTest, ARunningAndAStoppedHostFollowRotationsAndKeepThePin) {
  Host& a = add_host("web-a");
  Host& b = add_host("web-b");
  start_host(a);
  start_host(b);
  fs::create_directories(dir() / "files");
  const auto fa = (dir() / "files" / "a").string();
  const auto fb = (dir() / "files" / "b").string();
  ASSERT_EQ(count(report(deploy("web-a", fa, "a1\n"), "20s"), "applied"), 1u);
  ASSERT_EQ(count(report(deploy("web-b", fb, "b1\n"), "20s"), "applied"), 1u);
  const std::string k0 = control_pub();
  EXPECT_EQ(pinned(a), k0);
  EXPECT_EQ(pinned(b), k0);

  // B is stopped through two rotations; A runs through both.
  b.proc.reset();
  const std::string k1 = rotate_and_restart();
  // `mesh` (start_control's `mesh nodes`) followed the chain into the admin identity.
  EXPECT_EQ(json(read_text(admin_identity())).get_string("control_key"), k1);

  ASSERT_EQ(count(report(deploy("web-a", fa, "a2\n"), "20s"), "applied"), 1u);
  EXPECT_EQ(read_text(fa), "a2\n");
  EXPECT_EQ(pinned(a), k1);
  EXPECT_TRUE(a.proc->wait_for_output("control key rotated node=web-a old_key=" + k0 + " new_key=" + k1 + " steps=1", 5000))
      << a.proc->stderr_text();

  const std::string k2 = rotate_and_restart();
  ASSERT_EQ(count(report(deploy("web-a", fa, "a3\n"), "20s"), "applied"), 1u);
  EXPECT_EQ(pinned(a), k2);
  EXPECT_TRUE(a.proc->wait_for_output("old_key=" + k1 + " new_key=" + k2 + " steps=1", 5000)) << a.proc->stderr_text();

  // Declared while B is stopped; B learns it (and the key) from its latest reply when it starts.
  const std::int64_t db = deploy("web-b", fb, "b2\n");
  EXPECT_EQ(pinned(b), k0);
  start_host(b);
  ASSERT_EQ(count(report(db, "30s"), "applied"), 1u);
  EXPECT_EQ(read_text(fb), "b2\n");
  EXPECT_EQ(pinned(b), k2);
  EXPECT_TRUE(b.proc->wait_for_output("control key rotated node=web-b old_key=" + k0 + " new_key=" + k2 + " steps=2", 5000))
      << b.proc->stderr_text();

  // Accepted once: later messages verify with the pinned key, nothing is rotated again.
  ASSERT_EQ(count(report(deploy("web-b", fb, "b3\n"), "20s"), "applied"), 1u);
  EXPECT_EQ(occurrences(b.proc->stderr_text(), "control key rotated"), 1u) << b.proc->stderr_text();

  // A restarted host keeps the new pin (and needs no chain walk for it).
  a.proc.reset();
  start_host(a);
  ASSERT_EQ(count(report(deploy("web-a", fa, "a4\n"), "30s"), "applied"), 1u);
  EXPECT_EQ(read_text(fa), "a4\n");
  EXPECT_EQ(pinned(a), k2);
  EXPECT_EQ(a.proc->stderr_text().find("control key rotated"), std::string::npos) << a.proc->stderr_text();

  // Heartbeats (MAC keys derived from control.key, not from the signing key) still count, with
  // no re-enrolment: the node's last contact keeps advancing.
  auto last_contact = [&] {
    auto r = mesh({"nodes", "--output", "json"});
    const sdk::Value v = json(r.out);
    const sdk::Value* list = v.is_array() ? &v : v.find("nodes");
    if (list && list->is_array())
      for (const auto& n : list->as_array())
        if (n.get_string("name") == "web-b") return n.get_string("last_contact");
    return std::string();
  };
  const std::string seen = last_contact();
  EXPECT_FALSE(seen.empty());
  EXPECT_TRUE(mesh::testing::eventually([&] { return last_contact() != seen; }, 20000)) << seen;
}

TEST_F(KeyRotationTest, AForgedChainOrTheOldKeyIsRefusedAndNothingIsPinned) {
  Host& a = add_host("web-a");
  start_host(a);
  fs::create_directories(dir() / "files");
  const auto fa = (dir() / "files" / "a").string();
  ASSERT_EQ(count(report(deploy("web-a", fa, "a1\n"), "20s"), "applied"), 1u);
  const std::string k0_hex = control_pub();
  const std::string k0 = *common::from_hex(k0_hex);

  BrokerClient attacker(nats_->url());
  ASSERT_TRUE(attacker.connected) << attacker.connected.error().message;
  auto forged_declaration = [&](const common::KeyPair& signer, const std::vector<common::KeyRotation>& chain,
                                std::uint64_t revision, const std::string& content) {
    const std::string body = file_declaration({{fa, content}});
    auto m = protocol::make_message(protocol::decl_subject("web-a"), body);
    m.set_header(protocol::kHeaderNode, "web-a");
    m.set_header(protocol::kHeaderRevision, std::to_string(revision));
    m.set_header(protocol::kHeaderDigest, common::sha256_hex(body));
    trust::sign_declaration(m, "web-a", revision, signer.secret_key);
    if (!chain.empty()) m.set_header(common::kHeaderKeyChain, common::key_chain_header(chain));
    ASSERT_TRUE(attacker->publish(m));
    ASSERT_TRUE(attacker->flush(std::chrono::seconds(2)));
  };

  // A statement naming the pinned key as old, but signed by a random key instead of it.
  const auto thief = common::generate_keypair();
  const auto other = common::generate_keypair();
  auto forged = common::make_key_rotation(other, thief, common::now_ms());
  forged.old_key = k0;
  forged_declaration(thief, {forged}, 50, "forged\n");
  EXPECT_TRUE(a.proc->wait_for_output("control key rotation refused node=web-a", 10000)) << a.proc->stderr_text();
  EXPECT_TRUE(a.proc->wait_for_output("the old key's signature does not verify", 5000)) << a.proc->stderr_text();

  // A well-signed chain of another key pair that never names the pinned key.
  forged_declaration(thief, {common::make_key_rotation(other, thief, common::now_ms())}, 51, "forged\n");
  EXPECT_TRUE(a.proc->wait_for_output("no statement of the chain names the pinned key " + k0_hex, 10000))
      << a.proc->stderr_text();
  EXPECT_EQ(pinned(a), k0_hex);
  EXPECT_EQ(read_text(fa), "a1\n");
  EXPECT_EQ(a.proc->stderr_text().find("control key rotated"), std::string::npos) << a.proc->stderr_text();

  // A genuine rotation; then the old key (control.key's, as a thief of it would hold it) with the
  // genuine chain replayed: the host now pins the new key and refuses it.
  const std::string k1 = rotate_and_restart();
  ASSERT_EQ(count(report(deploy("web-a", fa, "a2\n"), "20s"), "applied"), 1u);
  EXPECT_EQ(pinned(a), k1);
  const auto old_keys = common::keypair_from_seed(*common::from_hex(trimmed(read_text(dir() / "control" / "control.key"))));
  ASSERT_EQ(old_keys.public_key, k0);
  const auto signing = json(read_text(dir() / "control" / "signing.json"));
  auto chain = common::parse_key_chain(signing.to_json(), "signing.json");
  ASSERT_TRUE(chain) << chain.error().message;
  forged_declaration(old_keys, *chain, 60, "old key\n");
  EXPECT_TRUE(a.proc->wait_for_output("refused declaration node=web-a revision=60", 10000)) << a.proc->stderr_text();
  EXPECT_EQ(read_text(fa), "a2\n");
  EXPECT_EQ(pinned(a), k1);

  // A host's restart keeps the new pin and still applies what the control plane signs.
  a.proc.reset();
  start_host(a);
  ASSERT_EQ(count(report(deploy("web-a", fa, "a3\n"), "30s"), "applied"), 1u);
  EXPECT_EQ(pinned(a), k1);
}

TEST_F(KeyRotationTest, RotateKeyIsRefusedBeforeTheFirstStartAndOnACorruptSigningFile) {
  // signing.json that is not one: the control plane names it and does not start with it.
  control_.reset();
  write_text(dir() / "control" / "signing.json", "{\"seed\": \"zz\"}\n");
  auto r = rotate_key();
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("signing.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing was changed"), std::string::npos) << r.err;
  fs::remove(dir() / "control" / "signing.json");

  // A keys_dir where the control plane never ran.
  const fs::path empty = dir() / "empty.toml";
  write_text(empty, "[control]\nstate_dir = \"" + (dir() / "never").string() +
                        "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"sqlite\"\npath = \"" +
                        (dir() / "never" / "mesh.db").string() + "\"\n\n[transport]\nplugin = \"nats\"\nservers = [\"" +
                        nats_->url() + "\"]\n");
  auto never = mesh::testing::run_process({bin("mesh-control"), "rotate-key", "--config", empty.string()}, {}, 60000);
  EXPECT_EQ(never.exit_code, 2) << never.out << never.err;
  EXPECT_NE(never.err.find("control.key does not exist"), std::string::npos) << never.err;
  EXPECT_FALSE(fs::exists(dir() / "never" / "signing.json"));
}

}  // namespace
}  // namespace mesh::itest
