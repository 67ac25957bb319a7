// A big node end to end through the control plane (issue 16 part 4): a declaration of 20,000
// file resources (about 2.9 MB, nearly three times a stock broker's 1 MiB max_payload) uploaded
// by `mesh declare` in parts, pushed to the host in parts, applied, its report (a long owned
// list) sent back in parts, and every file read back.
#include <gtest/gtest.h>

#include <fstream>

#include "mesh_fixture.h"

namespace mesh::itest {
namespace {

TEST_F(MeshTest, ANodeOfTwentyThousandResourcesIsDeclaredPushedAppliedAndReportedThroughTheControlPlane) {
  constexpr int kFiles = 20000;
  const fs::path files = dir() / "files";
  fs::create_directories(files);
  std::vector<std::pair<std::string, std::string>> decl;
  decl.reserve(kFiles);
  for (int i = 0; i < kFiles; ++i)
    decl.emplace_back((files / ("f" + std::to_string(i))).string(), "content of file number " + std::to_string(i) + "\n");
  const std::string text = file_declaration(decl);
  ASSERT_GT(text.size(), std::size_t{2} << 20) << "over the broker's 1 MiB max_payload by far";

  Host& h = add_host("big-20k", "5s");
  start_host(h);
  const sdk::Value d = declare("big-20k", text);
  const std::int64_t delivery = d.get_int("delivery", 0);
  ASSERT_GT(delivery, 0) << d.to_json();
  // Polled (each `mesh report` without --wait): the apply of 20,000 durable files takes a while.
  sdk::Value rep;
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        rep = report(delivery);
        return count(rep, "applied") + count(rep, "failed") == 1;
      },
      900000))
      << rep.to_json().substr(0, 2048) << h.proc->stderr_text().substr(0, 4096);
  ASSERT_EQ(count(rep, "applied"), 1u) << rep.to_json().substr(0, 2048);

  for (int i = 0; i < kFiles; ++i)
    ASSERT_EQ(read_text(files / ("f" + std::to_string(i))), decl[static_cast<std::size_t>(i)].second) << i;
  // The control plane holds the complete owned list (the recovery copy), sent in parts.
  auto show = mesh({"node", "show", "big-20k", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const sdk::Value view = json(show.out);
  ASSERT_TRUE(view.find("owned") && view.find("owned")->is_array()) << show.out.substr(0, 512);
  EXPECT_EQ(view.find("owned")->as_array().size(), static_cast<std::size_t>(kFiles));
}

TEST_F(MeshTest, ADeclarationOverTheHostsLimitIsAFailedReportNamingTheKey) {
  Host& h = add_host("small-01", "5s");
  {
    std::ofstream(h.config, std::ios::app) << "\n[limits]\nmax_declaration = 100000\n";
  }
  start_host(h);
  const std::string text = file_declaration({{(dir() / "big.txt").string(), std::string(300000, 'b')}});
  const sdk::Value d = declare("small-01", text);
  const std::int64_t delivery = d.get_int("delivery", 0);
  ASSERT_GT(delivery, 0) << d.to_json();
  sdk::Value rep;
  ASSERT_TRUE(mesh::testing::eventually([&] { rep = report(delivery); return count(rep, "failed") == 1; }, 60000))
      << rep.to_json() << h.proc->stderr_text();
  const std::string shown = rep.to_json();
  EXPECT_NE(shown.find("over the limit of 100000 bytes"), std::string::npos) << shown;
  EXPECT_NE(shown.find("limits.max_declaration"), std::string::npos) << shown;
  EXPECT_FALSE(fs::exists(dir() / "big.txt"));
}

}  // namespace
}  // namespace mesh::itest
