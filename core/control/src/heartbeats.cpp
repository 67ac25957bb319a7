// Heartbeats (decision record 17, docs/protocol.md "Trust"): the cache of node identities that
// verifies them without a store read per message, dropped at enrolment and removal, and the
// order of heartbeats per identity, kept across restarts through the store; and the body of the
// heartbeat every host sends read without building an sdk::Value (decision record 122).
#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "heartbeat_body.h"
#include "metrics.h"
#include "service.h"
#include "mesh/common/clock.h"
#include "mesh/common/crypto.h"
#include "mesh/common/trust.h"

namespace mesh::control::detail {
namespace {

using sdk::ErrorCode;

// Heartbeat identities cached at most (decision record 17): about 150 bytes each. Beyond it,
// heartbeats of the nodes left out read the store, as they did before the cache.
constexpr std::size_t kHeartbeatIdentityCapacity = 1'000'000;
// How long a cached identity is used before it is read again (decision record 90): another
// instance sharing the store may have re-enrolled or removed the node, which this one's cache
// does not hear of; a heartbeat that fails with a cached identity reads it again at once.
constexpr std::chrono::seconds kHeartbeatIdentityMaxAge{60};

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

bool parse_plain_heartbeat(std::string_view t, PlainHeartbeat* out) {
  std::size_t i = 0;
  const std::size_t n = t.size();
  auto skip = [&] {
    while (i < n && json_space(t[i])) ++i;
  };
  // A string of printable ASCII without escapes: its text is its value.
  auto plain_string = [&](std::string_view* s) {
    if (i >= n || t[i] != '"') return false;
    const std::size_t start = ++i;
    for (; i < n && t[i] != '"'; ++i) {
      const auto c = static_cast<unsigned char>(t[i]);
      if (c < 0x20 || c > 0x7e || c == '\\') return false;
    }
    if (i >= n) return false;
    *s = t.substr(start, i - start);
    ++i;
    return true;
  };
  PlainHeartbeat b;
  std::array<std::string_view, 16> keys;
  std::size_t key_count = 0;
  skip();
  if (i >= n || t[i] != '{') return false;
  ++i;
  skip();
  if (i < n && t[i] == '}') {
    ++i;
  } else {
    for (;;) {
      std::string_view key;
      if (!plain_string(&key)) return false;
      // A repeated key is refused by the general parser, with its own message.
      for (std::size_t k = 0; k < key_count; ++k)
        if (keys[k] == key) return false;
      if (key_count == keys.size()) return false;
      keys[key_count++] = key;
      skip();
      if (i >= n || t[i] != ':') return false;
      ++i;
      skip();
      const bool text_field = key == "node" || key == "at" || key == "host_version" || key == "state";
      if (i < n && t[i] == '"') {
        std::string_view v;
        if (!plain_string(&v)) return false;
        if (key == "applied_revision") return false;  // a type error: the general path names it
        if (key == "node") b.node = v;
        else if (key == "at") b.at = v;
        else if (key == "host_version") b.host_version = v;
        else if (key == "state") b.state = v;
      } else if (i < n && t[i] >= '0' && t[i] <= '9') {
        // A non-negative integer as JSON writes it: no leading zero, no fraction or exponent
        // (anything after the digits but a separator fails below), at most 18 digits (fits).
        const std::size_t start = i;
        std::int64_t v = 0;
        for (; i < n && t[i] >= '0' && t[i] <= '9'; ++i) {
          if (i - start == 18) return false;  // a 19th digit: might not fit
          v = v * 10 + (t[i] - '0');
        }
        if (t[start] == '0' && i - start > 1) return false;
        if (text_field) return false;  // a type error: the general path names it
        if (key == "applied_revision") b.applied_revision = v;
      } else {
        return false;  // null, true, false, a negative number, an object, an array
      }
      skip();
      if (i < n && t[i] == ',') {
        ++i;
        skip();
        continue;
      }
      if (i < n && t[i] == '}') {
        ++i;
        break;
      }
      return false;
    }
  }
  skip();
  if (i != n) return false;
  *out = b;
  return true;
}

bool Service::heartbeat_identity_cached(std::string_view node) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(identity_mu_);
  auto it = identities_.find(std::string(node));
  // The same age as heartbeat_identity()'s: an entry due to be read again sends its heartbeat to
  // a worker, which reads it (only one that expires between here and there is read on this thread).
  return it != identities_.end() && now - it->second.filled < kHeartbeatIdentityMaxAge;
}

bool Service::take_plain_heartbeat(const sdk::Message& m, const std::string& node, std::int64_t now_ms,
                                   std::int64_t heartbeat_ms, std::uint64_t generation) {
  PlainHeartbeat b;
  if (!parse_plain_heartbeat(m.body, &b)) return false;
  // The checks of the general path (dispatch, on_heartbeat), without their messages: any that
  // fails sends the heartbeat down that path, which refuses it naming the field as before.
  if (!b.node || *b.node != node) return false;
  if (b.at && !common::parse_rfc3339(*b.at)) return false;
  if (b.host_version && b.host_version->size() > 64) return false;
  if (b.state && b.state->size() > 32) return false;
  if (auto fresh = fresh_heartbeat(node, generation, heartbeat_ms, now_ms); !fresh) {
    refuse(m, fresh.error(), /*quiet=*/true);
    return true;
  }
  sdk::ContactUpdate u;
  u.node = node;
  u.at_ms = now_ms;  // when the control plane heard it (its own clock), as on_heartbeat
  u.heartbeat_ms = heartbeat_ms;
  u.generation = generation;
  u.applied_revision = static_cast<std::uint64_t>(b.applied_revision.value_or(0));
  if (b.host_version) u.host_version.assign(b.host_version->data(), b.host_version->size());
  if (b.state) u.host_state.assign(b.state->data(), b.state->size());
  if (options_.metrics) options_.metrics->heartbeat_ingested();
  contacts_(std::move(u));
  return true;
}

sdk::Result<Service::HeartbeatIdentity> Service::heartbeat_identity(const std::string& node, bool reread) {
  std::uint64_t epoch = 0;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(identity_mu_);
    if (auto it = identities_.find(node); it != identities_.end()) {
      if (!reread && now - it->second.filled < kHeartbeatIdentityMaxAge) {
        HeartbeatIdentity cached = it->second;
        cached.cached = true;
        return cached;
      }
      identities_.erase(it);
    }
    epoch = identity_epoch_;
  }
  auto record = store_->node(node);
  if (!record) {
    if (record.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " is not enrolled", "subject");
    return sdk::fail(record.error());
  }
  if (record->public_key.empty())
    return sdk::fail(ErrorCode::PermissionDenied, "node " + node + " has no key on record; re-enrol it",
                     "subject");
  auto public_key = common::from_hex(record->public_key);
  if (!public_key || public_key->size() != 32)
    return sdk::fail(ErrorCode::Internal, "stored key of " + node + " is not a hex Ed25519 public key");
  HeartbeatIdentity id{record->generation,
                       trust::heartbeat_key(options_.keys.heartbeat_master, node, record->generation,
                                            record->public_key),
                       std::move(*public_key), now, false};
  // The newest heartbeat taken before a restart still orders the ones after it.
  if (record->heartbeat_generation == record->generation && record->heartbeat_ms > 0)
    seed_heartbeat(node, record->generation, record->heartbeat_ms);
  std::lock_guard lock(identity_mu_);
  // An enrolment that committed after our read has bumped the epoch: what we read may be the old
  // identity, good for this message (as without a cache) but not to keep.
  if (identity_epoch_ == epoch && identities_.size() < kHeartbeatIdentityCapacity) identities_.emplace(node, id);
  return id;
}

