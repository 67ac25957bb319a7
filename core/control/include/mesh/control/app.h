// `mesh-control`: the command line (CLI11) and the daemon's life cycle.
#pragma once

namespace mesh::control {

/// Exit codes (INTERFACE.md): 0 clean stop (SIGTERM/SIGINT); 1 failed at run time (store cannot
/// be opened, state directory cannot be created); 2 bad usage or configuration (the message
/// names the file, line and key; a plugin that cannot be loaded).
int run_main(int argc, char** argv);

}  // namespace mesh::control
