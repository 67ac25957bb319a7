// Unit tests for the container provider's pure logic (spec.h, engine.h message helpers): the
// declaration's normalisation and refusals, the configuration hash, the State read from
// `inspect` output, and the plan. No engine is run.
#include <gtest/gtest.h>

#include <string>

#include "../../sdk/canonical_json_cases.h"
#include "engine.h"
#include "spec.h"

namespace mesh::plugins::container::test {
namespace {

using sdk::PlanAction;
using sdk::Resource;
using sdk::State;
using sdk::Value;

const std::string kDigest = "sha256:" + std::string(64, 'a');
const std::string kImage = "localhost/mesh-test@" + kDigest;

Value strings(std::initializer_list<const char*> items) {
  Value::Array a;
  for (const char* s : items) a.emplace_back(s);
  return Value(std::move(a));
}

Resource make(const std::string& name, std::initializer_list<std::pair<std::string, Value>> props) {
  Resource r;
  r.rid = {"container", name};
  r.properties.set("image", kImage);
  r.properties.set("restart", "no");
  r.properties.set("running", true);
  r.properties.set("ensure", "present");
  for (const auto& [k, v] : props) r.properties.set(k, v);
  return r;
}

ContainerSpec spec_of(const Resource& r) {
  auto s = parse_spec(r);
  EXPECT_TRUE(s) << s.error().describe();
  return s ? *s : ContainerSpec{};
}

sdk::Error refusal(const Resource& r) {
  auto s = parse_spec(r);
  EXPECT_FALSE(s) << "accepted " << r.properties.to_json();
  return s ? sdk::Error{} : s.error();
}

// What read() would return for a container made exactly from `r`.
State matching_state(const Resource& r) {
  const ContainerSpec spec = spec_of(r);
  State s;
  auto& p = s.properties;
  p.set("ensure", "present");
  p.set("image", spec.image);
  p.set("image_id", std::string(64, 'b'));
  p.set("image_ref_id", std::string(64, 'b'));
  p.set("running", spec.running);
  p.set("paused", false);
  p.set("state", spec.running ? "running" : "created");
  p.set("restart", spec.restart);
  p.set("config_hash", config_hash(spec));
  Value::Array cmd;
  for (const auto& c : spec.command) cmd.emplace_back(c);
  p.set("command", Value(std::move(cmd)));
  Value env = Value::object();
  env.set("PATH", "/bin");
  for (const auto& [k, v] : spec.env) env.set(k, v);
  p.set("env", std::move(env));
  Value::Array ports, volumes;
  for (const auto& x : spec.ports) ports.emplace_back(x);
  for (const auto& x : spec.volumes) volumes.emplace_back(x);
  p.set("ports", Value(std::move(ports)));
  p.set("volumes", Value(std::move(volumes)));
  return s;
}

std::string paths(const sdk::Plan& plan) {
  std::string out;
  for (const auto& c : plan.changes) out += (out.empty() ? "" : " ") + c.path;
  return out;
}

// --- names, images, ports, volumes ------------------------------------------------------------

TEST(ContainerProviderSpecTest, ContainerNames) {
  EXPECT_TRUE(check_name("web"));
  EXPECT_TRUE(check_name("a.b_c-1"));
  EXPECT_TRUE(check_name("0"));
  for (const char* bad : {"", "-web", ".web", "_web", "we b", "web/1", "wéb", "a:b"}) {
    auto r = check_name(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "id");
    EXPECT_EQ(r.error().code, sdk::ErrorCode::InvalidArgument);
  }
  EXPECT_FALSE(check_name(std::string(256, 'a')));
  EXPECT_TRUE(check_name(std::string(255, 'a')));
}

TEST(ContainerProviderSpecTest, ImageReferences) {
  for (const std::string& ok : {std::string("busybox"), std::string("localhost/x:1.0"),
                               kImage, "sha256:" + std::string(64, 'f'),
                               std::string("registry:5000/team/app:v2"), std::string("localhost:1/nope:latest")})
    EXPECT_TRUE(check_image(ok)) << ok;
  for (const std::string& bad :
       {std::string(""), std::string("-v"), std::string("a b"), std::string("x@sha256:abc"),
        std::string("x@md5:") + std::string(32, 'a'), "x@sha256:" + std::string(64, 'A'),
        std::string("sha256:1234"), std::string("/abs"), std::string("@sha256:") + std::string(64, 'a'),
        std::string("x\ny"), std::string(513, 'a')}) {
    auto r = check_image(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "properties.image");
  }
}

TEST(ContainerProviderSpecTest, PortsAreNormalised) {
  auto c = [](const char* text) {
    auto r = canonical_port(text, "p");
    return r ? *r : "ERROR " + r.error().message;
  };
  EXPECT_EQ(c("8080:80"), "8080:80/tcp");
  EXPECT_EQ(c("8080:80/tcp"), "8080:80/tcp");
  EXPECT_EQ(c("53:53/udp"), "53:53/udp");
  EXPECT_EQ(c("127.0.0.1:8080:80"), "127.0.0.1:8080:80/tcp");
  EXPECT_EQ(c("0.0.0.0:8080:80"), "8080:80/tcp");
  EXPECT_EQ(c("[::1]:8080:80/tcp"), "[::1]:8080:80/tcp");
  for (const char* bad : {"80", "80/tcp", "8080:80/icmp", "0:80", "8080:65536", "8080-8081:80",
                          "a:80", ":8080:80", "080:80", "8080:"}) {
    auto r = canonical_port(bad, "properties.ports[3]");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "properties.ports[3]");
  }
}

TEST(ContainerProviderSpecTest, VolumesAreNormalised) {
  auto c = [](const char* text) {
    auto r = canonical_volume(text, "v");
    return r ? *r : "ERROR " + r.error().message;
  };
  EXPECT_EQ(c("/srv/data:/data"), "/srv/data:/data");
  EXPECT_EQ(c("/srv/data:/data:rw"), "/srv/data:/data");
  EXPECT_EQ(c("/srv/data:/data:ro"), "/srv/data:/data:ro");
  EXPECT_EQ(c("cache:/var/cache"), "cache:/var/cache");
  for (const char* bad : {"/srv", "relative/x:/data", "/srv/../x:/data", "/srv/:/data",
                          "/srv:/", "/srv:data", "/srv:/data:rx", "/srv:/data:ro:z", "/srv//x:/d",
                          ":/data"}) {
    auto r = canonical_volume(bad, "properties.volumes[0]");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().path, "properties.volumes[0]");
  }
}

