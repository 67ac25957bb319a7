#include "mesh/engine/state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "mem_provider.h"
#include "mesh/common/fs.h"

namespace mesh::engine {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;
using testing::TempDir;

std::vector<std::string> temp_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) out.push_back(e.path());
  return out;
}

HostState sample() {
  HostState st;
  st.applied_revision = 43;
  st.applied_digest = std::string(64, 'a');
  st.last_revision = 44;
  st.last_outcome = "failed";
  sdk::Value p = sdk::Value::object();
  p.set("content", "hi\n\"quoted\"\t\x01");
  p.set("mode", "0644");
  st.owned.push_back(OwnedResource{"package:nginx", sdk::Value::object(), 0, ""});
  st.owned.push_back(OwnedResource{"file:/etc/motd", p, 1, "abc"});
  return st;
}

TEST(StateDirTest, FreshThenSurvivesReopen) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/state";
  {
    auto sd = StateDir::open(dir);
    ASSERT_TRUE(sd) << sd.error().describe();
    EXPECT_TRUE(sd->fresh());
    EXPECT_EQ(sd->path(), dir);
    EXPECT_EQ(sd->state().applied_revision, 0u);
    EXPECT_TRUE(sd->state().owned.empty());
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_TRUE(sd->save(sample()));
    // save keeps owned sorted by name
    ASSERT_EQ(sd->state().owned.size(), 2u);
    EXPECT_EQ(sd->state().owned[0].resource, "file:/etc/motd");
  }
  auto sd = StateDir::open(dir);
  ASSERT_TRUE(sd) << sd.error().describe();
  EXPECT_FALSE(sd->fresh());
  const HostState& st = sd->state();
  EXPECT_EQ(st.applied_revision, 43u);
  EXPECT_EQ(st.applied_digest, std::string(64, 'a'));
  EXPECT_EQ(st.last_revision, 44u);
  EXPECT_EQ(st.last_outcome, "failed");
  ASSERT_EQ(st.owned.size(), 2u);
  EXPECT_EQ(st.owned[0].resource, "file:/etc/motd");
  EXPECT_EQ(st.owned[0].order, 1u);
  EXPECT_EQ(st.owned[0].properties.get_string("content"), "hi\n\"quoted\"\t\x01");
  EXPECT_EQ(st.owned[0].digest, "abc") << "the read-back digest survives a reopen";
  EXPECT_EQ(st.owned[1].resource, "package:nginx");
  EXPECT_EQ(st.owned[1].digest, "");
  EXPECT_TRUE(temp_files(dir).empty());
  struct stat fst {};
  ASSERT_EQ(::stat((dir + "/state.json").c_str(), &fst), 0);
  EXPECT_EQ(fst.st_mode & 0777, 0600u);
}

TEST(StateDirTest, ManySavesLeaveNoTempFiles) {
  TempDir tmp;
  auto sd = StateDir::open(tmp.path());
  ASSERT_TRUE(sd);
  HostState st;
  for (int i = 0; i < 50; ++i) {
    st.owned.push_back(OwnedResource{"file:/f" + std::to_string(i), sdk::Value::object(),
                                     static_cast<std::uint64_t>(i), ""});
    ASSERT_TRUE(sd->save(st));
  }
  EXPECT_TRUE(temp_files(tmp.path()).empty());
  auto again = StateDir::open(tmp.path());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->state().owned.size(), 50u);
}

std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

OwnedResource file_owned(const std::string& name, const std::string& content, std::uint64_t order) {
  sdk::Value p = sdk::Value::object();
  p.set("content", content);
  return OwnedResource{"file:" + name, p, order, ""};
}

// What the engine does: change its copy (kept sorted), then record that one entry.
void own(HostState& st, OwnedResource o) {
  auto it = std::lower_bound(st.owned.begin(), st.owned.end(), o.resource,
                             [](const OwnedResource& a, const std::string& n) { return a.resource < n; });
  if (it != st.owned.end() && it->resource == o.resource) *it = std::move(o);
  else st.owned.insert(it, std::move(o));
}
void forget(HostState& st, const std::string& name) {
  std::erase_if(st.owned, [&](const OwnedResource& o) { return o.resource == name; });
}

