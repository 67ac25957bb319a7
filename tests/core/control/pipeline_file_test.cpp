// Pipeline files: stages in order, settings checked against each stage plugin's schema, and bad
// input refused naming the file, the line and the key.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "mesh/control/pipeline.h"
#include "mesh/testing/temp_dir.h"

namespace {

using mesh::control::load_pipeline;
using mesh::control::parse_pipeline;
using mesh::sdk::Attribute;
using mesh::sdk::ErrorCode;
using mesh::sdk::Schema;
using mesh::sdk::Value;
using mesh::sdk::ValueType;

const Schema kBuild{"build",
                    "",
                    {Attribute{"command", ValueType::StringList, true, ""},
                     Attribute{"artifacts", ValueType::StringList, false, ""},
                     Attribute{"timeout", ValueType::Duration, false, "", {}, Value("30m")}}};
const Schema kDeploy{"deploy", "", {Attribute{"module", ValueType::String, true, ""}}};

const Schema* lookup(std::string_view plugin) {
  if (plugin == "build") return &kBuild;
  if (plugin == "deploy") return &kDeploy;
  return nullptr;
}

constexpr const char* kGood = R"(description = "build and deploy hello"

[[stage]]
plugin = "build"
command = ["dpkg-deb", "--build", "src", "hello_{{version}}_all.deb"]
artifacts = ["*.deb"]

[[stage]]
plugin = "deploy"
name = "deploy-web"
module = "hello"
)";

TEST(PipelineFile, StagesInOrderWithTheirSettingsAndDefaults) {
  auto p = parse_pipeline(kGood, "hello.toml", "hello", lookup);
  ASSERT_TRUE(p) << p.error().describe();
  EXPECT_EQ(p->name, "hello");
  EXPECT_EQ(p->description, "build and deploy hello");
  ASSERT_EQ(p->stages.size(), 2u);
  EXPECT_EQ(p->stages[0].name, "build");
  EXPECT_EQ(p->stages[0].plugin, "build");
  EXPECT_EQ(p->stages[0].settings.get_string("timeout"), "30m");
  EXPECT_EQ(p->stages[0].settings.find("command")->as_array().size(), 4u);
  EXPECT_EQ(p->stages[1].name, "deploy-web");
  EXPECT_EQ(p->stages[1].settings.get_string("module"), "hello");
  EXPECT_EQ(p->stages[1].settings.find("name"), nullptr);
}

