// [broker] with the jetstream-kv store (decision record 0116), on a real nats-server with
// JetStream and the authorization file mesh-control writes: broker-config works before the
// servers run (first start), the control plane's own nkey is the only user with the store's
// JetStream rights, and hosts, the enrolment user, the operators' user and anonymous clients can
// neither publish store operations, read the stream nor purge it.
#include <nats/nats.h>

#include "mesh/common/protocol.h"
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
        << control_->stderr_text() << "\n---- nats-server log\n" << read_text(nats_->log_path())
        << "\n---- auth.conf\n" << read_text(dir() / "auth.conf");
  }

  void write_config(const std::string& url) { config_ = write_config_as("control.toml", url, "control", ""); }

  /// A control config named `name` with its own `state_dir` (keys in dir()/control, shared), the
  /// servers `url` and more [store] lines `store`.
  fs::path write_config_as(const std::string& name, const std::string& url, const std::string& state,
                           const std::string& store) {
    const fs::path path = dir() / name;
    write_text(path, "[control]\nstate_dir = \"" + (dir() / state).string() + "\"\nkeys_dir = \"" +
                            (dir() / "control").string() +
                            "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\n\n[store]\nplugin = \"" + store_plugin_ + "\"\n" +
                            store + "\n"
                            "[transport]\nservers = [\"" + url + "\"]\n\n[broker]\nauthorization_file = \"" +
                            (dir() / "auth.conf").string() + "\"\npid_file = \"" + (dir() / "nats.pid").string() +
                            "\"\nenrol_password_file = \"" + (dir() / "enrol.pw").string() +
                            "\"\noperator_password_file = \"" + (dir() / "operator.pw").string() + "\"\n");
    return path;
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
  std::string store_plugin_ = "jetstream-kv";
};

