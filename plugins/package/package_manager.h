// The backend the `package` provider drives: one small interface per package system, so rpm or
// apk can follow the Debian one (apt_package_manager.h) without touching the provider's rules
// (what is satisfied, when to refresh, what to verify). Versions compare with Debian rules today;
// a second backend brings its own comparison along with it.
//
// Every call is synchronous, runs the package tools as child processes and returns when they
// have exited. Errors: Failed (the tool ran and refused; the message quotes its own error lines),
// Timeout (the package database lock stayed busy for the configured wait, or the tool overran its
// time limit), Cancelled, FailedPrecondition (the package database needs repair first and
// repair() was not run, or a removal would take other packages with it), Unsupported (the tools
// are not installed).
// Thread safety: none; the provider calls it from one thread at a time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/result.h"

namespace mesh::plugins::package {

/// Where the package database says a package is (dpkg's "Status" field, third word).
enum class InstallStatus {
  Unknown,           ///< the database has no record of it at all
  NotInstalled,      ///< a record (a selection) but no files
  ConfigFiles,       ///< removed; its configuration files remain ("rc")
  HalfInstalled,     ///< an unpack or removal was interrupted
  Unpacked,          ///< unpacked, not configured
  HalfConfigured,    ///< configuration failed or was interrupted
  TriggersAwaiting,  ///< installed; waits for another package's trigger
  TriggersPending,   ///< installed; its own triggers have not run yet
  Installed,         ///< fully installed
};

/// Everything the provider needs to know about one package, read in one go.
struct PackageRecord {
  InstallStatus status = InstallStatus::Unknown;
  /// The installed version (for ConfigFiles: the version whose configuration remains); "" when
  /// there is none.
  std::string version;
  /// Marked "hold": upgrades and removals by dependency resolution leave it alone.
  bool hold = false;
  /// The database says the package must be reinstalled (dpkg's "reinst-required" flag).
  bool reinstall_required = false;
  /// The version an install without a version would choose (apt's "Candidate"); nullopt when the
  /// index has none.
  std::optional<std::string> candidate;
  /// Versions the configured sources offer for download, as the index spells them.
  std::vector<std::string> available;
};

/// Installed, possibly with triggers still pending: the state `ensure = present` asks for.
inline bool is_installed(const PackageRecord& r) {
  return !r.reinstall_required &&
         (r.status == InstallStatus::Installed || r.status == InstallStatus::TriggersAwaiting ||
          r.status == InstallStatus::TriggersPending);
}

/// Files of the package are on disk, whole or half (anything a removal has to take away).
inline bool has_files(const PackageRecord& r) {
  return r.status != InstallStatus::Unknown && r.status != InstallStatus::NotInstalled &&
         r.status != InstallStatus::ConfigFiles;
}

/// What to install. `version` empty = the candidate.
struct InstallRequest {
  std::string name;
  std::string version;
  /// The version is lower than the installed one (apt refuses downgrades unless told).
  bool allow_downgrade = false;
  /// The package is on hold and the declaration names this version explicitly.
  bool allow_change_held = false;
  /// A sources file to consult in addition to the system's (see PackageManager::query).
  std::optional<std::string> source;
};

class PackageManager {
 public:
  virtual ~PackageManager() = default;

  /// Short name for logs and messages ("apt").
  virtual const char* name() const noexcept = 0;

  /// Reads the database and the index for `name`. `source`, when given, is a sources file
  /// consulted in addition to the system's configuration (for candidate and available versions).
  /// No side effects on the system.
  virtual sdk::Result<PackageRecord> query(const std::string& name,
                                           const std::optional<std::string>& source) = 0;

  /// Downloads the package index: only `source`'s when given, else every configured source's.
  /// Any source that cannot be fetched is an error (a dead mirror must not read as success).
  virtual sdk::Result<void> refresh_index(const std::optional<std::string>& source,
                                          const sdk::CancelToken& cancel) = 0;

  /// Installs (or up/downgrades to) the requested version. Never removes another package: when
  /// the request needs that, it fails and says which.
  virtual sdk::Result<void> install(const InstallRequest& request,
                                    const sdk::CancelToken& cancel) = 0;

  /// Removes the package (keeping its configuration files unless `purge`), also when on hold.
  /// Refuses (FailedPrecondition) when other installed packages would have to go with it.
  virtual sdk::Result<void> remove(const std::string& name, bool purge,
                                   const std::optional<std::string>& source,
                                   const sdk::CancelToken& cancel) = 0;

  /// What the package database says an interrupted or failed run left unfinished (`dpkg
  /// --audit`: packages half-installed, unpacked but not configured, half-configured, awaiting
  /// triggers), one line per line of its report; empty when the database is consistent. No side
  /// effects. Errors: Failed (the audit itself could not run), Unsupported.
  virtual sdk::Result<std::vector<std::string>> audit() = 0;

  /// Finishes what an interrupted run left (`dpkg --configure -a`), waiting for the dpkg lock
  /// like an install does. Never stopped by `cancel` once started (it is dpkg at work); bounded
  /// by the command time limit. Errors: Failed (dpkg's error lines quoted), Timeout (the lock
  /// stayed busy, or it overran), Unsupported.
  virtual sdk::Result<void> repair(const sdk::CancelToken& cancel) = 0;

  /// Sets or clears the hold mark of an installed package.
  virtual sdk::Result<void> set_hold(const std::string& name, bool hold,
                                     const sdk::CancelToken& cancel) = 0;
};

}  // namespace mesh::plugins::package
