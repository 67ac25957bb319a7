// How `mesh` shows results other than reports: text for people, JSON for programs (the control
// plane's reply as is). Reports (`mesh report`, `mesh deploy`) print through report plugins
// (report_output.h; the `text`, `json` and `junit` plugins in reports/). Pure functions of the API
// result and the local time, so that they are tested without a control plane.
#pragma once

#include <cstdint>
#include <string>

#include "mesh/sdk/value.h"

namespace mesh::cli {

/// One JSON document and a newline.
std::string render_json(const sdk::Value& value);

/// `value` with every string in it (at any depth; object keys are left as they are) passed
/// through common::printable(s, max_bytes): what every text renderer below is given, so that no
/// value from a node or the broker can put a control character, an escape sequence or a line
/// break on the operator's terminal. JSON output (render_json) is the reply as it came. Pure.
sdk::Value printable_values(const sdk::Value& value, std::size_t max_bytes = 1024);

/// `mesh nodes`: a table NAME ELIGIBLE LAST-CONTACT REVISION OUTCOME; last contact as an age and
/// a timestamp, "never" when never heard from (silence is never shown as "down").
std::string render_nodes_text(const sdk::Value& nodes, std::int64_t now_ms);
/// `mesh node show`.
std::string render_node_text(const sdk::Value& node, std::int64_t now_ms);
/// `mesh token issue` / `token list` / `token revoke`.
std::string render_token_issued_text(const sdk::Value& token);
std::string render_tokens_text(const sdk::Value& tokens);
std::string render_token_revoked_text(const sdk::Value& result);
/// `mesh declare`: "delivery 17: declared revision 43 for web-01".
std::string render_declared_text(const sdk::Value& result);
/// `mesh rollback`: "delivery 18: web-01 rolled back to revision 41 as revision 44".
std::string render_rollback_text(const sdk::Value& result, const std::string& node);
/// `mesh history`: REVISION CREATED DELIVERY DIGEST.
std::string render_history_text(const sdk::Value& history);

/// `mesh module list`: a table MODULE VERSIONS ASSIGNED (versions comma-separated; the
/// assignment's selector, or "not assigned"); "no modules" for none. Pure.
std::string render_modules_text(const sdk::Value& modules);
/// `mesh module show MODULE`: "module NAME", a table VERSION PUSHED OPERATOR DIGEST (the digest's
/// first 12 characters), and "assigned to SELECTOR" or "not assigned". Pure.
std::string render_module_versions_text(const sdk::Value& module);
/// `mesh assignments`: a table MODULE SELECTOR OPERATOR AT; "no assignments" for none. Pure.
std::string render_assignments_text(const sdk::Value& assignments);

/// "4 minutes ago (2026-11-29T07:00:00Z)" or "never", for an object with `last_contact` and
/// optionally `age_s`.
std::string last_contact_text(const sdk::Value& entry, std::int64_t now_ms, bool with_timestamp);

}  // namespace mesh::cli
