// The composed write (decision record 64): every node's new revision, with its composition and a
// compare-and-swap on the revision it was computed from, the fleet records (a deploy record) and
// the request's answer in ONE store transaction (Store::declare_with), then the signed pushes.
// Also the pushes a restart owes: a delivery written just before mesh-control stopped is pushed
// again at start (push_pending), so that a written delivery is never stranded.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string_view>
#include <thread>

#include "fleet_state.h"
#include "metrics.h"
#include "parallel.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/crypto.h"
#include "mesh/common/logging.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/common/key_rotation.h"
#include "mesh/control/declaration.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

void Service::push_declaration(const std::string& node, std::uint64_t revision, const std::string& body) {
  // For the test of a push the broker lost (push_stranded): the first N pushes are not sent.
  if (drop_pushes_.load(std::memory_order_relaxed) > 0 && drop_pushes_.fetch_sub(1) > 0) {
    common::logger()->warn("declaration push dropped node={} revision={} (NOX_MESH_CONTROL_DROP_PUSHES_FOR_TEST)",
                           node, revision);
    return;
  }
  ControlMetrics::Push push(options_.metrics.get());  // in flight until it returns
  auto msg = protocol::make_message(protocol::decl_subject(node), body);
  msg.set_header(protocol::kHeaderNode, node);
  msg.set_header(protocol::kHeaderRevision, std::to_string(revision));
  msg.set_header(protocol::kHeaderDigest, common::sha256_hex(body));
  trust::sign_declaration(msg, node, revision, options_.keys.current()->pair.secret_key);
  if (!options_.keys.current()->key_chain.empty()) msg.set_header(common::kHeaderKeyChain, options_.keys.current()->key_chain);
  auto ok = protocol::parts::publish(*transport_, msg);
  push.done(ok.has_value());
  if (!ok)
    common::logger()->warn("declaration not pushed node={} revision={}: {}; the node fetches it when it reconnects",
                           node, revision, ok.error().describe());
  else
    common::logger()->debug("declaration pushed node={} revision={}", node, revision);
}

