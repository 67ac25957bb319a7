// Issue 11 point 9 (second bullet) against real processes: the host's own disk is full. The
// host runs in a mount namespace of its own (`unshare --mount`) with its state directory and the
// managed file on a full 256 KiB tmpfs mounted inside the test's folder — nothing outside the
// namespace sees it. Needs root (label `system`); skipped otherwise.
#include <unistd.h>

#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

using mesh::testing::eventually;
using DiskFullTest = MeshTest;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

TEST_F(DiskFullTest, AReportTheOutboxCannotKeepIsSentFromMemoryAndNamesTheFullDisk) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a tmpfs in a mount namespace)";
  if (mesh::testing::run_process({"unshare", "--mount", "--propagation", "private", "true"}).exit_code != 0)
    GTEST_SKIP() << "unshare --mount is not permitted here";
  Host& h = add_host("full-01");
  const fs::path small = dir() / "small";
  fs::create_directories(small);
  const fs::path cfg = dir() / "full-01-small.toml";
  write_text(cfg, "[node]\nname = \"full-01\"\nstate_dir = \"" + (small / "state").string() +
                      "\"\n\n[plugins]\ndir = \"" MESH_TEST_PLUGIN_DIR "\"\nload = [\"file\"]\n\n[transport]\n"
                      "plugin = \"nats\"\nservers = [\"" + nats_->url() + "\"]\n\n[timers]\nheartbeat = \"1s\"\n"
                      "drift = \"1h\"\n");
  const std::string script =
      "set -e; mount -t tmpfs -o size=256k,mode=0700 tmpfs " + quoted(small.string()) + "; mkdir -m 0700 " +
      quoted((small / "state").string()) + " " + quoted((small / "data").string()) + "; cp -a " +
      quoted(h.state.string()) + "/. " + quoted((small / "state").string()) + "/; mkdir -m 0700 " +
      quoted((small / "state" / "outbox").string()) + " 2>/dev/null || true; dd if=/dev/zero of=" +
      quoted((small / "fill").string()) + " bs=4k 2>/dev/null || true; exec " + bin("mesh-host") +
      " run --config " + quoted(cfg.string()) + " --log-level debug";
  h.proc = std::make_unique<BackgroundProcess>(
      std::vector<std::string>{"unshare", "--mount", "--propagation", "private", "sh", "-c", script});
  ASSERT_TRUE(h.proc->wait_for_output("host started node=full-01", 15000)) << h.proc->stderr_text();
  const std::string f = (small / "data" / "managed.txt").string();
  auto d = declare("full-01", file_declaration({{f, std::string(64 * 1024, 'x')}}));
  auto r = report(d.get_int("delivery", 0), "30s");
  ASSERT_EQ(count(r, "failed"), 1u) << "the report reached the control plane although the outbox could not keep it: "
                                    << r.to_json() << "\n" << h.proc->stderr_text();
  const std::string reason = r.find("failed")->as_array()[0].get_string("reason");
  EXPECT_NE(reason.find("No space left on device"), std::string::npos) << r.to_json();
  EXPECT_NE(h.proc->stderr_text().find("sending it from memory"), std::string::npos) << h.proc->stderr_text();
  EXPECT_FALSE(fs::exists(small / "state")) << "the tmpfs is only inside the host's mount namespace";
}

}  // namespace
}  // namespace mesh::itest
