// Nox Mesh SDK testing — the provider conformance suite (GoogleTest, header-only).
//
// Every provider runs these checks, in the Nox Mesh tree and out of it: the engine relies on them
// when it reports a resource as applied only after reading it back.
//
//   * validate/read/plan have no side effects: the backend (through your `observe` hook, when
//     given) and `read()` are the same before and after;
//   * `read` after `apply` matches the declaration: plan(want, read()) is empty, and so is
//     plan(want, <the State apply returned>);
//   * `plan` after `apply` is empty, also from a freshly created provider (no cached state);
//   * `remove` twice succeeds; then, for a provider whose removal capability is Delete (the
//     default), read() returns nullopt and the backend is as before the test; for Release, read()
//     succeeds, what RemoveResponse::left names reads back (plan(left, read()) is empty), and, if
//     you say release restores the original (`release_restores_original`), the backend and read()
//     are as before the test;
//   * `ensure: absent` (when the schema has `ensure`) plans Remove and removes;
//   * every bad resource you list is refused with InvalidArgument and the path you expect, either
//     by `validate_against(schema, properties, "properties")` or by `provider.validate()`;
//   * the schema (and the config schema) describes every attribute.
//
// How to use it (link NoxMesh::sdk_testing and GTest::gtest_main):
//
//   #include <mesh/sdk/testing/conformance.h>
//   namespace mt = mesh::sdk::testing;
//
//   // Called once when tests are registered (to learn the case names) and once per test, so
//   // every test gets a fresh backend: make a temporary directory here, not at file scope.
//   mt::ProviderConformance my_conformance() {
//     auto dir = std::make_shared<MyTempDir>();        // removed when the test ends
//     mt::ProviderConformance c;
//     c.make_provider = [dir](const mesh::sdk::HostContext& host) {
//       auto p = std::make_unique<MyProvider>(host);   // host outlives the provider
//       mesh::sdk::Value config = mesh::sdk::Value::object();
//       config.set("root", dir->path());
//       if (!p->configure(config)) return std::unique_ptr<mesh::sdk::Provider>();
//       return std::unique_ptr<mesh::sdk::Provider>(std::move(p));
//     };
//     c.samples = {
//         {"create", mt::make_resource("thing", dir->path() + "/a", {{"size", "1"}})},
//         // update: `before` is applied first, then the suite moves to `want`
//         {"update", mt::make_resource("thing", dir->path() + "/b", {{"size", "2"}}),
//                    mt::make_resource("thing", dir->path() + "/b", {{"size", "1"}})},
//     };
//     c.bad_resources = {
//         {"relative_id", mt::make_resource("thing", "a", {}), "id"},
//         {"bad_size", mt::make_resource("thing", dir->path() + "/c", {{"size", "x"}}),
//          "properties.size"},
//     };
//     c.observe = [](const mesh::sdk::ResourceId& rid) { return fingerprint_of(rid.id); };
//     c.keep_alive = dir;
//     return c;
//   }
//   MESH_INSTANTIATE_PROVIDER_CONFORMANCE(MyProvider, my_conformance);
//
// That defines three value-parameterised suites, named after the prefix:
//   Conformance/MyProviderConformanceTest.<Check>/<sample name>    (five checks per sample)
//   Conformance/MyProviderConformanceBadInputTest.RejectedWithPath/<bad resource name>
//   Conformance/MyProviderConformanceSchemaTest.EveryAttributeDescribed/schema
// Use the macro once per provider, at namespace scope, in one source file of a test binary.
// Names are made of [A-Za-z0-9_] (other characters become '_'), and duplicates get a suffix.
//
// What the suite expects of the backend: every sample's resource is absent when a test starts
// (the suite fails the test otherwise, rather than touch something it did not create); at the end
// of each test the suite removes every sample resource it touched (best effort), then destroys the
// provider, then drops `keep_alive`. `observe` must answer for any id, even an invalid one, and
// must return the same string whenever the resource is absent.
//
// Partial instantiation, for resources that exist before management (a sysctl key, a kernel
// module, a unit file a package installed): when the provider's capabilities say
// `exists_before_management` (or you set `ProviderConformance::exists_before_management`), a
// sample's resource must EXIST when a test starts, and what it was then (read() and `observe`) is
// the baseline instead of "absent". The checks that need a missing resource are skipped: the
// "resource absent" round of PlanHasNoSideEffects, the Create expectation of
// ReadAfterApplyMatches (a sample whose `want` the baseline already satisfies only checks the
// read-back), the "plans Create after removal" part of RemoveTwiceSucceeds, and all of
// EnsureAbsentRemoves. Such providers usually declare Removal::Release; give their samples values
// that differ from the baseline (or a `before`), and set `release_restores_original` when remove()
// puts the resource back as it was before management:
//
//   c.samples = {{"set", mt::make_resource("sysctl", "net.ipv4.ip_forward", {{"value", "1"}}),
//                 mt::make_resource("sysctl", "net.ipv4.ip_forward", {{"value", "0"}})}};
//   c.release_restores_original = true;   // remove() writes back the value read before apply
//
// Thread safety: everything runs on the gtest thread, and the provider is only called from it,
// as the engine calls a provider from one thread at a time. The factory is also called once while
// gtest registers tests (inside InitGoogleTest, not during static initialisation).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/provider.h"
#include "mesh/sdk/resource.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk::testing {

