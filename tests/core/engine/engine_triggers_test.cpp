// The engine's notifications (engine.h, "Notifications"; sdk/provider.h): a provider that declares
// `notified_by_restart_on` is notified when what its resource's `restart_on` names changed in the
// same apply, one that declares `notified_by_requires` when what it `requires` changed; what that
// means is the provider's. In-test providers: MemProvider for files, and below a service-like
// provider (restart on `restart_on`) and a package-like one (index refresh on `requires`), written
// as the real service and package providers do it, that record what the engine asked of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine_results.h"
#include "mem_provider.h"
#include "mesh/engine/engine.h"

namespace mesh::engine {
namespace {

/// The change paths of the two notifications (the real providers' words).
constexpr const char* kRestartChange = "restart";
constexpr const char* kRefreshIndex = "refresh_index";

using testing::CaptureLogger;
using testing::outcomes;
using testing::MemProvider;
using testing::TempDir;
using Strings = std::vector<std::string>;

/// Every provider appends "<type>:<what>:<id>" here, so the order across providers is visible.
struct CallLog {
  Strings calls;
};

/// A service-like provider: `running` (bool) and `restart_on` (list), a pid that changes on every
/// (re)start; notified by `restart_on`, it plans a "restart" change as the service provider does.
class FakeServices final : public sdk::Provider {
 public:
  explicit FakeServices(CallLog& log) : Provider(testing::test_host()), log_(log) {
    schema_.name = "service";
    schema_.attributes = {
        {"running", sdk::ValueType::Bool, false, "running"},
        {"restart_on", sdk::ValueType::StringList, false, "resources whose change restarts it"},
    };
  }
  const sdk::Schema& schema() const noexcept override { return schema_; }

  struct Unit {
    bool running = false;
    int pid = 0;
  };
  std::map<std::string, Unit> units;  ///< id → unit (all units exist)
  std::set<std::string> fail_restart;  ///< a restart of these fails
  std::set<std::string> stop_on_restart;  ///< a restart "succeeds" but leaves the unit stopped
  int restarts = 0;
  std::vector<sdk::Plan> applied;  ///< every plan apply() was given

 protected:
  sdk::Result<void> do_capabilities(sdk::ProviderCapabilities& caps) const override {
    caps.notified_by_restart_on = true;
    caps.notification = "restart";
    return {};
  }
  sdk::Result<void> do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) override {
    const Unit& u = units[req.rid.id];
    sdk::State s;
    s.properties.set("running", u.running);
    s.properties.set("main_pid", static_cast<std::int64_t>(u.pid));
    resp.state = std::move(s);
    return {};
  }
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override {
    sdk::Plan& plan = resp.plan;
    plan = sdk::Plan{req.desired.rid, sdk::PlanAction::None, {}, req.desired};
    sdk::diff_properties(req.desired.properties, req.observed->properties, {"running"}, plan.changes);
    if (!plan.changes.empty()) plan.action = sdk::PlanAction::Update;
    if (sdk::notified(req, plan)) sdk::add_notification_change(plan, "restart");
    return {};
  }
  sdk::Result<void> do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) override {
    const sdk::Plan& plan = req.plan;
    applied.push_back(plan);
    Unit& u = units[plan.rid.id];
    const bool restart = std::any_of(plan.changes.begin(), plan.changes.end(),
                                     [](const sdk::Change& c) { return c.path == "restart"; });
    const bool want_running = plan.desired.properties.get_bool("running", u.running);
    if (restart) {
      log_.calls.push_back("service:restart:" + plan.rid.id);
      ++restarts;
      if (fail_restart.count(plan.rid.id)) {
        std::string reason = "service:" + plan.rid.id + " did not stay active: status=1";
        if (plan.changes.size() == 1) reason = "restart after " + sdk::names_of(req.notified_by) + " changed: " + reason;
        return sdk::fail(sdk::ErrorCode::Failed, reason);
      }
      if (want_running) {
        u.running = !stop_on_restart.count(plan.rid.id);
        ++u.pid;
      }
    } else if (want_running != u.running) {
      log_.calls.push_back(std::string("service:") + (want_running ? "start:" : "stop:") + plan.rid.id);
      u.running = want_running;
      if (want_running) ++u.pid;
    }
    resp.state.properties.set("running", u.running);
    return {};
  }
  sdk::Result<void> do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse&) override {
    units[req.rid.id].running = false;
    return {};
  }

 private:
  CallLog& log_;
  sdk::Schema schema_;
};