TEST(ContainerProviderSpecTest, ParseSpecRefusesWithPaths) {
  EXPECT_EQ(refusal(make("bad name", {})).path, "id");
  EXPECT_EQ(refusal(make("web", {{"image", ""}})).path, "properties.image");
  Value env = Value::object();
  env.set("1X", "v");
  EXPECT_EQ(refusal(make("web", {{"env", env}})).path, "properties.env.1X");
  Value nul_env = Value::object();
  nul_env.set("X", std::string("a\0b", 3));
  EXPECT_EQ(refusal(make("web", {{"env", nul_env}})).path, "properties.env.X");
  EXPECT_EQ(refusal(make("web", {{"ports", strings({"80:80", "nope"})}})).path,
            "properties.ports[1]");
  EXPECT_EQ(refusal(make("web", {{"volumes", strings({"rel/x:/x"})}})).path,
            "properties.volumes[0]");
  EXPECT_EQ(refusal(make("web", {{"restart", "sometimes"}})).path, "properties.restart");
  Value::Array cmd{Value(std::string("a\0b", 3))};
  EXPECT_EQ(refusal(make("web", {{"command", Value(cmd)}})).path, "properties.command");
}

TEST(ContainerProviderSpecTest, ParseSpecNormalises) {
  Value env = Value::object();
  env.set("B", "2");
  env.set("A", "1");
  auto spec = spec_of(make("web", {{"env", env},
                                   {"ports", strings({"9090:90", "8080:80/tcp", "8080:80"})},
                                   {"volumes", strings({"/b:/b:rw", "/a:/a:ro"})},
                                   {"command", strings({"sleep", "1000"})},
                                   {"running", false}}));
  ASSERT_EQ(spec.env.size(), 2u);
  EXPECT_EQ(spec.env[0].first, "A");
  EXPECT_EQ(spec.ports, (std::vector<std::string>{"8080:80/tcp", "9090:90/tcp"}));
  EXPECT_EQ(spec.volumes, (std::vector<std::string>{"/a:/a:ro", "/b:/b"}));
  EXPECT_EQ(spec.command, (std::vector<std::string>{"sleep", "1000"}));
  EXPECT_FALSE(spec.running);
  EXPECT_FALSE(spec.absent);
  EXPECT_TRUE(spec_of(make("web", {{"ensure", "absent"}})).absent);
}

