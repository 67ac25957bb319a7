// Unit tests of the file provider, constructed directly (no dlopen), each in its own mkdtemp
// directory. Tests run as root in CI, where directory permissions do not stop writes; failures
// are provoked in ways that hold for root too (a parent that is a regular file, a file-size
// limit, or a child process that drops to an unprivileged user).
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "file_provider.h"
#include "file_test_support.h"

namespace mesh::plugins::file::test {
namespace {

using sdk::CancelToken;
using sdk::ErrorCode;
using sdk::Plan;
using sdk::PlanAction;
using sdk::Resource;
using sdk::State;
using sdk::Value;

bool running_as_root() { return ::geteuid() == 0; }

bool has_user(const char* name) { return ::getpwnam(name) != nullptr; }
bool has_group(const char* name) { return ::getgrnam(name) != nullptr; }

// The engine's sequence: defaults, validate, read, plan, apply. Returns the apply result.
sdk::Result<State> engine_apply(FileProvider& p, Resource r) {
  r.properties = sdk::apply_defaults(p.schema(), r.properties);
  if (auto ok = p.validate(r); !ok) return sdk::fail(ok.error());
  auto observed = p.read(r.rid);
  if (!observed) return sdk::fail(observed.error());
  auto plan = p.plan(r, *observed);
  if (!plan) return sdk::fail(plan.error());
  CancelToken cancel;
  return p.apply(*plan, cancel);
}

Plan plan_for(FileProvider& p, Resource r) {
  r.properties = sdk::apply_defaults(p.schema(), r.properties);
  auto observed = p.read(r.rid);
  EXPECT_TRUE(observed) << observed.error().describe();
  auto plan = p.plan(r, observed ? *observed : std::nullopt);
  EXPECT_TRUE(plan) << plan.error().describe();
  return plan ? *plan : Plan{};
}

std::string change_paths(const Plan& plan) {
  std::string out;
  for (const auto& c : plan.changes) out += (out.empty() ? "" : ",") + c.path;
  return out;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// --- validate and configure ---------------------------------------------------------------------

TEST(FileProviderValidateTest, ErrorsNameTheProblem) {
  TempDir dir;
  Harness h;
  auto r = h.provider->validate(file_resource("etc/motd", {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().path, "id");
  EXPECT_TRUE(contains(r.error().message, "not an absolute path")) << r.error().message;

  r = h.provider->validate(file_resource(dir / "x", {{"mode", "0999"}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.mode");
  EXPECT_TRUE(contains(r.error().message, "'0999'")) << r.error().message;

  r = h.provider->validate(file_resource(dir / "x", {{"owner", "no-such-user-nox-mesh"}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.owner");
  EXPECT_TRUE(contains(r.error().message, "unknown user")) << r.error().message;

  r = h.provider->validate(file_resource(dir / "x", {{"content", std::string("ab\xff")}}));
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "byte 2")) << r.error().message;
}

TEST(FileProviderValidateTest, AcceptsWhatTheRulesAllow) {
  TempDir dir;
  Harness h;
  for (const char* mode : {"644", "0644", "4755", "7777", "000"})
    EXPECT_TRUE(h.provider->validate(file_resource(dir / "x", {{"mode", mode}}))) << mode;
  // A numeric id need not exist in the passwd database.
  EXPECT_TRUE(
      h.provider->validate(file_resource(dir / "x", {{"owner", "12345"}, {"group", "54321"}})));
  EXPECT_TRUE(h.provider->validate(file_resource(dir / "x", {{"owner", "root"}})));
  // Valid UTF-8 in several lengths, and NUL, are text.
  EXPECT_TRUE(h.provider->validate(file_resource(
      dir / "x", {{"content", std::string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0z", 11)}})));
  // base64 as `base64(1)` wraps it.
  EXPECT_TRUE(h.provider->validate(file_resource(dir / "x", {{"content_base64", "aGVs\nbG8=\n"}})));
  // Dots inside names are fine; only "." and ".." components are not.
  EXPECT_TRUE(h.provider->validate(file_resource(dir / "..x/.y./...", {})));
}

TEST(FileProviderValidateTest, AllowedRootsAreNotStringPrefixes) {
  TempDir dir;
  const std::string root = dir / "root";
  Harness h({root});
  EXPECT_TRUE(h.provider->validate(file_resource(root + "/a/b", {})));
  auto r = h.provider->validate(file_resource(root + "2/a", {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "id");
  EXPECT_TRUE(contains(r.error().message, "outside allowed roots")) << r.error().message;
  // The root itself is a directory, never a file the provider may replace... but lexically it is
  // inside; it is the directory check at read/apply that refuses it.
  Harness everything({"/"});
  EXPECT_TRUE(everything.provider->validate(file_resource(dir / "x", {})));
}

TEST(FileProviderValidateTest, ConfigIsChecked) {
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  FileProvider p(host);
  auto configure = [&](Value config) { return p.configure(config); };

  Value config = Value::object();
  config.set("allowed_roots", Value(Value::Array{Value("/srv"), Value("srv/relative")}));
  auto r = configure(config);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().path, "allowed_roots[1]");

  config.set("allowed_roots", Value(Value::Array{Value("/srv/")}));
  r = configure(config);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "allowed_roots[0]");

  config.set("allowed_roots", Value::array());
  r = configure(config);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "allowed_roots");

  config = Value::object();
  config.set("allowed_root", Value::array());
  r = configure(config);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "allowed_root");
  EXPECT_TRUE(contains(r.error().message, "allowed_roots")) << r.error().message;

  EXPECT_TRUE(configure(Value::object()));
  EXPECT_TRUE(configure(Value()));
}

// --- read ---------------------------------------------------------------------------------------

TEST(FileProviderReadTest, ReportsWhatIsOnDisk) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "hello\n", 0640));
  auto r = h.provider->read({"file", dir / "f"});
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(r->has_value());
  const Value& p = (*r)->properties;
  // sha256("hello\n")
  EXPECT_EQ(p.get_string("sha256"),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  EXPECT_EQ(p.get_int("size", -1), 6);
  EXPECT_EQ(p.get_string("mode"), "0640");
  EXPECT_EQ(p.get_string("ensure"), "present");
  const struct stat st = lstat_of(dir / "f");
  EXPECT_EQ(p.get_int("uid", -1), static_cast<std::int64_t>(st.st_uid));
  if (running_as_root()) {
    EXPECT_EQ(p.get_string("owner"), "root");
    EXPECT_EQ(p.get_string("group"), "root");
  }
}

TEST(FileProviderReadTest, AbsentIsNullopt) {
  TempDir dir;
  Harness h;
  for (const std::string& path : {dir / "missing", dir / "no/such/dir/file"}) {
    auto r = h.provider->read({"file", path});
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_FALSE(r->has_value()) << path;
  }
  // A parent that is a regular file: the path cannot exist.
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "plain", "x"));
  auto r = h.provider->read({"file", dir / "plain/child"});
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(r->has_value());
}

TEST(FileProviderReadTest, UnknownOwnerIsShownAsNumber) {
  if (!running_as_root()) GTEST_SKIP() << "chown to another uid needs root";
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "x"));
  ASSERT_EQ(::chown((dir / "f").c_str(), 54321, 54322), 0);
  if (::getpwuid(54321) || ::getgrgid(54322)) GTEST_SKIP() << "uid 54321 or gid 54322 exists";
  auto r = h.provider->read({"file", dir / "f"});
  ASSERT_TRUE(r && r->has_value());
  EXPECT_EQ((*r)->properties.get_string("owner"), "54321");
  EXPECT_EQ((*r)->properties.get_string("group"), "54322");
  // And a declaration naming it numerically is satisfied.
  Plan plan =
      plan_for(*h.provider, file_resource(dir / "f", {{"owner", "54321"}, {"group", "54322"}}));
  EXPECT_TRUE(plan.empty()) << change_paths(plan);
}

TEST(FileProviderReadTest, RefusesSymlinkDirectoryAndFifo) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "real", "secret"));
  ASSERT_EQ(::symlink((dir / "real").c_str(), (dir / "link").c_str()), 0);
  ASSERT_EQ(::mkdir((dir / "sub").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);

  auto r = h.provider->read({"file", dir / "link"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(r.error().message, "symbolic link")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, dir / "link")) << r.error().message;

  r = h.provider->read({"file", dir / "sub"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(r.error().message, "directory")) << r.error().message;

  r = h.provider->read({"file", dir / "fifo"});  // must not block on open
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(r.error().message, "FIFO")) << r.error().message;
}

// --- plan ---------------------------------------------------------------------------------------

TEST(FileProviderPlanTest, NormalisedValuesCompareEqual) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "x", 0644));
  const std::string me = std::to_string(::geteuid());
  const std::string my_group = std::to_string(::getegid());
  Plan plan = plan_for(
      *h.provider,
      file_resource(dir / "f",
                    {{"content", "x"}, {"mode", "644"}, {"owner", me}, {"group", my_group}}));
  EXPECT_TRUE(plan.empty()) << change_paths(plan);
  if (running_as_root()) {
    plan = plan_for(*h.provider, file_resource(dir / "f", {{"owner", "root"}, {"group", "root"}}));
    EXPECT_TRUE(plan.empty()) << change_paths(plan);
  }
}

TEST(FileProviderPlanTest, ChangesShowDigestsNotContent) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "old secret", 0600));
  Plan plan = plan_for(*h.provider,
                       file_resource(dir / "f", {{"content", "new secret"}, {"mode", "0640"}}));
  EXPECT_EQ(plan.action, PlanAction::Update);
  EXPECT_EQ(change_paths(plan), "properties.content,properties.mode");
  for (const auto& c : plan.changes) {
    EXPECT_FALSE(contains(c.observed.to_json(), "secret"));
    EXPECT_FALSE(contains(c.declared.to_json(), "secret"));
  }
  EXPECT_EQ(plan.changes[0].declared.as_string().rfind("sha256:", 0), 0u);
  EXPECT_EQ(plan.changes[1].observed, Value("0600"));
  EXPECT_EQ(plan.changes[1].declared, Value("0640"));

  // Base64 content is compared after decoding: "eA==" is "x".
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "g", "x", 0644));
  plan = plan_for(*h.provider, file_resource(dir / "g", {{"content_base64", "eA=="}}));
  EXPECT_TRUE(plan.empty()) << change_paths(plan);
}

