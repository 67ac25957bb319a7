// Batched applies (decision 0106): the engine's side, with the in-memory provider and the SDK's
// default apply_batch; and the state journal's intent lines.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine_results.h"
#include "mem_provider.h"
#include "mesh/engine/engine.h"
#include "mesh/engine/state.h"

namespace mesh::engine {
namespace {

using testing::CaptureLogger;
using testing::outcomes;
using testing::MemProvider;
using testing::TempDir;

class EngineBatchTest : public ::testing::Test {
 protected:
  EngineBatchTest() {
    file->max_batch = 3;
    EXPECT_TRUE(registry.add("file", file));
    auto sd = StateDir::open(tmp.path() + "/state");
    EXPECT_TRUE(sd);
    state = std::make_unique<StateDir>(std::move(*sd));
    engine = std::make_unique<Engine>(registry, *state, log);
  }

  Declaration decl(const std::string& resources_json) {
    text = R"({"node": "web-01", "revision": 1, "resources": [)" + resources_json + "]}";
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
  std::vector<std::string> owned_on_disk() { return testing::owned_on_disk(tmp.path() + "/state"); }

  TempDir tmp;
  std::shared_ptr<MemProvider> file = std::make_shared<MemProvider>("file");
  ProviderRegistry registry;
  std::unique_ptr<StateDir> state;
  CaptureLogger log;
  std::unique_ptr<Engine> engine;
  sdk::CancelToken cancel;
  std::string text;
};

// A batch is max_batch plans: an unchanged resource between them is read and planned, and does not
// count (decision 0200); the last one, alone, is applied on its own.
TEST_F(EngineBatchTest, IndependentResourcesGoInBatchesOfMaxBatchAndAreAllRecorded) {
  file->objects["/c"] = sdk::Value::object();
  file->objects["/c"].set("content", "x");  // unchanged: read and planned, not in the batch's plans
  auto r = engine->apply(decl(f("/a") + "," + f("/b") + "," + f("/c") + "," + f("/d") + "," + f("/e")), text, cancel,
                         false);
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(outcomes(r), (std::vector<std::string>{"file:/a=changed", "file:/b=changed", "file:/c=unchanged",
                                                   "file:/d=changed", "file:/e=changed"}));
  EXPECT_EQ(file->batches, (std::vector<std::string>{"batch:/a,/b,/d"}));
  EXPECT_EQ(file->applies, 4);
  EXPECT_EQ(owned_on_disk(), (std::vector<std::string>{"file:/a", "file:/b", "file:/c", "file:/d", "file:/e"}));
}

// A sparse repair (decision 0200): the changed resources among many unchanged ones go in batches of
// max_batch plans, however many unchanged resources lie between them (up to the window of
// max_batch × 16 resources); every one is recorded.
TEST_F(EngineBatchTest, ASparseRepairGoesInBatchesOfMaxBatchPlansAcrossTheUnchanged) {
  std::string list;
  for (int k = 0; k < 60; ++k) list += (k ? "," : "") + f("/f" + std::to_string(100 + k));
  auto d = decl(list);
  ASSERT_EQ(engine->apply(d, text, cancel, false).outcome, "applied");
  // Every 7th drifted: 9 of 60 (f100, f107, ..., f156).
  std::vector<std::string> drifted;
  for (int k = 0; k < 60; k += 7) {
    file->objects["/f" + std::to_string(100 + k)].set("content", "drifted");
    drifted.push_back("/f" + std::to_string(100 + k));
  }
  file->batches.clear();
  auto r = engine->apply(d, text, cancel, false);
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  std::size_t changed = 0;
  for (const auto& o : r.resources) changed += o.outcome == "changed";
  EXPECT_EQ(changed, drifted.size());
  auto batch = [&](std::size_t from, std::size_t n) {
    std::string out = "batch:";
    for (std::size_t k = from; k < from + n; ++k) out += (k > from ? "," : "") + drifted[k];
    return out;
  };
  // Each batch ends at its third plan and the next run starts after it: 3 batches for 9 repairs
  // (with runs of max_batch resources, as before decision 0200, it was 9 batches of one plan).
  EXPECT_EQ(file->batches, (std::vector<std::string>{batch(0, 3), batch(3, 3), batch(6, 3)}));
  for (const auto& id : drifted) EXPECT_EQ(file->objects[id].get_string("content"), "x") << id;
  EXPECT_EQ(owned_on_disk().size(), 60u);
}

// Issue 16 part 2: a failure in the middle of a batch fails the apply, records exactly the
// resources that were verified, and attempts nothing after it.
TEST_F(EngineBatchTest, AFailureInTheMiddleOfABatchRecordsExactlyTheVerifiedAndAttemptsNothingAfter) {
  file->max_batch = 5;
  file->fail_apply = {"/c"};
  auto r = engine->apply(decl(f("/a") + "," + f("/b") + "," + f("/c") + "," + f("/d") + "," + f("/e")), text, cancel,
                         false);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/c");
  EXPECT_NE(r.reason.find("No space left"), std::string::npos) << r.reason;
  EXPECT_EQ(outcomes(r), (std::vector<std::string>{"file:/a=changed", "file:/b=changed", "file:/c=failed",
                                                   "file:/d=not_attempted", "file:/e=not_attempted"}));
  EXPECT_EQ(file->batches, (std::vector<std::string>{"batch:/a,/b,/c,/d,/e"}));
  EXPECT_FALSE(file->objects.count("/d"));
  EXPECT_FALSE(file->objects.count("/e"));
  EXPECT_EQ(r.owned, (std::vector<std::string>{"file:/a", "file:/b"}));
  // On disk too, and the batch's intent is settled: reopening does not adopt /c, /d or /e.
  EXPECT_EQ(owned_on_disk(), (std::vector<std::string>{"file:/a", "file:/b"}));
}

TEST_F(EngineBatchTest, AReadBackMismatchInABatchFailsThatResourceAndRecordsTheOthersVerified) {
  file->max_batch = 4;
  file->lie_mode = {"/b"};
  auto r = engine->apply(decl(f("/a", R"({"content": "x", "mode": "0644"})") + "," +
                              f("/b", R"({"content": "x", "mode": "0644"})") + "," + f("/c") + "," + f("/d")),
                         text, cancel, false);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "file:/b");
  // /c and /d were made visible by the same batch before /b's read-back: each is verified on its
  // own and recorded, and reported as what happened to it.
  EXPECT_EQ(outcomes(r), (std::vector<std::string>{"file:/a=changed", "file:/b=failed", "file:/c=changed",
                                                   "file:/d=changed"}));
  EXPECT_EQ(owned_on_disk(), (std::vector<std::string>{"file:/a", "file:/c", "file:/d"}));
}

// `requires` and `restart_on` order is unchanged: a resource that requires, or restarts on, one
// of the run is not in its batch, and a notified resource is never batched (it gets its notification).
TEST_F(EngineBatchTest, RequiresAndRestartOnEndABatchAndANotifiedResourceIsAppliedOnItsOwn) {
  file->max_batch = 10;
  file->notified_by_restart_on = true;
  file->accept_restart_on();
  auto r = engine->apply(decl(f("/a") + "," + f("/b") + "," + f("/c", R"({"content": "x"})", R"("file:/a")") + "," +
                              f("/d") + "," + f("/e", R"({"content": "x", "restart_on": ["file:/d"]})") + "," +
                              f("/g")),
                         text, cancel, false);
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(outcomes(r), (std::vector<std::string>{"file:/a=changed", "file:/b=changed", "file:/c=changed",
                                                   "file:/d=changed", "file:/e=changed", "file:/g=changed"}));
  // /c requires /a: a new run from /c; /e restarts on /d (changed in this apply): applied alone,
  // after /d's batch, with its notification.
  EXPECT_EQ(file->calls, (std::vector<std::string>{"batch:/a,/b", "apply:/a", "apply:/b", "batch:/c,/d", "apply:/c",
                                                   "apply:/d", "apply:/e", "apply:/g"}));
  EXPECT_EQ(file->notified["/e"], (std::vector<std::string>{"file:/d"}));
}

TEST_F(EngineBatchTest, ADryRunIsNeverBatched) {
  auto r = engine->apply(decl(f("/a") + "," + f("/b")), text, cancel, true);
  EXPECT_EQ(outcomes(r), (std::vector<std::string>{"file:/a=would_change", "file:/b=would_change"}));
  EXPECT_TRUE(file->batches.empty());
}

// ---- the journal's intent (StateDir::save_intent / save_changes) -------------------------------

StateDir::IntentEntry entry(const std::string& name, bool existed, std::uint64_t order) {
  sdk::Value props = sdk::Value::object();
  props.set("content", "x");
  return StateDir::IntentEntry{name, existed, order, props};
}

std::vector<std::string> owned_names(const StateDir& sd) {
  std::vector<std::string> out;
  for (const auto& o : sd.state().owned) out.push_back(o.resource);
  return out;
}

// After a kill -9 inside a batch: what the mesh may have created is owned (so it can be pruned);
// what existed before and no apply verified is never adopted.
TEST(StateDirIntentTest, AnOpenIntentAdoptsOnlyWhatDidNotExistBefore) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/state";
  {
    auto sd = StateDir::open(dir);
    ASSERT_TRUE(sd);
    ASSERT_TRUE(sd->save_intent({entry("file:/new", false, 0), entry("file:/was-there", true, 1)}));
  }  // killed here: no save_changes
  auto sd = StateDir::open(dir);
  ASSERT_TRUE(sd) << sd.error().message;
  EXPECT_EQ(owned_names(*sd), (std::vector<std::string>{"file:/new"}));
}

TEST(StateDirIntentTest, ASettledIntentAdoptsNothingAndItsVerifiedChangesStand) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/state";
  {
    auto sd = StateDir::open(dir);
    ASSERT_TRUE(sd);
    ASSERT_TRUE(sd->save_intent({entry("file:/a", false, 0), entry("file:/b", false, 1)}));
    HostState st = sd->state();
    st.owned.push_back(OwnedResource{"file:/a", sdk::Value::object(), 0, "d"});
    ASSERT_TRUE(sd->save_changes(st, {"file:/a"}));  // /b failed: not verified
  }
  auto sd = StateDir::open(dir);
  ASSERT_TRUE(sd);
  EXPECT_EQ(owned_names(*sd), (std::vector<std::string>{"file:/a"}));
}

