// The `package` provider: system packages, identified by their Debian name (`package:nginx`),
// installed, up/downgraded, held and removed through a PackageManager (apt/dpkg today).
//
// Properties (all optional):
//   version  "present" (default: any installed version will do), "latest" (the candidate of apt's
//            index) or an exact Debian version ("1.22.1-9+deb12u1", "1:2.0"), compared with
//            Debian's ordering, never as text.
//   ensure   "present" (default), "absent" (removed; configuration files kept) or "purged"
//            (removed with its configuration files).
//   hold     bool, default false: `apt-mark hold` / `unhold`. Ignored unless ensure = "present".
//   source   absolute path of an apt sources file (one-line `.list`, or deb822 `.sources`). When
//            apply needs a fresh index, only this file's index is downloaded; the file is also
//            consulted for candidates and downloads when it is not already part of apt's
//            configuration (e.g. when it lives outside /etc/apt/sources.list.d).
//
// Observed state (read): ensure ("present"; "absent" = only configuration files remain; or
// dpkg's word for a broken state: "half-installed", "unpacked", "half-configured",
// "reinstall-required"), version (installed, or of the remaining configuration files), hold,
// and the read-only fact `candidate`: the version apt would install now (null when its index has
// none). plan() compares `latest` with that `candidate`, so it stays pure. read() returns nullopt
// when dpkg knows nothing of the package or only a selection without files; the State that
// apply() returns says ensure = "purged" in that case.
//
// When apply refreshes the index (`apt-get update --error-on=any`, only `source`'s when given):
// the declared exact version is not in apt's index, or version = "present" and apt knows no
// candidate, or version = "latest", or a requirement changed (kRefreshIndexKey below).
//
// Every apply ends by reading the package back and re-planning: if apt-get said it succeeded but
// dpkg does not show the declared state, apply fails (Failed) rather than report success. A
// failed install leaves the installed version as it was (apt downloads everything before dpkg
// runs); the error quotes apt's own `E:` lines.
//
// Plugin config ([provider.package]): lock_timeout (default "120s": how long apt-get waits for the
// dpkg lock, `-o DPkg::Lock::Timeout`, and how long the provider retries `apt-get update` while
// apt's lists lock is busy, which apt does not wait for; running out gives ErrorCode::Timeout
// naming the lock file and the time waited) and command_timeout
// (default "5m": limit for one apt/dpkg command, then its process group is killed → Timeout).
// Cancellation (a newer revision, SIGTERM; docs/decisions/0035): `apt-get update`, the
// simulation before a removal, and `apt-get install/remove/purge` until dpkg starts (resolving,
// waiting for the dpkg lock, downloading) are killed at once; once dpkg runs (its output shows
// "(Reading database", "Unpacking "...), and for `apt-mark`, the command is left to finish within
// command_timeout, and the apply stops after it.
//
// Errors: InvalidArgument (path "id" or "properties.<name>"); Failed (apt's error lines quoted:
// unknown version, 404, unreachable mirror, unmet dependencies — also after a wait for a lock);
// Timeout (a dpkg or lists lock stayed busy for lock_timeout, command overran); Cancelled;
// FailedPrecondition (dpkg was left interrupted and `dpkg --configure -a` could not finish it; a
// removal would take dependent packages with it; the sources file is missing); Unsupported (no
// apt/dpkg on the host).
//
// An interrupted dpkg (killed mid-upgrade: `dpkg --audit` reports half-installed, unpacked or
// half-configured packages, and apt refuses with "dpkg was interrupted"): before any change,
// apply and remove run `dpkg --configure -a` (logged as step=repair with what the audit said;
// never cancelled, bounded by command_timeout, waiting for the dpkg lock up to lock_timeout)
// and then go on. Reads never repair.
// Thread safety: none of its own; the engine calls a provider from one thread at a time.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "mesh/sdk/provider.h"
#include "package_manager.h"

