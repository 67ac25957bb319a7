// Group commit of reports on the jetstream-kv store (docs/decisions/0100): a batch of apply and
// drift reports is ONE operation message — one JetStream publish round trip for the batch
// instead of one per report — applied on every instance by the sqlite store's record_reports,
// so that each report's result (recorded, not recorded, refused) is the same everywhere. And
// read_many: many reads after one catch-up (decision 101).
#include "jetstream_kv_store.h"
#include "operations.h"
#include "sqlite_store.h"
#include "store_paths.h"

namespace mesh::stores::jetstream_kv {

std::string encode_reports(const sdk::ReportBatch& batch) {
  Writer w;
  w.u64(batch.applies.size());
  for (const auto& a : batch.applies) put(w, a);
  w.u64(batch.drifts.size());
  for (const auto& d : batch.drifts) put(w, d);
  return std::move(w.bytes());
}

sdk::Result<sdk::ReportResults> apply_reports(sqlite::SqliteStore& db, Reader& r, std::uint64_t seq) {
  const auto malformed = [seq] {
    return sdk::fail(sdk::ErrorCode::Failed,
                     "jetstream-kv: the report batch at stream sequence " + std::to_string(seq) +
                         " is malformed; it was skipped");
  };
  sdk::ReportBatch batch;
  batch.applies.resize(r.count(8));
  for (auto& a : batch.applies) get(r, a);
  if (!r.ok()) return malformed();
  batch.drifts.resize(r.count(8));
  for (auto& d : batch.drifts) get(r, d);
  if (!r.ok() || !r.at_end()) return malformed();
  return db.record_reports(batch);
}

sdk::Result<sdk::ReportResults> JetStreamKvStore::record_reports(const sdk::ReportBatch& batch) noexcept {
  if (batch.applies.empty() && batch.drifts.empty()) return sdk::ReportResults{};
  return write<sdk::ReportResults>("record_reports", Method::RecordReports,
                                   [&]() -> sdk::Result<std::string> { return encode_reports(batch); });
}

sdk::Result<void> JetStreamKvStore::read_many(
    const std::function<sdk::Result<void>(sdk::Store& view)>& reads) noexcept {
  // One catch-up, then one read transaction of the local file for all of them.
  return read("read_many", [&](sqlite::SqliteStore& db) -> sdk::Result<void> { return db.read_many(reads); });
}

}  // namespace mesh::stores::jetstream_kv
