// The file provider's path walk (plugins/paths/safe_path.h): a symbolic link anywhere above the
// file is refused for write, read and removal; an unsafe path transition (a directory someone
// other than root, the host's user and the declared owner can change) is refused unless the
// declaration sets allow_untrusted_parents; denied roots are refused lexically and by inode; a
// metadata-only change of a file with a second hard link is refused. Tests that need another
// owner chown inside their own temporary directory and skip when not run as root.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "file_provider.h"
#include "file_test_support.h"
#include "safe_path.h"

namespace mesh::plugins::file::test {
namespace {

using sdk::CancelToken;
using sdk::ErrorCode;
using sdk::Plan;
using sdk::PlanAction;
using sdk::Resource;
using sdk::State;
using sdk::Value;

constexpr uid_t kOtherUid = 64123;  // a numeric uid with no account, as an unprivileged user

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Provider {
  explicit Provider(std::vector<std::string> denied = {}) {
    host.logger = &logger;
    host.role = "tool";
    provider = std::make_unique<FileProvider>(host);
    Value config = Value::object();
    if (!denied.empty()) {
      Value::Array list;
      for (auto& d : denied) list.emplace_back(d);
      config.set("denied_roots", Value(std::move(list)));
    }
    auto ok = provider->configure(config);
    if (!ok) throw std::runtime_error("configure: " + ok.error().describe());
  }
  sdk::NullLogger logger;
  sdk::HostContext host;
  std::unique_ptr<FileProvider> provider;
};

// The engine's sequence: defaults, validate, read, plan, apply.
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

// A Create plan applied directly (what a drift repair does after a read that found nothing).
sdk::Result<State> apply_create(FileProvider& p, Resource r) {
  r.properties = sdk::apply_defaults(p.schema(), r.properties);
  Plan plan{r.rid, PlanAction::Create, {{"properties.ensure", Value(), Value("present")}}, r};
  CancelToken cancel;
  return p.apply(plan, cancel);
}

TEST(FilePathWalkTest, SymlinkedAncestorIsRefusedForWriteChownReadAndRemove) {
  TempDir dir;
  const std::string home = dir / "home", target = dir / "cron.daily";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  ASSERT_NO_FATAL_FAILURE(write_file(target + "/victim", "root only\n", 0600));
  ASSERT_NO_FATAL_FAILURE(write_file(target + "/existing", "root's\n", 0644));
  ASSERT_EQ(::symlink(target.c_str(), (home + "/sub").c_str()), 0);
  const std::string before = fingerprint(target + "/victim") + fingerprint(target + "/existing");
  Provider p;

  // write
  auto w = apply_create(*p.provider, file_resource(home + "/sub/job", {{"content", "#!/bin/sh\n"}, {"mode", "0755"}}));
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, ErrorCode::PermissionDenied);
  EXPECT_TRUE(contains(w.error().message, home + "/sub is a symbolic link")) << w.error().message;
  EXPECT_TRUE(contains(w.error().message, "(to " + target + ")")) << w.error().message;
  // chown/chmod of an existing file through the link
  auto u = engine_apply(*p.provider, file_resource(home + "/sub/existing", {{"mode", "0666"}}));
  ASSERT_FALSE(u);
  EXPECT_TRUE(contains(u.error().message, "symbolic link")) << u.error().message;
  // read: an error, not "absent" and not the target's digest
  auto r = p.provider->read(sdk::ResourceId{"file", home + "/sub/victim"});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "symbolic link")) << r.error().message;
  // removal: declared absent, and a prune
  auto a = engine_apply(*p.provider, file_resource(home + "/sub/victim", {{"ensure", "absent"}}));
  ASSERT_FALSE(a);
  CancelToken cancel;
  auto pr = p.provider->remove(sdk::ResourceId{"file", home + "/sub/victim"}, cancel);
  ASSERT_FALSE(pr);
  EXPECT_TRUE(contains(pr.error().message, "symbolic link")) << pr.error().message;

  EXPECT_EQ(list_dir(target), (std::vector<std::string>{"existing", "victim"}));
  EXPECT_EQ(fingerprint(target + "/victim") + fingerprint(target + "/existing"), before);
}

