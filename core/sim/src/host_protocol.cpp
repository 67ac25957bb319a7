// One simulated host's side of the protocol (docs/protocol.md), built from the host's own code:
// the enrolment exchange (mesh/host/enrol.h), the declaration checks and the heartbeat
// (mesh/host/node_messages.h), the apply report (mesh/host/report.h), the declaration parser
// (mesh/engine), and the signed texts of mesh/common/trust.h. What differs from mesh-host: the
// apply happens in memory (nothing on the machine changes), the outbox is in memory, and the
// latest declaration is asked without a private inbox for replies in parts (declarations of
// mesh-sim's fleets fit in one message).
#include <algorithm>
#include <cstdio>
#include <set>

#include <spdlog/spdlog.h>

#include "fleet.h"
#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/common/trust.h"
#include "mesh/engine/declaration.h"
#include "mesh/engine/engine.h"
#include "mesh/host/briefing.h"
#include "mesh/host/enrol.h"
#include "mesh/host/node_messages.h"
#include "mesh/host/report.h"

namespace mesh::sim::detail {

namespace {

using namespace std::chrono_literals;
constexpr std::size_t kMaxAssembled = protocol::parts::kDefaultMaxAssembled;
/// How long a report and a `latest` request wait for their answer (as mesh-host's).
constexpr std::chrono::milliseconds kReportTimeout{5000};
constexpr std::chrono::milliseconds kLatestTimeout{10000};

const char* state_name(int s) { return s == 1 ? "applying" : s == 2 ? "failed" : "idle"; }

void start_apply(Fleet& fleet, SimHost& h);

/// A refused declaration message, reported with outcome `refused` (best effort, not kept), as the
/// host does.
void send_refusal(Fleet& fleet, SimHost& h, std::uint64_t revision, const sdk::Error& why, const std::string& body) {
  fleet.counters().refused++;
  common::logger()->warn("refused declaration node={} revision={} outcome=refused reason=\"{}\"", h.name, revision,
                         common::printable(why.message, 512));
  if (revision == 0) return;
  engine::ApplyResult r;
  r.revision = revision;
  r.outcome = "refused";
  r.reason = why.message;
  r.code = sdk::to_string(why.code);
  {
    std::lock_guard lk(h.mu);
    r.owned = h.owned;
  }
  auto built = common::parse_json(host::apply_report_json(h.name, r, common::now_ms()), common::JsonLimits{SIZE_MAX, 32});
  if (!built) return;
  sdk::Value v = std::move(*built);
  v.set("digest", common::sha256_hex(body));
  auto req = std::make_shared<sdk::Message>(protocol::make_message(protocol::report_subject(h.name), v.to_json()));
  req->set_header(protocol::kHeaderNode, h.name);
  req->set_header(protocol::kHeaderRevision, std::to_string(revision));
  trust::sign_report(*req, h.id.secret_key);
  fleet.request_async(*h.group, req, kReportTimeout, [](sdk::Result<sdk::Message>&&) {});
}

/// The checks of a pushed or fetched declaration, then the desired-state slot.
void take_declaration(Fleet& fleet, SimHost& h, sdk::Message& m) {
  auto rev = host::check_declaration_message(m, h.name, h.id.control_key, kMaxAssembled);
  if (!rev) return send_refusal(fleet, h, protocol::revision_header(m).value_or(0), rev.error(), m.body);
  bool start = false;
  {
    std::lock_guard lk(h.mu);
    if (*rev < h.applied_revision) {
      common::logger()->info("declaration ignored node={} revision={} reason=\"older than the applied revision {}\"",
                             h.name, *rev, h.applied_revision);
      return;
    }
    if (*rev == h.applied_revision && common::sha256_hex(m.body) == h.applied_digest) return;  // a duplicate
    if (h.applying_revision != 0) {
      // Applying: the newest waits (desired state, not a queue); an older one never replaces it.
      if (*rev > h.applying_revision && *rev > h.pending_revision) {
        h.pending_revision = *rev;
        h.pending_text = std::move(m.body);
      }
      return;
    }
    h.applying_revision = *rev;
    h.applying_text = std::move(m.body);
    h.state = 1;
    start = true;
  }
  if (start) start_apply(fleet, h);
}

/// Ends the apply in progress: parsed against the providers' schemas, then applied (or failed,
/// by the failure rate) in memory, reported and kept until acknowledged.
void finish_apply(Fleet& fleet, SimHost& h) {
  std::string text;
  std::uint64_t rev = 0, newer = 0;
  std::vector<std::string> owned_before;
  {
    std::lock_guard lk(h.mu);
    text = std::move(h.applying_text);
    rev = h.applying_revision;
    newer = h.pending_revision > rev ? h.pending_revision : 0;
    owned_before = h.owned;
  }
  engine::ParseOptions opts;
  opts.max_bytes = kMaxAssembled;
  opts.expected_node = h.name;
  opts.allow_revision = true;
  auto parsed = engine::parse_declaration_all(text, fleet.providers().registry, opts);
  engine::ApplyResult r;
  r.revision = rev;
  r.owned = owned_before;
  r.owned_digests.assign(r.owned.size(), "");
  std::string digest;
  if (!parsed.declaration) {
    std::string reasons;
    for (const auto& d : parsed.diagnostics) reasons += (reasons.empty() ? "" : "; ") + d.text;
    r.outcome = "failed";
    r.reason = "invalid declaration: " + reasons;
    r.code = sdk::to_string(parsed.diagnostics.empty() ? sdk::ErrorCode::InvalidArgument : parsed.diagnostics.front().code);
  } else if (parsed.declaration->revision != rev) {
    {
      std::lock_guard lk(h.mu);
      h.applying_revision = 0;
      h.state = 0;
    }
    send_refusal(fleet, h, rev,
                 sdk::Error{sdk::ErrorCode::InvalidArgument,
                            "the body says revision " + std::to_string(parsed.declaration->revision) +
                                " but the signed header says " + std::to_string(rev),
                            {}},
                 text);
    return;
  } else if (newer != 0) {
    r.outcome = "superseded";
    r.reason = "cancelled: revision " + std::to_string(newer) + " arrived while it was applied";
    r.code = sdk::to_string(sdk::ErrorCode::Cancelled);
  } else {
    const auto& decl = *parsed.declaration;
    digest = decl.digest;
    std::set<std::string> declared;
    for (const auto& res : decl.resources) declared.insert(res.rid.str());
    const std::set<std::string> before(owned_before.begin(), owned_before.end());
    if (fleet.fails(h.name, rev)) {
      r.outcome = "failed";
      r.code = sdk::to_string(sdk::ErrorCode::Failed);
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g", fleet.options().failure_rate);
      r.reason = std::string("simulated failure (mesh-sim --failure-rate ") + rate + ")";
      bool first = true;
      for (const auto& res : decl.resources) {
        engine::ResourceOutcome o;
        o.resource = res.rid.str();
        o.outcome = first ? "failed" : "not_attempted";
        if (first) {
          o.reason = r.reason;
          o.code = r.code;
          r.failed_resource = o.resource;
        }
        first = false;
        r.resources.push_back(std::move(o));
      }
    } else {
      r.outcome = "applied";
      auto outcome = [&](const std::string& resource, const char* what) {
        engine::ResourceOutcome o;
        o.resource = resource;
        o.outcome = what;
        r.resources.push_back(std::move(o));
      };
      for (const auto& res : decl.resources) outcome(res.rid.str(), before.count(res.rid.str()) ? "unchanged" : "changed");
      for (const auto& o : owned_before)
        if (!declared.count(o)) outcome(o, "removed");
      r.owned.assign(declared.begin(), declared.end());
      r.owned_digests.assign(r.owned.size(), "");
    }
  }
  auto body = host::apply_report_json(h.name, r, common::now_ms());
  bool next = false;
  {
    std::lock_guard lk(h.mu);
    h.outbox[rev] = body;
    if (r.outcome == "applied") {
      h.applied_revision = rev;
      h.applied_digest = digest;
      h.owned = r.owned;
      h.state = 0;
    } else if (r.outcome == "failed") {
      h.state = 2;
    }
    h.applying_revision = 0;
    if (h.pending_revision > rev) {
      h.applying_revision = std::exchange(h.pending_revision, 0);
      h.applying_text = std::move(h.pending_text);
      h.state = 1;
      next = true;
    }
  }
  auto& c = fleet.counters();
  (r.outcome == "applied" ? c.applied : r.outcome == "failed" ? c.failed : c.superseded)++;
  common::logger()->debug("apply done node={} revision={} outcome={} resource={}", h.name, rev, r.outcome,
                          r.failed_resource.empty() ? "-" : r.failed_resource);
  flush_outbox(fleet, h);
  if (next) start_apply(fleet, h);
}

void start_apply(Fleet& fleet, SimHost& h) {
  auto t = fleet.options().apply_time;
  if (fleet.options().apply_jitter.count() > 0) {
    const auto j = fleet.options().apply_jitter;
    t += fleet.random_ms(2 * j) - j;
  }
  if (t.count() <= 0) return finish_apply(fleet, h);
  fleet.post_at(Clock::now() + t, [&fleet, &h] { finish_apply(fleet, h); }, Fleet::Lane::First);
}

/// Whether the answer to report `req` lets it leave the outbox: acknowledged, or refused for what
/// it is or who sent it — as the host decides.
bool report_taken(Fleet& fleet, SimHost& h, std::uint64_t revision, const sdk::Message& req,
                  const sdk::Result<sdk::Message>& reply) {
  auto log = common::logger();
  if (!reply) {
    log->debug("report not delivered node={} revision={} reason=\"{}\" (kept)", h.name, revision,
               common::printable(reply.error().describe(), 512));
    return false;
  }
  if (auto ok = trust::verify_ack(*reply, req, h.id.control_key); !ok) {
    log->warn("report ack not trusted node={} revision={} reason=\"{}\" (kept)", h.name, revision,
              common::printable(ok.error().message, 512));
    return false;
  }
  const std::string* status = reply->header(protocol::kHeaderStatus);
  if (status && *status == "error") {
    auto v = common::parse_json(reply->body);
    const std::string code = v && v->find("error") ? v->find("error")->get_string("code") : "";
    if (code != "invalid_argument" && code != "permission_denied") {
      log->debug("report not taken yet node={} revision={} code={} (kept)", h.name, revision, code.empty() ? "-" : code);
      return false;
    }
    log->error("report refused node={} revision={} reply={}", h.name, revision, common::printable(reply->body, 512));
  }
  fleet.counters().reports_acked++;
  return true;
}

/// Sends one report, signed when sent, and returns at once; `then(taken)` runs on a worker once
/// it is answered or timed out (report_taken).
void send_report(Fleet& fleet, SimHost& h, std::uint64_t revision, const std::string& body,
                 std::function<void(bool)> then) {
  auto req = std::make_shared<sdk::Message>(protocol::make_message(protocol::report_subject(h.name), body));
  req->set_header(protocol::kHeaderNode, h.name);
  req->set_header(protocol::kHeaderRevision, std::to_string(revision));
  trust::sign_report(*req, h.id.secret_key);
  fleet.request_async(*h.group, req, kReportTimeout,
                      [&fleet, &h, revision, req, then = std::move(then)](sdk::Result<sdk::Message>&& reply) {
                        then(report_taken(fleet, h, revision, *req, reply));
                      });
}

/// The outbox is tried again later (once, however many reports failed meanwhile): after 5 s, and
/// after Fleet::backoff once rounds failed in a row (`failed`: this round failed).
void retry_outbox_later(Fleet& fleet, SimHost& h, bool failed) {
  int failures = 0;
  {
    std::lock_guard lk(h.mu);
    if (failed) ++h.report_failures;
    failures = h.report_failures;
    if (h.retry_scheduled) return;
    h.retry_scheduled = true;
  }
  fleet.post_at(
      Clock::now() + std::max<std::chrono::milliseconds>(5s, failures > 0 ? fleet.backoff(failures) : 5s),
      [&fleet, &h] {
        {
          std::lock_guard lk(h.mu);
          h.retry_scheduled = false;
        }
        flush_outbox(fleet, h);
      },
      Fleet::Lane::First);
}

}  // namespace

sdk::Result<void> enrol_host(SimHost& h, const std::string& token) {
  MESH_TRY(made, host::make_enrol_request(h.name, token, protocol::kHostVersion, "--tokens"));
  MESH_TRY(answer, host::enrol_exchange(*h.group->transport, made.message, h.name, made.control_key,
                                        protocol::kEnrolInboxPrefix, std::chrono::seconds(20)));
  if (!answer.accepted)
    return sdk::fail(answer.code, "enrolment of " + h.name + " refused: " + host::shown_remote(answer.message, 512));
  // The node's broker nkey (when the control plane manages permissions) is not used: simulated
  // hosts share the simulator's connections (decision record 95).
  MESH_TRY(enrolled, host::read_enrolment(h.name, answer.body, made.keys, common::now_ms()));
  h.id = std::move(enrolled.identity);
  h.enrolled = true;
  return {};
}

sdk::Result<void> brief_host(Fleet& fleet, SimHost& h) {
  std::vector<host::BriefingLine> lines{
      {"state_dir", "pass", "simulated by mesh-sim: applies to memory, changes nothing on this machine"}};
  for (const auto& p : fleet.options().providers)
    lines.push_back({"plugin:" + p, "pass", "schema from " + fleet.options().plugin_dir});
  const host::Facts facts{{"os.id", "debian"},          {"os.version_id", "12"},      {"os.codename", "bookworm"},
                          {"arch", "amd64"},            {"kernel", "mesh-sim"},       {"package_manager", "none"},
                          {"service_manager", "none"},  {"container_engine", "none"}};
  auto req = protocol::make_message(protocol::briefing_subject(h.name),
                                    host::briefing_request_json(h.name, lines, common::now_ms(), &fleet.schemas(), &facts));
  req.set_header(protocol::kHeaderNode, h.name);
  trust::sign_report(req, h.id.secret_key);
  MESH_TRY(reply, h.group->transport->request(req, std::chrono::seconds(20)));
  const std::string* status = reply.header(protocol::kHeaderStatus);
  if (status && *status == "error")
    return sdk::fail(sdk::ErrorCode::Failed, "briefing of " + h.name + " refused: " + common::printable(reply.body, 512));
  h.briefed = true;
  return {};
}

void heartbeat(Fleet& fleet, SimHost& h) {
  if (!h.enrolled) return;
  std::uint64_t applied = 0;
  int state = 0;
  {
    std::lock_guard lk(h.mu);
    applied = h.applied_revision;
    state = h.state;
  }
  if (!h.group->up) {
    fleet.counters().heartbeats_unsent++;
    return;
  }
  const auto now = common::now_ms();
  auto m = host::heartbeat_message(h.name, applied, protocol::kHostVersion, state_name(state), h.id.heartbeat_key, now, now);
  if (h.group->transport->publish(m)) fleet.counters().heartbeats++;
  else fleet.counters().heartbeats_unsent++;
}

void on_declaration(Fleet& fleet, SimHost& h, sdk::Message&& m) {
  fleet.counters().declarations++;
  // The signature is verified on a worker, not on the shared delivery thread.
  auto shared = std::make_shared<sdk::Message>(std::move(m));
  fleet.post([&fleet, &h, shared] { take_declaration(fleet, h, *shared); }, Fleet::Lane::First);
}

void resync(Fleet& fleet, SimHost& h, std::uint64_t epoch) {
  if (!h.enrolled || !h.group->up || h.sync_epoch != epoch) return;
  // Signed by the node (nobody else may read its declaration); the reply believed only when the
  // control plane signed it for this very request.
  auto req = std::make_shared<sdk::Message>(protocol::make_message(protocol::latest_subject(h.name)));
  trust::sign_request(*req, protocol::kHeaderNode, h.name, h.id.secret_key, common::now_ms());
  fleet.request_async(*h.group, req, kLatestTimeout, [&fleet, &h, req, epoch](sdk::Result<sdk::Message>&& reply) {
    sdk::Result<void> trusted = reply ? trust::verify_reply(*reply, *req, h.id.control_key)
                                      : sdk::Result<void>(sdk::fail(reply.error()));
    const std::string* status = reply ? reply->header(protocol::kHeaderStatus) : nullptr;
    if (!trusted || (status && *status == "error")) {
      fleet.counters().latest_failed++;
      int failures = 0;
      {
        std::lock_guard lk(h.mu);
        failures = ++h.latest_failures;
      }
      const auto wait = fleet.backoff(failures);
      common::logger()->debug("fetch latest declaration failed node={} reason=\"{}\" (retrying in {} ms)", h.name,
                              !trusted ? common::printable(trusted.error().describe(), 512)
                                       : common::printable(reply->body, 512),
                              wait.count());
      fleet.post_at(Clock::now() + wait, [&fleet, &h, epoch] { resync(fleet, h, epoch); });
      return;
    }
    {
      std::lock_guard lk(h.mu);
      h.latest_failures = 0;
    }
    fleet.counters().latest_ok++;
    h.synced = true;
    if (!(status && *status == "none")) take_declaration(fleet, h, *reply);
    flush_outbox(fleet, h);
  });
}

void flush_outbox(Fleet& fleet, SimHost& h) {
  std::vector<std::pair<std::uint64_t, std::string>> items;
  bool kept = false;
  {
    std::lock_guard lk(h.mu);
    for (const auto& [rev, body] : h.outbox) {
      if (h.in_flight.count(rev)) continue;  // its answer is awaited; it decides
      if (!h.group->up) {
        kept = true;
        continue;
      }
      h.in_flight.insert(rev);
      items.emplace_back(rev, body);
    }
  }
  if (kept) {
    fleet.counters().report_retries++;
    retry_outbox_later(fleet, h, /*failed=*/false);
  }
  for (auto& item : items) {
    // Named copies, not the structured bindings: clang 14 cannot capture those.
    const auto rev = item.first;
    const auto& body = item.second;
    send_report(fleet, h, rev, body, [&fleet, &h, rev, sent = body](bool taken) {
      bool again = !taken;
      {
        std::lock_guard lk(h.mu);
        h.in_flight.erase(rev);
        if (auto it = h.outbox.find(rev); it != h.outbox.end()) {
          if (taken && it->second == sent) h.outbox.erase(it);
          else again = true;  // not taken, or replaced by a newer report of the same revision
        }
        if (taken) h.report_failures = 0;
      }
      if (!again) return;
      if (!taken) fleet.counters().report_retries++;
      retry_outbox_later(fleet, h, /*failed=*/!taken);
    });
  }
}

}  // namespace mesh::sim::detail
