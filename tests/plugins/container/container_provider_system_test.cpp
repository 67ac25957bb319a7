// System tests of the container provider against a real podman (label `system`): one private
// podman sandbox per test binary (podman_sandbox.h), a busybox image imported by digest, and every
// outcome checked with podman itself, not only through the provider.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "container_test_support.h"

namespace mesh::plugins::container::test {
namespace {

using mesh::testing::PodmanSandbox;
using sdk::ErrorCode;
using sdk::PlanAction;
using sdk::Resource;
using sdk::Value;

[[maybe_unused]] auto* const podman_env =
    ::testing::AddGlobalTestEnvironment(new mesh::testing::PodmanEnvironment);

Value strings(std::initializer_list<std::string> items) {
  Value::Array a;
  for (const auto& s : items) a.emplace_back(s);
  return Value(std::move(a));
}

Value env_of(std::initializer_list<std::pair<std::string, std::string>> items) {
  Value v = Value::object();
  for (const auto& [k, val] : items) v.set(k, val);
  return v;
}

class ContainerProviderSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    box_ = mesh::testing::shared_podman_sandbox();
    if (!box_) GTEST_SKIP() << "no podman sandbox";
    host_.logger = &logger_;
    host_.role = "tool";
    provider_ = make_sandbox_provider(host_, *box_);
    ASSERT_NE(provider_, nullptr);
  }
  void TearDown() override {
    if (HasFailure()) logger_.dump();
    if (box_)
      for (const auto& n : names_) box_->run({"rm", "--force", "--time", "0", n});
  }

  // A container name unique to this test.
  std::string name(const std::string& suffix = "") {
    std::string n = std::string("t-") +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name() + suffix;
    names_.push_back(n);
    return n;
  }

  Resource want(const std::string& n, std::initializer_list<std::pair<std::string, Value>> props) {
    Resource r;
    r.rid = {"container", n};
    r.properties.set("image", box_->image().reference);
    for (const auto& [k, v] : props) r.properties.set(k, v);
    r.properties = sdk::apply_defaults(provider_->schema(), r.properties);
    return r;
  }

  std::optional<sdk::State> read(const std::string& n) {
    auto r = provider_->read({"container", n});
    EXPECT_TRUE(r) << r.error().describe();
    return r ? *r : std::nullopt;
  }

  sdk::Plan plan(const Resource& w) {
    auto observed = read(w.rid.id);
    auto p = provider_->plan(w, observed);
    EXPECT_TRUE(p) << p.error().describe();
    return p ? *p : sdk::Plan{};
  }

  // read → plan → apply, as the engine does; returns apply's result.
  sdk::Result<sdk::State> round(const Resource& w) {
    auto valid = provider_->validate(w);
    if (!valid) return sdk::fail(valid.error());
    sdk::Plan p = plan(w);
    sdk::CancelToken cancel;
    return provider_->apply(p, cancel);
  }

  // One round that must succeed, and the read-back plan must be empty.
  void converge(const Resource& w) {
    auto applied = round(w);
    ASSERT_TRUE(applied) << sdk::to_string(applied.error().code) << ": "
                         << applied.error().describe();
    sdk::Plan after = plan(w);
    ASSERT_TRUE(after.empty()) << "read-back plan not empty: " << describe(after);
  }

  static std::string describe(const sdk::Plan& p) {
    std::string out = sdk::to_string(p.action);
    for (const auto& c : p.changes)
      out += " [" + c.path + ": " + c.observed.to_json() + " -> " + c.declared.to_json() + "]";
    return out;
  }

  // What the container's processes see in their environment (busybox has no printenv).
  std::string env_in(const std::string& n, const std::string& var) {
    auto r = box_->run({"exec", n, "sh", "-c", "echo \"$" + var + "\""});
    EXPECT_TRUE(r.ok()) << r.err;
    return r.out;
  }

  std::string inspect(const std::string& n, const std::string& format) {
    return podman_inspect(*box_, n, format);
  }

  PodmanSandbox* box_ = nullptr;
  LinesLogger logger_;
  sdk::HostContext host_;
  std::unique_ptr<ContainerProvider> provider_;
  std::vector<std::string> names_;
};