// --- the configuration hash -------------------------------------------------------------------

TEST(ContainerProviderHashTest, CanonicalJsonSortsObjectKeysOnly) {
  Value v = Value::object();
  v.set("b", strings({"z", "a"}));
  Value inner = Value::object();
  inner.set("y", 1);
  inner.set("x", "é\"\n");
  v.set("a", inner);
  EXPECT_EQ(canonical_json(v), R"({"a":{"x":"é\"\n","y":1},"b":["z","a"]})");
}

TEST(ContainerProviderHashTest, CanonicalJsonGivesTheExactTextTheHashDependsOn) {
  for (const auto& c : mesh::test::canonical_json_cases())
    EXPECT_EQ(canonical_json(c.value), c.text) << c.name;
}

TEST(ContainerProviderHashTest, KnownSha256) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ContainerProviderHashTest, DocumentAndHashAreStable) {
  Value env = Value::object();
  env.set("B", "2");
  env.set("A", "1");
  auto spec = spec_of(make("web", {{"env", env}, {"command", strings({"sleep", "1"})}}));
  EXPECT_EQ(canonical_json(config_document(spec)),
            R"({"command":["sleep","1"],"env":{"A":"1","B":"2"},"image":")" + kImage +
                R"(","ports":[],"restart":"no","volumes":[]})");
  EXPECT_EQ(config_hash(spec), sha256_hex(canonical_json(config_document(spec))));
  EXPECT_EQ(config_hash(spec).size(), 64u);
}

TEST(ContainerProviderHashTest, OrderOfSetsDoesNotMatterButValuesDo) {
  Value env1 = Value::object(), env2 = Value::object();
  env1.set("A", "1");
  env1.set("B", "2");
  env2.set("B", "2");
  env2.set("A", "1");
  const auto base = config_hash(spec_of(make(
      "web", {{"env", env1}, {"ports", strings({"1:1", "2:2"})}, {"volumes", strings({"/a:/a", "/b:/b"})}})));
  EXPECT_EQ(base, config_hash(spec_of(make("web", {{"env", env2},
                                                   {"ports", strings({"2:2/tcp", "1:1"})},
                                                   {"volumes", strings({"/b:/b:rw", "/a:/a"})}}))));
  // running, ensure and the name are not in the hash: they are repaired without re-creating.
  EXPECT_EQ(base, config_hash(spec_of(make("other", {{"env", env1},
                                                     {"ports", strings({"1:1", "2:2"})},
                                                     {"volumes", strings({"/a:/a", "/b:/b"})},
                                                     {"running", false}}))));
  Value env3 = env1;
  env3.set("B", "3");
  EXPECT_NE(base, config_hash(spec_of(make("web", {{"env", env3},
                                                   {"ports", strings({"1:1", "2:2"})},
                                                   {"volumes", strings({"/a:/a", "/b:/b"})}}))));
  // The order of command arguments matters; an absent command equals an empty one.
  EXPECT_NE(config_hash(spec_of(make("web", {{"command", strings({"a", "b"})}}))),
            config_hash(spec_of(make("web", {{"command", strings({"b", "a"})}}))));
  EXPECT_EQ(config_hash(spec_of(make("web", {{"command", Value(Value::Array{})}}))),
            config_hash(spec_of(make("web", {}))));
  EXPECT_NE(config_hash(spec_of(make("web", {{"restart", "always"}}))),
            config_hash(spec_of(make("web", {}))));
  EXPECT_NE(config_hash(spec_of(make("web", {{"image", "busybox:1"}}))),
            config_hash(spec_of(make("web", {{"image", "busybox:2"}}))));
}