TEST(StateDirJournalTest, ChangesAreJournalledThenReplayedAndFoldedIntoTheNextSnapshot) {
  TempDir tmp;
  HostState st;
  {
    auto sd = StateDir::open(tmp.path());
    ASSERT_TRUE(sd);
    // No snapshot yet: the first change writes one.
    own(st, file_owned("/a", "A", 0));
    ASSERT_TRUE(sd->save_change(st, "file:/a"));
    EXPECT_TRUE(fs::exists(tmp.path() + "/state.json"));
    const std::string snapshot = slurp(tmp.path() + "/state.json");
    own(st, file_owned("/c", "C", 2));
    ASSERT_TRUE(sd->save_change(st, "file:/c"));
    own(st, file_owned("/b", "B", 1));
    ASSERT_TRUE(sd->save_change(st, "file:/b"));
    own(st, file_owned("/a", "A2", 0));
    ASSERT_TRUE(sd->save_change(st, "file:/a"));
    forget(st, "file:/c");
    ASSERT_TRUE(sd->save_change(st, "file:/c"));
    // state.json was not rewritten; the journal holds the four changes after its header.
    EXPECT_EQ(slurp(tmp.path() + "/state.json"), snapshot);
    const std::string journal = slurp(tmp.path() + "/state.journal");
    EXPECT_EQ(std::count(journal.begin(), journal.end(), '\n'), 5) << journal;
    ASSERT_EQ(sd->state().owned.size(), 2u);
    EXPECT_EQ(sd->state().owned[0].properties.get_string("content"), "A2");
  }
  {
    auto sd = StateDir::open(tmp.path());
    ASSERT_TRUE(sd) << sd.error().describe();
    EXPECT_FALSE(sd->fresh());
    ASSERT_EQ(sd->state().owned.size(), 2u);
    EXPECT_EQ(sd->state().owned[0].resource, "file:/a");
    EXPECT_EQ(sd->state().owned[0].properties.get_string("content"), "A2");
    EXPECT_EQ(sd->state().owned[1].resource, "file:/b");
    EXPECT_EQ(sd->state().owned[1].order, 1u);
    // A snapshot folds the journal in and removes it.
    HostState next = sd->state();
    next.applied_revision = 7;
    ASSERT_TRUE(sd->save(next));
    EXPECT_FALSE(fs::exists(tmp.path() + "/state.journal"));
  }
  auto sd = StateDir::open(tmp.path());
  ASSERT_TRUE(sd);
  EXPECT_EQ(sd->state().applied_revision, 7u);
  EXPECT_EQ(sd->state().owned.size(), 2u);
}

