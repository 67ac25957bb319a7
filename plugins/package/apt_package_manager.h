// The Debian backend: dpkg-query and apt-cache to read, apt-get and apt-mark to change.
//
// Every apt-get run gets `-y -q`, `-o DPkg::Lock::Timeout=<lock_timeout>` (a bounded wait for
// the dpkg lock instead of an immediate failure or an endless wait) and
// `-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold` (keep locally changed
// configuration files without asking); installs also get `--no-remove`, so a declaration never
// silently takes another package away. Index refreshes use `apt-get update --error-on=any`,
// because without it apt-get exits 0 when a mirror is unreachable.
//
// DPkg::Lock::Timeout covers the dpkg locks only: `apt-get update` takes apt's lists lock
// (Dir::State::Lists + "lock") without waiting and fails at once while another apt run holds it,
// so refresh_index retries it every 500 ms until lock_timeout has passed (logging once that it
// waits). A run is a lock timeout (ErrorCode::Timeout, naming the lock file and the time waited)
// only when apt's final `E:` lines say it could not take a lock; a run that waited for a lock,
// got it and then failed ("Version '9.9' for 'x' was not found", "Unable to locate package") is
// Failed with apt's message.
//
// A `source` outside apt's configuration (neither Dir::Etc::sourcelist nor a file directly in
// Dir::Etc::sourceparts) is added for one command through a private directory of symbolic links
// to the configured parts plus the source, passed as `-o Dir::Etc::sourceparts=<dir>` and removed
// afterwards; the refresh of that source alone uses `-o Dir::Etc::sourcelist=<file>
// -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0`.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "mesh/sdk/logger.h"
#include "package_manager.h"

namespace mesh::plugins::package {

struct AptOptions {
  /// How long apt-get waits for the dpkg lock, and refresh_index for the lists lock (whole
  /// seconds; apt's unit).
  std::chrono::seconds lock_timeout{120};
  /// Limit for any one command; then its process group is killed (Timeout).
  std::chrono::milliseconds command_timeout{std::chrono::minutes(5)};
  /// Where the per-command source directories are made; "" = the system temporary directory.
  std::string scratch_dir;
};

/// `logger` must outlive the manager (it is the plugin's host logger).
std::unique_ptr<PackageManager> make_apt_package_manager(sdk::Logger& logger, AptOptions options);

}  // namespace mesh::plugins::package
