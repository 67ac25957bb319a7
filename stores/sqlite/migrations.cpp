#include "migrations.h"

#include <string>

namespace mesh::stores::sqlite {

using sdk::ErrorCode;

namespace {

struct Migration {
  std::int64_t version;
  const char* what;
  const char* sql;
};

// Version 1. Notes on the choices:
// - nodes.last_revision is the per-node revision counter, so revisions are never reused even
//   when retention has deleted the newest-but-one rows (or all history rows of a node).
// - nodes.last_report_revision is the revision of the newest apply report recorded; a late,
//   re-sent older report does not overwrite last_outcome.
// - nodes.heartbeat_at_ms orders heartbeats: host_version/host_state only take a newer one.
// - Briefings live in their own table: a heartbeat rewrites the node row, and a briefing of a
//   few kilobytes in that row would be rewritten with it (overflow pages) each time.
// - deliveries.id is AUTOINCREMENT: ids are never reused, even after deletes.
// - Child rows name their node by `name` (the natural key every query uses).
constexpr Migration kMigrations[] = {
    {1, "create the schema", R"sql(
CREATE TABLE nodes (
  name                 TEXT PRIMARY KEY NOT NULL,
  enrolled_at_ms       INTEGER NOT NULL,
  generation           INTEGER NOT NULL,
  public_key           TEXT NOT NULL,
  last_revision        INTEGER NOT NULL DEFAULT 0,
  applied_revision     INTEGER NOT NULL DEFAULT 0,
  last_outcome         TEXT NOT NULL DEFAULT '',
  last_report_revision INTEGER NOT NULL DEFAULT 0,
  last_contact_ms      INTEGER,
  heartbeat_at_ms      INTEGER,
  host_version         TEXT NOT NULL DEFAULT '',
  host_state           TEXT NOT NULL DEFAULT '',
  eligible             INTEGER NOT NULL DEFAULT 1,
  owned_revision       INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE node_briefings (
  node     TEXT PRIMARY KEY NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  briefing TEXT NOT NULL
);

CREATE TABLE tokens (
  id            TEXT PRIMARY KEY NOT NULL,
  node          TEXT NOT NULL,
  hash          TEXT NOT NULL UNIQUE,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  reenrol       INTEGER NOT NULL,
  used_at_ms    INTEGER,
  revoked       INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE deliveries (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at_ms INTEGER NOT NULL
);

CREATE TABLE delivery_targets (
  delivery INTEGER NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
  node     TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  PRIMARY KEY (delivery, node)
) WITHOUT ROWID;

CREATE TABLE revisions (
  node          TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  revision      INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  delivery      INTEGER NOT NULL REFERENCES deliveries(id),
  body          TEXT NOT NULL,
  digest        TEXT NOT NULL,
  PRIMARY KEY (node, revision)
);

CREATE TABLE apply_reports (
  node     TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  at_ms    INTEGER NOT NULL,
  outcome  TEXT NOT NULL CHECK (outcome IN ('applied', 'failed', 'refused')),
  resource TEXT NOT NULL,
  reason   TEXT NOT NULL,
  PRIMARY KEY (node, revision)
);

CREATE TABLE apply_report_owned (
  node     TEXT NOT NULL,
  revision INTEGER NOT NULL,
  position INTEGER NOT NULL,
  resource TEXT NOT NULL,
  PRIMARY KEY (node, revision, position),
  FOREIGN KEY (node, revision) REFERENCES apply_reports(node, revision) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE owned (
  node     TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  resource TEXT NOT NULL,
  PRIMARY KEY (node, resource)
) WITHOUT ROWID;

CREATE TABLE drift_reports (
  id         INTEGER PRIMARY KEY,
  node       TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  scan_id    TEXT NOT NULL,
  revision   INTEGER NOT NULL,
  at_ms      INTEGER NOT NULL,
  item_count INTEGER NOT NULL,
  UNIQUE (node, scan_id)
);
CREATE INDEX drift_reports_newest ON drift_reports (node, at_ms, id);
CREATE INDEX drift_reports_newest_with_items ON drift_reports (node, at_ms, id)
  WHERE item_count > 0;

CREATE TABLE drift_items (
  report   INTEGER NOT NULL REFERENCES drift_reports(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  resource TEXT NOT NULL,
  found    TEXT NOT NULL,
  action   TEXT NOT NULL,
  PRIMARY KEY (report, position)
) WITHOUT ROWID;
)sql"},
    // Version 2: node removal (decision record 37). A removed node keeps its row — the revision
    // counter and generation must never restart, or old signed declarations would be newer than
    // a re-enrolled host's first ones — with removed_at_ms set. retired_revision is its
    // last_revision when it was removed: revisions up to it are history, never served again.
    {2, "node removal", R"sql(
ALTER TABLE nodes ADD COLUMN removed_at_ms INTEGER;
ALTER TABLE nodes ADD COLUMN retired_revision INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Version 3 (delivery truth, docs/decisions/0025 and 0026):
    // - apply_reports.generation: the identity generation whose key verified the report; reports
    //   of an older generation (a revoked identity) no longer count. received_at_ms: the control
    //   plane's receipt time. Outcome "superseded" (a host cancelled an apply for a newer one).
    // - apply_report_owned.digest / owned.digest: digest of each owned resource's read-back state.
    // SQLite cannot change a CHECK constraint in place, so both report tables are rebuilt (the
    // child first, so that dropping the old parent cascades into nothing).
    // Existing data: reports for revisions above the node's highest declared one were never
    // sent by the control plane (a stolen key's forgeries) and are deleted; applied_revision and
    // a recovery copy taken from them are recomputed / cleared; a last contact in the future
    // (a claimed time) is dropped.
    {3, "report generations, receipt times, owned digests, superseded outcome", R"sql(
CREATE TABLE apply_reports_v2 (
  node           TEXT NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  revision       INTEGER NOT NULL,
  at_ms          INTEGER NOT NULL,
  outcome        TEXT NOT NULL CHECK (outcome IN ('applied', 'failed', 'refused', 'superseded')),
  resource       TEXT NOT NULL,
  reason         TEXT NOT NULL,
  generation     INTEGER NOT NULL,
  received_at_ms INTEGER NOT NULL,
  PRIMARY KEY (node, revision)
);
INSERT INTO apply_reports_v2 (node, revision, at_ms, outcome, resource, reason, generation,
                              received_at_ms)
  SELECT a.node, a.revision, a.at_ms, a.outcome, a.resource, a.reason, n.generation, a.at_ms
  FROM apply_reports AS a JOIN nodes AS n ON n.name = a.node
  WHERE a.revision <= n.last_revision;
CREATE TABLE apply_report_owned_v2 (
  node     TEXT NOT NULL,
  revision INTEGER NOT NULL,
  position INTEGER NOT NULL,
  resource TEXT NOT NULL,
  digest   TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (node, revision, position),
  FOREIGN KEY (node, revision) REFERENCES apply_reports_v2(node, revision) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO apply_report_owned_v2 (node, revision, position, resource)
  SELECT o.node, o.revision, o.position, o.resource FROM apply_report_owned AS o
  WHERE EXISTS (SELECT 1 FROM apply_reports_v2 AS a
                WHERE a.node = o.node AND a.revision = o.revision);
DROP TABLE apply_report_owned;
DROP TABLE apply_reports;
ALTER TABLE apply_reports_v2 RENAME TO apply_reports;
ALTER TABLE apply_report_owned_v2 RENAME TO apply_report_owned;
ALTER TABLE owned ADD COLUMN digest TEXT NOT NULL DEFAULT '';
DELETE FROM owned WHERE node IN (SELECT name FROM nodes WHERE owned_revision > last_revision);
UPDATE nodes SET owned_revision = 0 WHERE owned_revision > last_revision;
UPDATE nodes SET
  applied_revision = coalesce((SELECT max(revision) FROM apply_reports
                               WHERE node = nodes.name AND outcome = 'applied'), 0),
  last_report_revision = coalesce((SELECT max(revision) FROM apply_reports
                                   WHERE node = nodes.name), 0),
  last_outcome = coalesce((SELECT outcome FROM apply_reports WHERE node = nodes.name
                           ORDER BY revision DESC LIMIT 1), '');
UPDATE nodes SET last_contact_ms = NULL
  WHERE last_contact_ms > CAST(strftime('%s', 'now') AS INTEGER) * 1000 + 86400000;
)sql"},
    // Version 4: replay protection that survives a restart (decision record 28).
    // - requests: every signed request's (signer, nonce) until it expires, and the answer of a
    //   mutating one, written in the transaction of its write; pruned by expires_at_ms.
    // - nodes.heartbeat_ts_ms/heartbeat_generation: the newest heartbeat timestamp taken (the
    //   host's MAC'd one) and the identity generation it was verified with.
    {4, "durable request nonces and heartbeat order", R"sql(
CREATE TABLE requests (
  signer        TEXT NOT NULL,
  nonce         TEXT NOT NULL,
  digest        TEXT NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  answer        TEXT,
  PRIMARY KEY (signer, nonce)
) WITHOUT ROWID;
CREATE INDEX requests_expiry ON requests (expires_at_ms);
ALTER TABLE nodes ADD COLUMN heartbeat_ts_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN heartbeat_generation INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Version 5: the ErrorCode name of a report's failure (decision record 41). Reports stored
    // before it have '' (no code known), and are shown without one.
    {5, "apply report error codes", R"sql(
ALTER TABLE apply_reports ADD COLUMN code TEXT NOT NULL DEFAULT '';
)sql"},
    // Version 6: the provider schemas a node sends with its briefing (decision record 48), in
    // their own table like the briefing (tens of kilobytes, rewritten only by a briefing). A node
    // without a row never sent any: declarations to it are checked for shape only.
    {6, "provider schemas per node", R"sql(
CREATE TABLE node_schemas (
  node    TEXT PRIMARY KEY NOT NULL REFERENCES nodes(name) ON DELETE CASCADE,
  schemas TEXT NOT NULL
);
)sql"},
    // Version 7: records, sequences and compositions (docs/decisions/0050).
    // - records: keyed JSON documents with a version (modules, labels, assignments, deploys,
    //   pipeline runs), a rowid table (values can be large) with its (ns, key) index. An erased
    //   record keeps its row (erased = 1) so that its version never restarts: a compare-and-swap
    //   made against the old record cannot succeed against a new one of the same key.
    // - sequences: named monotonic counters (deploy and pipeline run ids).
    // - revisions.composition: which resource of the body came from where; '' for every revision
    //   written before (all the node's own).
    {7, "records, sequences and revision compositions", R"sql(
CREATE TABLE records (
  ns            TEXT NOT NULL,
  key           TEXT NOT NULL,
  value         TEXT NOT NULL,
  version       INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  erased        INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (ns, key)
);
CREATE TABLE sequences (
  name  TEXT PRIMARY KEY NOT NULL,
  value INTEGER NOT NULL
) WITHOUT ROWID;
ALTER TABLE revisions ADD COLUMN composition TEXT NOT NULL DEFAULT '';
)sql"},
    // Version 8: an index of delivery targets by node and revision (docs/decisions/0101).
    // next_revision (which revision came after the one a delivery wrote) is asked for every
    // target of a delivery report; without it each call scanned every delivery's targets, which
    // made a deploy report of 10,000 nodes quadratic.
    {8, "delivery targets by node", R"sql(
CREATE INDEX IF NOT EXISTS delivery_targets_by_node ON delivery_targets (node, revision);
)sql"},
};

static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "one migration per schema version");

sdk::Result<bool> has_version_table(Connection& db) {
  auto st = db.prepare(
      "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'");
  if (!st) return sdk::fail(std::move(st).error());
  auto row = st->step();
  if (!row) return sdk::fail(std::move(row).error());
  return *row && st->column_int(0) > 0;
}

sdk::Result<std::int64_t> read_version(Connection& db) {
  auto has = has_version_table(db);
  if (!has) return sdk::fail(std::move(has).error());
  if (!*has) return 0;
  auto st = db.prepare("SELECT version FROM schema_version WHERE id = 1");
  if (!st) return sdk::fail(std::move(st).error());
  auto row = st->step();
  if (!row) return sdk::fail(std::move(row).error());
  if (!*row)
    return sdk::fail(ErrorCode::Failed, "sqlite store '" + db.path() +
                                            "': the schema_version table has no row (the file "
                                            "is damaged)");
  return st->column_int(0);
}

}  // namespace

sdk::Result<std::int64_t> schema_version(Connection& db) {
  auto tx = Transaction::begin(db, Transaction::Kind::Read);
  if (!tx) return sdk::fail(std::move(tx).error());
  return read_version(db);
}

sdk::Result<void> migrate(Connection& db, std::int64_t now_ms) {
  auto tx = Transaction::begin(db, Transaction::Kind::Write);
  if (!tx) return sdk::fail(std::move(tx).error());

  auto has = has_version_table(db);
  if (!has) return sdk::fail(std::move(has).error());
  std::int64_t version = 0;
  if (*has) {
    auto recorded = read_version(db);
    if (!recorded) return sdk::fail(std::move(recorded).error());
    version = *recorded;
  } else {
    // Only an empty database becomes a store: never add tables to someone else's database.
    auto st = db.prepare(
        "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\'");
    if (!st) return sdk::fail(std::move(st).error());
    auto row = st->step();
    if (!row) return sdk::fail(std::move(row).error());
    if (*row && st->column_int(0) > 0)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       "sqlite store '" + db.path() +
                           "': the file is an SQLite database but not a Nox Mesh store (it has "
                           "tables and no schema_version table); refusing to change it");
    if (auto r = db.exec("CREATE TABLE schema_version ("
                         " id INTEGER PRIMARY KEY CHECK (id = 1),"
                         " version INTEGER NOT NULL,"
                         " migrated_at_ms INTEGER NOT NULL)",
                         "create schema_version");
        !r)
      return r;
  }

  if (version > kWrittenSchemaVersion)
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "sqlite store '" + db.path() + "': the database has schema version " +
                         std::to_string(version) + ", newer than version " +
                         std::to_string(kWrittenSchemaVersion) +
                         " which this sqlite store plugin understands; use a newer plugin");
  if (version == kWrittenSchemaVersion) return tx->commit();

  for (const auto& m : kMigrations) {
    if (m.version <= version) continue;
    if (m.version > kWrittenSchemaVersion) break;
    if (auto r = db.exec(m.sql, std::string("migrate to schema version ") +
                                    std::to_string(m.version) + " (" + m.what + ")");
        !r)
      return r;
  }
  auto st = db.prepare(
      "INSERT INTO schema_version (id, version, migrated_at_ms) VALUES (1, ?1, ?2) "
      "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
      "migrated_at_ms = excluded.migrated_at_ms");
  if (!st) return sdk::fail(std::move(st).error());
  st->bind(1, kWrittenSchemaVersion).bind(2, now_ms);
  if (auto r = st->run(); !r) return r;
  return tx->commit();
}

}  // namespace mesh::stores::sqlite
