// Unit tests for ContainerProvider that need no engine: the schemas, configuration errors,
// validation paths, and an engine that is missing or does not answer (Unavailable, with the
// engine's own words, found lazily on first use rather than at configure time).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "container_provider.h"

namespace mesh::plugins::container::test {
namespace {

using sdk::ErrorCode;
using sdk::Value;

class ContainerProviderUnitTest : public ::testing::Test {
 protected:
  ContainerProviderUnitTest() {
    host_.logger = &logger_;
    host_.role = "tool";
  }
  std::unique_ptr<ContainerProvider> make(Value config) {
    auto p = std::make_unique<ContainerProvider>(host_);
    auto checked = sdk::validate_against(p->config_schema(), config, "");
    EXPECT_TRUE(checked) << checked.error().describe();
    auto ok = p->configure(sdk::apply_defaults(p->config_schema(), config));
    EXPECT_TRUE(ok) << ok.error().describe();
    return p;
  }
  sdk::Error configure_error(Value config) {
    ContainerProvider p(host_);
    auto ok = p.configure(sdk::apply_defaults(p.config_schema(), config));
    EXPECT_FALSE(ok) << config.to_json();
    return ok ? sdk::Error{} : ok.error();
  }
  static sdk::Resource resource(const std::string& name) {
    sdk::Resource r;
    r.rid = {"container", name};
    r.properties.set("image", "localhost/mesh-test@sha256:" + std::string(64, '1'));
    return r;
  }

  sdk::NullLogger logger_;
  sdk::HostContext host_;
};

TEST_F(ContainerProviderUnitTest, SchemaHasTheDocumentedProperties) {
  ContainerProvider p(host_);
  const auto& s = p.schema();
  EXPECT_EQ(s.name, "container");
  for (const char* name :
       {"image", "command", "env", "ports", "volumes", "restart", "running", "ensure"})
    EXPECT_NE(s.find(name), nullptr) << name;
  EXPECT_TRUE(s.find("image")->required);
  EXPECT_EQ(*s.find("restart")->default_value, Value("no"));
  EXPECT_EQ(*s.find("running")->default_value, Value(true));
  EXPECT_EQ(*s.find("ensure")->default_value, Value("present"));
  const auto& c = p.config_schema();
  for (const char* name :
       {"engine", "binary", "global_args", "run_args", "settle", "timeout", "stop_timeout"})
    EXPECT_NE(c.find(name), nullptr) << name;
  EXPECT_EQ(*c.find("engine")->default_value, Value("podman"));
  EXPECT_EQ(*c.find("settle")->default_value, Value("2s"));
  EXPECT_EQ(*c.find("timeout")->default_value, Value("5m"));
}

TEST_F(ContainerProviderUnitTest, SchemaRefusesUnknownAndMistypedProperties) {
  ContainerProvider p(host_);
  Value props = Value::object();
  props.set("image", "busybox");
  props.set("colour", "red");
  auto r = sdk::validate_against(p.schema(), props, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.colour");
  props.erase("colour");
  props.set("env", Value(Value::Array{}));
  r = sdk::validate_against(p.schema(), props, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.env");
  Value no_image = Value::object();
  r = sdk::validate_against(p.schema(), no_image, "properties");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.image");
}

TEST_F(ContainerProviderUnitTest, ConfigErrorsNameTheKey) {
  Value c = Value::object();
  c.set("settle", "2 seconds");
  EXPECT_EQ(configure_error(c).path, "settle");
  c = Value::object();
  c.set("timeout", "0s");
  EXPECT_EQ(configure_error(c).path, "timeout");
  c = Value::object();
  c.set("stop_timeout", "x");
  EXPECT_EQ(configure_error(c).path, "stop_timeout");
  c = Value::object();
  c.set("binary", "");
  EXPECT_EQ(configure_error(c).path, "binary");
  c = Value::object();
  c.set("engine", "lxc");
  EXPECT_EQ(configure_error(c).path, "engine");
}

TEST_F(ContainerProviderUnitTest, ValidateRefusesWithPaths) {
  ContainerProvider p(host_);
  auto bad_id = resource("no/slash");
  auto r = p.validate(bad_id);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "id");
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  auto bad_port = resource("web");
  bad_port.properties.set("ports", Value(Value::Array{Value("80")}));
  r = p.validate(bad_port);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().path, "properties.ports[0]");
  EXPECT_TRUE(p.validate(resource("web")));
}

TEST_F(ContainerProviderUnitTest, ConfigureDoesNotTouchTheEngine) {
  Value c = Value::object();
  c.set("binary", "/nonexistent/podman");
  auto p = make(c);  // succeeds: the engine is looked for on first use
  auto plan = p->plan(resource("web"), std::nullopt);
  ASSERT_TRUE(plan) << "plan needs no engine";
  EXPECT_EQ(plan->action, sdk::PlanAction::Create);
}

TEST_F(ContainerProviderUnitTest, MissingEngineIsUnavailable) {
  Value c = Value::object();
  c.set("binary", "/nonexistent/podman");
  auto p = make(c);
  auto read = p->read({"container", "web"});
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::Unavailable);
  EXPECT_NE(read.error().message.find("/nonexistent/podman"), std::string::npos)
      << read.error().message;
  sdk::CancelToken cancel;
  auto removed = p->remove({"container", "web"}, cancel);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code, ErrorCode::Unavailable);
  auto plan = p->plan(resource("web"), std::nullopt);
  auto applied = p->apply(*plan, cancel);
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::Unavailable);
}

