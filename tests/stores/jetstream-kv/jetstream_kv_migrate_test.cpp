// `mesh-control migrate --to jetstream-kv`: a sqlite store file made with the sqlite store's own
// code moves into a new JetStream stream on a real nats-server; a jetstream-kv instance of its own
// then answers everything the file held; a second migration into the same stream is refused.
#include <fstream>

#include "jetstream_kv_fixture.h"
#include "mesh/testing/process.h"
#include "sqlite_store.h"

namespace mesh::stores::jetstream_kv::testing {
namespace {

class JetStreamKvMigrateTest : public ::testing::Test {
 protected:
  JetStreamKvMigrateTest() {
    host_.logger = &logger_;
    host_.role = "tool";
    std::filesystem::create_directories(state());
  }
  std::string state() const { return (dir_.path() / "state").string(); }
  std::string write_config(const std::string& store_table) {
    const std::string path = (dir_.path() / "control.toml").string();
    std::ofstream(path) << "[control]\nstate_dir = \"" << state() << "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR
                        << "\"\n\n[store]\n" << store_table << "\n[transport]\nplugin = \"nats\"\nservers = [\""
                        << server_.url() << "\"]\n";
    return path;
  }
  mesh::testing::ProcessResult migrate(const std::string& config, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {MESH_TEST_BIN_DIR "/mesh-control", "migrate", "--config", config};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return mesh::testing::run_process(argv);
  }

  sdk::NullLogger logger_;
  sdk::HostContext host_;
  mesh::testing::TempDir dir_;
  mesh::testing::NatsServer server_{{}, true};
};

TEST_F(JetStreamKvMigrateTest, ASqliteStoreMovesIntoANewStreamWithEverythingAndOnlyOnce) {
  {
    sqlite::SqliteStore old(host_);
    sdk::Value c = sdk::Value::object();
    c.set("path", state() + "/mesh.db");
    ASSERT_TRUE(old.configure(c));
    ASSERT_TRUE(old.open());
    for (const std::string n : {"web-01", "web-02"}) {
      ASSERT_TRUE(old.add_token(sdk::TokenRecord{"t-" + n, n, "h-" + n, 1000, 1'000'000, false, {}, false}));
      ASSERT_TRUE(old.enrol("h-" + n, n, "key-" + n, 2000));
    }
    ASSERT_TRUE(old.add_token(sdk::TokenRecord{"t-spare", "web-03", "h-spare", 1000, 1'000'000, false, {}, false}));
    auto body = [](std::uint64_t r) { return "rev " + std::to_string(r); };
    ASSERT_TRUE(old.declare({sdk::DeclarationWrite{"web-01", body}, sdk::DeclarationWrite{"web-02", body}}, 100, 0));
    ASSERT_TRUE(old.declare({sdk::DeclarationWrite{"web-01", body}}, 200, 0));
    sdk::ApplyReport rep;
    rep.node = "web-01";
    rep.revision = 2;
    rep.outcome = "applied";
    rep.at_ms = rep.received_at_ms = 300;
    rep.owned = {"file:/etc/motd"};
    ASSERT_TRUE(old.record_apply(rep));
    ASSERT_TRUE(old.put_records({sdk::RecordWrite{"module", "web/1.0.0", "{}", 0u}}, 400));
    ASSERT_TRUE(old.next_sequence("deploy"));
  }
  const std::string config = write_config("plugin = \"sqlite\"\n");
  auto r = migrate(config, {"--to", "jetstream-kv", "--prefix", "MIGRATED"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plugin = \"jetstream-kv\""), std::string::npos) << r.out;

  // Another instance (a second control plane) reads it all from the stream.
  auto s = open_store(host_, store_config({server_.url()}, "MIGRATED", 1, (dir_.path() / "other.db").string()));
  ASSERT_TRUE(s);
  auto nodes = s->nodes();
  ASSERT_TRUE(nodes) << nodes.error().describe();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].applied_revision, 2u);
  EXPECT_EQ((*nodes)[0].public_key, "key-web-01");
  auto latest = s->latest_revision("web-01");
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->body, "rev 2");
  auto owned = s->owned("web-01");
  ASSERT_TRUE(owned);
  EXPECT_EQ(*owned, std::vector<std::string>{"file:/etc/motd"});
  auto tokens = s->tokens(1500);
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].id, "t-spare");
  auto mod = s->record("module", "web/1.0.0");
  ASSERT_TRUE(mod && *mod);
  auto seq = s->next_sequence("deploy");
  ASSERT_TRUE(seq);
  EXPECT_EQ(*seq, 2u);
  // And it goes on from there: revision and delivery numbers continue.
  auto d = s->declare({sdk::DeclarationWrite{"web-02", [](std::uint64_t) { return std::string("x"); }}}, 500, 0);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->id, 3u);
  EXPECT_EQ(d->targets.at(0).revision, 2u);

  // Into a stream that holds operations already: refused, the stream unchanged.
  auto again = migrate(config, {"--to", "jetstream-kv", "--prefix", "MIGRATED"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("already holds operations"), std::string::npos) << again.err;
  auto after = s->latest_delivery();
  ASSERT_TRUE(after && *after);
  EXPECT_EQ((*after)->id, 3u);
}

TEST_F(JetStreamKvMigrateTest, BadOptionsAndAStoreThatIsNotSqliteAreRefusedNamingThem) {
  const std::string config = write_config("plugin = \"sqlite\"\n");
  auto r = migrate(config, {"--to", "postgres"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--to"), std::string::npos) << r.err;
  r = migrate(config, {"--to", "jetstream-kv"});  // no sqlite file yet
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("store.path"), std::string::npos) << r.err;
  const std::string js = write_config("plugin = \"jetstream-kv\"\n");
  r = migrate(js, {"--to", "jetstream-kv"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("store.plugin"), std::string::npos) << r.err;

  // A sqlite file, but no server: exit 3 (unreachable), as the programs' table says.
  {
    sqlite::SqliteStore old(host_);
    sdk::Value c = sdk::Value::object();
    c.set("path", state() + "/mesh.db");
    ASSERT_TRUE(old.configure(c));
    ASSERT_TRUE(old.open());
  }
  server_.stop();
  r = migrate(write_config("plugin = \"sqlite\"\n"), {"--to", "jetstream-kv"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
}

}  // namespace
}  // namespace mesh::stores::jetstream_kv::testing
