#include "records.h"

#include <set>
#include <utility>

namespace mesh::stores::sqlite {

using sdk::ErrorCode;
using sdk::StoredRecord;

namespace {

std::string shown(const std::string& s) {
  // Names in messages: at most 200 bytes of what the caller sent.
  return "'" + (s.size() > 200 ? s.substr(0, 200) + "…" : s) + "'";
}

std::string record_name(const std::string& ns, const std::string& key) { return "record " + shown(ns + "/" + key); }

bool ns_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

sdk::Result<void> check_ns_key(const std::string& ns, const std::string& key) {
  if (ns.empty()) return sdk::fail(ErrorCode::InvalidArgument, "a record write has an empty namespace", "ns");
  if (ns.size() > kMaxRecordNsBytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "record namespace " + shown(ns) + " is longer than " + std::to_string(kMaxRecordNsBytes) +
                         " bytes (sqlite_store.h \"Bounds\")",
                     "ns");
  for (char c : ns)
    if (!ns_char(c))
      return sdk::fail(ErrorCode::InvalidArgument,
                       "record namespace " + shown(ns) + " may only hold a-z, 0-9, '_', '.' and '-'", "ns");
  if (key.empty())
    return sdk::fail(ErrorCode::InvalidArgument, "a record write in namespace " + shown(ns) + " has an empty key",
                     "key");
  if (key.size() > kMaxRecordKeyBytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     record_name(ns, key) + ": the key has " + std::to_string(key.size()) +
                         " bytes, over the store's limit of " + std::to_string(kMaxRecordKeyBytes) +
                         " (sqlite_store.h \"Bounds\")",
                     "key");
  if (key.find('\0') != std::string::npos)
    return sdk::fail(ErrorCode::InvalidArgument, record_name(ns, key) + ": the key holds a NUL byte", "key");
  return {};
}

sdk::Result<void> check_value(const std::string& ns, const std::string& key, std::size_t size) {
  if (size <= kMaxRecordValueBytes) return {};
  return sdk::fail(ErrorCode::InvalidArgument,
                   record_name(ns, key) + ": the value has " + std::to_string(size) +
                       " bytes, over the store's limit of " + std::to_string(kMaxRecordValueBytes) +
                       " bytes (sqlite_store.h \"Bounds\"); nothing was written",
                   "value");
}

std::string version_text(std::uint64_t v) { return v == 0 ? std::string("0 (absent)") : std::to_string(v); }

// The smallest string greater than every string starting with `prefix` (bytewise, as SQLite's
// BINARY collation compares), or nullopt when there is none (empty or all-0xFF prefix).
std::optional<std::string> prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xFF) prefix.pop_back();
  if (prefix.empty()) return std::nullopt;
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

StoredRecord read_row(const Statement& st, const std::string& ns) {
  StoredRecord r;
  r.ns = ns;
  r.key = st.column_text(0);
  r.value = st.column_text(1);
  r.version = st.column_uint(2);
  r.updated_at_ms = st.column_int(3);
  return r;
}

}  // namespace

sdk::Result<void> check_record_writes(const std::vector<sdk::RecordWrite>& writes, bool allow_render) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const auto& w : writes) {
    MESH_TRY(check_ns_key(w.ns, w.key));
    if (!seen.emplace(w.ns, w.key).second)
      return sdk::fail(ErrorCode::InvalidArgument, record_name(w.ns, w.key) + " is written twice in one call");
    if (w.render && !allow_render)
      return sdk::fail(ErrorCode::InvalidArgument,
                       record_name(w.ns, w.key) + " has a render, which only declare_with can call (with its delivery)",
                       "render");
    if (!w.erase && !w.render) MESH_TRY(check_value(w.ns, w.key, w.value.size()));
  }
  return {};
}

sdk::Result<std::vector<std::uint64_t>> check_record_versions(Connection& db,
                                                              const std::vector<sdk::RecordWrite>& writes) {
  std::vector<std::uint64_t> versions;
  versions.reserve(writes.size());
  for (const auto& w : writes) {
    MESH_TRY(st, db.prepare("SELECT version, erased FROM records WHERE ns = ?1 AND key = ?2"));
    st.bind(1, w.ns).bind(2, w.key);
    MESH_TRY(row, st.step());
    const std::uint64_t stored = row ? st.column_uint(0) : 0;
    const bool exists = row && st.column_int(1) == 0;
    versions.push_back(stored);
    if (!w.expected_version) continue;
    const std::uint64_t actual = exists ? stored : 0;
    if (*w.expected_version != actual)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       record_name(w.ns, w.key) + ": expected version " + version_text(*w.expected_version) +
                           ", but it is at version " + version_text(actual) +
                           (!exists && stored > 0 ? " (erased at version " + std::to_string(stored) + ")" : "") +
                           "; nothing was written");
  }
  return versions;
}

