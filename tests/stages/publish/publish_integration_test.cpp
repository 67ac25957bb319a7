// `mesh publish` against a real mesh-control with the publish stage and its repository served
// over HTTP (label integration): the file goes in signed chunks with its digest checked at both
// ends; a wrong digest, a file that is not a .deb, an interrupted upload and a reader's attempt
// leave the repository as it was; a 100 MB package works.
#include <gtest/gtest.h>

#include "mesh/common/crypto.h"
#include "publish_mesh_fixture.h"

namespace mesh::stages::publish::test {
namespace {

using sdk::ErrorCode;
using sdk::Value;

sdk::Result<Value> upload(cli::Client& c, const std::string& id, const std::string& bytes, std::size_t chunk) {
  Value last = Value::object();
  for (std::size_t off = 0; off < bytes.size(); off += chunk) {
    Value p = Value::object();
    p.set("upload", id);
    p.set("offset", static_cast<std::int64_t>(off));
    p.set("data", common::base64url_encode(std::string_view(bytes).substr(off, chunk)));
    auto r = c.call("publish.part", p);
    if (!r) return r;
    last = *r;
  }
  return last;
}

TEST_F(PublishMeshTest, PublishesAndServesTheSignedRepository) {
  const auto deb = build_deb(dir(), "nox-mesh-test-served", "1.0");
  auto r = mesh({"publish", deb.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << control_->stderr_text();
  std::cout << "[ observed ] " << r.out;
  EXPECT_NE(r.out.find("published nox-mesh-test-served 1.0 (all) as pool/main/nox-mesh-test-served/"
                       "nox-mesh-test-served_1.0_all.deb"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("checked end to end"), std::string::npos) << r.out;
  const std::string pool = "/pool/main/nox-mesh-test-served/nox-mesh-test-served_1.0_all.deb";
  EXPECT_EQ(slurp(repo() / pool.substr(1)), slurp(deb));

  // Served read-only over HTTP: the index, the pool file, the key.
  auto in_release = http_request(port(), "GET", "/dists/mesh/InRelease");
  EXPECT_EQ(in_release.status, 200);
  EXPECT_EQ(in_release.body, slurp(repo() / "dists/mesh/InRelease"));
  auto packages = http_request(port(), "GET", "/dists/mesh/main/binary-amd64/Packages");
  EXPECT_EQ(packages.status, 200);
  EXPECT_NE(packages.body.find("Package: nox-mesh-test-served"), std::string::npos) << packages.body;
  auto file = http_request(port(), "GET", pool);
  EXPECT_EQ(file.status, 200);
  EXPECT_EQ(file.body, slurp(deb));
  EXPECT_EQ(http_request(port(), "HEAD", pool).status, 200);
  EXPECT_EQ(http_request(port(), "GET", "/pool/main/nox-mesh-test-served%2Fnox-mesh-test-served_1.0_all.deb").status, 200);
  // Nothing else: hidden names, '..', directories, other methods.
  EXPECT_EQ(http_request(port(), "GET", "/.lock").status, 404);
  EXPECT_EQ(http_request(port(), "GET", "/dists/mesh/.signed-by").status, 404);
  EXPECT_EQ(http_request(port(), "GET", "/dists/../../control/control.key").status, 404);
  EXPECT_EQ(http_request(port(), "GET", "/dists/%2e%2e/%2e%2e/control/control.key").status, 404);
  EXPECT_EQ(http_request(port(), "GET", "/dists/mesh/").status, 404);
  EXPECT_EQ(http_request(port(), "GET", "/nope").status, 404);
  EXPECT_EQ(http_request(port(), "PUT", "/x").status, 405);

  // The public key, over the signed API.
  auto key = mesh({"repository", "key"});
  ASSERT_EQ(key.exit_code, 0) << key.err;
  EXPECT_EQ(key.out, slurp(repo() / "mesh-repository.asc"));
  EXPECT_NE(key.out.find("BEGIN PGP PUBLIC KEY BLOCK"), std::string::npos);

  // The same file again: already published; the JSON answer carries the digest.
  auto again = mesh({"publish", deb.string(), "--output", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const Value v = itest::json(again.out);
  EXPECT_TRUE(v.get_bool("already", false));
  EXPECT_EQ(v.get_string("sha256"), common::sha256_hex(slurp(deb)));
}

TEST_F(PublishMeshTest, WrongDigestNotADebInterruptedAndReaderChangeNothing) {
  const auto first = build_deb(dir(), "nox-mesh-test-first", "1.0");
  ASSERT_EQ(mesh({"publish", first.string()}).exit_code, 0);
  const auto before = snapshot(repo());

  // Not a .deb: refused by mesh before anything is sent.
  spit(dir() / "notes.deb", "just text\n");
  auto local = mesh({"publish", (dir() / "notes.deb").string()});
  EXPECT_EQ(local.exit_code, 2) << local.err;
  EXPECT_NE(local.err.find("not a Debian binary package"), std::string::npos) << local.err;

  auto c = client();
  ASSERT_TRUE(c);
  const std::string bytes = slurp(build_deb(dir() / "b", "nox-mesh-test-second", "1.0"));

  // The whole file arrives but its digest is not the announced one.
  ASSERT_TRUE(upload(*c, "aaaaaaaaaaaaaaaa1", bytes, 1000));
  Value p = Value::object();
  p.set("upload", "aaaaaaaaaaaaaaaa1");
  p.set("file", "second.deb");
  p.set("size", static_cast<std::int64_t>(bytes.size()));
  p.set("sha256", std::string(64, 'a'));
  auto wrong = c->call("publish", p);
  ASSERT_FALSE(wrong);
  std::cout << "[ observed ] " << wrong.error().describe() << "\n";
  EXPECT_EQ(wrong.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(wrong.error().message.find("second.deb: the file's SHA-256 is"), std::string::npos) << wrong.error().message;
  EXPECT_EQ(snapshot(repo()), before);
  // The upload was used up: naming it again finds nothing.
  p.set("sha256", common::sha256_hex(bytes));
  auto reused = c->call("publish", p);
  ASSERT_FALSE(reused);
  EXPECT_EQ(reused.error().code, ErrorCode::FailedPrecondition);

  // Interrupted: half the file, then `publish` of it (size differs), and a half upload left alone.
  ASSERT_TRUE(upload(*c, "bbbbbbbbbbbbbbbb2", bytes.substr(0, bytes.size() / 2), 1000));
  p.set("upload", "bbbbbbbbbbbbbbbb2");
  auto short_one = c->call("publish", p);
  ASSERT_FALSE(short_one);
  EXPECT_EQ(short_one.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(short_one.error().path, "size");
  ASSERT_TRUE(upload(*c, "cccccccccccccccc3", bytes.substr(0, bytes.size() / 2), 1000));
  EXPECT_EQ(snapshot(repo()), before);
  // A chunk out of order is refused.
  Value gap = Value::object();
  gap.set("upload", "cccccccccccccccc3");
  gap.set("offset", static_cast<std::int64_t>(bytes.size()));
  gap.set("data", common::base64url_encode("x"));
  auto gapped = c->call("publish.part", gap);
  ASSERT_FALSE(gapped);
  EXPECT_EQ(gapped.error().code, ErrorCode::FailedPrecondition);

  // Garbage with its own right digest: the stage refuses it.
  const std::string garbage = "!<arch>\ndebian-binary   not really a package, only its first bytes";
  ASSERT_TRUE(upload(*c, "dddddddddddddddd4", garbage, 1000));
  p.set("upload", "dddddddddddddddd4");
  p.set("size", static_cast<std::int64_t>(garbage.size()));
  p.set("sha256", common::sha256_hex(garbage));
  p.set("file", "fake.deb");
  auto fake = c->call("publish", p);
  ASSERT_FALSE(fake);
  std::cout << "[ observed ] " << fake.error().describe() << "\n";
  EXPECT_EQ(fake.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(fake.error().message.find("fake.deb: not a valid .deb"), std::string::npos) << fake.error().message;
  EXPECT_EQ(fake.error().message.find(dir().string()), std::string::npos) << "names the file, not the work dir";
  EXPECT_EQ(snapshot(repo()), before);

  // A reader may read the key but not publish.
  auto reader = mesh({"operator", "add", "viewer", "--role", "reader"});
  ASSERT_EQ(reader.exit_code, 0) << reader.err;
  itest::write_text(dir() / "viewer.identity", reader.out);
  ::chmod((dir() / "viewer.identity").c_str(), 0600);
  auto refused = mesh_as((dir() / "viewer.identity").string(), {"publish", first.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("deployer"), std::string::npos) << refused.err;
  EXPECT_EQ(mesh_as((dir() / "viewer.identity").string(), {"repository", "key"}).exit_code, 0);
  EXPECT_EQ(snapshot(repo()), before);
}

TEST_F(PublishMeshTest, AHundredMegabytePackage) {
  const auto deb = build_deb(dir(), "nox-mesh-test-big", "1.0", "all", "", 100u << 20);
  ASSERT_GT(fs::file_size(deb), 100u << 20);
  auto r = mesh({"publish", deb.string(), "--output", "json"}, 600000);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << control_->stderr_text().substr(0, 20000);
  const Value v = itest::json(r.out);
  const std::string digest = common::sha256_hex(slurp(deb));
  EXPECT_EQ(v.get_string("sha256"), digest);
  EXPECT_EQ(v.get_int("size", -1), static_cast<std::int64_t>(fs::file_size(deb)));
  EXPECT_EQ(common::sha256_hex(slurp(repo() / v.get_string("filename"))), digest);
  auto served = http_request(port(), "GET", "/" + v.get_string("filename"));
  EXPECT_EQ(served.status, 200);
  EXPECT_EQ(common::sha256_hex(served.body), digest);
  // The spool is empty again.
  std::size_t spooled = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir() / "control" / "work" / "uploads", ec)) spooled += e.is_regular_file();
  EXPECT_EQ(spooled, 0u);
}

// mesh-control killed in the middle of `mesh publish`: mesh stops with exit 3 saying where, the
// repository is as it was, and after a restart the same file publishes.
TEST_F(PublishMeshTest, AnUploadCutByAControlPlaneCrashPublishesNothing) {
  const auto deb = build_deb(dir(), "nox-mesh-test-cut", "1.0", "all", "", 24u << 20);
  const auto before = snapshot(repo());
  // Small chunks, so that the upload is still running when mesh-control dies.
  mesh::testing::BackgroundProcess upload({itest::bin("mesh"), "--server", nats_->url(), "--plugin-dir",
                                           MESH_TEST_PLUGIN_DIR, "--identity", admin_identity(), "--timeout", "2s",
                                           "publish", deb.string(), "--chunk", "64KiB"});
  // Wait until some chunks arrived, then kill mesh-control.
  const fs::path spool = dir() / "control" / "work" / "uploads";
  ASSERT_TRUE(mesh::testing::eventually(
      [&] {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(spool, ec))
          if (e.is_regular_file() && fs::file_size(e.path(), ec) > (1u << 20)) return true;
        return false;
      },
      60000))
      << upload.stderr_text();
  control_->stop(SIGKILL);
  ASSERT_TRUE(mesh::testing::eventually([&] { return !upload.running(); }, 60000));
  EXPECT_EQ(upload.exit_code(), 3) << upload.stderr_text();
  std::cout << "[ observed ] " << upload.stderr_text();
  EXPECT_NE(upload.stderr_text().find("(nothing was published; run mesh publish again"), std::string::npos) << upload.stderr_text();
  EXPECT_EQ(snapshot(repo()), before);

  std::size_t cut = 0;
  {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(spool, ec)) cut += e.is_regular_file();
  }
  EXPECT_GT(cut, 0u) << "the cut upload's spool file is there until the restart";
  restart_control();
  EXPECT_EQ(snapshot(repo()), before) << "a restart publishes nothing of the cut upload";
  {
    std::size_t left = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(spool, ec)) left += e.is_regular_file();
    EXPECT_EQ(left, 0u) << "the restart removes the cut upload's spool file: an interrupted upload leaves nothing";
  }
  auto again = mesh({"publish", deb.string()}, 300000);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_TRUE(fs::exists(repo() / "pool/main/nox-mesh-test-cut/nox-mesh-test-cut_1.0_all.deb"));
}

}  // namespace
}  // namespace mesh::stages::publish::test

namespace mesh::stages::publish::test {
namespace {

// A bad [stages.publish] or [repository] stops mesh-control with exit 2 naming the file, line
// and key, before any key, identity or repository is written.
TEST(PublishStartupTest, BadStageOrRepositoryConfigStopsTheStartNamingTheKey) {
  mesh::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  auto start = [&](const std::string& extra) {
    const fs::path cfg = dir / "control.toml";
    itest::write_text(cfg, "[control]\nstate_dir = \"" + (dir / "control").string() + "\"\n\n[plugins]\ndir = \"" +
                               MESH_TEST_PLUGIN_DIR + "\"\n\n[transport]\nplugin = \"nats\"\nservers = [\"nats://127.0.0.1:1\"]\n" +
                               extra);
    return mesh::testing::run_process({itest::bin("mesh-control"), "run", "--config", cfg.string()}, {}, 30000);
  };
  const std::string repo = "[repository]\ndir = \"" + (dir / "repo").string() + "\"\n";
  auto unknown = start("[stages]\nload = [\"publish\"]\n[stages.publish]\ncodenam = \"x\"\n" + repo);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("control.toml:13: stages.publish.codenam: unknown key 'codenam'"), std::string::npos)
      << unknown.err;
  auto bad_value = start("[stages]\nload = [\"publish\"]\n[stages.publish]\ncodename = \"Not A Word\"\n" + repo);
  EXPECT_EQ(bad_value.exit_code, 2) << bad_value.err;
  EXPECT_NE(bad_value.err.find("stages.publish.codename: 'Not A Word' is not a word"), std::string::npos) << bad_value.err;
  auto missing = start("[stages]\nload = [\"publsh\"]\n" + repo);
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("stages.load: no stage plugin 'publsh'"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("publish)"), std::string::npos) << "names the stage plugins there: " << missing.err;
  auto open = start("[stages]\nload = [\"publish\"]\n" + repo + "listen = \"0.0.0.0:8080\"\n");
  EXPECT_EQ(open.exit_code, 2) << open.err;
  EXPECT_NE(open.err.find("repository.listen: '0.0.0.0:8080': not a loopback address"), std::string::npos) << open.err;
  auto no_dir = start("[stages]\nload = [\"publish\"]\n");
  EXPECT_EQ(no_dir.exit_code, 2) << no_dir.err;
  EXPECT_NE(no_dir.err.find("stages.publish.repository"), std::string::npos) << no_dir.err;
  EXPECT_FALSE(fs::exists(dir / "control" / "control.key"));
  EXPECT_FALSE(fs::exists(dir / "control" / "admin.identity"));
  EXPECT_FALSE(fs::exists(dir / "repo"));
}

}  // namespace
}  // namespace mesh::stages::publish::test
