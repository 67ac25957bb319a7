// [broker] with the jetstream-kv store (decision record 0116), on a real nats-server with
// JetStream and the authorization file mesh-control writes: broker-config works before the
// servers run (first start), the control plane's own nkey is the only user with the store's
// JetStream rights, and hosts, the enrolment user, the operators' user and anonymous clients can
// neither publish store operations, read the stream nor purge it.
#include <nats/nats.h>

#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

const char* const kStream = "MESH_STORE";

/// A raw nats.c client (what an attacker with those credentials would use).
struct Raw {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  natsStatus connected = NATS_ERR;
  Raw(const std::string& url, const std::string& user, const std::string& password, const std::string& seed_file,
      const std::string& nkey_public) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetTimeout(o, 3000);
    natsOptions_SetMaxReconnect(o, 0);
    if (!user.empty()) natsOptions_SetUserInfo(o, user.c_str(), password.c_str());
    if (!seed_file.empty()) natsOptions_SetNKeyFromSeed(o, nkey_public.c_str(), seed_file.c_str());
    connected = natsConnection_Connect(&nc, o);
    natsOptions_Destroy(o);
    if (connected == NATS_OK) {
      jsOptions jo;
      jsOptions_Init(&jo);
      jo.Wait = 1500;
      natsConnection_JetStream(&js, nc, &jo);
    }
  }
  ~Raw() {
    if (js) jsCtx_Destroy(js);
    if (nc) natsConnection_Destroy(nc);
  }
  bool stream_info(std::uint64_t* last = nullptr) {
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, js, kStream, nullptr, nullptr) != NATS_OK) return false;
    if (last) *last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    return true;
  }
  bool js_publish_op() {
    jsPubAck* ack = nullptr;
    const char body[] = "forged";
    const natsStatus s = js_Publish(&ack, js, (std::string(kStream) + ".op").c_str(), body, sizeof body, nullptr, nullptr);
    if (ack) jsPubAck_Destroy(ack);
    return s == NATS_OK;
  }
  bool purge() { return js_PurgeStream(js, kStream, nullptr, nullptr) == NATS_OK; }
  bool read_message() {
    natsMsg* m = nullptr;
    const natsStatus s = js_GetMsg(&m, js, kStream, 1, nullptr, nullptr);
    if (m) natsMsg_Destroy(m);
    return s == NATS_OK;
  }
  bool consume() {
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = kStream;
    so.Ordered = true;
    natsSubscription* sub = nullptr;
    const natsStatus s = js_SubscribeSync(&sub, js, (std::string(kStream) + ".>").c_str(), nullptr, &so, nullptr);
    if (sub) natsSubscription_Destroy(sub);
    return s == NATS_OK;
  }
};

/// The public nkey on the line of the authorization file that ends with `marker`.
std::string nkey_before(const std::string& auth, const std::string& marker) {
  const auto at = auth.find(marker);
  if (at == std::string::npos) return {};
  return auth.substr(auth.rfind("{nkey: \"", at) + 8, 56);
}