TEST_F(ContainerProviderSystemTest, GoodContainerRunsAndReadsBack) {
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sleep", "1000"})},
                        {"env", env_of({{"GREETING", "hello world"}, {"EMPTY", ""}})},
                        {"restart", "unless-stopped"}});
  ASSERT_FALSE(read(n).has_value());
  sdk::Plan p = plan(w);
  EXPECT_EQ(p.action, PlanAction::Create);
  sdk::CancelToken cancel;
  auto applied = provider_->apply(p, cancel);
  ASSERT_TRUE(applied) << applied.error().describe();
  EXPECT_TRUE(applied->properties.get_bool("running", false));

  auto observed = read(n);
  ASSERT_TRUE(observed.has_value());
  const Value& s = observed->properties;
  EXPECT_EQ(s.get_string("ensure"), "present");
  EXPECT_TRUE(s.get_bool("running", false));
  EXPECT_EQ(s.get_string("state"), "running");
  EXPECT_EQ(s.get_string("image"), box_->image().reference);
  EXPECT_EQ(s.get_string("image_id"), box_->image().id);
  EXPECT_EQ(s.get_string("image_ref_id"), box_->image().id);
  EXPECT_EQ(s.get_string("restart"), "unless-stopped");
  EXPECT_EQ(s.get_string("config_hash").size(), 64u);
  EXPECT_EQ(*s.find("command"), strings({"sleep", "1000"}));
  EXPECT_TRUE(provider_->plan(w, observed)->empty());

  // What podman itself says, and what the process really sees.
  EXPECT_EQ(inspect(n, "{{.State.Status}}"), "running");
  EXPECT_EQ(inspect(n, "{{json .Config.Cmd}}"), R"(["sleep","1000"])");
  EXPECT_EQ(inspect(n, "{{index .Config.Labels \"io.nox-mesh.image\"}}"), box_->image().reference);
  EXPECT_EQ(inspect(n, "{{index .Config.Labels \"io.nox-mesh.config\"}}"),
            s.get_string("config_hash"));
  EXPECT_EQ(env_in(n, "GREETING"), "hello world\n");

  // A fresh provider (no cache) agrees, and a second round changes nothing.
  auto fresh = make_sandbox_provider(host_, *box_);
  auto again = fresh->read({"container", n});
  ASSERT_TRUE(again && again->has_value());
  EXPECT_TRUE(fresh->plan(w, *again)->empty());
  const std::string started = inspect(n, "{{.Id}} {{.State.StartedAt}}");
  converge(w);
  EXPECT_EQ(inspect(n, "{{.Id}} {{.State.StartedAt}}"), started);
}

TEST_F(ContainerProviderSystemTest, UnpullableImageFailsWithTheEnginesMessage) {
  const std::string n = name();
  Resource w = want(n, {{"image", "localhost:1/nope:latest"}, {"command", strings({"sleep", "9"})}});
  auto applied = round(w);
  ASSERT_FALSE(applied) << "an image that cannot be pulled was reported applied";
  EXPECT_EQ(applied.error().code, ErrorCode::Failed);
  const std::string& m = applied.error().message;
  EXPECT_NE(m.find("pulling image localhost:1/nope:latest failed"), std::string::npos) << m;
  EXPECT_NE(m.find("connection refused"), std::string::npos) << m;
  std::cout << "observed: " << m << "\n";
  EXPECT_FALSE(read(n).has_value()) << "nothing may be left behind";
}

TEST_F(ContainerProviderSystemTest, MissingDigestFailsWithTheEnginesMessage) {
  const std::string n = name();
  const std::string ref = "localhost/mesh-test@sha256:" + std::string(64, '0');
  Resource w = want(n, {{"image", ref}, {"command", strings({"sleep", "9"})}});
  auto applied = round(w);
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::Failed);
  const std::string& m = applied.error().message;
  EXPECT_NE(m.find("pulling image " + ref), std::string::npos) << m;
  EXPECT_NE(m.find("Error:"), std::string::npos) << "the engine's own words: " << m;
  std::cout << "observed: " << m << "\n";
  EXPECT_FALSE(read(n).has_value());
}