void Service::forget_heartbeat_identity(const std::string& node) {
  std::lock_guard lock(identity_mu_);
  ++identity_epoch_;
  identities_.erase(node);
}

void Service::seed_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t recorded_ms) {
  std::lock_guard lock(heartbeat_mu_);
  auto& last = last_heartbeat_[node];
  if (last.generation != generation) last = LastHeartbeat{generation, 0};
  last.timestamp_ms = std::max(last.timestamp_ms, recorded_ms);
}

sdk::Result<void> Service::fresh_heartbeat(const std::string& node, std::uint64_t generation, std::int64_t ts,
                                           std::int64_t now_ms) {
  // Time-bound: a heartbeat captured earlier than the tolerance is worthless whatever was recorded.
  const std::int64_t tol = options_.clock_tolerance.count();
  if (ts - now_ms > tol || now_ms - ts > tol)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "heartbeat expired: its timestamp is " + std::to_string((ts - now_ms) / 1000) +
                         " s from the control plane's clock (tolerance " + std::to_string(tol / 1000) + " s)",
                     trust::kHeaderTimestamp);
  // Monotonic per identity: strictly newer than the newest taken (also before a restart: seeded
  // from the store). A host whose clock steps back is not contact until it passes that again —
  // at most the tolerance, since nothing further ahead was taken.
  std::lock_guard lock(heartbeat_mu_);
  auto& last = last_heartbeat_[node];
  if (last.generation != generation) last = LastHeartbeat{generation, 0};
  if (ts <= last.timestamp_ms)
    return sdk::fail(ErrorCode::PermissionDenied,
                     "heartbeat replayed (its timestamp is not newer than one already taken)", trust::kHeaderTimestamp);
  last.timestamp_ms = ts;
  return {};
}


}  // namespace mesh::control::detail