TEST(FileProviderPlanTest, CreateAndRemoveActions) {
  TempDir dir;
  Harness h;
  Plan plan = plan_for(*h.provider, file_resource(dir / "f", {{"mode", "0600"}}));
  EXPECT_EQ(plan.action, PlanAction::Create);
  EXPECT_EQ(change_paths(plan), "properties.ensure,properties.mode");

  plan = plan_for(*h.provider, file_resource(dir / "f", {{"ensure", "absent"}}));
  EXPECT_EQ(plan.action, PlanAction::None);

  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "x"));
  plan = plan_for(*h.provider, file_resource(dir / "f", {{"ensure", "absent"}}));
  EXPECT_EQ(plan.action, PlanAction::Remove);
  EXPECT_EQ(change_paths(plan), "properties.ensure");

  // Unmanaged content: an existing file with any content satisfies the declaration.
  plan = plan_for(*h.provider, file_resource(dir / "f", {}));
  EXPECT_TRUE(plan.empty()) << change_paths(plan);
}

// --- apply --------------------------------------------------------------------------------------

TEST(FileProviderApplyTest, WritesDeclaredContentModeAndOwner) {
  TempDir dir;
  Harness h;
  const bool chown_ok = running_as_root() && has_user("nobody") && has_group("nogroup");
  Resource r = file_resource(dir / "f", {{"content", "hello\n"}, {"mode", "0640"}});
  if (chown_ok) {
    r.properties.set("owner", "nobody");
    r.properties.set("group", "nogroup");
  }
  auto applied = engine_apply(*h.provider, r);
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(read_file(dir / "f"), "hello\n");
  const struct stat st = lstat_of(dir / "f");
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  if (chown_ok) {
    EXPECT_EQ(st.st_uid, ::getpwnam("nobody")->pw_uid);
    EXPECT_EQ(st.st_gid, ::getgrnam("nogroup")->gr_gid);
    EXPECT_EQ(applied->properties.get_string("owner"), "nobody");
  }
  EXPECT_TRUE(temp_files_in(dir.path()).empty());
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"f"});
}

