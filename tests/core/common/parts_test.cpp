// protocol::parts: split, reassembly, and every refusal of the reassembler.
#include <gtest/gtest.h>

#include <algorithm>

#include "mesh/common/crypto.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"

namespace mesh::protocol::parts {
namespace {

sdk::Message big(std::size_t bytes) {
  std::string body;
  for (std::size_t i = 0; body.size() < bytes; ++i) body += std::to_string(i) + ",";
  body.resize(bytes);
  auto m = make_message("mesh.report.web-01", body);
  m.set_header(kHeaderNode, "web-01");
  m.set_header("Mesh-Signature", std::string(128, 'a'));
  return m;
}

Limits small_limits() {
  Limits l;
  l.max_whole = 1 << 20;
  l.max_buffered = 1 << 20;
  return l;
}

TEST(PartsTest, AWholeThatFitsIsSentAlone) {
  auto m = big(1000);
  auto list = split(m, 65536);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_FALSE(is_part(list->front()));
  EXPECT_EQ(list->front().body, m.body);
}

TEST(PartsTest, SplitPartsFitAndJoinIntoTheWholeInAnyOrder) {
  auto m = big(300000);
  auto list = split(m, 65536);
  ASSERT_TRUE(list);
  ASSERT_GE(list->size(), 5u);
  for (const auto& p : *list) {
    EXPECT_LE(wire_size(p), 65536u);
    EXPECT_TRUE(is_part(p));
    EXPECT_EQ(*p.header("Mesh-Signature"), std::string(128, 'a'));
  }
  Reassembler r(small_limits());
  std::reverse(list->begin(), list->end());
  std::optional<sdk::Message> whole;
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto got = r.add((*list)[i], 1000);
    ASSERT_TRUE(got) << got.error().message;
    if (i + 1 < list->size()) EXPECT_FALSE(*got);
    else whole = std::move(*got);
  }
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->body, m.body);
  EXPECT_EQ(whole->subject, m.subject);
  EXPECT_EQ(whole->headers, m.headers);  // part headers gone, the whole's kept in order
  EXPECT_EQ(r.pending(), 0u);
}

TEST(PartsTest, ACorruptedPartIsRefusedByTheDigest) {
  auto list = *split(big(200000), 65536);
  list[1].body[10] ^= 1;
  Reassembler r(small_limits());
  sdk::Result<std::optional<sdk::Message>> got = std::optional<sdk::Message>{};
  for (const auto& p : list) got = r.add(p, 1000);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, sdk::ErrorCode::PermissionDenied);
  EXPECT_NE(got.error().message.find("Mesh-Parts-Digest"), std::string::npos);
  EXPECT_EQ(r.pending(), 0u);
}

TEST(PartsTest, PartsThatDisagreeAreRefused) {
  auto list = *split(big(200000), 65536);
  list[1].set_header("Mesh-Signature", std::string(128, 'b'));  // another whole's header
  Reassembler r(small_limits());
  ASSERT_TRUE(r.add(list[0], 1000));
  auto got = r.add(list[1], 1000);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_EQ(r.pending(), 0u);
}

TEST(PartsTest, AnOversizeWholeIsRefusedAtItsFirstPartNamingTheLimit) {
  auto list = *split(big(200000), 65536);
  Limits l = small_limits();
  l.max_whole = 100000;
  Reassembler r(l);
  auto got = r.add(list[0], 1000);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, sdk::ErrorCode::InvalidArgument);
  EXPECT_NE(got.error().message.find("100000"), std::string::npos) << got.error().message;
  EXPECT_NE(got.error().message.find("limits.max_assembled"), std::string::npos);
  EXPECT_EQ(r.pending(), 0u);
}

TEST(PartsTest, TheBufferIsBoundedPerSenderAndExpires) {
  Limits l = small_limits();
  l.max_pending_per_sender = 2;
  l.timeout = std::chrono::milliseconds(1000);
  Reassembler r(l);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(r.add((*split(big(200000), 65536))[0], 1000));
  auto busy = r.add((*split(big(200000), 65536))[0], 1000);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, sdk::ErrorCode::Transient);
  // Another sender (subject) is not blocked by this one.
  auto other = big(200000);
  other.subject = "mesh.report.web-02";
  EXPECT_TRUE(r.add((*split(other, 65536))[0], 1000));
  // Incomplete wholes are dropped after the timeout.
  EXPECT_TRUE(r.add((*split(big(200000), 65536))[0], 5000));
  EXPECT_EQ(r.pending(), 1u);
}

TEST(PartsTest, BadPartHeadersAreRefusedByName) {
  auto p = (*split(big(200000), 65536))[0];
  Reassembler r(small_limits());
  auto q = p;
  q.set_header(kHeaderPart, "99");
  EXPECT_EQ(r.add(q, 1000).error().path, kHeaderPart);
  q = p;
  q.set_header(kHeaderPartsId, "short");
  EXPECT_EQ(r.add(q, 1000).error().path, kHeaderPartsId);
  q = p;
  q.set_header(kHeaderPartsDigest, "xyz");
  EXPECT_EQ(r.add(q, 1000).error().path, kHeaderPartsDigest);
  q = p;
  q.set_header(kHeaderParts, "1");
  EXPECT_EQ(r.add(q, 1000).error().path, kHeaderParts);
}

}  // namespace
}  // namespace mesh::protocol::parts
