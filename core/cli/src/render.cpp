#include "mesh/cli/render.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <vector>

#include "mesh/common/clock.h"
#include "mesh/common/text.h"

namespace mesh::cli {
namespace {

using sdk::Value;

const Value::Array& array_of(const Value& v, const char* key) {
  static const Value::Array empty;
  const Value* a = v.find(key);
  return a && a->is_array() ? a->as_array() : empty;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string plural(std::int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// A table: a header row and rows, columns separated by two spaces, the last one unpadded.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i)
      line += i + 1 == r.size() ? r[i] : pad(r[i], width[i] + 2);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string int_text(const Value& v, const char* key, const char* none = "-") {
  const Value* x = v.find(key);
  if (!x || !x->is_int()) return none;
  return std::to_string(x->as_int());
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      case '\t': out += "&#9;"; break;
      default:
        if (c < 0x20) out += ' ';  // not representable in XML 1.0
        else out += static_cast<char>(c);
    }
  }
  return out;
}

/// "file:/etc/x: permission_denied: open: Permission denied": the failing resource, the error
/// code (when the report has one: a report stored before codes has none) and the reason.
std::string failure_detail(const Value& f, const char* no_reason) {
  std::string s;
  if (!f.get_string("resource").empty()) s += f.get_string("resource") + ": ";
  if (!f.get_string("code").empty()) s += f.get_string("code") + ": ";
  std::string reason = one_line(f.get_string("reason"));
  s += reason.empty() ? no_reason : reason;
  return s;
}

std::string failure_text(const Value& f) {
  std::string s = f.get_string("node") + ": ";
  if (f.get_string("outcome") == "refused") s += "refused: ";
  return s + failure_detail(f, "(no reason given)");
}

constexpr std::size_t kLabel = 13;  // "outstanding  "

/// "web-01 by revision 8 (delivery 12, failed)", or "web-01 applied revision 7" without `by`.
std::string superseded_text(const Value& s) {
  const Value* by = s.find("by");
  if (!by || !by->is_object())
    return s.get_string("node") + " applied revision " + int_text(s, "applied_revision");
  return s.get_string("node") + " by revision " + int_text(*by, "revision") + " (delivery " +
         int_text(*by, "delivery") + ", " + by->get_string("outcome") + ")";
}

/// "idle, 4 s ago": the last heartbeat's state with its age (a past observation, not the present).
std::string state_text(const Value& n, std::int64_t now_ms) {
  const std::string state = n.get_string("state");
  if (state.empty()) return "-";
  if (const Value* age = n.find("state_age_s"); age && age->is_int())
    return state + ", " + common::format_age(now_ms - age->as_int() * 1000, now_ms);
  return state;
}

/// "5" or "5 (declared 6)" when a newer revision is pending.
std::string revision_text(const Value& n, const std::string& none) {
  const std::int64_t applied = n.get_int("applied_revision", 0);
  const std::int64_t declared = n.get_int("declared_revision", 0);
  std::string out = applied > 0 ? std::to_string(applied) : none;
  if (declared > applied) out += " (declared " + std::to_string(declared) + ")";
  return out;
}

}  // namespace

std::string render_json(const Value& value) { return value.to_json() + "\n"; }

Value printable_values(const Value& value, std::size_t max_bytes) {
  if (value.is_string()) return Value(common::printable(value.as_string(), max_bytes));
  if (value.is_array()) {
    Value::Array out;
    out.reserve(value.as_array().size());
    for (const auto& v : value.as_array()) out.push_back(printable_values(v, max_bytes));
    return Value(std::move(out));
  }
  if (value.is_object()) {
    Value out = Value::object();
    for (const auto& [k, v] : value.as_object()) out.set(k, printable_values(v, max_bytes));
    return out;
  }
  return value;
}

std::string last_contact_text(const Value& entry, std::int64_t now_ms, bool with_timestamp) {
  const Value* lc = entry.find("last_contact");
  if (!lc || !lc->is_string()) return "never";
  std::optional<std::int64_t> then;
  if (const Value* age = entry.find("age_s"); age && age->is_int())
    then = now_ms - age->as_int() * 1000;  // the control plane's clock, not ours
  else
    then = common::parse_rfc3339(lc->as_string());
  std::string age = then ? common::format_age(*then, now_ms) : std::string("at");
  return with_timestamp ? age + " (" + lc->as_string() + ")" : age;
}

std::string render_report_text(const Value& report, std::int64_t now_ms) {
  const auto& applied = array_of(report, "applied");
  const auto& failed = array_of(report, "failed");
  const auto& outstanding = array_of(report, "outstanding");
  const auto& superseded = array_of(report, "superseded");
  const std::int64_t declared = report.get_int("declared", 0);

  std::string out = "delivery " + int_text(report, "delivery", "?");
  if (!report.get_string("at").empty()) out += " (" + report.get_string("at") + ")";
  out += "\n";
  out += pad("delivered", kLabel) + "declaration updated for " + plural(declared, "node") + "\n";
  out += pad("applied", kLabel) + std::to_string(applied.size()) + " of " +
         std::to_string(declared) + "\n";
  if (!failed.empty()) {
    const std::string head = pad("failed", kLabel) + std::to_string(failed.size()) + " — ";
    const std::string indent(kLabel + std::to_string(failed.size()).size() + 3, ' ');
    for (std::size_t i = 0; i < failed.size(); ++i)
      out += (i == 0 ? head : indent) + failure_text(failed[i]) + "\n";
  }
  if (!outstanding.empty()) {
    out += pad("outstanding", kLabel) + std::to_string(outstanding.size()) + " — ";
    for (std::size_t i = 0; i < outstanding.size(); ++i)
      out += (i ? ", " : "") + outstanding[i].get_string("node") + " last seen " +
             last_contact_text(outstanding[i], now_ms, false);
    out += "\n";
  }
  if (!superseded.empty()) {
    out += pad("superseded", kLabel) + std::to_string(superseded.size()) + " — ";
    for (std::size_t i = 0; i < superseded.size(); ++i)
      out += (i ? ", " : "") + superseded_text(superseded[i]);
    out += "\n";
  }
  return out;
}

std::string render_report_junit(const Value& report, std::int64_t now_ms) {
  const auto& applied = array_of(report, "applied");
  const auto& failed = array_of(report, "failed");
  const auto& outstanding = array_of(report, "outstanding");
  const auto& superseded = array_of(report, "superseded");
  const std::string delivery = int_text(report, "delivery", "0");
  const std::string suite = "delivery " + delivery;
  const std::string cls = "mesh.delivery." + delivery;
  const std::size_t tests = applied.size() + failed.size() + outstanding.size() + superseded.size();

  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << tests << "\" failures=\""
    << failed.size() << "\" errors=\"0\" skipped=\"" << outstanding.size() + superseded.size()
    << "\"";
  if (!report.get_string("at").empty())
    x << " timestamp=\"" << xml_escape(report.get_string("at")) << "\"";
  x << ">\n";
  struct Case {
    std::string node;
    std::string body;
  };
  std::vector<Case> cases;
  for (const auto& a : applied)
    cases.push_back({a.get_string("node"), ""});
  for (const auto& f : failed) {
    const std::string message = failure_detail(f, "");
    cases.push_back({f.get_string("node"),
                     "    <failure type=\"" + xml_escape(f.get_string("outcome", "failed")) +
                         "\" message=\"" + xml_escape(message) + "\">" +
                         xml_escape(f.get_string("reason")) + "</failure>\n"});
  }
  for (const auto& o : outstanding)
    cases.push_back({o.get_string("node"),
                     "    <skipped message=\"" +
                         xml_escape("outstanding: last seen " + last_contact_text(o, now_ms, true)) +
                         "\"/>\n"});
  for (const auto& s : superseded)
    cases.push_back({s.get_string("node"),
                     "    <skipped message=\"" +
                         xml_escape("superseded: " + superseded_text(s)) +
                         "\"/>\n"});
  std::stable_sort(cases.begin(), cases.end(),
                   [](const Case& a, const Case& b) { return a.node < b.node; });
  for (const auto& c : cases) {
    x << "  <testcase classname=\"" << xml_escape(cls) << "\" name=\"" << xml_escape(c.node) << "\"";
    if (c.body.empty())
      x << "/>\n";
    else
      x << ">\n" << c.body << "  </testcase>\n";
  }
  x << "</testsuite>\n";
  return x.str();
}

// "yes", "no", or "unknown" for a node never briefed (`eligible: null`).
static std::string eligible_text(const Value& n) {
  const Value* e = n.find("eligible");
  if (!e || !e->is_bool()) return "unknown";
  return e->as_bool() ? "yes" : "no";
}

std::string render_nodes_text(const Value& nodes, std::int64_t now_ms) {
  if (!nodes.is_array() || nodes.as_array().empty())
    return "no nodes enrolled (issue a token with: mesh token issue NODE)\n";
  // `mesh nodes --all`: a REMOVED column when the list has removed nodes.
  bool removed = false;
  for (const auto& n : nodes.as_array()) removed = removed || n.find("removed_at");
  std::vector<std::vector<std::string>> rows{
      {"NAME", "ELIGIBLE", "LAST-CONTACT", "REVISION", "OUTCOME", "STATE"}};
  if (removed) rows[0].push_back("REMOVED");
  for (const auto& n : nodes.as_array()) {
    std::string outcome = n.get_string("last_outcome");
    rows.push_back({n.get_string("name"), eligible_text(n),
                    last_contact_text(n, now_ms, true), revision_text(n, "-"),
                    outcome.empty() ? "-" : outcome, state_text(n, now_ms)});
    if (removed) rows.back().push_back(n.find("removed_at") ? n.get_string("removed_at") : "-");
  }
  return table(rows);
}

std::string render_node_text(const Value& n, std::int64_t now_ms) {
  std::string out;
  auto line = [&](const std::string& label, const std::string& value) {
    out += value.empty() ? label + "\n" : pad(label, 14) + value + "\n";
  };
  line("node", n.get_string("name"));
  const std::string eligible = eligible_text(n);
  line("eligible", eligible == "no"        ? "no (its latest briefing has a failed line)"
                   : eligible == "unknown" ? "unknown (no briefing yet: run `mesh-host brief` on the node)"
                                           : eligible);
  line("enrolled", n.get_string("enrolled_at") +
                       (n.get_int("generation", 0) > 1
                            ? " (identity generation " + int_text(n, "generation") + ")"
                            : ""));
  line("last contact", last_contact_text(n, now_ms, true));
  std::string rev = revision_text(n, "none");
  if (!n.get_string("last_outcome").empty()) rev += " (last apply " + n.get_string("last_outcome") + ")";
  line("revision", rev);
  std::string host = n.get_string("host_version").empty() ? "-" : n.get_string("host_version");
  if (!n.get_string("state").empty()) host += ", " + state_text(n, now_ms);
  line("host", host);

  const auto& owned = array_of(n, "owned");
  line("owned", owned.empty() ? "nothing" : plural(static_cast<std::int64_t>(owned.size()), "resource"));
  for (const auto& o : owned)
    if (o.is_string()) out += "  " + o.as_string() + "\n";

  const auto& applies = array_of(n, "applies");
  line("applies", applies.empty() ? "none yet" : "");
  if (!applies.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& a : applies) {
      std::string what;
      if (!a.get_string("resource").empty()) what = a.get_string("resource") + ": ";
      if (!a.get_string("code").empty()) what += a.get_string("code") + ": ";
      what += one_line(a.get_string("reason"));
      rows.push_back({"  " + int_text(a, "revision"), a.get_string("outcome"), a.get_string("at"), what});
    }
    out += table(rows);
  }

