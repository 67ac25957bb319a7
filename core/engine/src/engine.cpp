// The apply engine. The rule it exists for (ARCHITECTURE.md 4 and 5): a resource counts as applied
// only when reading it back through its provider shows the declared state — the read-back is
// compared by asking the provider to plan again, and anything but an empty plan is a failure —
// and the first failure stops the apply. Ownership is recorded after every resource that changes
// it, so a kill -9 in the middle leaves a record of exactly what was applied.
#include "mesh/engine/engine.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <utility>

#include "mesh/common/crypto.h"
#include "mesh/common/process.h"
#include "engine_internal.h"

namespace mesh::engine {
namespace {

void write_canonical(const sdk::Value& v, std::string& out) {
  if (v.is_object()) {
    // Sorted by key. Objects of up to 16 members (a file's state has 8) are sorted on the stack:
    // this runs once per resource of every apply and drift scan.
    const auto& object = v.as_object();
    constexpr std::size_t kOnStack = 16;
    const sdk::Value::Member* small[kOnStack];
    std::vector<const sdk::Value::Member*> large;
    const sdk::Value::Member** members = small;
    if (object.size() > kOnStack) {
      large.resize(object.size());
      members = large.data();
    }
    std::size_t n = 0;
    for (const auto& m : object) members[n++] = &m;
    std::sort(members, members + n, [](const auto* a, const auto* b) { return a->first < b->first; });
    out += '{';
    for (std::size_t i = 0; i < n; ++i) {
      if (i) out += ',';
      sdk::Value::write_json_string(out, members[i]->first);
      out += ':';
      write_canonical(members[i]->second, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const auto& e : v.as_array()) {
      if (!first) out += ',';
      first = false;
      write_canonical(e, out);
    }
    out += ']';
  } else {
    v.write_json(out);
  }
}

}  // namespace

std::string state_digest(const sdk::Value& properties) {
  std::string text;
  text.reserve(256);
  text += "nox-mesh state v1\n";
  write_canonical(properties, text);
  return common::sha256_hex(text);
}

namespace {

using sdk::ErrorCode;
using sdk::PlanAction;
using sdk::Value;

/// A value as shown in a reason: short printable strings as they are, long or multi-line ones as
/// their SHA-256 and size (file contents), other JSON cut at 64 bytes.
std::string show_value(const Value& v) {
  constexpr std::size_t kMax = 64;
  if (v.is_null()) return "absent";
  if (v.is_string()) {
    const std::string& s = v.as_string();
    const bool printable = std::none_of(s.begin(), s.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (s.size() <= kMax && printable) return s.empty() ? "\"\"" : s;
    return "sha256:" + common::sha256_hex(s) + " (" + std::to_string(s.size()) + " bytes)";
  }
  std::string json = v.to_json();
  if (json.size() > kMax) return "sha256:" + common::sha256_hex(json) + " (JSON, " +
                                 std::to_string(json.size()) + " bytes)";
  return json;
}

}  // namespace

namespace detail {
std::string describe_changes(const sdk::Plan& plan, const sdk::Schema& schema) {
  if (plan.changes.empty())
    return std::string("the provider still plans '") + sdk::to_string(plan.action) + "'";
  std::string out;
  for (const auto& c : plan.changes) {
    if (!out.empty()) out += "; ";
    const std::string_view name = std::string_view(c.path).substr(c.path.rfind("properties.", 0) == 0 ? 11 : 0);
    const sdk::Attribute* a = schema.find(name);
    if (a && a->sensitive) {
      out += c.path + " differs from the declared (sensitive value)";
      continue;
    }
    out += c.path + " is " + show_value(c.observed) + ", declared " + show_value(c.declared);
  }
  return out;
}

bool is_absent(const sdk::Resource& r) { return r.properties.get_string("ensure") == "absent"; }

void verify_applied(sdk::Provider& provider, const sdk::ProviderCapabilities& caps, const sdk::Resource& want,
                    bool removal, Step& s) {
  auto failed = [&](std::string reason, ErrorCode code = ErrorCode::Failed) {
    s.ok = false;
    s.outcome = "failed";
    s.reason = std::move(reason);
    s.code = sdk::to_string(code);
  };
  sdk::ReadRequest read_req;
  read_req.rid = want.rid;
  sdk::ReadResponse back;
  if (auto ok = provider.read(read_req, back); !ok) return failed("read-back: " + ok.error().describe(), ok.error().code);
  // The read-back plan: no notification, so a notification change never reappears in it.
  auto again = provider.plan(want, back.state);
  if (!again) return failed("read-back plan: " + again.error().describe(), again.error().code);
  if (!again->empty()) return failed("read-back does not match: " + describe_changes(*again, provider.schema()));
  if (caps.removal == sdk::Removal::Delete && (removal || is_absent(want)) && back.state.has_value())
    return failed("read-back does not match: still present after removal");
  if (back.state) s.digest = state_digest(back.state->properties);
  s.outcome = removal ? "removed" : "changed";
}

}  // namespace detail

namespace {
using detail::describe_changes;
using detail::Step;

std::string change_paths(const std::vector<sdk::Change>& changes) {
  std::string out;
  for (const auto& c : changes) out += (out.empty() ? "" : ",") + c.path;
  return out;
}

/// key="value" with quotes and backslashes escaped and newlines flattened, for grep-able lines.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  out += '"';
  return out;
}

using detail::is_absent;

std::vector<OwnedResource>::iterator find_owned(std::vector<OwnedResource>& owned,
                                                const std::string& name) {
  auto it = std::lower_bound(owned.begin(), owned.end(), name,
                             [](const OwnedResource& o, const std::string& n) { return o.resource < n; });
  return (it != owned.end() && it->resource == name) ? it : owned.end();
}

/// Records `name` as owned with `properties` and `order`; returns whether the ownership record
/// changed in a way worth saving at once (new, or other properties). A changed order alone is
/// saved with the next save.
/// `take`: the declaration's own properties (apply_taking), moved into the record instead of
/// copied; nullptr to copy `properties`. `*touched` is set when anything in the record changed,
/// the order and digest included (what the end-of-apply snapshot must then write).
bool record_owned(std::vector<OwnedResource>& owned, const std::string& name, const Value& properties,
                  std::uint64_t order, const std::string& digest, Value* take, bool* touched) {
  auto it = std::lower_bound(owned.begin(), owned.end(), name,
                             [](const OwnedResource& o, const std::string& n) { return o.resource < n; });
  if (it != owned.end() && it->resource == name) {
    if (it->order != order || (!digest.empty() && it->digest != digest)) *touched = true;
    it->order = order;
    // A new digest alone (what was read back changed) is saved with the end-of-apply snapshot.
    if (!digest.empty()) it->digest = digest;
    if (it->properties == properties) return false;
    *touched = true;
    // Not `take ? std::move(*take) : properties`: a conditional of a Value xvalue and a const
    // Value lvalue is a const prvalue copy under clang, which kept the declaration's copy.
    if (take) {
      it->properties = std::move(*take);
    } else {
      it->properties = properties;
    }
    return true;
  }
  *touched = true;
  if (take) {
    owned.insert(it, OwnedResource{name, std::move(*take), order, digest});
  } else {
    owned.insert(it, OwnedResource{name, properties, order, digest});
  }
  return true;
}

/// `rid.str()` compared with `name` ("type:id"), without building the string: < 0, 0 or > 0 as
/// std::string's compare would give.
int compare_name(const sdk::ResourceId& rid, std::string_view name) {
  for (std::string_view part : {std::string_view(rid.type), std::string_view(":"), std::string_view(rid.id)}) {
    const std::string_view head = name.substr(0, part.size());
    if (const int c = part.compare(head); c != 0) return c;  // a shorter `head` that is a prefix: > 0
    name.remove_prefix(head.size());
  }
  return name.empty() ? 0 : -1;
}

bool forget_owned(std::vector<OwnedResource>& owned, const std::string& name) {
  auto it = find_owned(owned, name);
  if (it == owned.end()) return false;
  owned.erase(it);
  return true;
}

std::vector<std::string> owned_names(const std::vector<OwnedResource>& owned) {
  std::vector<std::string> out;
  out.reserve(owned.size());
  for (const auto& o : owned) out.push_back(o.resource);
  return out;  // already sorted
}

std::vector<std::string> owned_digests(const std::vector<OwnedResource>& owned) {
  std::vector<std::string> out;
  out.reserve(owned.size());
  for (const auto& o : owned) out.push_back(o.digest);
  return out;
}

/// The word logged for a provider's notification ("trigger=<word>").
std::string notification_word(const sdk::ProviderCapabilities& caps) {
  return caps.notification && *caps.notification ? std::string(caps.notification) : std::string("notify");
}

/// read → plan (with `notified_by`) → (apply → read → plan without it) for one declared resource.
/// What a notification means is the provider's (sdk/provider.h, "Notification"): it shows up as
/// the provider's own change in the plan, and the read-back plan is made without it.
Step converge(sdk::Provider& provider, const sdk::ProviderCapabilities& caps, const sdk::Resource& want,
              const std::vector<sdk::ResourceId>& notified_by, const sdk::CancelToken& cancel, bool dry_run) {
  Step s;
  // `code`: the provider's, when one of its calls failed; the engine's own verdict is Failed.
  auto failed = [&](std::string reason, ErrorCode code = ErrorCode::Failed) {
    s.ok = false;
    s.outcome = "failed";
    s.reason = std::move(reason);
    s.code = sdk::to_string(code);
    return s;
  };
  const bool deletes = caps.removal == sdk::Removal::Delete;
  sdk::ReadRequest read_req;
  read_req.rid = want.rid;
  sdk::ReadResponse observed;
  if (auto ok = provider.read(read_req, observed); !ok) return failed("read: " + ok.error().describe(), ok.error().code);
  s.before = observed.state;
  sdk::PlanRequest plan_req;
  plan_req.desired = want;
  plan_req.observed = observed.state;
  plan_req.notified_by = notified_by;
  sdk::PlanResponse planned;
  if (auto ok = provider.plan(plan_req, planned); !ok) return failed("plan: " + ok.error().describe(), ok.error().code);
  const bool removal = planned.plan.action == PlanAction::Remove;
  if (planned.plan.empty()) {
    if (deletes && is_absent(want) && observed.state.has_value() && !dry_run)
      return failed("declared absent but it exists, and the provider plans nothing");
    s.outcome = "unchanged";
    if (observed.state) s.digest = state_digest(observed.state->properties);
    return s;
  }
  s.changes = planned.plan.changes;
  if (dry_run) {
    s.outcome = removal ? "would_remove" : "would_change";
    return s;
  }
  sdk::ApplyRequest apply_req;
  apply_req.plan = std::move(planned.plan);
  apply_req.cancel = &cancel;
  apply_req.notified_by = notified_by;
  sdk::ApplyResponse applied;
  if (auto ok = provider.apply(apply_req, applied); !ok) return failed(ok.error().describe(), ok.error().code);
  detail::verify_applied(provider, caps, want, removal, s);
  if (!s.ok) return s;
  if (applied.changed) {
    // The provider says what apply really changed (a notification whose effect it found out).
    s.changes = std::move(*applied.changed);
    if (s.changes.empty()) {
      s.outcome = "unchanged";
      return s;
    }
  }
  s.outcome = removal ? "removed" : "changed";
  return s;
}

/// remove, then the read-back the provider's removal mode asks for (sdk/provider.h): Delete —
/// the resource must be gone; Release — read must succeed and, when the provider said what it
/// left, plan(left, read) must be empty.
Step remove_verified(sdk::Provider& provider, const sdk::ResourceId& rid,
                     const sdk::CancelToken& cancel) {
  Step s;
  // `code`: the provider's, when one of its calls failed; the engine's own verdict is Failed.
  auto failed = [&](std::string reason, ErrorCode code = ErrorCode::Failed) {
    s.ok = false;
    s.outcome = "failed";
    s.reason = std::move(reason);
    s.code = sdk::to_string(code);
    return s;
  };
  auto caps = provider.capabilities();
  if (!caps) return failed("capabilities: " + caps.error().describe(), caps.error().code);
  sdk::RemoveRequest req;
  req.rid = rid;
  req.cancel = &cancel;
  sdk::RemoveResponse removed;
  if (auto r = provider.remove(req, removed); !r) return failed("remove: " + r.error().describe(), r.error().code);
  auto back = provider.read(rid);
  if (!back) return failed("read-back: " + back.error().describe(), back.error().code);
  if (caps->removal == sdk::Removal::Delete) {
    if (back->has_value()) return failed("read-back does not match: still present after removal");
  } else if (removed.left) {
    sdk::Resource left{rid, *removed.left, {}};
    auto again = provider.plan(left, *back);
    if (!again) return failed("read-back plan: " + again.error().describe(), again.error().code);
    if (!again->empty())
      return failed("read-back does not match what the provider left: " + describe_changes(*again, provider.schema()));
  }
  s.outcome = "removed";
  return s;
}

/// The first 4 KiB of a self-test's output, trailing blank space dropped.
std::string self_test_text(const std::string& output) {
  std::string out = output.substr(0, 4096);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ' || out.back() == '\t'))
    out.pop_back();
  return out;
}

/// What the revert declares: the declared resource with, for each schema attribute the state
/// read before the apply carries (non-null), that value.
sdk::Resource revert_declaration(const sdk::Resource& want, const sdk::State& before, const sdk::Schema& schema) {
  sdk::Resource r = want;
  for (const auto& a : schema.attributes)
    if (const Value* v = before.properties.find(a.name); v && !v->is_null()) r.properties.set(a.name, *v);
  return r;
}

}  // namespace

std::optional<FileIdentity> FileIdentity::of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                      static_cast<std::int64_t>(st.st_mtim.tv_sec), static_cast<std::int64_t>(st.st_mtim.tv_nsec),
                      static_cast<std::int64_t>(st.st_size)};
}

