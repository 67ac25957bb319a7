#include "mesh/control/app.h"

#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <functional>
#include <memory>
#include <mutex>

#include "mesh/common/error_text.h"
#include "mesh/common/clock.h"
#include "mesh/common/config.h"
#include "mesh/common/crypto.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/control/config.h"
#include "mesh/control/control_plane.h"
#include "mesh/control/repository_server.h"
#include "mesh/control/stages.h"
#include "mesh/control/store_admin.h"
#include "mesh/control/trust.h"
#include "mesh/control/key_rotation.h"
#include "mesh/control/broker.h"
#include "mesh/common/nkey.h"
#include "mesh/loader/loader.h"
#include "instance.h"
#include "store_broker.h"
#include "mesh_identity.h"
#include "mesh/sdk/store.h"
#include "mesh/sdk/transport.h"
#include "migrate.h"
#include "metrics.h"

#ifndef MESH_VERSION
#define MESH_VERSION "0.0.0"
#endif

namespace mesh::control {
namespace {

// The one table of the three programs (mesh/common/exit_codes.h).
constexpr int kExitFailed = common::kExitFailed;
constexpr int kExitUsage = common::kExitUsage;
constexpr auto kConnectTimeout = std::chrono::seconds(2);

int usage_error(const std::string& message) {
  common::logger()->error("{}", message);
  return kExitUsage;
}


/// Writes `text` to `path` (atomically, `mode`) unless the file already holds exactly it: a
/// restart writes nothing, so that mesh-control starts on a full disk.
sdk::Result<void> write_if_changed(const std::string& path, const std::string& text, mode_t mode) {
  if (auto old = common::read_file(path, text.size() + 1); old && *old == text) return {};
  return common::write_file_atomic(path, text, mode);
}

std::string servers_of(const sdk::Value& transport) {
  std::string out;
  if (const sdk::Value* s = transport.find("servers"); s && s->is_array())
    for (const auto& v : s->as_array())
      if (v.is_string()) out += (out.empty() ? "" : ",") + v.as_string();
  return out.empty() ? "-" : out;
}

int run(const std::string& config_path, const sigset_t& signals, bool broker_config_only) {
  auto file = common::ConfigFile::load(config_path);
  if (!file) return usage_error(common::described(file.error()));
  auto config = load_control_config(*file);
  if (!config) return usage_error(config.error().message);
  if (auto ok = check_pipelines_on_this_machine(*config, ::geteuid() == 0); !ok)
    return usage_error(ok.error().message);

  if (auto ok = common::crypto_init(); !ok) {
    common::logger()->error("{}", common::described(ok.error()));
    return kExitFailed;
  }
  if (auto ok = common::make_dirs(config->state_dir, 0700); !ok) {
    common::logger()->error("state directory {}: {}", config->state_dir, common::described(ok.error()));
    return kExitFailed;
  }
  // One process per state_dir, held until this one ends (not for broker-config, which runs beside
  // the instance it configures).
  detail::KeysLock state_lock;
  if (!broker_config_only) {
    auto locked = detail::lock_state_dir(config->state_dir);
    if (!locked) {
      common::logger()->error("{}", common::described(locked.error()));
      return locked.error().code == sdk::ErrorCode::FailedPrecondition ? kExitUsage : kExitFailed;
    }
    state_lock = std::move(*locked);
  }

  if (auto ok = common::make_dirs(config->keys_dir, 0700); !ok) {
    common::logger()->error("keys directory {}: {}", config->keys_dir, common::described(ok.error()));
    return kExitFailed;
  }

  loader::LoadOptions load_options;
  load_options.role = "control";
  load_options.state_base = config->state_dir;

  // The transport: load it and check its table now, so that a wrong key is refused before any
  // trust material is written; it is configured once the broker credentials exist. Checked before
  // the store's table: a store that connects to NATS (jetstream-kv) takes its servers from this
  // table, and a typo here must be named here, not as a key the store misses.
  auto transport_plugin =
      loader::load_plugin(config->plugin_dirs, "transport", config->transport_plugin, load_options);
  if (!transport_plugin)
    return usage_error(plugin_error(*config, "transport", config->transport_plugin, transport_plugin.error()));
  auto transport = transport_plugin->as<sdk::Transport>();
  if (!transport) return usage_error(transport_plugin->path + " is not a transport plugin");
  auto transport_config = plugin_table(*config, "transport", transport->config_schema());
  if (!transport_config) return usage_error(transport_config.error().message);

  // A jetstream-kv store under [broker] connects as the control plane: its seed first.
  if (auto ok = detail::prepare_store_broker_identity(*config); !ok) {
    if (ok.error().code == sdk::ErrorCode::NotFound) {
      // No control.key: broker-config on a new mesh makes it (with the first authorization file).
      // Not the refusal's text ("No key was made"): broker-config makes the key when no
      // authorization file says a mesh exists already.
      if (broker_config_only)
        return detail::authorization_without_store(
            *config, sdk::Error{sdk::ErrorCode::NotFound,
                                "keys_dir '" + config->keys_dir + "' has no control.key yet", ""});
      return usage_error(common::described(ok.error()));
    }
    common::logger()->error("store broker identity: {}", common::described(ok.error()));
    return kExitFailed;
  }
  // The store: load, check its table, configure (opened below).
  auto configured_store = configure_store(*config, load_options);
  if (!configured_store) return usage_error(configured_store.error().message);
  const loader::LoadedPlugin* store_plugin = &configured_store->plugin;
  std::shared_ptr<sdk::Store> store = configured_store->store;

  // The stage plugins ([stages] load): loaded, checked against their [stages.<name>] tables and
  // configured (the publish stage makes its repository's signing key at its first start).
  // Their state (the publish stage's repository signing key) is key material several instances
  // share: under keys_dir (decision record 92).
  loader::LoadOptions stage_options = load_options;
  stage_options.state_base = config->keys_dir;
  auto stages = StageRegistry::load(*config, stage_options);
  if (!stages) return usage_error(stages.error().message);

  // The store opens before any trust material is written: everything is checked first, so that
  // a start refused for its store leaves no key or identity behind.
  if (auto ok = store->open(); !ok) {
    const sdk::Error& e = ok.error();
    // broker-config before the servers of a jetstream-kv store run (they need its file first).
    if (broker_config_only && (e.code == sdk::ErrorCode::Unavailable || e.code == sdk::ErrorCode::PermissionDenied))
      return detail::authorization_without_store(*config, e);
    // The servers refused the control plane's own nkey: a keys_dir of another mesh, most likely
    // (newuser finding 3: an empty keys_dir). A config error, not retried by systemd. A refusal
    // naming a key of [store] (a stream the control plane's user has no rights to) is not that.
    if (e.path.empty() && detail::store_connects_as_control_plane(*config) && detail::refused_as_control_plane(e)) {
      common::logger()->error("store {}: {}: the servers refused this control plane's nkey ({}/broker.nk, derived from "
                              "{}/control.key): keys_dir is probably not this mesh's (every instance uses the same "
                              "keys_dir), or the servers do not include the authorization file broker-config writes",
                              config->store_plugin, common::described(e), config->keys_dir, config->keys_dir);
      return kExitUsage;
    }
    return detail::store_open_failed(*config, e);
  }
  detail::warn_if_store_stream_open(*config);
  // [metrics] listen (decision record 93): every store call timed from here on; bound now, so that
  // an address in use refuses the start before any trust material is written. Not for
  // broker-config, which exits at once and may run beside the instance that holds the port.
  std::shared_ptr<detail::ControlMetrics> metrics;
  if (!config->metrics.listen.empty() && !broker_config_only) {
    metrics = std::make_shared<detail::ControlMetrics>();
    // The scrapes read the plugin's store itself: their reads are not in the latency figures.
    if (auto ok = metrics->serve(config->metrics.listen, store); !ok)
      return usage_error(config->file.error_at("metrics.listen", ok.error().message).message);
    store = detail::measured_store(store, metrics);
    common::logger()->info("metrics served listen={} port={}", config->metrics.listen, metrics->port());
  }

  // Trust material: the signing key and the operators (first start: the first admin identity),
  // in keys_dir, which several instances of one control plane share ([control] keys_dir). An
  // exclusive lock on keys_dir/keys.lock while it is read or made: two instances started at once
  // on an empty keys_dir make one key, not two. The instance id stays in state_dir.
  auto keys_lock = detail::lock_keys_dir(config->keys_dir);
  if (!keys_lock) {
    common::logger()->error("keys directory {}: {}", config->keys_dir, common::described(keys_lock.error()));
    return kExitFailed;
  }
  auto instance = detail::load_or_create_instance_id(config->state_dir);
  if (!instance) {
    common::logger()->error("instance id: {}", common::described(instance.error()));
    return kExitFailed;
  }
  // A keys_dir without control.key gets a new one only for a new store: a store that belongs to a
  // mesh already means this keys_dir is the wrong one, and a key made here would be a second mesh
  // key left behind (newuser finding 3).
  if (std::error_code ec; !std::filesystem::exists(config->keys_dir + "/control.key", ec))
    if (auto fresh = detail::check_store_is_new(*store, config->keys_dir); !fresh) {
      if (fresh.error().code == sdk::ErrorCode::FailedPrecondition) return usage_error(common::described(fresh.error()));
      common::logger()->error("store {}: {}", config->store_plugin, common::described(fresh.error()));
      return kExitFailed;
    }
  bool key_created = false;
  auto keys = load_or_create_control_keys(config->keys_dir, &key_created);
  if (!keys) {
    common::logger()->error("control key: {}", common::described(keys.error()));
    return kExitFailed;
  }
  // The store holds the mesh's identity: keys of another mesh are refused (decision record 0117).
  if (auto ok = detail::check_or_claim_mesh_identity(*store, *keys, config->keys_dir, common::now_ms()); !ok) {
    common::logger()->error("store {}: {}", config->store_plugin, common::described(ok.error()));
    return ok.error().code == sdk::ErrorCode::FailedPrecondition ? kExitUsage : kExitFailed;
  }
  // The store knows the newest signing key of the chain an instance signed with: a keys_dir
  // without the newest signing.json would sign with a retired key (newuser finding 2).
  if (auto ok = detail::check_or_record_signing_key(*store, *keys->current(), config->keys_dir, common::now_ms()); !ok) {
    common::logger()->error("store {}: {}", config->store_plugin, common::described(ok.error()));
    return ok.error().code == sdk::ErrorCode::FailedPrecondition ? kExitUsage : kExitFailed;
  }
  auto operators = OperatorRegistry::open(config->keys_dir + "/operators.json");
  if (!operators) {
    common::logger()->error("operators: {}", common::described(operators.error()));
    return kExitFailed;
  }
  auto admin = bootstrap_admin(config->keys_dir, **operators, common::now_ms(), keys->signing.public_key);
  if (!admin) {
    common::logger()->error("first operator: {}", common::described(admin.error()));
    return kExitFailed;
  }
  if (key_created)
    common::logger()->info("signing key created: {}/control.key (public key in control.pub: {})",
                           config->keys_dir, common::to_hex(keys->signing.public_key));
  if (*admin)
    common::logger()->info("first operator identity written: {}/admin.identity (mode 0600; use it with "
                           "mesh --identity)",
                           config->keys_dir);

  // Broker permissions: the authorization file with every enrolled node's nkey, and the control
  // plane's own nkey seed, which it connects with unless [transport] names other credentials.
  std::function<void()> update_broker_now;
  if (config->broker.enabled()) {
    const std::string seed_path = config->keys_dir + "/broker.nk";
    if (auto ok = write_if_changed(seed_path, common::nkey_user_seed(control_broker_seed(*keys)) + "\n", 0600); !ok) {
      common::logger()->error("{}", common::described(ok.error()));
      return kExitFailed;
    }
    auto mu = std::make_shared<std::mutex>();
    update_broker_now = [store, broker = config->broker, k = *keys, mu] {
      std::lock_guard lock(*mu);
      // Several instances on this machine may write the file: the store is read and the file
      // written under one lock, so that the last writer's text holds every node committed
      // before it (decision record 91).
      auto file_lock = detail::lock_keys_dir(std::filesystem::path(broker.authorization_file).parent_path().string(),
                                             "authorization.lock");
      if (!file_lock) {
        common::logger()->error("broker permissions not updated: {}", common::described(file_lock.error()));
        return;
      }
      auto nodes = store->nodes();
      if (!nodes) {
        common::logger()->error("broker permissions not updated: {}", common::described(nodes.error()));
        return;
      }
      const auto before = common::read_file(broker.authorization_file, 64 << 20);
      auto signalled = update_broker(broker, k, *nodes);
      const auto after = common::read_file(broker.authorization_file, 64 << 20);
      if (signalled && before && after && *before == *after) return;  // unchanged: nothing to say
      if (!signalled)
        common::logger()->error("broker permissions not updated: {}", common::described(signalled.error()));
      else
        common::logger()->info("broker permissions written file={} nodes={} reloaded={}", broker.authorization_file,
                               nodes->size(), *signalled);
    };
    update_broker_now();
  }
  keys_lock->release();
  if (broker_config_only) {
    if (!config->broker.enabled()) return usage_error(config_path + ": [broker] authorization_file is not set");
    std::cout << config->broker.authorization_file << "\n";
    return 0;
  }

  // The transport: configure (its table was checked before anything was written).
  if (config->broker.enabled() && !transport_config->find("nkey_seed") && !transport_config->find("user"))
    transport_config->set("nkey_seed", config->keys_dir + "/broker.nk");
  if (auto ok = transport->configure(*transport_config); !ok)
    return usage_error(config->file
                           .error_at(ok.error().path.empty() ? "transport" : "transport." + ok.error().path,
                                     ok.error().message)
                           .message);
  const std::string servers = servers_of(*transport_config);

  ControlOptions options;
  options.retain = config->retain;
  options.heartbeat_flush = config->heartbeat_flush;
  options.max_message = config->max_message;
  options.max_assembled = config->max_assembled;
  options.node_store_rate = config->node_store_rate;
  options.node_store_burst = config->node_store_burst;
  options.keys = std::move(*keys);
  options.operators = *operators;
  options.clock_tolerance = config->clock_tolerance;
  options.broker_credentials = config->broker.enabled();
  options.nodes_changed = update_broker_now;
  options.store_abi_minor = store_plugin->abi_minor;
  options.instance_id = *instance;
  options.lease = config->lease;
  options.stages = *stages;
  options.work_dir = config->state_dir + "/work";
  options.keys_dir = config->keys_dir;
  // Work directories of `publish` runs a crash left behind (ControlStageContext removes its own).
  {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(options.work_dir, ec))
      if (e.path().filename().string().rfind("publish-", 0) == 0) std::filesystem::remove_all(e.path(), ec);
  }
  options.repository = config->repository;
  options.content_dir = config->content_dir;
  options.pipelines = config->pipelines;
  options.metrics = metrics;
  ControlPlane control(store, transport, options);
  control.start();

