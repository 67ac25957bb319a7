#include "mesh/engine/engine.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "engine_results.h"
#include "mem_provider.h"
#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"

namespace mesh::engine {
namespace {

namespace fs = std::filesystem;
using testing::CaptureLogger;
using testing::outcomes;
using testing::MemProvider;
using testing::TempDir;

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() {
    EXPECT_TRUE(registry.add("file", file));
    EXPECT_TRUE(registry.add("package", package));
    auto sd = StateDir::open(tmp.path() + "/state");
    EXPECT_TRUE(sd);
    state = std::make_unique<StateDir>(std::move(*sd));
    engine = std::make_unique<Engine>(registry, *state, log);
  }

  /// Parses a declaration of file resources, one per id; `extra` is appended to the list.
  Declaration decl(const std::string& resources_json, std::uint64_t revision = 1) {
    text = R"({"node": "web-01", "revision": )" + std::to_string(revision) +
           R"(, "resources": [)" + resources_json + "]}";
    ParseOptions opts;
    opts.allow_revision = true;
    auto d = parse_declaration(text, registry, opts);
    EXPECT_TRUE(d) << d.error().message;
    return d ? *d : Declaration{};
  }

  static std::string f(const std::string& id, const std::string& props = R"({"content": "x"})",
                       const std::string& requires_ = "") {
    std::string out = R"({"type": "file", "id": ")" + id + R"(", "properties": )" + props;
    if (!requires_.empty()) out += R"(, "requires": [)" + requires_ + "]";
    return out + "}";
  }

  ApplyResult run(const Declaration& d, bool dry_run = false) {
    return engine->apply(d, text, cancel, dry_run);
  }

  std::vector<std::string> owned_on_disk() { return testing::owned_on_disk(tmp.path() + "/state"); }