// The adoption is written before anything else this process journals, so a forget after it is
// not undone by adopting the same entry again at the next open.
TEST(StateDirIntentTest, AnAdoptedEntryForgottenLaterStaysForgotten) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/state";
  {
    auto sd = StateDir::open(dir);
    ASSERT_TRUE(sd);
    ASSERT_TRUE(sd->save_intent({entry("file:/new", false, 0), entry("file:/other", false, 1)}));
  }
  {
    auto sd = StateDir::open(dir);
    ASSERT_TRUE(sd);
    ASSERT_EQ(owned_names(*sd), (std::vector<std::string>{"file:/new", "file:/other"}));
    HostState st = sd->state();
    st.owned.erase(st.owned.begin());  // the next apply prunes /new
    ASSERT_TRUE(sd->save_change(st, "file:/new"));
  }
  auto sd = StateDir::open(dir);
  ASSERT_TRUE(sd);
  EXPECT_EQ(owned_names(*sd), (std::vector<std::string>{"file:/other"}));
}

TEST(StateDirIntentTest, ABadIntentLineIsNamed) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/state";
  {
    auto sd = StateDir::open(dir);
    ASSERT_TRUE(sd);
    ASSERT_TRUE(sd->save_intent({entry("file:/a", false, 0)}));
  }
  {
    std::ofstream j(dir + "/state.journal", std::ios::app);
    j << R"({"intent":[{"resource":"file:/b","existed":"no","order":0,"properties":{}}]})" << "\n";
  }
  auto sd = StateDir::open(dir);
  ASSERT_FALSE(sd);
  EXPECT_NE(sd.error().message.find("state.journal line 3"), std::string::npos) << sd.error().message;
  EXPECT_NE(sd.error().message.find("intent entry"), std::string::npos) << sd.error().message;
}

}  // namespace
}  // namespace mesh::engine
