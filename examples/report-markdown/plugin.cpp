// The one exported symbol of mesh-report-markdown.so.
#include "markdown_report.h"

MESH_PLUGIN(report, "markdown", "0.1.0", "the report as a Markdown table", example::MarkdownReport)
