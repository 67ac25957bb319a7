// The file provider's `source = "sha256:<hex>"` (decision record 111): the content is taken from
// the cache in the provider's state directory and checked against the digest once more before
// the target is written; a cached file that does not match is removed and nothing is written.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "file_provider.h"
#include "file_test_support.h"
#include "mesh/support/sha256.h"

namespace mesh::plugins::file::test {
namespace {

using sdk::CancelToken;
using sdk::ErrorCode;
using sdk::Plan;
using sdk::PlanAction;
using sdk::Value;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct SourceHarness {
  explicit SourceHarness(const std::string& state_dir) {
    host.logger = &logger;
    host.role = "tool";
    host.state_dir = state_dir;
    provider = std::make_unique<FileProvider>(host);
    if (auto ok = provider->configure(Value::object()); !ok) throw std::runtime_error(ok.error().describe());
  }
  sdk::NullLogger logger;
  sdk::HostContext host;
  std::unique_ptr<FileProvider> provider;
};

Plan create_plan(const std::string& target, const std::string& digest) {
  return Plan{{"file", target},
              PlanAction::Create,
              {{"properties.ensure", Value(), Value("present")}, {"properties.source", Value(), Value(digest)}},
              file_resource(target, {{"source", digest}})};
}

TEST(FileContentSourceTest, TheVerifiedCachedContentIsWrittenAndAMismatchOrAMissingOneIsNot) {
  TempDir dir;
  const std::string state = dir / "state";
  ::mkdir(state.c_str(), 0700);
  ::mkdir((state + "/content").c_str(), 0700);
  ::mkdir((state + "/content/sha256").c_str(), 0700);
  SourceHarness h(state);
  CancelToken cancel;

  const std::string bytes = "cached content\n";
  const std::string hex = support::sha256_hex(bytes);
  ASSERT_NO_FATAL_FAILURE(write_file(state + "/content/sha256/" + hex, bytes));
  auto plan = h.provider->plan(file_resource(dir / "ok", {{"source", "sha256:" + hex}}), std::nullopt);
  ASSERT_TRUE(plan) << plan.error().describe();
  EXPECT_EQ(plan->action, PlanAction::Create);
  auto r = h.provider->apply(*plan, cancel);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(read_file(dir / "ok"), bytes);
  EXPECT_EQ(r->properties.get_string("sha256"), hex);
  // Read back: nothing to do.
  auto seen = h.provider->read({"file", dir / "ok"});
  ASSERT_TRUE(seen && seen->has_value());
  auto again = h.provider->plan(file_resource(dir / "ok", {{"source", "sha256:" + hex}}), *seen);
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(again->action, PlanAction::None);

  // A cached file whose bytes are not its name's digest: removed, the target not written.
  const std::string other = support::sha256_hex("other\n");
  ASSERT_NO_FATAL_FAILURE(write_file(state + "/content/sha256/" + other, "tampered\n"));
  r = h.provider->apply(create_plan(dir / "bad", "sha256:" + other), cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::Failed);
  EXPECT_TRUE(contains(r.error().message, "content sha256:" + other + " in this host's cache has sha256:"))
      << r.error().message;
  EXPECT_FALSE(exists(dir / "bad"));
  EXPECT_FALSE(exists(state + "/content/sha256/" + other)) << "removed, fetched again at the next apply";

  // Not in the cache.
  r = h.provider->apply(create_plan(dir / "missing", "sha256:" + other), cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  EXPECT_TRUE(contains(r.error().message, "mesh content push FILE")) << r.error().message;
  EXPECT_FALSE(exists(dir / "missing"));

  // Malformed, or with inline content: refused at validate, naming the property.
  auto v = h.provider->validate(file_resource(dir / "x", {{"source", "sha256:ABC"}}));
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().path, "properties.source");
  v = h.provider->validate(file_resource(dir / "x", {{"source", "sha256:" + hex}, {"content", "x"}}));
  ASSERT_FALSE(v);
}

}  // namespace
}  // namespace mesh::plugins::file::test
