// The JUnit report: what CI systems (GitLab, Jenkins, GitHub's test reporters) read. One
// <testsuite> per delivery, one <testcase> per node (docs/reports.md, decision record 0056).
#include <algorithm>
#include <functional>
#include <cstdio>
#include <map>
#include <set>
#include <optional>
#include <sstream>
#include <vector>

#include "mesh/support/report_text.h"
#include "renderers.h"

namespace mesh::reports {
namespace {

using sdk::Value;
using support::int_field;
using support::report_list;
using support::xml_escape;

struct Case {
  std::string node;
  std::string classname;
  double time = 0;
  std::string body;  // <failure>/<skipped>/<system-out> lines, or empty for a pass
  bool failed = false;
  bool skipped = false;
};

struct Suite {
  std::string name;
  std::string timestamp;
  std::vector<Case> cases;
};

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

/// When a delivery was written, or when a node answered: `at_ms` (epoch milliseconds) when the
/// object has it, else its `at` (RFC 3339, whole seconds); nullopt when it has neither.
std::optional<std::int64_t> instant_of(const Value& v) {
  if (const Value* ms = v.find("at_ms"); ms && ms->is_int() && ms->as_int() > 0) return ms->as_int();
  return support::parse_rfc3339_ms(v.get_string("at"));
}

/// Seconds from `base` (the write of the entry's delivery) to the entry's answer, when both are
/// known and in that order; else 0.
double elapsed(const std::optional<std::int64_t>& base, const Value& entry) {
  auto to = instant_of(entry);
  if (!base || !to || *to < *base) return 0;
  return static_cast<double>(*to - *base) / 1000.0;
}

std::string superseded_text(const Value& s) {
  const Value* by = s.find("by");
  if (!by || !by->is_object()) return "applied revision " + int_field(s, "applied_revision");
  return "by revision " + int_field(*by, "revision") + " (delivery " + int_field(*by, "delivery") + ", " +
         by->get_string("outcome") + ")";
}

Case skipped_case(const std::string& node, const std::string& cls, const std::string& message) {
  Case c{node, cls, 0, "    <skipped message=\"" + xml_escape(message) + "\"/>\n", false, true};
  return c;
}

/// Picks the suite of a node: the wave that holds it, else `fallback`.
struct SuiteIndex {
  std::vector<Suite>& suites;
  std::map<std::string, std::size_t> by_node;
  std::size_t fallback = 0;
  std::size_t operator()(const std::string& node) const {
    auto it = by_node.find(node);
    return it == by_node.end() ? fallback : it->second;
  }
};

/// The four outcome lists of a report, each entry as a case of the suite `suite_of(node)` picks;
/// `base_of(suite)` is the timestamp its times count from.
void add_outcomes(const Value& report, const std::string& cls, std::int64_t now_ms, const SuiteIndex& suite_of,
                  const std::function<std::optional<std::int64_t>(std::size_t)>& base_of) {
  for (const auto& a : report_list(report, "applied")) {
    const std::size_t s = suite_of(a.get_string("node"));
    Case c{a.get_string("node"), cls, elapsed(base_of(s), a), "", false, false};
    suite_of.suites[s].cases.push_back(std::move(c));
  }
  for (const auto& f : report_list(report, "failed")) {
    const std::size_t s = suite_of(f.get_string("node"));
    Case c{f.get_string("node"), cls, elapsed(base_of(s), f),
           "    <failure type=\"" + xml_escape(f.get_string("outcome", "failed")) + "\" message=\"" +
               xml_escape(support::failure_detail(f, "")) + "\">" + xml_escape(f.get_string("reason")) +
               "</failure>\n",
           true, false};
    suite_of.suites[s].cases.push_back(std::move(c));
  }
  for (const auto& o : report_list(report, "outstanding")) {
    const std::size_t s = suite_of(o.get_string("node"));
    suite_of.suites[s].cases.push_back(skipped_case(
        o.get_string("node"), cls, "outstanding: last seen " + support::last_contact(o, now_ms, true)));
  }
  for (const auto& x : report_list(report, "superseded")) {
    const std::size_t s = suite_of(x.get_string("node"));
    suite_of.suites[s].cases.push_back(
        skipped_case(x.get_string("node"), cls, "superseded: " + x.get_string("node") + " " + superseded_text(x)));
  }
}

std::string xml(const std::string& root_name, const std::vector<Suite>& suites) {
  std::size_t tests = 0, failures = 0, skipped = 0;
  double time = 0;
  std::ostringstream body;
  for (const auto& s : suites) {
    std::size_t f = 0, k = 0;
    double t = 0;
    std::vector<Case> cases = s.cases;
    std::stable_sort(cases.begin(), cases.end(), [](const Case& a, const Case& b) { return a.node < b.node; });
    for (const auto& c : cases) {
      f += c.failed;
      k += c.skipped;
      t = std::max(t, c.time);
    }
    tests += cases.size();
    failures += f;
    skipped += k;
    time += t;
    body << "  <testsuite name=\"" << xml_escape(s.name) << "\" tests=\"" << cases.size() << "\" failures=\"" << f
         << "\" errors=\"0\" skipped=\"" << k << "\" time=\"" << seconds(t) << "\"";
    if (!s.timestamp.empty()) body << " timestamp=\"" << xml_escape(s.timestamp) << "\"";
    body << ">\n";
    for (const auto& c : cases) {
      body << "    <testcase classname=\"" << xml_escape(c.classname) << "\" name=\"" << xml_escape(c.node)
           << "\" time=\"" << seconds(c.time) << "\"";
      if (c.body.empty()) {
        body << "/>\n";
      } else {
        body << ">\n";
        std::istringstream lines(c.body);
        for (std::string line; std::getline(lines, line);) body << "  " << line << "\n";
        body << "    </testcase>\n";
      }
    }
    body << "  </testsuite>\n";
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"" << xml_escape(root_name) << "\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << seconds(time) << "\">\n";
  x << body.str();
  x << "</testsuites>\n";
  return x.str();
}

std::string delivery_junit(const Value& report, std::int64_t now_ms) {
  const std::string delivery = int_field(report, "delivery", "0");
  std::vector<Suite> suites{{"delivery " + delivery, report.get_string("at"), {}}};
  SuiteIndex index{suites, {}, 0};
  const auto at = instant_of(report);
  add_outcomes(report, "mesh.delivery." + delivery, now_ms, index, [&](std::size_t) { return at; });
  return xml("delivery " + delivery, suites);
}

/// The names in a list of strings or of objects with a `node`.
std::vector<std::string> strings(const Value* v) {
  std::vector<std::string> out;
  if (v && v->is_array())
    for (const auto& s : v->as_array()) {
      if (s.is_string()) out.push_back(s.as_string());
      else if (s.is_object() && !s.get_string("node").empty()) out.push_back(s.get_string("node"));
    }
  return out;
}

std::string deploy_junit(const Value& report, std::int64_t now_ms) {
  const std::string id = int_field(report, "deploy", "0");
  const std::string module = report.get_string("module");
  const std::string title = report.get_bool("dry_run", false)
                                ? "deploy " + module + " " + report.get_string("version") + " (dry run)"
                                : "deploy " + id + ": " + module + " " + report.get_string("version");
  const std::string cls = "mesh.deploy." + module;
  std::vector<Suite> suites;
  std::vector<std::optional<std::int64_t>> bases;  // when each suite's delivery was written
  std::map<std::string, std::size_t> by_node;
  std::vector<std::pair<std::string, std::string>> unwritten;  // node, wave
  for (const auto& w : report_list(report, "waves")) {
    const Value* d = w.find("delivery");
    const std::string wave = int_field(w, "wave", "?");
    if (!d || !d->is_int()) {
      for (const auto& n : strings(w.find("nodes"))) unwritten.emplace_back(n, wave);
      continue;
    }
    const std::string at = w.get_string("at", report.get_string("at"));
    suites.push_back({"deploy " + id + " wave " + wave + " (delivery " + std::to_string(d->as_int()) + ")", at, {}});
    bases.push_back(w.find("at") || w.find("at_ms") ? instant_of(w) : instant_of(report));
    for (const auto& n : strings(w.find("nodes"))) by_node.emplace(n, suites.size() - 1);
  }
  if (suites.empty()) {
    // No waves listed (or none written): one suite for whatever the lists hold.
    std::string name = "deploy " + id;
    if (const Value* d = report.find("delivery"); d && d->is_int()) name += " (delivery " + std::to_string(d->as_int()) + ")";
    if (report.get_bool("dry_run", false)) name = "deploy " + module + " " + report.get_string("version") + " (dry run)";
    suites.push_back({name, report.get_string("at"), {}});
    bases.push_back(instant_of(report));
  }
  // Unchanged nodes reported with the revision they hold: a suite of their own.
  std::set<std::string> held;
  for (const char* k : {"applied", "failed", "outstanding", "superseded"})
    for (const auto& e : report_list(report, k))
      if (e.get_bool("unchanged", false)) held.insert(e.get_string("node"));
  if (!held.empty()) {
    suites.push_back({"deploy " + id + " unchanged (the revision each node holds)", report.get_string("at"), {}});
    bases.push_back(std::nullopt);  // not delivered by this deploy: no time
    for (const auto& n : held) by_node[n] = suites.size() - 1;
  }
  SuiteIndex index{suites, by_node, 0};
  add_outcomes(report, cls, now_ms, index, [&](std::size_t s) { return bases[s]; });

  // A dry run: one passing case per node with its planned changes as output.
  if (report.get_bool("dry_run", false)) {
    Value::Array nodes = report_list(report, "nodes");
    if (nodes.empty()) nodes = report_list(report, "changes");
    for (const auto& n : nodes) {
      if (!n.is_object()) continue;
      std::string out;
      for (const char* what : {"added", "changed", "removed"})
        for (const auto& r : strings(n.find(what))) out += std::string(what) + " " + r + "\n";
      suites.front().cases.push_back(
          {n.get_string("node"), cls, 0, "    <system-out>" + xml_escape(out) + "</system-out>\n", false, false});
    }
  }

  // The nodes this deploy did not deliver to: skipped (ineligible, never briefed) and those in
  // waves a halt left unwritten.
  Suite rest{"deploy " + id + " not delivered", report.get_string("at"), {}};
  for (const auto& s : report_list(report, "skipped"))
    rest.cases.push_back(skipped_case(s.get_string("node"), cls, "skipped: " + support::one_line(s.get_string("reason"))));
  for (const auto& n : strings(report.find("unchanged")))
    if (!held.count(n))
      rest.cases.push_back(skipped_case(n, cls, "unchanged: its declaration already carries " + module + " " +
                                                    report.get_string("version")));
  std::string halt;
  const Value* h = report.find("halted");
  if (h && h->is_object()) {
    halt = "deploy halted at wave " + int_field(*h, "wave", "?");
    const std::string node = h->get_string("node"), reason = support::one_line(h->get_string("reason"));
    if (!node.empty() || !reason.empty()) halt += " — ";
    if (!node.empty()) halt += node + (reason.empty() ? "" : ": ");
    halt += reason;
  } else if (report.get_string("state") == "superseded") {
    halt = "superseded by deploy " + int_field(report, "superseded_by", "?");
  }
  for (const auto& [node, wave] : unwritten)
    rest.cases.push_back(skipped_case(node, cls, "not written (wave " + wave + ")" + (halt.empty() ? "" : ": " + halt)));
  // A halt with no failed node behind it (the wave timed out short of --min-applied) is still a
  // failed deploy: one failing case says so, so that CI shows it as the exit code does.
  if (h && h->is_object()) {
    bool failed_node = false;
    for (const auto& f : report_list(report, "failed")) failed_node = failed_node || f.get_string("node") == h->get_string("node");
    if (!failed_node)
      rest.cases.push_back({"(deploy halted)", cls, 0,
                            "    <failure type=\"halted\" message=\"" + xml_escape(halt) + "\"/>\n", true, false});
  }
  if (!rest.cases.empty()) suites.push_back(std::move(rest));
  return xml(title, suites);
}

}  // namespace

std::string render_junit(const Value& report, std::int64_t now_ms) {
  return report.find("deploy") || report.get_bool("dry_run", false) ? deploy_junit(report, now_ms)
                                                                    : delivery_junit(report, now_ms);
}

sdk::Result<std::string> JunitReport::do_render(const Value& report, std::int64_t now_ms) {
  if (!report.is_object()) return sdk::fail(sdk::ErrorCode::InvalidArgument, "the report is not a JSON object");
  return render_junit(report, now_ms);
}

}  // namespace mesh::reports