TEST(FilePathWalkTest, SymlinkHigherUpIsRefusedToo) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "real").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir / "real/a").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((dir / "real").c_str(), (dir / "link").c_str()), 0);
  Provider p;
  auto w = engine_apply(*p.provider, file_resource(dir / "link/a/f", {{"content", "x"}}));
  ASSERT_FALSE(w);
  EXPECT_TRUE(contains(w.error().message, dir / "link is a symbolic link")) << w.error().message;
  EXPECT_TRUE(list_dir(dir / "real/a").empty());
}

TEST(FilePathWalkTest, DirectoryOwnedByAnotherUserIsAnUnsafeTransition) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  TempDir dir;
  const std::string home = dir / "home";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_EQ(::chown(home.c_str(), kOtherUid, kOtherUid), 0);
  Provider p;
  // Owned by root (not declared as the user's): the user could replace it.
  auto refused = engine_apply(*p.provider, file_resource(home + "/f", {{"content", "x"}, {"owner", "0"}}));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::PermissionDenied);
  EXPECT_TRUE(contains(refused.error().message, home + " is owned by uid 64123")) << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "unsafe path transition")) << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "allow_untrusted_parents")) << refused.error().message;
  EXPECT_TRUE(list_dir(home).empty());
  // No owner declared: the same.
  EXPECT_FALSE(engine_apply(*p.provider, file_resource(home + "/f", {{"content", "x"}})));
  // The declared owner's own directory (a home directory): allowed.
  auto own = engine_apply(*p.provider, file_resource(home + "/f", {{"content", "x"}, {"owner", "64123"}}));
  ASSERT_TRUE(own) << own.error().describe();
  EXPECT_EQ(lstat_of(home + "/f").st_uid, kOtherUid);
  // Explicitly accepted by the declaration.
  auto accepted = engine_apply(
      *p.provider, file_resource(home + "/g", {{"content", "y"}, {"allow_untrusted_parents", true}}));
  ASSERT_TRUE(accepted) << accepted.error().describe();
  EXPECT_EQ(read_file(home + "/g"), "y");
  // A declared removal is judged the same way.
  auto gone = engine_apply(*p.provider, file_resource(home + "/g", {{"ensure", "absent"}}));
  ASSERT_FALSE(gone);
  EXPECT_TRUE(contains(gone.error().message, "unsafe path transition")) << gone.error().message;
  EXPECT_TRUE(exists(home + "/g"));
}

TEST(FilePathWalkTest, DirectoryOwnedByTheDeclaredOwnerBelowAnotherUsersIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  TempDir dir;
  const std::string a = dir / "a";
  ASSERT_EQ(::mkdir(a.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((a + "/b").c_str(), 0755), 0);
  ASSERT_EQ(::chown(a.c_str(), kOtherUid + 1, kOtherUid + 1), 0);
  ASSERT_EQ(::chown((a + "/b").c_str(), kOtherUid, kOtherUid), 0);
  Provider p;
  auto r = engine_apply(*p.provider, file_resource(a + "/b/f", {{"content", "x"}, {"owner", "64123"}}));
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, a + " is owned by uid 64124")) << r.error().message;
}

TEST(FilePathWalkTest, WorldWritableDirectoryIsRefusedUnlessSticky) {
  TempDir dir;
  const std::string open = dir / "open", sticky = dir / "sticky";
  ASSERT_EQ(::mkdir(open.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(sticky.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  Provider p;
  auto r = engine_apply(*p.provider, file_resource(open + "/f", {{"content", "x"}}));
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, open + " is writable by everyone")) << r.error().message;
  EXPECT_TRUE(list_dir(open).empty());
  auto s = engine_apply(*p.provider, file_resource(sticky + "/f", {{"content", "x"}}));
  EXPECT_TRUE(s) << s.error().describe();
}

TEST(FilePathWalkTest, ReadAndPruneDoNotJudgeOwnersButNeverFollowLinks) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  TempDir dir;
  const std::string home = dir / "home";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_NO_FATAL_FAILURE(write_file(home + "/f", "x"));
  ASSERT_EQ(::chown(home.c_str(), kOtherUid, kOtherUid), 0);
  Provider p;
  auto r = p.provider->read(sdk::ResourceId{"file", home + "/f"});
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(r->has_value());
  CancelToken cancel;
  auto pr = p.provider->remove(sdk::ResourceId{"file", home + "/f"}, cancel);
  EXPECT_TRUE(pr) << pr.error().describe();
  EXPECT_FALSE(exists(home + "/f"));
}