/// A package-like provider: `version` "present" or "latest" against an index that only a refresh
/// brings up to date with the "mirror"; notified by `requires`, it plans a "refresh_index" change
/// and, when that was all, reports what the refresh really changed (as the package provider does).
class FakePackages final : public sdk::Provider {
 public:
  explicit FakePackages(CallLog& log) : Provider(testing::test_host()), log_(log) {
    schema_.name = "package";
    schema_.attributes = {
        {"version", sdk::ValueType::String, false, "present or latest", {}, sdk::Value("present")},
        {"ensure", sdk::ValueType::String, false, "present or absent", {"present", "absent"},
         sdk::Value("present")},
    };
  }
  const sdk::Schema& schema() const noexcept override { return schema_; }

  std::map<std::string, std::string> installed;  ///< name → version
  std::map<std::string, std::string> index;      ///< name → candidate in the local index
  std::map<std::string, std::string> mirror;     ///< name → what a refresh finds
  int refreshes = 0;
  std::vector<sdk::Plan> applied;

 protected:
  sdk::Result<void> do_capabilities(sdk::ProviderCapabilities& caps) const override {
    caps.notified_by_requires = true;
    caps.notification = "refresh_index";
    return {};
  }
  std::optional<sdk::State> observe(const std::string& name) {
    auto it = installed.find(name);
    if (it == installed.end()) return std::nullopt;
    sdk::State s;
    s.properties.set("ensure", "present");
    s.properties.set("version", it->second);
    s.properties.set("candidate", index.count(name) ? sdk::Value(index[name]) : sdk::Value());
    return s;
  }
  sdk::Result<void> do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) override {
    resp.state = observe(req.rid.id);
    return {};
  }
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override {
    const sdk::Resource& want = req.desired;
    const std::optional<sdk::State>& observed = req.observed;
    sdk::Plan& plan = resp.plan;
    plan = sdk::Plan{want.rid, sdk::PlanAction::None, {}, want};
    const bool absent = want.properties.get_string("ensure") == "absent";
    if (absent) {
      if (observed) {
        plan.action = sdk::PlanAction::Remove;
        plan.changes.push_back({"properties.ensure", sdk::Value("present"), sdk::Value("absent")});
      }
      return {};  // no refresh for a package declared absent
    }
    if (!observed) {
      plan.action = sdk::PlanAction::Create;
      plan.changes.push_back({"properties.ensure", sdk::Value(), sdk::Value("present")});
    } else {
      const std::string& candidate = observed->properties.get_string("candidate");
      if (want.properties.get_string("version") == "latest" && !candidate.empty() &&
          candidate != observed->properties.get_string("version")) {
        plan.action = sdk::PlanAction::Update;
        plan.changes.push_back({"properties.version", *observed->properties.find("version"), sdk::Value(candidate)});
      }
    }
    if (sdk::notified(req, plan)) sdk::add_notification_change(plan, kRefreshIndex, sdk::Value(true));
    return {};
  }
  sdk::Result<void> do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) override {
    const sdk::Plan& plan = req.plan;
    applied.push_back(plan);
    const std::string& name = plan.rid.id;
    const bool refresh = std::any_of(plan.changes.begin(), plan.changes.end(),
                                     [](const sdk::Change& c) { return c.path == kRefreshIndex; });
    const bool only_refresh = refresh && plan.changes.size() == 1;
    const auto before = observe(name);
    if (refresh) {
      log_.calls.push_back("package:refresh:" + name);
      ++refreshes;
      if (mirror.count(name)) index[name] = mirror[name];
    }
    if (plan.action == sdk::PlanAction::Remove) {
      installed.erase(name);
      return {};
    }
    if (!index.count(name)) {
      std::string reason = "E: Unable to locate package " + name;
      if (only_refresh) reason = "refreshing the index after " + sdk::names_of(req.notified_by) + " changed: " + reason;
      return sdk::fail(sdk::ErrorCode::Failed, reason);
    }
    const bool latest = plan.desired.properties.get_string("version") == "latest";
    if (!installed.count(name) || (latest && installed[name] != index[name])) {
      log_.calls.push_back("package:install:" + name);
      installed[name] = index[name];
    }
    if (only_refresh) {
      // What the refresh really changed: the installed version, or nothing.
      std::vector<sdk::Change> changed;
      const auto after = observe(name);
      const sdk::Value* was = before ? before->properties.find("version") : nullptr;
      const sdk::Value* now = after ? after->properties.find("version") : nullptr;
      if (!(was && now && *was == *now))
        changed.push_back({"properties.version", was ? *was : sdk::Value(), now ? *now : sdk::Value()});
      if (!changed.empty()) changed.push_back(plan.changes.front());
      resp.changed = std::move(changed);
    }
    return {};
  }
  sdk::Result<void> do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse&) override {
    installed.erase(req.rid.id);
    return {};
  }

 private:
  CallLog& log_;
  sdk::Schema schema_;
};