// --- durations and engine messages ------------------------------------------------------------

TEST(ContainerProviderSpecTest, Durations) {
  EXPECT_EQ(parse_duration("2s").value(), std::chrono::seconds(2));
  EXPECT_EQ(parse_duration("500ms").value(), std::chrono::milliseconds(500));
  EXPECT_EQ(parse_duration("5m").value(), std::chrono::minutes(5));
  EXPECT_EQ(parse_duration("0s").value(), std::chrono::milliseconds(0));
  for (const char* bad : {"", "s", "2", "2 s", "-1s", "1.5s", "2sec", "99999999999999d"})
    EXPECT_FALSE(parse_duration(bad)) << bad;
}

TEST(ContainerProviderSpecTest, EngineMessagePicksTheErrorLine) {
  ProcessOutcome o;
  o.exit_code = 125;
  o.err =
      "Trying to pull localhost:1/nope:latest...\n"
      "time=\"x\" level=warning msg=\"Failed, retrying in 1s ... (1/3). Error: ...\"\n"
      "Error: initializing source docker://localhost:1/nope:latest: connection refused\n";
  EXPECT_EQ(engine_message(o),
            "Error: initializing source docker://localhost:1/nope:latest: connection refused");
  o.err = "something broke\n\n";
  EXPECT_EQ(engine_message(o), "something broke");
  o.err = "";
  o.out = "only stdout\n";
  EXPECT_EQ(engine_message(o), "only stdout");
  o.out = "";
  EXPECT_EQ(engine_message(o), "exit code 125");
  o.err = "Error: inspecting object: no such container web\n";
  EXPECT_TRUE(says_not_found(o));
  o.err = "Error: No such container: web\n";
  EXPECT_TRUE(says_not_found(o));
  o.err = "Error: inspecting object: busybox:9: image not known\n";
  EXPECT_TRUE(says_not_found(o));
  o.err = "Error: permission denied\n";
  EXPECT_FALSE(says_not_found(o));
}

// --- inspect output -----------------------------------------------------------------------------

// Trimmed from `podman container inspect` (4.3.1), with a port binding and labels added.
const char* const kInspect = R"([
 {
  "Id": "00afce7cd02bfed8196e8e76a3383c6511a589c8d61a4d20e87366535cecb0e1",
  "Image": "242c4ff4dd84eb8aeed39befb42a1c9c786e97780f679cab844f2c989e607f6d",
  "ImageDigest": "sha256:558ba17514ce72d1939472a6bfe1e777a6ba70f6d5d4a106510b8695a3ecec4f",
  "State": {"Status": "exited", "Running": false, "Paused": false, "ExitCode": 3,
            "StartedAt": "2026-11-29T09:36:11.4873324Z"},
  "RestartCount": 2,
  "Mounts": [
   {"Type": "bind", "Source": "/tmp/vol", "Destination": "/data", "RW": false},
   {"Type": "volume", "Name": "cache", "Source": "/var/lib/x/cache/_data", "Destination": "/c",
    "RW": true}
  ],
  "Config": {
   "Image": "localhost/mesh-test:latest",
   "Env": ["PATH=/bin", "GREETING=a=b", "EMPTY="],
   "Cmd": ["sleep", "100"],
   "Labels": {"io.nox-mesh.config": "abc", "io.nox-mesh.image": "localhost/mesh-test@sha256:1"}
  },
  "HostConfig": {
   "RestartPolicy": {"Name": "on-failure", "MaximumRetryCount": 0},
   "PortBindings": {"80/tcp": [{"HostIp": "", "HostPort": "8080"}, {"HostIp": "127.0.0.1", "HostPort": "8081"}],
                    "53/udp": [{"HostIp": "0.0.0.0", "HostPort": "53"}]}
  }
 }
])";