void expect_refused(const std::string& text, const std::string& needle, const std::string& path = "") {
  auto p = parse_pipeline(text, "/srv/pipelines/x.toml", "x", lookup);
  ASSERT_FALSE(p) << text;
  EXPECT_EQ(p.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(p.error().message.find("/srv/pipelines/x.toml"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find(needle), std::string::npos) << p.error().message;
  if (!path.empty()) {
    EXPECT_EQ(p.error().path, path) << p.error().message;
  }
}

TEST(PipelineFile, AnUnknownStageSettingNamesTheFileTheLineAndTheKey) {
  auto p = parse_pipeline("[[stage]]\nplugin = \"build\"\ncommand = [\"make\"]\ncomand = [\"make\"]\n",
                          "/srv/pipelines/x.toml", "x", lookup);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(p.error().path, "stage[0].comand");
  EXPECT_NE(p.error().message.find("/srv/pipelines/x.toml:4: stage[0].comand: unknown key 'comand'"),
            std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().message.find("command"), std::string::npos) << p.error().message;
}

TEST(PipelineFile, BadInputIsRefusedNamingTheKey) {
  expect_refused("descripton = \"x\"\n[[stage]]\nplugin = \"deploy\"\nmodule = \"m\"\n", "unknown key 'descripton'",
                 "descripton");
  expect_refused("description = \"no stages\"\n", "at least one stage");
  expect_refused("[[stage]]\nmodule = \"m\"\n", "no 'plugin'", "stage[0]");
  expect_refused("[[stage]]\nplugin = \"publsh\"\n", "no stage plugin 'publsh'", "stage[0].plugin");
  expect_refused("[[stage]]\nplugin = \"deploy\"\n", "module", "stage[0].module");
  expect_refused("[[stage]]\nplugin = \"build\"\ncommand = \"make\"\n", "stage[0].command", "stage[0].command");
  expect_refused("[[stage]]\nplugin = \"deploy\"\nmodule = \"a\"\n[[stage]]\nplugin = \"deploy\"\nmodule = \"b\"\n",
                 "named twice", "stage[1].name");
  expect_refused("[[stage]]\nplugin = \"deploy\"\nname = \"Bad Name\"\nmodule = \"a\"\n", "stage name",
                 "stage[0].name");
  expect_refused("[[stage]\nplugin = \"deploy\"\n", "x.toml");
}

// A pipeline file as mesh-control's own user writes one: mode 0644 whatever the umask.
void write_safe(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
  std::filesystem::permissions(p, std::filesystem::perms(0644));
}

TEST(PipelineFile, LoadedByNameFromTheDirectoryOnly) {
  mesh::testing::TempDir tmp;
  std::filesystem::permissions(tmp.path(), std::filesystem::perms(0755));
  write_safe(tmp.path() / "hello.toml", kGood);
  auto p = load_pipeline(tmp.path().string(), "hello", lookup);
  ASSERT_TRUE(p) << p.error().describe();
  EXPECT_EQ(p->file, (tmp.path() / "hello.toml").string());
  auto missing = load_pipeline(tmp.path().string(), "nope", lookup);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
  EXPECT_NE(missing.error().message.find("nope"), std::string::npos);
  for (std::string bad : {"../hello", "/etc/passwd", "a/b", "", ".hidden", "Hello"}) {
    auto r = load_pipeline(tmp.path().string(), bad, lookup);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument) << bad;
  }
}

// A file anyone but mesh-control's user (or root) could have written is refused, naming it and
// why: writable by group or others, a symbolic link, not a regular file, another owner; the
// same for the directory.
TEST(PipelineFile, AFileOrDirectoryOthersCouldHaveWrittenIsRefused) {
  namespace fs = std::filesystem;
  mesh::testing::TempDir tmp;
  const fs::path dir = tmp.path() / "pipelines";
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms(0755));
  auto refused = [&](const std::string& name, const std::string& why) {
    auto r = load_pipeline(dir.string(), name, lookup);
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument) << r.error().describe();
    EXPECT_NE(r.error().message.find(name + ".toml"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
  };
  write_safe(dir / "ok.toml", kGood);
  ASSERT_TRUE(load_pipeline(dir.string(), "ok", lookup));

  write_safe(dir / "ww.toml", kGood);
  fs::permissions(dir / "ww.toml", fs::perms(0666));
  refused("ww", "writable by group or others (mode 0666)");
  fs::permissions(dir / "ww.toml", fs::perms(0664));
  refused("ww", "writable by group or others (mode 0664)");

  write_safe(tmp.path() / "evil.toml", kGood);
  fs::create_symlink(tmp.path() / "evil.toml", dir / "ln.toml");
  refused("ln", "a symbolic link");

  ASSERT_EQ(::mkfifo((dir / "fifo.toml").c_str(), 0644), 0);
  refused("fifo", "not a regular file");
  fs::create_directory(dir / "sub.toml");
  fs::permissions(dir / "sub.toml", fs::perms(0755));
  refused("sub", "not a regular file");

  if (::geteuid() == 0) {
    write_safe(dir / "theirs.toml", kGood);
    ASSERT_EQ(::chown((dir / "theirs.toml").c_str(), 65534, 65534), 0);
    refused("theirs", "owned by uid 65534");
  }

  // The directory: writable by others, or another's.
  fs::permissions(dir, fs::perms(0777));
  auto open_dir = load_pipeline(dir.string(), "ok", lookup);
  ASSERT_FALSE(open_dir);
  EXPECT_EQ(open_dir.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(open_dir.error().message.find("the pipelines directory " + dir.string()), std::string::npos)
      << open_dir.error().message;
  EXPECT_NE(open_dir.error().message.find("mode 0777"), std::string::npos) << open_dir.error().message;
  fs::permissions(dir, fs::perms(0755));
  ASSERT_TRUE(load_pipeline(dir.string(), "ok", lookup));
  if (::geteuid() != 0) GTEST_SKIP() << "another owner: needs root to chown to nobody";
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  auto theirs = load_pipeline(dir.string(), "ok", lookup);
  ASSERT_FALSE(theirs);
  EXPECT_NE(theirs.error().message.find("owned by uid 65534"), std::string::npos) << theirs.error().message;
}

}  // namespace
