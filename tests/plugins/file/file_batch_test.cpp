// The file provider's batch (decision 0106): what apply_batch leaves on disk, with a recording
// intent hook in place of the engine's journal.
#include "file_test_support.h"

namespace mesh::plugins::file::test {
namespace {

/// Records the hook's call; when `dir` is set, what that directory held at that moment.
struct RecordingIntent final : sdk::BatchIntent {
  sdk::Result<void> before_visible(std::size_t count) noexcept override {
    ++calls;
    counted = count;
    if (!dir.empty()) seen = list_dir(dir);
    if (refuse) return sdk::fail(sdk::ErrorCode::Failed, "cannot append to state.journal: disk full");
    return {};
  }
  int calls = 0;
  std::size_t counted = 0;
  bool refuse = false;
  std::string dir;
  std::vector<std::string> seen;
};

class FileBatchTest : public ::testing::Test {
 protected:
  sdk::Plan plan_for(const std::string& path, const std::string& content) {
    auto want = file_resource(path, {{"content", sdk::Value(content)}, {"mode", sdk::Value("0644")}});
    auto observed = h.provider->read(want.rid);
    EXPECT_TRUE(observed);
    auto plan = h.provider->plan(want, observed ? *observed : std::nullopt);
    EXPECT_TRUE(plan);
    return plan ? *plan : sdk::Plan{};
  }
  sdk::Result<void> run(std::vector<sdk::Plan> plans, sdk::ApplyBatchResponse& resp) {
    sdk::ApplyBatchRequest req;
    req.plans = std::move(plans);
    req.cancel = &cancel;
    req.intent = &intent;
    return h.provider->apply_batch(req, resp);
  }
  TempDir tmp;
  Harness h;
  sdk::CancelToken cancel;
  RecordingIntent intent;
};

TEST_F(FileBatchTest, DeclaresABatchAndAppliesOneWithNothingVisibleBeforeTheHook) {
  auto caps = h.provider->capabilities();
  ASSERT_TRUE(caps);
  EXPECT_EQ(caps->max_batch, 256u);
  write_file(tmp / "b", "old\n");
  intent.dir = tmp.path();
  sdk::ApplyBatchResponse resp;
  ASSERT_TRUE(run({plan_for(tmp / "a", "A\n"), plan_for(tmp / "b", "B\n"), plan_for(tmp / "c", "C\n")}, resp));
  EXPECT_EQ(resp.applied, 3u);
  EXPECT_EQ(resp.states.size(), 3u);
  EXPECT_EQ(intent.calls, 1);
  EXPECT_EQ(intent.counted, 3u);
  // At the hook: only the old file and the three temporary files; no target written yet.
  ASSERT_EQ(intent.seen.size(), 4u) << ::testing::PrintToString(intent.seen);
  EXPECT_EQ(std::count(intent.seen.begin(), intent.seen.end(), "b"), 1);
  EXPECT_EQ(std::count_if(intent.seen.begin(), intent.seen.end(),
                          [](const std::string& n) { return n.find(".mesh-tmp-") != std::string::npos; }),
            3);
  EXPECT_EQ(read_file(tmp / "a"), "A\n");
  EXPECT_EQ(read_file(tmp / "b"), "B\n");
  EXPECT_EQ(read_file(tmp / "c"), "C\n");
  EXPECT_TRUE(temp_files_in(tmp.path()).empty());
}

// Mode changes in a batch (decision 150) are not fsync'ed one by one: one syncfs after the renames
// makes them durable. What is left on disk and reported is the same as applied alone.
TEST_F(FileBatchTest, ModeChangesAndWritesInOneBatchAreAppliedAndReportedInOrder) {
  write_file(tmp / "m1", "A\n", 0600);
  write_file(tmp / "w", "old\n");
  write_file(tmp / "m2", "C\n", 0640);
  sdk::ApplyBatchResponse resp;
  const auto plans = std::vector<sdk::Plan>{plan_for(tmp / "m1", "A\n"), plan_for(tmp / "w", "B\n"),
                                            plan_for(tmp / "m2", "C\n")};
  EXPECT_EQ(change_list(plans[0]), "mode");
  EXPECT_EQ(change_list(plans[1]), "content");
  ASSERT_TRUE(run(plans, resp));
  ASSERT_EQ(resp.applied, 3u);
  ASSERT_EQ(resp.states.size(), 3u);
  EXPECT_EQ(lstat_of(tmp / "m1").st_mode & 07777, 0644u);
  EXPECT_EQ(lstat_of(tmp / "m2").st_mode & 07777, 0644u);
  EXPECT_EQ(read_file(tmp / "w"), "B\n");
  EXPECT_EQ(resp.states[0].properties.get_string("mode"), "0644");
  EXPECT_EQ(resp.states[1].properties.get_string("mode"), "0644");
  EXPECT_EQ(resp.states[2].properties.get_string("mode"), "0644");
  // Each reads back as declared (the engine's rule).
  for (const char* name : {"m1", "w", "m2"}) {
    auto want = file_resource(tmp / name, {{"content", sdk::Value(std::string(name) == "w" ? "B\n" : name[1] == '1' ? "A\n" : "C\n")},
                                          {"mode", sdk::Value("0644")}});
    auto back = h.provider->read(want.rid);
    ASSERT_TRUE(back);
    auto again = h.provider->plan(want, *back);
    ASSERT_TRUE(again);
    EXPECT_TRUE(again->empty()) << name << ": " << change_list(*again);
  }
  EXPECT_TRUE(temp_files_in(tmp.path()).empty());
}

// A plan that fails while being staged (here: its parent directory is missing) lets the plans
// before it through, fails, and nothing after it becomes visible or is left behind.
TEST_F(FileBatchTest, AFailureWhileStagingAppliesWhatCameBeforeAndNothingAfter) {
  sdk::ApplyBatchResponse resp;
  auto ok = run({plan_for(tmp / "a", "A\n"), plan_for(tmp / "b", "B\n"), plan_for(tmp / "missing/c", "C\n"),
                 plan_for(tmp / "d", "D\n")},
                resp);
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("does not exist"), std::string::npos) << ok.error().message;
  EXPECT_EQ(resp.applied, 2u);
  EXPECT_EQ(intent.counted, 2u);
  EXPECT_EQ(read_file(tmp / "a"), "A\n");
  EXPECT_EQ(read_file(tmp / "b"), "B\n");
  EXPECT_FALSE(exists(tmp / "d"));
  EXPECT_TRUE(temp_files_in(tmp.path()).empty());
}

// The host's journal could not take the intent: nothing is made visible, nothing left behind.
TEST_F(FileBatchTest, ARefusedIntentMakesNothingVisible) {
  write_file(tmp / "b", "old\n");
  intent.refuse = true;
  sdk::ApplyBatchResponse resp;
  auto ok = run({plan_for(tmp / "a", "A\n"), plan_for(tmp / "b", "B\n")}, resp);
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("state.journal"), std::string::npos);
  EXPECT_EQ(resp.applied, 0u);
  EXPECT_FALSE(exists(tmp / "a"));
  EXPECT_EQ(read_file(tmp / "b"), "old\n");
  EXPECT_TRUE(temp_files_in(tmp.path()).empty());
}

