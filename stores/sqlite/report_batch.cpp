// Group commit of reports (docs/decisions/0100): SqliteStore::record_reports records a batch of
// apply and drift reports in one write transaction — one fsync for the batch instead of one per
// report — each report inside its own SAVEPOINT, so that one refused report is rolled back and
// answered alone while the others commit.
#include "connection.h"
#include "sqlite_store.h"

namespace mesh::stores::sqlite {
namespace {

using sdk::ErrorCode;
using sdk::Result;

// The store's own failure (busy, disk full, I/O): the whole batch fails and nothing is written,
// since SQLite may already have rolled the transaction back. Anything else is the report's own
// refusal (its fields, its sender, its node), answered to it alone.
bool store_failure(ErrorCode c) {
  return c == ErrorCode::Transient || c == ErrorCode::Unavailable || c == ErrorCode::Timeout;
}

}  // namespace

Result<sdk::ReportResults> SqliteStore::record_reports(const sdk::ReportBatch& batch) noexcept {
  return sdk::guard("record_reports", [&]() -> Result<sdk::ReportResults> {
    std::lock_guard lock(mutex_);
    if (!db_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: record_reports called before open()");
    Connection& db = *db_;
    sdk::ReportResults out;
    out.applies.reserve(batch.applies.size());
    out.drifts.reserve(batch.drifts.size());
    if (batch.applies.empty() && batch.drifts.empty()) return out;
    MESH_TRY(tx, Transaction::begin(db, Transaction::Kind::Write));
    // One report: its rows inside a savepoint, released when recorded, rolled back when refused.
    auto one = [&](auto&& rows) -> Result<Result<bool>> {
      MESH_TRY(db.exec("SAVEPOINT report", "record_reports: savepoint"));
      Result<bool> r = rows();
      if (r) {
        MESH_TRY(db.exec("RELEASE report", "record_reports: release"));
        return r;
      }
      if (store_failure(r.error().code)) return sdk::fail(std::move(r).error());
      MESH_TRY(db.exec("ROLLBACK TO report; RELEASE report", "record_reports: roll back one report"));
      return r;
    };
    for (const auto& report : batch.applies) {
      MESH_TRY(r, one([&] { return record_apply_rows(db, report); }));
      out.applies.push_back(std::move(r));
    }
    for (const auto& report : batch.drifts) {
      MESH_TRY(r, one([&] { return record_drift_rows(db, report); }));
      out.drifts.push_back(std::move(r));
    }
    MESH_TRY(tx.commit());
    return out;
  });
}

Result<void> SqliteStore::read_many(const std::function<Result<void>(sdk::Store& view)>& reads) noexcept {
  return sdk::guard("read_many", [&]() -> Result<void> {
    std::lock_guard lock(mutex_);
    if (!db_) return sdk::fail(ErrorCode::FailedPrecondition, "sqlite store: read_many called before open()");
    Connection& db = *db_;
    if (db.in_read_many()) return reads(*this);
    MESH_TRY(tx, Transaction::begin(db, Transaction::Kind::Read));
    db.set_in_read_many(true);
    struct Leave {
      Connection& db;
      ~Leave() { db.set_in_read_many(false); }
    } leave{db};
    Result<void> r = reads(*this);
    db.set_in_read_many(false);
    MESH_TRY(tx.commit());
    return r;
  });
}

}  // namespace mesh::stores::sqlite
