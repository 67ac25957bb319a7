#include "mesh/host/enrol.h"

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"

#include <spdlog/spdlog.h>

namespace mesh::host {

using sdk::ErrorCode;
using Clock = std::chrono::steady_clock;

std::string shown_remote(std::string_view text, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const std::size_t n = std::min(text.size(), max_bytes);
  out.reserve(n + 16);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > n) out += "…(" + std::to_string(text.size()) + " bytes)";
  return out;
}

sdk::Result<std::string> read_token_file(const std::string& path) {
  std::string text;
  if (path == "-") {
    std::getline(std::cin, text);
    if (std::cin.bad()) return sdk::fail(ErrorCode::InvalidArgument, "cannot read the token from standard input", "--token-file");
  } else {
    auto r = common::read_file(path, 4096);
    if (!r) return sdk::fail(ErrorCode::InvalidArgument, "--token-file " + path + ": " + r.error().message, "--token-file");
    text = r->substr(0, r->find('\n'));
  }
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) text.pop_back();
  if (text.empty())
    return sdk::fail(ErrorCode::InvalidArgument,
                     "--token-file " + path + ": no token in it (the first line must hold the token)", "--token-file");
  return text;
}

namespace {

// Whether `reply` is the control plane's own answer to `request`; fills `out` when it is.
bool verified_answer(const sdk::Message& reply, const sdk::Message& request, const std::string& node,
                     const std::string& control_key, EnrolAnswer& out, std::string& why) {
  auto v = common::parse_json(reply.body, common::JsonLimits{1 << 20, 16});
  if (!v || !v->is_object()) {
    why = "not JSON";
    return false;
  }
  const std::string* status = reply.header(protocol::kHeaderStatus);
  const bool refusal = status && *status == "error";
  if (refusal) {
    if (!control_key.empty()) {
      if (auto ok = trust::verify_ack(reply, request, control_key); !ok) {
        why = "refusal not signed by the control plane key the token names";
        return false;
      }
    }
    const sdk::Value* e = v->find("error");
    out.code = e && e->is_object() ? protocol::error_code_from_string(e->get_string("code")) : ErrorCode::Failed;
    out.message = e && e->is_object() ? e->get_string("message") : reply.body;
  } else {
    auto key = common::from_hex(v->get_string("control_key"));
    const std::string* sig_hex = reply.header(trust::kHeaderSignature);
    auto sig = sig_hex ? common::from_hex(*sig_hex) : sdk::Result<std::string>(std::string());
    if (!key || key->size() != 32 || !sig ||
        !common::verify(trust::enrol_reply_text(node, reply.body), *sig, *key) ||
        (!control_key.empty() && *key != control_key)) {
      why = "enrolment reply not signed by the control plane key the token names";
      return false;
    }
  }
  out.reply = reply;
  out.body = std::move(*v);
  out.accepted = !refusal;
  out.verified = !control_key.empty();
  return true;
}

}  // namespace

sdk::Result<EnrolAnswer> enrol_exchange(sdk::Transport& transport, sdk::Message request, const std::string& node,
                                        const std::string& control_key, const std::string& inbox_prefix,
                                        std::chrono::milliseconds timeout) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<sdk::Message> replies;
  const std::string inbox = inbox_prefix + "." + common::random_token(16);
  auto sub = transport.subscribe(inbox, "", [&](sdk::Message&& m) {
    std::lock_guard lk(mu);
    if (replies.size() < 64) replies.push_back(std::move(m));  // a flood of forgeries is bounded
    cv.notify_all();
  });
  if (!sub) return sdk::fail(sub.error());
  if (auto f = transport.flush(std::chrono::seconds(5)); !f) return sdk::fail(f.error());
  request.reply = inbox;
  if (auto p = transport.publish(request); !p) return sdk::fail(p.error());

  EnrolAnswer answer;
  const auto deadline = Clock::now() + timeout;
  // The same request again while no answer came (decision record 133): the answer may be lost
  // (NATS delivers at most once; a broker reloading its authorization for this very enrolment
  // can drop it), and the control plane answers a repeat of an enrolment it already made with
  // this key again instead of refusing the used token.
  auto resend_at = Clock::now() + kEnrolResendEvery;
  std::unique_lock lk(mu);
  for (;;) {
    while (!replies.empty()) {
      sdk::Message m = std::move(replies.front());
      replies.pop_front();
      lk.unlock();
      std::string why;
      const bool ok = verified_answer(m, request, node, control_key, answer, why);
      if (ok) {
        sub->reset();
        return answer;
      }
      ++answer.ignored;
      const std::string* status = m.header(protocol::kHeaderStatus);
      common::logger()->warn("enrolment reply ignored node={} status={} bytes={} reason=\"{}\" body=\"{}\" (waiting for "
                             "the control plane's signed answer)",
                             node, shown_remote(status ? *status : "-", 16), m.body.size(), why,
                             shown_remote(m.body, 128));
      lk.lock();
    }
    const auto until = std::min(deadline, resend_at);
    if (cv.wait_until(lk, until, [&] { return !replies.empty(); })) continue;
    if (Clock::now() >= deadline) break;
    resend_at = Clock::now() + kEnrolResendEvery;
    lk.unlock();
    common::logger()->info("enrolment request sent again node={} (no answer yet)", node);
    if (auto p = transport.publish(request); !p)
      common::logger()->warn("enrolment request not sent again node={} reason=\"{}\"", node, p.error().describe());
    lk.lock();
  }
  lk.unlock();
  sub->reset();
  return sdk::fail(ErrorCode::Timeout,
                   "no answer signed by the control plane within " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) + " s" +
                       (answer.ignored ? " (" + std::to_string(answer.ignored) +
                                             " replies ignored: not signed by the control plane key the token "
                                             "names — forged, or the token is from another control plane)"
                                       : std::string()));
}