  // The apt repository, served read-only on a loopback address ([repository] listen).
  std::unique_ptr<RepositoryServer> repository_server;
  if (!config->repository.listen.empty()) {
    auto served = RepositoryServer::start(config->repository.dir, config->repository.listen);
    if (!served) {
      control.stop();
      common::logger()->error("repository: {}", common::described(served.error()));
      return kExitFailed;
    }
    repository_server = std::move(*served);
    common::logger()->info("repository served dir={} listen={} port={}", config->repository.dir,
                           config->repository.listen, repository_server->port());
  }

  // The transport logs link events itself; the control plane only notes them for debugging.
  transport->on_link_event([servers](sdk::LinkEvent e) {
    common::logger()->debug("broker link {} servers={}", sdk::to_string(e), servers);
  });
  // The control plane outlives broker outages: if no server answers now, the transport keeps
  // trying in the background and the subscriptions are made when the link comes up.
  if (auto ok = transport->connect(kConnectTimeout, /*retry_in_background=*/true); !ok) {
    if (ok.error().code == sdk::ErrorCode::InvalidArgument ||
        ok.error().code == sdk::ErrorCode::PermissionDenied) {
      control.stop();
      transport->close();
      common::logger()->error("transport: {}", common::described(ok.error()));
      return common::exit_code_for(ok.error().code);
    }
    common::logger()->warn("broker unreachable servers={}: {}; retrying in the background", servers,
                           common::described(ok.error()));
  }
  bool warned = false;
  auto try_subscribe = [&] {
    auto ok = control.subscribe();
    if (!ok && !warned) {
      common::logger()->warn("not subscribed yet: {}; retrying", common::described(ok.error()));
      warned = true;
    }
    return ok.has_value();
  };
  if (transport->connected()) try_subscribe();
  common::logger()->info("control started store={} servers={} state_dir={} keys_dir={} instance={}",
                         config->store_plugin, servers, config->state_dir, config->keys_dir, *instance);
  // Under systemd (Type=notify): ready once the store is open (its schema migrated) and the
  // transport is set up; the broker may still be unreachable (retried in the background), as a
  // control plane that waited for it would never start on a machine whose broker starts later.
  sd_notifyf(0, "READY=1\nSTATUS=store %s open; broker %s", config->store_plugin.c_str(),
             transport->connected() ? "connected" : "not reachable yet, retrying");