TEST_F(FileBatchTest, ACancelBeforeAPlanStopsThereAndAppliesWhatCameBefore) {
  sdk::ApplyBatchResponse resp;
  std::vector<sdk::Plan> plans{plan_for(tmp / "a", "A\n"), plan_for(tmp / "b", "B\n")};
  cancel.cancel();
  auto ok = run(std::move(plans), resp);
  ASSERT_FALSE(ok);
  EXPECT_EQ(ok.error().code, sdk::ErrorCode::Cancelled);
  EXPECT_EQ(resp.applied, 0u);
  EXPECT_EQ(intent.calls, 0);
  EXPECT_FALSE(exists(tmp / "a"));
}

// Stale temporary files of a killed write are still swept, once, after the batch's renames.
TEST_F(FileBatchTest, AStaleTemporaryFileIsSweptAfterTheBatch) {
  write_file(tmp / ".a.mesh-tmp-0123456789ab", "torn");
  sdk::ApplyBatchResponse resp;
  ASSERT_TRUE(run({plan_for(tmp / "a", "A\n"), plan_for(tmp / "b", "B\n")}, resp));
  EXPECT_TRUE(temp_files_in(tmp.path()).empty());
  EXPECT_EQ(list_dir(tmp.path()), (std::vector<std::string>{"a", "b"}));
}

TEST_F(FileBatchTest, MaxBatchIsConfigurableAndBounded) {
  sdk::Value config = sdk::Value::object();
  config.set("max_batch", std::int64_t{1});
  ASSERT_TRUE(h.provider->configure(config));
  EXPECT_EQ(h.provider->capabilities()->max_batch, 1u);
  config.set("max_batch", std::int64_t{257});
  auto bad = h.provider->configure(config);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().describe().find("max_batch"), std::string::npos) << bad.error().describe();
}

}  // namespace
}  // namespace mesh::plugins::file::test
