// The control plane's configuration file (INTERFACE.md "Control plane config"): tables
// [control], [plugins], [store], [transport], [limits], [broker], [stages], [repository],
// [pipelines] and [metrics].
// Unknown keys or tables and wrong types
// are errors naming the file, the line and the key (mesh::common::ConfigFile).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/common/config.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/schema.h"
#include "mesh/sdk/value.h"

namespace mesh::control {

/// Largest accepted `heartbeat_flush`: heartbeats must reach the store well within a second.
inline constexpr std::chrono::milliseconds kMaxHeartbeatFlush{500};

/// [broker]: the broker permissions mesh-control maintains (off when authorization_file is unset).
struct BrokerSettings {
  std::string authorization_file;  ///< written by mesh-control, included by nats-server's config
  /// nats-servers' pid files ([broker] pid_file: one, or a list — every server on this machine
  /// that includes the authorization file, decision record 91): each gets SIGHUP after a rewrite.
  std::vector<std::string> pid_files;
  std::string enrol_user = "mesh-enrol";
  std::string enrol_password_file;  ///< password of the enrolment user (publish mesh.enrol only)
  std::string operator_user = "mesh-operator";
  std::string operator_password_file;  ///< password of the operators' user (publish mesh.api.>)
  /// Not a key of [broker]: the JetStream stream of a `jetstream-kv` store ([store] prefix,
  /// default MESH_STORE), "" for another store. The control plane's own nkey gets that stream's
  /// JetStream rights in the authorization file, and nobody else does (decision record 0116).
  std::string store_stream;
  bool enabled() const { return !authorization_file.empty(); }
};

/// [repository]: the directory of the mesh's apt repository (written by the `publish` stage) and
/// the loopback address mesh-control serves it on, read-only, over HTTP (decision record 58).
struct RepositorySettings {
  std::string dir;     ///< the repository's root (dists/, pool/); "" = no repository
  std::string listen;  ///< "127.0.0.1:8080" (loopback only); "" = not served by mesh-control
  bool enabled() const { return !dir.empty(); }
};

/// [pipelines]: where pipeline files are and who builds run as (decision records 60 and 61).
struct PipelineSettings {
  std::string dir;         ///< the pipeline files' directory, on this host; "" = no pipelines
  std::string build_user;  ///< the unprivileged user build commands run as (never root)
  /// Not a key of [pipelines]: the [plugins] dir, where the `junit` report plugin that renders a
  /// pipeline deploy's JUnit artifact is looked up.
  std::vector<std::string> report_plugin_dirs;
};

/// [metrics]: where mesh-control serves Prometheus metrics (decision record 93, docs/metrics.md).
struct MetricsSettings {
  std::string listen;  ///< "127.0.0.1:9464"; "" = no metrics (the default)
};

struct ControlConfig {
  common::ConfigFile file;
  /// [control] state_dir (required): keys, plugin state and, by default, the sqlite file.
  std::string state_dir;
  /// [control] keys_dir (default: state_dir): the key material every instance of a control
  /// plane shares — control.key/control.pub (signing key, heartbeat master), broker.nk,
  /// operators.json, admin.identity. Never the instance id (state_dir/instance.id).
  std::string keys_dir;
  /// [control] lease (default 15s, 2s..10m): how long the lease on background work lasts
  /// unrenewed (lease.h); the holder renews it every third of that.
  std::chrono::milliseconds lease{15'000};
  /// [control] retain: revisions kept per node (default 50, 1..100000).
  std::uint32_t retain = 50;
  /// [control] heartbeat_flush: how often batched heartbeats are written (default 250ms, ≤ 500ms).
  std::chrono::milliseconds heartbeat_flush{250};
  /// [control] clock_tolerance: how far a signed request's timestamp may be from the control
  /// plane's clock, either way (default 60s, 1s..1h).
  std::chrono::milliseconds clock_tolerance{60'000};
  /// [plugins] dir (required): one directory or a list, searched in order (the first holding a
  /// plugin wins).
  std::vector<std::string> plugin_dirs;
  /// [store] plugin (default "sqlite") and [transport] plugin (default "nats").
  std::string store_plugin = "sqlite";
  std::string transport_plugin = "nats";
  /// [limits] max_message in bytes; 0 when not set (the broker's max_payload applies alone).
  std::size_t max_message = 0;
  /// [limits] max_assembled: largest message accepted in parts (protocol::parts), in bytes.
  std::size_t max_assembled = 64u << 20;
  /// [limits] node_store_rate and node_store_burst: what one node's apply reports, drift reports
  /// and briefings may make the store write, in bytes per second on average and at once
  /// (ControlOptions::node_store_rate; decision record 186).
  double node_store_rate = 16 * 1024;
  double node_store_burst = 1024 * 1024;
  /// [broker] table.
  BrokerSettings broker;
  /// [stages] load: the stage plugins to load, in order (StageRegistry, mesh/control/stages.h);
  /// their tables `[stages.<name>]` are checked against the plugins' schemas when loaded.
  std::vector<std::string> stages_load;
  /// [repository]: the mesh's apt repository served read-only over HTTP (off when dir is unset).
  RepositorySettings repository;
  /// [content] dir (default <state_dir>/content): file content by digest (`mesh content push`,
  /// decision record 111), shared by every instance like the apt repository.
  std::string content_dir;
  /// [pipelines]: pipeline files and the build user.
  PipelineSettings pipelines;
  /// [metrics]: Prometheus metrics (off when listen is unset).
  MetricsSettings metrics;
};

/// Schemas of the tables the control plane itself owns (they also feed --help and docs).
const sdk::Schema& control_table_schema();
const sdk::Schema& plugins_table_schema();
const sdk::Schema& limits_table_schema();
const sdk::Schema& broker_table_schema();
const sdk::Schema& repository_table_schema();
const sdk::Schema& pipelines_table_schema();
const sdk::Schema& metrics_table_schema();

/// The [metrics] table of `file` (metrics_config.cpp): `listen` is "IPv4:port" or "localhost:port",
/// port 1..65535 (IPv6 is refused: Debian's civetweb behind prometheus-cpp does not bind it); any
/// address may be named (the figures carry no node names
/// nor secrets; decision record 93). Errors: InvalidArgument "<file>:<line>: metrics.listen: <why>".
sdk::Result<MetricsSettings> load_metrics_settings(const common::ConfigFile& file);

/// Checks the top-level tables and the control plane's own tables of `file`. The [store] and
/// [transport] tables are checked later, against the loaded plugins' schemas (plugin_table()).
/// Errors: InvalidArgument "<file>:<line>: <table>.<key>: <message>".
sdk::Result<ControlConfig> load_control_config(const common::ConfigFile& file);

/// Checks what `[pipelines]` needs of the machine mesh-control starts on, before anything is
/// started (mesh-control exits 2 when it fails): with a `[pipelines] dir`, a build runs as
/// `build_user`, never as root, so a control plane running as root (`running_as_root`) must name
/// one; a `build_user` that is named must be an existing user (getpwnam_r) other than uid 0.
/// Without a `[pipelines] dir` there is nothing to check. Errors: InvalidArgument
/// "<file>:<line>: pipelines.build_user: <why>" (or on `pipelines` when the key is missing).
/// Thread-safe (reads the user database).
sdk::Result<void> check_pipelines_on_this_machine(const ControlConfig& config, bool running_as_root);

/// The config table of the plugin in `table` ("store" or "transport") without its `plugin` key,
/// checked against `schema`, with defaults filled in. For the store, a `path` key that the
/// schema knows but the file leaves out defaults to "<state_dir>/mesh.db". For both, an
/// `inbox_prefix` key that the schema knows but the file leaves out is set to
/// protocol::kControlInboxPrefix (`_INBOX.control`: decision record 185).
/// Errors: InvalidArgument with file, line and key.
sdk::Result<sdk::Value> plugin_table(const ControlConfig& config, std::string_view table,
                                     const sdk::Schema& schema);

}  // namespace mesh::control