TEST(FileProviderApplyTest, NewFileWithoutModeIs0644WhateverTheUmask) {
  TempDir dir;
  Harness h;
  const mode_t old = ::umask(077);
  auto applied = engine_apply(*h.provider, file_resource(dir / "f", {{"content", "x"}}));
  ::umask(old);
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(lstat_of(dir / "f").st_mode & 07777, 0644u);
}

TEST(FileProviderApplyTest, Base64ContentIsDecoded) {
  TempDir dir;
  Harness h;
  auto applied =
      engine_apply(*h.provider, file_resource(dir / "bin", {{"content_base64", "AAEC/w=="}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(read_file(dir / "bin"), std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(applied->properties.get_int("size", -1), 4);
}

TEST(FileProviderApplyTest, ModeOnlyChangeDoesNotRewrite) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "keep", 0644));
  const ino_t inode = lstat_of(dir / "f").st_ino;
  auto applied =
      engine_apply(*h.provider, file_resource(dir / "f", {{"content", "keep"}, {"mode", "0600"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(lstat_of(dir / "f").st_ino, inode) << "the file was replaced, not chmod'ed";
  EXPECT_EQ(lstat_of(dir / "f").st_mode & 07777, 0600u);
  EXPECT_EQ(read_file(dir / "f"), "keep");
}

TEST(FileProviderApplyTest, ContentChangeKeepsUndeclaredModeAndOwner) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "shadow", "old", 0600));
  if (running_as_root()) {
    ASSERT_EQ(::chown((dir / "shadow").c_str(), 65534, 65534), 0);
  }
  auto applied = engine_apply(*h.provider, file_resource(dir / "shadow", {{"content", "new"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  const struct stat st = lstat_of(dir / "shadow");
  EXPECT_EQ(read_file(dir / "shadow"), "new");
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  if (running_as_root()) {
    EXPECT_EQ(st.st_uid, 65534u);
    EXPECT_EQ(st.st_gid, 65534u);
  }
}

TEST(FileProviderApplyTest, SetuidSurvivesOwnerChange) {
  if (!running_as_root()) GTEST_SKIP() << "chown needs root";
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "tool", "#!/bin/sh\n", 04755));
  // chown(2) clears setuid; the provider must put the declared mode back afterwards.
  auto applied = engine_apply(*h.provider,
                              file_resource(dir / "tool", {{"mode", "4755"}, {"owner", "65534"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  const struct stat st = lstat_of(dir / "tool");
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mode & 07777, 04755u);
}

TEST(FileProviderApplyTest, SymlinkAtTargetIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "victim", "precious", 0644));
  const struct stat before = lstat_of(dir / "victim");
  ASSERT_EQ(::symlink((dir / "victim").c_str(), (dir / "link").c_str()), 0);

  // Content write, mode-only change and remove: all refused.
  Plan write_plan{{"file", dir / "link"},
                  PlanAction::Update,
                  {{"properties.content", Value(), Value("sha256:x")}},
                  file_resource(dir / "link", {{"content", "pwned"}, {"mode", "0777"}})};
  Plan mode_plan{{"file", dir / "link"},
                 PlanAction::Update,
                 {{"properties.mode", Value("0644"), Value("0777")}},
                 file_resource(dir / "link", {{"mode", "0777"}})};
  CancelToken cancel;
  for (const Plan& plan : {write_plan, mode_plan}) {
    auto r = h.provider->apply(plan, cancel);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::Failed);
    EXPECT_TRUE(contains(r.error().message, "symbolic link")) << r.error().message;
    EXPECT_TRUE(contains(r.error().message, dir / "link")) << r.error().message;
  }
  auto removed = h.provider->remove({"file", dir / "link"}, cancel);
  ASSERT_FALSE(removed);
  EXPECT_TRUE(contains(removed.error().message, "symbolic link")) << removed.error().message;

  // And through the engine's path, read refuses first.
  auto applied = engine_apply(*h.provider, file_resource(dir / "link", {{"content", "pwned"}}));
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::Failed);

  EXPECT_TRUE(S_ISLNK(lstat_of(dir / "link").st_mode)) << "the link was replaced";
  EXPECT_EQ(read_file(dir / "victim"), "precious");
  const struct stat after = lstat_of(dir / "victim");
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
  EXPECT_TRUE(temp_files_in(dir.path()).empty());
}

TEST(FileProviderApplyTest, DirectoryAtTargetIsRefused) {
  TempDir dir;
  Harness h;
  ASSERT_EQ(::mkdir((dir / "d").c_str(), 0755), 0);
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "d/inside", "x"));
  Plan plan{{"file", dir / "d"},
            PlanAction::Create,
            {{"properties.ensure", Value(), Value("present")}},
            file_resource(dir / "d", {{"content", "x"}})};
  CancelToken cancel;
  auto r = h.provider->apply(plan, cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(r.error().message, "directory")) << r.error().message;
  auto removed = h.provider->remove({"file", dir / "d"}, cancel);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(removed.error().message, "directory")) << removed.error().message;
  EXPECT_TRUE(S_ISDIR(lstat_of(dir / "d").st_mode));
  EXPECT_EQ(read_file(dir / "d/inside"), "x");
  EXPECT_TRUE(temp_files_in(dir.path()).empty());
}