sdk::Result<sdk::DeliveryRecord> Service::write_plans(const std::vector<NodePlan>& plans,
                                                      std::vector<sdk::RecordWrite> records, std::int64_t now_ms,
                                                      const Admission* request,
                                                      const std::function<Value(const sdk::DeliveryRecord&)>& answer_of) {
  const std::size_t limit = options_.max_assembled;
  const std::size_t threads = fan_out_threads(options_.workers);
  // Each declaration rendered once, on a few threads (decision record 120), around the revision
  // the store assigns in its transaction: what the render inside the write then does is two
  // appends. Its size as pushed is checked with the longest revision (19 digits).
  struct Parts {
    std::string head, tail;  // the body is head + revision + tail
    bool split = false;      // false: rendered in full inside the write (render_declaration)
    std::size_t size = 0;
  };
  std::vector<Parts> parts(plans.size());
  parallel_for(plans.size(), threads, [&](std::size_t i) {
    Parts& out = parts[i];
    try {
      std::string body = render_declaration(plans[i].resources, plans[i].node, 0);
      // The node comes first and a node name holds no quote: the first match is the field.
      static constexpr std::string_view kField = ",\"revision\":0,\"resources\":";
      if (const auto at = body.find(kField); at != std::string::npos) {
        const std::size_t digit = at + kField.find('0');
        out.head = body.substr(0, digit);
        out.tail = body.substr(digit + 1);
        out.split = true;
      }
      out.size = body.size() + 18;
    } catch (...) {
      out.size = SIZE_MAX;
    }
  });
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (parts[i].size > limit)
      return sdk::fail(ErrorCode::InvalidArgument,
                       "the declaration of " + plans[i].node + " is " +
                           (parts[i].size == SIZE_MAX ? std::string("not renderable")
                                                      : std::to_string(parts[i].size) + " bytes") +
                           " as pushed, over the limit of " + std::to_string(limit) +
                           " bytes of a message in parts (limits.max_assembled)",
                       "declaration");
  // Bodies by node as rendered inside the transaction (the store calls render with the revision).
  std::map<std::string, std::pair<std::uint64_t, std::string>> rendered;
  std::vector<sdk::DeclarationWrite> writes;
  writes.reserve(plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const NodePlan& p = plans[i];
    const Parts& pre = parts[i];
    sdk::DeclarationWrite w;
    w.node = p.node;
    w.render = [&rendered, &p, &pre](std::uint64_t revision) {
      std::string body;
      if (pre.split) {
        const std::string number = std::to_string(revision);
        body.reserve(pre.head.size() + number.size() + pre.tail.size());
        body.append(pre.head).append(number).append(pre.tail);
      } else {
        body = render_declaration(p.resources, p.node, revision);
      }
      rendered[p.node] = {revision, body};
      return body;
    };
    w.composition = composition_json(p.composition);
    w.expected_revision = p.expected_revision;
    writes.push_back(std::move(w));
  }
  std::optional<sdk::RequestAnswer> answer;
  if (request && !request->nonce.empty() && answer_of)
    answer = sdk::RequestAnswer{request->signer, request->nonce,
                                [&](const sdk::DeliveryRecord& d) { return ok_answer(answer_of(d)); }};
  auto written = store_->declare_with(writes, records, now_ms, options_.retain, answer);
  if (!written && written.error().code == ErrorCode::Unsupported && records.empty()) {
    // A store without compositions (written before them): the plain write, without the
    // compare-and-swap and without a composition (what it reads back is then all own).
    if (answer)
      written = store_->declare_answered(writes, now_ms, options_.retain, *answer);
    else
      written = store_->declare(writes, now_ms, options_.retain);
  }
  MESH_TRY(delivery, std::move(written));
  common::logger()->info("declared delivery={} nodes={}", delivery.id, delivery.targets.size());
  // A node of a staged deploy's current wave may be superseded now (decision record 71).
  for (const auto& t : delivery.targets) wake_stages(&t.node);
  // For the test of a control plane killed between its write and its pushes (push_pending).
  if (const char* t = std::getenv("NOX_MESH_CONTROL_EXIT_BEFORE_PUSH_FOR_TEST"); t && std::string_view(t) == "1") {
    common::logger()->warn("exiting before the pushes of delivery {} (NOX_MESH_CONTROL_EXIT_BEFORE_PUSH_FOR_TEST)",
                           delivery.id);
    std::_Exit(137);
  }
  // For the tests of an instance killed in the middle of its pushes (tests/integration/cluster_*):
  // a pause before each push, so that a kill lands between two of them.
  std::chrono::milliseconds push_pause{0};
  if (const char* t = std::getenv("NOX_MESH_CONTROL_PUSH_PAUSE_MS_FOR_TEST"))
    push_pause = std::chrono::milliseconds(std::strtol(t, nullptr, 10));
  if (push_pause.count() > 0) {
    for (const auto& t : delivery.targets) {
      auto it = rendered.find(t.node);
      std::this_thread::sleep_for(push_pause);
      if (it != rendered.end() && it->second.first == t.revision) push_declaration(t.node, t.revision, it->second.second);
    }
    return delivery;
  }
  // Signed and published on a few threads (decision record 120): each push is its own message,
  // and the write they follow is already durable.
  std::vector<const std::pair<std::uint64_t, std::string>*> bodies(delivery.targets.size(), nullptr);
  for (std::size_t i = 0; i < delivery.targets.size(); ++i)
    if (auto it = rendered.find(delivery.targets[i].node); it != rendered.end() && it->second.first == delivery.targets[i].revision)
      bodies[i] = &it->second;
  parallel_for(delivery.targets.size(), threads, [&](std::size_t i) {
    if (!bodies[i]) return;
    try {
      push_declaration(delivery.targets[i].node, delivery.targets[i].revision, bodies[i]->second);
    } catch (const std::exception& e) {
      common::logger()->warn("declaration not pushed node={} revision={}: {}; the node fetches it when it reconnects",
                             delivery.targets[i].node, delivery.targets[i].revision, e.what());
    }
  });
  return delivery;
}