  TempDir tmp;
  std::shared_ptr<MemProvider> file = std::make_shared<MemProvider>("file");
  std::shared_ptr<MemProvider> package = std::make_shared<MemProvider>("package");
  ProviderRegistry registry;
  std::unique_ptr<StateDir> state;
  CaptureLogger log;
  std::unique_ptr<Engine> engine;
  sdk::CancelToken cancel;
  std::string text;
};

using Strings = std::vector<std::string>;

// apply_taking: the same outcomes and the same ownership record as apply(), one at a time and in
// batches, with the recorded resources' properties moved out of the declaration (not copied).
TEST_F(EngineTest, ApplyTakingRecordsTheSameOwnershipAndMovesThePropertiesOutOfTheDeclaration) {
  for (std::uint32_t batch : {0u, 8u}) {
    SCOPED_TRACE("max_batch " + std::to_string(batch));
    file->max_batch = batch;
    TempDir other;
    auto sd = StateDir::open(other.path() + "/state");
    ASSERT_TRUE(sd);
    auto mem = std::make_shared<MemProvider>("file");
    mem->max_batch = batch;
    ProviderRegistry reg;
    ASSERT_TRUE(reg.add("file", mem));
    Engine copying(reg, *sd, log);
    // A first apply, then one with a changed, an unchanged and a removed resource.
    for (const auto& list : {f("/a", R"({"content": "a"})") + "," + f("/b", R"({"content": "b"})") + "," +
                                 f("/c", R"({"content": "c"})"),
                             f("/a", R"({"content": "a2"})") + "," + f("/b", R"({"content": "b"})")}) {
      auto d = decl(list);
      const Declaration before = d;
      auto taken = engine->apply_taking(d, text, cancel);
      auto copied = copying.apply(before, text, cancel);
      ASSERT_EQ(taken.outcome, "applied") << taken.reason;
      EXPECT_EQ(outcomes(taken), outcomes(copied));
      EXPECT_EQ(taken.owned, copied.owned);
      EXPECT_EQ(taken.owned_digests, copied.owned_digests);
      ASSERT_EQ(d.resources.size(), before.resources.size());
      for (std::size_t i = 0; i < d.resources.size(); ++i) {
        EXPECT_EQ(d.resources[i].rid, before.resources[i].rid);
        const bool unchanged = taken.resources[i].outcome == "unchanged";
        // An unchanged resource already owned with these properties keeps them; a recorded one
        // gave them to the record.
        if (!unchanged) {
          EXPECT_TRUE(d.resources[i].properties.find("content") == nullptr) << i;
        }
      }
      // What the record holds, in memory and on disk, is what was declared.
      auto reopened = StateDir::open(tmp.path() + "/state");
      ASSERT_TRUE(reopened) << reopened.error().describe();
      ASSERT_EQ(reopened->state().owned.size(), sd->state().owned.size());
      for (std::size_t i = 0; i < sd->state().owned.size(); ++i) {
        EXPECT_EQ(reopened->state().owned[i].resource, sd->state().owned[i].resource);
        EXPECT_EQ(reopened->state().owned[i].properties, sd->state().owned[i].properties);
        EXPECT_EQ(state->state().owned[i].properties, sd->state().owned[i].properties);
      }
    }
    // Clean slate for the next round: forget everything.
    auto none = decl("");
    ASSERT_EQ(engine->apply_taking(none, text, cancel).outcome, "applied");
    ASSERT_TRUE(state->state().owned.empty());
  }
}

TEST_F(EngineTest, AppliesInOrderAndVerifiesByReadingBack) {
  auto d = decl(f("/b", R"({"content": "b"})", R"("file:/a")") + "," + f("/a", R"({"content": "a", "mode": "0644"})"), 7);
  auto r = run(d);
  EXPECT_EQ(r.outcome, "applied");
  EXPECT_EQ(r.revision, 7u);
  EXPECT_EQ(r.failed_resource, "");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=changed", "file:/b=changed"}));
  EXPECT_EQ(file->calls, (Strings{"apply:/a", "apply:/b"}));
  // read, plan, apply, read back, plan again — for each.
  EXPECT_EQ(file->reads, 4);
  EXPECT_EQ(file->plans, 4);
  ASSERT_EQ(r.resources[0].changes.size(), 2u);
  EXPECT_EQ(r.resources[0].changes[0].path, "properties.content");
  EXPECT_EQ(r.owned, (Strings{"file:/a", "file:/b"}));

  const HostState& st = state->state();
  EXPECT_EQ(st.applied_revision, 7u);
  EXPECT_EQ(st.applied_digest, d.digest);
  EXPECT_EQ(st.last_revision, 7u);
  EXPECT_EQ(st.last_outcome, "applied");
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/a", "file:/b"}));
  EXPECT_EQ(state->state().owned[0].properties.get_string("mode"), "0644");
  EXPECT_EQ(state->state().owned[0].properties.get_string("ensure"), "present");
  auto applied = state->applied_declaration();
  ASSERT_TRUE(applied && applied->has_value());
  EXPECT_EQ(**applied, text);

  // Applying again changes nothing and calls apply on nothing.
  file->calls.clear();
  auto again = run(d);
  EXPECT_EQ(again.outcome, "applied");
  EXPECT_EQ(outcomes(again), (Strings{"file:/a=unchanged", "file:/b=unchanged"}));
  EXPECT_TRUE(file->calls.empty());
}

TEST_F(EngineTest, LogsGrepableLines) {
  run(decl(f("/a"), 3));
  auto has = [&](const std::string& s) {
    return std::any_of(log.lines.begin(), log.lines.end(),
                       [&](const std::string& l) { return l.find(s) != std::string::npos; });
  };
  EXPECT_TRUE(has("node=web-01 revision=3 resource=file:/a outcome=changed changes=properties.content"));
  EXPECT_TRUE(has("node=web-01 revision=3 outcome=applied"));
}

TEST_F(EngineTest, AFailedResourceStopsTheApply) {
  ASSERT_EQ(run(decl(f("/old"), 1)).outcome, "applied");
  file->fail_apply.insert("/b");
  auto r = run(decl(f("/old") + "," + f("/a") + "," + f("/b") + "," + f("/c"), 2));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/b");
  EXPECT_EQ(r.reason, "write /b: No space left on device");
  EXPECT_EQ(outcomes(r),
            (Strings{"file:/old=unchanged", "file:/a=changed", "file:/b=failed", "file:/c=not_attempted"}));
  EXPECT_EQ(r.resources[2].reason, "write /b: No space left on device");
  EXPECT_FALSE(file->objects.count("/c"));
  // What really was applied stays owned; the applied revision does not move.
  EXPECT_EQ(r.owned, (Strings{"file:/a", "file:/old"}));
  EXPECT_EQ(state->state().applied_revision, 1u);
  EXPECT_EQ(state->state().last_revision, 2u);
  EXPECT_EQ(state->state().last_outcome, "failed");
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/a", "file:/old"}));
}

TEST_F(EngineTest, AFailedReadFailsTheResource) {
  file->fail_read.insert("/a");
  auto r = run(decl(f("/a")));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason, "read: stat /a: permission denied");
}

TEST_F(EngineTest, ALyingProviderIsCaughtOnReadBack) {
  file->lie_mode.insert("/a");
  auto r = run(decl(f("/a", R"({"content": "x", "mode": "0644"})") + "," + f("/b")));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/a");
  EXPECT_EQ(r.reason, "read-back does not match: properties.mode is 0600, declared 0644");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=failed", "file:/b=not_attempted"}));
  EXPECT_TRUE(r.owned.empty());
  EXPECT_TRUE(owned_on_disk().empty());
}

TEST_F(EngineTest, ASensitiveValueIsNeverShownInAMismatch) {
  file->mark_sensitive("mode");
  file->lie_mode.insert("/a");
  auto r = run(decl(f("/a", R"({"content": "x", "mode": "0644"})")));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason, "read-back does not match: properties.mode differs from the declared (sensitive value)");
  EXPECT_EQ(r.reason.find("0600"), std::string::npos);
  EXPECT_EQ(r.reason.find("0644"), std::string::npos);
}

