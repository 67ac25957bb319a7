// How `mesh` shows results: text for people, JSON for programs (the control plane's reply as
// is), JUnit XML for CI systems (reports only). Pure functions of the API result and the local
// time, so that they are tested without a control plane.
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

/// The delivery report for people:
///   delivery 17 (2026-11-29T07:00:00Z)
///   delivered    declaration updated for 3 nodes
///   applied      1 of 3
///   failed       1 — web-02: file:/etc/x: open /etc/x: Permission denied
///   outstanding  1 — web-04 last seen 4 minutes ago
/// `applied N of M` is always there; failed / outstanding / superseded only when non-empty;
/// a node never heard from is "last seen never". Ages come from the control plane's `age_s`
/// (its clock), else from `last_contact` and `now_ms`.
std::string render_report_text(const sdk::Value& report, std::int64_t now_ms);

/// The delivery report as a JUnit XML <testsuite>: one <testcase> per node; <failure> for a
/// failed node, <skipped> for an outstanding or superseded one.
std::string render_report_junit(const sdk::Value& report, std::int64_t now_ms);

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

/// "4 minutes ago (2026-11-29T07:00:00Z)" or "never", for an object with `last_contact` and
/// optionally `age_s`.
std::string last_contact_text(const sdk::Value& entry, std::int64_t now_ms, bool with_timestamp);

}  // namespace mesh::cli
