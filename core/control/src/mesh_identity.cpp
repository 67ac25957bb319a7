#include "mesh_identity.h"

#include <sqlite3.h>

#include "mesh/common/crypto.h"
#include "mesh/common/json.h"

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

sdk::Result<void> check_store_is_new(sdk::Store& store, const std::string& keys_dir) {
  const std::string missing = "keys_dir '" + keys_dir + "' has no control.key";
  auto have = store.record(kMeshIdentityNs, kMeshIdentityKey);
  if (!have && have.error().code != sdk::ErrorCode::Unsupported) return sdk::fail(have.error());
  if (have && *have)
    return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                     missing + ", but the store belongs to a mesh already (its identity record was written by a "
                               "control plane with a control.key): keys_dir is probably wrong — start with that "
                               "mesh's keys_dir ([control] keys_dir, the same for every instance); no new key was "
                               "made, nothing was written");
  auto nodes = store.nodes();
  if (!nodes) return sdk::fail(nodes.error());
  if (!nodes->empty())
    return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                     missing + ", but the store has " + std::to_string(nodes->size()) +
                         " enrolled node(s), which pinned that mesh's key: keys_dir is probably wrong — start with "
                         "that mesh's keys_dir ([control] keys_dir); no new key was made, nothing was written");
  return {};
}

namespace {

std::string signing_value(const SigningKey& k) {
  return "{\"rotations\":" + std::to_string(k.rotations) + ",\"key\":\"" + common::to_hex(k.pair.public_key) + "\"}";
}

}  // namespace

sdk::Result<void> check_or_record_signing_key(sdk::Store& store, const SigningKey& signing, const std::string& keys_dir,
                                              std::int64_t now_ms, bool* written) {
  if (written) *written = false;
  const std::string mine = common::to_hex(signing.pair.public_key);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto have = store.record(kMeshIdentityNs, kSigningKeyRecord);
    if (!have && have.error().code == sdk::ErrorCode::Unsupported) return {};
    if (!have) return sdk::fail(have.error());
    std::uint64_t version = 0;
    if (*have) {
      version = (*have)->version;
      auto v = common::parse_json((*have)->value);
      const std::int64_t theirs = v ? v->get_int("rotations", -1) : -1;
      const std::string key = v ? v->get_string("key") : std::string();
      if (theirs < 0 || key.size() != 64)
        return sdk::fail(sdk::ErrorCode::Failed, "the store's record of the mesh's signing key is unreadable");
      const auto ours = static_cast<std::int64_t>(signing.rotations);
      if (theirs > ours || (theirs == ours && key != mine))
        return sdk::fail(
            sdk::ErrorCode::FailedPrecondition,
            "keys_dir '" + keys_dir + "' signs with key " + mine.substr(0, 16) + "… after " + std::to_string(ours) +
                " rotation(s), but the mesh signs with key " + key.substr(0, 16) + "… after " + std::to_string(theirs) +
                " (recorded in the store by an instance that signed with it): this keys_dir " +
                (theirs > ours ? "lacks the newest signing.json" : "holds a signing.json of another rotation") +
                ", and hosts and operators that pinned the newer key would refuse what this instance signs; copy "
                "signing.json (with control.key, operators.json) from the keys_dir the other instances use, or use "
                "that keys_dir ([control] keys_dir)");
      if (theirs == ours) return {};
    }
    sdk::RecordWrite w;
    w.ns = kMeshIdentityNs;
    w.key = kSigningKeyRecord;
    w.value = signing_value(signing);
    w.expected_version = version;
    auto put = store.put_records({w}, now_ms);
    if (put) {
      if (written) *written = true;
      return {};
    }
    if (put.error().code != sdk::ErrorCode::FailedPrecondition) return sdk::fail(put.error());
    // Another instance wrote it meanwhile: compare with what it wrote.
  }
  return sdk::fail(sdk::ErrorCode::Unavailable, "the store's record of the signing key changed while it was written");
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