/// One valid declaration the suite drives through its checks.
struct ConformanceSample {
  /// Test-name suffix ("create", "update_mode").
  std::string name;
  /// The declared resource (properties as written; the suite fills in schema defaults, as the
  /// engine does). May declare `ensure: absent`.
  Resource want;
  /// When set, applied (and read back) before the suite moves to `want`: the update case. Must
  /// name the same resource as `want` and must not already satisfy `want`.
  std::optional<Resource> before = std::nullopt;
};

/// One declaration that must be refused.
struct ConformanceBadResource {
  /// Test-name suffix ("relative_path").
  std::string name;
  /// The declared resource (properties as written).
  Resource resource;
  /// The Error::path the refusal must carry ("id", "properties.mode").
  std::string expected_path;
};

/// What a provider's test fills in. Built afresh for every test by the function handed to
/// MESH_INSTANTIATE_PROVIDER_CONFORMANCE (and once more when tests are registered).
struct ProviderConformance {
  /// Makes the provider, already configured. `host` is owned by the suite and outlives the
  /// provider; its logger records lines and prints them when a test fails. Return nullptr on
  /// failure (add a gtest failure saying why). Called once per test, twice for the checks that
  /// need a second, fresh instance.
  std::function<std::unique_ptr<Provider>(const HostContext& host)> make_provider;
  /// Valid declarations; each gets every per-sample check.
  std::vector<ConformanceSample> samples;
  /// Invalid declarations, each with the error path expected.
  std::vector<ConformanceBadResource> bad_resources;
  /// Optional: a fingerprint of the real backend for a resource id (e.g. the lstat fields, the
  /// content digest and the parent directory's listing), read without going through the
  /// provider. When set, "no side effects" is checked against it as well as against read().
  std::function<std::string(const ResourceId& rid)> observe;
  /// Optional: anything that must live until the test ends (a temporary directory, a server).
  /// Dropped after the provider is destroyed.
  std::shared_ptr<void> keep_alive;
  /// Optional: overrides the provider's ProviderCapabilities::exists_before_management (see
  /// "Partial instantiation" above). nullopt: what the provider declares.
  std::optional<bool> exists_before_management = std::nullopt;
  /// Release-mode providers only: remove() restores the resource to what it was before the test
  /// (the baseline), so read() and `observe` after remove must equal the baseline. Default false:
  /// only read() succeeding and RemoveResponse::left are checked.
  bool release_restores_original = false;
};

/// The function handed to MESH_INSTANTIATE_PROVIDER_CONFORMANCE.
using ProviderConformanceFactory = std::function<ProviderConformance()>;

/// Builds a Resource: `make_resource("file", "/tmp/x", {{"content", "hi"}, {"mode", "0644"}})`.
inline Resource make_resource(std::string type, std::string id,
                              std::initializer_list<std::pair<std::string, Value>> properties) {
  Resource r;
  r.rid = ResourceId{std::move(type), std::move(id)};
  for (const auto& [k, v] : properties) r.properties.set(k, v);
  return r;
}

