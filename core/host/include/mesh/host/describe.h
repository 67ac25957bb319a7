// A provider's schema as `mesh-host plugins describe TYPE` shows it: text for a terminal, JSON for
// tools, and Markdown for the property tables in docs/providers.md (generated from the same
// schemas, so the docs cannot drift from what the host checks).
#pragma once

#include <string>

#include "mesh/sdk/schema.h"
#include "mesh/sdk/value.h"

namespace mesh::host {

/// `{"name","description","id_format","attributes":[{"name","type","required","description",
/// "allowed"?,"default"?,"min"?,"max"?,"read_only","sensitive"}],"exclusive":[[...]]}`. A
/// sensitive attribute's default is shown as "(sensitive value)". `min`/`max` are as in the
/// schema (milliseconds for durations, bytes for sizes). Pure; thread-safe.
sdk::Value schema_json(const sdk::Schema& schema);

/// The same as text: a heading line ("file — id format absolute_path"), the description, one
/// block per attribute (name, type, required/optional, default, bounds, flags, description), and
/// the exclusive groups. Ends in '\n'. Pure; thread-safe.
std::string schema_text(const sdk::Schema& schema);

/// A Markdown section: "### TYPE", the description, the id format, and a table
/// `| Property | Type | Required | Default | Description |`. `|` and newlines in texts are
/// escaped. Ends in '\n'. Pure; thread-safe.
std::string schema_markdown(const sdk::Schema& schema);

}  // namespace mesh::host