// The engine changes the StateDir's own state in place (mutable_state) and names the change: the
// files written are byte for byte those of the same changes made through a copy, and a reopen
// reads the same state — including a batch's intent, its settling, and a fold into a snapshot.
TEST(StateDirJournalTest, ChangesMadeInPlaceWriteTheSameFilesAsThroughACopy) {
  TempDir tmp;
  const std::string by_copy = tmp.path() + "/copy", in_place = tmp.path() + "/in-place";
  auto a = StateDir::open(by_copy);
  auto b = StateDir::open(in_place);
  ASSERT_TRUE(a && b);
  HostState copy;
  HostState& mine = b->mutable_state();
  auto both = [&](const std::function<void(HostState&)>& change, const std::vector<std::string>& names,
                  bool batch) {
    change(copy);
    change(mine);
    if (batch) {
      ASSERT_TRUE(a->save_changes(copy, names));
      ASSERT_TRUE(b->save_changes(mine, names));
    } else {
      ASSERT_TRUE(a->save_change(copy, names.front()));
      ASSERT_TRUE(b->save_change(mine, names.front()));
    }
  };
  both([](HostState& st) { own(st, file_owned("/a", "A", 0)); }, {"file:/a"}, false);  // first snapshot
  both([](HostState& st) { own(st, file_owned("/c", "C", 2)); }, {"file:/c"}, false);
  const std::vector<StateDir::IntentEntry> intent{{"file:/d", false, 3, sdk::Value::object()},
                                                  {"file:/b", true, 1, sdk::Value::object()}};
  ASSERT_TRUE(a->save_intent(intent));
  ASSERT_TRUE(b->save_intent(intent));
  both(
      [](HostState& st) {
        own(st, file_owned("/b", "B", 1));
        own(st, file_owned("/d", "D", 3));
        forget(st, "file:/c");
      },
      {"file:/b", "file:/d", "file:/c"}, true);
  EXPECT_EQ(slurp(in_place + "/state.json"), slurp(by_copy + "/state.json"));
  EXPECT_EQ(slurp(in_place + "/state.journal"), slurp(by_copy + "/state.journal"));
  EXPECT_EQ(&b->state(), &mine);
  ASSERT_EQ(mine.owned.size(), 3u);
  // A snapshot from the state itself, and from a copy.
  copy.applied_revision = mine.applied_revision = 9;
  ASSERT_TRUE(a->save(copy));
  ASSERT_TRUE(b->save(mine));
  EXPECT_EQ(slurp(in_place + "/state.json"), slurp(by_copy + "/state.json"));
  EXPECT_FALSE(fs::exists(in_place + "/state.journal"));
  auto reopened = StateDir::open(in_place);
  ASSERT_TRUE(reopened) << reopened.error().describe();
  EXPECT_EQ(reopened->state().applied_revision, 9u);
  ASSERT_EQ(reopened->state().owned.size(), 3u);
  EXPECT_EQ(reopened->state().owned[0].resource, "file:/a");
  EXPECT_EQ(reopened->state().owned[1].properties.get_string("content"), "B");
  EXPECT_EQ(reopened->state().owned[2].resource, "file:/d");
}

TEST(StateDirJournalTest, ATornLastLineIsDroppedAndTheNextChangeFollowsTheLastWholeOne) {
  TempDir tmp;
  HostState st;
  {
    auto sd = StateDir::open(tmp.path());
    ASSERT_TRUE(sd);
    ASSERT_TRUE(sd->save(st));
    own(st, file_owned("/a", "A", 0));
    ASSERT_TRUE(sd->save_change(st, "file:/a"));
  }
  // kill -9 in the middle of the next append.
  std::ofstream(tmp.path() + "/state.journal", std::ios::app) << R"({"own":{"resource":"file:/b","ord)";
  {
    auto sd = StateDir::open(tmp.path());
    ASSERT_TRUE(sd) << sd.error().describe();
    ASSERT_EQ(sd->state().owned.size(), 1u);
    HostState again = sd->state();
    own(again, file_owned("/z", "Z", 3));
    ASSERT_TRUE(sd->save_change(again, "file:/z"));
  }
  auto sd = StateDir::open(tmp.path());
  ASSERT_TRUE(sd) << sd.error().describe();
  ASSERT_EQ(sd->state().owned.size(), 2u);
  EXPECT_EQ(sd->state().owned[1].resource, "file:/z");
}