/// A thread-safe logger that keeps every line, so a failing test can show what the provider said.
class RecordingLogger final : public Logger {
 public:
  void log(LogLevel level, std::string_view message) noexcept override {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(std::string(level_name(level)) + " " + std::string(message));
    } catch (...) {
      // Out of memory while logging: drop the line rather than throw across noexcept.
    }
  }
  bool enabled(LogLevel) const noexcept override { return true; }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  static const char* level_name(LogLevel level) noexcept {
    switch (level) {
      case LogLevel::Trace: return "trace";
      case LogLevel::Debug: return "debug";
      case LogLevel::Info: return "info";
      case LogLevel::Warn: return "warn";
      case LogLevel::Error: return "error";
    }
    return "?";
  }
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

/// The parameter of every conformance test: which factory, which case.
struct ConformanceParam {
  ProviderConformanceFactory factory;
  /// Index into samples or bad_resources; npos for a placeholder when the list was empty.
  std::size_t index = 0;
  /// Test-name suffix (already sanitised and unique).
  std::string name;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
};

/// gtest prints parameters of failing tests; the name is what a reader needs.
inline void PrintTo(const ConformanceParam& param, std::ostream* os) { *os << param.name; }

/// Names parameterised tests after ConformanceParam::name.
struct ConformanceParamName {
  std::string operator()(const ::testing::TestParamInfo<ConformanceParam>& info) const {
    return info.param.name;
  }
};

namespace detail {

inline std::string describe(const Error& e) {
  return std::string(to_string(e.code)) + ": " + e.describe();
}

inline std::string describe(const std::optional<State>& s) {
  return s ? s->properties.to_json() : std::string("nullopt (absent)");
}

inline std::string describe(const Plan& p) {
  std::string out = std::string("action=") + to_string(p.action);
  for (const auto& c : p.changes)
    out += " [" + c.path + ": " + c.observed.to_json() + " -> " + c.declared.to_json() + "]";
  return out;
}

inline bool same_state(const std::optional<State>& a, const std::optional<State>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || a->properties == b->properties;
}

// gtest accepts only [A-Za-z0-9_] in parameter names and aborts on duplicates; authors should not
// have to know that.
inline std::string test_name(std::string_view wanted, std::size_t index,
                             std::set<std::string>& used) {
  std::string name;
  for (char c : wanted) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name.empty()) name = "case_" + std::to_string(index);
  if (!used.insert(name).second) {
    name += "_" + std::to_string(index);
    used.insert(name);
  }
  return name;
}

}  // namespace detail

/// Parameters for the per-sample suite: one per sample, or a placeholder that fails when the
/// list is empty (a provider with no samples has tested nothing).
inline std::vector<ConformanceParam> sample_params(ProviderConformanceFactory factory) {
  std::vector<ConformanceParam> out;
  std::set<std::string> used;
  const ProviderConformance c = factory();
  for (std::size_t i = 0; i < c.samples.size(); ++i)
    out.push_back({factory, i, detail::test_name(c.samples[i].name, i, used)});
  if (out.empty()) out.push_back({factory, ConformanceParam::npos, "no_samples"});
  return out;
}

/// Parameters for the bad-input suite: one per bad resource, or a placeholder that skips.
inline std::vector<ConformanceParam> bad_input_params(ProviderConformanceFactory factory) {
  std::vector<ConformanceParam> out;
  std::set<std::string> used;
  const ProviderConformance c = factory();
  for (std::size_t i = 0; i < c.bad_resources.size(); ++i)
    out.push_back({factory, i, detail::test_name(c.bad_resources[i].name, i, used)});
  if (out.empty()) out.push_back({factory, ConformanceParam::npos, "no_bad_resources"});
  return out;
}

/// Parameters for the schema suite: exactly one.
inline std::vector<ConformanceParam> schema_params(ProviderConformanceFactory factory) {
  return {ConformanceParam{std::move(factory), 0, "schema"}};
}

