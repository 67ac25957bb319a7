// Messages in parts with several control planes (issue 15; decision record 170): two mesh-control
// instances in one queue group on a 3-node NATS cluster with a small max_payload, sharing keys_dir
// and one sqlite file. Control plane i is on server i only, hosts and `mesh` on the third server
// only, so that the server there picks an instance for every message anew (ClusterTest::pinned_):
// before decision 170 the parts of one whole were spread over both instances and never completed.
// Reports, drift reports, briefings and `mesh declare` uploads in many parts are each taken whole
// by the instance that took their first part; an instance killed (SIGKILL) between the parts of a
// report or a declaration has the sender send the whole again to the other, recorded once; with
// no instance left the sender ends with a clear, retryable error and nothing is recorded. With
// `[broker]` permissions the same runs under the nodes' and operators' own broker users.
#include <csignal>
#include <optional>
#include <thread>

#include "cluster_fixture.h"
#include "mesh/common/crypto.h"
#include "mesh/testing/text.h"

namespace mesh::itest {
namespace {

constexpr std::size_t kMaxPayload = 8192;
// Files of the big declaration: the declaration, its report (the owned list with digests) and a
// drift report of every file are each some 20-40 parts of at most 8 KiB.
constexpr int kFiles = 600;
// With NOX_MESH_CONTROL_PART_PAUSE_MS_FOR_TEST=150, a whole of 11-12 parts takes at least 1.6 s:
// a kill this long after its first part came lands a few parts in, well before its last.
constexpr int kBetweenParts = 400;

using mesh::testing::occurrences;

/// The most drifted resources of one drift report of `node` recorded, as the control planes
/// logged them (`drift node=… scan=… resources=N recorded=true`); 0 for none.
std::size_t most_drift_recorded(const std::string& logs, const std::string& node) {
  std::size_t most = 0;
  const std::string head = "drift node=" + node + " scan=";
  for (std::size_t at = 0; (at = logs.find(head, at)) != std::string::npos; at += head.size()) {
    const std::size_t eol = logs.find('\n', at);
    const std::string line = logs.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    const std::size_t r = line.find(" resources=");
    if (r == std::string::npos || line.find(" recorded=true") == std::string::npos) continue;
    most = std::max<std::size_t>(most, std::strtoul(line.c_str() + r + 11, nullptr, 10));
  }
  return most;
}

/// A declaration of `files` file resources under `dir`, each holding `content`.
std::string many_files(const fs::path& dir, int files, const std::string& content) {
  sdk::Value resources = sdk::Value::array();
  for (int i = 0; i < files; ++i) {
    sdk::Value r = sdk::Value::object();
    r.set("type", "file");
    r.set("id", (dir / ("file-" + std::to_string(i))).string());
    sdk::Value props = sdk::Value::object();
    props.set("content", content);
    props.set("mode", "0644");
    r.set("properties", std::move(props));
    resources.as_array().push_back(std::move(r));
  }
  sdk::Value d = sdk::Value::object();
  d.set("resources", std::move(resources));
  return d.to_json();
}

class ClusterPartsTest : public ClusterTest {
 public:
  std::string cluster_config() override { return "max_payload: " + std::to_string(kMaxPayload) + "\n"; }
  void SetUp() override {
    pinned_ = true;
    ClusterTest::SetUp();
  }

