#include "mesh/common/parts.h"

#include "mesh/common/text.h"

#include <algorithm>
#include <condition_variable>
#include <memory>

#include <spdlog/spdlog.h>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"

namespace mesh::protocol::parts {

using sdk::ErrorCode;

namespace {

bool is_part_header(const std::string& name) {
  return name == kHeaderParts || name == kHeaderPart || name == kHeaderPartsId || name == kHeaderPartsSize ||
         name == kHeaderPartsDigest;
}

/// Decimal digits only, at most 19 of them.
std::optional<std::size_t> number(const std::string* v) {
  if (!v || v->empty() || v->size() > 19) return std::nullopt;
  std::size_t n = 0;
  for (char c : *v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return n;
}

bool valid_id(const std::string& id) {
  if (id.size() < 16 || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
}

bool valid_digest(const std::string& d) {
  return d.size() == 64 &&
         std::all_of(d.begin(), d.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

sdk::Error bad(std::string path, std::string message) {
  return sdk::Error{ErrorCode::InvalidArgument, std::move(message), std::move(path)};
}

}  // namespace

bool is_part(const sdk::Message& m) noexcept { return m.header(kHeaderParts) != nullptr; }

std::size_t wire_size(const sdk::Message& m) noexcept {
  std::size_t n = m.body.size();
  if (!m.headers.empty()) {
    n += 12;  // "NATS/1.0\r\n" ... "\r\n"
    for (const auto& [k, v] : m.headers) n += k.size() + v.size() + 4;
  }
  return n;
}

sdk::Result<std::vector<sdk::Message>> split(const sdk::Message& whole, std::size_t max_payload) {
  if (max_payload == 0 || wire_size(whole) <= max_payload) return std::vector<sdk::Message>{whole};
  sdk::Message head = whole;
  head.body.clear();
  const std::string id = common::sha256_hex(common::random_token(16)).substr(0, 32);
  head.set_header(kHeaderParts, "0000000");         // placeholders of the widest values
  head.set_header(kHeaderPart, "0000000");
  head.set_header(kHeaderPartsId, id);
  head.set_header(kHeaderPartsSize, std::to_string(whole.body.size()));
  head.set_header(kHeaderPartsDigest, common::sha256_hex(whole.body));
  const std::size_t overhead = wire_size(head) + kPartSlack;
  if (overhead >= max_payload)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "the headers of the message on " + whole.subject + " leave no room for a body in " +
                         std::to_string(max_payload) + " bytes");
  const std::size_t chunk = max_payload - overhead;
  const std::size_t total = (whole.body.size() + chunk - 1) / chunk;
  if (total > kMaxParts)
    return sdk::fail(ErrorCode::InvalidArgument, "the message on " + whole.subject + " would need " +
                                                     std::to_string(total) + " parts (at most " +
                                                     std::to_string(kMaxParts) + ")");
  std::vector<sdk::Message> out;
  out.reserve(total);
  for (std::size_t i = 0; i < total; ++i) {
    sdk::Message p = head;
    p.set_header(kHeaderParts, std::to_string(total));
    p.set_header(kHeaderPart, std::to_string(i));
    p.body = whole.body.substr(i * chunk, chunk);
    // Only the last part may expect the real answer; earlier ones are answered by the transport
    // request of request(), or not at all when published.
    out.push_back(std::move(p));
  }
  return out;
}

void Reassembler::expire(std::int64_t now_ms) {
  for (auto it = open_.begin(); it != open_.end();) {
    if (now_ms - it->second.started_ms > limits_.timeout.count()) {
      for (const auto& [i, b] : it->second.bodies) buffered_ -= b.size();
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t Reassembler::pending() const {
  std::lock_guard lk(mu_);
  return open_.size();
}

sdk::Result<std::optional<sdk::Message>> Reassembler::add(const sdk::Message& part, std::int64_t now_ms) {
  const auto total = number(part.header(kHeaderParts));
  const auto index = number(part.header(kHeaderPart));
  const auto size = number(part.header(kHeaderPartsSize));
  const std::string* id = part.header(kHeaderPartsId);
  const std::string* digest = part.header(kHeaderPartsDigest);
  if (!total || *total < 2 || *total > kMaxParts)
    return sdk::fail(bad(kHeaderParts, "must be a number of parts from 2 to " + std::to_string(kMaxParts)));
  if (!index || *index >= *total)
    return sdk::fail(bad(kHeaderPart, "must be a part index below " + std::to_string(*total)));
  if (!id || !valid_id(*id)) return sdk::fail(bad(kHeaderPartsId, "must be 16-64 characters of [0-9a-zA-Z]"));
  if (!digest || !valid_digest(*digest))
    return sdk::fail(bad(kHeaderPartsDigest, "must be a SHA-256 of 64 lower-case hex characters"));
  if (!size) return sdk::fail(bad(kHeaderPartsSize, "must be the size of the whole body in bytes"));
  if (*size > limits_.max_whole)
    return sdk::fail(bad(kHeaderPartsSize, "the whole message on " + part.subject.substr(0, 128) + " would be " +
                                               std::to_string(*size) + " bytes, over the limit of " +
                                               std::to_string(limits_.max_whole) + " bytes (" +
                                               limits_.limit_key + ")"));
  if (part.body.size() > *size) return sdk::fail(bad("body", "a part is larger than its whole"));

  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& h : part.headers)
    if (!is_part_header(h.first)) headers.push_back(h);

  std::lock_guard lk(mu_);
  expire(now_ms);
  const std::string key = part.subject + "\n" + *id;
  auto it = open_.find(key);
  if (it == open_.end()) {
    std::size_t same_sender = 0;
    const std::string prefix = part.subject + "\n";
    for (auto o = open_.lower_bound(prefix); o != open_.end() && o->first.rfind(prefix, 0) == 0; ++o)
      ++same_sender;
    if (open_.size() >= limits_.max_pending || same_sender >= limits_.max_pending_per_sender)
      return sdk::fail(ErrorCode::Transient, "busy: too many messages in parts are being received; try again later");
    Assembly a;
    a.total = *total;
    a.size = *size;
    a.digest = *digest;
    a.headers = std::move(headers);
    a.started_ms = now_ms;
    it = open_.emplace(key, std::move(a)).first;
  } else {
    const Assembly& a = it->second;
    if (a.total != *total || a.size != *size || a.digest != *digest || a.headers != headers) {
      for (const auto& [i, b] : a.bodies) buffered_ -= b.size();
      open_.erase(it);
      return sdk::fail(bad(kHeaderPart, "part " + std::to_string(*index) + " disagrees with the earlier parts of " +
                                            *id + " (headers, size or digest)"));
    }
  }
  Assembly& a = it->second;
  auto drop = [&] {
    for (const auto& [i, b] : a.bodies) buffered_ -= b.size();
    open_.erase(it);
  };
  if (auto dup = a.bodies.find(*index); dup != a.bodies.end()) {
    if (dup->second == part.body) return std::optional<sdk::Message>{};  // re-sent: no news
    drop();
    return sdk::fail(bad(kHeaderPart, "part " + std::to_string(*index) + " of " + *id + " came twice, different"));
  }
  std::size_t have = 0;
  for (const auto& [i, b] : a.bodies) have += b.size();
  if (have + part.body.size() > a.size) {
    drop();
    return sdk::fail(bad("body", "the parts of " + *id + " are larger than Mesh-Parts-Size"));
  }
  if (buffered_ + part.body.size() > limits_.max_buffered) {
    drop();
    return sdk::fail(ErrorCode::Transient, "busy: the buffer for messages in parts is full; try again later");
  }
  buffered_ += part.body.size();
  a.bodies.emplace(*index, part.body);
  if (a.bodies.size() < a.total) return std::optional<sdk::Message>{};

  sdk::Message whole;
  whole.subject = part.subject;
  whole.reply = part.reply;
  whole.headers = a.headers;
  whole.body.reserve(a.size);
  for (const auto& [i, b] : a.bodies) whole.body += b;
  const std::string want = a.digest;
  drop();
  if (whole.body.size() != *size || common::sha256_hex(whole.body) != want)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "the parts of " + *id + " on " + part.subject.substr(0, 128) +
                         " do not join into the whole they announce (Mesh-Parts-Digest differs: a corrupted or "
                         "forged part)");
  return std::optional<sdk::Message>{std::move(whole)};
}

namespace {

/// Collects the reply (whole or in parts) arriving on a private inbox.
struct ReplyBox {
  explicit ReplyBox(const Limits& limits) : parts(limits) {}
  std::mutex mu;
  std::condition_variable cv;
  std::optional<sdk::Result<sdk::Message>> answer;
  Reassembler parts;

  void take(sdk::Message&& m) {
    std::optional<sdk::Result<sdk::Message>> got;
    if (!is_part(m) && m.body.empty() && !m.header(protocol::kHeaderProtocol)) {
      // The broker's "no responders" status (an empty message without our headers): nobody
      // subscribes to the request's subject.
      got = sdk::Result<sdk::Message>(
          sdk::fail(ErrorCode::Unavailable, "no responders on " + m.subject.substr(0, 128)));
    } else if (!is_part(m)) {
      got = std::move(m);
    } else {
      auto r = parts.add(m, common::now_ms());
      if (!r) got = sdk::Result<sdk::Message>(sdk::fail(r.error()));
      else if (*r) got = std::move(**r);
    }
    if (!got) return;
    std::lock_guard lk(mu);
    if (!answer) answer = std::move(got);
    cv.notify_all();
  }
};

bool no_responders(const sdk::Error& e) {
  return e.code == ErrorCode::Unavailable && e.message.find("no responders") != std::string::npos;
}

/// How one sending of a whole ended.
struct Sent {
  sdk::Result<sdk::Message> reply = sdk::fail(ErrorCode::Internal, "not sent");
  /// The failure proves that no instance holds the whole (a part before the last unanswered, or
  /// nobody on the instance's subject), so sending it again is safe.
  bool resend = false;
  std::string instance;    ///< where the parts after the first went ("" the whole's subject)
  std::size_t part = 0;    ///< the part that failed, 1-based
};

/// One sending of `list` (the parts of `whole`, or the whole alone), as request() describes.
Sent send_once(sdk::Transport& transport, const sdk::Message& whole, std::vector<sdk::Message>& list,
               const RequestOptions& options) {
  Sent out;
  std::string instance = options.instance;
  // After the first part was taken by an instance (not when the caller chose one): whether a
  // failure from here on means that instance went away mid-whole.
  bool affine = false;
  auto routed = [&](sdk::Message& m) {
    if (!instance.empty()) m.subject = protocol::instance_subject(instance, whole.subject);
  };
  // A part that got no answer. `resend`: nothing after it was sent, or nobody received it, so
  // no instance can hold the whole.
  auto gone = [&](std::size_t i, sdk::Error e, bool resend) {
    out.instance = instance;
    out.part = i + 1;
    out.resend = resend && options.instance.empty();
    // Said as "not answered", never "not sent", unless it is the end (a caller such as `mesh`
    // reads "not sent" as "certainly not handled").
    const std::string what = list.size() > 1 ? "part " + std::to_string(i + 1) + " of " + std::to_string(list.size()) +
                                                   " on " + common::printable(whole.subject)
                                             : common::printable(whole.subject);
    if (!instance.empty())
      e.message = what + " went to control plane instance " + instance + ", which did not answer (" + e.message + ")";
    if (!options.instance.empty()) e.message += " (the whole was not sent)";
    out.reply = sdk::fail(std::move(e));
    return out;
  };
  for (std::size_t i = 0; i + 1 < list.size(); ++i) {
    routed(list[i]);
    auto ack = transport.request(list[i], options.timeout);
    if (!ack) {
      // Nothing after this part was sent: the whole is complete nowhere, and may be sent again.
      // Only "no answer" and, once an instance took the first part, "nobody there" say that the
      // instance went away (not this sender's own link lost, nor no control plane at all).
      if (ack.error().code == ErrorCode::Timeout || (affine && no_responders(ack.error())))
        return gone(i, ack.error(), /*resend=*/true);
      if (!options.instance.empty() && no_responders(ack.error())) return gone(i, ack.error(), false);
      out.reply = sdk::fail(ack.error());
      return out;
    }
    const std::string* status = ack->header(protocol::kHeaderStatus);
    if (!status || *status != kStatusPart) {
      // Refused part-way (busy, too large, a bad part). That answer is signed over the part, not
      // over the whole the caller will verify against, so it is not handed back as the answer:
      // the request failed, and what the control plane said is shown as said, not as trusted.
      out.reply = sdk::fail(ErrorCode::Unavailable,
                            "part " + std::to_string(i + 1) + " of " + std::to_string(list.size()) + " on " +
                                common::printable(whole.subject) + " was answered " +
                                (status ? common::printable(*status, 16) : std::string("without a status")) + ": " +
                                common::printable(ack->body, 512) + " (the whole was not sent; try again later)");
      return out;
    }
    // The instance that took the first part gets the others: the buffer of parts is its own
    // (decision record 170). An answer without it (one instance of an older version): the
    // whole's subject, as before.
    if (i == 0 && instance.empty())
      if (const std::string* id = ack->header(protocol::kHeaderInstance); id && protocol::valid_instance_id(*id)) {
        instance = *id;
        affine = true;
      }
  }
  sdk::Message& last = list.back();
  routed(last);
  const std::size_t last_index = list.size() - 1;
  if (!options.reply_in_parts) {
    auto r = transport.request(last, options.timeout);
    // No responders: nobody received the last part, so nobody handled the whole. A timeout is
    // not that: the whole may have been handled and its answer lost.
    if (!r && no_responders(r.error()) && (affine || !options.instance.empty()))
      return gone(last_index, r.error(), /*resend=*/true);
    out.reply = std::move(r);
    return out;
  }

  auto box = std::make_shared<ReplyBox>(options.reply_limits);
  const std::string inbox = options.inbox_prefix + ".parts." + common::sha256_hex(common::random_token(16)).substr(0, 24);
  auto sub = transport.subscribe(inbox, "", [box](sdk::Message&& m) { box->take(std::move(m)); });
  if (!sub) {
    out.reply = sdk::fail(sub.error());
    return out;
  }
  last.reply = inbox;
  if (auto sent = transport.publish(last); !sent) {
    out.reply = sdk::fail(sent.error());
    return out;
  }
  std::unique_lock lk(box->mu);
  if (!box->cv.wait_for(lk, options.timeout, [&] { return box->answer.has_value(); })) {
    lk.unlock();
    sub->reset();
    out.reply = sdk::fail(ErrorCode::Timeout, "no reply on " + whole.subject + " within " +
                                                  std::to_string(options.timeout.count()) + " ms");
    return out;
  }
  auto answer = std::move(*box->answer);
  lk.unlock();
  sub->reset();
  if (!answer && answer.error().message.rfind("no responders on ", 0) == 0) {
    sdk::Error e{ErrorCode::Unavailable, "no responders on " + last.subject, {}};
    if (affine || !options.instance.empty()) return gone(last_index, std::move(e), /*resend=*/true);
    out.reply = sdk::fail(ErrorCode::Unavailable, "no responders on " + whole.subject);
    return out;
  }
  out.reply = std::move(answer);
  return out;
}

}  // namespace

sdk::Result<sdk::Message> request(sdk::Transport& transport, const sdk::Message& whole,
                                  const RequestOptions& options) {
  MESH_TRY(list, split(whole, transport.max_payload_bytes()));
  Sent first = send_once(transport, whole, list, options);
  if (first.reply || !first.resend) return std::move(first.reply);
  // The instance that took the first part went away before the whole was complete (decision
  // record 170), or a part before the last went unanswered: nothing of it was handled anywhere.
  // Sent once more, whole, with a new id, through the whole's subject: another instance of the
  // queue group takes it.
  common::logger()->info("parts resent subject={} parts={} instance={} failed_part={} reason=\"{}\"",
                         common::printable(whole.subject), list.size(), first.instance, first.part,
                         common::printable(first.reply.error().message, 512));
  MESH_TRY(again, split(whole, transport.max_payload_bytes()));
  Sent second = send_once(transport, whole, again, options);
  if (second.reply) return std::move(second.reply);
  sdk::Error e = second.reply.error();
  // The first failure is summed up without its transport's words ("no responders" would read as
  // "nobody got it" for what came after); the log above has them.
  e.message = "sent again, whole, after part " + std::to_string(first.part) + " of " + std::to_string(list.size()) +
              " was not answered by " +
              (first.instance.empty() ? std::string("the control plane") : "control plane instance " + first.instance) +
              "; then: " + e.message;
  // Only when the second sending too provably reached no instance whole is it "not sent"; a
  // timeout of its last part, say, leaves the outcome open.
  if (second.resend || no_responders(second.reply.error())) e.message += " (the whole was not sent; try again)";
  return sdk::fail(std::move(e));
}

sdk::Result<void> publish(sdk::Transport& transport, const sdk::Message& whole) {
  MESH_TRY(list, split(whole, transport.max_payload_bytes()));
  for (const auto& p : list)
    if (auto ok = transport.publish(p); !ok) return ok;
  return {};
}

}  // namespace mesh::protocol::parts