sdk::Result<std::vector<StoredRecord>> write_records(Connection& db, const std::vector<sdk::RecordWrite>& writes,
                                                     const std::vector<std::uint64_t>& versions,
                                                     const sdk::DeliveryRecord* delivery, std::int64_t now_ms) {
  std::vector<StoredRecord> out;
  out.reserve(writes.size());
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const auto& w = writes[i];
    StoredRecord r;
    r.ns = w.ns;
    r.key = w.key;
    r.updated_at_ms = now_ms;
    if (w.erase) {
      MESH_TRY(st, db.prepare("UPDATE records SET value = '', version = version + 1, updated_at_ms = ?3, "
                              "erased = 1 WHERE ns = ?1 AND key = ?2 AND erased = 0"));
      st.bind(1, w.ns).bind(2, w.key).bind(3, now_ms);
      MESH_TRY(st.run());
      // Erasing what does not exist changes nothing (its version stays where it was).
      r.version = versions[i] + (db.changes() > 0 ? 1 : 0);
      if (db.changes() == 0) r.updated_at_ms = 0;
      out.push_back(std::move(r));
      continue;
    }
    if (w.render) {
      if (!delivery)
        return sdk::fail(ErrorCode::InvalidArgument, record_name(w.ns, w.key) + " has a render but no delivery");
      r.value = w.render(*delivery);
      MESH_TRY(check_value(w.ns, w.key, r.value.size()));
    } else {
      r.value = w.value;
    }
    r.version = versions[i] + 1;
    MESH_TRY(st, db.prepare("INSERT INTO records (ns, key, value, version, updated_at_ms, erased) "
                            "VALUES (?1, ?2, ?3, ?4, ?5, 0) ON CONFLICT (ns, key) DO UPDATE SET "
                            "value = excluded.value, version = excluded.version, "
                            "updated_at_ms = excluded.updated_at_ms, erased = 0"));
    st.bind(1, r.ns).bind(2, r.key).bind(3, r.value).bind(4, static_cast<std::int64_t>(r.version)).bind(5, now_ms);
    MESH_TRY(st.run());
    out.push_back(std::move(r));
  }
  return out;
}

sdk::Result<std::optional<StoredRecord>> read_record(Connection& db, const std::string& ns, const std::string& key) {
  MESH_TRY(st, db.prepare("SELECT key, value, version, updated_at_ms FROM records "
                          "WHERE ns = ?1 AND key = ?2 AND erased = 0"));
  st.bind(1, ns).bind(2, key);
  MESH_TRY(row, st.step());
  if (!row) return std::optional<StoredRecord>();
  return std::optional<StoredRecord>(read_row(st, ns));
}

sdk::Result<std::vector<StoredRecord>> read_records(Connection& db, const std::string& ns,
                                                    const std::string& prefix) {
  std::vector<StoredRecord> out;
  const auto end = prefix_end(prefix);
  // Both forms walk the (ns, key) index from the prefix on, in key order.
  auto st = end ? db.prepare("SELECT key, value, version, updated_at_ms FROM records "
                             "WHERE ns = ?1 AND key >= ?2 AND key < ?3 AND erased = 0 ORDER BY key")
                : db.prepare("SELECT key, value, version, updated_at_ms FROM records "
                             "WHERE ns = ?1 AND key >= ?2 AND erased = 0 ORDER BY key");
  if (!st) return sdk::fail(std::move(st).error());
  st->bind(1, ns).bind(2, prefix);
  if (end) st->bind(3, *end);
  for (;;) {
    MESH_TRY(row, st->step());
    if (!row) break;
    out.push_back(read_row(*st, ns));
  }
  return out;
}

sdk::Result<std::uint64_t> next_sequence_in(Connection& db, const std::string& name) {
  if (name.empty()) return sdk::fail(ErrorCode::InvalidArgument, "a sequence needs a name", "name");
  if (name.size() > kMaxRecordKeyBytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "sequence name " + shown(name) + " is longer than " + std::to_string(kMaxRecordKeyBytes) +
                         " bytes (sqlite_store.h \"Bounds\")",
                     "name");
  MESH_TRY(st, db.prepare("INSERT INTO sequences (name, value) VALUES (?1, 1) "
                          "ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value"));
  st.bind(1, name);
  MESH_TRY(row, st.step());
  if (!row) return sdk::fail(ErrorCode::Internal, "sequence " + shown(name) + ": no value returned");
  const std::uint64_t v = st.column_uint(0);
  // Finish the statement so that its write is complete before the commit.
  MESH_TRY(more, st.step());
  (void)more;
  return v;
}

}  // namespace mesh::stores::sqlite