TEST_F(EngineTest, LongValuesInAMismatchAreShownAsHashes) {
  file->lie_content.insert("/a");
  auto r = run(decl(f("/a", R"({"content": "hello\n"})")));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason,
            "read-back does not match: properties.content is "
            "sha256:" + common::sha256_hex(std::string(300, 'x')) + " (300 bytes), declared "
            "sha256:" + common::sha256_hex("hello\n") + " (6 bytes)");
}

TEST_F(EngineTest, EnsureAbsentRemovesAndIsNotOwned) {
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b"), 1)).outcome, "applied");
  auto r = run(decl(f("/a", R"({"ensure": "absent"})") + "," + f("/b"), 2));
  EXPECT_EQ(r.outcome, "applied");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=removed", "file:/b=unchanged"}));
  EXPECT_FALSE(file->objects.count("/a"));
  EXPECT_EQ(r.owned, (Strings{"file:/b"}));
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/b"}));
  // Already absent: unchanged, still not owned.
  auto again = run(decl(f("/a", R"({"ensure": "absent"})") + "," + f("/b"), 3));
  EXPECT_EQ(outcomes(again), (Strings{"file:/a=unchanged", "file:/b=unchanged"}));
  EXPECT_EQ(again.owned, (Strings{"file:/b"}));
}

TEST_F(EngineTest, AnAbsentResourceStillPresentAfterApplyFails) {
  file->objects["/a"] = sdk::Value::object();
  file->ignore_remove.insert("/a");
  auto r = run(decl(f("/a", R"({"ensure": "absent"})")));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/a");
  EXPECT_NE(r.reason.find("read-back does not match"), std::string::npos) << r.reason;
}

TEST_F(EngineTest, PrunesDroppedResourcesDependentsFirst) {
  // /b requires /a, /c requires /b: applied a, b, c; pruned c, b.
  ASSERT_EQ(run(decl(f("/c", R"({"content": "c"})", R"("file:/b")") + "," +
                     f("/b", R"({"content": "b"})", R"("file:/a")") + "," + f("/a"), 1))
                .outcome,
            "applied");
  file->calls.clear();
  auto r = run(decl(f("/a"), 2));
  EXPECT_EQ(r.outcome, "applied");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=unchanged", "file:/c=removed", "file:/b=removed"}));
  EXPECT_EQ(file->calls, (Strings{"remove:/c", "remove:/b"}));
  EXPECT_EQ(r.owned, (Strings{"file:/a"}));
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/a"}));
  EXPECT_EQ(state->state().applied_revision, 2u);
}

TEST_F(EngineTest, AFailedPruneFailsTheApply) {
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b") + "," + f("/c"), 1)).outcome, "applied");
  file->fail_remove.insert("/c");
  auto r = run(decl(f("/a"), 2));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/c");
  EXPECT_EQ(r.reason, "remove: unlink /c: Device or resource busy");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=unchanged", "file:/c=failed", "file:/b=not_attempted"}));
  EXPECT_EQ(state->state().applied_revision, 1u);
  EXPECT_EQ(state->state().last_outcome, "failed");
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/a", "file:/b", "file:/c"}));
}

TEST_F(EngineTest, APruneThatLeavesTheResourceBehindFails) {
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b"), 1)).outcome, "applied");
  file->ignore_remove.insert("/b");
  auto r = run(decl(f("/a"), 2));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason, "read-back does not match: still present after removal");
}

// #12.1: a provider whose resources exist before and after management (Removal::Release).
// Before ABI 2 every later declaration that dropped such a resource failed "still present after
// removal" for ever.
TEST_F(EngineTest, AReleasedResourceIsPrunedThoughItStillExists) {
  file->removal = sdk::Removal::Release;
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b", R"({"content": "managed", "mode": "0600"})"), 1)).outcome, "applied");
  // The provider resets the mode it managed and says so; the engine checks exactly that.
  file->release_to = sdk::Value::object();
  file->release_to.set("mode", "0644");
  auto r = run(decl(f("/a"), 2));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=unchanged", "file:/b=removed"}));
  EXPECT_TRUE(file->objects.count("/b"));  // still there
  EXPECT_EQ(file->objects["/b"].get_string("mode"), "0644");
  EXPECT_EQ(r.owned, (Strings{"file:/a"}));
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/a"}));
  // Pruned once: a later declaration without it has nothing to prune.
  r = run(decl(f("/a"), 3));
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=unchanged"}));
}

TEST_F(EngineTest, AReleasedResourceWithoutALeftStateNeedsOnlyToReadBack) {
  file->removal = sdk::Removal::Release;
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b"), 1)).outcome, "applied");
  auto r = run(decl(f("/a"), 2));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=unchanged", "file:/b=removed"}));
  // A read that fails after the release fails the prune.
  ASSERT_EQ(run(decl(f("/a") + "," + f("/c"), 3)).outcome, "applied");
  file->fail_read.insert("/c");
  r = run(decl(f("/a"), 4));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/c");
  EXPECT_EQ(r.reason, "read-back: stat /c: permission denied");
}

