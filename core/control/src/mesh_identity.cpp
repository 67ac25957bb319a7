#include "mesh_identity.h"

#include <sqlite3.h>

#include "mesh/common/crypto.h"

namespace mesh::control::detail {

std::string mesh_identity_value(const ControlKeys& keys) {
  return "{\"mesh_id\":\"" + common::to_hex(common::mac("nox-mesh mesh identity v1", keys.heartbeat_master)) + "\"}";
}

sdk::Result<void> check_or_claim_mesh_identity(sdk::Store& store, const ControlKeys& keys, const std::string& keys_dir,
                                               std::int64_t now_ms) {
  const std::string mine = mesh_identity_value(keys);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto have = store.record(kMeshIdentityNs, kMeshIdentityKey);
    if (!have && have.error().code == sdk::ErrorCode::Unsupported) return {};
    if (!have) return sdk::fail(have.error());
    if (*have) {
      if ((*have)->value == mine) return {};
      return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                       "the store belongs to another mesh: its identity record was written by a control plane whose "
                       "control.key is not the one in keys_dir '" + keys_dir +
                           "'; start with that mesh's keys_dir (the same for every instance, [control] keys_dir), or "
                           "give this control plane a store of its own");
    }
    sdk::RecordWrite w;
    w.ns = kMeshIdentityNs;
    w.key = kMeshIdentityKey;
    w.value = mine;
    w.expected_version = 0;
    auto put = store.put_records({w}, now_ms);
    if (put) return {};
    if (put.error().code != sdk::ErrorCode::FailedPrecondition) return sdk::fail(put.error());
    // Another instance wrote it first: compare with what it wrote.
  }
  return sdk::fail(sdk::ErrorCode::Unavailable, "the store's identity record changed twice while it was read");
}

sdk::Result<std::optional<std::string>> backup_mesh_identity(const std::string& path) {
  sqlite3* db = nullptr;
  struct Close {
    sqlite3*& db;
    ~Close() { sqlite3_close(db); }
  } close{db};
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr) != SQLITE_OK)
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     "backup '" + path + "' cannot be opened: " + (db ? sqlite3_errmsg(db) : "out of memory"));
  sqlite3_stmt* st = nullptr;
  // No records table (another database, an old release): no identity; the store's restore
  // judges the rest.
  if (sqlite3_prepare_v2(db, "SELECT value FROM records WHERE ns = ?1 AND key = ?2 AND erased = 0", -1, &st,
                         nullptr) != SQLITE_OK)
    return std::optional<std::string>{};
  sqlite3_bind_text(st, 1, kMeshIdentityNs, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, kMeshIdentityKey, -1, SQLITE_STATIC);
  std::optional<std::string> out;
  if (sqlite3_step(st) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    out = text ? std::string(text) : std::string();
  }
  sqlite3_finalize(st);
  return out;
}

}  // namespace mesh::control::detail
