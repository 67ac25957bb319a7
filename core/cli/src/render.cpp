#include "mesh/cli/render.h"

#include <algorithm>
#include <optional>
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
      {"NAME", "ELIGIBLE", "LAST-CONTACT", "REVISION", "OUTCOME", "STATE", "HOST-VERSION"}};
  if (removed) rows[0].push_back("REMOVED");
  for (const auto& n : nodes.as_array()) {
    std::string outcome = n.get_string("last_outcome");
    rows.push_back({n.get_string("name"), eligible_text(n),
                    last_contact_text(n, now_ms, true), revision_text(n, "-"),
                    outcome.empty() ? "-" : outcome, state_text(n, now_ms),
                    n.get_string("host_version").empty() ? "-" : n.get_string("host_version")});
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

  // Operator labels and briefing facts (decision record 54): what selectors and templates read.
  std::string labels;
  if (const Value* l = n.find("labels"); l && l->is_object())
    for (const auto& [key, value] : l->as_object())
      if (value.is_string()) labels += (labels.empty() ? "" : ", ") + key + "=" + value.as_string();
  line("labels", labels.empty() ? "none" : labels);
  std::vector<std::vector<std::string>> fact_rows;
  if (const Value* f = n.find("facts"); f && f->is_object())
    for (const auto& [key, value] : f->as_object())
      if (value.is_string()) fact_rows.push_back({"  " + key, one_line(value.as_string())});
  line("facts", fact_rows.empty() ? "none (no briefing with facts yet)" : "");
  if (!fact_rows.empty()) out += table(fact_rows);

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
  // The --token-file form (newuser N1): --token puts the token in /proc/PID/cmdline, where every
  // local user reads it while enrolment runs, and mesh-host warns about it.
  out += "The token is shown this once. Put it in a file only root reads on the machine, then run:\n";
  out += "  (umask 077; echo " + token + " > token.txt)\n";
  out += "  mesh-host enrol --config host.toml --token-file token.txt   # or --token-file - to read stdin\n";
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

std::string render_modules_text(const Value& modules) {
  if (!modules.is_array() || modules.as_array().empty()) return "no modules\n";
  std::vector<std::vector<std::string>> rows{{"MODULE", "VERSIONS", "ASSIGNED"}};
  for (const auto& m : modules.as_array()) {
    std::string versions;
    for (const auto& v : array_of(m, "versions"))
      versions += (versions.empty() ? "" : ", ") + v.get_string("version");
    const Value* s = m.find("selector");
    rows.push_back({m.get_string("module"), versions.empty() ? "-" : versions,
                    s && s->is_string() ? s->as_string() : std::string("not assigned")});
  }
  return table(rows);
}

std::string render_module_versions_text(const Value& module) {
  std::string out = "module " + module.get_string("module") + "\n";
  std::vector<std::vector<std::string>> rows{{"VERSION", "PUSHED", "OPERATOR", "DIGEST"}};
  for (const auto& v : array_of(module, "versions"))
    rows.push_back({v.get_string("version"), v.get_string("at"), v.get_string("operator", "-"),
                    v.get_string("digest").substr(0, 12)});
  if (rows.size() > 1) out += table(rows);
  const Value* as = module.find("assignment");
  out += as && as->is_object() ? "assigned to " + as->get_string("selector") + "\n" : std::string("not assigned\n");
  return out;
}

std::string render_assignments_text(const Value& assignments) {
  if (!assignments.is_array() || assignments.as_array().empty()) return "no assignments\n";
  std::vector<std::vector<std::string>> rows{{"MODULE", "SELECTOR", "OPERATOR", "AT"}};
  for (const auto& e : assignments.as_array())
    rows.push_back({e.get_string("module"), e.get_string("selector"), e.get_string("operator", "-"), e.get_string("at")});
  return table(rows);
}

}  // namespace mesh::cli
