// The protocol contract's header parsing (docs/protocol.md "Headers").
#include <gtest/gtest.h>

#include "mesh/common/protocol.h"

namespace mesh::protocol {
namespace {

sdk::Message with_revision(const std::string& value) {
  auto m = make_message("mesh.decl.web-01", "{}");
  m.set_header(kHeaderRevision, value);
  return m;
}

TEST(ProtocolTest, RevisionHeaderParsesDecimalDigits) {
  EXPECT_EQ(*revision_header(with_revision("1")), 1u);
  EXPECT_EQ(*revision_header(with_revision("43")), 43u);
  EXPECT_EQ(*revision_header(with_revision("0")), 0u);
  EXPECT_EQ(*revision_header(with_revision("007")), 7u);
  EXPECT_EQ(*revision_header(with_revision("18446744073709551615")), UINT64_MAX);
}

TEST(ProtocolTest, RevisionHeaderRefusesWhatIsNotARevisionNamingTheHeader) {
  for (const char* bad : {"-1", "+1", "", " 1", "1 ", "1a", "0x10", "1.0", "18446744073709551616",
                          "99999999999999999999", "000000000000000000001", "\xff"}) {
    auto r = revision_header(with_revision(bad));
    ASSERT_FALSE(r) << "'" << bad << "' parsed as " << *r;
    EXPECT_EQ(r.error().code, sdk::ErrorCode::InvalidArgument) << bad;
    EXPECT_EQ(r.error().path, "Mesh-Revision") << bad;
    EXPECT_NE(r.error().message.find("Mesh-Revision"), std::string::npos) << r.error().message;
  }
  auto none = revision_header(make_message("mesh.decl.web-01", "{}"));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("Mesh-Revision"), std::string::npos) << none.error().message;
}

TEST(ProtocolTest, RevisionHeaderErrorDoesNotEchoALongValue) {
  auto r = revision_header(with_revision(std::string(4096, 'x')));
  ASSERT_FALSE(r);
  EXPECT_LT(r.error().message.size(), 200u) << r.error().message;
}

TEST(ProtocolTest, VersionCheck) {
  auto m = make_message("mesh.decl.a", "{}");
  EXPECT_TRUE(check_version(m));
  m.set_header(kHeaderProtocol, "2.0");
  EXPECT_FALSE(check_version(m));
  m.set_header(kHeaderProtocol, "1.7");
  EXPECT_TRUE(check_version(m));
  EXPECT_TRUE(valid_node_name("web-01"));
  EXPECT_FALSE(valid_node_name("web.01"));
  EXPECT_FALSE(valid_node_name("-web"));
  EXPECT_FALSE(valid_node_name("Web"));
  EXPECT_EQ(subject_node("mesh.report.web-01"), "web-01");
}

TEST(ProtocolTest, InstanceSubjectsAndIds) {
  const std::string id = "0123456789abcdef0123456789abcdef";
  EXPECT_TRUE(valid_instance_id(id));
  EXPECT_FALSE(valid_instance_id(""));
  EXPECT_FALSE(valid_instance_id(id.substr(1)));
  EXPECT_FALSE(valid_instance_id("0123456789ABCDEF0123456789abcdef"));
  EXPECT_FALSE(valid_instance_id("0123456789abcdef.123456789abcdef"));
  EXPECT_FALSE(valid_instance_id("*123456789abcdef0123456789abcdef"));
  EXPECT_EQ(instance_subject(id, "mesh.report.web-01"), "mesh.instance." + id + ".mesh.report.web-01");
  // The node stays the last token, as the control plane's per-node rate limit reads it.
  EXPECT_EQ(subject_node(instance_subject(id, "mesh.report.web-01")), "web-01");
}

}  // namespace
}  // namespace mesh::protocol
