// Running the Debian tools the publish stage uses (dpkg-deb, apt-ftparchive, gpg, gzip) without a
// shell: argv as a vector, the program found in a fixed PATH, stdout to a file or captured,
// stderr captured (its last 64 KiB), a time limit and the CancelToken enforced by killing the
// child's process group.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "mesh/sdk/cancel.h"

namespace mesh::stages::publish {

struct Tool {
  std::vector<std::string> argv;  ///< argv[0]: a program name, looked up in kToolPath
  std::string cwd;                ///< working directory ("" = inherited)
  std::string stdout_file;        ///< stdout goes to this file (created 0644); "" = captured
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

struct ToolResult {
  bool started = false;
  int exit_code = -1;        ///< exit status, or -N when killed by signal N
  bool timed_out = false;
  bool cancelled = false;
  std::string out;           ///< stdout (when captured) and stderr, interleaved, last 64 KiB
  std::string spawn_error;   ///< why it did not start
  bool ok() const { return started && exit_code == 0 && !timed_out && !cancelled; }
  /// "dpkg-deb exited with 2: <its last lines, up to 8, joined by \"; \">" (or did not start /
  /// timed out): one line, for the run's summary.
  std::string describe(const std::string& what) const;
};

/// The directories programs are looked up in, and the children's PATH.
inline constexpr const char* kToolPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs `tool` to its end (or its time limit, or `cancel`), stdin from /dev/null, with the
/// environment of this process less LANG/LANGUAGE/LC_*, plus PATH=kToolPath and LC_ALL=C.
/// Never throws except std::bad_alloc. Thread-safe.
ToolResult run_tool(const Tool& tool, const sdk::CancelToken& cancel);

/// The absolute path of `name` in kToolPath, or "".
std::string find_tool(const std::string& name);

}  // namespace mesh::stages::publish