TEST_F(EngineTest, AReleaseThatDoesNotLeaveWhatItSaysFails) {
  file->removal = sdk::Removal::Release;
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b", R"({"content": "x", "mode": "0600"})"), 1)).outcome, "applied");
  // Says it left mode 0644, but did not change it.
  file->left = sdk::Value::object();
  file->left.set("mode", "0644");
  file->release_to = sdk::Value::object();
  auto r = run(decl(f("/a"), 2));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/b");
  EXPECT_EQ(r.reason, "read-back does not match what the provider left: properties.mode is 0600, declared 0644");
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/a", "file:/b"}));
}

TEST_F(EngineTest, PruneWithoutItsProviderFailsNamingIt) {
  ASSERT_EQ(run(decl(f("/a") + R"(, {"type": "package", "id": "/nginx", "properties": {}})", 1)).outcome, "applied");
  ProviderRegistry files_only;
  ASSERT_TRUE(files_only.add("file", file));
  Engine other(files_only, *state, log);
  text = R"({"resources": [{"type": "file", "id": "/a", "properties": {"content": "x"}}]})";
  auto d = parse_declaration(text, files_only);
  ASSERT_TRUE(d);
  auto r = other.apply(*d, text, cancel);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "package:/nginx");
  EXPECT_EQ(r.reason, "cannot prune: no provider for resource type 'package' is loaded");
  EXPECT_EQ(owned_on_disk(), (Strings{"file:/a", "package:/nginx"}));
}

TEST_F(EngineTest, DryRunChangesNothing) {
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b"), 1)).outcome, "applied");
  const std::string before = *common::read_file(tmp.path() + "/state/state.json");
  const int applies = file->applies, removes = file->removes;
  auto d = decl(f("/a") + "," + f("/new") + "," + f("/gone-too", R"({"ensure": "absent"})"), 2);
  file->objects["/gone-too"] = sdk::Value::object();
  auto r = run(d, true);
  EXPECT_EQ(r.outcome, "planned");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=unchanged", "file:/new=would_change",
                                  "file:/gone-too=would_remove", "file:/b=would_remove"}));
  EXPECT_EQ(file->applies, applies);
  EXPECT_EQ(file->removes, removes);
  EXPECT_FALSE(file->objects.count("/new"));
  EXPECT_EQ(*common::read_file(tmp.path() + "/state/state.json"), before);
  EXPECT_EQ(state->state().applied_revision, 1u);
  EXPECT_EQ(r.owned, (Strings{"file:/a", "file:/b"}));

  // On a fresh directory a dry run writes no state at all.
  TempDir other_dir;
  auto sd = StateDir::open(other_dir.path());
  ASSERT_TRUE(sd);
  Engine e(registry, *sd, log);
  EXPECT_EQ(e.apply(d, text, cancel, true).outcome, "planned");
  EXPECT_FALSE(fs::exists(other_dir.path() + "/state.json"));
  EXPECT_FALSE(fs::exists(other_dir.path() + "/applied.json"));
}

TEST_F(EngineTest, OwnershipIsSavedAfterEachResource) {
  // While /c is being applied, the record on disk already holds /a and /b: a kill -9 here would
  // leave them owned.
  Strings seen;
  file->on_apply = [&](const std::string& id) {
    if (id == "/c") seen = owned_on_disk();
  };
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b") + "," + f("/c"))).outcome, "applied");
  EXPECT_EQ(seen, (Strings{"file:/a", "file:/b"}));
}