/// Base fixture: owns the host context, the provider and the author's keep-alive. The TEST_P
/// bodies generated by MESH_INSTANTIATE_PROVIDER_CONFORMANCE call its check_* methods.
class ProviderConformanceFixture : public ::testing::TestWithParam<ConformanceParam> {
 protected:
  void SetUp() override {
    conformance_ = GetParam().factory();
    host_.logger = &logger_;
    host_.role = "tool";
    ASSERT_TRUE(conformance_.make_provider) << "ProviderConformance::make_provider is not set";
    provider_ = conformance_.make_provider(host_);
    ASSERT_NE(provider_, nullptr) << "make_provider returned nullptr";
    auto caps = provider_->capabilities();
    ASSERT_TRUE(caps) << "capabilities() failed: " << detail::describe(caps.error());
    caps_ = *caps;
    preexisting_ = conformance_.exists_before_management.value_or(caps_.exists_before_management);
  }

  /// Whether sample resources exist before the test (partial instantiation).
  bool preexisting() const { return preexisting_; }
  bool releases() const { return caps_.removal == Removal::Release; }

  void TearDown() override {
    // Best effort: leave the backend as we found it even when a check failed half-way.
    if (provider_) {
      CancelToken cancel;
      for (const auto& rid : touched_) (void)provider_->remove(rid, cancel);
    }
    if (HasFailure()) {
      for (const auto& line : logger_.lines()) std::cerr << "  provider log: " << line << "\n";
    }
    provider_.reset();
    conformance_.keep_alive.reset();
  }

  Provider& provider() { return *provider_; }
  const ProviderConformance& conformance() const { return conformance_; }

  /// The backend fingerprint, or "" when the author gave no observe hook.
  std::string world(const ResourceId& rid) {
    return conformance_.observe ? conformance_.observe(rid) : std::string();
  }

  /// What the engine does before handing a declaration to a provider: schema check, defaults,
  /// provider validate. Samples must pass all three.
  void prepare(const Resource& declared, Resource& out) {
    auto checked = validate_against(provider_->schema(), declared.properties, "properties");
    ASSERT_TRUE(checked) << declared.rid.str()
                         << " does not match the schema: " << detail::describe(checked.error());
    out = declared;
    out.properties = apply_defaults(provider_->schema(), declared.properties);
    auto valid = provider_->validate(out);
    ASSERT_TRUE(valid) << "validate(" << declared.rid.str()
                       << ") refused a sample: " << detail::describe(valid.error());
  }

  void read_state(Provider& p, const ResourceId& rid, std::optional<State>& out) {
    auto r = p.read(rid);
    ASSERT_TRUE(r) << "read(" << rid.str() << ") failed: " << detail::describe(r.error());
    out = std::move(*r);
  }

  void make_plan(const Resource& want, const std::optional<State>& observed, Plan& out) {
    auto r = provider_->plan(want, observed);
    ASSERT_TRUE(r) << "plan(" << want.rid.str() << ") failed: " << detail::describe(r.error());
    out = std::move(*r);
    EXPECT_EQ(out.rid.str(), want.rid.str()) << "the plan names another resource";
    EXPECT_EQ(out.desired.rid.str(), want.rid.str()) << "plan.desired names another resource";
    if (out.action == PlanAction::None) {
      EXPECT_TRUE(out.changes.empty())
          << "a plan with action none has changes: " << detail::describe(out);
    }
    if (out.action == PlanAction::Update) {
      EXPECT_FALSE(out.changes.empty()) << "an update plan must say what changes";
    }
    for (const auto& c : out.changes) {
      EXPECT_EQ(c.path.rfind("properties.", 0), 0u)
          << "change path '" << c.path << "' does not start with 'properties.'";
    }
  }

  void apply_plan(const Plan& plan, State& out) {
    CancelToken cancel;
    auto r = provider_->apply(plan, cancel);
    ASSERT_TRUE(r) << "apply(" << plan.rid.str() << ", " << detail::describe(plan)
                   << ") failed: " << detail::describe(r.error());
    out = std::move(*r);
  }