class EngineTriggersTest : public ::testing::Test {
 protected:
  EngineTriggersTest() {
    EXPECT_TRUE(registry.add("file", file));
    EXPECT_TRUE(registry.add("service", services));
    EXPECT_TRUE(registry.add("package", packages));
    auto sd = StateDir::open(tmp.path() + "/state");
    EXPECT_TRUE(sd);
    state = std::make_unique<StateDir>(std::move(*sd));
    engine = std::make_unique<Engine>(registry, *state, log);
    file->on_apply = [this](const std::string& id) { calls.calls.push_back("file:apply:" + id); };
  }

  /// The declaration `{"resources": [<resources_json>]}`, parsed.
  Declaration decl(const std::string& resources_json) {
    text = R"({"resources": [)" + resources_json + "]}";
    auto d = parse_declaration(text, registry);
    EXPECT_TRUE(d) << d.error().message;
    return d ? *d : Declaration{};
  }
  sdk::Error refuse(const std::string& resources_json) {
    auto d = parse_declaration(R"({"resources": [)" + resources_json + "]}", registry);
    EXPECT_FALSE(d);
    return d ? sdk::Error{} : d.error();
  }
  ApplyResult run(const Declaration& d, bool dry_run = false) { return engine->apply(d, text, cancel, dry_run); }