TEST(FileProviderApplyTest, MissingParentFailsNamingIt) {
  TempDir dir;
  Harness h;
  auto r = engine_apply(*h.provider, file_resource(dir / "no/such/f", {{"content", "x"}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(r.error().message, "parent directory " + (dir / "no/such") + " "))
      << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "does not exist")) << r.error().message;
  EXPECT_FALSE(exists(dir / "no")) << "the parent directory was created";
}

// chmod 0555 does not stop root, so the "cannot write into the directory" failure is provoked
// with a parent that is a regular file: open(2) of the directory fails with ENOTDIR.
TEST(FileProviderApplyTest, ParentIsAFileFailsWithPathAndReason) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "plain", "original", 0644));
  auto r = engine_apply(*h.provider, file_resource(dir / "plain/f", {{"content", "x"}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(r.error().message, dir / "plain")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "Not a directory")) << r.error().message;
  EXPECT_EQ(read_file(dir / "plain"), "original");
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"plain"});
}

// The real read-only directory case. As root the write happens in a child that has dropped to
// uid/gid 65534 first, since root ignores directory permissions.
TEST(FileProviderApplyTest, ReadOnlyDirectoryFailsAndKeepsTheOriginal) {
  TempDir dir;
  Harness h;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string ro = dir / "ro";
  ASSERT_EQ(::mkdir(ro.c_str(), 0755), 0);
  ASSERT_NO_FATAL_FAILURE(write_file(ro + "/f", "original", 0666));
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  auto plan = plan_for(*h.provider, file_resource(ro + "/f", {{"content", "replacement"}}));
  ASSERT_EQ(plan.action, PlanAction::Update);

  auto child = [&] {
    if (::geteuid() == 0 &&
        (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      std::fprintf(stderr, "cannot drop privileges\n");
      std::_Exit(3);
    }
    CancelToken cancel;
    auto r = h.provider->apply(plan, cancel);
    if (r) std::_Exit(1);
    std::fprintf(stderr, "code=%s message=%s\n", sdk::to_string(r.error().code),
                 r.error().message.c_str());
    std::_Exit(r.error().code == ErrorCode::PermissionDenied ? 0 : 2);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0),
              "code=permission_denied message=create temporary file in " + ro +
                  ": Permission denied \\(for " + ro + "/f\\)");
  EXPECT_EQ(read_file(ro + "/f"), "original");
  EXPECT_EQ(list_dir(ro), std::vector<std::string>{"f"});
}