class BrokerStoreTest : public MeshTest {
 public:
  void SetUp() override {
    write_text(dir() / "enrol.pw", "enrol-secret\n");
    write_text(dir() / "operator.pw", "operator-secret\n");
    // First start: no server runs yet (it needs the authorization file to start).
    write_config("nats://127.0.0.1:" + std::to_string(mesh::testing::free_tcp_port()));
    first_ = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", config_.string()});
    ASSERT_EQ(first_.exit_code, 0) << first_.out << first_.err;
    // JetStream in the config file, as on a real server: a reload (after each enrolment) reads
    // the file again, and command-line flags would not survive it.
    write_text(dir() / "nats.conf", "pid_file: \"" + (dir() / "nats.pid").string() + "\"\njetstream { store_dir: \"" +
                                        (dir() / "js").string() + "\" }\ninclude \"auth.conf\"\n");
    nats_ = std::make_unique<NatsServer>(std::vector<std::string>{"-c", (dir() / "nats.conf").string()});
    write_config(nats_->url());
    write_text(dir() / "operator.toml", "[transport]\nservers = [\"" + nats_->url() +
                                            "\"]\nuser = \"mesh-operator\"\npassword_file = \"" +
                                            (dir() / "operator.pw").string() + "\"\n");
    control_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{
        bin("mesh-control"), "run", "--config", config_.string(), "--log-level", "debug"});
    ASSERT_TRUE(mesh::testing::eventually([&] { return op({"nodes"}).exit_code == 0; }, 30000))
        << control_->stderr_text();
  }

  void write_config(const std::string& url) {
    config_ = dir() / "control.toml";
    write_text(config_, "[control]\nstate_dir = \"" + (dir() / "control").string() +
                            "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"jetstream-kv\"\n\n"
                            "[transport]\nservers = [\"" + url + "\"]\n\n[broker]\nauthorization_file = \"" +
                            (dir() / "auth.conf").string() + "\"\npid_file = \"" + (dir() / "nats.pid").string() +
                            "\"\nenrol_password_file = \"" + (dir() / "enrol.pw").string() +
                            "\"\noperator_password_file = \"" + (dir() / "operator.pw").string() + "\"\n");
  }

  ProcessResult op(std::vector<std::string> args) {
    std::vector<std::string> argv{bin("mesh"), "--config", (dir() / "operator.toml").string(), "--plugin-dir",
                                  MESH_TEST_PLUGIN_DIR, "--identity", admin_identity()};
    argv.insert(argv.end(), args.begin(), args.end());
    return mesh::testing::run_process(argv, {}, 60000);
  }

  Host& enrolled_host(const std::string& name) {
    Host& h = hosts_[name];
    h.name = name;
    h.state = dir() / ("host-" + name);
    h.config = dir() / (name + ".toml");
    write_text(h.config, "[node]\nname = \"" + name + "\"\nstate_dir = \"" + h.state.string() +
                             "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                             "servers = [\"" + nats_->url() + "\"]\nuser = \"mesh-enrol\"\npassword_file = \"" +
                             (dir() / "enrol.pw").string() + "\"\n\n[timers]\nheartbeat = \"1s\"\n");
    auto tok = op({"token", "issue", name, "--output", "json"});
    EXPECT_EQ(tok.exit_code, 0) << tok.err;
    auto en = mesh::testing::run_process(
        {bin("mesh-host"), "enrol", "--config", h.config.string(), "--token", json(tok.out).get_string("token")});
    EXPECT_EQ(en.exit_code, 0) << en.out << en.err;
    return h;
  }

  fs::path config_;
  ProcessResult first_;
};

