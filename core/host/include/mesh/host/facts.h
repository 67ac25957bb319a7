// The briefing's facts (decision record 54): short keyed values about this machine that module
// templates and assignment selectors read (`facts.os.id`, `facts.arch`, …). Each key, its
// source and its values are listed in docs/protocol.md "Briefing".
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace mesh::host {

/// The flat facts: key ("os.id") → value ("debian"). A fact that cannot be found is absent,
/// never an empty string, so that a template reading it fails for that node.
using Facts = std::map<std::string, std::string>;

/// Where the facts are read from; the defaults are the running machine.
struct FactSources {
  /// Prefix for the files read: `<root>/etc/os-release` (else `<root>/usr/lib/os-release`) and
  /// `<root>/run/systemd/system`. "/" is the machine itself.
  std::string root = "/";
  /// The directories searched for apt-get, dpkg, podman and docker, as in $PATH; empty: $PATH
  /// (or /usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin when unset).
  std::string path;
  /// Per program run (`dpkg --print-architecture`, `podman version`, `docker version`): it is
  /// killed and counted as not answering after this long.
  int program_timeout_ms = 2000;
};

/// What was found, with the details the briefing's info lines print.
struct MachineProbe {
  Facts facts;
  std::string os_pretty;         ///< os-release PRETTY_NAME, "" when absent
  std::string os_release_path;   ///< the os-release file read, "" when none was found
  bool apt = false, dpkg = false;  ///< apt-get and dpkg on the path
  bool systemd = false;          ///< <root>/run/systemd/system is a directory
  /// "podman 4.3.1", "docker installed but `docker version` did not answer within 2 s", or "".
  std::string container_detail;
};

/// Finds the facts:
///   os.id, os.version_id, os.codename — ID, VERSION_ID, VERSION_CODENAME of os-release(5);
///   arch — `dpkg --print-architecture` when dpkg is on the path and answers, else uname(2)'s
///          machine in dpkg's spelling (x86_64 → amd64, aarch64 → arm64, …; unknown: as is);
///   kernel — uname(2)'s release (`uname -r`);
///   package_manager — "apt" when apt-get and dpkg are both on the path, else "none";
///   service_manager — "systemd" when <root>/run/systemd/system is a directory, else "none";
///   container_engine — "podman" when podman is on the path and `podman version` answers,
///          else "docker" likewise, else "none".
/// Never fails: what cannot be read is absent (os.*, arch) or "none". Values are at most
/// kMaxFactValue bytes of printable characters (longer or unprintable os-release values are
/// left out). Runs at most three programs, each bounded by `program_timeout_ms`. Not
/// thread-safe with respect to changes of the environment.
MachineProbe probe_machine(const FactSources& sources = {});

/// The dpkg architecture name for uname(2)'s machine ("x86_64" → "amd64"); unknown: `machine`.
std::string dpkg_arch(const std::string& machine);

/// Parses one os-release value as os-release(5) quotes it (`"Debian GNU/Linux"`, `'x'`, `12`,
/// backslash escapes inside double quotes). The value without its quotes.
std::string unquote_os_release(const std::string& raw);

/// Bounds of the facts a briefing carries (the control plane refuses a briefing beyond them).
inline constexpr std::size_t kMaxFacts = 64;
inline constexpr std::size_t kMaxFactKey = 64;
inline constexpr std::size_t kMaxFactValue = 256;

}  // namespace mesh::host