  /// read → plan → apply → read → plan, which must be empty: one engine round.
  void converge(const Resource& want) {
    touched_.insert(want.rid);
    std::optional<State> observed;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want.rid, observed));
    Plan plan;
    ASSERT_NO_FATAL_FAILURE(make_plan(want, observed, plan));
    if (!plan.empty()) {
      State applied;
      ASSERT_NO_FATAL_FAILURE(apply_plan(plan, applied));
    }
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want.rid, observed));
    ASSERT_NO_FATAL_FAILURE(make_plan(want, observed, plan));
    ASSERT_TRUE(plan.empty()) << "the read-back plan for " << want.rid.str()
                              << " is not empty: " << detail::describe(plan)
                              << "; read back: " << detail::describe(observed);
  }

  static bool declares_absent(const Resource& r) {
    return r.properties.get_string("ensure") == "absent";
  }

  // --- the per-sample checks ----------------------------------------------------------------

  /// Loads the sample, checks the resource is absent (or, for resources that exist before
  /// management, present), and records that baseline.
  void start_sample() {
    ASSERT_NE(GetParam().index, ConformanceParam::npos)
        << "ProviderConformance::samples is empty: list at least a create and an update case";
    const ConformanceSample& s = conformance_.samples.at(GetParam().index);
    ASSERT_NO_FATAL_FAILURE(prepare(s.want, want_));
    if (s.before) {
      ASSERT_EQ(s.before->rid.str(), s.want.rid.str())
          << "`before` must name the same resource as `want`";
      Resource before;
      ASSERT_NO_FATAL_FAILURE(prepare(*s.before, before));
      before_ = before;
    }
    std::optional<State> observed;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want_.rid, observed));
    if (preexisting()) {
      ASSERT_TRUE(observed.has_value())
          << want_.rid.str() << " does not exist before the test, yet resources of this type exist "
          << "before management (exists_before_management)";
    } else {
      ASSERT_FALSE(observed.has_value())
          << want_.rid.str() << " exists before the test (" << detail::describe(observed)
          << "); the suite only works on resources it creates";
    }
    baseline_ = observed;
    absent_world_ = world(want_.rid);
  }

  void establish_before() {
    if (before_) {
      ASSERT_NO_FATAL_FAILURE(converge(*before_));
    }
  }

  /// validate, read and plan must leave the backend and the observed state as they were.
  void expect_no_side_effects(const Resource& want, const char* when) {
    SCOPED_TRACE(when);
    const std::string world_before = world(want.rid);
    std::optional<State> before;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want.rid, before));
    auto valid = provider_->validate(want);
    ASSERT_TRUE(valid) << detail::describe(valid.error());
    Plan first;
    ASSERT_NO_FATAL_FAILURE(make_plan(want, before, first));
    Plan second;  // also without an observation: plan must not go and look for itself
    ASSERT_NO_FATAL_FAILURE(make_plan(want, std::nullopt, second));
    Plan again;
    ASSERT_NO_FATAL_FAILURE(make_plan(want, before, again));
    EXPECT_EQ(detail::describe(first), detail::describe(again)) << "plan is not deterministic";
    EXPECT_EQ(world(want.rid), world_before) << "validate/read/plan changed the backend";
    std::optional<State> after;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want.rid, after));
    EXPECT_TRUE(detail::same_state(before, after))
        << "validate/read/plan changed what read() sees: " << detail::describe(before) << " -> "
        << detail::describe(after);
  }

  void check_plan_has_no_side_effects() {
    ASSERT_NO_FATAL_FAILURE(start_sample());
    touched_.insert(want_.rid);
    ASSERT_NO_FATAL_FAILURE(
        expect_no_side_effects(want_, preexisting() ? "before management" : "resource absent"));
    if (before_) {
      ASSERT_NO_FATAL_FAILURE(establish_before());
      ASSERT_NO_FATAL_FAILURE(expect_no_side_effects(want_, "after applying `before`"));
    }
    ASSERT_NO_FATAL_FAILURE(converge(want_));
    ASSERT_NO_FATAL_FAILURE(expect_no_side_effects(want_, "after applying `want`"));
  }

  void check_read_after_apply_matches() {
    ASSERT_NO_FATAL_FAILURE(start_sample());
    touched_.insert(want_.rid);
    ASSERT_NO_FATAL_FAILURE(establish_before());
    std::optional<State> observed;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want_.rid, observed));
    Plan plan;
    ASSERT_NO_FATAL_FAILURE(make_plan(want_, observed, plan));
    const bool absent = declares_absent(want_);
    if (absent) {
      EXPECT_EQ(plan.action, observed ? PlanAction::Remove : PlanAction::None)
          << detail::describe(plan);
    } else if (!observed) {
      EXPECT_EQ(plan.action, PlanAction::Create) << detail::describe(plan);
    } else if (preexisting() && !before_) {
      // The baseline may already be what the sample declares; then only the read-back is checked.
    } else {
      EXPECT_EQ(plan.action, PlanAction::Update)
          << "`before` already satisfies `want`, so this sample tests no update: "
          << detail::describe(plan);
    }
    if (plan.empty()) return;
    State applied;
    ASSERT_NO_FATAL_FAILURE(apply_plan(plan, applied));
    std::optional<State> read_back;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want_.rid, read_back));
    EXPECT_EQ(read_back.has_value(), !absent) << detail::describe(read_back);
    Plan after;
    ASSERT_NO_FATAL_FAILURE(make_plan(want_, read_back, after));
    EXPECT_TRUE(after.empty()) << "read() after apply does not match the declaration: "
                               << detail::describe(after)
                               << "; read back: " << detail::describe(read_back);
    if (!absent) {
      Plan from_applied;
      ASSERT_NO_FATAL_FAILURE(make_plan(want_, applied, from_applied));
      EXPECT_TRUE(from_applied.empty())
          << "the State apply returned does not match the declaration: "
          << detail::describe(from_applied) << "; returned: " << applied.properties.to_json();
    }
  }

  void check_plan_after_apply_is_empty() {
    ASSERT_NO_FATAL_FAILURE(start_sample());
    ASSERT_NO_FATAL_FAILURE(establish_before());
    ASSERT_NO_FATAL_FAILURE(converge(want_));
    const std::string converged_world = world(want_.rid);
    // A new instance has no cache: the result must come from the backend.
    std::unique_ptr<Provider> fresh = conformance_.make_provider(host_);
    ASSERT_NE(fresh, nullptr) << "make_provider returned nullptr the second time";
    std::optional<State> observed;
    ASSERT_NO_FATAL_FAILURE(read_state(*fresh, want_.rid, observed));
    auto plan = fresh->plan(want_, observed);
    ASSERT_TRUE(plan) << detail::describe(plan.error());
    EXPECT_TRUE(plan->empty()) << "a fresh provider plans changes after apply: "
                               << detail::describe(*plan);
    // A second round on the same instance is empty too (and changes nothing).
    ASSERT_NO_FATAL_FAILURE(converge(want_));
    EXPECT_EQ(world(want_.rid), converged_world) << "a second, empty round changed the backend";
  }

  void check_remove_twice_succeeds() {
    ASSERT_NO_FATAL_FAILURE(start_sample());
    ASSERT_NO_FATAL_FAILURE(establish_before());
    ASSERT_NO_FATAL_FAILURE(converge(want_));
    CancelToken cancel;
    RemoveRequest req;
    req.rid = want_.rid;
    req.cancel = &cancel;
    RemoveResponse first;
    auto removed = provider_->remove(req, first);
    ASSERT_TRUE(removed) << "remove failed: " << detail::describe(removed.error());
    RemoveResponse second;
    removed = provider_->remove(req, second);
    ASSERT_TRUE(removed) << "remove of an already removed resource failed: "
                         << detail::describe(removed.error());
    std::optional<State> observed;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, want_.rid, observed));
    if (releases()) {
      // Released: the engine's read-back (sdk/provider.h) checks what the provider says it left.
      if (first.left) {
        Resource left{want_.rid, *first.left, {}};
        Plan plan;
        ASSERT_NO_FATAL_FAILURE(make_plan(left, observed, plan));
        EXPECT_TRUE(plan.empty()) << "remove() says it left " << first.left->to_json()
                                  << ", but: " << detail::describe(plan);
      }
      if (conformance_.release_restores_original) {
        EXPECT_TRUE(detail::same_state(observed, baseline_))
            << "not restored: " << detail::describe(baseline_) << " -> " << detail::describe(observed);
        EXPECT_EQ(world(want_.rid), absent_world_) << "the backend is not as before the test";
      }
      return;
    }
    EXPECT_FALSE(observed.has_value())
        << "still there after remove (a provider whose resources stay declares Removal::Release): "
        << detail::describe(observed);
    EXPECT_EQ(world(want_.rid), absent_world_) << "the backend is not as before the test";
    if (!declares_absent(want_) && !preexisting()) {
      Plan plan;
      ASSERT_NO_FATAL_FAILURE(make_plan(want_, observed, plan));
      EXPECT_EQ(plan.action, PlanAction::Create) << detail::describe(plan);
    }
  }

  void check_ensure_absent_removes() {
    const Attribute* ensure = provider_->schema().find("ensure");
    if (!ensure) GTEST_SKIP() << "the schema has no `ensure` attribute";
    if (preexisting()) GTEST_SKIP() << "resources of this type exist before management";
    ASSERT_NO_FATAL_FAILURE(start_sample());
    ASSERT_NO_FATAL_FAILURE(establish_before());
    ASSERT_NO_FATAL_FAILURE(converge(want_));
    Resource gone_declared = conformance_.samples.at(GetParam().index).want;
    gone_declared.properties.set("ensure", "absent");
    Resource gone;
    ASSERT_NO_FATAL_FAILURE(prepare(gone_declared, gone));
    std::optional<State> observed;
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, gone.rid, observed));
    Plan plan;
    ASSERT_NO_FATAL_FAILURE(make_plan(gone, observed, plan));
    EXPECT_EQ(plan.action, observed ? PlanAction::Remove : PlanAction::None)
        << detail::describe(plan);
    if (!plan.empty()) {
      State applied;
      ASSERT_NO_FATAL_FAILURE(apply_plan(plan, applied));
    }
    ASSERT_NO_FATAL_FAILURE(read_state(*provider_, gone.rid, observed));
    EXPECT_FALSE(observed.has_value()) << "ensure=absent left " << detail::describe(observed);
    ASSERT_NO_FATAL_FAILURE(make_plan(gone, observed, plan));
    EXPECT_TRUE(plan.empty()) << "absent and declared absent, yet: " << detail::describe(plan);
    EXPECT_EQ(world(gone.rid), absent_world_) << "the backend is not as before the test";
  }

  // --- bad input ----------------------------------------------------------------------------

  void check_bad_input() {
    if (GetParam().index == ConformanceParam::npos)
      GTEST_SKIP() << "ProviderConformance::bad_resources is empty";
    const ConformanceBadResource& bad = conformance_.bad_resources.at(GetParam().index);
    const std::string world_before = world(bad.resource.rid);
    Error error;
    if (auto checked = validate_against(provider_->schema(), bad.resource.properties, "properties");
        !checked) {
      error = checked.error();
    } else {
      Resource r = bad.resource;
      r.properties = apply_defaults(provider_->schema(), r.properties);
      auto valid = provider_->validate(r);
      ASSERT_FALSE(valid) << "accepted: " << bad.resource.rid.str() << " "
                          << bad.resource.properties.to_json();
      error = valid.error();
    }
    EXPECT_EQ(to_string(error.code), std::string(to_string(ErrorCode::InvalidArgument)))
        << detail::describe(error);
    EXPECT_EQ(error.path, bad.expected_path) << detail::describe(error);
    EXPECT_FALSE(error.message.empty()) << "the refusal does not say why";
    EXPECT_EQ(world(bad.resource.rid), world_before) << "validating bad input changed the backend";
  }

  // --- schema -------------------------------------------------------------------------------

  static void expect_described(const Schema& schema, const char* which) {
    SCOPED_TRACE(which);
    std::set<std::string> names;
    for (const auto& a : schema.attributes) {
      EXPECT_FALSE(a.name.empty()) << "an attribute has no name";
      EXPECT_TRUE(names.insert(a.name).second) << "attribute '" << a.name << "' appears twice";
      EXPECT_FALSE(a.description.empty()) << "attribute '" << a.name << "' has no description";
      if (!a.allowed.empty()) {
        EXPECT_EQ(a.type, ValueType::String)
            << "'" << a.name << "' lists allowed values but is " << to_string(a.type);
      }
      if (a.default_value) {
        Schema one{schema.name, schema.description, {a}};
        Value probe = Value::object();
        probe.set(a.name, *a.default_value);
        auto ok = validate_against(one, probe, "");
        EXPECT_TRUE(ok) << "the default of '" << a.name
                        << "' does not fit its own attribute: " << detail::describe(ok.error());
      }
    }
    for (const auto& group : schema.exclusive)
      for (const auto& name : group)
        EXPECT_NE(schema.find(name), nullptr)
            << "exclusive group names unknown attribute '" << name << "'";
  }

  void check_schema() {
    const Schema& schema = provider_->schema();
    EXPECT_FALSE(schema.name.empty()) << "schema.name must be the resource type";
    EXPECT_FALSE(schema.description.empty()) << "schema '" << schema.name << "' has no description";
    for (const auto& s : conformance_.samples)
      EXPECT_EQ(s.want.rid.type, schema.name) << "sample '" << s.name << "' has another type";
    expect_described(schema, "schema()");
    expect_described(provider_->config_schema(), "config_schema()");
    if (const Attribute* ensure = schema.find("ensure")) {
      EXPECT_EQ(ensure->type, ValueType::String);
      if (!ensure->allowed.empty()) {
        std::set<std::string> allowed(ensure->allowed.begin(), ensure->allowed.end());
        EXPECT_TRUE(allowed.count("present") && allowed.count("absent"))
            << "`ensure` must accept present and absent";
      }
    }
  }

  ProviderConformance conformance_;
  RecordingLogger logger_;
  HostContext host_;
  std::unique_ptr<Provider> provider_;
  Resource want_;
  std::optional<Resource> before_;
  std::string absent_world_;  ///< `observe` before the test: absent, or the baseline
  std::optional<State> baseline_;  ///< read() before the test (nullopt unless preexisting)
  std::set<ResourceId> touched_;
  ProviderCapabilities caps_;
  bool preexisting_ = false;
};

}  // namespace mesh::sdk::testing