  const Value* drift = n.find("last_drift");
  if (drift && drift->is_object()) {
    const auto& items = array_of(*drift, "resources");
    line("last drift", drift->get_string("at") + ": " +
                           plural(static_cast<std::int64_t>(items.size()), "resource"));
    for (const auto& i : items)
      out += "  " + i.get_string("resource") + ": " + i.get_string("found") +
             (i.get_string("action").empty() ? "" : " (" + i.get_string("action") + ")") + "\n";
  } else {
    line("last drift", "none");
  }
  const Value* scan = n.find("last_scan_at");
  line("last scan", scan && scan->is_string() ? scan->as_string() : "never");

  const Value* briefing = n.find("briefing");
  if (!briefing || briefing->is_null()) {
    line("briefing", "none");
  } else {
    std::string outcome = briefing->get_string("outcome");
    line("briefing", outcome.empty() ? "present (see --output json)" : outcome);
    for (const auto& l : array_of(*briefing, "lines")) {
      std::string name = l.get_string("check", l.get_string("name"));
      std::string status = l.get_string("outcome", l.get_string("status"));
      std::string detail = l.get_string("detail", l.get_string("message"));
      out += "  " + pad(status, 6) + " " + name + (detail.empty() ? "" : ": " + one_line(detail)) + "\n";
    }
  }
  return out;
}

