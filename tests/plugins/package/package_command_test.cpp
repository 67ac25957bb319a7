// run_command and the CancelToken (docs/decisions/0035): a cancellable command (an index refresh,
// a download) is killed at once; one that changes the system (dpkg) is left to finish.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "command.h"

namespace mesh::plugins::package {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Command sleeper(const std::string& seconds, bool cancellable) {
  Command c;
  c.argv = {find_program("sleep"), seconds};
  c.env = tool_environment();
  c.timeout = 60s;
  c.cancellable = cancellable;
  return c;
}

TEST(PackageCommandTest, ACancellableCommandIsKilledWhenTheTokenFires) {
  sdk::CancelToken cancel;
  std::thread later([&] {
    std::this_thread::sleep_for(200ms);
    cancel.cancel();
  });
  const auto t0 = Clock::now();
  const CommandResult r = run_command(sleeper("30", true), cancel);
  later.join();
  EXPECT_EQ(r.outcome, CommandResult::Outcome::Cancelled);
  EXPECT_LT(Clock::now() - t0, 20s) << "killed, not waited for";
}

TEST(PackageCommandTest, ACommandThatChangesTheSystemRunsToItsEndDespiteACancel) {
  sdk::CancelToken cancel;
  cancel.cancel();
  const CommandResult r = run_command(sleeper("1", false), cancel);
  EXPECT_EQ(r.outcome, CommandResult::Outcome::Exited);
  EXPECT_TRUE(r.succeeded());
  EXPECT_GE(r.elapsed, 900ms);
}

Command apt_like(const std::string& script) {
  Command c;
  c.argv = {find_program("sh"), "-c", script};
  c.env = tool_environment();
  c.timeout = 60s;
  c.changing_after = {"(Reading database", "Unpacking "};
  return c;
}

TEST(PackageCommandTest, AnInstallIsKilledWhileItWaitsOrDownloads) {
  // apt-get waiting for the dpkg lock, or for a mirror that never answers: nothing changed yet.
  sdk::CancelToken cancel;
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    cancel.cancel();
  });
  const auto t0 = Clock::now();
  const CommandResult r = run_command(apt_like("echo 'Get:1 http://127.0.0.1 x 1.0'; sleep 30"), cancel);
  later.join();
  EXPECT_EQ(r.outcome, CommandResult::Outcome::Cancelled);
  EXPECT_FALSE(r.changing);
  EXPECT_LT(Clock::now() - t0, 20s);
}

TEST(PackageCommandTest, AnInstallWhoseDpkgRunsIsLeftToFinish) {
  sdk::CancelToken cancel;
  std::thread later([&] {
    std::this_thread::sleep_for(500ms);
    cancel.cancel();
  });
  const CommandResult r = run_command(apt_like("echo 'Unpacking x (2.0) over (1.0) ...'; sleep 1.5; echo done"), cancel);
  later.join();
  EXPECT_TRUE(r.changing);
  EXPECT_EQ(r.outcome, CommandResult::Outcome::Exited) << r.err;
  EXPECT_TRUE(r.succeeded());
  EXPECT_NE(r.out.find("done"), std::string::npos);
}

TEST(PackageCommandTest, ItsOwnTimeoutStillStopsIt) {
  sdk::CancelToken cancel;
  Command c = sleeper("30", false);
  c.timeout = 300ms;
  const CommandResult r = run_command(c, cancel);
  EXPECT_EQ(r.outcome, CommandResult::Outcome::TimedOut);
}

TEST(PackageCommandTest, TheDefaultTimeoutIsFiveMinutes) {
  EXPECT_EQ(Command{}.timeout, std::chrono::minutes(5));
}

}  // namespace
}  // namespace mesh::plugins::package