const auto kNow = *parse_rfc3339("2026-11-29T10:00:00Z");
const auto kSettle = std::chrono::milliseconds(2000);

TEST(ContainerProviderInspectTest, Rfc3339) {
  using namespace std::chrono;
  auto t = parse_rfc3339("2026-11-29T09:36:11.4873324Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(duration_cast<nanoseconds>(kNow - *t).count(), (23 * 60 + 48) * 1000000000LL + 512667600LL);
  EXPECT_EQ(*parse_rfc3339("2026-11-29T11:00:00+01:00"), kNow);
  EXPECT_EQ(*parse_rfc3339("2026-11-29T09:30:00-00:30"), kNow);
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:00Z")->time_since_epoch().count(), 0);
  for (const char* bad : {"", "2026-11-29", "2026-11-29T10:00:00", "2026-13-01T00:00:00Z",
                          "2026-11-29T10:00:00.Z", "2026-11-29T10:00:00Zx", "yesterday"})
    EXPECT_FALSE(parse_rfc3339(bad)) << bad;
}

TEST(ContainerProviderInspectTest, RunningMeansUpForTheSettleWindow) {
  auto state_at = [](const char* started, bool running) {
    std::string json = std::string(R"([{"State":{"Status":"running","Running":)") +
                       (running ? "true" : "false") + R"(,"StartedAt":")" + started + R"("}}])";
    auto s = state_from_inspect(json, kNow, kSettle);
    EXPECT_TRUE(s && *s);
    return (*s)->properties.get_bool("running", false);
  };
  EXPECT_TRUE(state_at("2026-11-29T09:59:58Z", true));       // up exactly 2s
  EXPECT_TRUE(state_at("2026-11-29T08:00:00Z", true));
  EXPECT_FALSE(state_at("2026-11-29T09:59:59.5Z", true));    // just (re)started: not yet
  EXPECT_FALSE(state_at("2026-11-29T08:00:00Z", false));
  EXPECT_TRUE(state_at("not a time", true));                 // cannot tell: not held against it
}

TEST(ContainerProviderInspectTest, StateFromPodmanInspect) {
  auto state = state_from_inspect(kInspect, kNow, kSettle);
  ASSERT_TRUE(state) << state.error().describe();
  ASSERT_TRUE(state->has_value());
  const Value& p = (*state)->properties;
  EXPECT_EQ(p.get_string("ensure"), "present");
  EXPECT_EQ(p.get_string("image"), "localhost/mesh-test@sha256:1");  // the label wins
  EXPECT_EQ(p.get_string("image_id"), "242c4ff4dd84eb8aeed39befb42a1c9c786e97780f679cab844f2c989e607f6d");
  EXPECT_EQ(p.get_string("state"), "exited");
  EXPECT_FALSE(p.get_bool("running", true));
  EXPECT_EQ(p.get_int("exit_code", 0), 3);
  EXPECT_EQ(p.get_int("restart_count", 0), 2);
  EXPECT_EQ(p.get_string("restart"), "on-failure");
  EXPECT_EQ(p.get_string("config_hash"), "abc");
  EXPECT_EQ(*p.find("command"), strings({"sleep", "100"}));
  EXPECT_EQ(p.find("env")->get_string("GREETING"), "a=b");
  EXPECT_EQ(p.find("env")->get_string("EMPTY", "x"), "");
  EXPECT_EQ(*p.find("ports"), strings({"127.0.0.1:8081:80/tcp", "53:53/udp", "8080:80/tcp"}));
  EXPECT_EQ(*p.find("volumes"), strings({"/tmp/vol:/data:ro", "cache:/c"}));
}

TEST(ContainerProviderInspectTest, DockerShapesAndMissingLabels) {
  auto state = state_from_inspect(R"([{"Id":"x","Image":"sha256:)" + std::string(64, 'c') +
                                      R"(","State":{"Status":"running","Running":true,"Paused":true},
      "Config":{"Image":"busybox","Labels":{},"Cmd":null,"Env":null},
      "HostConfig":{"RestartPolicy":{"Name":""},"PortBindings":null},"Mounts":null}])",
                                  kNow, kSettle);
  ASSERT_TRUE(state) << state.error().describe();
  const Value& p = (*state)->properties;
  EXPECT_EQ(p.get_string("image"), "busybox");
  EXPECT_EQ(p.get_string("image_id"), std::string(64, 'c'));
  EXPECT_TRUE(p.find("config_hash")->is_null());
  EXPECT_EQ(p.get_string("restart"), "no");
  EXPECT_FALSE(p.get_bool("running", true)) << "paused does not count as running";
  EXPECT_TRUE(p.get_bool("paused", false));
}

