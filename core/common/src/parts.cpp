#include "mesh/common/parts.h"

#include "mesh/common/text.h"

#include <algorithm>
#include <condition_variable>
#include <memory>

#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
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

}  // namespace

sdk::Result<sdk::Message> request(sdk::Transport& transport, const sdk::Message& whole,
                                  const RequestOptions& options) {
  MESH_TRY(list, split(whole, transport.max_payload_bytes()));
  for (std::size_t i = 0; i + 1 < list.size(); ++i) {
    MESH_TRY(ack, transport.request(list[i], options.timeout));
    const std::string* status = ack.header(protocol::kHeaderStatus);
    if (!status || *status != kStatusPart) {
      // Refused part-way (busy, too large, a bad part). That answer is signed over the part, not
      // over the whole the caller will verify against, so it is not handed back as the answer:
      // the request failed, and what the control plane said is shown as said, not as trusted.
      return sdk::fail(ErrorCode::Unavailable,
                       "part " + std::to_string(i + 1) + " of " + std::to_string(list.size()) + " on " +
                           common::printable(whole.subject) + " was answered " +
                           (status ? common::printable(*status, 16) : std::string("without a status")) + ": " +
                           common::printable(ack.body, 512) + " (the whole was not sent; try again later)");
    }
  }
  sdk::Message last = std::move(list.back());
  if (!options.reply_in_parts) return transport.request(last, options.timeout);

  auto box = std::make_shared<ReplyBox>(options.reply_limits);
  const std::string inbox = options.inbox_prefix + ".parts." + common::sha256_hex(common::random_token(16)).substr(0, 24);
  MESH_TRY(sub, transport.subscribe(inbox, "", [box](sdk::Message&& m) { box->take(std::move(m)); }));
  last.reply = inbox;
  if (auto sent = transport.publish(last); !sent) return sdk::fail(sent.error());
  std::unique_lock lk(box->mu);
  const std::string asked = whole.subject;
  if (!box->cv.wait_for(lk, options.timeout, [&] { return box->answer.has_value(); })) {
    lk.unlock();
    sub.reset();
    return sdk::fail(ErrorCode::Timeout, "no reply on " + whole.subject + " within " +
                                             std::to_string(options.timeout.count()) + " ms");
  }
  auto answer = std::move(*box->answer);
  lk.unlock();
  sub.reset();
  if (!answer && answer.error().message.rfind("no responders on ", 0) == 0)
    return sdk::fail(ErrorCode::Unavailable, "no responders on " + asked);
  return answer;
}

sdk::Result<void> publish(sdk::Transport& transport, const sdk::Message& whole) {
  MESH_TRY(list, split(whole, transport.max_payload_bytes()));
  for (const auto& p : list)
    if (auto ok = transport.publish(p); !ok) return ok;
  return {};
}

}  // namespace mesh::protocol::parts