Engine::Engine(const ProviderRegistry& providers, StateDir& state, sdk::Logger& log)
    : providers_(providers), state_(state), log_(log) {}

void OutcomeCounts::add(std::string_view outcome) noexcept {
  if (outcome == "changed") ++changed;
  else if (outcome == "unchanged") ++unchanged;
  else if (outcome == "removed") ++removed;
  else if (outcome == "failed") ++failed;
  else if (outcome == "not_attempted") ++not_attempted;
  else if (outcome == "cancelled") ++cancelled;
  else if (outcome == "would_change") ++would_change;
  else if (outcome == "would_remove") ++would_remove;
}

ApplyResult Engine::apply(const Declaration& decl, const std::string& text,
                          const sdk::CancelToken& cancel, bool dry_run) {
  ApplyOptions options;
  options.dry_run = dry_run;
  return apply_impl(decl, nullptr, text, cancel, options);
}

ApplyResult Engine::apply_taking(Declaration& decl, const std::string& text, const sdk::CancelToken& cancel,
                                 bool dry_run) {
  ApplyOptions options;
  options.dry_run = dry_run;
  return apply_impl(decl, &decl, text, cancel, options);
}

ApplyResult Engine::apply_taking(Declaration& decl, std::string_view text, const sdk::CancelToken& cancel,
                                 const ApplyOptions& options) {
  return apply_impl(decl, &decl, text, cancel, options);
}

