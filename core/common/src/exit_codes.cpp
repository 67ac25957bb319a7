#include "mesh/common/exit_codes.h"

#include <array>

namespace mesh::common {
namespace {

using sdk::ErrorCode;

constexpr std::array<ExitCodeRow, 12> kTable{{
    {ErrorCode::InvalidArgument, kExitUsage, "bad input: the message names the file, line or field"},
    {ErrorCode::NotFound, kExitUsage, "bad input: the named thing does not exist"},
    {ErrorCode::AlreadyExists, kExitUsage, "bad input: the thing exists already"},
    {ErrorCode::PermissionDenied, kExitUsage, "credentials refused: identity, role, token or broker user"},
    {ErrorCode::FailedPrecondition, kExitFailed, "could not be done now: a lock is held by another apply"},
    {ErrorCode::Failed, kExitFailed, "the operation ran and failed"},
    {ErrorCode::Transient, kExitUnreachable, "nothing answered yet: try again"},
    {ErrorCode::Unavailable, kExitUnreachable, "the control plane or broker could not be reached"},
    {ErrorCode::Timeout, kExitUnreachable, "no answer in time"},
    {ErrorCode::Cancelled, kExitFailed, "stopped before it finished"},
    {ErrorCode::Unsupported, kExitUsage, "bad input: not supported here"},
    {ErrorCode::Internal, kExitFailed, "a bug: the operation failed"},
}};

constexpr bool table_is_in_enum_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<std::size_t>(kTable[i].code) != i) return false;
  return true;
}
static_assert(table_is_in_enum_order(), "one row per sdk::ErrorCode, in enum order");
static_assert(static_cast<std::size_t>(ErrorCode::Internal) + 1 == kTable.size(), "a new ErrorCode needs a row");

}  // namespace

std::span<const ExitCodeRow> exit_code_table() noexcept { return kTable; }

int exit_code_for(sdk::ErrorCode code) noexcept {
  const auto i = static_cast<std::size_t>(code);
  return i < kTable.size() ? kTable[i].exit_code : kExitFailed;
}

}  // namespace mesh::common