TEST_F(EngineTest, StateSurvivesReopen) {
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b"), 5)).outcome, "applied");
  auto sd = StateDir::open(tmp.path() + "/state");
  ASSERT_TRUE(sd);
  EXPECT_FALSE(sd->fresh());
  EXPECT_EQ(sd->state().applied_revision, 5u);
  // A new engine on the reopened state prunes what the old one applied.
  Engine e(registry, *sd, log);
  auto r = e.apply(decl(f("/a"), 6), text, cancel);
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=unchanged", "file:/b=removed"}));
  for (const auto& entry : fs::directory_iterator(tmp.path() + "/state"))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST_F(EngineTest, CancelStopsBetweenResources) {
  cancel.cancel();
  auto r = run(decl(f("/a") + "," + f("/b")));
  // Cancelled, not failed (decision record 35): the last outcome on record is left as it was.
  EXPECT_EQ(r.outcome, "cancelled");
  EXPECT_EQ(r.reason, "cancelled");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=not_attempted", "file:/b=not_attempted"}));
  EXPECT_EQ(file->applies, 0);
  EXPECT_EQ(state->state().last_outcome, "");
}

TEST_F(EngineTest, CancelDuringAnApply) {
  sdk::CancelToken token;
  file->on_apply = [&](const std::string& id) {
    if (id == "/a") token.cancel();
  };
  text = "{}";
  auto r = engine->apply(decl(f("/a") + "," + f("/b")), text, token);
  EXPECT_EQ(r.outcome, "cancelled");
  EXPECT_EQ(outcomes(r), (Strings{"file:/a=cancelled", "file:/b=not_attempted"}));
  EXPECT_EQ(r.failed_resource, "file:/a");
  EXPECT_EQ(state->state().last_outcome, "");
}

TEST_F(EngineTest, DriftScanRepairsAndReports) {
  ASSERT_EQ(run(decl(f("/a", R"({"content": "a", "mode": "0644"})") + "," + f("/b") + "," +
                     f("/c", R"({"content": "c", "mode": "0644"})"))).outcome,
            "applied");
  EXPECT_TRUE(engine->scan_drift(cancel).empty());

  file->objects["/a"].set("mode", "0777");
  file->objects["/a"].set("content", "hand edited");
  file->objects.erase("/b");
  auto items = engine->scan_drift(cancel);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].resource, "file:/a");
  EXPECT_EQ(items[0].found, "properties.content, properties.mode differ");
  EXPECT_EQ(items[0].action, "repaired");
  EXPECT_EQ(items[1].resource, "file:/b");
  EXPECT_EQ(items[1].found, "missing");
  EXPECT_EQ(items[1].action, "repaired");
  EXPECT_EQ(file->objects["/a"].get_string("mode"), "0644");
  EXPECT_TRUE(file->objects.count("/b"));
  EXPECT_TRUE(engine->scan_drift(cancel).empty());

  // A repair that does not stick is reported as such.
  file->objects["/c"].set("mode", "0777");
  file->lie_mode.insert("/c");
  items = engine->scan_drift(cancel);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].found, "properties.mode differs");
  EXPECT_EQ(items[0].action, "repair failed: read-back does not match: properties.mode is 0600, declared 0644");
}

TEST_F(EngineTest, DriftScanReportsARepairThatFails) {
  ASSERT_EQ(run(decl(f("/a"))).outcome, "applied");
  file->objects.erase("/a");
  file->fail_apply.insert("/a");
  auto items = engine->scan_drift(cancel);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].found, "missing");
  EXPECT_EQ(items[0].action, "repair failed: write /a: No space left on device");
}

/// The digest a host reports for an object of the in-memory provider (it reads back "ensure").
std::string digest_of(sdk::Value props) {
  props.set("ensure", "present");
  return state_digest(props);
}

TEST_F(EngineTest, RemoveOrphans) {
  file->objects["/orphan"] = sdk::Value::object();
  file->objects["/keep"] = sdk::Value::object();
  auto keep = decl(f("/keep"));
  const std::string d = digest_of(sdk::Value::object());
  auto out = engine->remove_orphans({"file:/orphan", "file:/keep", "nonsense", "gizmo:/x"}, {d, d, d, d}, keep, cancel);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].resource, "gizmo:/x");
  EXPECT_EQ(out[0].outcome, "failed");
  EXPECT_EQ(out[0].reason, "cannot remove: no provider for resource type 'gizmo' is loaded");
  EXPECT_EQ(out[1].resource, "nonsense");
  EXPECT_EQ(out[1].outcome, "failed");
  EXPECT_EQ(out[2].resource, "file:/orphan");
  EXPECT_EQ(out[2].outcome, "removed");
  EXPECT_FALSE(file->objects.count("/orphan"));
  EXPECT_TRUE(file->objects.count("/keep"));
}

TEST_F(EngineTest, RemoveOrphansNeverDeletesWhatCannotBeShownToBeOurs) {
  sdk::Value written = sdk::Value::object();
  written.set("content", "as the mesh wrote it");
  file->objects["/ours"] = written;
  file->objects["/changed"] = written;
  file->objects["/changed"].set("content", "edited by someone since");
  file->objects["/no-digest"] = written;
  file->objects["/not-ours"] = sdk::Value::object();
  const std::string d = digest_of(written);
  auto out = engine->remove_orphans({"file:/ours", "file:/changed", "file:/no-digest", "file:/gone", "file:/not-ours"},
                                    {d, d, "", d, std::string(64, 'f')}, decl(f("/keep")), cancel);
  ASSERT_EQ(out.size(), 5u);
  std::map<std::string, std::string> got;
  for (const auto& o : out) got[o.resource] = o.outcome;
  EXPECT_EQ(got["file:/ours"], "removed");
  EXPECT_EQ(got["file:/changed"], "kept");
  EXPECT_EQ(got["file:/no-digest"], "kept");
  EXPECT_EQ(got["file:/gone"], "unchanged");
  EXPECT_EQ(got["file:/not-ours"], "kept");
  EXPECT_FALSE(file->objects.count("/ours"));
  EXPECT_TRUE(file->objects.count("/changed"));
  EXPECT_TRUE(file->objects.count("/no-digest"));
  EXPECT_TRUE(file->objects.count("/not-ours"));
  // Without digests at all, nothing that exists is removed.
  auto none = engine->remove_orphans({"file:/changed"}, decl(f("/keep")), cancel);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].outcome, "kept");
}