ApplyResult Engine::apply_impl(const Declaration& decl, Declaration* take, std::string_view text,
                               const sdk::CancelToken& cancel, const ApplyOptions& options) {
  const bool dry_run = options.dry_run;
  ApplyResult result;
  result.revision = decl.revision;
  const std::string ctx = "node=" + (decl.node.empty() ? std::string("-") : decl.node) +
                          " revision=" + std::to_string(decl.revision);
  // The one ownership set, changed in place (StateDir::mutable_state): a dry run changes nothing
  // in it. `take`: apply_taking's declaration, whose properties move into the records.
  HostState& st = state_.mutable_state();
  auto taken = [&](std::size_t index) -> Value* {
    return take ? &take->resources[index].properties : nullptr;
  };
  // One allocation each instead of doublings (each doubling held the old and the new array:
  // ~1.5 MB of outcomes and 2 MB of ownership records at 20,000 resources).
  const bool keep_all = options.keep_changes == ApplyOptions::kKeepAll;
  if (keep_all) result.resources.reserve(decl.resources.size());
  if (!dry_run && st.owned.capacity() < decl.resources.size()) st.owned.reserve(decl.resources.size());
  // Each outcome: to the caller's callback, then kept in `result.resources` or counted
  // (ApplyOptions::keep_changes). A kept "failed" or "cancelled" one is result.resources.back().
  std::size_t kept_changes = 0;
  auto emit = [&](ResourceOutcome&& o) {
    if (options.on_outcome) options.on_outcome(o);
    const bool keep = keep_all || o.outcome == "failed" || o.outcome == "cancelled" ||
                      ((o.outcome == "changed" || o.outcome == "removed" || o.outcome == "would_change" ||
                        o.outcome == "would_remove") &&
                       kept_changes++ < options.keep_changes);
    if (keep) result.resources.push_back(std::move(o));
    else result.not_kept.add(o.outcome);
  };
  // ApplyResult::owned and owned_digests, when the caller asked for them.
  auto list_owned = [&](const std::vector<OwnedResource>& owned) {
    if (!options.list_owned) return;
    result.owned = owned_names(owned);
    result.owned_digests = owned_digests(owned);
  };
  std::string save_error;
  std::string save_code;  // the ErrorCode name of save_error
  // Whether this apply changed anything in the ownership records (an order or a digest too): an
  // apply that changed nothing has no snapshot to write (step 3).
  bool touched = false;

  auto log_outcome = [&](const ResourceOutcome& o) {
    std::string line = ctx + " resource=" + o.resource + " outcome=" + o.outcome;
    if (!o.changes.empty()) line += " changes=" + change_paths(o.changes);
    if (!o.code.empty()) line += " code=" + o.code;
    if (!o.reason.empty()) line += " reason=" + quoted(o.reason);
    log_.log(o.outcome == "failed" ? sdk::LogLevel::Error : sdk::LogLevel::Info, line);
  };
  auto save_now = [&]() {
    if (dry_run || !save_error.empty()) return;
    if (auto ok = state_.save(st); !ok) {
      save_error = "saving state: " + ok.error().describe();
      save_code = sdk::to_string(ok.error().code);
    }
  };
  // One ownership change, made durable before the next resource is touched (O(1): a journal line).
  auto save_change = [&](const std::string& resource) {
    if (dry_run || !save_error.empty()) return;
    if (auto ok = state_.save_change(st, resource); !ok) {
      save_error = "saving state: " + ok.error().describe();
      save_code = sdk::to_string(ok.error().code);
    }
  };
  // Stops the apply: the rest are not attempted; the failure is recorded. When `cancel` fired
  // (between resources, or a provider stopped because of it) the apply is "cancelled", not
  // failed: what it changed so far stays owned, and last_revision/last_outcome stay as they were.
  auto finish_failed = [&](std::size_t next_index) {
    for (std::size_t j = next_index; j < decl.resources.size(); ++j)
      emit(ResourceOutcome{decl.resources[j].rid.str(), "not_attempted", {}, {}});
    const bool cancelled = cancel.cancelled() && save_error.empty();
    result.outcome = cancelled ? "cancelled" : "failed";
    if (!dry_run) {
      state_.discard_applied_declaration();
      if (!cancelled) {
        st.last_revision = decl.revision;
        st.last_outcome = "failed";
      }
      save_now();
    }
    list_owned(dry_run ? state_.state().owned : st.owned);
    if (cancelled) {
      log_.info(ctx + " outcome=cancelled resource=" + (result.failed_resource.empty() ? "-" : result.failed_resource) +
                " (stopped at a resource boundary)");
      return result;
    }
    log_.error(ctx + " outcome=failed resource=" + (result.failed_resource.empty() ? "-" : result.failed_resource) +
               " reason=" + quoted(result.reason));
    return result;
  };

  // 0. The declaration's text: staged beside applied.json before anything is touched (or found
  //    there already), so that the commit renames it into place and the caller's copy can go now.
  bool applied_current = false;  // applied.json holds this text already
  if (!dry_run) {
    auto staged = state_.stage_applied_declaration(text);
    if (!staged) {
      result.reason = "saving the applied declaration: " + staged.error().describe();
      result.code = sdk::to_string(staged.error().code);
      return finish_failed(0);
    }
    applied_current = !*staged;
    text = {};  // not read again: the caller may free it
    if (options.text_staged) options.text_staged();
  }

  // 1. Declared resources, in order. `changed_here`: those that changed in this apply, for the
  //    notifications (engine.h) — only the ones some resource names in `requires` or
  //    `restart_on` (`referenced`), since only those can notify: a set of every changed name
  //    held 2 MB at the end of a 20,000-file first apply.
  std::unordered_set<std::string> referenced;
  for (const auto& r : decl.resources) {
    for (const auto& d : r.depends_on) referenced.insert(d.str());
    if (const Value* list = r.properties.find(sdk::kRestartOnProperty); list && list->is_array())
      for (const auto& entry : list->as_array())
        if (entry.is_string()) referenced.insert(entry.as_string());
  }
  std::unordered_set<std::string> changed_here;
  auto note_changed = [&](const std::string& name) {
    if (referenced.count(name)) changed_here.insert(name);
  };
  std::string replaced_by, self_test_output;  // decision 0076: set once a new program passed
  std::size_t i = 0;
  // Applies decl.resources[first, end) as one batch and records and logs each step, as the loop
  // below does for one resource. Returns the index finish_failed() should start from when the
  // apply stops (a failure, or cancelled before the batch), else nullopt with `i` moved to the
  // run's last resource.
  auto apply_run = [&](sdk::Provider& provider, const sdk::ProviderCapabilities& caps, std::size_t first,
                       std::size_t end) -> std::optional<std::size_t> {
    auto batch = detail::converge_batch(provider, caps, decl.resources, first, end, cancel, state_);
    if (batch.steps.empty()) {
      result.reason = "cancelled";
      result.code = "cancelled";
      return first;
    }
    std::vector<std::string> to_save;
    for (std::size_t k = 0; k < batch.steps.size(); ++k) {
      if (!batch.steps[k].ok) continue;
      const sdk::Resource& want = decl.resources[first + k];
      const std::string name = want.rid.str();
      const bool changed = is_absent(want) ? forget_owned(st.owned, name)
                                           : record_owned(st.owned, name, want.properties, first + k,
                                                          batch.steps[k].digest, taken(first + k), &touched);
      if (changed) to_save.push_back(name);
    }
    if ((!to_save.empty() || batch.intent_written) && save_error.empty())
      if (auto ok = state_.save_changes(st, to_save); !ok) {
        save_error = "saving state: " + ok.error().describe();
        save_code = sdk::to_string(ok.error().code);
      }
    std::optional<std::size_t> failed_at;
    for (std::size_t k = 0; k < batch.steps.size(); ++k) {
      Step& step = batch.steps[k];
      const std::string name = decl.resources[first + k].rid.str();
      if (step.ok && !save_error.empty() && std::find(to_save.begin(), to_save.end(), name) != to_save.end()) {
        step.ok = false;
        step.outcome = "failed";
        step.reason = save_error;
        step.code = save_code;
      }
      if (step.ok && (step.outcome == "changed" || step.outcome == "removed")) note_changed(name);
      if (!step.ok && cancel.cancelled()) step.outcome = "cancelled";
      if (!step.ok && !failed_at) {
        failed_at = k;
        result.failed_resource = name;
        result.reason = step.reason;
        result.code = step.code;
      }
      ResourceOutcome out{name, step.outcome, std::move(step.changes), std::move(step.reason)};
      out.code = std::move(step.code);
      log_outcome(out);
      emit(std::move(out));
    }
    if (failed_at) return first + batch.steps.size();
    i = first + batch.steps.size() - 1;
    return std::nullopt;
  };
  for (; i < decl.resources.size(); ++i) {
    const sdk::Resource& want = decl.resources[i];
    const std::string name = want.rid.str();
    if (cancel.cancelled()) {
      result.reason = "cancelled";
      result.code = "cancelled";
      return finish_failed(i);
    }
    // A run of independent resources of a provider that batches (decision 0106): one
    // apply_batch, one journal line of intent before it, one of verified changes after it.
    if (sdk::Provider* bp = dry_run ? nullptr : providers_.find(want.rid.type)) {
      if (auto caps = bp->capabilities(); caps && caps->max_batch > 1) {
        if (const std::size_t end = detail::batch_end(decl.resources, i, *caps, changed_here); end > i + 1) {
          if (auto failed_at = apply_run(*bp, *caps, i, end)) return finish_failed(*failed_at);
          continue;
        }
      }
    }
    ResourceOutcome out{name, "", {}, {}};
    sdk::Provider* provider = providers_.find(want.rid.type);
    Step step;
    if (!provider) {
      step.ok = false;
      step.outcome = "failed";
      step.reason = "no provider for resource type '" + want.rid.type + "' is loaded";
      step.code = sdk::to_string(ErrorCode::FailedPrecondition);
    } else if (auto caps = provider->capabilities(); !caps) {
      step.ok = false;
      step.outcome = "failed";
      step.reason = "capabilities: " + caps.error().describe();
      step.code = sdk::to_string(caps.error().code);
    } else {
      // Notification (sdk/provider.h): the changed resources that the provider says notify this
      // one, in declaration order, without duplicates.
      std::vector<sdk::ResourceId> notified_by;
      auto notify = [&](const sdk::ResourceId& rid) {
        if (changed_here.count(rid.str()) && std::find(notified_by.begin(), notified_by.end(), rid) == notified_by.end())
          notified_by.push_back(rid);
      };
      if (!changed_here.empty()) {
        if (const Value* list = want.properties.find(sdk::kRestartOnProperty);
            caps->notified_by_restart_on && list && list->is_array())
          for (const auto& entry : list->as_array())
            if (entry.is_string())
              if (auto rid = sdk::ResourceId::parse(entry.as_string())) notify(*rid);
        if (caps->notified_by_requires)
          for (const auto& req : want.depends_on) notify(req);
      }
      if (!notified_by.empty()) {
        std::string names;
        for (const auto& r : notified_by) names += (names.empty() ? "" : ",") + r.str();
        log_.info(ctx + " resource=" + name + " trigger=" + notification_word(*caps) + " changed=" + names);
      }
      step = converge(*provider, *caps, want, notified_by, cancel, dry_run);
      // Decision 0076: did this apply replace the running host's program?
      if (step.ok && !dry_run && step.outcome == "changed" && caps->may_replace_host && program_) {
        const auto now = FileIdentity::of(program_->executable);
        if (now && now != program_->at_start) {
          log_.info(ctx + " resource=" + name + " host_program=" + quoted(program_->executable) +
                    " replaced: running its self-test");
          auto test = common::run_process({program_->executable, "self-test", "--config", program_->config},
                                          program_->self_test_timeout, 64 << 10);
          const std::string output = self_test_text(test.output);
          if (test.succeeded()) {
            log_.info(ctx + " resource=" + name + " outcome=self_test_passed output=" + quoted(output));
            replaced_by = name;
            self_test_output = output;
          } else {
            std::string reason = "self-test of the new host failed: " +
                                 (output.empty() ? test.describe_end(program_->self_test_timeout)
                                                 : output + " (" + test.describe_end(program_->self_test_timeout) + ")");
            log_.error(ctx + " resource=" + name + " outcome=self_test_failed reason=" + quoted(reason) +
                       " (reverting)");
            // The revert runs whatever the token says: leaving the failed program installed is worse.
            sdk::CancelToken no_cancel;
            Step back;
            if (step.before) {
              back = converge(*provider, *caps, revert_declaration(want, *step.before, provider->schema()), {},
                              no_cancel, false);
            } else {
              back = remove_verified(*provider, want.rid, no_cancel);
            }
            reason += back.ok ? "; reverted to the state before the apply"
                              : "; the revert failed too: " + back.reason;
            log_.log(back.ok ? sdk::LogLevel::Info : sdk::LogLevel::Error,
                     ctx + " resource=" + name + " revert=" + (back.ok ? "done" : "failed") +
                         (back.ok ? "" : " reason=" + quoted(back.reason)));
            step.ok = false;
            step.outcome = "failed";
            step.reason = std::move(reason);
            step.code = sdk::to_string(ErrorCode::Failed);
          }
        }
      }
    }
    if (step.ok && (step.outcome == "changed" || step.outcome == "removed" || step.outcome == "would_change" ||
                    step.outcome == "would_remove"))
      note_changed(name);
    if (!step.ok && cancel.cancelled()) step.outcome = "cancelled";
    out.outcome = step.outcome;
    out.changes = std::move(step.changes);
    out.reason = step.reason;
    out.code = step.code;
    if (step.ok && !dry_run) {
      const bool changed = is_absent(want) ? forget_owned(st.owned, name)
                                           : record_owned(st.owned, name, want.properties, i, step.digest,
                                                          taken(i), &touched);
      if (changed) save_change(name);
      if (!save_error.empty()) {
        out.outcome = "failed";
        out.reason = save_error;
        out.code = save_code;
        step.ok = false;
      }
    }
    log_outcome(out);
    if (!step.ok) {
      result.failed_resource = name;
      result.reason = out.reason;
      result.code = out.code;
      emit(std::move(out));
      return finish_failed(i + 1);
    }
    emit(std::move(out));
    if (!replaced_by.empty()) {
      // The new program passed its self-test: stop here; its first reconcile applies the rest.
      for (std::size_t j = i + 1; j < decl.resources.size(); ++j)
        emit(ResourceOutcome{decl.resources[j].rid.str(), "not_attempted", {}, {}});
      state_.discard_applied_declaration();
      save_now();
      result.outcome = save_error.empty() ? "restart" : "failed";
      if (!save_error.empty()) {
        result.reason = save_error;
        result.code = save_code;
      }
      result.replaced_by = replaced_by;
      result.self_test_output = self_test_output;
      list_owned(st.owned);
      log_.info(ctx + " outcome=" + result.outcome + " resource=" + replaced_by +
                " (the host's program was replaced and passed its self-test: restarting into it)");
      return result;
    }
  }

  // 2. Prune: owned resources the declaration no longer names, dependents first (reverse of the
  //    order they were applied in). Which owned records are declared is marked by looking each
  //    declared resource up in the sorted records (no set of every declared name: 2.3 MB at
  //    20,000 resources, held to the end of the apply).
  struct Pruned {
    std::string resource;
    std::uint64_t order;
  };
  std::vector<Pruned> prune;  // names and order only: no copy of the properties
  {
    std::vector<char> declared(st.owned.size(), 0);
    for (const auto& r : decl.resources) {
      auto it = std::lower_bound(st.owned.begin(), st.owned.end(), r.rid,
                                 [](const OwnedResource& o, const sdk::ResourceId& rid) {
                                   return compare_name(rid, o.resource) > 0;
                                 });
      if (it != st.owned.end() && compare_name(r.rid, it->resource) == 0) declared[it - st.owned.begin()] = 1;
    }
    for (std::size_t k = 0; k < st.owned.size(); ++k)
      if (!declared[k]) prune.push_back(Pruned{st.owned[k].resource, st.owned[k].order});
  }
  std::stable_sort(prune.begin(), prune.end(), [](const Pruned& a, const Pruned& b) {
    return a.order != b.order ? a.order > b.order : a.resource > b.resource;
  });
  for (std::size_t k = 0; k < prune.size(); ++k) {
    const std::string& name = prune[k].resource;
    auto not_attempted_rest = [&] {
      for (std::size_t j = k + 1; j < prune.size(); ++j)
        emit(ResourceOutcome{prune[j].resource, "not_attempted", {}, {}});
    };
    if (cancel.cancelled()) {
      result.reason = "cancelled";
      result.code = "cancelled";
      for (std::size_t j = k; j < prune.size(); ++j)
        emit(ResourceOutcome{prune[j].resource, "not_attempted", {}, {}});
      return finish_failed(decl.resources.size());
    }
    ResourceOutcome out{name, "", {}, {}};
    auto rid = sdk::ResourceId::parse(name);
    sdk::Provider* provider = rid ? providers_.find(rid->type) : nullptr;
    Step step;
    if (!provider) {
      step.ok = false;
      step.outcome = "failed";
      step.reason = rid ? "cannot prune: no provider for resource type '" + rid->type + "' is loaded"
                        : "cannot prune: " + rid.error().message;
      step.code = sdk::to_string(rid ? ErrorCode::FailedPrecondition : rid.error().code);
    } else if (dry_run) {
      step.outcome = "would_remove";
    } else {
      step = remove_verified(*provider, *rid, cancel);
    }
    if (!step.ok && cancel.cancelled()) step.outcome = "cancelled";
    out.outcome = step.outcome;
    out.reason = step.reason;
    out.code = step.code;
    if (step.ok && !dry_run) {
      forget_owned(st.owned, name);
      save_change(name);
      if (!save_error.empty()) {
        out.outcome = "failed";
        out.reason = save_error;
        out.code = save_code;
        step.ok = false;
      }
    }
    log_outcome(out);
    if (!step.ok) {
      result.failed_resource = name;
      result.reason = out.reason;
      result.code = out.code;
      emit(std::move(out));
      not_attempted_rest();
      return finish_failed(decl.resources.size());
    }
    emit(std::move(out));
  }
  prune = {};

  // Totals for the last log line: what `resources` kept and what it only counted.
  auto totals = [&](const std::vector<OwnedResource>& owned) {
    std::size_t changed = result.not_kept.total() - result.not_kept.unchanged;
    for (const auto& o : result.resources) changed += o.outcome != "unchanged";
    return " resources=" + std::to_string(result.resources.size() + result.not_kept.total()) +
           " changed=" + std::to_string(changed) + " owned=" + std::to_string(owned.size());
  };
  if (dry_run) {
    result.outcome = "planned";
    list_owned(state_.state().owned);
    log_.info(ctx + " outcome=planned resources=" +
              std::to_string(result.resources.size() + result.not_kept.total()));
    return result;
  }

  // 3. Commit: the applied text first (staged in step 0: renamed into place, or already there),
  //    then state.json (the commit point). An apply that changed nothing (the same declaration
  //    applied again, every resource unchanged, nothing pruned) and finds both files already
  //    saying so writes neither: a no-op of 20,000 files rewrote a 5 MB snapshot and the 2.8 MB
  //    text with four fsyncs (docs/benchmarks.md, issue 16).
  const bool nothing_to_commit = !touched && st.applied_revision == decl.revision &&
                                 st.applied_digest == decl.digest && st.last_revision == decl.revision &&
                                 st.last_outcome == "applied" && state_.snapshot_current();
  if (nothing_to_commit && applied_current) {
    result.outcome = "applied";
    list_owned(st.owned);
    log_.info(ctx + " outcome=applied" + totals(st.owned) + " (state files already current: not rewritten)");
    return result;
  }
  st.applied_revision = decl.revision;
  st.applied_digest = decl.digest;
  st.last_revision = decl.revision;
  st.last_outcome = "applied";
  if (auto ok = state_.commit_applied_declaration(); !ok) {
    result.reason = "saving the applied declaration: " + ok.error().describe();
    result.code = sdk::to_string(ok.error().code);
    return finish_failed(decl.resources.size());
  }
  save_now();
  if (!save_error.empty()) {
    result.reason = save_error;
    result.code = save_code;
    return finish_failed(decl.resources.size());
  }
  result.outcome = "applied";
  list_owned(st.owned);
  log_.info(ctx + " outcome=applied" + totals(st.owned));
  return result;
}

