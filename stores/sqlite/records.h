// The `sqlite` store's keyed records and named sequences (tables `records` and `sequences`,
// schema version 7, docs/decisions/0050): what the control plane keeps besides nodes and
// declarations — modules, labels, assignments, deploys, pipeline runs.
//
// Internal to the plugin. Each function runs inside the caller's transaction on `db` (a write
// transaction for the writing ones) and thread safety is the caller's (the store's mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "connection.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::stores::sqlite {

/// Bounds of a record (sqlite_store.h "Bounds"): the namespace is 1 to 64 bytes of [a-z0-9_.-],
/// the key 1 to 1,024 bytes with no NUL byte, the value at most 16 MiB; a sequence name is
/// bounded like a key.
inline constexpr std::size_t kMaxRecordNsBytes = 64;
inline constexpr std::size_t kMaxRecordKeyBytes = 1024;
inline constexpr std::size_t kMaxRecordValueBytes = 16u << 20;

/// Checks the shape of `writes` before any transaction: non-empty ns and key within bounds, no
/// (ns, key) twice, no render unless `allow_render`, values within bounds. InvalidArgument
/// naming ns/key and the rule. An empty `writes` is allowed here (callers decide).
sdk::Result<void> check_record_writes(const std::vector<sdk::RecordWrite>& writes, bool allow_render);

/// The stored versions of `writes`' records, checked against their expected_version, in the
/// order of `writes` (0 when never written). FailedPrecondition naming ns/key, the expected and
/// the actual version when one does not hold.
sdk::Result<std::vector<std::uint64_t>> check_record_versions(Connection& db,
                                                              const std::vector<sdk::RecordWrite>& writes);

/// Writes `writes` (after check_record_versions, whose result is `versions`), each at its
/// version + 1, stamped `now_ms`; a write's render is called with `delivery` (InvalidArgument
/// when `delivery` is null: check_record_writes already refused it). A rendered value beyond
/// the bound is InvalidArgument. Returns the records as written.
sdk::Result<std::vector<sdk::StoredRecord>> write_records(Connection& db, const std::vector<sdk::RecordWrite>& writes,
                                                          const std::vector<std::uint64_t>& versions,
                                                          const sdk::DeliveryRecord* delivery, std::int64_t now_ms);

/// The record (ns, key) unless erased or never written.
sdk::Result<std::optional<sdk::StoredRecord>> read_record(Connection& db, const std::string& ns,
                                                          const std::string& key);
/// The records of `ns` whose key starts with `prefix`, sorted by key, erased ones left out.
sdk::Result<std::vector<sdk::StoredRecord>> read_records(Connection& db, const std::string& ns,
                                                         const std::string& prefix);

/// Raises the sequence `name` by one and returns its new value (1 the first time). Needs a
/// write transaction. InvalidArgument for an empty or over-long name.
sdk::Result<std::uint64_t> next_sequence_in(Connection& db, const std::string& name);

}  // namespace mesh::stores::sqlite
