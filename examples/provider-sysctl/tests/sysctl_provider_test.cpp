// The sysctl provider against a temporary root that stands in for /proc/sys: apply, drift,
// read-back, prune; and the key and value rules. Nothing here touches the real /proc/sys.
#include "sysctl_provider.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using namespace mesh::sdk;

/// A temporary directory laid out like /proc/sys, removed at the end of the test.
class TempRoot {
 public:
  TempRoot() {
    std::string tmpl = (fs::temp_directory_path() / "sysctl-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  /// Writes a key the way the kernel prints it (creating its directories).
  void put(const std::string& rel, const std::string& text) const {
    fs::create_directories(fs::path(path_ + "/" + rel).parent_path());
    std::ofstream(path_ + "/" + rel, std::ios::trunc) << text;
  }
  std::string get(const std::string& rel) const {
    std::ifstream in(path_ + "/" + rel);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
};

Resource sysctl_resource(const std::string& key, const std::string& value) {
  Resource r;
  r.rid = ResourceId{"sysctl", key};
  r.properties.set("value", value);
  return r;
}

class SysctlProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_.put("net/ipv4/ip_forward", "0\n");
    root_.put("net/ipv4/ip_local_port_range", "32768\t60999\n");
    host_.logger = &logger_;
    host_.role = "tool";
    provider_ = std::make_unique<sysctl::SysctlProvider>(host_);
    Value config = Value::object();
    config.set("root", root_.path());
    auto configured = provider_->configure(config);
    ASSERT_TRUE(configured) << configured.error().describe();
  }

  /// What the engine does for one resource: validate, read, plan, apply, read back, plan again.
  /// Returns the first plan's action.
  PlanAction converge(const Resource& want) {
    EXPECT_TRUE(provider_->validate(want));
    auto observed = provider_->read(want.rid);
    EXPECT_TRUE(observed) << observed.error().describe();
    auto plan = provider_->plan(want, *observed);
    EXPECT_TRUE(plan);
    if (!plan->empty()) {
      CancelToken cancel;
      auto applied = provider_->apply(*plan, cancel);
      EXPECT_TRUE(applied) << applied.error().describe();
    }
    auto back = provider_->read(want.rid);
    EXPECT_TRUE(back && *back);
    auto again = provider_->plan(want, *back);
    EXPECT_TRUE(again && again->empty()) << "read-back differs from the declaration";
    return plan->action;
  }

  TempRoot root_;
  NullLogger logger_;
  HostContext host_;
  std::unique_ptr<sysctl::SysctlProvider> provider_;
};

TEST(ParseKey, SplitsDottedKeysIntoPathComponents) {
  auto key = sysctl::parse_key("net.ipv4.conf.lo.forwarding");
  ASSERT_TRUE(key);
  EXPECT_EQ(*key, (std::vector<std::string>{"net", "ipv4", "conf", "lo", "forwarding"}));
  EXPECT_TRUE(sysctl::parse_key("kernel.sched_child_runs_first"));
  EXPECT_TRUE(sysctl::parse_key("net.ipv6.conf.br-lan.disable_ipv6"));
}

TEST(ParseKey, RefusesAnythingThatCouldLeaveTheRoot) {
  const std::string nul("net.ipv4\0x", 10);
  for (const std::string& bad :
       {std::string(""), std::string("."), std::string(".."), std::string("net..ipv4"),
        std::string(".net.ipv4"), std::string("net.ipv4."), std::string("net/ipv4/ip_forward"),
        std::string("../../etc/passwd"), std::string("net.ipv4.conf.eth0/100.forwarding"),
        std::string("/proc/sys/net"), std::string("net.ipv4 .x"), std::string("net.ipv4\n"), nul,
        std::string(256, 'a'), std::string("a.") + std::string(1100, 'b')}) {
    auto key = sysctl::parse_key(bad);
    ASSERT_FALSE(key) << "accepted '" << bad << "'";
    EXPECT_EQ(key.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(key.error().path, "id");
  }
  std::string deep = "a";
  for (int i = 0; i < 32; ++i) deep += ".a";
  EXPECT_FALSE(sysctl::parse_key(deep)) << "33 components";
  EXPECT_NE(sysctl::parse_key("net/ipv4").error().message.find("use dots"), std::string::npos);
}

TEST(Normalise, IsWhitespaceInsensitiveLikeTheKernelsOwnOutput) {
  EXPECT_EQ(sysctl::normalise("32768\t60999\n"), "32768 60999");
  EXPECT_EQ(sysctl::normalise("  1 \n"), "1");
  EXPECT_EQ(sysctl::normalise("4096\t131072   6291456"), "4096 131072 6291456");
  EXPECT_EQ(sysctl::normalise(" \t\n"), "");
}

TEST_F(SysctlProviderTest, ApplyWritesTheValueAndReadsItBack) {
  EXPECT_EQ(converge(sysctl_resource("net.ipv4.ip_forward", "1")), PlanAction::Update);
  EXPECT_EQ(root_.get("net/ipv4/ip_forward"), "1\n");
  EXPECT_EQ(converge(sysctl_resource("net.ipv4.ip_forward", "1")), PlanAction::None);
}

TEST_F(SysctlProviderTest, DriftIsSeenAndRepaired) {
  const Resource want = sysctl_resource("net.ipv4.ip_forward", "1");
  converge(want);
  root_.put("net/ipv4/ip_forward", "0\n");  // someone else sets it back
  auto observed = provider_->read(want.rid);
  ASSERT_TRUE(observed && *observed);
  EXPECT_EQ((*observed)->properties.get_string("value"), "0");
  auto plan = provider_->plan(want, *observed);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->action, PlanAction::Update);
  ASSERT_EQ(plan->changes.size(), 1u);
  EXPECT_EQ(plan->changes[0].path, "properties.value");
  EXPECT_EQ(plan->changes[0].observed, Value("0"));
  EXPECT_EQ(converge(want), PlanAction::Update);
  EXPECT_EQ(root_.get("net/ipv4/ip_forward"), "1\n");
}

TEST_F(SysctlProviderTest, MultiValueKeysCompareWhatevertheWhitespace) {
  EXPECT_EQ(converge(sysctl_resource("net.ipv4.ip_local_port_range", " 32768    60999 ")),
            PlanAction::None);
  EXPECT_EQ(root_.get("net/ipv4/ip_local_port_range"), "32768\t60999\n") << "nothing written";
  EXPECT_EQ(converge(sysctl_resource("net.ipv4.ip_local_port_range", "1024\t65000")),
            PlanAction::Update);
  EXPECT_EQ(root_.get("net/ipv4/ip_local_port_range"), "1024 65000\n");
}

TEST_F(SysctlProviderTest, AKeyTheKernelDoesNotHaveIsNeverCreated) {
  const Resource want = sysctl_resource("net.ipv4.no_such_key", "1");
  auto observed = provider_->read(want.rid);
  ASSERT_TRUE(observed);
  EXPECT_FALSE(observed->has_value());
  auto plan = provider_->plan(want, *observed);
  ASSERT_TRUE(plan);
  CancelToken cancel;
  auto applied = provider_->apply(*plan, cancel);
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code, ErrorCode::NotFound);
  EXPECT_NE(applied.error().message.find("no such key"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_.path() + "/net/ipv4/no_such_key"));
}