TEST(ContainerProviderInspectTest, EmptyArrayIsAbsentAndGarbageIsAnError) {
  auto empty = state_from_inspect("[]", kNow, kSettle);
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty->has_value());
  auto garbage = state_from_inspect("Error: no", kNow, kSettle);
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, sdk::ErrorCode::Failed);
  EXPECT_FALSE(state_from_inspect("{}", kNow, kSettle));
  auto id = image_id_from_inspect(R"([{"Id":"sha256:)" + std::string(64, 'd') + R"("}])");
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, std::string(64, 'd'));
  EXPECT_FALSE(image_id_from_inspect("[]"));
}

// --- plan ---------------------------------------------------------------------------------------

TEST(ContainerProviderPlanTest, AbsentCreatesAndEnsureAbsentRemoves) {
  auto want = make("web", {});
  auto plan = compute_plan(want, spec_of(want), std::nullopt);
  EXPECT_EQ(plan.action, PlanAction::Create);
  EXPECT_EQ(plan.rid.str(), "container:web");
  EXPECT_EQ(plan.desired.rid.str(), "container:web");

  auto gone = make("web", {{"ensure", "absent"}});
  EXPECT_EQ(compute_plan(gone, spec_of(gone), std::nullopt).action, PlanAction::None);
  auto removal = compute_plan(gone, spec_of(gone), matching_state(want));
  EXPECT_EQ(removal.action, PlanAction::Remove);
  EXPECT_EQ(paths(removal), "properties.ensure");
}

TEST(ContainerProviderPlanTest, MatchingStateIsEmpty) {
  Value env = Value::object();
  env.set("A", "1");
  for (const auto& want :
       {make("web", {}), make("web", {{"env", env}, {"command", strings({"sleep", "1"})}}),
        make("web", {{"ports", strings({"8080:80"})}, {"volumes", strings({"/a:/a:ro"})},
                     {"restart", "always"}}),
        make("web", {{"running", false}})}) {
    auto plan = compute_plan(want, spec_of(want), matching_state(want));
    EXPECT_EQ(plan.action, PlanAction::None) << want.properties.to_json() << " " << paths(plan);
    EXPECT_TRUE(plan.changes.empty());
  }
}

TEST(ContainerProviderPlanTest, StoppedOrRunningChangesOnlyRunning) {
  auto want = make("web", {});
  State stopped = matching_state(want);
  stopped.properties.set("running", false);
  auto plan = compute_plan(want, spec_of(want), stopped);
  EXPECT_EQ(plan.action, PlanAction::Update);
  EXPECT_EQ(paths(plan), "properties.running");
  EXPECT_TRUE(only_running_changes(plan));

  auto want_stopped = make("web", {{"running", false}});
  State running = matching_state(want_stopped);
  running.properties.set("running", true);
  plan = compute_plan(want_stopped, spec_of(want_stopped), running);
  EXPECT_EQ(paths(plan), "properties.running");
  EXPECT_TRUE(only_running_changes(plan));

  State paused = matching_state(want_stopped);
  paused.properties.set("paused", true);
  plan = compute_plan(want_stopped, spec_of(want_stopped), paused);
  EXPECT_EQ(paths(plan), "properties.running") << "a paused container is not stopped";
  EXPECT_EQ(plan.changes[0].observed, Value("paused"));
}