void Service::push_pending() noexcept {
  // A node whose latest revision is neither applied nor reported: mesh-control may have stopped
  // between the write and its push. The host takes a revision it already has as a re-send.
  auto nodes = store_->nodes();
  if (!nodes) {
    common::logger()->warn("pending declarations not checked: {}", nodes.error().describe());
    return;
  }
  std::size_t pushed = 0;
  for (const auto& n : *nodes) {
    if (n.declared_revision == 0 || n.declared_revision <= n.applied_revision) continue;
    auto report = store_->apply_report(n.name, n.declared_revision);
    if (!report || *report) continue;
    auto latest = store_->latest_revision(n.name);
    if (!latest || !*latest) continue;
    push_declaration(n.name, (*latest)->revision, (*latest)->body);
    ++pushed;
  }
  if (pushed) common::logger()->info("pushed {} pending declaration(s) again", pushed);
}

void Service::push_stranded(std::int64_t now_ms) noexcept {
  // A connected node that never got its push (newuser finding 7: a broker that lost the route
  // interest of the node's subscription) heartbeats on, looking healthy, and asks for its latest
  // only when it reconnects: its delivery would stay outstanding for ever. What the store knows is
  // enough to see it: the node's newest revision is neither applied nor reported, and a heartbeat
  // taken well after the revision was first seen outstanding says the host is not applying.
  auto nodes = store_->nodes();
  if (!nodes) {
    common::logger()->debug("stranded declarations not checked: {}", nodes.error().describe());
    return;
  }
  std::unordered_map<std::string, Stranded> kept;
  for (const auto& n : *nodes) {
    if (n.declared_revision == 0 || n.declared_revision <= n.applied_revision) continue;
    Stranded s;
    if (auto it = stranded_.find(n.name); it != stranded_.end() && it->second.revision == n.declared_revision)
      s = it->second;
    else
      s = Stranded{n.declared_revision, now_ms, 0, 0, false};
    const bool heard_since = n.heartbeat_at_ms && *n.heartbeat_at_ms >= s.since_ms + kStrandedAfterMs;
    // Never while the host says it applies (it has a revision in hand); once only while it says its
    // last apply failed (pushing again would apply a failing revision again and again).
    const bool may = !s.reported && heard_since && n.host_state != "applying" && now_ms >= s.next_ms &&
                     !(n.host_state == "failed" && s.pushes > 0);
    if (may) {
      auto report = store_->apply_report(n.name, s.revision);
      if (report && *report) {
        s.reported = true;  // answered (failed, refused, superseded): nothing to push
      } else if (report) {
        auto latest = store_->latest_revision(n.name);
        if (latest && *latest && (*latest)->revision == s.revision) {
          ++s.pushes;
          const int doublings = std::min(s.pushes - 1, 5);
          s.next_ms = now_ms + std::min(kStrandedRepushMs << doublings, kStrandedRepushMaxMs);
          common::logger()->info(
              "declaration pushed again node={} revision={} attempt={} applied_revision={} state={} "
              "reason=\"outstanding {} s while the node heartbeats\" next_in_s={}",
              n.name, s.revision, s.pushes, n.applied_revision, n.host_state.empty() ? "-" : n.host_state,
              (now_ms - s.since_ms) / 1000, (s.next_ms - now_ms) / 1000);
          push_declaration(n.name, s.revision, (*latest)->body);
        }
      }
    }
    kept.emplace(n.name, s);
  }
  stranded_.swap(kept);
}

}  // namespace mesh::control::detail
