// `mesh-control backup` and `restore` (docs/decisions/0085) against real processes: nats-server,
// mesh-control (sqlite), a mesh-host and the mesh CLI. A backup is taken while the control plane
// serves; a restore is refused while it runs; after a restore the mesh serves the backup's state
// and a node that applied a later, lost revision takes the next declaration.
#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

class StoreBackupTest : public MeshTest {
 protected:
  ProcessResult control_cmd(std::vector<std::string> args) {
    std::vector<std::string> argv{bin("mesh-control")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--config", (dir() / "control.toml").string()});
    return mesh::testing::run_process(argv, {}, 60000);
  }
  std::uint64_t declared_revision(const std::string& node) {
    auto r = mesh({"nodes", "--output", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const sdk::Value v = json(r.out);
    const sdk::Value* list = v.is_array() ? &v : v.find("nodes");
    if (list && list->is_array())
      for (const auto& n : list->as_array())
        if (n.get_string("name") == node) return static_cast<std::uint64_t>(n.get_int("declared_revision", 0));
    ADD_FAILURE() << "node " << node << " not in " << r.out;
    return 0;
  }
  /// The node's `state_at` in `mesh nodes --output json`: when the control plane received the
  /// heartbeat its state comes from (RFC 3339, seconds), "" when none.
  std::string state_at(const std::string& node) {
    auto r = mesh({"nodes", "--output", "json"});
    if (r.exit_code != 0) return "?";
    const sdk::Value v = json(r.out);
    const sdk::Value* list = v.is_array() ? &v : v.find("nodes");
    if (list && list->is_array())
      for (const auto& n : list->as_array())
        if (n.get_string("name") == node) return n.get_string("state_at");
    return "?";
  }
  /// Waits until the control plane took a heartbeat of `node` other than the one `before` names.
  void wait_for_heartbeat_after(const std::string& node, const std::string& before) {
    std::string now;
    ASSERT_TRUE(mesh::testing::eventually([&] {
      now = state_at(node);
      return now != "?" && now != before;
    }, 20000)) << "state_at stayed " << now;
  }
};

TEST_F(StoreBackupTest, ABackupOfARunningMeshRestoresAndTheMeshGoesOnFromIt) {
  Host& h = add_host("web-01");
  start_host(h);
  const auto motd = (dir() / "files" / "motd").string();
  fs::create_directories(dir() / "files");
  auto d1 = declare("web-01", file_declaration({{motd, "one\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);

  // Online: the control plane keeps serving while the copy is made.
  const std::string backup = (dir() / "mesh-backup.db").string();
  auto b = control_cmd({"backup", backup});
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("backup written: " + backup), std::string::npos) << b.out;

  auto d2 = declare("web-01", file_declaration({{motd, "two\n"}}));
  EXPECT_EQ(d2.get_int("revision", 0), 2);
  ASSERT_EQ(count(report(d2.get_int("delivery", 0), "20s"), "applied"), 1u);

  // Refused while mesh-control has the store open; nothing changes.
  auto busy = control_cmd({"restore", backup});
  EXPECT_EQ(busy.exit_code, 1) << busy.out << busy.err;
  EXPECT_NE(busy.err.find("in use"), std::string::npos) << busy.err;
  EXPECT_NE(busy.err.find("nothing was changed"), std::string::npos) << busy.err;
  EXPECT_EQ(declared_revision("web-01"), 2u);

  // A file that is not a backup is named and refused as bad input.
  const std::string junk = (dir() / "junk.db").string();
  write_text(junk, "not a backup\n");
  control_->stop();
  auto bad = control_cmd({"restore", junk});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find(junk), std::string::npos) << bad.err;

  auto r = control_cmd({"restore", backup});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("restored " + backup), std::string::npos) << r.out;
  start_control();
  const std::string restored_state_at = state_at("web-01");
  EXPECT_EQ(declared_revision("web-01"), 1u);

  // The host applied revision 2, which the backup never saw. Its heartbeats say so, and the next
  // declaration is numbered above it (decision record 191): revision 3, applied.
  wait_for_heartbeat_after("web-01", restored_state_at);
  auto d3 = declare("web-01", file_declaration({{motd, "three\n"}}));
  EXPECT_EQ(d3.get_int("revision", 0), 3);
  ASSERT_EQ(count(report(d3.get_int("delivery", 0), "30s"), "applied"), 1u);
  EXPECT_EQ(read_text(motd), "three\n");
}

TEST_F(StoreBackupTest, AfterARestoreTheNextRevisionIsNumberedAboveWhatTheHostApplied) {
  // newuser finding 6: the backup knows revision 1, the host went on to apply 4; after the
  // restore every declaration up to 4 was refused ("older than the applied revision 4"), one per
  // deploy. The host heartbeats only hourly here, so the first declaration after the restore
  // still meets it unwarned: it is refused, the host heartbeats at once with its applied revision,
  // and the next declaration is revision 5.
  Host& h = add_host("web-01", "1h");
  start_host(h);
  const auto motd = (dir() / "files" / "motd").string();
  fs::create_directories(dir() / "files");
  auto d1 = declare("web-01", file_declaration({{motd, "one\n"}}));
  ASSERT_EQ(count(report(d1.get_int("delivery", 0), "20s"), "applied"), 1u);
  const std::string backup = (dir() / "mesh-backup.db").string();
  ASSERT_EQ(control_cmd({"backup", backup}).exit_code, 0);
  for (const char* text : {"two\n", "three\n", "four\n"}) {
    auto d = declare("web-01", file_declaration({{motd, text}}));
    ASSERT_EQ(count(report(d.get_int("delivery", 0), "20s"), "applied"), 1u);
  }
  ASSERT_EQ(declared_revision("web-01"), 4u);

  control_->stop();
  auto r = control_cmd({"restore", backup});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  start_control();
  ASSERT_EQ(declared_revision("web-01"), 1u);
  const std::string before_refusal = state_at("web-01");

  auto refused = declare("web-01", file_declaration({{motd, "five\n"}}));
  EXPECT_EQ(refused.get_int("revision", 0), 2);
  auto rr = report(refused.get_int("delivery", 0), "20s");
  ASSERT_EQ(count(rr, "failed"), 1u) << rr.to_json();
  EXPECT_NE(rr.to_json().find("older than the applied revision 4"), std::string::npos) << rr.to_json();

  wait_for_heartbeat_after("web-01", before_refusal);
  auto d = declare("web-01", file_declaration({{motd, "six\n"}}));
  EXPECT_EQ(d.get_int("revision", 0), 5);
  auto ra = report(d.get_int("delivery", 0), "20s");
  ASSERT_EQ(count(ra, "applied"), 1u) << ra.to_json();
  EXPECT_EQ(read_text(motd), "six\n");
  // The revision the backup holds stays history; the one refused too.
  auto hist = mesh({"history", "web-01", "--output", "json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  for (const char* rev : {"\"revision\":1", "\"revision\":2", "\"revision\":5"})
    EXPECT_NE(hist.out.find(rev), std::string::npos) << rev << " " << hist.out;
}

}  // namespace
}  // namespace mesh::itest