std::vector<DriftItem> Engine::scan_drift(const sdk::CancelToken& cancel) {
  std::vector<DriftItem> items;
  // Apply order, so what others require is repaired first; pointers, not a copy of every owned
  // property (nothing changes the ownership record during a scan).
  std::vector<const OwnedResource*> by_order;
  by_order.reserve(state_.state().owned.size());
  for (const auto& o : state_.state().owned) by_order.push_back(&o);
  std::stable_sort(by_order.begin(), by_order.end(), [](const OwnedResource* a, const OwnedResource* b) {
    return a->order < b->order;
  });
  const std::string ctx = "drift applied_revision=" + std::to_string(state_.state().applied_revision);
  auto report = [&](DriftItem item) {
    log_.log(item.action == "repaired" ? sdk::LogLevel::Warn : sdk::LogLevel::Error,
             ctx + " resource=" + item.resource + " found=" + quoted(item.found) +
                 " action=" + quoted(item.action));
    items.push_back(std::move(item));
  };
  for (const OwnedResource* op : by_order) {
    const OwnedResource& o = *op;
    if (cancel.cancelled()) break;
    auto rid = sdk::ResourceId::parse(o.resource);
    sdk::Provider* provider = rid ? providers_.find(rid->type) : nullptr;
    if (!provider) {
      report(DriftItem{o.resource, "not checked: no provider for its type is loaded",
                       "repair failed: no provider"});
      continue;
    }
    sdk::Resource want{*rid, o.properties, {}};
    auto observed = provider->read(want.rid);
    if (!observed) {
      report(DriftItem{o.resource, "not checked: read: " + observed.error().describe(),
                       "repair failed: cannot read"});
      continue;
    }
    auto plan = provider->plan(want, *observed);
    if (!plan) {
      report(DriftItem{o.resource, "not checked: plan: " + plan.error().describe(),
                       "repair failed: cannot plan"});
      continue;
    }
    if (plan->empty()) continue;
    DriftItem item;
    item.resource = o.resource;
    if (!observed->has_value()) {
      item.found = "missing";
    } else if (plan->changes.empty()) {
      item.found = std::string("differs (provider plans '") + sdk::to_string(plan->action) + "')";
    } else {
      for (const auto& c : plan->changes) item.found += (item.found.empty() ? "" : ", ") + c.path;
      item.found += plan->changes.size() == 1 ? " differs" : " differ";
    }
    auto applied = provider->apply(*plan, cancel);
    if (!applied) {
      item.action = "repair failed: " + applied.error().describe();
    } else if (auto back = provider->read(want.rid); !back) {
      item.action = "repair failed: read-back: " + back.error().describe();
    } else if (auto again = provider->plan(want, *back); !again) {
      item.action = "repair failed: read-back plan: " + again.error().describe();
    } else if (!again->empty()) {
      item.action = "repair failed: read-back does not match: " + describe_changes(*again, provider->schema());
    } else {
      item.action = "repaired";
    }
    report(std::move(item));
  }
  return items;
}