/// Instantiates the conformance suite for one provider. `Prefix` is an identifier that names the
/// suites (`<Prefix>ConformanceTest`, `<Prefix>ConformanceBadInputTest`,
/// `<Prefix>ConformanceSchemaTest`); `factory_function` is anything callable as
/// `mesh::sdk::testing::ProviderConformance()`. Use at namespace scope, once per provider.
#define MESH_INSTANTIATE_PROVIDER_CONFORMANCE(Prefix, factory_function)                           \
  class Prefix##ConformanceTest : public ::mesh::sdk::testing::ProviderConformanceFixture {};     \
  TEST_P(Prefix##ConformanceTest, PlanHasNoSideEffects) { check_plan_has_no_side_effects(); }     \
  TEST_P(Prefix##ConformanceTest, ReadAfterApplyMatches) { check_read_after_apply_matches(); }    \
  TEST_P(Prefix##ConformanceTest, PlanAfterApplyIsEmpty) { check_plan_after_apply_is_empty(); }   \
  TEST_P(Prefix##ConformanceTest, RemoveTwiceSucceeds) { check_remove_twice_succeeds(); }         \
  TEST_P(Prefix##ConformanceTest, EnsureAbsentRemoves) { check_ensure_absent_removes(); }         \
  INSTANTIATE_TEST_SUITE_P(                                                                       \
      Conformance, Prefix##ConformanceTest,                                                       \
      ::testing::ValuesIn(::mesh::sdk::testing::sample_params(factory_function)),                 \
      ::mesh::sdk::testing::ConformanceParamName{});                                              \
  class Prefix##ConformanceBadInputTest                                                           \
      : public ::mesh::sdk::testing::ProviderConformanceFixture {};                               \
  TEST_P(Prefix##ConformanceBadInputTest, RejectedWithPath) { check_bad_input(); }                \
  INSTANTIATE_TEST_SUITE_P(                                                                       \
      Conformance, Prefix##ConformanceBadInputTest,                                               \
      ::testing::ValuesIn(::mesh::sdk::testing::bad_input_params(factory_function)),              \
      ::mesh::sdk::testing::ConformanceParamName{});                                              \
  class Prefix##ConformanceSchemaTest : public ::mesh::sdk::testing::ProviderConformanceFixture { \
  };                                                                                              \
  TEST_P(Prefix##ConformanceSchemaTest, EveryAttributeDescribed) { check_schema(); }              \
  INSTANTIATE_TEST_SUITE_P(                                                                       \
      Conformance, Prefix##ConformanceSchemaTest,                                                 \
      ::testing::ValuesIn(::mesh::sdk::testing::schema_params(factory_function)),                 \
      ::mesh::sdk::testing::ConformanceParamName{})