TEST_F(ContainerProviderSystemTest, ContainerThatExitsAtOnceFailsWithExitCodeAndLogs) {
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sh", "-c", "echo boom; exit 3"})}});
  auto applied = round(w);
  ASSERT_FALSE(applied) << "a container that exited was reported applied";
  EXPECT_EQ(applied.error().code, ErrorCode::Failed);
  const std::string& m = applied.error().message;
  EXPECT_NE(m.find("exit code 3"), std::string::npos) << m;
  EXPECT_NE(m.find("boom"), std::string::npos) << m;
  std::cout << "observed: " << m << "\n";
  // It is left for inspection, and never reads as in the declared state.
  auto observed = read(n);
  ASSERT_TRUE(observed.has_value());
  EXPECT_FALSE(observed->properties.get_bool("running", true));
  EXPECT_EQ(observed->properties.get_int("exit_code", 0), 3);
  EXPECT_FALSE(provider_->plan(w, observed)->empty());
  auto second = round(w);
  ASSERT_FALSE(second) << "the second round must fail again";
  EXPECT_NE(second.error().message.find("boom"), std::string::npos) << second.error().message;
}

TEST_F(ContainerProviderSystemTest, CrashLoopWithRestartPolicyIsNotSuccess) {
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sh", "-c", "echo crash; exit 1"})},
                        {"restart", "always"}});
  auto applied = round(w);
  ASSERT_FALSE(applied) << "a crash-looping container was reported applied";
  EXPECT_EQ(applied.error().code, ErrorCode::Failed);
  EXPECT_NE(applied.error().message.find("crash"), std::string::npos) << applied.error().message;
  const std::string& m = applied.error().message;
  EXPECT_TRUE(m.find("; the container was stopped") != std::string::npos ||
              m.find("so the container was removed") != std::string::npos)
      << m;
  std::cout << "observed: " << m << "\n";
  // Not left flapping: stopped (or removed), and the restart policy does not bring it back.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string status = inspect(n, "{{.State.Status}}");
  EXPECT_TRUE(status == "exited" || status == "absent") << status;
  auto observed = read(n);
  if (observed) {
    EXPECT_FALSE(observed->properties.get_bool("running", true)) << observed->properties.to_json();
  }
  EXPECT_FALSE(provider_->plan(w, observed)->empty());
}

TEST_F(ContainerProviderSystemTest, RemovedByHandIsRecreated) {
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sleep", "1000"})}});
  ASSERT_NO_FATAL_FAILURE(converge(w));
  ASSERT_TRUE(box_->run({"rm", "--force", "--time", "0", n}).ok());
  EXPECT_FALSE(read(n).has_value());
  EXPECT_EQ(plan(w).action, PlanAction::Create);
  ASSERT_NO_FATAL_FAILURE(converge(w));
  EXPECT_EQ(inspect(n, "{{.State.Status}}"), "running");
}

TEST_F(ContainerProviderSystemTest, StoppedByHandIsStartedAgainNotRecreated) {
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sleep", "1000"})}});
  ASSERT_NO_FATAL_FAILURE(converge(w));
  const std::string id = inspect(n, "{{.Id}}");
  ASSERT_TRUE(box_->run({"stop", "--time", "0", n}).ok());
  auto observed = read(n);
  ASSERT_TRUE(observed.has_value());
  EXPECT_FALSE(observed->properties.get_bool("running", true));
  sdk::Plan p = plan(w);
  EXPECT_EQ(p.action, PlanAction::Update);
  ASSERT_EQ(p.changes.size(), 1u) << describe(p);
  EXPECT_EQ(p.changes[0].path, "properties.running");
  ASSERT_NO_FATAL_FAILURE(converge(w));
  EXPECT_EQ(inspect(n, "{{.Id}}"), id) << "started, not re-created";
  EXPECT_EQ(inspect(n, "{{.State.Status}}"), "running");
}