std::vector<ResourceOutcome> Engine::remove_orphans(const std::vector<std::string>& orphans,
                                                    const Declaration& keep,
                                                    const sdk::CancelToken& cancel) {
  return remove_orphans(orphans, std::vector<std::string>(orphans.size()), keep, cancel);
}

std::vector<ResourceOutcome> Engine::remove_orphans(const std::vector<std::string>& orphans,
                                                    const std::vector<std::string>& digests,
                                                    const Declaration& keep,
                                                    const sdk::CancelToken& cancel) {
  std::unordered_set<std::string> kept;
  kept.reserve(keep.resources.size() * 2);
  for (const auto& r : keep.resources) kept.insert(r.rid.str());
  std::vector<std::pair<std::string, std::string>> todo;
  std::unordered_set<std::string> seen;
  // The recovery copy carries no order; remove in reverse of the list given.
  for (std::size_t k = orphans.size(); k-- > 0;)
    if (!kept.count(orphans[k]) && seen.insert(orphans[k]).second)
      todo.emplace_back(orphans[k], k < digests.size() ? digests[k] : std::string());

  std::vector<ResourceOutcome> out;
  HostState& st = state_.mutable_state();  // changed in place: one ownership set
  bool cancelled = false;
  for (const auto& [name, expected] : todo) {
    ResourceOutcome o{name, "", {}, {}};
    if (cancelled || cancel.cancelled()) {
      cancelled = true;
      o.outcome = "not_attempted";
      o.reason = "cancelled";
      out.push_back(std::move(o));
      continue;
    }
    auto rid = sdk::ResourceId::parse(name);
    sdk::Provider* provider = rid ? providers_.find(rid->type) : nullptr;
    if (!rid) {
      o.outcome = "failed";
      o.reason = rid.error().message;
      o.code = sdk::to_string(rid.error().code);
    } else if (!provider) {
      o.outcome = "failed";
      o.reason = "cannot remove: no provider for resource type '" + rid->type + "' is loaded";
      o.code = sdk::to_string(ErrorCode::FailedPrecondition);
    } else if (auto now = provider->read(*rid); !now) {
      o.outcome = "failed";
      o.reason = "cannot check before removal: read: " + now.error().describe();
      o.code = sdk::to_string(now.error().code);
    } else if (!now->has_value()) {
      o.outcome = "unchanged";
      o.reason = "already absent";
    } else if (expected.empty()) {
      // Never delete what cannot be shown to be ours.
      o.outcome = "kept";
      o.reason = "not removed: the recovery copy has no digest of what the mesh wrote";
    } else if (state_digest((*now)->properties) != expected) {
      o.outcome = "kept";
      o.reason = "not removed: it is not what the mesh wrote (changed since, or never the mesh's)";
    } else {
      Step s = remove_verified(*provider, *rid, cancel);
      o.outcome = s.outcome;
      o.reason = s.reason;
      o.code = s.code;
      if (s.ok && forget_owned(st.owned, name)) {
        if (auto ok = state_.save_change(st, name); !ok) {
          o.outcome = "failed";
          o.reason = "removed, but saving state failed: " + ok.error().describe();
          o.code = sdk::to_string(ok.error().code);
        }
      }
    }
    std::string line = "orphan resource=" + name + " outcome=" + o.outcome;
    if (!o.code.empty()) line += " code=" + o.code;
    if (!o.reason.empty()) line += " reason=" + quoted(o.reason);
    log_.log(o.outcome == "removed" || o.outcome == "unchanged" ? sdk::LogLevel::Info
             : o.outcome == "kept"                              ? sdk::LogLevel::Warn
                                                                : sdk::LogLevel::Error,
             line);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace mesh::engine
