// The `jetstream-kv` store's operations (docs/decisions/0087): what each write method puts in
// the log, and how an operation is applied to the local SQLite file (by the `sqlite` store's own
// methods, so both stores mean the same).
//
// An operation message (subject <prefix>.op) is
//   u8 version (1), u8 kind: 0 = inline: str op id, u8 method, the method's payload;
//                            1 = parts:  str op id, list of u64 part sequences, str SHA-256 (hex)
//                                        of the inline form the parts make when joined.
// Each method's payload is the method's arguments in order (codec.h), with what the renders
// returned in place of the render callbacks (see encode_declare).
//
// Internal to the plugin. Thread safety: none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "codec.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::stores::sqlite {
class SqliteStore;
}

namespace mesh::stores::jetstream_kv {

enum class Method : std::uint8_t {
  AddToken = 1,
  RevokeToken,
  Enrol,
  SetBriefing,
  Declare,
  RecordApply,
  RecordDrift,
  Touch,
  RemoveNode,
  RememberRequest,
  AnswerRequest,
  SetProviderSchemas,
  PutRecords,
  NextSequence,
  /// A whole sqlite store database (str: the image), the stream's first operation: applying it
  /// replaces the local file (import.h; applied by the store itself, not apply_operation).
  Import,
  /// Group commit of reports (docs/decisions/0100; report_batch.cpp): u64 count, that many apply
  /// reports, u64 count, that many drift reports; applied by SqliteStore::record_reports in one
  /// local transaction. An explicit value, so that methods appended by others do not move it.
  RecordReports = 32,
  /// Group commit of nonces (docs/decisions/0119): i64 now, u64 count, that many requests;
  /// applied by SqliteStore::remember_requests in one local transaction, so that each request's
  /// result (fresh or a replay) is the same on every instance.
  RememberRequests = 33,
};

/// What applying an operation returned: the result of the write method it came from.
using OpResult = std::variant<sdk::Result<void>, sdk::Result<sdk::NodeRecord>, sdk::Result<sdk::DeliveryRecord>,
                              sdk::Result<bool>, sdk::Result<std::optional<sdk::RequestRecord>>,
                              sdk::Result<std::vector<sdk::StoredRecord>>, sdk::Result<std::uint64_t>,
                              sdk::Result<sdk::ReportResults>, sdk::Result<sdk::RememberResults>>;

/// Which declare method a Declare operation came from.
enum class DeclareKind : std::uint8_t { Declare = 0, Answered = 1, With = 2 };

/// What the renders returned, predicted on the caught-up state: each write's revision (its
/// node's revision counter + 1) and the delivery id (the last delivery id + 1; 0 with no write).
struct DeclarePrediction {
  std::vector<std::uint64_t> revisions;  ///< parallel to the writes
  std::uint64_t delivery = 0;
};

/// Encodes a declare/declare_answered/declare_with call, calling every render with the
/// predicted revision and delivery. Errors: Internal when a render throws (nothing is
/// published then).
sdk::Result<std::string> encode_declare(DeclareKind kind, const std::vector<sdk::DeclarationWrite>& writes,
                                        const std::vector<sdk::RecordWrite>& records, std::int64_t now_ms,
                                        std::uint32_t retain, const sdk::RequestAnswer* answer,
                                        const DeclarePrediction& prediction);
/// Encodes put_records' writes (a write's render is kept as a flag: the sqlite store refuses it).
std::string encode_put_records(const std::vector<sdk::RecordWrite>& writes, std::int64_t now_ms);

/// Applies one operation's payload to `db`. A payload that does not decode is a Failed result
/// naming `seq` (it fails identically on every instance).
OpResult apply_operation(sqlite::SqliteStore& db, Method method, Reader& payload, std::uint64_t seq);

/// Encodes a record_reports batch (report_batch.cpp).
std::string encode_reports(const sdk::ReportBatch& batch);
/// Applies a RecordReports payload (report_batch.cpp): decodes it and calls db.record_reports.
/// A payload that does not decode is a Failed result naming `seq`.
sdk::Result<sdk::ReportResults> apply_reports(sqlite::SqliteStore& db, Reader& payload, std::uint64_t seq);

/// Whether `e` is what applying a declaration gives when the revisions or delivery it was
/// rendered for no longer hold (another write came first): the writer renders again.
bool is_prediction_mismatch(const sdk::Error& e);

/// The error of an OpResult, or nullptr when it succeeded.
const sdk::Error* error_of(const OpResult& r);

}  // namespace mesh::stores::jetstream_kv
