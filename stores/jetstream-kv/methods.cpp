// The jetstream-kv store's Store methods: each read catches up and reads the local file; each
// write is one operation published with the compare-and-swap (store_paths.h).
#include "connection.h"
#include "jetstream_kv_store.h"
#include "sqlite_store.h"
#include "store_paths.h"

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;
using sqlite::Connection;

// --- reads -----------------------------------------------------------------------------------------

Result<std::vector<sdk::NodeRecord>> JetStreamKvStore::nodes() noexcept {
  return read("nodes", [&](sqlite::SqliteStore& s) { return s.nodes(); });
}
Result<sdk::NodeRecord> JetStreamKvStore::node(const std::string& name) noexcept {
  return read("node", [&](sqlite::SqliteStore& s) { return s.node(name); });
}
Result<std::vector<sdk::TokenRecord>> JetStreamKvStore::tokens(std::int64_t now_ms) noexcept {
  return read("tokens", [&](sqlite::SqliteStore& s) { return s.tokens(now_ms); });
}
Result<std::optional<sdk::RevisionRecord>> JetStreamKvStore::latest_revision(const std::string& n) noexcept {
  return read("latest_revision", [&](sqlite::SqliteStore& s) { return s.latest_revision(n); });
}
Result<sdk::RevisionRecord> JetStreamKvStore::revision(const std::string& n, std::uint64_t r) noexcept {
  return read("revision", [&](sqlite::SqliteStore& s) { return s.revision(n, r); });
}
Result<std::vector<sdk::RevisionRecord>> JetStreamKvStore::history(const std::string& n, std::uint32_t limit) noexcept {
  return read("history", [&](sqlite::SqliteStore& s) { return s.history(n, limit); });
}
Result<std::optional<sdk::RevisionRef>> JetStreamKvStore::next_revision(const std::string& n, std::uint64_t r) noexcept {
  return read("next_revision", [&](sqlite::SqliteStore& s) { return s.next_revision(n, r); });
}
Result<sdk::DeliveryRecord> JetStreamKvStore::delivery(std::uint64_t id) noexcept {
  return read("delivery", [&](sqlite::SqliteStore& s) { return s.delivery(id); });
}
Result<std::optional<sdk::DeliveryRecord>> JetStreamKvStore::latest_delivery() noexcept {
  return read("latest_delivery", [&](sqlite::SqliteStore& s) { return s.latest_delivery(); });
}
Result<std::optional<sdk::ApplyReport>> JetStreamKvStore::apply_report(const std::string& n, std::uint64_t r) noexcept {
  return read("apply_report", [&](sqlite::SqliteStore& s) { return s.apply_report(n, r); });
}
Result<std::vector<sdk::ApplyReport>> JetStreamKvStore::apply_reports(const std::string& n, std::uint32_t limit) noexcept {
  return read("apply_reports", [&](sqlite::SqliteStore& s) { return s.apply_reports(n, limit); });
}
Result<std::optional<sdk::DriftReport>> JetStreamKvStore::last_drift(const std::string& n, bool items_only) noexcept {
  return read("last_drift", [&](sqlite::SqliteStore& s) { return s.last_drift(n, items_only); });
}
Result<std::vector<std::string>> JetStreamKvStore::owned(const std::string& n) noexcept {
  return read("owned", [&](sqlite::SqliteStore& s) { return s.owned(n); });
}
Result<std::vector<sdk::OwnedRecord>> JetStreamKvStore::recovery_copy(const std::string& n) noexcept {
  return read("recovery_copy", [&](sqlite::SqliteStore& s) { return s.recovery_copy(n); });
}
Result<std::vector<sdk::NodeRecord>> JetStreamKvStore::all_nodes() noexcept {
  return read("all_nodes", [&](sqlite::SqliteStore& s) { return s.all_nodes(); });
}
Result<std::optional<std::string>> JetStreamKvStore::provider_schemas(const std::string& n) noexcept {
  return read("provider_schemas", [&](sqlite::SqliteStore& s) { return s.provider_schemas(n); });
}
Result<std::optional<sdk::StoredRecord>> JetStreamKvStore::record(const std::string& ns, const std::string& key) noexcept {
  return read("record", [&](sqlite::SqliteStore& s) { return s.record(ns, key); });
}
Result<std::vector<sdk::StoredRecord>> JetStreamKvStore::records(const std::string& ns, const std::string& prefix) noexcept {
  return read("records", [&](sqlite::SqliteStore& s) { return s.records(ns, prefix); });
}