// An apply that changes nothing (the same declaration again, every resource unchanged) leaves
// state.json and applied.json as they are: nothing to write, no sync. Anything else writes both.
TEST_F(EngineTest, AnApplyThatChangesNothingRewritesNoStateFile) {
  for (std::uint32_t batch : {0u, 8u}) {
    SCOPED_TRACE("max_batch " + std::to_string(batch));
    file->max_batch = batch;
    TempDir other;
    auto sd = StateDir::open(other.path() + "/state");
    ASSERT_TRUE(sd);
    Engine e(registry, *sd, log);
    const std::string dir = other.path() + "/state";
    auto identity = [&](const std::string& name) {
      struct stat st {};
      EXPECT_EQ(::stat((dir + "/" + name).c_str(), &st), 0) << name;
      return std::pair<ino_t, std::int64_t>(st.st_ino, st.st_mtim.tv_nsec + st.st_mtim.tv_sec * 1000000000LL);
    };
    auto d = decl(f("/a") + "," + f("/b"), 3);
    ASSERT_EQ(e.apply(d, text, cancel).outcome, "applied");
    const auto state_before = identity("state.json"), applied_before = identity("applied.json");
    // The same again: nothing changes, nothing is written.
    auto again = e.apply(d, text, cancel);
    EXPECT_EQ(again.outcome, "applied");
    EXPECT_EQ(outcomes(again), (Strings{"file:/a=unchanged", "file:/b=unchanged"}));
    EXPECT_EQ(again.owned, (Strings{"file:/a", "file:/b"}));
    EXPECT_EQ(identity("state.json"), state_before);
    EXPECT_EQ(identity("applied.json"), applied_before);
    // A reopened directory says the same.
    {
      auto reopened = StateDir::open(dir);
      ASSERT_TRUE(reopened);
      EXPECT_EQ(reopened->state().applied_revision, 3u);
      EXPECT_EQ(reopened->state().owned.size(), 2u);
    }
    // A repaired resource whose state reads back as recorded: still nothing to write.
    file->objects["/a"].set("content", "drifted");
    auto repaired = e.apply(d, text, cancel);
    EXPECT_EQ(outcomes(repaired), (Strings{"file:/a=changed", "file:/b=unchanged"}));
    // applied.json no longer what was applied: both written again.
    ASSERT_TRUE(common::write_file_atomic(dir + "/applied.json", "{}", 0600));
    ASSERT_EQ(e.apply(d, text, cancel).outcome, "applied");
    EXPECT_EQ(*common::read_file(dir + "/applied.json"), text);
    EXPECT_NE(identity("state.json"), state_before);
    // Another order of the same resources: the records' order changed, state.json is written.
    const auto state_mid = identity("state.json");
    auto reordered = decl(f("/b") + "," + f("/a"), 3);
    ASSERT_EQ(e.apply(reordered, text, cancel).outcome, "applied");
    EXPECT_NE(identity("state.json"), state_mid);
  }
}

// ApplyOptions: every outcome goes to on_outcome in the order apply() lists them; `resources`
// keeps every failed one and the first keep_changes changed/removed ones, and not_kept counts the
// rest; without list_owned the owned list is empty. One at a time and in batches.
TEST_F(EngineTest, OptionsHandEveryOutcomeOverAndKeepOnlyWhatTheyAskFor) {
  for (std::uint32_t batch : {0u, 8u}) {
    SCOPED_TRACE("max_batch " + std::to_string(batch));
    file->max_batch = batch;
    TempDir other;
    auto sd = StateDir::open(other.path() + "/state");
    ASSERT_TRUE(sd);
    auto mem = std::make_shared<MemProvider>("file");
    mem->max_batch = batch;
    ProviderRegistry reg;
    ASSERT_TRUE(reg.add("file", mem));
    Engine plain(reg, *sd, log);
    auto both = [&](Declaration d, std::size_t keep, bool list_owned) {
      const Declaration copy = d;
      Strings seen;
      ApplyOptions options;
      options.keep_changes = keep;
      options.list_owned = list_owned;
      options.on_outcome = [&](const ResourceOutcome& o) { seen.push_back(o.resource + "=" + o.outcome); };
      auto r = engine->apply_taking(d, text, cancel, options);
      auto all = plain.apply(copy, text, cancel);
      EXPECT_EQ(seen, outcomes(all));
      EXPECT_EQ(r.outcome, all.outcome);
      EXPECT_EQ(r.failed_resource, all.failed_resource);
      EXPECT_EQ(r.reason, all.reason);
      EXPECT_EQ(r.code, all.code);
      EXPECT_EQ(r.owned, list_owned ? all.owned : Strings{});
      EXPECT_EQ(r.resources.size() + r.not_kept.total(), all.resources.size());
      return r;
    };
    mem->fail_apply = file->fail_apply = {};
    auto five = f("/a") + "," + f("/b") + "," + f("/c") + "," + f("/d") + "," + f("/e");
    auto first = both(decl(five), 2, true);
    EXPECT_EQ(outcomes(first), (Strings{"file:/a=changed", "file:/b=changed"}));
    EXPECT_EQ(first.not_kept.changed, 3u);
    EXPECT_EQ(first.not_kept.total(), 3u);
    // Pruned: /b../e removed (dependents first), /a unchanged; nothing kept.
    auto pruned = both(decl(f("/a")), 0, false);
    EXPECT_TRUE(pruned.resources.empty());
    EXPECT_EQ(pruned.not_kept.unchanged, 1u);
    EXPECT_EQ(pruned.not_kept.removed, 4u);
    // A failure: kept whatever the limit, with the ones not attempted counted.
    file->fail_apply = mem->fail_apply = {"/c"};
    auto failed = both(decl(f("/a", R"({"content": "a2"})") + "," + f("/b") + "," + f("/c") + "," + f("/d")), 1,
                       false);
    EXPECT_EQ(failed.outcome, "failed");
    EXPECT_EQ(outcomes(failed), (Strings{"file:/a=changed", "file:/c=failed"}));
    EXPECT_EQ(failed.not_kept.changed, 1u);
    EXPECT_EQ(failed.not_kept.not_attempted, 1u);
    file->fail_apply = mem->fail_apply = {};
    // A dry run keeps would_change like changed.
    ApplyOptions dry;
    dry.dry_run = true;
    dry.keep_changes = 1;
    auto d = decl(f("/x") + "," + f("/y"));
    auto planned = engine->apply_taking(d, text, cancel, dry);
    EXPECT_EQ(planned.outcome, "planned");
    EXPECT_EQ(outcomes(planned), (Strings{"file:/x=would_change"}));
    EXPECT_EQ(planned.not_kept.would_change, 1u);
    // Clean slate for the next round.
    auto none = decl("");
    ASSERT_EQ(engine->apply(none, text, cancel).outcome, "applied");
    ASSERT_EQ(plain.apply(none, text, cancel).outcome, "applied");
  }
}

