#include "requests.h"

namespace mesh::stores::sqlite {

using sdk::ErrorCode;

namespace {

sdk::Error not_remembered(const std::string& signer) {
  return sdk::Error{ErrorCode::NotFound,
                    "no request of " + signer.substr(0, 80) + " with this nonce is remembered (expired?)", {}};
}

}  // namespace

sdk::Result<std::optional<sdk::RequestRecord>> remember_request_in(Connection& db, const sdk::RequestRecord& request,
                                                                   std::int64_t now_ms) {
  if (request.signer.empty() || request.nonce.empty())
    return sdk::fail(ErrorCode::InvalidArgument, "a remembered request needs a signer and a nonce");
  {
    // What is kept stays bounded by what arrives within one window.
    auto st = db.prepare("DELETE FROM requests WHERE expires_at_ms <= ?1");
    if (!st) return sdk::fail(std::move(st).error());
    st->bind(1, now_ms);
    if (auto r = st->run(); !r) return sdk::fail(std::move(r).error());
  }
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

}  // namespace mesh::stores::sqlite
