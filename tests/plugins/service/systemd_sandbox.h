// A real systemd for tests, booted safely as PID 1 of private PID, mount, cgroup and UTS
// namespaces by systemd-sandbox.sh (next to this file; read its header for what it mounts).
//
//   mesh::testing::SystemdSandbox sandbox;                 // makes /tmp/mesh-systemd-XXXXXX
//   sandbox.write_unit("demo.service", "[Unit]\nDefaultDependencies=no\n[Service]\n...");
//   if (!sandbox.start()) GTEST_SKIP() << sandbox.skipped_reason();
//   auto r = sandbox.run({"systemctl", "start", "demo.service"});   // nsenter -t PID -p -m
//   sandbox.stop();                                          // also done by the destructor
//
// Inside, /etc/systemd/system is unit_dir() (enable/disable write there), /run and /tmp are
// private tmpfs, and dir() plus the `keep_paths` (e.g. the build tree) stay visible at the same
// paths, so a unit may log to dir() + "/x.log" (StandardOutput=append:FILE; there is no journald)
// and a test binary from the build tree can be run inside. systemd boots only the sandbox's own
// target(), never default.target: units need DefaultDependencies=no and, to be enabled,
// `WantedBy=` + target().
//
// start() reports false with skipped_reason() set when the machine cannot do it (not root, no
// CAP_SYS_ADMIN, unshare refused, systemd not answering within boot_timeout): tests GTEST_SKIP
// with that text. Everything else (a unit failing) is the test's business.
//
// With options.overlay the sandbox is also a throw-away root for dpkg: see overlay_dir().
// Thread safety: none; one test thread drives a sandbox.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace mesh::testing {

struct SystemdSandboxOptions {
  /// Prefix of the test folder's name and of the target ("<name>-<n>.target").
  std::string name = "mesh-systemd";
  /// Host paths under /tmp that must stay visible inside (dir() always does).
  std::vector<std::string> keep_paths = {};
  /// How long systemd may take to answer `systemctl is-system-running --wait`.
  std::chrono::milliseconds boot_timeout{20000};
  /// Keep dir() after the sandbox is destroyed (for debugging a failing test).
  bool keep_dir = false;
  /// Boot with `--overlay dir()/root`: /usr, /etc, /var (and /opt, and /bin, /lib… where they are
  /// not merged-/usr symlinks) are overlays inside, written only under overlay_dir(), so dpkg and
  /// apt inside never change the machine. A second start() after stop() keeps what was written
  /// (a reboot).
  bool overlay = false;
  /// Test hook: a command the script is run under, which must end by exec'ing its arguments
  /// (e.g. a private mount namespace with cgroup2 on /sys/fs/cgroup, to try the unified layout
  /// on a hybrid host). Empty: the script is run directly.
  std::vector<std::string> launch_prefix_for_test = {};
};

/// What a command run inside printed and how it ended.
struct SandboxRun {
  int exit_code = -1;  ///< exit status; 128+N when killed by signal N; -1 when it could not start
  std::string out;
  std::string err;
  bool timed_out = false;
};

class SystemdSandbox {
 public:
  /// Creates the test folder (dir()), its units/ folder and the target unit. Throws
  /// std::runtime_error when /tmp is not writable.
  explicit SystemdSandbox(SystemdSandboxOptions options = {});
  /// Stops the sandbox if running and removes dir() (unless keep_dir).
  ~SystemdSandbox();
  SystemdSandbox(const SystemdSandbox&) = delete;
  SystemdSandbox& operator=(const SystemdSandbox&) = delete;

  /// Boots systemd and waits until it answers. False (with skipped_reason()) when it cannot.
  bool start();
  /// Why start() failed; "" when it did not.
  const std::string& skipped_reason() const noexcept { return skipped_reason_; }
  bool running() const noexcept { return script_pid_ > 0; }

  /// Powers the sandbox off (`systemctl poweroff`; the script reports 0), falling back to SIGTERM
  /// of the script (which SIGKILLs the namespace) and SIGKILL. True when it powered off cleanly.
  /// Idempotent.
  bool stop();

  /// Runs `argv` inside (nsenter -t init_pid() -p -m -- argv...), argv[0] looked up in PATH
  /// inside. Output is captured; the child is SIGKILLed after `timeout`.
  SandboxRun run(const std::vector<std::string>& argv,
                 std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  /// run({"systemctl", args...}).
  SandboxRun systemctl(const std::vector<std::string>& args) const;

  /// Writes `text` to unit_dir()/name. Write units before start(): systemd caches lookups of
  /// names it did not find.
  void write_unit(const std::string& name, const std::string& text) const;

  /// The test's own folder (host path; the same path inside).
  const std::string& dir() const noexcept { return dir_; }
  /// dir() + "/units", which is /etc/systemd/system inside.
  std::string unit_dir() const { return dir_ + "/units"; }
  /// dir() + "/root" when options.overlay (the folder whose <tree>/upper holds what changed
  /// inside, e.g. overlay_dir() + "/var/upper/lib/dpkg/status"), else "".
  std::string overlay_dir() const { return options_.overlay ? dir_ + "/root" : std::string(); }
  /// The only unit systemd boots ("mesh-systemd-<n>.target").
  const std::string& target() const noexcept { return target_; }
  /// Host PID of the sandbox's systemd (PID 1 inside), or 0.
  pid_t init_pid() const noexcept { return init_pid_; }
  /// Name of the child cgroup the script made in each hierarchy ("nox-mesh-test-<script pid>");
  /// "" before start(). The script removes it when the sandbox ends.
  const std::string& cgroup_name() const noexcept { return cgroup_name_; }
  /// What the script and systemd printed (dir() + "/sandbox.log").
  std::string log() const;
  /// Path of systemd-sandbox.sh.
  static std::string script_path();

 private:
  bool fail_start(std::string reason);
  /// Waits up to `timeout` for the script to exit; its exit code, or -1 when still running.
  int wait_script(std::chrono::milliseconds timeout);

  SystemdSandboxOptions options_;
  std::string dir_;
  std::string target_;
  std::string skipped_reason_;
  pid_t script_pid_ = 0;
  pid_t init_pid_ = 0;
  int script_status_ = -1;
  std::string cgroup_name_;
};

/// Runs `argv` on the host (argv[0] looked up in PATH), capturing output; SIGKILL after
/// `timeout`. The building block of SystemdSandbox::run, exposed for tests.
SandboxRun run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace mesh::testing