// --- writes ----------------------------------------------------------------------------------------

Result<void> JetStreamKvStore::add_token(const sdk::TokenRecord& token) noexcept {
  return write<void>("add_token", Method::AddToken, [&]() -> Result<std::string> {
    Writer w;
    put(w, token);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::revoke_token(const std::string& id) noexcept {
  return write<void>("revoke_token", Method::RevokeToken, [&]() -> Result<std::string> {
    Writer w;
    w.str(id);
    return std::move(w.bytes());
  });
}
Result<sdk::NodeRecord> JetStreamKvStore::enrol(const std::string& token_hash, const std::string& node,
                                                const std::string& public_key, std::int64_t now_ms) noexcept {
  return write<sdk::NodeRecord>("enrol", Method::Enrol, [&]() -> Result<std::string> {
    Writer w;
    w.str(token_hash);
    w.str(node);
    w.str(public_key);
    w.i64(now_ms);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::set_briefing(const std::string& node, const std::string& briefing, bool eligible) noexcept {
  return write<void>("set_briefing", Method::SetBriefing, [&]() -> Result<std::string> {
    Writer w;
    w.str(node);
    w.str(briefing);
    w.boolean(eligible);
    return std::move(w.bytes());
  });
}
Result<bool> JetStreamKvStore::record_apply(const sdk::ApplyReport& report) noexcept {
  return write<bool>("record_apply", Method::RecordApply, [&]() -> Result<std::string> {
    Writer w;
    put(w, report);
    return std::move(w.bytes());
  });
}
Result<bool> JetStreamKvStore::record_drift(const sdk::DriftReport& report) noexcept {
  return write<bool>("record_drift", Method::RecordDrift, [&]() -> Result<std::string> {
    Writer w;
    put(w, report);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::touch(const std::vector<sdk::ContactUpdate>& updates) noexcept {
  if (updates.empty()) return {};
  return write<void>("touch", Method::Touch, [&]() -> Result<std::string> {
    Writer w;
    w.u64(updates.size());
    for (const auto& u : updates) put(w, u);
    return std::move(w.bytes());
  });
}
Result<sdk::NodeRecord> JetStreamKvStore::remove_node(const std::string& node, std::int64_t now_ms, bool purge) noexcept {
  return write<sdk::NodeRecord>("remove_node", Method::RemoveNode, [&]() -> Result<std::string> {
    Writer w;
    w.str(node);
    w.i64(now_ms);
    w.boolean(purge);
    return std::move(w.bytes());
  });
}
Result<std::optional<sdk::RequestRecord>> JetStreamKvStore::remember_request(const sdk::RequestRecord& request,
                                                                             std::int64_t now_ms) noexcept {
  return write<std::optional<sdk::RequestRecord>>("remember_request", Method::RememberRequest,
                                                  [&]() -> Result<std::string> {
                                                    Writer w;
                                                    put(w, request);
                                                    w.i64(now_ms);
                                                    return std::move(w.bytes());
                                                  });
}
Result<sdk::RememberResults> JetStreamKvStore::remember_requests(const std::vector<sdk::RequestRecord>& requests,
                                                                 std::int64_t now_ms) noexcept {
  if (requests.empty()) return sdk::RememberResults{};
  // One operation for the batch (in parts when over max_payload): one publish round trip.
  return write<sdk::RememberResults>("remember_requests", Method::RememberRequests, [&]() -> Result<std::string> {
    Writer w;
    w.i64(now_ms);
    w.u64(requests.size());
    for (const auto& q : requests) put(w, q);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::answer_request(const std::string& signer, const std::string& nonce,
                                              const std::string& answer) noexcept {
  return write<void>("answer_request", Method::AnswerRequest, [&]() -> Result<std::string> {
    Writer w;
    w.str(signer);
    w.str(nonce);
    w.str(answer);
    return std::move(w.bytes());
  });
}
Result<void> JetStreamKvStore::set_provider_schemas(const std::string& node, const std::string& schemas) noexcept {
  return write<void>("set_provider_schemas", Method::SetProviderSchemas, [&]() -> Result<std::string> {
    Writer w;
    w.str(node);
    w.str(schemas);
    return std::move(w.bytes());
  });
}
Result<std::vector<sdk::StoredRecord>> JetStreamKvStore::put_records(const std::vector<sdk::RecordWrite>& writes,
                                                                     std::int64_t now_ms) noexcept {
  return write<std::vector<sdk::StoredRecord>>("put_records", Method::PutRecords, [&]() -> Result<std::string> {
    return encode_put_records(writes, now_ms);
  });
}
Result<std::uint64_t> JetStreamKvStore::next_sequence(const std::string& name) noexcept {
  return write<std::uint64_t>("next_sequence", Method::NextSequence, [&]() -> Result<std::string> {
    Writer w;
    w.str(name);
    return std::move(w.bytes());
  });
}

Result<DeclarePrediction> JetStreamKvStore::predict(const std::vector<sdk::DeclarationWrite>& writes) {
  DeclarePrediction p;
  MESH_TRY(db_->with_connection([&](Connection& conn) -> Result<void> {
    for (const auto& w : writes) {
      MESH_TRY(st, conn.prepare("SELECT last_revision FROM nodes WHERE name = ?1"));
      st.bind(1, w.node);
      MESH_TRY(row, st.step());
      p.revisions.push_back((row ? st.column_uint(0) : 0) + 1);
    }
    if (!writes.empty()) {
      MESH_TRY(st, conn.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'deliveries'"));
      MESH_TRY(row, st.step());
      p.delivery = (row ? st.column_uint(0) : 0) + 1;
    }
    return {};
  }));
  return p;
}

Result<sdk::DeliveryRecord> JetStreamKvStore::declare_op(DeclareKind kind, const std::vector<sdk::DeclarationWrite>& writes,
                                                         const std::vector<sdk::RecordWrite>& records,
                                                         std::int64_t now_ms, std::uint32_t retain,
                                                         const sdk::RequestAnswer* answer) noexcept {
  return write<sdk::DeliveryRecord>("declare", Method::Declare, [&]() -> Result<std::string> {
    MESH_TRY(prediction, predict(writes));
    return encode_declare(kind, writes, records, now_ms, retain, answer, prediction);
  });
}

Result<sdk::DeliveryRecord> JetStreamKvStore::declare(const std::vector<sdk::DeclarationWrite>& writes,
                                                      std::int64_t now_ms, std::uint32_t retain) noexcept {
  return declare_op(DeclareKind::Declare, writes, {}, now_ms, retain, nullptr);
}
Result<sdk::DeliveryRecord> JetStreamKvStore::declare_answered(const std::vector<sdk::DeclarationWrite>& writes,
                                                               std::int64_t now_ms, std::uint32_t retain,
                                                               const sdk::RequestAnswer& answer) noexcept {
  return declare_op(DeclareKind::Answered, writes, {}, now_ms, retain, &answer);
}
Result<sdk::DeliveryRecord> JetStreamKvStore::declare_with(const std::vector<sdk::DeclarationWrite>& writes,
                                                           const std::vector<sdk::RecordWrite>& records,
                                                           std::int64_t now_ms, std::uint32_t retain,
                                                           const std::optional<sdk::RequestAnswer>& answer) noexcept {
  return declare_op(DeclareKind::With, writes, records, now_ms, retain, answer ? &*answer : nullptr);
}

// --- backup and restore (decision 85) ------------------------------------------------------------

Result<void> JetStreamKvStore::backup(const std::string& path) noexcept {
  // Caught up first: the copy is the whole store as of the stream's last sequence at this call.
  return read("backup", [&](sqlite::SqliteStore& s) { return s.backup(path); });
}

Result<void> JetStreamKvStore::restore(const std::string& path) noexcept {
  return sdk::fail(ErrorCode::Unsupported,
                   "jetstream-kv store: a backup ('" + path + "') is restored into a new stream, not over this one "
                   "(other instances serve it): set [store] prefix to a new name and import_sqlite = \"" + path +
                   "\", then start mesh-control (README \"Back up and restore the control plane\")");
}

}  // namespace mesh::stores::jetstream_kv