TEST(FilePathWalkTest, DeniedRootsAreRefusedLexicallyAndByInode) {
  TempDir dir;
  const std::string state = dir / "state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  ASSERT_NO_FATAL_FAILURE(write_file(state + "/node.key", "secret", 0600));
  ASSERT_EQ(::symlink(state.c_str(), (dir / "state-link").c_str()), 0);
  {
    Provider p({state});
    Resource r = file_resource(state + "/node.key", {{"content", "mine"}});
    auto v = p.provider->validate(r);
    ASSERT_FALSE(v);
    EXPECT_EQ(v.error().code, ErrorCode::PermissionDenied);
    EXPECT_EQ(v.error().path, "id");
    EXPECT_TRUE(contains(v.error().message, "path policy")) << v.error().message;
    auto a = apply_create(*p.provider, r);
    ASSERT_FALSE(a);
    auto rd = p.provider->read(r.rid);
    EXPECT_FALSE(rd);
  }
  {
    // The policy names the directory by another name (a symbolic link, as a config might): the
    // directory reached without links is the same inode, and refused.
    Provider p({dir / "state-link"});
    Resource r = file_resource(state + "/node.key", {{"content", "mine"}});
    ASSERT_TRUE(p.provider->validate(r)) << "lexically outside the denied root";
    auto a = apply_create(*p.provider, r);
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().code, ErrorCode::PermissionDenied);
    EXPECT_TRUE(contains(a.error().message, state + " (" + (dir / "state-link") + ") is denied")) << a.error().message;
  }
  EXPECT_EQ(read_file(state + "/node.key"), "secret");
  // A bad entry is a config error naming it.
  sdk::NullLogger logger;
  sdk::HostContext host;
  host.logger = &logger;
  FileProvider fp(host);
  Value config = Value::object();
  config.set("denied_roots", Value(Value::Array{Value("/var/lib/x"), Value("relative")}));
  auto c = fp.configure(config);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().path, "denied_roots[1]");
}

TEST(FilePathWalkTest, MetadataChangeOfAHardLinkedFileIsRefused) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "elsewhere").c_str(), 0755), 0);
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "elsewhere/shadow", "secret", 0600));
  ASSERT_EQ(::link((dir / "elsewhere/shadow").c_str(), (dir / "f").c_str()), 0);
  Provider p;
  auto r = engine_apply(*p.provider, file_resource(dir / "f", {{"mode", "0644"}}));
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "hard links")) << r.error().message;
  EXPECT_EQ(lstat_of(dir / "elsewhere/shadow").st_mode & 07777, 0600u);
  // Writing content replaces the name, never the other link's data.
  auto w = engine_apply(*p.provider, file_resource(dir / "f", {{"content", "new"}, {"mode", "0644"}}));
  ASSERT_TRUE(w) << w.error().describe();
  EXPECT_EQ(read_file(dir / "elsewhere/shadow"), "secret");
  EXPECT_EQ(lstat_of(dir / "elsewhere/shadow").st_mode & 07777, 0600u);
}

// The walk cache (decision 150): a walk stands for the next operations in the same directory for
// a short while, but every one of them checks the path again — a link put on it, the directory
// replaced, or its owner changed is seen at the very next operation.
TEST(FileWalkCacheTest, ALinkPutOnTheWayAfterAWriteIsRefusedAtTheNextOperation) {
  TempDir dir;
  const std::string home = dir / "home", target = dir / "cron.daily";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((home + "/sub").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  ASSERT_NO_FATAL_FAILURE(write_file(target + "/victim", "root only\n", 0600));
  Provider p;
  // Walked and cached: a write, a read.
  ASSERT_TRUE(engine_apply(*p.provider, file_resource(home + "/sub/job", {{"content", "a\n"}})));
  ASSERT_TRUE(p.provider->read(sdk::ResourceId{"file", home + "/sub/job"}));
  // The directory swapped for a link to another one, as a local user owning `home` could.
  ASSERT_EQ(::rename((home + "/sub").c_str(), (home + "/old").c_str()), 0);
  ASSERT_EQ(::symlink(target.c_str(), (home + "/sub").c_str()), 0);
  auto w = apply_create(*p.provider, file_resource(home + "/sub/victim", {{"content", "#!/bin/sh\n"}}));
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, ErrorCode::PermissionDenied);
  EXPECT_TRUE(contains(w.error().message, home + "/sub is a symbolic link")) << w.error().message;
  auto r = p.provider->read(sdk::ResourceId{"file", home + "/sub/victim"});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "symbolic link")) << r.error().message;
  CancelToken cancel;
  EXPECT_FALSE(p.provider->remove(sdk::ResourceId{"file", home + "/sub/victim"}, cancel));
  EXPECT_EQ(read_file(target + "/victim"), "root only\n");
  EXPECT_EQ(lstat_of(target + "/victim").st_mode & 07777, 0600u);
  EXPECT_EQ(list_dir(target), (std::vector<std::string>{"victim"}));
}