  static std::string file_res(const std::string& id, const std::string& content, const std::string& requires_ = "") {
    std::string out = R"({"type": "file", "id": ")" + id + R"(", "properties": {"content": ")" + content + R"("})";
    if (!requires_.empty()) out += R"(, "requires": [)" + requires_ + "]";
    return out + "}";
  }
  static std::string service_res(const std::string& id, const std::string& restart_on,
                                 const std::string& requires_ = "", const std::string& running = "true") {
    std::string out = R"({"type": "service", "id": ")" + id + R"(", "properties": {"running": )" + running +
                      R"(, "restart_on": [)" + restart_on + "]}";
    if (!requires_.empty()) out += R"(, "requires": [)" + requires_ + "]";
    return out + "}";
  }
  static std::string package_res(const std::string& id, const std::string& version, const std::string& requires_ = "",
                                 const std::string& ensure = "present") {
    std::string out = R"({"type": "package", "id": ")" + id + R"(", "properties": {"version": ")" + version +
                      R"(", "ensure": ")" + ensure + R"("})";
    if (!requires_.empty()) out += R"(, "requires": [)" + requires_ + "]";
    return out + "}";
  }

  static Strings paths(const ResourceOutcome& o) {
    Strings out;
    for (const auto& c : o.changes) out.push_back(c.path);
    return out;
  }
  const ResourceOutcome& outcome_of(const ApplyResult& r, const std::string& name) {
    static const ResourceOutcome none;
    for (const auto& o : r.resources)
      if (o.resource == name) return o;
    ADD_FAILURE() << "no outcome for " << name;
    return none;
  }
  bool logged(const std::string& s) const {
    return std::any_of(log.lines.begin(), log.lines.end(),
                       [&](const std::string& l) { return l.find(s) != std::string::npos; });
  }

  TempDir tmp;
  CallLog calls;
  std::shared_ptr<MemProvider> file = std::make_shared<MemProvider>("file");
  std::shared_ptr<FakeServices> services = std::make_shared<FakeServices>(calls);
  std::shared_ptr<FakePackages> packages = std::make_shared<FakePackages>(calls);
  ProviderRegistry registry;
  std::unique_ptr<StateDir> state;
  CaptureLogger log;
  std::unique_ptr<Engine> engine;
  sdk::CancelToken cancel;
  std::string text;
};

// ---- restart_on ---------------------------------------------------------------------------------

TEST_F(EngineTriggersTest, RestartsAfterAChangeOfWhatItRestartsOn) {
  // First apply: the file is written, the service started (the start is the restart).
  auto d1 = decl(file_res("/etc/app.conf", "v1") + "," +
                 service_res("app.service", R"("file:/etc/app.conf")", R"("file:/etc/app.conf")"));
  auto r1 = run(d1);
  ASSERT_EQ(r1.outcome, "applied") << r1.reason;
  EXPECT_EQ(outcomes(r1), (Strings{"file:/etc/app.conf=changed", "service:app.service=changed"}));
  EXPECT_EQ(paths(r1.resources[1]), (Strings{"properties.running", "restart"}));
  EXPECT_EQ(services->units["app.service"].pid, 1);

  // The configuration changes: file first, then a restart of the otherwise unchanged service.
  calls.calls.clear();
  auto r2 = run(decl(file_res("/etc/app.conf", "v2") + "," +
                     service_res("app.service", R"("file:/etc/app.conf")", R"("file:/etc/app.conf")")));
  ASSERT_EQ(r2.outcome, "applied") << r2.reason;
  EXPECT_EQ(outcomes(r2), (Strings{"file:/etc/app.conf=changed", "service:app.service=changed"}));
  EXPECT_EQ(paths(r2.resources[1]), (Strings{"restart"}));
  EXPECT_EQ(calls.calls, (Strings{"file:apply:/etc/app.conf", "service:restart:app.service"}));
  EXPECT_EQ(services->units["app.service"].pid, 2);
  // The plan the provider got: action update, only the restart change, null values.
  ASSERT_FALSE(services->applied.empty());
  const sdk::Plan& p = services->applied.back();
  EXPECT_EQ(p.action, sdk::PlanAction::Update);
  ASSERT_EQ(p.changes.size(), 1u);
  EXPECT_EQ(p.changes[0].path, kRestartChange);
  EXPECT_TRUE(p.changes[0].observed.is_null());
  EXPECT_TRUE(p.changes[0].declared.is_null());
  EXPECT_TRUE(logged("resource=service:app.service trigger=restart changed=file:/etc/app.conf"));
  EXPECT_TRUE(logged("resource=service:app.service outcome=changed changes=restart"));
  // The recorded properties are the declared ones.
  ASSERT_EQ(state->state().owned.size(), 2u);
  EXPECT_EQ(state->state().owned[1].resource, "service:app.service");
  EXPECT_FALSE(state->state().owned[1].properties.find("refresh_index"));
}