// The text of apply_taking is staged beside applied.json before the first resource is touched,
// text_staged tells the caller so (who may free it), and the commit renames it into place. A failed apply leaves applied.json as
// it was and no staged file; an apply whose text applied.json holds already does not rewrite it;
// a text that cannot be staged fails the apply before anything is touched.
TEST_F(EngineTest, AGivenUpTextIsStagedBeforeAnythingIsTouchedAndCommittedAtTheEnd) {
  const std::string dir = tmp.path() + "/state";
  const std::string applied = dir + "/applied.json", next = dir + "/applied.json.next";
  auto identity = [&](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return std::pair<ino_t, std::int64_t>(st.st_ino, st.st_mtim.tv_nsec + st.st_mtim.tv_sec * 1000000000LL);
  };
  for (std::uint32_t batch : {0u, 8u}) {
    SCOPED_TRACE("max_batch " + std::to_string(batch));
    file->max_batch = batch;
    auto d = decl(f("/a") + "," + f("/b"), 2 + batch);
    const std::string expected = text;
    std::string given = text;
    bool staged_before_first = false;
    int told = 0;
    ApplyOptions options;
    options.text_staged = [&] {
      ++told;
      EXPECT_TRUE(file->calls.empty());  // nothing applied yet in this apply
      std::string().swap(given);                       // the caller frees it
    };
    options.on_outcome = [&](const ResourceOutcome& o) {
      if (o.resource == "file:/a") staged_before_first = fs::exists(next) && given.empty() && told == 1;
    };
    file->calls.clear();
    auto r = engine->apply_taking(d, given, cancel, options);
    ASSERT_EQ(r.outcome, "applied") << r.reason;
    EXPECT_TRUE(staged_before_first);
    EXPECT_EQ(told, 1);
    EXPECT_EQ(*common::read_file(applied), expected);
    EXPECT_FALSE(fs::exists(next));
    // A failed apply of another text: applied.json as it was, nothing staged left.
    const auto applied_before = identity(applied);
    file->fail_apply = {"/c"};
    auto failing = decl(f("/a") + "," + f("/c"), 10 + batch);
    given = text;
    file->calls.clear();
    r = engine->apply_taking(failing, given, cancel, options);
    EXPECT_EQ(r.outcome, "failed");
    EXPECT_EQ(*common::read_file(applied), expected);
    EXPECT_EQ(identity(applied), applied_before);
    EXPECT_FALSE(fs::exists(next));
    file->fail_apply = {};
    // The first text again, one resource repaired: state.json is written (the last apply
    // failed), applied.json, which holds this text, is not.
    const auto state_before = identity(dir + "/state.json");
    file->objects["/a"].set("content", "drifted");
    auto again = decl(f("/a") + "," + f("/b"), 2 + batch);
    ASSERT_EQ(text, expected);
    given = text;
    file->calls.clear();
    r = engine->apply_taking(again, given, cancel, options);
    ASSERT_EQ(r.outcome, "applied") << r.reason;
    EXPECT_EQ(outcomes(r), (Strings{"file:/a=changed", "file:/b=unchanged"}));
    EXPECT_EQ(identity(applied), applied_before);
    EXPECT_NE(identity(dir + "/state.json"), state_before);
    EXPECT_FALSE(fs::exists(next));
  }
  // The text cannot be staged: the apply fails before touching anything.
  fs::create_directory(next);
  file->calls.clear();
  auto d = decl(f("/z"), 20);
  ApplyOptions options;
  bool told = false;
  options.text_staged = [&] { told = true; };
  auto r = engine->apply_taking(d, text, cancel, options);
  EXPECT_FALSE(told);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason.rfind("saving the applied declaration: ", 0), 0u) << r.reason;
  EXPECT_EQ(outcomes(r), (Strings{"file:/z=not_attempted"}));
  EXPECT_TRUE(file->calls.empty());
  EXPECT_FALSE(file->objects.count("/z"));
}

