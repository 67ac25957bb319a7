// The publish stage pushing a container image by digest to a registry (label system: root
// podman, Debian's docker-registry on a free loopback port). The image is made from busybox
// with a private podman storage in the test's folder and saved as an OCI archive; the stage loads
// it into its own private storage, pushes it, and the registry then serves the manifest whose
// digest the stage reported.
#include <gtest/gtest.h>

#include <unistd.h>

#include "mesh/common/crypto.h"
#include "mesh/sdk/sdk.h"
#include "mesh/testing/process.h"
#include "mesh/testing/temp_dir.h"
#include "publish_stage.h"
#include "publish_test_util.h"

namespace mesh::stages::publish::test {
namespace {

using sdk::ErrorCode;
using sdk::Value;

class Context final : public sdk::StageContext {
 public:
  explicit Context(std::string work) : work_(std::move(work)) {}
  std::uint64_t run_id() const noexcept override { return 3; }
  std::string operator_name() const override { return "tester"; }
  std::string work_dir() const override { return work_; }
  const Value& artifacts() const override { return artifacts_; }
  void log(std::string_view line) override { lines.emplace_back(line); }
  sdk::Result<Value> deploy(const std::string&, const std::string&, const Value&) override {
    return sdk::fail(ErrorCode::Unsupported, "no deploy here");
  }
  Value artifacts_ = Value::object();
  std::vector<std::string> lines;

 private:
  std::string work_;
};

TEST(PublishImageSystemTest, PushesAnOciArchiveByDigest) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (podman)";
  for (const char* tool : {"/usr/bin/podman", "/usr/bin/docker-registry", "/bin/busybox"})
    if (::access(tool, X_OK) != 0) GTEST_SKIP() << tool << " is not installed";
  mesh::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  const int port = mesh::testing::free_tcp_port();
  spit(dir / "registry.yml", "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: " +
                                 (dir / "registry").string() + "\nhttp:\n  addr: 127.0.0.1:" + std::to_string(port) + "\n");
  mesh::testing::BackgroundProcess registry({"/usr/bin/docker-registry", "serve", (dir / "registry.yml").string()});
  ASSERT_TRUE(mesh::testing::eventually([&] { return http_request(port, "GET", "/v2/").status == 200; }, 20000))
      << registry.stderr_text();

  // An image of busybox, saved as an OCI archive, from a podman storage of the test's own.
  fs::create_directories(dir / "rootfs" / "bin");
  fs::copy_file("/bin/busybox", dir / "rootfs" / "bin" / "busybox");
  auto tar = mesh::testing::run_process({"/usr/bin/tar", "-C", (dir / "rootfs").string(), "-cf", (dir / "rootfs.tar").string(), "."});
  ASSERT_EQ(tar.exit_code, 0) << tar.err;
  const std::vector<std::string> podman{"/usr/bin/podman", "--root", (dir / "podman" / "root").string(), "--runroot",
                                        (dir / "podman" / "run").string(), "--storage-driver", "vfs"};
  auto run_podman = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = podman;
    argv.insert(argv.end(), args.begin(), args.end());
    return mesh::testing::run_process(argv, {}, 120000);
  };
  auto imported = run_podman({"import", (dir / "rootfs.tar").string(), "localhost/nox-mesh-test-image:1"});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  auto saved = run_podman({"save", "--format", "oci-archive", "-o", (dir / "app.tar").string(), "localhost/nox-mesh-test-image:1"});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;

  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  host.role = "tool";
  host.state_dir = (dir / "state").string();
  fs::create_directories(host.state_dir);
  {
    PublishStage stage(host);
    Value config = Value::object();
    config.set("repository", (dir / "repo").string());
    config.set("registry", "127.0.0.1:" + std::to_string(port));
    config.set("registry_tls_verify", false);
    auto ok = stage.configure(sdk::apply_defaults(stage.config_schema(), config));
    ASSERT_TRUE(ok) << ok.error().describe();

    Context ctx((dir / "work").string());
    Value file = Value::object();
    file.set("path", (dir / "app.tar").string());
    ctx.artifacts_.set("build", Value(Value::Array{file}));
    sdk::StageInput in;
    Value image = Value::object();
    image.set("name", "nox-mesh/app");
    image.set("tag", "1.0");
    in.params.set("image", image);
    sdk::CancelToken cancel;
    auto out = stage.run(in, ctx, cancel);
    ASSERT_TRUE(out) << out.error().describe();
    const Value& img = out->artifacts.find("images")->as_array().at(0);
    const std::string digest = img.get_string("digest");
    ASSERT_EQ(digest.rfind("sha256:", 0), 0u) << digest;
    EXPECT_EQ(img.get_string("reference"), "127.0.0.1:" + std::to_string(port) + "/nox-mesh/app@" + digest);
    std::cout << "[ observed ] " << ctx.lines.back() << "\n";

    // The registry serves the manifest by that digest, and its bytes hash to it.
    auto manifest = http_request(port, "GET", "/v2/nox-mesh/app/manifests/" + digest,
                                 "Accept: application/vnd.oci.image.manifest.v1+json, "
                                 "application/vnd.docker.distribution.manifest.v2+json\r\n");
    EXPECT_EQ(manifest.status, 200) << manifest.body;
    EXPECT_EQ("sha256:" + common::sha256_hex(manifest.body), digest);
    EXPECT_EQ(http_request(port, "GET", "/v2/nox-mesh/app/manifests/1.0",
                           "Accept: application/vnd.oci.image.manifest.v1+json, "
                           "application/vnd.docker.distribution.manifest.v2+json\r\n")
                  .status,
              200);

    // Bad input names the param; a file that is not an OCI archive is refused.
    image.set("tag", "not a tag");
    in.params.set("image", image);
    auto bad_tag = stage.run(in, ctx, cancel);
    ASSERT_FALSE(bad_tag);
    EXPECT_EQ(bad_tag.error().path, "image.tag");
    spit(dir / "junk.tar", "junk");
    image.set("tag", "2.0");
    image.set("archive", (dir / "junk.tar").string());
    in.params.set("image", image);
    auto junk = stage.run(in, ctx, cancel);
    ASSERT_FALSE(junk);
    EXPECT_EQ(junk.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(junk.error().message.find("not an OCI archive"), std::string::npos) << junk.error().describe();
  }
  // The stage's own storage holds no image afterwards.
  auto left = mesh::testing::run_process({"/usr/bin/podman", "--root", (dir / "state" / "images" / "root").string(),
                                          "--runroot", (dir / "state" / "images" / "run").string(), "--storage-driver",
                                          "vfs", "images", "-q"});
  EXPECT_EQ(left.out, "") << left.out;
  run_podman({"system", "reset", "--force"});
  mesh::testing::run_process({"/usr/bin/podman", "--root", (dir / "state" / "images" / "root").string(), "--runroot",
                              (dir / "state" / "images" / "run").string(), "--storage-driver", "vfs", "system", "reset",
                              "--force"});
}

}  // namespace
}  // namespace mesh::stages::publish::test
