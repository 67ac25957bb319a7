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
  EXPECT_EQ(declared_revision("web-01"), 1u);

  // The host applied revision 2, which the backup never saw. The next declaration is revision 2
  // again, with other content: the host applies it (same number, another digest) and reports it.
  auto d3 = declare("web-01", file_declaration({{motd, "three\n"}}));
  EXPECT_EQ(d3.get_int("revision", 0), 2);
  ASSERT_EQ(count(report(d3.get_int("delivery", 0), "30s"), "applied"), 1u);
  EXPECT_EQ(read_text(motd), "three\n");
}

}  // namespace
}  // namespace mesh::itest
