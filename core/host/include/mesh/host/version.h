// The running host's version (docs/decisions/0076 "Versions"): the `Version` of the Debian
// package that owns its executable, or the build's project version when no package does.
#pragma once

#include <string>

namespace mesh::host {

struct HostVersion {
  std::string version;   ///< e.g. "0.2.0-1"; never empty
  std::string package;   ///< the owning Debian package ("nox-mesh-host"), "" when none
  std::string executable;  ///< the path asked about
};

/// The absolute path of the running program (/proc/self/exe, read once; "" when unreadable).
/// Read at start: once a package upgrade replaced the file, /proc/self/exe names it "(deleted)".
const std::string& self_executable();

/// Asks dpkg which package owns `executable` (`dpkg-query -S`, then `-W -f ${Version}`), each
/// with a 10 s limit and no shell. When dpkg-query is missing, no package owns the file or an
/// answer is malformed: the build's version (protocol::kHostVersion) and package "". Never
/// fails. Thread-safe; runs two processes each call.
HostVersion query_host_version(const std::string& executable);

/// query_host_version(self_executable()), computed on the first call and kept: the version
/// `mesh-host --version` prints, the heartbeat and the enrolment carry. Thread-safe.
const HostVersion& running_version();

}  // namespace mesh::host
