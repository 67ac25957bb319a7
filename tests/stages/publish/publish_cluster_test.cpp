// `mesh publish` through two control-plane instances (decision record 170; issue 15): the chunks
// of an upload are separate API requests appended to a spool file in the state directory of the
// instance that took the first, so `mesh` sends the later chunks and the final `publish` to that
// instance's own subject. Two instances in one queue group on a 3-node NATS cluster (control
// plane i on server i, `mesh` on the third), one shared repository directory (decision record
// 92). The instance holding an upload killed with SIGKILL: `mesh publish` stops with exit 3
// saying so and that nothing was published; run again, the package is published by the other.
#include <csignal>
#include <optional>

#include "cluster_fixture.h"
#include "mesh/common/crypto.h"
#include "publish_test_util.h"
#include "mesh/testing/text.h"

namespace mesh::itest {
namespace {

using stages::publish::test::build_deb;
using stages::publish::test::slurp;
using stages::publish::test::snapshot;

using mesh::testing::occurrences;

class ClusterPublishTest : public ClusterTest {
 public:
  void SetUp() override {
    pinned_ = true;
    ClusterTest::SetUp();
    extra_control_toml_ = "\n[stages]\nload = [\"publish\"]\n\n[stages.publish]\narchitectures = [\"amd64\"]\n\n"
                          "[repository]\ndir = \"" + repo().string() + "\"\n";
  }
  fs::path repo() const { return dir() / "repo"; }
  /// The instance whose spool holds more than `bytes` of an upload, if any.
  std::optional<std::size_t> spooling(std::uintmax_t bytes) const {
    for (std::size_t i = 0; i < controls_.size(); ++i) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir() / ("control-" + std::to_string(i)) / "work" / "uploads", ec))
        if (e.is_regular_file() && fs::file_size(e.path(), ec) > bytes) return i;
    }
    return std::nullopt;
  }
};

TEST_F(ClusterPublishTest, EveryChunkAndThePublishGoToTheInstanceThatTookTheFirstChunk) {
  start_control(0);
  start_control(1);
  for (int k = 0; k < 3; ++k) {
    const std::string name = "nox-mesh-test-cluster-" + std::to_string(k);
    const auto deb = build_deb(dir(), name, "1.0", "all", "", 1u << 20);
    const std::size_t parts0 = occurrences(controls_[0]->stderr_text(), "api operation=publish.part ");
    const std::size_t parts1 = occurrences(controls_[1]->stderr_text(), "api operation=publish.part ");
    // 64 KiB chunks: some 17 requests.
    auto r = mesh({"publish", deb.string(), "--chunk", "64KiB", "--output", "json"}, 300000);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err << control_logs();
    EXPECT_EQ(cluster_json(r.out).get_string("sha256"), common::sha256_hex(slurp(deb)));
    const std::size_t by0 = occurrences(controls_[0]->stderr_text(), "api operation=publish.part ") - parts0;
    const std::size_t by1 = occurrences(controls_[1]->stderr_text(), "api operation=publish.part ") - parts1;
    std::cout << "[ observed ] package " << k << ": chunks taken by instance 0: " << by0 << ", instance 1: " << by1
              << "\n";
    EXPECT_GE(by0 + by1, 16u);
    EXPECT_TRUE(by0 == 0 || by1 == 0) << "one instance took every chunk of the upload";
    const std::size_t holder = by0 > 0 ? 0 : 1;
    EXPECT_NE(controls_[holder]->stderr_text().find("api operation=publish operator="), std::string::npos);
    EXPECT_EQ(slurp(repo() / "pool" / "main" / name / (name + "_1.0_all.deb")), slurp(deb));
  }
  EXPECT_EQ(occurrences(control_logs(), "is not in progress"), 0u) << control_logs();
}

TEST_F(ClusterPublishTest, TheInstanceHoldingAnUploadKilledStopsItAndItIsPublishedWhenRunAgain) {
  start_control(0);
  start_control(1);
  const auto deb = build_deb(dir(), "nox-mesh-test-cut", "1.0", "all", "", 16u << 20);
  fs::create_directories(repo());
  const auto before = snapshot(repo());
  BackgroundProcess upload(mesh_argv({"--timeout", "2s", "publish", deb.string(), "--chunk", "64KiB"}));
  std::optional<std::size_t> holder;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        holder = spooling(1u << 20);
        return holder.has_value();
      },
      120000))
      << upload.stderr_text() << control_logs();
  EXPECT_EQ(controls_[*holder]->stop(SIGKILL), -SIGKILL);
  ASSERT_TRUE(mesh::testing::eventually([&] { return !upload.running(); }, 60000));
  std::cout << "[ observed ] " << upload.stderr_text();
  EXPECT_EQ(upload.exit_code(), 3) << upload.stderr_text();
  // Killed between two chunks: nobody on its subject ("… went to control plane instance …, which
  // did not answer"); killed with a chunk in hand: no reply in time. Either way, said so.
  EXPECT_TRUE(upload.stderr_text().find("which did not answer") != std::string::npos ||
              upload.stderr_text().find("no reply from the control plane within 2s") != std::string::npos)
      << upload.stderr_text();
  EXPECT_NE(upload.stderr_text().find("(nothing was published; run mesh publish again"), std::string::npos)
      << upload.stderr_text();
  EXPECT_EQ(snapshot(repo()), before) << "nothing of the cut upload in the repository";

  auto again = mesh({"publish", deb.string(), "--output", "json"}, 300000);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err << control_logs();
  EXPECT_EQ(slurp(repo() / "pool" / "main" / "nox-mesh-test-cut" / "nox-mesh-test-cut_1.0_all.deb"), slurp(deb));
}

}  // namespace
}  // namespace mesh::itest