namespace mesh::plugins::package {

/// The path of the package's own notification change (sdk/provider.h, "Notification"). The
/// provider declares `notified_by_requires`: when a resource the package `requires` changed in
/// this apply (typically the `file` holding its apt sources), plan() adds
/// Change{"refresh_index", null, true} (action Update when nothing else differs) unless the
/// package is declared absent or purged or the plan removes it; apply() then first refreshes the
/// index (only `source`'s when given) and installs whatever the fresh index changes (a newer
/// `latest`, a version that just appeared). When the refresh was all that was planned, apply
/// reports in ApplyResponse::changed what it really changed (none: the outcome is "unchanged"),
/// and a failure reads "refreshing the index after <type:id> changed: <apt's error>".
inline constexpr const char* kRefreshIndexKey = "refresh_index";

/// Whether `plan` carries the refresh_index notification change.
inline bool asks_refresh(const sdk::Plan& plan) {
  for (const auto& c : plan.changes)
    if (c.path == kRefreshIndexKey) return true;
  return false;
}

class PackageProvider final : public sdk::Provider {
 public:
  /// Uses apt with the default timeouts until configure() says otherwise. Never throws except
  /// std::bad_alloc.
  explicit PackageProvider(const sdk::HostContext& host);

  const sdk::Schema& schema() const noexcept override;
  const sdk::Schema& config_schema() const noexcept override;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  // ABI 2 entry points: thin adapters over the helpers below (request/response structs are the
  // host's; sdk/provider.h).
  sdk::Result<void> do_capabilities(sdk::ProviderCapabilities& caps) const override;
  sdk::Result<void> do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) override;
  sdk::Result<void> do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) override;
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override;
  sdk::Result<void> do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) override;
  sdk::Result<void> do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse& resp) override;

 private:
  sdk::Result<void> validate_one(const sdk::Resource& want);
  sdk::Result<std::optional<sdk::State>> read_one(const sdk::ResourceId& rid);
  sdk::Result<sdk::Plan> plan_one(const sdk::Resource& want, const std::optional<sdk::State>& observed);
  sdk::Result<sdk::State> apply_one(const sdk::Plan& plan, const sdk::CancelToken& cancel);
  sdk::Result<void> remove_one(const sdk::ResourceId& rid, const sdk::CancelToken& cancel);
  struct Spec {
    std::string name;
    std::string ensure;   // present | absent | purged
    std::string version;  // present | latest | an exact version
    bool hold = false;
    std::optional<std::string> source;
  };

  /// The declaration checked and read out; InvalidArgument with the path on bad input.
  sdk::Result<Spec> spec_of(const sdk::Resource& want) const;
  /// Remembers `source` for `name` (or forgets it) so read(), which only gets the id, looks at
  /// the same sources as apply. Memory only.
  void remember_source(const Spec& spec);
  std::optional<std::string> source_for(const std::string& name) const;
  sdk::Result<PackageRecord> query(const std::string& name, const std::optional<std::string>& source);
  sdk::Result<void> converge_present(const Spec& spec, bool refresh_requested,
                                     const sdk::CancelToken& cancel);
  /// Before a change: when `dpkg --audit` reports what an interrupted run left (a dpkg killed
  /// mid-upgrade), runs `dpkg --configure -a` and logs it (step=repair). `what` names the
  /// resource for the log and the error. FailedPrecondition when the repair fails.
  sdk::Result<void> repair_interrupted(const std::string& what, const sdk::CancelToken& cancel);

  std::chrono::seconds lock_timeout_{120};
  std::chrono::milliseconds command_timeout_{std::chrono::minutes(15)};
  std::unique_ptr<PackageManager> manager_;
  std::map<std::string, std::string> sources_;
};

/// What read() reports for a package record (nullopt: nothing installed, no configuration left).
/// Exposed for tests.
std::optional<sdk::State> state_from_record(const PackageRecord& record);


}  // namespace mesh::plugins::package
