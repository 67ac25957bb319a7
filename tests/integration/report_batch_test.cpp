// Group commit of reports (decision record 100) end to end: real nats-server, mesh-control,
// mesh-host and mesh as processes. A report is acknowledged only after the write that holds it is
// durable: a control plane killed between that write and the acknowledgement leaves the report
// in the host's outbox, and its re-send is answered "not recorded again" — one report on record.
#include <sqlite3.h>

#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

class ReportBatchTest : public MeshTest {
 public:
  /// Rows of apply_reports for (node, revision) in the control plane's SQLite file, read directly.
  int stored_reports(const std::string& node, int revision) {
    sqlite3* db = nullptr;
    const std::string path = (dir() / "control" / "mesh.db").string();
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return -1;
    }
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    int n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM apply_reports WHERE node = ?1 AND revision = ?2", -1, &st,
                           nullptr) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, node.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int(st, 2, revision);
      if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  }
};

TEST_F(ReportBatchTest, AControlPlaneKilledBetweenRecordAndAckRecordsTheResentReportOnce) {
  add_host("web-01");
  // A control plane that dies right after a batch of reports is written, before its acks.
  control_.reset();
  const fs::path cfg = dir() / "control.toml";
  control_ = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{bin("mesh-control"), "run", "--config", cfg.string(), "--log-level", "debug"},
      std::vector<std::string>{"NOX_MESH_CONTROL_EXIT_BEFORE_ACK_FOR_TEST=1"});
  ASSERT_TRUE(mesh::testing::eventually([&] { return mesh({"nodes"}).exit_code == 0; }, 15000));
  start_host(hosts_["web-01"]);
  const fs::path target = dir() / "files" / "motd";
  fs::create_directories(target.parent_path());
  auto d = declare("web-01", file_declaration({{target.string(), "batched\n"}}));
  ASSERT_TRUE(mesh::testing::eventually([&] { return !control_->running(); }, 20000))
      << "the control plane did not reach its exit after the write" << control_->stderr_text();
  EXPECT_NE(control_->stderr_text().find("before their acknowledgements"), std::string::npos)
      << control_->stderr_text();
  EXPECT_TRUE(fs::exists(target));
  EXPECT_EQ(stored_reports("web-01", 1), 1) << "the write was durable before the (missing) ack";

  control_.reset();
  start_control();
  // The host kept the report (no ack) and sends it again; it is answered, not recorded twice.
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        return control_->stderr_text().find("report node=web-01 revision=1 outcome=applied recorded=false") !=
               std::string::npos;
      },
      30000))
      << control_->stderr_text();
  EXPECT_EQ(stored_reports("web-01", 1), 1);
  auto rep = report(d.get_int("delivery", 0));
  EXPECT_EQ(count(rep, "applied"), 1u) << rep.to_json();
  EXPECT_EQ(control_->stderr_text().find("recorded=true"), std::string::npos)
      << "the re-sent report was recorded again";
}

}  // namespace
}  // namespace mesh::itest