TEST_F(SysctlProviderTest, RemoveReleasesTheKeyAndSaysWhatItLeft) {
  auto caps = provider_->capabilities();
  ASSERT_TRUE(caps);
  EXPECT_EQ(caps->removal, Removal::Release);
  EXPECT_TRUE(caps->exists_before_management);
  const Resource want = sysctl_resource("net.ipv4.ip_forward", "1");
  converge(want);
  CancelToken cancel;
  RemoveRequest req;
  req.rid = want.rid;
  req.cancel = &cancel;
  RemoveResponse resp;
  ASSERT_TRUE(provider_->remove(req, resp));
  ASSERT_TRUE(resp.left.has_value()) << "a released key says what it was left with";
  EXPECT_EQ(*resp.left, sysctl_resource("x", "1").properties);
  RemoveResponse again;
  ASSERT_TRUE(provider_->remove(req, again)) << "idempotent";
  EXPECT_EQ(root_.get("net/ipv4/ip_forward"), "1\n") << "nothing written";
  // The engine's read-back for Release: read() succeeds, and plan(left, read()) is empty.
  auto observed = provider_->read(want.rid);
  ASSERT_TRUE(observed && *observed) << "a sysctl key exists after management too";
  Resource left{want.rid, *resp.left};
  auto plan = provider_->plan(left, *observed);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->empty());
  // A key the kernel no longer has is released too, with nothing to say about it.
  RemoveRequest gone;
  gone.rid = ResourceId{"sysctl", "net.ipv4.no_such_key"};
  gone.cancel = &cancel;
  RemoveResponse gone_resp;
  ASSERT_TRUE(provider_->remove(gone, gone_resp));
  EXPECT_FALSE(gone_resp.left.has_value());
}