  /// Writes the declaration of kFiles files for `node` (under its labelled folder) and declares
  /// it with `mesh` (in parts). Returns the delivery id.
  std::int64_t declare_many(const std::string& node, const std::string& content) {
    const fs::path f = dir() / ("decl-" + node + "-" + std::to_string(++declared_) + ".json");
    cluster_write(f, many_files(dir() / "files" / node, kFiles, content));
    EXPECT_GT(fs::file_size(f), 5 * kMaxPayload);
    auto r = mesh({"declare", node, f.string(), "--output", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << control_logs();
    return r.exit_code == 0 ? cluster_json(r.out).get_int("delivery", 0) : 0;
  }

  /// The number of wholes in parts on `subject` each instance started and assembled, checking
  /// that each instance assembled every whole it started (none was split over both). Returns
  /// how many were started in all.
  std::size_t expect_taken_whole(const std::string& subject) {
    std::size_t started = 0;
    for (std::size_t i = 0; i < controls_.size(); ++i) {
      if (!controls_[i]) continue;
      const std::string log = controls_[i]->stderr_text();
      const std::size_t s = occurrences(log, "parts started subject=" + subject + " ");
      const std::size_t a = occurrences(log, "assembled subject=" + subject + " ");
      EXPECT_EQ(s, a) << "instance " << i << " assembled every whole on " << subject << " it started\n" << log;
      std::cout << "[ observed ] instance " << i << ": " << s << " whole(s) in parts on " << subject << "\n";
      started += s;
    }
    return started;
  }

  /// The index of the instance whose log says `needle`, waiting up to `timeout_ms`.
  std::optional<std::size_t> instance_saying(const std::string& needle, int timeout_ms) {
    std::optional<std::size_t> found;
    mesh::testing::eventually(
        [&] {
          for (std::size_t i = 0; i < controls_.size(); ++i)
            if (controls_[i] && controls_[i]->running() && controls_[i]->stderr_text().find(needle) != std::string::npos)
              found = i;
          return found.has_value();
        },
        timeout_ms);
    return found;
  }

  std::size_t most_drift_recorded(const std::string& node) const {
    return itest::most_drift_recorded(control_logs(), node);
  }

  int declared_ = 0;
};

TEST_F(ClusterPartsTest, ReportsDriftReportsBriefingsAndDeclaresInManyPartsAreTakenWholeByOneInstance) {
  start_control(0);
  start_control(1);
  ClusterHost& h = add_host("big-01", 0, /*start=*/false);
  // A drift scan every 3 s (the fixture's is an hour), to send a drift report of every file.
  std::string cfg = cluster_read(h.config);
  cfg.replace(cfg.find("drift = \"1h\""), 12, "drift = \"3s\"");
  cluster_write(h.config, cfg);

  // `mesh declare` in parts; stored once; pushed (in parts) to nobody yet.
  const std::int64_t delivery = declare_many("big-01", "x\n");
  ASSERT_GT(delivery, 0);
  EXPECT_EQ(expect_taken_whole("mesh.api.declare"), 1u);
  // The host starts: `latest` answered in parts, the report (every file with its digest) sent
  // in parts and recorded once.
  start_host(h);
  auto rep = mesh({"report", std::to_string(delivery), "--wait", "120s", "--output", "json"}, 150000);
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err << h.proc->stderr_text() << control_logs();
  EXPECT_EQ(cluster_count(cluster_json(rep.out), "applied"), 1u) << rep.out;
  EXPECT_EQ(cluster_read(dir() / "files" / "big-01" / ("file-" + std::to_string(kFiles - 1))), "x\n");
  EXPECT_GE(expect_taken_whole("mesh.report.big-01"), 1u);
  EXPECT_EQ(occurrences(control_logs(), "report node=big-01 revision=1 outcome=applied recorded=true"), 1u)
      << control_logs();

  // Every file changed behind the host's back: the next scan's drift report (a line per file it
  // found changed and repaired) goes in parts and is recorded.
  for (int i = 0; i < kFiles; ++i)
    cluster_write(dir() / "files" / "big-01" / ("file-" + std::to_string(i)), "changed\n");
  ASSERT_TRUE(mesh::testing::eventually([&] { return most_drift_recorded("big-01") >= 100; }, 60000))
      << h.proc->stderr_text() << control_logs();
  EXPECT_GE(expect_taken_whole("mesh.drift.big-01"), 1u);

  // A briefing (`mesh-host brief`: its checks, facts and every provider's schema) in parts too:
  // with four providers loaded it is larger than 8 KiB.
  std::string brief_cfg = cluster_read(h.config);
  brief_cfg.replace(brief_cfg.find("load = [\"file\"]"), 15, "load = [\"file\", \"package\", \"service\", \"container\"]");
  cluster_write(dir() / "brief.toml", brief_cfg);
  auto brief = mesh::testing::run_process(
      {cluster_bin("mesh-host"), "brief", "--config", (dir() / "brief.toml").string()}, {}, 60000);
  EXPECT_EQ(brief.exit_code, 0) << brief.out << brief.err << control_logs();
  EXPECT_NE(brief.out.find("big-01"), std::string::npos) << brief.out;
  EXPECT_EQ(brief.out.find("not sent"), std::string::npos) << brief.out;
  EXPECT_EQ(expect_taken_whole("mesh.briefing.big-01"), 1u) << brief.out << brief.err;
  EXPECT_NE(control_logs().find("briefing node=big-01 outcome="), std::string::npos) << control_logs();

  // Nothing was refused or sent again on the way, and no whole was left incomplete.
  const std::string logs = control_logs();
  EXPECT_EQ(occurrences(logs, "refused subject=mesh.report.big-01"), 0u) << logs;
  EXPECT_EQ(occurrences(logs, "refused subject=mesh.drift.big-01"), 0u) << logs;
  EXPECT_EQ(occurrences(h.proc->stderr_text(), "parts resent"), 0u) << h.proc->stderr_text();
  EXPECT_EQ(occurrences(h.proc->stderr_text(), "not delivered"), 0u) << h.proc->stderr_text();
}

TEST_F(ClusterPartsTest, AReportCutByAKilledInstanceBetweenItsPartsIsSentWholeToTheOtherAndRecordedOnce) {
  // A pause before each answer to a part, so that the kill lands between two parts.
  const std::vector<std::string> env{"NOX_MESH_CONTROL_PART_PAUSE_MS_FOR_TEST=150"};
  start_control(0, env);
  start_control(1, env);
  ClusterHost& h = add_host("big-02", 0, /*start=*/false);
  const std::int64_t delivery = declare_many("big-02", "x\n");
  ASSERT_GT(delivery, 0);
  start_host(h);

  // The instance that took the first part of the host's report is killed a few parts later
  // (each answered 150 ms after it came), before the last.
  const auto first = instance_saying("parts started subject=mesh.report.big-02 ", 120000);
  ASSERT_TRUE(first.has_value()) << h.proc->stderr_text() << control_logs();
  std::this_thread::sleep_for(std::chrono::milliseconds(kBetweenParts));
  EXPECT_EQ(controls_[*first]->stop(SIGKILL), -SIGKILL);
  const std::string killed_log = controls_[*first]->stderr_text();
  EXPECT_EQ(occurrences(killed_log, "assembled subject=mesh.report.big-02 "), 0u) << "killed between the parts";
  const std::size_t survivor = 1 - *first;

  // The host sends the whole again, from its first part, to the survivor: recorded there, once.
  auto rep = mesh({"report", std::to_string(delivery), "--wait", "120s", "--output", "json"}, 150000);
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err << h.proc->stderr_text() << control_logs();
  EXPECT_EQ(cluster_count(cluster_json(rep.out), "applied"), 1u) << rep.out;
  EXPECT_NE(h.proc->stderr_text().find("parts resent subject=mesh.report.big-02"), std::string::npos)
      << h.proc->stderr_text();
  const std::string survivor_log = controls_[survivor]->stderr_text();
  EXPECT_GE(occurrences(survivor_log, "parts started subject=mesh.report.big-02 "), 1u) << survivor_log;
  EXPECT_GE(occurrences(survivor_log, "assembled subject=mesh.report.big-02 "), 1u) << survivor_log;
  EXPECT_EQ(occurrences(survivor_log, "report node=big-02 revision=1 outcome=applied recorded=true"), 1u)
      << survivor_log;
  EXPECT_EQ(occurrences(killed_log, "report node=big-02"), 0u) << "nothing recorded by the killed instance";
  auto hist = mesh({"history", "big-02", "--output", "json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  EXPECT_EQ(cluster_json(hist.out).as_array().size(), 1u) << hist.out;
}

TEST_F(ClusterPartsTest, ADeclareCutByAKilledInstanceIsSentWholeAgainAndWithNoInstanceLeftFailsClearly) {
  const std::vector<std::string> env{"NOX_MESH_CONTROL_PART_PAUSE_MS_FOR_TEST=150"};
  start_control(0, env);
  start_control(1, env);
  add_host("web-01", 0, /*start=*/false);
  const fs::path decl = dir() / "big.json";
  cluster_write(decl, many_files(dir() / "files" / "web-01", kFiles, "x\n"));

  // 1. The instance that took the first part is killed between the parts: `mesh declare` sends
  // the whole again to the other, which writes it, once.
  {
    BackgroundProcess declare(mesh_argv({"declare", "web-01", decl.string(), "--output", "json"}));
    const auto first = instance_saying("parts started subject=mesh.api.declare ", 60000);
    ASSERT_TRUE(first.has_value()) << declare.stderr_text() << control_logs();
    std::this_thread::sleep_for(std::chrono::milliseconds(kBetweenParts));
    EXPECT_EQ(controls_[*first]->stop(SIGKILL), -SIGKILL);
    EXPECT_EQ(occurrences(controls_[*first]->stderr_text(), "assembled subject=mesh.api.declare "), 0u)
        << "killed between the parts";
    ASSERT_TRUE(mesh::testing::eventually([&] { return !declare.running(); }, 120000)) << declare.stderr_text();
    EXPECT_EQ(declare.exit_code(), 0) << declare.stdout_text() << declare.stderr_text() << control_logs();
    EXPECT_NE(controls_[1 - *first]->stderr_text().find("assembled subject=mesh.api.declare "), std::string::npos);
    auto hist = mesh({"history", "web-01", "--output", "json"});
    ASSERT_EQ(hist.exit_code, 0) << hist.err;
    EXPECT_EQ(cluster_json(hist.out).as_array().size(), 1u) << "written once: " << hist.out;
    controls_[*first].reset();
  }

  // 2. The last instance is killed between the parts: nobody is left to take the whole again, so
  // `mesh` ends with exit 3 saying what happened and that nothing was sent; nothing is written.
  std::size_t last = controls_[0] ? 0 : 1;
  {
    const std::size_t before = occurrences(controls_[last]->stderr_text(), "parts started subject=mesh.api.declare ");
    BackgroundProcess declare(mesh_argv({"declare", "web-01", decl.string(), "--output", "json"}));
    ASSERT_TRUE(mesh::testing::eventually(
        [&] {
          return occurrences(controls_[last]->stderr_text(), "parts started subject=mesh.api.declare ") > before;
        },
        60000))
        << declare.stderr_text();
    std::this_thread::sleep_for(std::chrono::milliseconds(kBetweenParts));
    EXPECT_EQ(controls_[last]->stop(SIGKILL), -SIGKILL);
    ASSERT_TRUE(mesh::testing::eventually([&] { return !declare.running(); }, 120000)) << declare.stderr_text();
    EXPECT_EQ(declare.exit_code(), 3) << declare.stdout_text() << declare.stderr_text();
    std::cout << "[ observed ] " << declare.stderr_text();
    EXPECT_NE(declare.stderr_text().find("the control plane did not take mesh.api.declare"), std::string::npos)
        << declare.stderr_text();
    EXPECT_NE(declare.stderr_text().find("was not answered by"), std::string::npos) << declare.stderr_text();
    EXPECT_NE(declare.stderr_text().find("the whole was not sent; try again"), std::string::npos)
        << declare.stderr_text();
  }

  // Both back (the same instance ids): the cut declaration left nothing; sent again, it is written.
  start_control(0, env);
  start_control(1, env);
  auto hist = mesh({"history", "web-01", "--output", "json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  EXPECT_EQ(cluster_json(hist.out).as_array().size(), 1u) << "nothing of the cut declaration: " << hist.out;
  auto again = mesh({"declare", "web-01", decl.string(), "--output", "json"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err << control_logs();
  hist = mesh({"history", "web-01", "--output", "json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  EXPECT_EQ(cluster_json(hist.out).as_array().size(), 2u) << hist.out;
}

// The same with `[broker]` permissions (decision record 91): the later parts go to an instance's
// subject under the node's and the operators' own broker users, which the authorization file
// mesh-control writes allows; the servers log no violation.
class PermissionedClusterPartsTest : public PermissionedClusterTest {
 public:
  std::string permissioned_extra_config() override {
    return "max_payload: " + std::to_string(kMaxPayload) + "\n";
  }
  void SetUp() override {
    pinned_ = true;
    PermissionedClusterTest::SetUp();
  }
};

TEST_F(PermissionedClusterPartsTest, ReportsDriftReportsAndDeclaresInPartsUnderTheNodesAndOperatorsOwnUsers) {
  start_control(0);
  start_control(1);
  ClusterHost& h = add_host("big-03", 0, /*start=*/false);
  std::string cfg = cluster_read(h.config);
  cfg.replace(cfg.find("drift = \"1h\""), 12, "drift = \"3s\"");
  cluster_write(h.config, cfg);
  const std::string auth = cluster_read(dir() / "auth.conf");
  EXPECT_NE(auth.find("\"mesh.instance.*.mesh.report.big-03\""), std::string::npos) << auth;
  EXPECT_NE(auth.find("\"mesh.instance.*.mesh.api.>\""), std::string::npos) << auth;

  const fs::path f = dir() / "big.json";
  cluster_write(f, many_files(dir() / "files" / "big-03", kFiles, "x\n"));
  auto d = mesh({"declare", "big-03", f.string(), "--output", "json"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err << control_logs();
  const std::int64_t delivery = cluster_json(d.out).get_int("delivery", 0);
  start_host(h);
  auto rep = mesh({"report", std::to_string(delivery), "--wait", "120s", "--output", "json"}, 150000);
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err << h.proc->stderr_text() << control_logs();
  EXPECT_EQ(cluster_count(cluster_json(rep.out), "applied"), 1u) << rep.out;
  EXPECT_TRUE(fs::exists(dir() / ("host-big-03") / "broker.nk")) << "the host runs under its own nkey";
  EXPECT_EQ(occurrences(control_logs(), "report node=big-03 revision=1 outcome=applied recorded=true"), 1u)
      << control_logs();
  for (int i = 0; i < kFiles; ++i)
    cluster_write(dir() / "files" / "big-03" / ("file-" + std::to_string(i)), "changed\n");
  ASSERT_TRUE(mesh::testing::eventually([&] { return most_drift_recorded(control_logs(), "big-03") >= 100; }, 60000))
      << h.proc->stderr_text() << control_logs();

  const std::string logs = control_logs();
  for (const char* subject : {"mesh.api.declare", "mesh.report.big-03", "mesh.drift.big-03"}) {
    std::size_t started = 0, assembled = 0;
    for (const auto& c : controls_) {
      started += occurrences(c->stderr_text(), std::string("parts started subject=") + subject + " ");
      assembled += occurrences(c->stderr_text(), std::string("assembled subject=") + subject + " ");
    }
    EXPECT_GE(started, 1u) << subject << " went in parts";
    EXPECT_EQ(started, assembled) << subject << logs;
  }
  for (std::size_t i = 0; i < nats_->size(); ++i) {
    const std::string server_log = cluster_read(nats_->log_path(i));
    EXPECT_EQ(server_log.find("Violation"), std::string::npos) << "server " << i << ": " << server_log;
  }
}

// `mesh content push` (decision record 111) needs no instance of its own: each range is one
// whole message, written at its offset into the content directory both instances share; the
// range that ends the file, on whichever instance takes it, checks the whole. Two files' ranges
// spread over both instances; a host fetches the content (ranges from either) and writes it.
class ClusterContentTest : public ClusterTest {
 public:
  void SetUp() override {
    pinned_ = true;
    ClusterTest::SetUp();
    extra_control_toml_ = "\n[content]\ndir = \"" + (dir() / "content").string() + "\"\n";
  }
};

// Bytes that do not compress and do not repeat at any range size.
std::string pseudo_random(std::size_t n, std::uint64_t seed) {
  std::string s(n, '\0');
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    s[i] = static_cast<char>(x >> 56);
  }
  return s;
}

TEST_F(ClusterContentTest, RangesOfOnePushSpreadOverBothInstancesMakeOneVerifiedFile) {
  start_control(0);
  start_control(1);
  std::vector<std::string> digests;
  std::vector<std::string> bytes;
  for (int k = 0; k < 2; ++k) {
    bytes.push_back(pseudo_random(5u << 20, 11 + k));  // 7 ranges of at most 1 MiB - 16 KiB, base64
    const fs::path file = dir() / ("content-" + std::to_string(k) + ".bin");
    cluster_write(file, bytes.back());
    auto r = mesh({"content", "push", file.string(), "--output", "json"}, 300000);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err << control_logs();
    digests.push_back(cluster_json(r.out).get_string("digest"));
    ASSERT_EQ(digests.back(), "sha256:" + common::sha256_hex(bytes.back()));
    EXPECT_EQ(cluster_read(dir() / "content" / "sha256" / digests.back().substr(7)), bytes.back());
  }
  const std::size_t by0 = occurrences(controls_[0]->stderr_text(), "api operation=content.put");
  const std::size_t by1 = occurrences(controls_[1]->stderr_text(), "api operation=content.put");
  std::cout << "[ observed ] content.put ranges taken: instance 0 " << by0 << ", instance 1 " << by1 << "\n";
  EXPECT_GE(by0 + by1, 14u);
  EXPECT_GT(by0, 0u) << "a queue group spreads the ranges";
  EXPECT_GT(by1, 0u) << "a queue group spreads the ranges";
  EXPECT_TRUE(fs::is_empty(dir() / "content" / "incoming")) << "no temporary file left";

  // A host gets the first file by its digest, its ranges answered by either instance.
  add_host("content-01", 0);
  const fs::path target = dir() / "files" / "content-01" / "delivered.bin";
  sdk::Value props = sdk::Value::object();
  props.set("source", digests[0]);
  props.set("mode", "0644");
  sdk::Value res = sdk::Value::object();
  res.set("type", "file");
  res.set("id", target.string());
  res.set("properties", std::move(props));
  sdk::Value d = sdk::Value::object();
  d.set("resources", sdk::Value(sdk::Value::Array{std::move(res)}));
  cluster_write(dir() / "by-digest.json", d.to_json());
  auto declared = mesh({"declare", "content-01", (dir() / "by-digest.json").string(), "--output", "json"});
  ASSERT_EQ(declared.exit_code, 0) << declared.out << declared.err;
  auto rep = mesh({"report", std::to_string(cluster_json(declared.out).get_int("delivery", 0)), "--wait", "120s",
                   "--output", "json"},
                  150000);
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err << hosts_["content-01"].proc->stderr_text();
  EXPECT_EQ(cluster_count(cluster_json(rep.out), "applied"), 1u) << rep.out;
  EXPECT_TRUE(cluster_read(target) == bytes[0]) << "the delivered file is byte-identical";
}

}  // namespace
}  // namespace mesh::itest
