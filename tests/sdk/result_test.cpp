// Result<T> (a [[nodiscard]] class over tl::expected<T, Error>) and MESH_TRY, both in
// mesh/sdk/result.h (decision record 41). That a dropped Result warns is checked by building
// the tree with -Wall -Wextra; here: it is the same shape as tl::expected and MESH_TRY's two
// forms return errors and bind values.
#include "mesh/sdk/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <type_traits>

namespace mesh::sdk {
namespace {

static_assert(sizeof(Result<int>) == sizeof(tl::expected<int, Error>), "Result adds no state");
static_assert(sizeof(Result<void>) == sizeof(tl::expected<void, Error>), "Result adds no state");
static_assert(std::is_base_of_v<tl::expected<std::string, Error>, Result<std::string>>);
static_assert(std::is_convertible_v<tl::expected<int, Error>, Result<int>>);
static_assert(std::is_convertible_v<tl::unexpected<Error>, Result<void>>);

Result<int> number(bool ok) {
  if (!ok) return fail(ErrorCode::Transient, "busy", "store");
  return 41;
}
Result<void> check(bool ok) {
  if (!ok) return fail(ErrorCode::PermissionDenied, "no");
  return {};
}
Result<std::unique_ptr<int>> owned(bool ok) {
  if (!ok) return fail(ErrorCode::NotFound, "none");
  return std::make_unique<int>(7);
}

int evaluated = 0;
Result<int> counted() {
  ++evaluated;
  return 1;
}

Result<int> both(bool a, bool b, bool c) {
  MESH_TRY(check(a));
  MESH_TRY(n, number(b));
  MESH_TRY(p, owned(c));  // a move-only value is moved out
  return n + *p - 7 + 1;
}

Result<int> once() {
  MESH_TRY(counted());
  MESH_TRY(v, counted());
  return v;
}

TEST(ResultTest, MeshTryReturnsTheFirstErrorAndBindsValues) {
  auto ok = both(true, true, true);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 42);
  auto denied = both(false, true, true);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::PermissionDenied);
  auto busy = both(true, false, true);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, ErrorCode::Transient);
  EXPECT_EQ(busy.error().path, "store");
  auto none = both(true, true, false);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::NotFound);
}

TEST(ResultTest, MeshTryEvaluatesItsExpressionOnce) {
  evaluated = 0;
  ASSERT_TRUE(once());
  EXPECT_EQ(evaluated, 2);
}

TEST(ResultTest, ConvertsWithTlExpected) {
  tl::expected<int, Error> plain = number(true);
  EXPECT_EQ(*plain, 41);
  Result<int> mapped = number(true).map([](int v) { return v + 1; });
  EXPECT_EQ(*mapped, 42);
  Result<int> err = number(false);
  EXPECT_EQ(err.error().describe(), "store: busy");
  (void)check(true);  // a deliberate drop compiles without a warning
}

}  // namespace
}  // namespace mesh::sdk
