// Batched applies (docs/decisions/0106): a run of independent resources of one provider that
// declares ProviderCapabilities::max_batch is applied with one ApplyBatchRequest, so the provider
// can make all its writes durable with one sync, and the engine journals the run's ownership
// intent once before any of them becomes visible and its verified changes once after.
#include <algorithm>
#include <utility>

#include "engine_internal.h"

namespace mesh::engine::detail {
namespace {

using sdk::ErrorCode;

/// The `restart_on` entries of a resource that parse as resource ids.
std::vector<sdk::ResourceId> restart_on_of(const sdk::Resource& r) {
  std::vector<sdk::ResourceId> out;
  if (const sdk::Value* list = r.properties.find(sdk::kRestartOnProperty); list && list->is_array())
    for (const auto& entry : list->as_array())
      if (entry.is_string())
        if (auto rid = sdk::ResourceId::parse(entry.as_string())) out.push_back(std::move(*rid));
  return out;
}

/// The engine's side of BatchIntent: the run's targets go to the journal in one line.
class JournalIntent final : public sdk::BatchIntent {
 public:
  JournalIntent(StateDir& state, std::vector<StateDir::IntentEntry>& entries) : state_(state), entries_(entries) {}
  sdk::Result<void> before_visible(std::size_t count) noexcept override {
    try {
      if (called_) return sdk::fail(ErrorCode::FailedPrecondition, "before_visible called twice in one batch");
      called_ = true;
      if (count > entries_.size()) count = entries_.size();
      entries_.resize(count);
      if (count == 0) return {};
      if (auto ok = state_.save_intent(entries_); !ok) {
        error_ = "saving state: " + ok.error().describe();
        return sdk::fail(ErrorCode(ok.error().code), error_);
      }
      written_ = true;
      return {};
    } catch (...) {
      return sdk::fail(ErrorCode::Internal, "saving state: out of memory");
    }
  }
  bool written() const noexcept { return written_; }
  const std::string& error() const noexcept { return error_; }