  // The main thread waits for SIGTERM/SIGINT (blocked in every thread, taken here with
  // sigtimedwait) and, until the subscriptions are made, retries them.
  for (;;) {
    timespec tick{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      common::logger()->info("stopping on {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    if (!control.subscribed() && transport->connected() && try_subscribe())
      common::logger()->info("subscribed servers={}", servers);
  }
  sd_notify(0, "STOPPING=1");
  repository_server.reset();
  if (metrics) metrics->stop();  // no scrape reads the store from here on
  control.stop();       // unsubscribe, drain the queue, write pending heartbeats
  transport->close();
  store.reset();        // the store closes when its last reference goes
  common::logger()->info("control stopped");
  return 0;
}

}  // namespace

int run_main(int argc, char** argv) {
  // Block the stop signals before any thread exists (plugins start threads), so that only the
  // main thread's sigtimedwait takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  CLI::App app{"mesh-control: the Nox Mesh control plane", "mesh-control"};
  app.set_version_flag("--version", std::string("mesh-control ") + MESH_VERSION);
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  std::string config_path;
  auto* run_cmd = app.add_subcommand("run", "run the control plane daemon");
  run_cmd->add_option("--config", config_path, "control plane config (TOML)")->required();
  run_cmd->fallthrough();
  auto* broker_cmd = app.add_subcommand(
      "broker-config", "write the nats-server authorization file of [broker] (and the keys) and exit");
  broker_cmd->add_option("--config", config_path, "control plane config (TOML)")->required();
  broker_cmd->fallthrough();
  std::string backup_file;
  auto* backup_cmd = app.add_subcommand(
      "backup", "write a consistent copy of the store to FILE while the control plane runs, and exit");
  backup_cmd->add_option("--config", config_path, "control plane config (TOML)")->required();
  backup_cmd->add_option("FILE", backup_file, "the backup to write (replaced atomically; mode 0600)")->required();
  auto* restore_cmd = app.add_subcommand(
      "restore", "replace what the store holds with the backup FILE (mesh-control must be stopped), and exit");
  restore_cmd->add_option("--config", config_path, "control plane config (TOML)")->required();
  restore_cmd->add_option("FILE", backup_file, "a backup written by `mesh-control backup`")->required();
  auto* rotate_cmd = app.add_subcommand(
      "rotate-key", "make a new signing key in keys_dir, endorsed by the current one (hosts pin it on their next "
                    "message), and exit");
  rotate_cmd->add_option("--config", config_path, "control plane config (TOML)")->required();
  MigrateOptions migrate;
  auto* migrate_cmd = app.add_subcommand(
      "migrate", "move the sqlite store of --config into a new store (--to jetstream-kv) and exit");
  migrate_cmd->add_option("--config", migrate.config_path, "control plane config (TOML)")->required();
  migrate_cmd->add_option("--to", migrate.to, "the new store plugin: jetstream-kv")->required();
  migrate_cmd->add_option("--replicas", migrate.replicas, "the stream's replicas, 1-5 (default 1)");
  migrate_cmd->add_option("--prefix", migrate.prefix, "the stream's name (default MESH_STORE)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  if (auto ok = common::init_logging("mesh-control", log_level); !ok) {
    std::cerr << "mesh-control: " << ok.error().message << "\n";
    return kExitUsage;
  }
  try {
    if (backup_cmd->parsed()) return backup_command(config_path, backup_file);
    if (restore_cmd->parsed()) return restore_command(config_path, backup_file);
    if (migrate_cmd->parsed()) return run_migrate(migrate);
    if (rotate_cmd->parsed()) return rotate_key_command(config_path);
    return run(config_path, signals, broker_cmd->parsed());
  } catch (const std::exception& e) {
    common::logger()->error("fatal: {}", e.what());
    return kExitFailed;
  }
}

}  // namespace mesh::control