TEST_F(EngineTest, AnApplyRecordsTheDigestOfWhatItReadBack) {
  auto r = run(decl(f("/a", R"({"content": "a", "mode": "0644"})"), 1));
  ASSERT_EQ(r.outcome, "applied");
  ASSERT_EQ(r.owned_digests.size(), 1u);
  EXPECT_EQ(r.owned_digests[0], digest_of(file->objects["/a"]));
  EXPECT_EQ(state->state().owned[0].digest, r.owned_digests[0]);
  // Member order does not matter; values do.
  sdk::Value x = sdk::Value::object();
  x.set("b", 1);
  x.set("a", 2);
  sdk::Value y = sdk::Value::object();
  y.set("a", 2);
  y.set("b", 1);
  EXPECT_EQ(state_digest(x), state_digest(y));
  y.set("a", 3);
  EXPECT_NE(state_digest(x), state_digest(y));
}

// #12.4: the ErrorCode a provider returns is kept in the resource's outcome and the result.
TEST_F(EngineTest, AProvidersErrorCodeIsKeptInTheOutcome) {
  file->fail_read.insert("/a");  // PermissionDenied
  auto r = run(decl(f("/a") + "," + f("/b")));
  ASSERT_EQ(outcomes(r), (Strings{"file:/a=failed", "file:/b=not_attempted"}));
  EXPECT_EQ(r.resources[0].code, "permission_denied");
  EXPECT_EQ(r.resources[1].code, "");  // not attempted: no failure of its own
  EXPECT_EQ(r.code, "permission_denied");
  EXPECT_TRUE(std::any_of(log.lines.begin(), log.lines.end(), [](const std::string& l) {
    return l.find("resource=file:/a outcome=failed code=permission_denied reason=") != std::string::npos;
  }));

  file->fail_read.clear();
  file->fail_apply.insert("/b");
  file->fail_apply_code = sdk::ErrorCode::Transient;
  auto t = run(decl(f("/a") + "," + f("/b"), 2));
  ASSERT_EQ(outcomes(t), (Strings{"file:/a=changed", "file:/b=failed"}));
  EXPECT_EQ(t.resources[0].code, "");  // a success has no code
  EXPECT_EQ(t.resources[1].code, "transient");
  EXPECT_EQ(t.code, "transient");
  EXPECT_EQ(t.reason, "write /b: No space left on device");  // the reason is unchanged

  file->fail_apply.clear();
  EXPECT_EQ(run(decl(f("/a") + "," + f("/b"), 3)).code, "");  // applied: no code
}

TEST_F(EngineTest, TheEnginesOwnFailuresHaveTheirOwnCodes) {
  // A read-back that does not match is the engine's verdict, not a provider error: "failed".
  file->lie_mode.insert("/a");
  auto r = run(decl(f("/a", R"({"content": "x", "mode": "0644"})")));
  ASSERT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.resources[0].code, "failed");
  EXPECT_EQ(r.code, "failed");
  // A prune whose resource stays: "failed" too.
  file->lie_mode.clear();
  ASSERT_EQ(run(decl(f("/a") + "," + f("/b"), 2)).outcome, "applied");
  file->ignore_remove.insert("/b");
  auto p = run(decl(f("/a"), 3));
  ASSERT_EQ(p.failed_resource, "file:/b");
  EXPECT_EQ(p.code, "failed");
  // No provider loaded for the type: failed_precondition.
  text = R"({"resources": [{"type": "file", "id": "/a", "properties": {"content": "x"}}]})";
  ProviderRegistry none;
  ASSERT_TRUE(none.add("package", package));
  auto d = parse_declaration(text, registry);
  ASSERT_TRUE(d);
  Engine other(none, *state, log);
  auto n = other.apply(*d, text, cancel);
  ASSERT_EQ(n.outcome, "failed");
  EXPECT_EQ(n.resources[0].code, "failed_precondition");
  EXPECT_EQ(n.code, "failed_precondition");
}

TEST_F(EngineTest, ACancelledApplySaysCancelled) {
  cancel.cancel();
  auto r = run(decl(f("/a")));
  EXPECT_EQ(r.outcome, "cancelled");
  EXPECT_EQ(r.code, "cancelled");
}

}  // namespace
}  // namespace mesh::engine