TEST(FileWalkCacheTest, ADirectoryReplacedAfterAWriteIsWalkedAgainAndWrittenInto) {
  TempDir dir;
  const std::string d = dir / "d";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  Provider p;
  ASSERT_TRUE(engine_apply(*p.provider, file_resource(d + "/a", {{"content", "a\n"}})));
  // Moved away and made again under the same name: another inode.
  ASSERT_EQ(::rename(d.c_str(), (dir / "moved").c_str()), 0);
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  auto r = p.provider->read(sdk::ResourceId{"file", d + "/a"});
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(r->has_value()) << "the read must look at the directory now at the path";
  ASSERT_TRUE(engine_apply(*p.provider, file_resource(d + "/b", {{"content", "b\n"}})));
  EXPECT_EQ(read_file(d + "/b"), "b\n");
  EXPECT_FALSE(exists(dir / "moved/b"));
  // Removed: the parent is missing, as without the cache.
  ASSERT_EQ(::unlink((d + "/b").c_str()), 0);
  ASSERT_EQ(::rmdir(d.c_str()), 0);
  auto gone = p.provider->read(sdk::ResourceId{"file", d + "/b"});
  ASSERT_TRUE(gone) << gone.error().describe();
  EXPECT_FALSE(gone->has_value());
  auto w = apply_create(*p.provider, file_resource(d + "/c", {{"content", "c\n"}}));
  ASSERT_FALSE(w);
  EXPECT_TRUE(contains(w.error().message, "does not exist")) << w.error().message;
}

TEST(FileWalkCacheTest, AParentGivenToAnotherUserAfterAWriteIsRefusedAtTheNextWrite) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  TempDir dir;
  const std::string home = dir / "home";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  Provider p;
  ASSERT_TRUE(engine_apply(*p.provider, file_resource(home + "/f", {{"content", "x"}})));
  ASSERT_EQ(::chown(home.c_str(), kOtherUid, kOtherUid), 0);
  auto refused = engine_apply(*p.provider, file_resource(home + "/g", {{"content", "y"}}));
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error().message, home + " is owned by uid 64123")) << refused.error().message;
  EXPECT_FALSE(exists(home + "/g"));
  ASSERT_EQ(::chown(home.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(home.c_str(), 0777), 0);
  auto open = engine_apply(*p.provider, file_resource(home + "/g", {{"content", "y"}}));
  ASSERT_FALSE(open);
  EXPECT_TRUE(contains(open.error().message, home + " is writable by everyone")) << open.error().message;
}

// A read walks without judging owners; a write in the same directory right after judges the
// directories above it, from what that walk saw, by its own rules, with the walk's message.
TEST(FileWalkCacheTest, AWriteAfterAReadJudgesTheDirectoriesAboveByItsOwnTrust) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  TempDir dir;
  const std::string a = dir / "a";
  ASSERT_EQ(::mkdir(a.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((a + "/b").c_str(), 0755), 0);
  ASSERT_EQ(::chown(a.c_str(), kOtherUid, kOtherUid), 0);
  Provider p;
  auto r = p.provider->read(sdk::ResourceId{"file", a + "/b/f"});
  ASSERT_TRUE(r) << r.error().describe();
  auto w = apply_create(*p.provider, file_resource(a + "/b/f", {{"content", "x"}}));
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, ErrorCode::PermissionDenied);
  EXPECT_TRUE(contains(w.error().message, a + " is owned by uid 64123")) << w.error().message;
  EXPECT_TRUE(contains(w.error().message, "unsafe path transition")) << w.error().message;
  EXPECT_TRUE(list_dir(a + "/b").empty());
  auto accepted = apply_create(*p.provider, file_resource(a + "/b/f", {{"content", "x"}, {"allow_untrusted_parents", true}}));
  EXPECT_TRUE(accepted) << accepted.error().describe();
}