TEST_F(EngineTriggersTest, NoRestartWhenNothingItRestartsOnChanged) {
  const std::string rest = "," + service_res("app.service", R"("file:/etc/app.conf")");
  ASSERT_EQ(run(decl(file_res("/etc/app.conf", "v1") + "," + file_res("/etc/other", "a") + rest)).outcome, "applied");
  const int restarts = services->restarts;
  const int pid = services->units["app.service"].pid;
  calls.calls.clear();

  // Nothing changed at all.
  auto r = run(decl(file_res("/etc/app.conf", "v1") + "," + file_res("/etc/other", "a") + rest));
  ASSERT_EQ(r.outcome, "applied");
  EXPECT_EQ(outcomes(r), (Strings{"file:/etc/app.conf=unchanged", "file:/etc/other=unchanged",
                                  "service:app.service=unchanged"}));
  // Only a resource it does not restart on changed.
  r = run(decl(file_res("/etc/app.conf", "v1") + "," + file_res("/etc/other", "b") + rest));
  ASSERT_EQ(r.outcome, "applied");
  EXPECT_EQ(outcomes(r), (Strings{"file:/etc/app.conf=unchanged", "file:/etc/other=changed",
                                  "service:app.service=unchanged"}));
  EXPECT_EQ(services->restarts, restarts);
  EXPECT_EQ(services->units["app.service"].pid, pid);
  EXPECT_EQ(calls.calls, (Strings{"file:apply:/etc/other"}));
}

TEST_F(EngineTriggersTest, ARestartOnEntryDeclaredLaterIsStillAppliedFirst) {
  // The service comes first in the declaration and does not `require` the file.
  auto d = decl(service_res("app.service", R"("file:/etc/app.conf")") + "," + file_res("/etc/app.conf", "v1"));
  ASSERT_EQ(d.resources.size(), 2u);
  EXPECT_EQ(d.resources[0].rid.str(), "file:/etc/app.conf");
  EXPECT_EQ(d.resources[1].rid.str(), "service:app.service");
  EXPECT_TRUE(d.resources[1].depends_on.empty());  // `requires` is not rewritten
  ASSERT_EQ(run(d).outcome, "applied");

  calls.calls.clear();
  auto r = run(decl(service_res("app.service", R"("file:/etc/app.conf")") + "," + file_res("/etc/app.conf", "v2")));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(outcomes(r), (Strings{"file:/etc/app.conf=changed", "service:app.service=changed"}));
  EXPECT_EQ(calls.calls, (Strings{"file:apply:/etc/app.conf", "service:restart:app.service"}));
}

TEST_F(EngineTriggersTest, AFailedRestartFailsTheApply) {
  auto make = [&](const std::string& conf, const std::string& after) {
    return decl(file_res("/etc/app.conf", conf) + "," + service_res("app.service", R"("file:/etc/app.conf")") + "," +
                file_res("/etc/after", after, R"("service:app.service")"));
  };
  ASSERT_EQ(run(make("v1", "x")).outcome, "applied");
  services->fail_restart.insert("app.service");
  auto r = run(make("v2", "y"));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "service:app.service");
  EXPECT_EQ(r.reason, "restart after file:/etc/app.conf changed: service:app.service did not stay active: status=1");
  EXPECT_EQ(outcomes(r), (Strings{"file:/etc/app.conf=changed", "service:app.service=failed",
                                  "file:/etc/after=not_attempted"}));
  EXPECT_EQ(file->objects["/etc/after"].get_string("content"), "x");
  EXPECT_EQ(state->state().last_outcome, "failed");
}