TEST_F(ContainerProviderSystemTest, ChangedEnvRecreates) {
  const std::string n = name();
  ASSERT_NO_FATAL_FAILURE(
      converge(want(n, {{"command", strings({"sleep", "1000"})}, {"env", env_of({{"MODE", "a"}})}})));
  const std::string id = inspect(n, "{{.Id}}");
  Resource changed =
      want(n, {{"command", strings({"sleep", "1000"})}, {"env", env_of({{"MODE", "b"}})}});
  sdk::Plan p = plan(changed);
  EXPECT_EQ(p.action, PlanAction::Update);
  EXPECT_EQ(describe(p).find("properties.config_hash") != std::string::npos &&
                describe(p).find("properties.env") != std::string::npos,
            true)
      << describe(p);
  ASSERT_NO_FATAL_FAILURE(converge(changed));
  EXPECT_NE(inspect(n, "{{.Id}}"), id) << "re-created";
  EXPECT_EQ(env_in(n, "MODE"), "b\n");
}

TEST_F(ContainerProviderSystemTest, RecreatedByHandWithOtherConfigIsReplaced) {
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sleep", "1000"})}, {"env", env_of({{"MODE", "a"}})}});
  ASSERT_NO_FATAL_FAILURE(converge(w));
  ASSERT_TRUE(box_->run({"rm", "--force", "--time", "0", n}).ok());
  std::vector<std::string> by_hand = {"run", "--detach", "--name", n, "--env", "MODE=z"};
  by_hand.insert(by_hand.end(), box_->run_args().begin(), box_->run_args().end());
  by_hand.insert(by_hand.end(), {box_->image().reference, "sleep", "1000"});
  auto made = box_->run(by_hand);
  ASSERT_TRUE(made.ok()) << made.err;
  sdk::Plan p = plan(w);
  EXPECT_EQ(p.action, PlanAction::Update) << describe(p);
  EXPECT_NE(describe(p).find("properties.config_hash: null"), std::string::npos) << describe(p);
  ASSERT_NO_FATAL_FAILURE(converge(w));
  EXPECT_EQ(env_in(n, "MODE"), "a\n");
}

TEST_F(ContainerProviderSystemTest, MovedTagIsDriftAndRepaired) {
  const std::string n = name();
  const std::string tag = "localhost/mesh-tagged:latest";
  const auto first = box_->import_image(tag, "first");
  Resource w = want(n, {{"image", tag}, {"command", strings({"sleep", "1000"})}});
  ASSERT_NO_FATAL_FAILURE(converge(w));
  EXPECT_EQ(read(n)->properties.get_string("image_id"), first.id);
  EXPECT_EQ(box_->run({"exec", n, "cat", "/marker"}).out, "first\n");

  const auto second = box_->import_image(tag, "second");  // moves the tag
  ASSERT_NE(first.id, second.id);
  sdk::Plan p = plan(w);
  EXPECT_EQ(p.action, PlanAction::Update);
  EXPECT_NE(describe(p).find("properties.image_id"), std::string::npos) << describe(p);
  ASSERT_NO_FATAL_FAILURE(converge(w));
  EXPECT_EQ(read(n)->properties.get_string("image_id"), second.id);
  EXPECT_EQ(box_->run({"exec", n, "cat", "/marker"}).out, "second\n");
}

TEST_F(ContainerProviderSystemTest, RunningFalseCreatesStoppedThenStarts) {
  const std::string n = name();
  Resource stopped = want(n, {{"command", strings({"sleep", "1000"})}, {"running", false}});
  ASSERT_NO_FATAL_FAILURE(converge(stopped));
  EXPECT_EQ(inspect(n, "{{.State.Status}}"), "created");
  const std::string id = inspect(n, "{{.Id}}");
  Resource running = want(n, {{"command", strings({"sleep", "1000"})}, {"running", true}});
  sdk::Plan p = plan(running);
  ASSERT_EQ(p.changes.size(), 1u) << describe(p);
  ASSERT_NO_FATAL_FAILURE(converge(running));
  EXPECT_EQ(inspect(n, "{{.Id}} {{.State.Status}}"), id + " running");
  ASSERT_NO_FATAL_FAILURE(converge(stopped));
  EXPECT_EQ(inspect(n, "{{.Id}} {{.State.Status}}"), id + " exited");
}

