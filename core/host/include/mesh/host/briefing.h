// The adoption briefing (ARCHITECTURE.md semantics 13): facts and checks about this machine,
// computed when it enrols and by `mesh-host brief`, sent to the control plane (which adds the
// clock line from its own clock) and printed. A `fail` line makes the node ineligible for
// assignment until a briefing passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mesh/host/facts.h"
#include "mesh/host/host_config.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

struct BriefingLine {
  std::string check;    ///< "state_dir", "disk", "plugin:file", "os", ...
  std::string outcome;  ///< "pass" | "fail" | "info"
  std::string detail;
};

/// Runs the local checks: state directory writable; free disk at the state directory at least
/// `config.min_free_mib`; each configured provider plugin loads; and the info lines: OS
/// (os-release), package manager (apt/dpkg), service manager (/run/systemd/system), container
/// engine (`podman version` / `docker version`, each at most 2 s), all read once by
/// probe_machine(`sources`) (facts.h). The clock line is the control plane's to add. When
/// `schemas` is given it is set to the list of the loaded providers' schemas (schema_json of
/// each, `name` the registered type; in config order), or to null — with an info line "schemas"
/// saying so — when their JSON exceeds kMaxBriefingSchemasBytes. When `facts` is given it is set
/// to the facts found (decision record 54). Never fails: a failed check is a `fail` line.
std::vector<BriefingLine> run_briefing_checks(const HostConfig& config, sdk::Value* schemas = nullptr,
                                              Facts* facts = nullptr, const FactSources& sources = {});

/// The bound of the `schemas` a briefing carries, in bytes of JSON (the control plane's bound).
inline constexpr std::size_t kMaxBriefingSchemasBytes = 1u << 20;

/// The body sent on mesh.briefing.<node>: {"node","at_ms","host_version","lines":[...]},
/// "schemas":[...] when `schemas` is a list, "facts":{"os.id": "debian", …} when `facts`
/// is given, and "enrolment": true when `at_enrolment` (the briefing `mesh-host enrol` sends:
/// not contact, decision record 195) (docs/protocol.md "Briefing").
std::string briefing_request_json(const std::string& node, const std::vector<BriefingLine>& lines,
                                  std::int64_t at_ms, const sdk::Value* schemas = nullptr,
                                  const Facts* facts = nullptr, bool at_enrolment = false);

/// For people:
///   briefing web-01: fail
///     pass   state_dir: /var/lib/nox-mesh is writable
///     fail   disk: 52 MiB free at /var/lib/nox-mesh (at least 100 MiB needed)
///     facts  arch=amd64, container_engine=none, kernel=6.1.0-28-amd64, os.id=debian, …
///   eligible: no (a failed line makes the node ineligible for assignment)
/// `briefing` is the control plane's reply ({"outcome","lines"}) or a local one.
std::string briefing_text(const std::string& node, const sdk::Value& briefing);

/// A briefing document from local lines (and facts, when given) alone, when the control plane
/// could not be reached.
sdk::Value local_briefing(const std::string& node, const std::vector<BriefingLine>& lines,
                          const Facts* facts = nullptr);

}  // namespace mesh::host
