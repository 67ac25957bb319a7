// Unit tests for the container provider's process runner: no shell, output captured, time limit,
// cancellation kills the child, a missing program is Unavailable.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "process.h"

namespace mesh::plugins::container::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(ContainerProviderProcessTest, CapturesOutputAndExitCode) {
  auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 7"}, 10s);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->ok());
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(r->cancelled);
}

TEST(ContainerProviderProcessTest, ArgumentsAreNotInterpretedByAShell) {
  auto r = run_process({"echo", "$HOME", "a b", ";", "|"}, 10s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "$HOME a b ; |\n");
  EXPECT_TRUE(r->ok());
}

TEST(ContainerProviderProcessTest, StdinIsEmpty) {
  auto r = run_process({"cat"}, 10s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "");
}

TEST(ContainerProviderProcessTest, LargeOutputDoesNotDeadlock) {
  auto r = run_process({"sh", "-c", "head -c 3000000 /dev/zero; head -c 200000 /dev/zero >&2"}, 30s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out.size(), 3000000u);
  EXPECT_EQ(r->err.size(), 200000u);
}

TEST(ContainerProviderProcessTest, TimeoutKillsTheChild) {
  const auto start = Clock::now();
  auto r = run_process({"sleep", "30"}, 300ms);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->exit_code, -15);  // SIGTERM is enough for sleep
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(ContainerProviderProcessTest, SigtermIgnoredThenSigkill) {
  const auto start = Clock::now();
  auto r = run_process({"sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"}, 200ms);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -9);
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(ContainerProviderProcessTest, CancelTokenKillsTheChild) {
  sdk::CancelToken cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    cancel.cancel();
  });
  const auto start = Clock::now();
  auto r = run_process({"sleep", "30"}, 60s, &cancel);
  canceller.join();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->ok());
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(ContainerProviderProcessTest, CancelTokenDeadlineCounts) {
  sdk::CancelToken cancel(Clock::now() + 200ms);
  auto r = run_process({"sleep", "30"}, 60s, &cancel);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->cancelled);
}

TEST(ContainerProviderProcessTest, DetachedDescendantDoesNotBlock) {
  // Like conmon after `podman run -d`: a grandchild keeps stdout open after the child exits.
  const auto start = Clock::now();
  auto r = run_process({"sh", "-c", "sleep 5 & echo started"}, 10s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "started\n");
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST(ContainerProviderProcessTest, MissingProgramIsUnavailable) {
  auto r = run_process({"/nonexistent/podman", "version"}, 10s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, sdk::ErrorCode::Unavailable);
  EXPECT_NE(r.error().message.find("/nonexistent/podman"), std::string::npos);
  EXPECT_NE(r.error().message.find("No such file"), std::string::npos) << r.error().message;
  auto on_path = run_process({"no-such-program-nox-mesh"}, 10s);
  ASSERT_FALSE(on_path);
  EXPECT_EQ(on_path.error().code, sdk::ErrorCode::Unavailable);
}

}  // namespace
}  // namespace mesh::plugins::container::test