TEST_F(ContainerProviderUnitTest, EngineThatDoesNotAnswerIsUnavailableWithItsMessage) {
  // An installed binary is not an engine: only an answer to `version` counts.
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mesh-container-unit-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto fake = dir / "podman";
  {
    std::ofstream out(fake);
    out << "#!/bin/sh\necho 'Error: cannot connect to Podman socket: no such file' >&2\nexit 125\n";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  Value c = Value::object();
  c.set("binary", fake.string());
  auto p = make(c);
  auto read = p->read({"container", "web"});
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::Unavailable);
  EXPECT_NE(read.error().message.find("cannot connect to Podman socket"), std::string::npos)
      << read.error().message;
}

TEST_F(ContainerProviderUnitTest, CancelledBeforeApplyDoesNothing) {
  Value c = Value::object();
  c.set("binary", "/nonexistent/podman");
  auto p = make(c);
  auto plan = p->plan(resource("web"), std::nullopt);
  ASSERT_TRUE(plan);
  sdk::CancelToken cancel;
  cancel.cancel();
  auto applied = p->apply(*plan, cancel);
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::Cancelled);
}

TEST_F(ContainerProviderUnitTest, BindSourceThroughASymlinkOrInADeniedRootIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mesh-container-paths-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "etc-standin" / "data");
  std::filesystem::create_directory_symlink(dir / "etc-standin", dir / "home");
  std::filesystem::create_directories(dir / "state");
  Value c = Value::object();
  c.set("binary", "/nonexistent/podman");
  c.set("denied_roots", Value(Value::Array{Value((dir / "state").string())}));
  auto p = make(c);
  // A symbolic link above the bind source: refused before the engine is even asked.
  auto r = resource("web");
  r.properties.set("volumes", Value(Value::Array{Value((dir / "home" / "data").string() + ":/data")}));
  auto plan = p->plan(r, std::nullopt);
  ASSERT_TRUE(plan) << plan.error().describe();
  sdk::CancelToken cancel;
  auto applied = p->apply(*plan, cancel);
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::PermissionDenied) << applied.error().describe();
  EXPECT_NE(applied.error().message.find((dir / "home").string() + " is a symbolic link"), std::string::npos)
      << applied.error().message;
  // A bind source in the host's denied roots: refused at validate.
  auto s = resource("web");
  s.properties.set("volumes", Value(Value::Array{Value((dir / "state").string() + ":/stolen:ro")}));
  auto v = p->validate(s);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, ErrorCode::PermissionDenied);
  EXPECT_NE(v.error().message.find("path policy"), std::string::npos) << v.error().message;
}

}  // namespace
}  // namespace mesh::plugins::container::test