TEST_F(ContainerProviderSystemTest, EnsureAbsentRemovesAndRemoveTwiceSucceeds) {
  const std::string n = name();
  ASSERT_NO_FATAL_FAILURE(converge(want(n, {{"command", strings({"sleep", "1000"})}})));
  Resource gone = want(n, {{"command", strings({"sleep", "1000"})}, {"ensure", "absent"}});
  sdk::Plan p = plan(gone);
  EXPECT_EQ(p.action, PlanAction::Remove);
  ASSERT_NO_FATAL_FAILURE(converge(gone));
  EXPECT_EQ(inspect(n, "{{.Id}}"), "absent");
  EXPECT_TRUE(plan(gone).empty());

  ASSERT_NO_FATAL_FAILURE(converge(want(n, {{"command", strings({"sleep", "1000"})}})));
  sdk::CancelToken cancel;
  auto first = provider_->remove({"container", n}, cancel);
  ASSERT_TRUE(first) << first.error().describe();
  auto second = provider_->remove({"container", n}, cancel);
  ASSERT_TRUE(second) << second.error().describe();
  EXPECT_EQ(inspect(n, "{{.Id}}"), "absent");
}

TEST_F(ContainerProviderSystemTest, PortsTheEngineDiscardsFailTheApply) {
  // The sandbox runs with --network=none, where podman drops -p with only a warning: exactly the
  // kind of success that must not be reported.
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sleep", "1000"})}, {"ports", strings({"18080:80"})}});
  auto applied = round(w);
  ASSERT_FALSE(applied) << "dropped port mappings were reported applied";
  EXPECT_EQ(applied.error().code, ErrorCode::Failed);
  const std::string& m = applied.error().message;
  EXPECT_NE(m.find("properties.ports"), std::string::npos) << m;
  EXPECT_NE(m.find("Port mappings have been discarded"), std::string::npos) << m;
  std::cout << "observed: " << m << "\n";
  EXPECT_FALSE(plan(w).empty());
}

TEST_F(ContainerProviderSystemTest, VolumeIsMountedAndVerified) {
  const std::string n = name();
  const auto host_dir = box_->dir() / ("vol-" + n);
  std::filesystem::create_directories(host_dir);
  std::ofstream(host_dir / "f") << "from the host\n";
  Resource w = want(n, {{"command", strings({"sleep", "1000"})},
                        {"volumes", strings({host_dir.string() + ":/data:ro"})}});
  ASSERT_NO_FATAL_FAILURE(converge(w));
  EXPECT_EQ(box_->run({"exec", n, "cat", "/data/f"}).out, "from the host\n");
  EXPECT_EQ(*read(n)->properties.find("volumes"), strings({host_dir.string() + ":/data:ro"}));
  EXPECT_FALSE(box_->run({"exec", n, "sh", "-c", "echo x > /data/g"}).ok()) << "mounted read-only";
}

TEST_F(ContainerProviderSystemTest, UnknownCommandFailsWithTheEnginesMessage) {
  const std::string n = name();
  auto applied = round(want(n, {{"command", strings({"no-such-program"})}}));
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::Failed);
  EXPECT_NE(applied.error().message.find("no-such-program"), std::string::npos)
      << applied.error().message;
  std::cout << "observed: " << applied.error().message << "\n";
}

TEST_F(ContainerProviderSystemTest, CancelDuringSettleIsCancelled) {
  auto slow = make_sandbox_provider(host_, *box_, "30s");
  ASSERT_NE(slow, nullptr);
  const std::string n = name();
  Resource w = want(n, {{"command", strings({"sleep", "1000"})}});
  auto p = slow->plan(w, std::nullopt);
  ASSERT_TRUE(p);
  sdk::CancelToken cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    cancel.cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  auto applied = slow->apply(*p, cancel);
  canceller.join();
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::Cancelled) << applied.error().describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace mesh::plugins::container::test