TEST(StateDirJournalTest, AStaleJournalIsIgnoredAndABadLineIsNamed) {
  TempDir tmp;
  HostState st;
  {
    auto sd = StateDir::open(tmp.path());
    ASSERT_TRUE(sd);
    ASSERT_TRUE(sd->save(st));  // generation 1
    own(st, file_owned("/a", "A", 0));
    ASSERT_TRUE(sd->save_change(st, "file:/a"));
  }
  const std::string journal = slurp(tmp.path() + "/state.journal");
  // A snapshot (generation 2) whose unlink of the journal never reached the disk.
  {
    auto sd = StateDir::open(tmp.path());
    ASSERT_TRUE(sd);
    HostState none;
    ASSERT_TRUE(sd->save(none));
  }
  std::ofstream(tmp.path() + "/state.journal") << journal;
  {
    auto sd = StateDir::open(tmp.path());
    ASSERT_TRUE(sd) << sd.error().describe();
    EXPECT_TRUE(sd->state().owned.empty()) << "the generation-1 journal must not count";
  }
  // A whole line that is not a change: an error naming the file and line, never a reset.
  std::ofstream(tmp.path() + "/state.journal") << "{\"journal\":1,\"generation\":2}\n{\"own\":{}}\n";
  auto sd = StateDir::open(tmp.path());
  ASSERT_FALSE(sd);
  EXPECT_EQ(sd.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(sd.error().message.find(tmp.path() + "/state.journal line 2"), std::string::npos)
      << sd.error().message;
}

TEST(StateDirTest, AnUnreadableStateFileIsNamedNeverReset) {
  TempDir tmp;
  std::ofstream(tmp.path() + "/state.json") << "{\"format\": 1, \"owned\": [";
  auto sd = StateDir::open(tmp.path());
  ASSERT_FALSE(sd);
  EXPECT_EQ(sd.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(sd.error().message.find("state file " + tmp.path() + "/state.json is not valid"),
            std::string::npos)
      << sd.error().message;

  std::ofstream(tmp.path() + "/state.json") << R"({"format": 2, "owned": []})";
  EXPECT_FALSE(StateDir::open(tmp.path()));
  std::ofstream(tmp.path() + "/state.json") << R"({"format": 1, "owned": [], "surprise": 1})";
  EXPECT_FALSE(StateDir::open(tmp.path()));
  std::ofstream(tmp.path() + "/state.json") << R"({"format": 1, "owned": [{"resource": "x"}]})";
  EXPECT_FALSE(StateDir::open(tmp.path()));
  std::ofstream(tmp.path() + "/state.json") << R"({"format": 1, "owned": []})";
  EXPECT_TRUE(StateDir::open(tmp.path()));
}

// state.json is read entry by entry: each refusal names what is wrong, `format` first, then the
// first problem in document order, whatever the order of the members; a JSON problem after the
// list (the entries before it already read) refuses the file too.
TEST(StateDirTest, AStateFileReadEntryByEntryIsRefusedWithTheSameMessages) {
  TempDir tmp;
  const std::string file = tmp.path() + "/state.json";
  auto refusal = [&](const std::string& text) {
    std::ofstream(file, std::ios::trunc) << text;
    auto sd = StateDir::open(tmp.path());
    EXPECT_FALSE(sd) << text;
    return sd ? std::string() : sd.error().message;
  };
  const std::string prefix = "state file " + file + " is not valid: ";
  EXPECT_EQ(refusal(R"({"owned": [{"resource": "x"}], "surprise": 1, "format": 2})"), prefix + "format is not 1");
  EXPECT_EQ(refusal(R"({"owned": [{"resource": "file:/a", "order": 0, "properties": {}}, {"resource": "x"}],
                       "surprise": 1, "format": 1})"),
            prefix + "owned[1] is not {\"resource\", \"order\", \"properties\"[, \"digest\"]}");
  EXPECT_EQ(refusal(R"({"surprise": 1, "owned": [{"resource": "x"}], "format": 1})"),
            prefix + "unknown member 'surprise'");
  EXPECT_EQ(refusal(R"({"format": 1, "owned": [{"resource": "nocolon", "order": 0, "properties": {}}]})"),
            prefix + "owned[0]: 'nocolon' is not a resource name of the form type:id");
  EXPECT_EQ(refusal(R"({"format": 1, "owned": {}})"), prefix + "owned is not a list");
  EXPECT_EQ(refusal(R"({"format": 1})"), prefix + "owned is missing");
  EXPECT_EQ(refusal(R"([1])"), prefix + "not a JSON object");
  EXPECT_EQ(refusal(R"({"format": 1, "owned": [{"resource": "file:/a", "order": 0, "properties": {}},
                                                {"resource": "file:/a", "order": 1, "properties": {}}]})"),
            prefix + "resource file:/a is listed twice in owned");
  const std::string dup = refusal(R"({"format": 1, "owned": [{"resource": "file:/a", "order": 0, "properties": {}},
      {"resource": "file:/b", "order": 1, "properties": {"m": 1, "m": 2}}]})");
  EXPECT_NE(dup.find("owned[1].properties.m"), std::string::npos) << dup;
  EXPECT_NE(dup.find("duplicate key 'm'"), std::string::npos) << dup;
  const std::string late = refusal(R"({"format": 1, "owned": [{"resource": "file:/a", "order": 0, "properties": {}}], )");
  EXPECT_NE(late.find("not valid JSON"), std::string::npos) << late;
  // Members in any order, entries sorted by name, properties kept as written.
  std::ofstream(file, std::ios::trunc)
      << R"({"owned": [{"resource": "file:/b", "order": 1, "properties": {"mode": "0600"}, "digest": "d"},)"
         R"({"resource": "file:/a", "order": 0, "properties": {}}], "generation": 3, "last_outcome": "applied",)"
         R"( "applied_revision": 5, "last_revision": 6, "applied_digest": "x", "format": 1})";
  auto sd = StateDir::open(tmp.path());
  ASSERT_TRUE(sd) << sd.error().message;
  const HostState& st = sd->state();
  ASSERT_EQ(st.owned.size(), 2u);
  EXPECT_EQ(st.owned[0].resource, "file:/a");
  EXPECT_EQ(st.owned[1].resource, "file:/b");
  EXPECT_EQ(st.owned[1].properties.get_string("mode"), "0600");
  EXPECT_EQ(st.owned[1].digest, "d");
  EXPECT_EQ(st.applied_revision, 5u);
  EXPECT_EQ(st.last_revision, 6u);
  EXPECT_EQ(st.last_outcome, "applied");
  EXPECT_EQ(st.applied_digest, "x");
}