 private:
  StateDir& state_;
  std::vector<StateDir::IntentEntry>& entries_;
  bool called_ = false;
  bool written_ = false;
  std::string error_;
};

}  // namespace

std::size_t batch_end(const std::vector<sdk::Resource>& resources, std::size_t first,
                      const sdk::ProviderCapabilities& caps, const std::unordered_set<std::string>& changed_here) {
  if (caps.max_batch < 2 || caps.may_replace_host) return first + 1;
  const std::size_t window = static_cast<std::size_t>(caps.max_batch) * kBatchWindow;
  const std::string& type = resources[first].rid.type;
  // The names of the run so far, made only once a resource of it names another (a declaration
  // without `requires` or `restart_on` never pays for it; one with them checks each in O(1)).
  std::unordered_set<std::string> run;
  std::size_t in_set = first;  // resources[first, in_set) are in `run`
  auto in_run = [&](const sdk::ResourceId& rid, std::size_t end) {
    for (; in_set < end; ++in_set) run.insert(resources[in_set].rid.str());
    return run.count(rid.str()) > 0;
  };
  auto notified = [&](const sdk::Resource& r) {
    if (changed_here.empty()) return false;
    if (caps.notified_by_requires)
      for (const auto& d : r.depends_on)
        if (changed_here.count(d.str())) return true;
    if (caps.notified_by_restart_on)
      for (const auto& d : restart_on_of(r))
        if (changed_here.count(d.str())) return true;
    return false;
  };
  std::size_t end = first;
  while (end < resources.size() && end - first < window) {
    const sdk::Resource& r = resources[end];
    if (r.rid.type != type || notified(r)) break;
    bool depends = false;
    for (const auto& d : r.depends_on) depends = depends || in_run(d, end);
    for (const auto& d : restart_on_of(r)) depends = depends || in_run(d, end);
    if (depends) break;
    ++end;
  }
  return std::max(end, first + 1);
}

BatchSteps converge_batch(sdk::Provider& provider, const sdk::ProviderCapabilities& caps,
                          const std::vector<sdk::Resource>& resources, std::size_t first, std::size_t last,
                          const sdk::CancelToken& cancel, StateDir& state) {
  BatchSteps out;
  if (cancel.cancelled()) return out;
  const bool deletes = caps.removal == sdk::Removal::Delete;
  auto fail_step = [](Step& s, std::string reason, ErrorCode code = ErrorCode::Failed) {
    s.ok = false;
    s.outcome = "failed";
    s.reason = std::move(reason);
    s.code = sdk::to_string(code);
  };
  // 1. read → plan, in order, up to the first failure.
  sdk::ApplyBatchRequest req;
  req.cancel = &cancel;
  std::vector<std::size_t> pending;      // index into out.steps of each plan in req.plans
  std::vector<bool> removal;             // each plan's action is Remove
  std::vector<StateDir::IntentEntry> intent;
  for (std::size_t i = first; i < last; ++i) {
    const sdk::Resource& want = resources[i];
    Step& s = out.steps.emplace_back();
    sdk::ReadRequest read_req;
    read_req.rid = want.rid;
    sdk::ReadResponse observed;
    if (auto ok = provider.read(read_req, observed); !ok) {
      fail_step(s, "read: " + ok.error().describe(), ok.error().code);
      break;
    }
    sdk::PlanRequest plan_req;
    plan_req.desired = want;
    plan_req.observed = observed.state;
    sdk::PlanResponse planned;
    if (auto ok = provider.plan(plan_req, planned); !ok) {
      fail_step(s, "plan: " + ok.error().describe(), ok.error().code);
      break;
    }
    if (planned.plan.empty()) {
      if (deletes && is_absent(want) && observed.state.has_value()) {
        fail_step(s, "declared absent but it exists, and the provider plans nothing");
        break;
      }
      s.outcome = "unchanged";
      if (observed.state) s.digest = state_digest(observed.state->properties);
      continue;
    }
    s.changes = planned.plan.changes;
    removal.push_back(planned.plan.action == sdk::PlanAction::Remove);
    intent.push_back(StateDir::IntentEntry{want.rid.str(), observed.state.has_value(), i, want.properties});
    pending.push_back(out.steps.size() - 1);
    req.plans.push_back(std::move(planned.plan));
    // A batch is at most max_batch plans, however many unchanged resources lie between them.
    if (req.plans.size() >= caps.max_batch) break;
  }
  if (req.plans.empty()) return out;
  // 2. One apply_batch for every non-empty plan.
  JournalIntent hook(state, intent);
  req.intent = &hook;
  sdk::ApplyBatchResponse resp;
  auto applied = provider.apply_batch(req, resp);
  out.intent_written = hook.written();
  const std::size_t n_applied = std::min({resp.applied, req.plans.size(), applied ? req.plans.size() : resp.applied});
  // 3. Read back each applied plan. A failure here comes after the batch's writes became visible:
  //    the ones after it are verified too (they are what the mesh wrote), and the steps end with
  //    the last applied one.
  for (std::size_t k = 0; k < n_applied; ++k)
    verify_applied(provider, caps, resources[first + pending[k]], removal[k], out.steps[pending[k]]);
  if (!applied) {
    const std::size_t failed_at = n_applied < pending.size() ? pending[n_applied] : out.steps.size() - 1;
    Step& s = out.steps[failed_at];
    if (!hook.error().empty()) fail_step(s, hook.error(), applied.error().code);
    else fail_step(s, applied.error().describe(), applied.error().code);
    out.steps.resize(failed_at + 1);
  } else if (n_applied < pending.size()) {
    // A provider that reports success without applying everything breaks its contract.
    Step& s = out.steps[pending[n_applied]];
    fail_step(s, "apply_batch reported success after applying " + std::to_string(n_applied) + " of " +
                     std::to_string(pending.size()) + " plans", ErrorCode::Internal);
    out.steps.resize(pending[n_applied] + 1);
  }
  // The steps end at the first failure, unless resources after it were made visible by the batch.
  std::size_t last_visible = 0;
  bool any_visible = false;
  for (std::size_t k = 0; k < n_applied; ++k) {
    last_visible = pending[k];
    any_visible = true;
  }
  for (std::size_t k = 0; k < out.steps.size(); ++k) {
    if (out.steps[k].ok) continue;
    out.steps.resize(std::max(k, any_visible ? last_visible : k) + 1);
    break;
  }
  return out;
}

}  // namespace mesh::engine::detail
