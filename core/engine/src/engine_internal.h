// What engine.cpp and batch.cpp share (not installed; the engine's own).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "mesh/engine/state.h"
#include "mesh/sdk/provider.h"

namespace mesh::engine::detail {

/// What one resource step produced.
struct Step {
  bool ok = true;
  std::string outcome;  // unchanged / changed / removed / would_* / failed
  std::vector<sdk::Change> changes;
  std::string reason;
  std::string code;    // failed: the ErrorCode name (ResourceOutcome::code)
  std::string digest;  // state_digest() of the final read (unchanged: the first), "" if none
  std::optional<sdk::State> before;  // what the first read returned (for a revert)
};

/// "properties.mode is 0600, declared 0644; properties.content is sha256:… (12 bytes), declared …"
/// The values of attributes the schema marks sensitive are never shown ("(sensitive value)").
std::string describe_changes(const sdk::Plan& plan, const sdk::Schema& schema);

/// The declaration says `ensure = "absent"`.
bool is_absent(const sdk::Resource& r);

/// After a successful apply of `want` (`removal`: its plan removed it): reads it back, plans
/// again without notification and requires an empty plan (and, for a Delete provider, nothing
/// read after a removal). Sets `s` to "changed"/"removed" with the read-back digest, or to failed.
void verify_applied(sdk::Provider& provider, const sdk::ProviderCapabilities& caps, const sdk::Resource& want,
                    bool removal, Step& s);

/// How many resources, in units of ProviderCapabilities::max_batch, one run may span: a batch is
/// at most max_batch *plans*, and the unchanged resources between them do not count (a drift
/// repair of 20% of 20,000 files was 79 batches of ~51 plans, each paying the batch's syncs;
/// decision 0200). The window bounds what the run's steps hold (a few hundred bytes each).
inline constexpr std::size_t kBatchWindow = 16;

/// The end of the run of resources from `first` that may be applied as one batch
/// (sdk/provider.h, ProviderCapabilities::max_batch; docs/decisions/0106, 0200): consecutive
/// resources of `first`'s type, at most caps.max_batch × kBatchWindow of them, none requiring or
/// naming in `restart_on` a resource of the run, none notified by a resource in `changed_here`.
/// converge_batch() takes from the run only as many as give max_batch plans. Returns `first` + 1
/// when nothing can be batched with it.
std::size_t batch_end(const std::vector<sdk::Resource>& resources, std::size_t first,
                      const sdk::ProviderCapabilities& caps, const std::unordered_set<std::string>& changed_here);

/// What converge_batch() did.
struct BatchSteps {
  /// The steps of resources[first], resources[first + 1], …: a prefix of the run. Ends at the
  /// first failure, or, when a read-back failed after the batch's writes became visible, at the
  /// last resource the batch made visible (each of those verified on its own).
  std::vector<Step> steps;
  /// An intent was written to the journal: the caller must settle it (StateDir::save_changes).
  bool intent_written = false;
};

/// read → plan for each resource of the run, up to the one that makes caps.max_batch non-empty
/// plans (the steps then end there: the caller goes on after it), one apply_batch() for those
/// plans (with the ownership intent written through `state` before any becomes visible), then the
/// read-back of each applied one (verify_applied). Never a dry run. `cancel` fired before the
/// batch: no steps.
BatchSteps converge_batch(sdk::Provider& provider, const sdk::ProviderCapabilities& caps,
                          const std::vector<sdk::Resource>& resources, std::size_t first, std::size_t last,
                          const sdk::CancelToken& cancel, StateDir& state);

}  // namespace mesh::engine::detail