// The walk itself, without the provider.
TEST(SafePathTest, ReopenWithoutLinksRefusesALinkAnywhereAndGivesTheSameDirectory) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "real").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir / "real/a").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((dir / "real").c_str(), (dir / "link").c_str()), 0);
  ASSERT_EQ(::symlink((dir / "real/a").c_str(), (dir / "last").c_str()), 0);
  struct stat st {};
  int err = 0;
  auto fd = paths::reopen_dir_without_links(dir / "real/a", &st, &err);
  if (!fd.valid() && (err == ENOSYS || err == EPERM)) GTEST_SKIP() << "openat2 is not available here";
  ASSERT_TRUE(fd.valid()) << err;
  EXPECT_EQ(st.st_ino, lstat_of(dir / "real/a").st_ino);
  EXPECT_FALSE(paths::reopen_dir_without_links(dir / "link/a", &st, &err).valid());
  EXPECT_EQ(err, ELOOP);
  EXPECT_FALSE(paths::reopen_dir_without_links(dir / "last", &st, &err).valid());
  EXPECT_EQ(err, ELOOP);
  EXPECT_FALSE(paths::reopen_dir_without_links(dir / "missing", &st, &err).valid());
  EXPECT_EQ(err, ENOENT);
}

TEST(SafePathTest, OpenDirGivesTheChainAndTrustedDirJudgesItAsTheWalkDoes) {
  TempDir dir;
  const std::string open = dir / "open";
  ASSERT_EQ(::mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  paths::DeniedRoots none;
  paths::Trust read_only;
  read_only.check_transitions = false;
  std::vector<struct stat> chain;
  auto o = paths::open_dir(open, read_only, none, "x", &chain);
  ASSERT_TRUE(o.ok());
  std::size_t depth = 1;  // "/"
  for (char c : open) depth += c == '/';
  ASSERT_EQ(chain.size(), depth);
  EXPECT_EQ(chain.back().st_ino, o.st.st_ino);
  EXPECT_TRUE(paths::trusted_dir(chain.back(), read_only));
  paths::Trust write;
  EXPECT_FALSE(paths::trusted_dir(chain.back(), write));
  EXPECT_FALSE(paths::open_dir(open, write, none, "x").ok());
  write.allow_untrusted = true;
  EXPECT_TRUE(paths::trusted_dir(chain.back(), write));
}

TEST(SafePathTest, OpenDirNamesTheMissingComponentAndInspectReportsAbsence) {
  TempDir dir;
  paths::DeniedRoots none;
  paths::Trust trust;
  auto o = paths::open_dir(dir / "missing/deeper", trust, none, "x");
  EXPECT_FALSE(o.ok());
  EXPECT_FALSE(o.refused);
  EXPECT_EQ(o.err, ENOENT);
  EXPECT_EQ(o.at, dir / "missing");
  auto root = paths::open_dir("/", trust, none, "x");
  EXPECT_TRUE(root.ok());
  auto i = paths::inspect(dir / "missing/f", trust, none, "x");
  ASSERT_TRUE(i) << i.error().describe();
  EXPECT_FALSE(i->has_value());
  ASSERT_EQ(::symlink("/etc", (dir / "l").c_str()), 0);
  auto l = paths::inspect(dir / "l", trust, none, "x");
  ASSERT_FALSE(l);
  EXPECT_TRUE(contains(l.error().message, "symbolic link")) << l.error().message;
  ASSERT_NO_FATAL_FAILURE(write_file(dir / "w", "x", 0666));
  auto w = paths::inspect(dir / "w", trust, none, "x", /*object_trusted=*/true);
  ASSERT_FALSE(w);
  EXPECT_TRUE(contains(w.error().message, "writable by everyone")) << w.error().message;
}

}  // namespace
}  // namespace mesh::plugins::file::test