// A write that fails half-way (file size limit, as a full disk would) removes the temporary file
// and leaves the original as it was.
TEST(FileProviderApplyTest, FailedWriteKeepsTheOriginalAndCleansUp) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "original", 0644));
  const std::string big(64 * 1024, 'z');
  auto plan = plan_for(*h.provider, file_resource(dir / "f", {{"content", big}}));
  ASSERT_EQ(plan.action, PlanAction::Update);
  auto child = [&] {
    // Writes past the limit fail with EFBIG instead of raising SIGXFSZ.
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit {};
    limit.rlim_cur = limit.rlim_max = 1024;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) std::_Exit(3);
    CancelToken cancel;
    auto r = h.provider->apply(plan, cancel);
    if (r) std::_Exit(1);
    std::fprintf(stderr, "message=%s\n", r.error().message.c_str());
    std::_Exit(r.error().code == ErrorCode::Failed ? 0 : 2);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0),
              "message=write .*: File too large \\(temporary file for .*/f\\)");
  EXPECT_EQ(read_file(dir / "f"), "original");
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"f"});
}

// Until decision 73 this test left `.g.mesh-tmp-…` alone ("not this target's"): the sweep ran
// after every write and looked only for the written target's temporary files. Now the first
// write into a directory removes the stale temporary files of every target in it.
TEST(FileProviderApplyTest, StaleTemporaryFilesAreSweptAfterAWrite) {
  // What a host killed between creating its temporary file and renaming it leaves behind.
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "old", 0644));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".f.mesh-tmp-0123456789ab", "half", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".f.mesh-tmp-ffffffffffff", "", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".g.mesh-tmp-0123456789ab", "other", 0600));
  // Not the pattern, or not a regular file: left alone.
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".f.mesh-tmp-0123456789aZ", "x", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".f.mesh-tmp-0123456789abc", "x", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "..mesh-tmp-0123456789ab", "x", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f.mesh-tmp-0123456789ab", "x", 0600));
  ASSERT_EQ(::mkdir((dir / ".f.mesh-tmp-aaaaaaaaaaaa").c_str(), 0700), 0);

  auto applied = engine_apply(*h.provider, file_resource(dir / "f", {{"content", "new\n"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(read_file(dir / "f"), "new\n");
  EXPECT_EQ(list_dir(dir.path()),
            (std::vector<std::string>{"..mesh-tmp-0123456789ab", ".f.mesh-tmp-0123456789aZ",
                                      ".f.mesh-tmp-0123456789abc", ".f.mesh-tmp-aaaaaaaaaaaa", "f",
                                      "f.mesh-tmp-0123456789ab"}));
}

// Two mesh-host processes writing into one directory (the demo's three hosts on one machine): a
// temporary file another process is writing right now is flock'ed by it, and the sweep leaves
// it. Before, the sweep removed it and that process's rename failed (ENOENT).
TEST(FileProviderApplyTest, ATemporaryFileAnotherWriterHoldsIsNotSwept) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".g.mesh-tmp-0123456789ab", "in flight", 0600));
  const int held = ::open((dir / ".g.mesh-tmp-0123456789ab").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);  // as create_temp does: another open file's lock
  {
    Harness h;
    auto applied = engine_apply(*h.provider, file_resource(dir / "f", {{"content", "new\n"}}));
    ASSERT_TRUE(applied) << applied.error().describe();
    EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{".g.mesh-tmp-0123456789ab", "f"}));
  }
  ::close(held);  // the writer died: the lock went with it, and the next process's sweep removes it
  Harness next;
  auto applied = engine_apply(*next.provider, file_resource(dir / "f", {{"content", "newer\n"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"f"});
}

TEST(FileProviderApplyTest, TheFirstWriteIntoADirectorySweepsTheTemporaryFilesOfEveryTarget) {
  TempDir dir;
  Harness h;
  // Left by two interrupted writes of two other targets, neither of which is written now.
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".a.conf.mesh-tmp-00112233aabb", "half", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".b.conf.mesh-tmp-ccddeeff4455", "half", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "b.conf", "theirs", 0644));
  auto applied = engine_apply(*h.provider, file_resource(dir / "c.conf", {{"content", "c\n"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"b.conf", "c.conf"}));
  EXPECT_EQ(read_file(dir / "b.conf"), "theirs");
}