std::string render_token_issued_text(const Value& t) {
  const std::string token = t.get_string("token");
  std::string out;
  out += "token    " + token + "\n";
  out += "node     " + t.get_string("node") + "\n";
  out += "id       " + t.get_string("id") + "\n";
  out += "expires  " + t.get_string("expires_at") + "\n";
  out += std::string("reenrol  ") + (t.get_bool("reenrol", false) ? "yes" : "no") + "\n";
  out += "The token is shown this once. On the machine, run:\n";
  out += "  mesh-host enrol --config host.toml --token " + token + "\n";
  return out;
}

std::string render_tokens_text(const Value& tokens) {
  if (!tokens.is_array() || tokens.as_array().empty()) return "no outstanding tokens\n";
  std::vector<std::vector<std::string>> rows{{"ID", "NODE", "EXPIRES", "REENROL"}};
  for (const auto& t : tokens.as_array())
    rows.push_back({t.get_string("id"), t.get_string("node"), t.get_string("expires_at"),
                    t.get_bool("reenrol", false) ? "yes" : "no"});
  return table(rows);
}

std::string render_token_revoked_text(const Value& r) {
  return "token " + r.get_string("id") + " revoked\n";
}

std::string render_declared_text(const Value& r) {
  std::string nodes;
  for (const auto& n : array_of(r, "nodes"))
    if (n.is_string()) nodes += (nodes.empty() ? "" : ", ") + n.as_string();
  return "delivery " + int_text(r, "delivery", "?") + ": declared revision " +
         int_text(r, "revision", "?") + " for " + nodes + "\n";
}

