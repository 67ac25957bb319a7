// The one exit-code table of mesh-host, mesh-control and mesh (INTERFACE.md): a check per row.
#include <gtest/gtest.h>

#include "mesh/common/exit_codes.h"

namespace mesh::common {
namespace {

using sdk::ErrorCode;

struct Row {
  ErrorCode code;
  int exit_code;
};

class ExitCodeRowTest : public ::testing::TestWithParam<Row> {};

TEST_P(ExitCodeRowTest, MapsAsDocumented) {
  const Row r = GetParam();
  EXPECT_EQ(exit_code_for(r.code), r.exit_code) << sdk::to_string(r.code);
  const auto table = exit_code_table();
  const auto i = static_cast<std::size_t>(r.code);
  ASSERT_LT(i, table.size());
  EXPECT_EQ(table[i].code, r.code);
  EXPECT_EQ(table[i].exit_code, r.exit_code);
  EXPECT_NE(std::string(table[i].meaning), "");
}

INSTANTIATE_TEST_SUITE_P(
    EveryErrorKind, ExitCodeRowTest,
    ::testing::Values(Row{ErrorCode::InvalidArgument, kExitUsage}, Row{ErrorCode::NotFound, kExitUsage},
                      Row{ErrorCode::AlreadyExists, kExitUsage},
                      Row{ErrorCode::PermissionDenied, kExitUsage},     // credentials refused: 2 everywhere
                      Row{ErrorCode::FailedPrecondition, kExitFailed},  // a lock held by another apply: 1
                      Row{ErrorCode::Failed, kExitFailed}, Row{ErrorCode::Transient, kExitUnreachable},
                      Row{ErrorCode::Unavailable, kExitUnreachable}, Row{ErrorCode::Timeout, kExitUnreachable},
                      Row{ErrorCode::Cancelled, kExitFailed}, Row{ErrorCode::Unsupported, kExitUsage},
                      Row{ErrorCode::Internal, kExitFailed}),
    [](const ::testing::TestParamInfo<Row>& info) {
      std::string name = sdk::to_string(info.param.code);
      std::erase(name, '_');
      return name;
    });

TEST(ExitCodeTableTest, HasOneRowPerErrorKind) {
  EXPECT_EQ(exit_code_table().size(), static_cast<std::size_t>(ErrorCode::Internal) + 1);
}

}  // namespace
}  // namespace mesh::common
