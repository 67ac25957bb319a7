// What the engine tests read back after an apply, written once for every engine test file.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mesh/engine/engine.h"
#include "mesh/engine/state.h"

namespace mesh::engine::testing {

/// "<resource>=<outcome>" for each resource of `r`, in the order the engine reported them.
inline std::vector<std::string> outcomes(const ApplyResult& r) {
  std::vector<std::string> out;
  for (const auto& o : r.resources) out.push_back(o.resource + "=" + o.outcome);
  return out;
}

/// The ownership set as the state directory at `state_dir` holds it on disk (opened afresh, so
/// what a restart would read); empty, with a test failure, when it cannot be opened.
inline std::vector<std::string> owned_on_disk(const std::string& state_dir) {
  auto sd = StateDir::open(state_dir);
  EXPECT_TRUE(sd);
  std::vector<std::string> out;
  if (sd)
    for (const auto& o : sd->state().owned) out.push_back(o.resource);
  return out;
}

}  // namespace mesh::engine::testing