std::string render_rollback_text(const Value& r, const std::string& node) {
  return "delivery " + int_text(r, "delivery", "?") + ": " + node + " rolled back to revision " +
         int_text(r, "to", "?") + " as revision " + int_text(r, "revision", "?") + "\n";
}

std::string render_history_text(const Value& history) {
  if (!history.is_array() || history.as_array().empty()) return "no revisions\n";
  // A control plane that keeps compositions (decision record 63) says which module versions each
  // revision carried, who asked and why; an older one does not, and its columns are not shown.
  const bool composed = std::any_of(history.as_array().begin(), history.as_array().end(),
                                    [](const Value& h) { return h.find("modules") != nullptr; });
  if (!composed) {
    std::vector<std::vector<std::string>> rows{{"REVISION", "CREATED", "DELIVERY", "DIGEST"}};
    for (const auto& h : history.as_array())
      rows.push_back({int_text(h, "revision"), h.get_string("at"), int_text(h, "delivery"),
                      h.get_string("digest").substr(0, 12)});
    return table(rows);
  }
  std::vector<std::vector<std::string>> rows{{"REVISION", "CREATED", "DELIVERY", "CAUSE", "OPERATOR", "MODULES", "DIGEST"}};
  for (const auto& h : history.as_array()) {
    std::string modules;
    if (const Value* m = h.find("modules"); m && m->is_object())
      for (const auto& [name, version] : m->as_object())
        modules += (modules.empty() ? "" : ",") + name + "@" + (version.is_string() ? version.as_string() : "?");
    std::string cause = h.get_string("cause", "-");
    if (const Value* d = h.find("deploy"); d && d->is_int()) cause += " " + std::to_string(d->as_int());
    rows.push_back({int_text(h, "revision"), h.get_string("at"), int_text(h, "delivery"), cause,
                    h.get_string("operator", "-"), modules.empty() ? "-" : modules, h.get_string("digest").substr(0, 12)});
  }
  return table(rows);
}

}  // namespace mesh::cli
