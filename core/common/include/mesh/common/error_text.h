// How an Error is printed with its path, once.
#pragma once

#include <string>

#include "mesh/sdk/result.h"

namespace mesh::common {

/// `error` as "path: message" (sdk::Error::describe), except that a message that names its path
/// already — it starts with "path: " or holds ": path: ", as a file's errors with their line do
/// ("hello.toml:3: stage[0].comand: unknown key", common::ConfigFile::error_at) and a module's
/// with its source ("module: module: ..." before) — is returned as it is: the path is printed
/// once. The message alone when the path is empty. Pure; thread-safe.
std::string described(const sdk::Error& error);

}  // namespace mesh::common