// The intended behaviour: a directory is read once per provider instance (one per mesh-host
// process). A temporary file that appears after that first sweep is, in real life, one left by
// a process killed after it; it is removed by the next process, not by later writes of this one.
TEST(FileProviderApplyTest, ADirectoryIsSweptOncePerProviderInstance) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "other").c_str(), 0755), 0);
  {
    Harness h;
    auto first = engine_apply(*h.provider, file_resource(dir / "f", {{"content", "1"}}));
    ASSERT_TRUE(first) << first.error().describe();
    ASSERT_NO_FATAL_FAILURE(write_file(dir / ".g.mesh-tmp-0123456789ab", "half", 0600));
    // Written after the sweep: later writes into the directory do not read it again.
    for (const char* name : {"f", "g", "h"}) {
      auto again = engine_apply(*h.provider, file_resource(dir / name, {{"content", "2"}}));
      ASSERT_TRUE(again) << again.error().describe();
    }
    EXPECT_EQ(list_dir(dir.path()),
              (std::vector<std::string>{".g.mesh-tmp-0123456789ab", "f", "g", "h", "other"}));
    // The set is per directory: another directory still gets its own first sweep.
    ASSERT_NO_FATAL_FAILURE(write_file(dir / "other/.x.mesh-tmp-0123456789ab", "half", 0600));
    auto other = engine_apply(*h.provider, file_resource(dir / "other/y", {{"content", "y"}}));
    ASSERT_TRUE(other) << other.error().describe();
    EXPECT_EQ(list_dir(dir / "other"), std::vector<std::string>{"y"});
  }
  // A new instance (a new process) sweeps the directory at its first write into it.
  Harness next;
  auto applied = engine_apply(*next.provider, file_resource(dir / "f", {{"content", "3"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"f", "g", "h", "other"}));
}