TEST(StateDirTest, CannotCreateTheDirectory) {
  TempDir tmp;
  std::ofstream(tmp.path() + "/file") << "x";
  auto sd = StateDir::open(tmp.path() + "/file/state");
  ASSERT_FALSE(sd);
  EXPECT_NE(sd.error().message.find(tmp.path() + "/file/state"), std::string::npos);
}

TEST(StateDirTest, AppliedDeclaration) {
  TempDir tmp;
  auto sd = StateDir::open(tmp.path());
  ASSERT_TRUE(sd);
  auto none = sd->applied_declaration();
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(sd->save_applied_declaration("{\"resources\": []}\n"));
  auto text = sd->applied_declaration();
  ASSERT_TRUE(text);
  ASSERT_TRUE(text->has_value());
  EXPECT_EQ(**text, "{\"resources\": []}\n");
}

// stage_applied_declaration: nothing written when applied.json holds the text already (compared
// in blocks: a text over 64 KiB differing in its last byte is not the same); else the text waits
// in applied.json.next until commit_applied_declaration() renames it into place, or
// discard_applied_declaration() removes it.
TEST(StateDirTest, AStagedDeclarationReplacesAppliedJsonAtTheCommitOnly) {
  TempDir tmp;
  auto sd = StateDir::open(tmp.path());
  ASSERT_TRUE(sd);
  const std::string applied = tmp.path() + "/applied.json", next = tmp.path() + "/applied.json.next";
  std::string big(200000, 'a');
  auto staged = sd->stage_applied_declaration(big);
  ASSERT_TRUE(staged) << staged.error().describe();
  EXPECT_TRUE(*staged);
  EXPECT_FALSE(fs::exists(applied));
  EXPECT_EQ(*common::read_file(next), big);
  EXPECT_EQ(fs::status(next).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(sd->commit_applied_declaration());
  EXPECT_FALSE(fs::exists(next));
  EXPECT_EQ(*common::read_file(applied), big);
  ASSERT_TRUE(sd->commit_applied_declaration());  // nothing staged: nothing to do
  // The same text: nothing is written.
  staged = sd->stage_applied_declaration(big);
  ASSERT_TRUE(staged);
  EXPECT_FALSE(*staged);
  EXPECT_FALSE(fs::exists(next));
  // Another one differing in its last byte only, or longer: staged; discarded, applied.json stays.
  std::string other = big;
  other.back() = 'b';
  for (const std::string& text : {other, big + "a", big.substr(1)}) {
    staged = sd->stage_applied_declaration(text);
    ASSERT_TRUE(staged);
    EXPECT_TRUE(*staged);
    EXPECT_TRUE(fs::exists(next));
    sd->discard_applied_declaration();
    EXPECT_FALSE(fs::exists(next));
    EXPECT_EQ(*common::read_file(applied), big);
  }
  // A leftover of an apply killed before its commit is overwritten.
  ASSERT_TRUE(common::write_file_atomic(next, "leftover of a killed apply, longer than the text", 0600));
  staged = sd->stage_applied_declaration("{}");
  ASSERT_TRUE(staged);
  EXPECT_EQ(*common::read_file(next), "{}");
  ASSERT_TRUE(sd->commit_applied_declaration());
  EXPECT_EQ(*common::read_file(applied), "{}");
  // Cannot be written: the error names the file, and nothing is staged.
  fs::create_directory(next);
  staged = sd->stage_applied_declaration("[]");
  ASSERT_FALSE(staged);
  EXPECT_NE(staged.error().message.find(next), std::string::npos) << staged.error().message;
  ASSERT_TRUE(sd->commit_applied_declaration());
  EXPECT_EQ(*common::read_file(applied), "{}");
}

TEST(StateDirTest, LockContentionNamesTheHoldersPid) {
  TempDir tmp;
  auto a = StateDir::open(tmp.path());
  auto b = StateDir::open(tmp.path());
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->lock(0));
  EXPECT_TRUE(a->lock(0));  // already held by this instance
  auto pid = common::read_file(tmp.path() + "/lock");
  ASSERT_TRUE(pid);
  EXPECT_EQ(*pid, std::to_string(::getpid()) + "\n");

  const auto t0 = std::chrono::steady_clock::now();
  auto r = b->lock(200);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
  EXPECT_EQ(r.error().message, "another mesh-host (pid " + std::to_string(::getpid()) + ") holds " +
                                   tmp.path() + "/lock (waited 200 ms)");
  EXPECT_GE(waited, std::chrono::milliseconds(190));
  EXPECT_LT(waited, std::chrono::milliseconds(2000));

  // Released by unlock(): the other instance gets it while waiting.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    a->unlock();
  });
  auto got = b->lock(5000);
  release.join();
  EXPECT_TRUE(got) << (got ? "" : got.error().message);
  EXPECT_FALSE(a->lock(0));
  b->unlock();
  EXPECT_TRUE(a->lock(0));
}