TEST_F(EngineTriggersTest, ARestartMustReadBackInTheDeclaredState) {
  const std::string svc = "," + service_res("app.service", R"("file:/etc/app.conf")");
  ASSERT_EQ(run(decl(file_res("/etc/app.conf", "v1") + svc)).outcome, "applied");
  services->stop_on_restart.insert("app.service");
  auto r = run(decl(file_res("/etc/app.conf", "v2") + svc));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "service:app.service");
  EXPECT_EQ(r.reason, "read-back does not match: properties.running is false, declared true");
}

TEST_F(EngineTriggersTest, AServiceDeclaredStoppedIsGivenTheRestartChangeButStaysStopped) {
  const std::string svc = "," + service_res("app.service", R"("file:/etc/app.conf")", "", "false");
  ASSERT_EQ(run(decl(file_res("/etc/app.conf", "v1") + svc)).outcome, "applied");
  auto r = run(decl(file_res("/etc/app.conf", "v2") + svc));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(paths(outcome_of(r, "service:app.service")), (Strings{"restart"}));
  EXPECT_FALSE(services->units["app.service"].running);
}

TEST_F(EngineTriggersTest, RestartsChainAndAnyEntryTriggers) {
  // b restarts on a (a service) and on a file; a restarts on its config.
  const std::string rest = "," + service_res("a.service", R"("file:/etc/a.conf")") + "," +
                           service_res("b.service", R"("file:/etc/b.conf", "service:a.service")") + "," +
                           file_res("/etc/b.conf", "b");
  ASSERT_EQ(run(decl(file_res("/etc/a.conf", "1") + rest)).outcome, "applied");
  calls.calls.clear();
  auto r = run(decl(file_res("/etc/a.conf", "2") + rest));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(calls.calls, (Strings{"file:apply:/etc/a.conf", "service:restart:a.service", "service:restart:b.service"}));
  EXPECT_TRUE(logged("resource=service:b.service trigger=restart changed=service:a.service"));
}

TEST_F(EngineTriggersTest, ADryRunShowsTheRestartAndChangesNothing) {
  const std::string svc = "," + service_res("app.service", R"("file:/etc/app.conf")");
  ASSERT_EQ(run(decl(file_res("/etc/app.conf", "v1") + svc)).outcome, "applied");
  const int restarts = services->restarts;
  auto r = run(decl(file_res("/etc/app.conf", "v2") + svc), true);
  EXPECT_EQ(r.outcome, "planned");
  EXPECT_EQ(outcomes(r), (Strings{"file:/etc/app.conf=would_change", "service:app.service=would_change"}));
  EXPECT_EQ(paths(r.resources[1]), (Strings{"restart"}));
  EXPECT_EQ(services->restarts, restarts);
  EXPECT_EQ(file->objects["/etc/app.conf"].get_string("content"), "v1");
}

