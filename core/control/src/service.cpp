// Service: construction, handle(), and how replies and refusals are sent, signed and bounded
// (docs/protocol.md "Reply subjects", decision records 22 and 31). Routing is in dispatch.cpp.
#include "service.h"

#include <cstdlib>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "metrics.h"
#include "service_util.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"
#include "mesh/common/key_rotation.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;
using sdk::Value;

constexpr std::size_t kDefaultBodyLimit = 1024 * 1024;

// One buffer of parts per kind of sender (operators, enrolment, nodes), each bounded alone, so a
// flood of junk parts of one kind cannot make another kind's uploads busy (found by an attacker:
// 64 first parts on mesh.api.* made every node's reports in parts busy too).
protocol::parts::Limits intake_limits(const ControlOptions& options) {
  return protocol::parts::Limits{options.max_assembled, options.max_assembled, 64, 4, std::chrono::seconds(30),
                                 "limits.max_assembled"};
}

}  // namespace

Service::Service(std::shared_ptr<sdk::Store> store, std::shared_ptr<sdk::Transport> transport,
                 const ControlOptions& options, ContactSink contacts)
    : store_(std::move(store)),
      transport_(std::move(transport)),
      options_(options),
      contacts_(std::move(contacts)),
      replay_(options.replay_capacity, 2 * options.clock_tolerance),
      store_bytes_(options.node_store_rate, options.node_store_burst, options.node_rate_keys),
      intake_{protocol::parts::Reassembler(intake_limits(options)),
              protocol::parts::Reassembler(intake_limits(options)),
              protocol::parts::Reassembler(intake_limits(options))},
      reports_(std::make_unique<ReportBatcher>(
          store_, options.store_abi_minor,
          [this](PendingReport&& p, const sdk::Result<bool>& r) {
            // The batch is durable: each report's signed answer is made on a worker (set_post),
            // so that the committer goes on with the next batch meanwhile.
            auto report = std::make_shared<PendingReport>(std::move(p));
            auto result = std::make_shared<const sdk::Result<bool>>(r);
            run_posted([this, report, result] { finish_report(std::move(*report), *result); });
          })),
      nonces_(std::make_unique<NonceBatcher>(store_, options.store_abi_minor)),
      pipelines_(make_pipeline_runner()) {
  remove_interrupted_uploads();
  if (const char* t = std::getenv("NOX_MESH_CONTROL_DROP_PUSHES_FOR_TEST"))
    drop_pushes_ = std::strtol(t, nullptr, 10);
}

std::size_t Service::body_limit() const noexcept {
  std::size_t limit = transport_->max_payload_bytes();
  if (limit == 0) limit = kDefaultBodyLimit;
  if (options_.max_message != 0) limit = std::min(limit, options_.max_message);
  return limit;
}

void Service::reply(sdk::Message&& r) noexcept {
  if (r.subject.empty()) return;
  // After a key rotation: the chain from every key hosts may pin (decision record 98).
  if (!options_.keys.current()->key_chain.empty()) r.set_header(common::kHeaderKeyChain, options_.keys.current()->key_chain);
  // A reply larger than the broker's limit (a recovery copy, a latest declaration, a node view)
  // goes in parts to the requester's inbox (docs/protocol.md "Messages in parts").
  if (auto ok = protocol::parts::publish(*transport_, r); !ok)
    common::logger()->warn("reply not sent subject={}: {}", shown(r.subject), shown(ok.error().describe(), kMaxRefusalText));
}

void Service::reply_ok(const sdk::Message& request, const Value& body) {
  if (request.reply.empty()) return;
  auto r = protocol::ok_reply(request, body.to_json());
  sign_reply_to(r, request);
  reply(std::move(r));
}

void Service::refuse(const sdk::Message& request, const sdk::Error& error, bool quiet,
                     const sdk::Value* detail) noexcept {
  try {
    if (options_.metrics) options_.metrics->refused(request.subject, error);
    sdk::Error e = error;
    e.message = shown(e.message, kMaxRefusalText);
    e.path = shown(e.path, 2 * kEchoBytes);
    auto level = quiet ? spdlog::level::info : spdlog::level::warn;
    std::uint64_t hidden = 0;
    if (refusal_log_.take(&hidden))
      common::logger()->log(level, "{} subject={}{}{}: {}{}",
                            request.reply.empty() ? "dropped" : "refused", shown(request.subject),
                            e.path.empty() ? "" : " field=", e.path, e.message, common::LogBudget::suffix(hidden));
    if (!request.reply.empty() && reply_allowed(request)) {
      auto r = protocol::error_reply(request, e, detail);
      sign_reply_to(r, request);
      reply(std::move(r));
    }
  } catch (...) {
  }
}

void Service::sign_reply_to(sdk::Message& r, const sdk::Message& request) {
  const std::string& s = request.subject;
  // A refused report is dropped from the host's outbox: only on a signed refusal.
  if (s.rfind("mesh.report.", 0) == 0 || s.rfind("mesh.drift.", 0) == 0)
    trust::sign_ack(r, request, options_.keys.current()->pair.secret_key);
  // What a host does with the answer to latest/recovery (believe it has no declaration, remove
  // orphans) must not be decided by whoever answers first: every such reply is signed for the
  // one request it answers.
  // An operator's answer (a delivery report, a node view, a token) is believed by `mesh` only
  // when it is signed for the one request it answers (decision record 31): the operators'
  // broker user can read and publish into every operator's inbox.
  else if (s.rfind("mesh.latest.", 0) == 0 || s.rfind("mesh.recovery.", 0) == 0 || s.rfind("mesh.content.", 0) == 0 ||
           s.rfind("mesh.api.", 0) == 0)
    trust::sign_reply(r, request, options_.keys.current()->pair.secret_key);
  // An enrolment refusal, signed for the one request it answers (its body names the host's fresh
  // key): `mesh-host enrol` believes no unsigned refusal (a forgery on an open broker).
  else if (s == protocol::kEnrolSubject)
    trust::sign_ack(r, request, options_.keys.current()->pair.secret_key);
}