TEST(StateDirTest, LockIsReleasedWhenTheStateDirGoes) {
  TempDir tmp;
  auto b = StateDir::open(tmp.path());
  ASSERT_TRUE(b);
  {
    auto a = StateDir::open(tmp.path());
    ASSERT_TRUE(a);
    ASSERT_TRUE(a->lock(0));
    StateDir moved = std::move(*a);  // the lock moves with it
    EXPECT_FALSE(b->lock(0));
  }
  EXPECT_TRUE(b->lock(0));
}

TEST(StateDirTest, Outbox) {
  TempDir tmp;
  auto sd = StateDir::open(tmp.path());
  ASSERT_TRUE(sd);
  ASSERT_TRUE(sd->outbox_put("10", "ten"));
  ASSERT_TRUE(sd->outbox_put("9", "nine"));
  ASSERT_TRUE(sd->outbox_put("0002", "two"));
  ASSERT_TRUE(sd->outbox_put("drift-abc", "drift"));
  ASSERT_TRUE(sd->outbox_put("9", "nine again"));  // replaces
  auto list = sd->outbox_list();
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 4u);
  EXPECT_EQ((*list)[0], (std::pair<std::string, std::string>{"0002", "two"}));
  EXPECT_EQ((*list)[1], (std::pair<std::string, std::string>{"9", "nine again"}));
  EXPECT_EQ((*list)[2].first, "10");
  EXPECT_EQ((*list)[3].first, "drift-abc");
  ASSERT_TRUE(sd->outbox_remove("9"));
  ASSERT_TRUE(sd->outbox_remove("9"));  // idempotent
  EXPECT_EQ(sd->outbox_list()->size(), 3u);
  EXPECT_FALSE(sd->outbox_put("../escape", "x"));
  EXPECT_FALSE(sd->outbox_put("", "x"));
  EXPECT_FALSE(sd->outbox_put(".hidden", "x"));
  EXPECT_TRUE(temp_files(tmp.path()).empty());
}

}  // namespace
}  // namespace mesh::engine