// A write that fails in a live process removes its own temporary file and sweeps nothing, so
// the directory's one sweep is still to come at the next successful write.
TEST(FileProviderApplyTest, AFailedWriteRemovesItsTemporaryFileAndLeavesTheSweepToTheNext) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".g.mesh-tmp-0123456789ab", "half", 0600));
  // In this process (the provider's set must be the one observed afterwards): a file-size limit
  // makes the write of the temporary file fail with EFBIG, as a full disk would.
  auto plan = plan_for(*h.provider, file_resource(dir / "f", {{"content", std::string(64 * 1024, 'z')}}));
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* const old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = saved;
  limit.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  CancelToken cancel;
  auto failed = h.provider->apply(plan, cancel);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(failed);
  EXPECT_TRUE(contains(failed.error().message, "File too large")) << failed.error().message;
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{".g.mesh-tmp-0123456789ab"});
  auto applied = engine_apply(*h.provider, file_resource(dir / "f", {{"content", "x"}}));
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"f"});
}

// The temporary file of the write in progress is skipped by name. (In write_file it has been
// renamed to the target by the time the sweep runs; the sweep is called here directly, with the
// in-flight file still present.)
TEST(FileProviderApplyTest, TheSweepNeverRemovesTheInFlightTemporaryFile) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".f.mesh-tmp-0123456789ab", "in flight", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".f.mesh-tmp-ba9876543210", "stale", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(dir / ".g.mesh-tmp-ba9876543210", "stale", 0600));
  const int fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  sdk::NullLogger log;
  EXPECT_TRUE(detail::sweep_stale_temps(fd, dir.path(), ".f.mesh-tmp-0123456789ab", &log,
                                        dir / "f"));
  ::close(fd);
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{".f.mesh-tmp-0123456789ab"});
  EXPECT_EQ(read_file(dir / ".f.mesh-tmp-0123456789ab"), "in flight");
}

