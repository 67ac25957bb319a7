#include "mesh/cli/exit_codes.h"

namespace mesh::cli {

int exit_code_for(sdk::ErrorCode code) noexcept { return common::exit_code_for(code); }

int report_exit_code(const sdk::Value& report, bool fail_on_outstanding) noexcept {
  auto non_empty = [&](const char* key) {
    const sdk::Value* v = report.find(key);
    return v && v->is_array() && !v->as_array().empty();
  };
  if (non_empty("failed")) return kExitFailed;
  if (fail_on_outstanding && non_empty("outstanding")) return kExitFailed;
  return kExitOk;
}

}  // namespace mesh::cli
