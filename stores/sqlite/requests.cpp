#include "requests.h"

#include "sqlite_store.h"

namespace mesh::stores::sqlite {

using sdk::ErrorCode;

namespace {

sdk::Error not_remembered(const std::string& signer) {
  return sdk::Error{ErrorCode::NotFound,
                    "no request of " + signer.substr(0, 80) + " with this nonce is remembered (expired?)", {}};
}

}  // namespace

sdk::Result<void> forget_expired_requests(Connection& db, std::int64_t now_ms) {
  // What is kept stays bounded by what arrives within one window.
  auto st = db.prepare("DELETE FROM requests WHERE expires_at_ms <= ?1");
  if (!st) return sdk::fail(std::move(st).error());
  st->bind(1, now_ms);
  if (auto r = st->run(); !r) return sdk::fail(std::move(r).error());
  return {};
}

sdk::Result<std::optional<sdk::RequestRecord>> remember_request_in(Connection& db, const sdk::RequestRecord& request,
                                                                   std::int64_t now_ms) {
  if (request.signer.empty() || request.nonce.empty())
    return sdk::fail(ErrorCode::InvalidArgument, "a remembered request needs a signer and a nonce");
  MESH_TRY(forget_expired_requests(db, now_ms));
  return remember_one_in(db, request);
}

sdk::Result<std::optional<sdk::RequestRecord>> remember_one_in(Connection& db, const sdk::RequestRecord& request) {
  if (request.signer.empty() || request.nonce.empty())
    return sdk::fail(ErrorCode::InvalidArgument, "a remembered request needs a signer and a nonce");
  {
    auto st = db.prepare("SELECT digest, expires_at_ms, answer FROM requests WHERE signer = ?1 AND nonce = ?2");
    if (!st) return sdk::fail(std::move(st).error());
    st->bind(1, request.signer).bind(2, request.nonce);
    auto row = st->step();
    if (!row) return sdk::fail(std::move(row).error());
    if (*row) {
      sdk::RequestRecord kept;
      kept.signer = request.signer;
      kept.nonce = request.nonce;
      kept.digest = st->column_text(0);
      kept.expires_at_ms = st->column_int(1);
      if (!st->column_is_null(2)) kept.answer = st->column_text(2);
      return std::optional<sdk::RequestRecord>(std::move(kept));
    }
  }
  auto st = db.prepare("INSERT INTO requests (signer, nonce, digest, expires_at_ms) VALUES (?1, ?2, ?3, ?4)");
  if (!st) return sdk::fail(std::move(st).error());
  st->bind(1, request.signer).bind(2, request.nonce).bind(3, request.digest).bind(4, request.expires_at_ms);
  if (auto r = st->run(); !r) return sdk::fail(std::move(r).error());
  return std::optional<sdk::RequestRecord>();
}

sdk::Result<void> set_request_answer(Connection& db, const std::string& signer, const std::string& nonce,
                                     const std::string& answer) {
  auto st = db.prepare("UPDATE requests SET answer = ?3 WHERE signer = ?1 AND nonce = ?2");
  if (!st) return sdk::fail(std::move(st).error());
  st->bind(1, signer).bind(2, nonce).bind(3, answer);
  if (auto r = st->run(); !r) return sdk::fail(std::move(r).error());
  if (db.changes() == 0) return sdk::fail(not_remembered(signer));
  return {};
}

sdk::Result<void> store_answer(Connection& db, const sdk::RequestAnswer& answer, const sdk::DeliveryRecord& delivery) {
  if (!answer.render) return sdk::fail(ErrorCode::InvalidArgument, "the request answer has no render");
  return set_request_answer(db, answer.signer, answer.nonce, answer.render(delivery));
}

sdk::Result<void> record_heartbeat_times(Connection& db, const std::vector<sdk::ContactUpdate>& updates) {
  auto st = db.prepare(
      "UPDATE nodes SET heartbeat_ts_ms = ?2, heartbeat_generation = ?3 "
      "WHERE name = ?1 AND generation = ?3 AND (heartbeat_generation <> ?3 OR heartbeat_ts_ms < ?2)");
  if (!st) return sdk::fail(std::move(st).error());
  for (const auto& u : updates) {
    if (u.heartbeat_ms <= 0) continue;
    st->reset();
    st->bind(1, u.node).bind(2, u.heartbeat_ms).bind(3, static_cast<std::int64_t>(u.generation));
    if (auto r = st->run(); !r) return sdk::fail(std::move(r).error());
  }
  return {};
}

// Group commit of nonces (docs/decisions/0119): the whole batch in ONE write transaction, one
// fsync. A request's own refusal (no signer or nonce) is answered to it alone; it writes nothing,
// so no savepoint is needed. A failure of the store fails the batch (SQLite may have rolled the
// transaction back): nothing of it is remembered and the caller refuses every request of it.
sdk::Result<sdk::RememberResults> SqliteStore::remember_requests(const std::vector<sdk::RequestRecord>& requests,
                                                                 std::int64_t now_ms) noexcept {
  return sdk::guard("remember_requests", [&]() -> sdk::Result<sdk::RememberResults> {
    std::lock_guard lock(mutex_);
    if (!db_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: remember_requests called before open()");
    Connection& db = *db_;
    sdk::RememberResults out;
    out.reserve(requests.size());
    if (requests.empty()) return out;
    MESH_TRY(tx, Transaction::begin(db, Transaction::Kind::Write));
    MESH_TRY(forget_expired_requests(db, now_ms));
    for (const auto& request : requests) {
      if (request.signer.empty() || request.nonce.empty()) {
        out.push_back(sdk::fail(ErrorCode::InvalidArgument, "a remembered request needs a signer and a nonce"));
        continue;
      }
      MESH_TRY(kept, remember_one_in(db, request));
      out.push_back(std::move(kept));
    }
    MESH_TRY(tx.commit());
    return out;
  });
}

}  // namespace mesh::stores::sqlite
