// common::run_process: no shell, no descriptor of the caller's, no service-manager variables, a
// time limit, output kept up to a bound (the host's self-test of a new program, decision 76).
#include "mesh/common/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

namespace mesh::common {
namespace {

using namespace std::chrono_literals;

TEST(ProcessTest, CapturesOutputAndExitStatus) {
  auto r = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 10s);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.output, "out\nerr\n");
  EXPECT_EQ(r.describe_end(10s), "exit status 3");
  EXPECT_TRUE(run_process({"/bin/true"}, 10s).succeeded());
}

TEST(ProcessTest, TheChildGetsNoDescriptorOfOursAndNoNotifySocket) {
  const int opened = ::open("/dev/null", O_RDONLY);
  const int leaked = ::dup2(opened, 57);  // deliberately without O_CLOEXEC, at a number no shell uses
  ASSERT_EQ(leaked, 57);
  ::close(opened);
  ::setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  auto r = run_process({"/bin/sh", "-c", "ls /proc/$$/fd | tr '\\n' ' '; echo \"${NOTIFY_SOCKET:-none} ${WATCHDOG_USEC:-none}\""},
                       10s);
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::close(leaked);
  ASSERT_TRUE(r.succeeded()) << r.output;
  EXPECT_EQ(r.output.find(" " + std::to_string(leaked) + " "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("none none"), std::string::npos) << r.output;
}

TEST(ProcessTest, ATimeLimitKillsTheChild) {
  auto r = run_process({"/bin/sh", "-c", "echo started; exec sleep 30"}, 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.output, "started\n");
  EXPECT_EQ(r.describe_end(200ms), "did not finish within 200 ms");
}

TEST(ProcessTest, OutputIsBoundedAndNoShellOrPathLookupIsUsed) {
  auto r = run_process({"/bin/sh", "-c", "head -c 100000 /dev/zero"}, 10s, 4096);
  EXPECT_TRUE(r.succeeded());
  EXPECT_EQ(r.output.size(), 4096u);
  auto rel = run_process({"sh", "-c", "true"}, 10s);
  EXPECT_FALSE(rel.started);
  EXPECT_EQ(rel.error, "'sh' is not an absolute path");
  auto missing = run_process({"/nonexistent/program"}, 10s);
  EXPECT_EQ(missing.exit_code, 127);
}

// process_runs: the program of a pid, to check a pid file's process before signalling it.
TEST(ProcessTest, ProcessRunsNamesTheProgramOfAPidAndNothingOnceItIsGone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Until exec replaced the forked copy of this test, the child still runs this program.
  for (int i = 0; i < 200 && !process_runs(child, "sleep"); ++i) ::usleep(10'000);
  EXPECT_TRUE(process_runs(child, "sleep"));
  EXPECT_FALSE(process_runs(child, "nats-server"));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(process_runs(child, "sleep")) << "a reaped process runs nothing";
  EXPECT_FALSE(process_runs(0, "sleep"));
  EXPECT_FALSE(process_runs(-5, "sleep"));
}

}  // namespace
}  // namespace mesh::common