sdk::Result<EnrolRequest> make_enrol_request(const std::string& node, const std::string& token,
                                             const std::string& host_version, const std::string& flag) {
  EnrolRequest out;
  // A new key pair for every enrolment: re-enrolment replaces the identity.
  out.keys = common::generate_keypair();
  // A token printed by `mesh token issue` is "<secret>.<control plane key>": the key is pinned
  // from the token (not from whoever answers), and the token travels sealed to it.
  if (auto dot = token.rfind('.'); dot != std::string::npos) {
    auto key = common::base64url_decode(std::string_view(token).substr(dot + 1));
    if (!key || key->size() != 32)
      return sdk::fail(sdk::ErrorCode::InvalidArgument, flag + ": not a token printed by `mesh token issue`", flag);
    out.control_key = *key;
  }
  sdk::Value body = sdk::Value::object();
  body.set("node", node);
  if (out.control_key.empty()) {
    body.set("token", token);
  } else {
    auto sealed = common::seal_to(token, out.control_key);
    if (!sealed) return sdk::fail(sdk::ErrorCode::InvalidArgument, flag + ": " + sealed.error().message, flag);
    body.set("token_sealed", common::to_hex(*sealed));
  }
  body.set("public_key", common::to_hex(out.keys.public_key));
  body.set("host_version", host_version);
  out.message = protocol::make_message(protocol::kEnrolSubject, body.to_json());
  out.message.set_header(protocol::kHeaderNode, node);
  return out;
}

sdk::Result<Enrolment> read_enrolment(const std::string& node, const sdk::Value& body, const common::KeyPair& keys,
                                      std::int64_t enrolled_at_ms) {
  // The reply names the control plane's key and is signed with it (checked by enrol_exchange).
  auto control_key = common::from_hex(body.get_string("control_key"));
  if (!control_key) return sdk::fail(control_key.error());
  auto sealed = common::from_hex(body.get_string("heartbeat_key"));
  auto hb_key = sealed ? common::open_sealed(*sealed, keys) : sdk::Result<std::string>(sdk::fail(sealed.error()));
  if (!hb_key || hb_key->size() != 32)
    return sdk::fail(sdk::ErrorCode::Failed, "enrolment reply carries no heartbeat key for this node's key");
  Enrolment out;
  out.identity.node = node;
  out.identity.enrolled_at_ms = enrolled_at_ms;
  out.identity.generation = static_cast<std::uint64_t>(body.get_int("generation", 1));
  out.identity.public_key = keys.public_key;
  out.identity.secret_key = keys.secret_key;
  out.identity.control_key = *control_key;
  out.identity.heartbeat_key = *hb_key;
  // The node's own broker credentials, when the control plane manages broker permissions.
  if (const std::string sealed_nkey = body.get_string("broker_nkey"); !sealed_nkey.empty()) {
    auto raw = common::from_hex(sealed_nkey);
    auto seed = raw ? common::open_sealed(*raw, keys) : sdk::Result<std::string>(sdk::fail(raw.error()));
    if (!seed) return sdk::fail(sdk::ErrorCode::Failed, "enrolment reply carries a broker key this node cannot open");
    out.broker_seed = *seed;
  }
  return out;
}

}  // namespace mesh::host