TEST_F(BrokerStoreTest, OnlyTheControlPlanesOwnNkeyReachesTheStoreAndTheControlPlaneWorks) {
  EXPECT_NE(first_.err.find("written without nodes"), std::string::npos) << first_.err;
  Host& a = enrolled_host("node-a");
  // The control plane serves through its store: the node is listed, a declaration is applied.
  start_host(a);
  const auto f = (dir() / "a.txt").string();
  write_text(dir() / "a.json", file_declaration({{f, "a\n"}}));
  ASSERT_EQ(op({"declare", "node-a", (dir() / "a.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "20s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();

  const std::string auth = read_text(dir() / "auth.conf");
  // Exactly one user has JetStream rights: the control plane's (its line is the first).
  const auto js_at = auth.find("$JS.API.STREAM.INFO.MESH_STORE");
  ASSERT_NE(js_at, std::string::npos) << auth;
  EXPECT_EQ(auth.find("$JS", auth.find('\n', js_at)), std::string::npos) << auth;
  EXPECT_EQ(auth.find("MESH_STORE", auth.find('\n', js_at)), std::string::npos) << auth;

  // The control plane's own nkey reads the stream (as its store does).
  const std::string control_public = auth.substr(auth.find("{nkey: \"") + 8, 56);
  Raw control(nats_->url(), "", "", (dir() / "control" / "broker.nk").string(), control_public);
  ASSERT_EQ(control.connected, NATS_OK);
  std::uint64_t last_before = 0;
  ASSERT_TRUE(control.stream_info(&last_before));
  ASSERT_GT(last_before, 0u);

  const std::string a_public = nkey_before(auth, "}  # node node-a generation 1");
  ASSERT_EQ(a_public.size(), 56u) << auth;
  Raw host(nats_->url(), "", "", (a.state / "broker.nk").string(), a_public);
  Raw enrol(nats_->url(), "mesh-enrol", "enrol-secret", "", "");
  Raw oper(nats_->url(), "mesh-operator", "operator-secret", "", "");
  Raw anonymous(nats_->url(), "", "", "", "");
  EXPECT_NE(anonymous.connected, NATS_OK) << "the broker refuses unauthenticated clients";
  for (Raw* c : {&host, &enrol, &oper}) {
    ASSERT_EQ(c->connected, NATS_OK);
    EXPECT_FALSE(c->stream_info());
    EXPECT_FALSE(c->read_message());
    EXPECT_FALSE(c->consume());
    EXPECT_FALSE(c->js_publish_op());
    EXPECT_FALSE(c->purge());
    // A plain publish on the operation subject (no reply wanted) is dropped by the server.
    natsConnection_PublishString(c->nc, (std::string(kStream) + ".op").c_str(), "forged");
    natsConnection_PublishString(c->nc, (std::string("$JS.API.STREAM.PURGE.") + kStream).c_str(), "{}");
    natsConnection_FlushTimeout(c->nc, 2000);
  }
  std::uint64_t last_after = 0;
  ASSERT_TRUE(control.stream_info(&last_after));
  // Nothing forged landed and nothing was purged (the host's heartbeats may have added ops).
  jsStreamInfo* si = nullptr;
  ASSERT_EQ(js_GetStreamInfo(&si, control.js, kStream, nullptr, nullptr), NATS_OK);
  EXPECT_EQ(si->State.FirstSeq, 1u) << "the stream was purged";
  jsStreamInfo_Destroy(si);
  for (std::uint64_t seq = last_before + 1; seq <= last_after; ++seq) {
    natsMsg* m = nullptr;
    if (js_GetMsg(&m, control.js, kStream, seq, nullptr, nullptr) != NATS_OK) continue;
    EXPECT_NE(std::string(natsMsg_GetData(m), natsMsg_GetDataLength(m)), "forged") << "sequence " << seq;
    natsMsg_Destroy(m);
  }
  // And the control plane still answers.
  EXPECT_EQ(op({"nodes"}).exit_code, 0);
}

TEST_F(BrokerStoreTest, BrokerConfigWithTheStoreUnreachableKeepsAnExistingFile) {
  const std::string before = read_text(dir() / "auth.conf");
  control_.reset();
  nats_->stop();
  auto r = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", config_.string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("is kept as it is"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(dir() / "auth.conf"), before);
}

// newuser finding 3: an instance with a wrong keys_dir. Empty: no new control.key is made there
// (the store cannot even be reached without the mesh's key, so it cannot be seen to be empty), and
// the refusal names keys_dir and exits 2. Another mesh's key: the servers refuse its nkey, and the
// refusal says that the nkey comes from keys_dir instead of "start the servers".
TEST_F(BrokerStoreTest, AWrongKeysDirIsNamedAndGetsNoNewKey) {
  const std::string auth_before = read_text(dir() / "auth.conf");
  auto variant = [&](const std::string& name, const fs::path& keys, const fs::path& auth) {
    std::string text = read_text(config_);
    text.replace(text.find("[control]\n"), 10, "[control]\nkeys_dir = \"" + keys.string() + "\"\n");
    const std::string state = (dir() / "control").string();
    text.replace(text.find(state), state.size(), (dir() / ("control-" + name)).string());
    const std::string file = (dir() / "auth.conf").string();
    text.replace(text.find(file), file.size(), auth.string());
    const fs::path cfg = dir() / (name + ".toml");
    write_text(cfg, text);
    return cfg;
  };
  const fs::path empty = dir() / "empty-keys";
  fs::create_directories(empty);
  const fs::path cfg = variant("empty", empty, dir() / "auth.conf");
  auto run = mesh::testing::run_process({bin("mesh-control"), "run", "--config", cfg.string()}, {}, 60000);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("keys_dir '" + empty.string() + "' has no control.key"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(empty / "control.key")) << "a new mesh key was made in the wrong keys_dir";
  auto config = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", cfg.string()}, {}, 60000);
  EXPECT_EQ(config.exit_code, 2) << config.err;
  EXPECT_NE(config.err.find("has no control.key"), std::string::npos) << config.err;
  EXPECT_FALSE(fs::exists(empty / "control.key"));
  EXPECT_EQ(read_text(dir() / "auth.conf"), auth_before) << "the authorization file was changed";

  // A keys_dir of another mesh (made by broker-config of a config of its own, with a file of its
  // own): its nkey is not in this mesh's authorization file.
  const fs::path other = dir() / "other-keys";
  auto made = mesh::testing::run_process(
      {bin("mesh-control"), "broker-config", "--config", variant("made", other, dir() / "other-auth.conf").string()}, {},
      60000);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  ASSERT_TRUE(fs::exists(other / "control.key"));
  const fs::path wrong = variant("wrong", other, dir() / "auth.conf");
  auto refused = mesh::testing::run_process({bin("mesh-control"), "run", "--config", wrong.string()}, {}, 60000);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("keys_dir is probably not this mesh's"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(other.string() + "/control.key"), std::string::npos) << refused.err;
  auto again = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", wrong.string()}, {}, 60000);
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find("keys_dir is probably not this mesh's"), std::string::npos) << again.err;
  EXPECT_EQ(read_text(dir() / "auth.conf"), auth_before);
  EXPECT_EQ(op({"nodes"}).exit_code, 0) << "the running instance goes on";
}

}  // namespace
}  // namespace mesh::itest