TEST_F(SysctlProviderTest, SymbolicLinksBelowTheRootAreRefused) {
  TempRoot elsewhere;
  elsewhere.put("ipv4/ip_forward", "0\n");
  ASSERT_EQ(::symlink(elsewhere.path().c_str(), (root_.path() + "/linked").c_str()), 0);
  auto observed = provider_->read(ResourceId{"sysctl", "linked.ipv4.ip_forward"});
  ASSERT_FALSE(observed);
  EXPECT_NE(observed.error().message.find("symbolic link"), std::string::npos)
      << observed.error().message;
  ASSERT_EQ(::symlink((elsewhere.path() + "/ipv4/ip_forward").c_str(),
                      (root_.path() + "/net/ipv4/forward_link").c_str()),
            0);
  Plan plan{{"sysctl", "net.ipv4.forward_link"}, PlanAction::Update, {},
            sysctl_resource("net.ipv4.forward_link", "1")};
  CancelToken cancel;
  EXPECT_FALSE(provider_->apply(plan, cancel));
  EXPECT_EQ(elsewhere.get("ipv4/ip_forward"), "0\n") << "written through a link";
}

TEST_F(SysctlProviderTest, ADirectoryIsNotAKey) {
  auto observed = provider_->read(ResourceId{"sysctl", "net.ipv4"});
  ASSERT_FALSE(observed);
  EXPECT_NE(observed.error().message.find("not a key"), std::string::npos);
}

TEST_F(SysctlProviderTest, ValidateRefusesEmptyAndControlCharacterValues) {
  for (const std::string& bad : {std::string(""), std::string(" \n"), std::string("1\x1b[2J")}) {
    auto valid = provider_->validate(sysctl_resource("net.ipv4.ip_forward", bad));
    ASSERT_FALSE(valid) << "accepted '" << bad << "'";
    EXPECT_EQ(valid.error().path, "properties.value");
  }
  EXPECT_TRUE(provider_->validate(sysctl_resource("net.ipv4.ip_local_port_range", "1\t2\n")));
}

TEST_F(SysctlProviderTest, ValidateReportsEveryProblemAtOnce) {
  ValidateRequest req;
  req.resource = sysctl_resource("net/ipv4", " ");
  ValidateResponse resp;
  ASSERT_TRUE(provider_->validate(req, resp));
  ASSERT_EQ(resp.errors.size(), 2u);
  EXPECT_EQ(resp.errors[0].path, "id");
  EXPECT_EQ(resp.errors[1].path, "properties.value");
}

TEST(SysctlProviderConfig, TheRootMustBeAnExistingAbsoluteDirectory) {
  NullLogger logger;
  HostContext host;
  host.logger = &logger;
  for (const std::string& bad : {std::string("proc/sys"), std::string("/nonexistent-sysctl-root"),
                                 std::string("/dev/null")}) {
    sysctl::SysctlProvider p(host);
    Value config = Value::object();
    config.set("root", bad);
    auto configured = p.configure(config);
    ASSERT_FALSE(configured) << bad;
    EXPECT_EQ(configured.error().path, "root");
  }
  sysctl::SysctlProvider p(host);
  EXPECT_TRUE(p.configure(apply_defaults(p.config_schema(), Value::object())));
  EXPECT_EQ(p.config_schema().find("root")->default_value, Value("/proc/sys"));
}

}  // namespace
