// The `jetstream-kv` store's write and read paths, shared by its source files (internal): the
// constants of the operation envelope, and the templates every Store method goes through.
//
// Internal to the plugin. Thread safety: the templates take the store's mutex.
#pragma once

#include <sodium.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "jetstream_kv_store.h"
#include "mesh/support/sha256.h"

namespace mesh::stores::jetstream_kv {

inline constexpr int kMaxAttempts = 64;          // publishes of one write before Transient
inline constexpr std::uint64_t kScanFrom = 64;   // messages behind from which catch-up uses a consumer
inline constexpr std::size_t kHeaderRoom = 4096; // headers and envelope within max_payload
inline constexpr std::uint8_t kVersion = 1;      // the operation envelope (operations.h)
inline constexpr std::uint8_t kInline = 0;
inline constexpr std::uint8_t kParts = 1;

/// A failure worth trying again later (never the caller's fault).
inline bool retryable(sdk::ErrorCode c) {
  return c == sdk::ErrorCode::Transient || c == sdk::ErrorCode::Unavailable || c == sdk::ErrorCode::Timeout;
}

/// 128 random bits as lower-case hex (libsodium): an operation's id.
inline std::string random_id() {
  unsigned char b[16];
  randombytes_buf(b, sizeof b);
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

/// The result of a method's operation as that method's type (Internal if it is another).
template <class T>
sdk::Result<T> take(OpResult&& r) {
  if (auto* p = std::get_if<sdk::Result<T>>(&r)) return std::move(*p);
  return sdk::fail(sdk::ErrorCode::Internal, "jetstream-kv: an operation answered with another type than its method's");
}

using sdk::ErrorCode;
using sdk::Result;

template <class T, class Build>
Result<T> JetStreamKvStore::write(const char* what, Method method, Build&& build) noexcept {
  if (method != Method::Import) maybe_compact();  // compaction.cpp: the stream stays bounded
  return sdk::guard(what, [&]() -> Result<T> {
    std::lock_guard lock(mutex_);
    if (!db_ || !log_)
      return sdk::fail(ErrorCode::FailedPrecondition, std::string("jetstream-kv store: ") + what + " called before open()");
    pending_ids_.clear();
    pending_result_.reset();
    struct Clear {
      JetStreamKvStore* s;
      ~Clear() {
        s->pending_ids_.clear();
        s->pending_result_.reset();
      }
    } clear{this};
    std::optional<sdk::Error> last_error;
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      MESH_TRY(catch_up());
      if (pending_result_) return take<T>(std::move(*pending_result_));  // an earlier attempt landed
      if (!db_) return sdk::fail(ErrorCode::Unavailable, "jetstream-kv: the local file '" + local_path_ + "' is not open");
      MESH_TRY(payload, build());
      const std::string id = random_id();
      Writer w;
      w.u8(kVersion);
      w.u8(kInline);
      w.str(id);
      w.u8(static_cast<std::uint8_t>(method));
      w.bytes() += payload;
      std::string message = std::move(w.bytes());
      const std::size_t limit = log_->max_payload() > 2 * kHeaderRoom ? log_->max_payload() - kHeaderRoom : kHeaderRoom;
      if (message.size() > limit) {
        // Parts first (no compare-and-swap), then the commit that names them.
        Writer c;
        c.u8(kVersion);
        c.u8(kParts);
        c.str(id);
        const std::size_t n = (message.size() + limit - 1) / limit;
        c.u64(n);
        for (std::size_t i = 0; i < n; ++i) {
          const std::string_view chunk = std::string_view(message).substr(i * limit, limit);
          MESH_TRY(p, log_->publish(log_->part_subject(id, i), chunk, std::nullopt, id + "." + std::to_string(i)));
          c.u64(p.seq);
        }
        c.str(support::sha256_hex(message));
        message = std::move(c.bytes());
      }
      pending_ids_.push_back(id);
      auto published = log_->publish(log_->op_subject(), message, last_op_seq_, id);
      if (!published) {
        // It may have landed (the answer was lost): the next catch-up finds it by its id; one
        // that lands later still holds the CAS of this attempt, so at most one attempt lands.
        last_error = std::move(published).error();
        continue;
      }
      if (published->wrong_last) {
        ++lost_races_;
        // Another instance wrote first: catch up, render again. Unless nothing came after our last
        // operation and it is gone from the stream (purged): then the CAS can never hold.
        const std::uint64_t expected = last_op_seq_;
        MESH_TRY(catch_up());
        if (last_op_seq_ == expected && expected > 0) {
          MESH_TRY(still, log_->get(expected));
          if (!still) {
            gap_from_ = expected;
            return sdk::fail(gap_error());
          }
        }
        continue;
      }
      // Only parts should lie between the last operation applied and this one (the CAS held),
      // but nats-server 2.9 can accept two publishes expecting the same sequence on a clustered
      // stream: whatever is there is applied first, in the log's order, as every instance does.
      MESH_TRY(catch_up_to(published->seq - 1));
      if (pending_result_) return take<T>(std::move(*pending_result_));
      MESH_TRY(applied, apply(published->seq, message));
      if (const sdk::Error* e = error_of(applied.second); e && is_prediction_mismatch(*e)) {
        ++lost_races_;  // rendered for a state another write changed: nothing written; again
        pending_ids_.clear();
        continue;
      }
      return take<T>(std::move(applied.second));
    }
    if (last_error) return sdk::fail(ErrorCode::Unavailable, last_error->message);
    return sdk::fail(ErrorCode::Transient, std::string("jetstream-kv: ") + what + " lost the compare-and-swap " +
                                               std::to_string(kMaxAttempts) + " times in a row; try again");
  });
}

template <class F>
auto JetStreamKvStore::read(const char* what, F&& f) noexcept {
  using R = decltype(f(std::declval<sqlite::SqliteStore&>()));
  // Linearizable without a round trip per read (decision 128): a catch-up that asked the
  // stream for its bounds after this read arrived covers every operation committed before it.
  // Reads that arrive while one round is in flight (blocked on the mutex) share the next one.
  const std::uint64_t arrived_after = rounds_started_.load();
  return sdk::guard(what, [&]() -> R {
    std::lock_guard lock(mutex_);
    if (!db_ || !log_)
      return sdk::fail(ErrorCode::FailedPrecondition, std::string("jetstream-kv store: ") + what + " called before open()");
    if (rounds_done_ > arrived_after)
      ++reads_shared_;
    else
      MESH_TRY(catch_up());
    if (!db_) return sdk::fail(ErrorCode::Unavailable, "jetstream-kv: the local file '" + local_path_ + "' is not open");
    return f(*db_);
  });
}

}  // namespace mesh::stores::jetstream_kv