TEST_F(EngineTriggersTest, RestartOnInTheDeclaration) {
  // An entry must name a declared resource; the path points at it.
  auto e = refuse(file_res("/etc/a", "x") + "," + service_res("app.service", R"("file:/etc/a", "file:/etc/nope")"));
  EXPECT_EQ(e.code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(e.path, "resources[1].properties.restart_on[1]");
  EXPECT_EQ(e.message,
            "resources[1] (service:app.service): properties.restart_on[1]: restarts on 'file:/etc/nope', which is "
            "not declared");
  // Not of the form type:id (a provider whose validate() does not check it).
  e = refuse(service_res("app.service", R"("nocolon")"));
  EXPECT_EQ(e.path, "resources[0].properties.restart_on[0]");
  EXPECT_EQ(e.message,
            "resources[0] (service:app.service): properties.restart_on[0]: 'nocolon' is not a resource name of the "
            "form type:id");
  // A cycle closed by restart_on is a requires cycle.
  e = refuse(file_res("/etc/a", "x", R"("service:app.service")") + "," + service_res("app.service", R"("file:/etc/a")"));
  EXPECT_EQ(e.message, "requires cycle: file:/etc/a -> service:app.service -> file:/etc/a (restart_on orders like requires)");
  EXPECT_EQ(e.path, "resources[0].requires");
  e = refuse(service_res("app.service", R"("file:/etc/a")") + "," + file_res("/etc/a", "x", R"("service:app.service")"));
  EXPECT_EQ(e.message, "requires cycle: service:app.service -> file:/etc/a -> service:app.service (restart_on orders like requires)");
  EXPECT_EQ(e.path, "resources[0].properties.restart_on");
  // A pure requires cycle keeps its message.
  e = refuse(file_res("/a", "x", R"("file:/b")") + "," + file_res("/b", "x", R"("file:/a")"));
  EXPECT_EQ(e.message, "requires cycle: file:/a -> file:/b -> file:/a");

  // Ordering: stable, restart_on and requires together; an entry also in `requires` is fine.
  auto d = decl(service_res("s1.service", R"("file:/z", "package:p")", R"("file:/z")") + "," +
                file_res("/y", "y") + "," + package_res("p", "present", R"("file:/y")") + "," + file_res("/z", "z"));
  Strings order;
  for (const auto& r : d.resources) order.push_back(r.rid.str());
  EXPECT_EQ(order, (Strings{"file:/y", "package:p", "file:/z", "service:s1.service"}));
}

// ---- refresh_index ------------------------------------------------------------------------------

TEST_F(EngineTriggersTest, APackageIsAskedToRefreshItsIndexOnlyWhenARequirementChanged) {
  packages->index["nginx"] = "1.0";
  packages->mirror["nginx"] = "1.0";
  const std::string pkg = "," + package_res("nginx", "latest", R"("file:/etc/apt/sources.list.d/x.list")");
  auto r = run(decl(file_res("/etc/apt/sources.list.d/x.list", "deb a") + pkg));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  // The package was to be installed anyway; the refresh came with it.
  EXPECT_EQ(paths(outcome_of(r, "package:nginx")), (Strings{"properties.ensure", "refresh_index"}));
  ASSERT_EQ(packages->applied.size(), 1u);
  EXPECT_EQ(paths(ResourceOutcome{"", "", packages->applied[0].changes, ""}),
            (Strings{"properties.ensure", "refresh_index"}));
  EXPECT_EQ(packages->refreshes, 1);

  // Nothing changed: no refresh, no apply.
  r = run(decl(file_res("/etc/apt/sources.list.d/x.list", "deb a") + pkg));
  EXPECT_EQ(outcome_of(r, "package:nginx").outcome, "unchanged");
  EXPECT_EQ(packages->applied.size(), 1u);

  // The sources file changed, the mirror has nothing newer: the provider plans only its refresh
  // (so apply is called although nothing declared differs), refreshes, installs nothing, and
  // says so → unchanged.
  r = run(decl(file_res("/etc/apt/sources.list.d/x.list", "deb b") + pkg));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(outcome_of(r, "package:nginx").outcome, "unchanged");
  EXPECT_TRUE(outcome_of(r, "package:nginx").changes.empty());
  ASSERT_EQ(packages->applied.size(), 2u);
  // ABI 2: the refresh is the provider's own change in its plan (ABI 1: an empty plan with a
  // refresh_index key the engine set in desired.properties).
  EXPECT_EQ(packages->applied[1].action, sdk::PlanAction::Update);
  ASSERT_EQ(packages->applied[1].changes.size(), 1u);
  EXPECT_EQ(packages->applied[1].changes[0].path, kRefreshIndex);
  EXPECT_EQ(packages->refreshes, 2);
  EXPECT_TRUE(logged("resource=package:nginx trigger=refresh_index changed=file:/etc/apt/sources.list.d/x.list"));

  // The sources file changed and the new mirror has 2.0: the refresh installs it → changed.
  packages->mirror["nginx"] = "2.0";
  calls.calls.clear();
  r = run(decl(file_res("/etc/apt/sources.list.d/x.list", "deb c") + pkg));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  const ResourceOutcome& o = outcome_of(r, "package:nginx");
  EXPECT_EQ(o.outcome, "changed");
  EXPECT_EQ(paths(o), (Strings{"properties.version", "refresh_index"}));
  EXPECT_EQ(o.changes[0].observed, sdk::Value("1.0"));
  EXPECT_EQ(o.changes[0].declared, sdk::Value("2.0"));
  EXPECT_EQ(packages->installed["nginx"], "2.0");
  EXPECT_EQ(calls.calls, (Strings{"file:apply:/etc/apt/sources.list.d/x.list", "package:refresh:nginx",
                                  "package:install:nginx"}));
  // The hook never reaches the recorded properties.
  for (const auto& owned : state->state().owned) EXPECT_FALSE(owned.properties.find(kRefreshIndex)) << owned.resource;
}

TEST_F(EngineTriggersTest, RefreshIsNotAskedOfOtherPackagesOrOfARemoval) {
  packages->index = {{"a", "1"}, {"b", "1"}};
  packages->installed = {{"a", "1"}, {"b", "1"}, {"gone", "1"}};
  packages->index["gone"] = "1";
  // a requires the file, b does not, gone is declared absent but requires the file.
  auto make = [&](const std::string& content) {
    return decl(file_res("/etc/src.list", content) + "," + package_res("a", "present", R"("file:/etc/src.list")") +
                "," + package_res("b", "present") + "," +
                package_res("gone", "present", R"("file:/etc/src.list")", "absent"));
  };
  ASSERT_EQ(run(make("1")).outcome, "applied");
  packages->applied.clear();
  auto r = run(make("2"));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(outcomes(r), (Strings{"file:/etc/src.list=changed", "package:a=unchanged", "package:b=unchanged",
                                  "package:gone=unchanged"}));
  ASSERT_EQ(packages->applied.size(), 1u);
  EXPECT_EQ(packages->applied[0].rid.id, "a");
}

TEST_F(EngineTriggersTest, AFailedRefreshFailsTheApply) {
  packages->installed["nginx"] = "1.0";
  const std::string pkg = "," + package_res("nginx", "present", R"("file:/etc/src.list")");
  packages->index["nginx"] = "1.0";
  ASSERT_EQ(run(decl(file_res("/etc/src.list", "1") + pkg)).outcome, "applied");
  packages->index.clear();  // the install step now fails: "Unable to locate"
  auto r = run(decl(file_res("/etc/src.list", "2") + pkg));
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.failed_resource, "package:nginx");
  EXPECT_EQ(r.reason, "refreshing the index after file:/etc/src.list changed: E: Unable to locate package nginx");
}

TEST_F(EngineTriggersTest, APackageChangedByARefreshRestartsTheServiceOnIt) {
  packages->index["nginx"] = "1.0";
  packages->mirror["nginx"] = "1.0";
  const std::string rest = "," + package_res("nginx", "latest", R"("file:/etc/src.list")") + "," +
                           service_res("nginx.service", R"("package:nginx")", R"("package:nginx")");
  ASSERT_EQ(run(decl(file_res("/etc/src.list", "1") + rest)).outcome, "applied");
  // The sources change but nothing newer: no restart.
  calls.calls.clear();
  auto r = run(decl(file_res("/etc/src.list", "2") + rest));
  EXPECT_EQ(outcome_of(r, "service:nginx.service").outcome, "unchanged");
  // Now a newer version comes with the new sources: installed, then restarted.
  packages->mirror["nginx"] = "2.0";
  calls.calls.clear();
  r = run(decl(file_res("/etc/src.list", "3") + rest));
  ASSERT_EQ(r.outcome, "applied") << r.reason;
  EXPECT_EQ(calls.calls, (Strings{"file:apply:/etc/src.list", "package:refresh:nginx", "package:install:nginx",
                                  "service:restart:nginx.service"}));
}

}  // namespace
}  // namespace mesh::engine