/// The same mesh on the sqlite store (JetStream enabled on the server, unused): the "Start a
/// control plane" setup that "More than one machine" then migrates.
class BrokerMigrateTest : public BrokerStoreTest {
 public:
  BrokerMigrateTest() { store_plugin_ = "sqlite"; }
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

// Finding 1 and 12 of issue 15 (decision record 185): the store's JetStream replies come on the
// control plane's own inbox prefix, which the operators' user can neither read nor have the
// control plane answer into.
TEST_F(BrokerStoreTest, TheStoresRepliesAreOnTheControlPlanesOwnInboxesThatOperatorsCannotReadNorBeAnsweredOn) {
  using namespace std::chrono_literals;
  const std::string auth = read_text(dir() / "auth.conf");
  ASSERT_NE(auth.find("\"_INBOX.control.>\""), std::string::npos) << auth;
  const std::string control_public = auth.substr(auth.find("{nkey: \"") + 8, 56);

  BrokerClient oper(nats_->url(), {{"user", "mesh-operator"}, {"password_file", (dir() / "operator.pw").string()}});
  ASSERT_TRUE(oper.connected) << oper.connected.error().message;
  // Refused by the broker, as the nodes' and the enrolment's inboxes are.
  for (const char* subject : {"_INBOX.control.>", "_INBOX.control.*.*", "_INBOX.control.x.1"}) {
    auto sub = oper->subscribe(subject, "", [](sdk::Message&&) {});
    EXPECT_FALSE(sub) << "the operators' user may not read " << subject;
    if (!sub) {
      EXPECT_EQ(sub.error().code, sdk::ErrorCode::PermissionDenied) << sub.error().message;
    }
  }
  // What it may read (_INBOX.>, for mesh's own replies) never carries the store's replies.
  BrokerClient sniffer(nats_->url(), {{"user", "mesh-operator"}, {"password_file", (dir() / "operator.pw").string()}});
  ASSERT_TRUE(sniffer.connected);
  sniffer.capture("_INBOX.>");
  // The control plane's own user sees them: they are there, under _INBOX.control.
  BrokerClient control(nats_->url(), {{"nkey_seed", (dir() / "control" / "broker.nk").string()},
                                      {"inbox_prefix", "_INBOX.control"}});
  ASSERT_TRUE(control.connected) << control.connected.error().message;
  control.capture("_INBOX.control.>");

  // Store reads and writes: a token issued, the nodes listed.
  ASSERT_EQ(op({"token", "issue", "node-z", "--ttl", "1h"}).exit_code, 0);
  ASSERT_EQ(op({"nodes"}).exit_code, 0);
  ASSERT_TRUE(mesh::testing::eventually([&] {
    for (const auto& m : control.captured())
      if (std::string(m.body).find("io.nats.jetstream.api.v1") != std::string::npos) return true;
    return false;
  }, 5000)) << "the store's JetStream replies come under _INBOX.control";
  const auto seen = sniffer.captured();
  EXPECT_FALSE(seen.empty()) << "the operators' user reads mesh's own replies on _INBOX.>";
  for (const auto& m : seen) {
    EXPECT_NE(m.subject.rfind("_INBOX.control.", 0), 0u) << m.subject;
    EXPECT_EQ(std::string(m.body).find("io.nats.jetstream"), std::string::npos)
        << "a JetStream reply reached the operators' user on " << m.subject;
    EXPECT_EQ(std::string(m.body).find("MESH_STORE"), std::string::npos) << m.subject;
  }

  // A reflected reply: an API request whose reply subject is under _INBOX.control is dropped
  // unanswered (it would land in one of the store's pending requests) ...
  const std::size_t before = control.captured().size();
  sdk::Message reflect = protocol::make_message("mesh.api.nodes", "{}");
  reflect.reply = "_INBOX.control.AAAAAAAAAAAAAAAAAAAAAA.1";
  ASSERT_TRUE(oper->publish(reflect));
  (void)oper->flush(2s);
  ASSERT_TRUE(mesh::testing::eventually([&] {
    return control_->stderr_text().find("dropped subject=mesh.api.nodes reply_subject=_INBOX.control.") !=
           std::string::npos;
  }, 5000)) << control_->stderr_text();
  for (std::size_t i = before; i < control.captured().size(); ++i)
    EXPECT_NE(control.captured()[i].subject, reflect.reply) << "the control plane answered into its own inbox";
  // ... while the same request with the operators' own inbox is answered (signed refusal).
  sdk::Message asked = protocol::make_message("mesh.api.nodes", "{}");
  asked.reply = "_INBOX.probe.1";
  ASSERT_TRUE(oper->publish(asked));
  ASSERT_TRUE(mesh::testing::eventually([&] {
    for (const auto& m : sniffer.captured())
      if (m.subject == "_INBOX.probe.1") return true;
    return false;
  }, 5000));
  EXPECT_EQ(op({"nodes"}).exit_code, 0);
}

TEST_F(BrokerStoreTest, BrokerConfigWithTheStoreUnreachableLeavesAFileThatIsRightAsItIs) {
  const std::string before = read_text(dir() / "auth.conf");
  control_.reset();
  nats_->stop();
  auto r = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", config_.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("is unchanged"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(dir() / "auth.conf"), before);
}

// Decision record 188: a file written for another control plane key (a wrong keys_dir) is never
// replaced by broker-config, which says to check keys_dir and exits 2.
TEST_F(BrokerStoreTest, BrokerConfigWithAnotherKeysDirKeepsTheFileAndNamesKeysDir) {
  enrolled_host("node-a");
  const std::string before = read_text(dir() / "auth.conf");
  const fs::path wrong = dir() / "wrong.toml";
  write_text(wrong, "[control]\nstate_dir = \"" + (dir() / "other").string() + "\"\nkeys_dir = \"" +
                        (dir() / "other-keys").string() + "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
                        "\"\n\n[store]\nplugin = \"jetstream-kv\"\ntimeout = 1000\n\n[transport]\nservers = [\"" +
                        nats_->url() + "\"]\n\n[broker]\nauthorization_file = \"" + (dir() / "auth.conf").string() +
                        "\"\nenrol_password_file = \"" + (dir() / "enrol.pw").string() +
                        "\"\noperator_password_file = \"" + (dir() / "operator.pw").string() + "\"\n");
  auto r = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", wrong.string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("keys_dir"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(dir() / "auth.conf"), before) << "the file is kept";
  EXPECT_EQ(op({"nodes"}).exit_code, 0);
}

// Findings 5, 9 and N12 of issue 15 (decision records 187-189): the README's restore of a
// jetstream-kv store with [broker] — a new prefix, import_sqlite = the backup — goes through:
// run says the servers refuse the new stream's rights (exit 2, not a "Timeout"), broker-config
// writes them keeping the file's nodes, run imports, and a second instance with the same [store]
// (import_sqlite left in) starts on the imported stream. The enrolled host goes on working.
TEST_F(BrokerStoreTest, ARestoreIntoANewPrefixGoesThroughBrokerConfigAndEveryInstanceMayKeepImportSqlite) {
  Host& a = enrolled_host("node-a");
  start_host(a);
  const fs::path backup = dir() / "backup.db";
  auto b = mesh::testing::run_process({bin("mesh-control"), "backup", "--config", config_.string(), backup.string()});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  control_.reset();  // the README: stop the control planes

  const std::string store = "prefix = \"MESH_R1\"\nimport_sqlite = \"" + backup.string() + "\"\ntimeout = 1000\n";
  const fs::path restore1 = write_config_as("restore-1.toml", nats_->url(), "control", store);
  auto refused = mesh::testing::run_process({bin("mesh-control"), "run", "--config", restore1.string()}, {}, 60000);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("store.prefix"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("Permissions Violation"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("broker-config"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("Timeout"), std::string::npos) << refused.err;

  auto bc = mesh::testing::run_process({bin("mesh-control"), "broker-config", "--config", restore1.string()});
  ASSERT_EQ(bc.exit_code, 0) << bc.err;
  EXPECT_NE(bc.err.find("rewritten with the JetStream rights of stream MESH_R1"), std::string::npos) << bc.err;
  const std::string auth = read_text(dir() / "auth.conf");
  EXPECT_NE(auth.find("$JS.API.STREAM.INFO.MESH_R1"), std::string::npos) << auth;
  EXPECT_EQ(auth.find("MESH_STORE"), std::string::npos) << auth;
  EXPECT_NE(auth.find("}  # node node-a generation 1"), std::string::npos) << "the file's node kept: " << auth;

  control_ = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{bin("mesh-control"), "run", "--config", restore1.string(), "--log-level", "debug"});
  ASSERT_TRUE(mesh::testing::eventually([&] { return op({"nodes"}).out.find("node-a") != std::string::npos; }, 30000))
      << control_->stderr_text();
  EXPECT_TRUE(control_->wait_for_output("jetstream-kv store imported file=" + backup.string(), 5000))
      << control_->stderr_text();

  // Instance 2, the same [store] (its own state_dir): the stream was made from this file.
  const fs::path restore2 = write_config_as("restore-2.toml", nats_->url(), "control-2", store);
  BackgroundProcess second({bin("mesh-control"), "run", "--config", restore2.string()});
  ASSERT_TRUE(second.wait_for_output("control started", 30000)) << second.stderr_text();
  EXPECT_NE(second.stderr_text().find("outcome=already_imported"), std::string::npos) << second.stderr_text();

  // node-a (its nkey kept all along) still gets declarations and reports them.
  const auto f = (dir() / "after-restore.txt").string();
  write_text(dir() / "r.json", file_declaration({{f, "r\n"}}));
  ASSERT_EQ(op({"declare", "node-a", (dir() / "r.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "30s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << a.proc->stderr_text();
}

// Finding 11 of issue 15 (decision record 188): migrate --to jetstream-kv on a mesh with [broker]
// writes the new stream's rights into the authorization file (with the sqlite store's nodes) and
// reloads the servers before it opens the stream; then run on jetstream-kv serves the same host.
TEST_F(BrokerMigrateTest, MigrateToJetStreamKvWithBrokerWritesTheStreamsRightsAndKeepsTheNodes) {
  Host& m = enrolled_host("node-m");
  start_host(m);
  EXPECT_EQ(read_text(dir() / "auth.conf").find("$JS"), std::string::npos) << "no JetStream rights with sqlite";
  control_.reset();
  auto r = mesh::testing::run_process(
      {bin("mesh-control"), "migrate", "--config", config_.string(), "--to", "jetstream-kv"}, {}, 60000);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 nodes"), std::string::npos) << r.out;
  const std::string auth = read_text(dir() / "auth.conf");
  EXPECT_NE(auth.find("$JS.API.STREAM.INFO.MESH_STORE"), std::string::npos) << auth;
  EXPECT_NE(auth.find("}  # node node-m generation 1"), std::string::npos) << auth;
  EXPECT_NE(r.err.find("broker permissions written"), std::string::npos) << r.err;

  store_plugin_ = "jetstream-kv";
  write_config(nats_->url());
  control_ = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{bin("mesh-control"), "run", "--config", config_.string(), "--log-level", "debug"});
  ASSERT_TRUE(mesh::testing::eventually([&] { return op({"nodes"}).out.find("node-m") != std::string::npos; }, 30000))
      << control_->stderr_text();
  const auto f = (dir() / "migrated.txt").string();
  write_text(dir() / "m.json", file_declaration({{f, "m\n"}}));
  ASSERT_EQ(op({"declare", "node-m", (dir() / "m.json").string()}).exit_code, 0);
  auto rep = op({"report", "--wait", "30s", "--output", "json"});
  EXPECT_EQ(count(json(rep.out), "applied"), 1u) << rep.out << m.proc->stderr_text();
}

// newuser finding 3: an instance with a wrong keys_dir. Empty: no new control.key is made there
// (the store cannot even be reached without the mesh's key, so it cannot be seen to be empty), and
// the refusal names keys_dir and exits 2. Another mesh's key: the servers refuse its nkey, and the
// refusal says that the nkey comes from keys_dir instead of "start the servers".
TEST_F(BrokerStoreTest, AWrongKeysDirIsNamedAndGetsNoNewKey) {
  const std::string auth_before = read_text(dir() / "auth.conf");
  auto variant = [&](const std::string& name, const fs::path& keys, const fs::path& auth) {
    std::string text = read_text(config_);
    const std::string state = "state_dir = \"" + (dir() / "control").string() + "\"";
    text.replace(text.find(state), state.size(), "state_dir = \"" + (dir() / ("control-" + name)).string() + "\"");
    const std::string keys_line = "keys_dir = \"" + (dir() / "control").string() + "\"";
    text.replace(text.find(keys_line), keys_line.size(), "keys_dir = \"" + keys.string() + "\"");
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
  EXPECT_NE(again.err.find("written for another control plane key"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("keys_dir"), std::string::npos) << again.err;
  EXPECT_EQ(read_text(dir() / "auth.conf"), auth_before);
  EXPECT_EQ(op({"nodes"}).exit_code, 0) << "the running instance goes on";
}

}  // namespace
}  // namespace mesh::itest