TEST(ContainerProviderPlanTest, ChangedDeclarationRecreates) {
  Value env1 = Value::object(), env2 = Value::object();
  env1.set("A", "1");
  env2.set("A", "2");
  auto before = make("web", {{"env", env1}});
  auto after = make("web", {{"env", env2}});
  auto plan = compute_plan(after, spec_of(after), matching_state(before));
  EXPECT_EQ(plan.action, PlanAction::Update);
  EXPECT_EQ(paths(plan), "properties.config_hash properties.env");
  EXPECT_FALSE(only_running_changes(plan));
  EXPECT_EQ(plan.changes[1].observed.get_string("A"), "1");

  auto other_image = make("web", {{"image", "busybox:1"}});
  plan = compute_plan(other_image, spec_of(other_image), matching_state(before));
  EXPECT_EQ(paths(plan), "properties.image properties.config_hash");

  // Removing an env entry shows only in the hash (the image's own variables are allowed).
  auto fewer = make("web", {});
  plan = compute_plan(fewer, spec_of(fewer), matching_state(before));
  EXPECT_EQ(paths(plan), "properties.config_hash");
}

TEST(ContainerProviderPlanTest, HandMadeContainerWithoutLabelsIsReplaced) {
  auto want = make("web", {});
  State hand = matching_state(want);
  hand.properties.set("config_hash", Value());
  auto plan = compute_plan(want, spec_of(want), hand);
  EXPECT_EQ(plan.action, PlanAction::Update);
  EXPECT_EQ(paths(plan), "properties.config_hash");
  EXPECT_TRUE(plan.changes[0].observed.is_null());
}

TEST(ContainerProviderPlanTest, ActualConfigIsComparedNotOnlyTheLabel) {
  Value env = Value::object();
  env.set("A", "1");
  auto want = make("web", {{"env", env},
                           {"command", strings({"sleep", "1"})},
                           {"ports", strings({"8080:80"})},
                           {"volumes", strings({"/a:/a"})},
                           {"restart", "always"}});
  const State good = matching_state(want);
  struct Case {
    const char* key;
    Value value;
    const char* path;
  } cases[] = {
      {"command", strings({"sleep", "2"}), "properties.command"},
      {"ports", strings({}), "properties.ports"},
      {"volumes", strings({"/a:/a:ro"}), "properties.volumes"},
      {"restart", Value("no"), "properties.restart"},
  };
  for (const auto& c : cases) {
    State s = good;
    s.properties.set(c.key, c.value);
    auto plan = compute_plan(want, spec_of(want), s);
    EXPECT_EQ(paths(plan), c.path) << c.key;
    EXPECT_EQ(plan.action, PlanAction::Update);
  }
  State s = good;
  Value other_env = Value::object();
  other_env.set("A", "2");
  s.properties.set("env", other_env);
  EXPECT_EQ(paths(compute_plan(want, spec_of(want), s)), "properties.env");
}

TEST(ContainerProviderPlanTest, MovedTagIsDrift) {
  auto want = make("web", {{"image", "localhost/app:latest"}});
  State s = matching_state(want);
  s.properties.set("image_ref_id", std::string(64, 'e'));
  auto plan = compute_plan(want, spec_of(want), s);
  EXPECT_EQ(paths(plan), "properties.image_id");
  EXPECT_EQ(plan.changes[0].observed, Value(std::string(64, 'b')));
  EXPECT_EQ(plan.changes[0].declared, Value(std::string(64, 'e')));
  // The reference no longer in local storage: nothing to compare with, not drift.
  s.properties.set("image_ref_id", Value());
  EXPECT_TRUE(compute_plan(want, spec_of(want), s).empty());
}

TEST(ContainerProviderPlanTest, PlanIsDeterministic) {
  Value env = Value::object();
  env.set("A", "1");
  auto want = make("web", {{"env", env}});
  State s = matching_state(make("web", {}));
  s.properties.set("running", false);
  auto a = compute_plan(want, spec_of(want), s);
  auto b = compute_plan(want, spec_of(want), s);
  EXPECT_EQ(paths(a), paths(b));
  EXPECT_EQ(paths(a), "properties.config_hash properties.env properties.running");
}

}  // namespace
}  // namespace mesh::plugins::container::test
