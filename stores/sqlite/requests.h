// The `sqlite` store's signed-request records (table `requests`, schema version 2) and the
// heartbeat order kept per node: the pieces of replay protection that survive a restart
// (docs/protocol.md "Nonces", decision record 28).
//
// Internal to the plugin. Each function runs inside the caller's transaction on `db` and
// thread safety is the caller's (the store's mutex).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "connection.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::stores::sqlite {

/// Store::remember_request's work, in a write transaction the caller holds: forgets expired
/// requests, then inserts (signer, nonce) or returns the record already kept.
sdk::Result<std::optional<sdk::RequestRecord>> remember_request_in(Connection& db, const sdk::RequestRecord& request,
                                                                   std::int64_t now_ms);
/// Forgets the requests expired at `now_ms` (what is kept stays bounded by one window).
sdk::Result<void> forget_expired_requests(Connection& db, std::int64_t now_ms);
/// Inserts (signer, nonce) — nullopt: it was fresh — or returns the record already kept, without
/// forgetting expired ones first (remember_requests does that once for its batch). Errors:
/// InvalidArgument (empty signer or nonce), the connection's.
sdk::Result<std::optional<sdk::RequestRecord>> remember_one_in(Connection& db, const sdk::RequestRecord& request);
/// Sets the answer of a remembered request. Errors: NotFound when it is not remembered.
sdk::Result<void> set_request_answer(Connection& db, const std::string& signer, const std::string& nonce,
                                     const std::string& answer);
/// Stores `answer.render(delivery)` for its request (declare_answered), in the declare's
/// transaction. Errors: InvalidArgument (no render), NotFound (request not remembered).
sdk::Result<void> store_answer(Connection& db, const sdk::RequestAnswer& answer, const sdk::DeliveryRecord& delivery);
/// Moves nodes.heartbeat_ts_ms forward for every update with a heartbeat timestamp, when the
/// update's generation is the node's current one (an older identity's heartbeats never count).
sdk::Result<void> record_heartbeat_times(Connection& db, const std::vector<sdk::ContactUpdate>& updates);

}  // namespace mesh::stores::sqlite
