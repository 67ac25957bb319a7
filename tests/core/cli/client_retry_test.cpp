// When `mesh` asks an API request again (decision record 193): which operations are reads,
// idempotent writes or other writes — as docs/protocol.md's table says, which another test keeps
// equal to the control plane's own table — and what each kind of failure leads to.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "mesh/cli/client.h"

namespace mesh::cli::detail {
namespace {

using sdk::ErrorCode;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ClientRetryTest, EveryOperationsKindIsTheProtocolTables) {
  const std::string doc = read_text(std::string(MESH_TEST_SOURCE_DIR) + "/docs/protocol.md");
  const auto table = doc.find("| operation | least role | mutating |");
  ASSERT_NE(table, std::string::npos);
  std::istringstream lines(doc.substr(table));
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);
  int rows = 0;
  while (std::getline(lines, line) && line.rfind("| `", 0) == 0) {
    const auto end = line.find('`', 3);
    const std::string op = line.substr(3, end - 3);
    const std::string mutating = line.substr(line.rfind('|', line.size() - 2) + 2);
    const ApiKind want = mutating.rfind("no", 0) == 0           ? ApiKind::read
                         : mutating.rfind("idempotent", 0) == 0 ? ApiKind::idempotent
                                                                : ApiKind::write;
    EXPECT_EQ(api_kind(op), want) << op << ": " << mutating;
    ++rows;
  }
  EXPECT_GT(rows, 20);
  EXPECT_EQ(api_kind("frobnicate"), ApiKind::write) << "an unknown operation is treated as a write";
}

const sdk::Error kNoResponders{ErrorCode::Unavailable, "no responders on mesh.api.deploy", {}};
const sdk::Error kTimeout{ErrorCode::Timeout, "timed out", {}};
const sdk::Error kLinkLost{ErrorCode::Unavailable, "connection closed while waiting", {}};
const sdk::Error kNonce{ErrorCode::Unavailable,
                        "the request's nonce cannot be checked: jetstream-kv: stream info of 'MESH_STORE': Connection "
                        "Disconnected",
                        {}};
const sdk::Error kBusy{ErrorCode::Transient,
                       "the control plane is busy for operator ci (its replay cache is full: too many requests within "
                       "120 s); try again later",
                       {}};
const sdk::Error kNotYet{ErrorCode::Transient,
                         "this request (same nonce) was received before and its outcome is not known yet: it is still "
                         "being handled, or was stopped before it wrote anything",
                         {}};
const sdk::Error kStore{ErrorCode::Unavailable, "jetstream-kv: no server answers", {}};

TEST(ClientRetryTest, ADeployIsAskedAgainWithTheSameBytesUntilItsOutcomeIsKnown) {
  // The finding's three failures, for the idempotent deploy.
  EXPECT_EQ(retry_after(ApiKind::idempotent, kTimeout, false, false), Retry::same);
  EXPECT_EQ(retry_after(ApiKind::idempotent, kLinkLost, false, false), Retry::same);
  EXPECT_EQ(retry_after(ApiKind::idempotent, kNoResponders, false, false), Retry::same);
  // Refused before it ran: a fresh request, unless an earlier copy may still run somewhere.
  EXPECT_EQ(retry_after(ApiKind::idempotent, kNonce, true, false), Retry::fresh);
  EXPECT_EQ(retry_after(ApiKind::idempotent, kNonce, true, true), Retry::same);
  EXPECT_EQ(retry_after(ApiKind::idempotent, kBusy, true, false), Retry::fresh);
  // Seen before and no answer stored: still running (an unknown copy) or nothing written.
  EXPECT_EQ(retry_after(ApiKind::idempotent, kNotYet, true, true), Retry::same);
  EXPECT_EQ(retry_after(ApiKind::idempotent, kNotYet, true, false), Retry::fresh);
  // The handler's store failed: the same bytes learn whether it was written after all.
  EXPECT_EQ(retry_after(ApiKind::idempotent, kStore, true, false), Retry::same);
}

TEST(ClientRetryTest, AReadIsAskedAnewAndAnotherWriteOnlyWhenNothingOfItRan) {
  for (const auto& e : {kTimeout, kLinkLost, kNoResponders})
    EXPECT_EQ(retry_after(ApiKind::read, e, false, false), Retry::fresh) << e.message;
  for (const auto& e : {kNonce, kBusy, kStore}) EXPECT_EQ(retry_after(ApiKind::read, e, true, false), Retry::fresh);
  EXPECT_EQ(retry_after(ApiKind::write, kNoResponders, false, false), Retry::fresh);
  EXPECT_EQ(retry_after(ApiKind::write, kNonce, true, false), Retry::fresh);
  EXPECT_EQ(retry_after(ApiKind::write, kBusy, true, false), Retry::fresh);
  // It may have run: a token issued twice, an operator added twice — never asked again.
  EXPECT_EQ(retry_after(ApiKind::write, kTimeout, false, false), Retry::no);
  EXPECT_EQ(retry_after(ApiKind::write, kLinkLost, false, false), Retry::no);
  EXPECT_EQ(retry_after(ApiKind::write, kStore, true, false), Retry::no);
}

TEST(ClientRetryTest, OnlyTryAgainAnswersAreAskedAgain) {
  for (auto kind : {ApiKind::read, ApiKind::write, ApiKind::idempotent})
    for (auto code : {ErrorCode::InvalidArgument, ErrorCode::PermissionDenied, ErrorCode::NotFound, ErrorCode::Failed,
                      ErrorCode::FailedPrecondition, ErrorCode::Internal}) {
      EXPECT_EQ(retry_after(kind, sdk::Error{code, "refused", {}}, true, false), Retry::no);
      EXPECT_EQ(retry_after(kind, sdk::Error{code, "refused", {}}, false, true), Retry::no);
    }
}

TEST(ClientRetryTest, WhatEachFailureProves) {
  EXPECT_TRUE(not_received(kNoResponders));
  EXPECT_TRUE(not_received(sdk::Error{ErrorCode::Unavailable, "not connected", {}}));
  EXPECT_FALSE(not_received(kTimeout));
  EXPECT_FALSE(not_received(kLinkLost));
  EXPECT_TRUE(not_handled(kNonce));
  EXPECT_TRUE(not_handled(kBusy));
  EXPECT_FALSE(not_handled(kStore));
  EXPECT_TRUE(answer_not_stored_yet(kNotYet));
  EXPECT_FALSE(answer_not_stored_yet(kBusy));
}

}  // namespace
}  // namespace mesh::cli::detail
