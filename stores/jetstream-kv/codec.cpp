#include "codec.h"

namespace mesh::stores::jetstream_kv {

void Writer::u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Writer::str(std::string_view s) {
  u64(s.size());
  out_.append(s);
}
void Writer::opt_u64(const std::optional<std::uint64_t>& v) {
  boolean(v.has_value());
  if (v) u64(*v);
}
void Writer::opt_i64(const std::optional<std::int64_t>& v) {
  boolean(v.has_value());
  if (v) i64(*v);
}
void Writer::opt_str(const std::optional<std::string>& v) {
  boolean(v.has_value());
  if (v) str(*v);
}
void Writer::strings(const std::vector<std::string>& v) {
  u64(v.size());
  for (const auto& s : v) str(s);
}

bool Reader::need(std::size_t n) {
  if (!ok_ || in_.size() - pos_ < n) {
    ok_ = false;
    return false;
  }
  return true;
}
std::uint8_t Reader::u8() {
  if (!need(1)) return 0;
  return static_cast<std::uint8_t>(in_[pos_++]);
}
std::uint64_t Reader::u64() {
  if (!need(8)) return 0;
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
  pos_ += 8;
  return v;
}
std::string Reader::str() {
  const std::uint64_t n = u64();
  if (!ok_ || n > in_.size() - pos_) {
    ok_ = false;
    return {};
  }
  std::string s(in_.substr(pos_, n));
  pos_ += n;
  return s;
}
std::optional<std::uint64_t> Reader::opt_u64() {
  if (!boolean()) return std::nullopt;
  return u64();
}
std::optional<std::int64_t> Reader::opt_i64() {
  if (!boolean()) return std::nullopt;
  return i64();
}
std::optional<std::string> Reader::opt_str() {
  if (!boolean()) return std::nullopt;
  return str();
}
std::uint64_t Reader::count(std::size_t min_item_bytes) {
  const std::uint64_t n = u64();
  if (!ok_ || (min_item_bytes > 0 && n > (in_.size() - pos_) / min_item_bytes)) {
    ok_ = false;
    return 0;
  }
  return n;
}
std::vector<std::string> Reader::strings() {
  std::vector<std::string> v(count(8));
  for (auto& s : v) s = str();
  return v;
}

void put(Writer& w, const sdk::TokenRecord& t) {
  w.str(t.id);
  w.str(t.node);
  w.str(t.hash);
  w.i64(t.created_at_ms);
  w.i64(t.expires_at_ms);
  w.boolean(t.reenrol);
  w.opt_i64(t.used_at_ms);
  w.boolean(t.revoked);
}
void get(Reader& r, sdk::TokenRecord& t) {
  t.id = r.str();
  t.node = r.str();
  t.hash = r.str();
  t.created_at_ms = r.i64();
  t.expires_at_ms = r.i64();
  t.reenrol = r.boolean();
  t.used_at_ms = r.opt_i64();
  t.revoked = r.boolean();
}

void put(Writer& w, const sdk::ApplyReport& a) {
  w.str(a.node);
  w.u64(a.revision);
  w.i64(a.at_ms);
  w.i64(a.received_at_ms);
  w.u64(a.generation);
  w.str(a.outcome);
  w.str(a.resource);
  w.str(a.reason);
  w.strings(a.owned);
  w.strings(a.owned_digests);
  w.str(a.code);
}
void get(Reader& r, sdk::ApplyReport& a) {
  a.node = r.str();
  a.revision = r.u64();
  a.at_ms = r.i64();
  a.received_at_ms = r.i64();
  a.generation = r.u64();
  a.outcome = r.str();
  a.resource = r.str();
  a.reason = r.str();
  a.owned = r.strings();
  a.owned_digests = r.strings();
  a.code = r.str();
}

void put(Writer& w, const sdk::DriftReport& d) {
  w.str(d.node);
  w.str(d.scan_id);
  w.u64(d.revision);
  w.i64(d.at_ms);
  w.u64(d.items.size());
  for (const auto& i : d.items) {
    w.str(i.resource);
    w.str(i.found);
    w.str(i.action);
  }
  w.i64(d.received_at_ms);
}
void get(Reader& r, sdk::DriftReport& d) {
  d.node = r.str();
  d.scan_id = r.str();
  d.revision = r.u64();
  d.at_ms = r.i64();
  d.items.resize(r.count(24));
  for (auto& i : d.items) {
    i.resource = r.str();
    i.found = r.str();
    i.action = r.str();
  }
  d.received_at_ms = r.i64();
}

void put(Writer& w, const sdk::ContactUpdate& c) {
  w.str(c.node);
  w.i64(c.at_ms);
  w.u64(c.applied_revision);
  w.str(c.host_version);
  w.str(c.host_state);
  w.i64(c.heartbeat_ms);
  w.u64(c.generation);
}
void get(Reader& r, sdk::ContactUpdate& c) {
  c.node = r.str();
  c.at_ms = r.i64();
  c.applied_revision = r.u64();
  c.host_version = r.str();
  c.host_state = r.str();
  c.heartbeat_ms = r.i64();
  c.generation = r.u64();
}

void put(Writer& w, const sdk::RequestRecord& q) {
  w.str(q.signer);
  w.str(q.nonce);
  w.str(q.digest);
  w.i64(q.expires_at_ms);
  w.opt_str(q.answer);
}
void get(Reader& r, sdk::RequestRecord& q) {
  q.signer = r.str();
  q.nonce = r.str();
  q.digest = r.str();
  q.expires_at_ms = r.i64();
  q.answer = r.opt_str();
}

}  // namespace mesh::stores::jetstream_kv