bool Service::reply_allowed(const sdk::Message& m) const {
  const std::string& to = m.reply;
  if (to.empty()) return true;
  constexpr std::string_view kInbox = "_INBOX.";
  const std::string node_prefix = std::string(protocol::kNodeInboxPrefix) + ".";
  const std::string enrol_prefix = std::string(protocol::kEnrolInboxPrefix) + ".";
  const std::string control_prefix = std::string(protocol::kControlInboxPrefix) + ".";
  auto under = [&](std::string_view prefix) { return to.size() > prefix.size() && to.rfind(prefix, 0) == 0; };
  if (!under(kInbox)) return false;
  // The control plane's own inboxes (its store's JetStream replies among them): an answer sent
  // there would land in one of its own pending requests (decision record 185). Never, whoever
  // asks and whatever the broker permissions.
  if (to.rfind(control_prefix, 0) == 0 || to == protocol::kControlInboxPrefix) return false;
  // API replies: anywhere under _INBOX. but the reserved prefixes of the nodes and of
  // enrolment (`mesh` keeps nats.c's default _INBOX.<random>).
  const bool generic = !under(node_prefix) && !under(enrol_prefix);
  // With broker permissions managed by mesh-control, hosts read replies only on their own prefix
  // (runtime.cpp): enrolment and a node's requests are answered only there, so that no client
  // can make the control plane publish into an operator's, an enrolment's or another node's
  // inbox. Without them (an open broker, or permissions kept by hand) a host keeps nats.c's
  // default prefix, or the enrolment one (`mesh-host enrol` sends the first briefing on its
  // enrolment connection): anything under _INBOX. but another node's prefix. Everyone can
  // publish there anyway on such a broker; nothing outside _INBOX. is ever answered.
  const bool strict = options_.broker_credentials;
  if (m.subject == protocol::kEnrolSubject) return under(enrol_prefix) || (!strict && generic);
  const std::string& s = m.subject;
  for (std::string_view kind : {"mesh.latest.", "mesh.recovery.", "mesh.content.", "mesh.report.", "mesh.drift.", "mesh.briefing.",
                                "mesh.heartbeat."})
    if (s.rfind(kind, 0) == 0) {
      auto node = subject_node(s);
      if (!node) return !strict && generic;
      if (under(protocol::node_inbox_prefix(*node) + ".")) return true;
      return !strict && !under(node_prefix);
    }
  return generic;
}

void Service::warn_reply_refused(const sdk::Message& m) noexcept {
  try {
    // Anyone can send these at any rate: one warning per second at most, with what it hid.
    const auto now = std::chrono::steady_clock::now();
    std::uint64_t hidden = 0;
    {
      std::lock_guard lock(reflection_mu_);
      if (now < reflection_next_log_) {
        ++reflection_hidden_;
        return;
      }
      reflection_next_log_ = now + std::chrono::seconds(1);
      hidden = std::exchange(reflection_hidden_, 0);
    }
    common::logger()->warn("dropped subject={} reply_subject={}: the reply subject is not an inbox this request may "
                           "be answered on (docs/protocol.md \"Reply subjects\"); not answered{}",
                           shown(m.subject), shown(m.reply),
                           hidden ? " (" + std::to_string(hidden) + " more dropped since the last warning)" : "");
  } catch (...) {
  }
}

void Service::refuse_signed_request(const sdk::Message& request, const sdk::Error& e, std::int64_t now_ms) noexcept {
  if (e.path != trust::kHeaderTimestamp || request.reply.empty()) return refuse(request, e);
  try {
    common::logger()->warn("refused subject={} field={}: {} (answered with the control plane's signed time)",
                           shown(request.subject), shown(e.path, 2 * kEchoBytes), shown(e.message, kMaxRefusalText));
    auto r = protocol::error_reply(request, e);
    trust::sign_time(r, request, now_ms, options_.keys.current()->pair.secret_key);
    sign_reply_to(r, request);
    reply(std::move(r));
  } catch (...) {
  }
}

void Service::reply_ack(const sdk::Message& request, const Value& body) {
  if (request.reply.empty()) return;
  auto r = protocol::ok_reply(request, body.to_json());
  trust::sign_ack(r, request, options_.keys.current()->pair.secret_key);
  reply(std::move(r));
}

void Service::handle(const sdk::Message& m, std::int64_t now_ms) noexcept {
  // A request whose reply subject is not its sender's inbox is dropped unanswered and unhandled:
  // NATS does not check reply subjects against permissions, so answering would let any client
  // make the control plane publish where it may not (decision record 22).
  if (!reply_allowed(m)) return warn_reply_refused(m);
  try {
    if (protocol::parts::is_part(m)) return take_part(m, now_ms);
    dispatch(m, now_ms, body_limit());
  } catch (const std::exception& e) {
    refuse(m, sdk::Error{ErrorCode::Internal, std::string("internal error: ") + e.what(), {}});
  } catch (...) {
    refuse(m, sdk::Error{ErrorCode::Internal, "internal error", {}});
  }
}

}  // namespace mesh::control::detail