TEST(FileProviderApplyTest, TemporaryFileNames) {
  EXPECT_TRUE(detail::is_temp_name(".f.mesh-tmp-0123456789ab"));
  EXPECT_TRUE(detail::is_temp_name(".a.b.mesh-tmp-ffffffffffff"));
  EXPECT_FALSE(detail::is_temp_name("..mesh-tmp-0123456789ab"));       // no target name
  EXPECT_FALSE(detail::is_temp_name("f.mesh-tmp-0123456789ab"));       // not a dot-file
  EXPECT_FALSE(detail::is_temp_name(".f.mesh-tmp-0123456789AB"));      // upper-case hex
  EXPECT_FALSE(detail::is_temp_name(".f.mesh-tmp-0123456789a"));       // 11 digits
  EXPECT_FALSE(detail::is_temp_name(".f.mesh-tmp-0123456789abc"));     // 13 digits
  EXPECT_FALSE(detail::is_temp_name(".f.mesh-tmp0123456789ab"));       // no marker
  // A target name cut to fit NAME_MAX still makes a temporary file name of the pattern.
  EXPECT_TRUE(detail::is_temp_name("." + std::string(NAME_MAX - 23, 'n') + ".mesh-tmp-0123456789ab"));
}

TEST(FileProviderApplyTest, UnmanagedContentIsNeverClobbered) {
  TempDir dir;
  Harness h;
  // Planned while absent; someone creates the file before apply.
  auto plan = plan_for(*h.provider, file_resource(dir / "f", {{"mode", "0600"}}));
  ASSERT_EQ(plan.action, PlanAction::Create);
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "theirs", 0644));
  CancelToken cancel;
  auto r = h.provider->apply(plan, cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_EQ(read_file(dir / "f"), "theirs");
  EXPECT_TRUE(temp_files_in(dir.path()).empty());
}

TEST(FileProviderApplyTest, CancelledApplyWritesNothing) {
  TempDir dir;
  Harness h;
  auto plan = plan_for(*h.provider, file_resource(dir / "f", {{"content", "x"}}));
  CancelToken cancel;
  cancel.cancel();
  auto r = h.provider->apply(plan, cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
  EXPECT_TRUE(list_dir(dir.path()).empty());
}

TEST(FileProviderApplyTest, SymlinkedParentOutsideRootsIsRefused) {
  TempDir dir;
  const std::string root = dir / "root";
  const std::string elsewhere = dir / "elsewhere";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), (root + "/escape").c_str()), 0);
  Harness h({root});
  const Resource r = file_resource(root + "/escape/f", {{"content", "x"}});
  ASSERT_TRUE(h.provider->validate(r)) << "lexically inside the root";
  Plan plan{r.rid, PlanAction::Create, {{"properties.ensure", Value(), Value("present")}}, r};
  CancelToken cancel;
  auto applied = h.provider->apply(plan, cancel);
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::PermissionDenied);
  // Refused on the way: the link is never followed (safe_path.h), so it never gets outside.
  EXPECT_TRUE(contains(applied.error().message, root + "/escape is a symbolic link"))
      << applied.error().message;
  EXPECT_TRUE(list_dir(elsewhere).empty());
  // Inside the root, apply works.
  auto ok = engine_apply(*h.provider, file_resource(root + "/f", {{"content", "x"}}));
  EXPECT_TRUE(ok) << ok.error().describe();
}

// --- remove -------------------------------------------------------------------------------------

TEST(FileProviderRemoveTest, RemovesAndIsIdempotent) {
  TempDir dir;
  Harness h;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "f", "x"));
  CancelToken cancel;
  EXPECT_TRUE(h.provider->remove({"file", dir / "f"}, cancel));
  EXPECT_FALSE(exists(dir / "f"));
  EXPECT_TRUE(h.provider->remove({"file", dir / "f"}, cancel));
  EXPECT_TRUE(h.provider->remove({"file", dir / "no/such/dir/f"}, cancel));
  auto bad = h.provider->remove({"file", "relative"}, cancel);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().path, "id");
}

}  // namespace
}  // namespace mesh::plugins::file::test
