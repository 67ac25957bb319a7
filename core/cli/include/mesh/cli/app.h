// `mesh`: the operator's and CI's command line (INTERFACE.md "mesh").
#pragma once

#include <iosfwd>

namespace mesh::cli {

/// Parses the command line, runs one command against the control plane and writes its result to
/// `out` (errors to `err`). Returns the exit code (see exit_codes.h).
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace mesh::cli
