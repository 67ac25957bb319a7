#include "store_broker.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "instance.h"
#include "mesh/common/error_text.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/common/nkey.h"
#include "mesh/control/broker.h"
#include "mesh/control/trust.h"

namespace mesh::control::detail {
namespace {

bool names_credentials(const sdk::Value& table) {
  return table.is_object() && (table.find("user") || table.find("nkey_seed"));
}

}  // namespace

bool refused_as_control_plane(const sdk::Error& e) {
  return e.code == sdk::ErrorCode::PermissionDenied || e.message.find("Authorization Violation") != std::string::npos ||
         e.message.find("Authentication Violation") != std::string::npos;
}

bool store_connects_as_control_plane(const ControlConfig& config) {
  if (!config.broker.enabled() || config.broker.store_stream.empty()) return false;
  return !names_credentials(config.file.table("store")) && !names_credentials(config.file.table("transport"));
}

sdk::Result<void> prepare_store_broker_identity(const ControlConfig& config) {
  if (!store_connects_as_control_plane(config)) return {};
  if (auto ok = common::make_dirs(config.keys_dir, 0700); !ok) return sdk::fail(ok.error());
  MESH_TRY(lock, lock_keys_dir(config.keys_dir));
  // Never made here: whether this keys_dir should hold a new mesh key is known only once the
  // store was seen empty, and this store cannot be reached without the key (newuser finding 3).
  std::error_code ec;
  if (!std::filesystem::exists(config.keys_dir + "/control.key", ec))
    return sdk::fail(sdk::ErrorCode::NotFound,
                     "keys_dir '" + config.keys_dir +
                         "' has no control.key: with [broker] the jetstream-kv store connects to the servers as this "
                         "control plane's own nkey, derived from control.key, and cannot connect without it. A new mesh "
                         "is set up with `mesh-control broker-config` first (README \"The jetstream-kv store\"); an "
                         "instance of an existing mesh needs that mesh's keys_dir ([control] keys_dir). No key was made");
  MESH_TRY(keys, load_or_create_control_keys(config.keys_dir));
  const std::string path = config.keys_dir + "/broker.nk";
  const std::string text = common::nkey_user_seed(control_broker_seed(keys)) + "\n";
  if (auto old = common::read_file(path, text.size() + 1); old && *old == text) return {};
  return common::write_file_atomic(path, text, 0600);
}

void warn_if_store_stream_open(const ControlConfig& config) {
  if (config.store_plugin != "jetstream-kv" || config.broker.enabled()) return;
  if (names_credentials(config.file.table("store")) || names_credentials(config.file.table("transport"))) return;
  common::logger()->warn(
      "SECURITY: the jetstream-kv store's stream {} is open to every client of the NATS servers: no [broker] "
      "and no store credentials, so anyone who can connect can forge store operations (take the background "
      "lease, add nodes or operators) or purge the stream ($JS.API.STREAM.PURGE.{}); turn on [broker] "
      "(README \"More than one machine\")",
      config.broker.store_stream, config.broker.store_stream);
}

int first_authorization_without_store(const ControlConfig& config, const sdk::Error& why) {
  const std::string& path = config.broker.authorization_file;
  if (!config.broker.enabled()) {
    common::logger()->error("store {}: {}", config.store_plugin, common::described(why));
    return common::kExitFailed;
  }
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    if (why.code == sdk::ErrorCode::NotFound) {
      // No control.key, and a mesh was set up already (its authorization file is there).
      common::logger()->error("{}; the authorization file {} is kept as it is (it was written with another "
                              "control.key)",
                              common::described(why), path);
      return common::kExitUsage;
    }
    if (refused_as_control_plane(why)) {
      common::logger()->error(
          "store {}: {}; the authorization file {} is kept as it is. The servers refused this control plane's nkey "
          "({}/broker.nk, derived from {}/control.key): keys_dir is probably not this mesh's (every instance uses "
          "the same keys_dir), or the servers do not include the authorization file broker-config writes",
          config.store_plugin, common::described(why), path, config.keys_dir, config.keys_dir);
      return common::kExitUsage;
    }
    common::logger()->error("store {}: {}; the authorization file {} is kept as it is (the nodes it lists are in "
                            "the store): start the servers with it, then run broker-config again",
                            config.store_plugin, common::described(why), path);
    return common::kExitFailed;
  }
  auto lock = lock_keys_dir(config.keys_dir);
  if (!lock) {
    common::logger()->error("keys directory {}: {}", config.keys_dir, common::described(lock.error()));
    return common::kExitFailed;
  }
  auto keys = load_or_create_control_keys(config.keys_dir);
  if (!keys) {
    common::logger()->error("control key: {}", common::described(keys.error()));
    return common::kExitFailed;
  }
  const std::string seed = config.keys_dir + "/broker.nk";
  const std::string text = common::nkey_user_seed(control_broker_seed(*keys)) + "\n";
  if (auto old = common::read_file(seed, text.size() + 1); !old || *old != text)
    if (auto ok = common::write_file_atomic(seed, text, 0600); !ok) {
      common::logger()->error("{}", common::described(ok.error()));
      return common::kExitFailed;
    }
  if (auto ok = update_broker(config.broker, *keys, {}); !ok) {
    common::logger()->error("broker permissions not written: {}", common::described(ok.error()));
    return common::kExitFailed;
  }
  common::logger()->warn("store {} not reachable ({}): {} written without nodes (there is no file yet, so no "
                         "enrolled host can be left out); start the servers with it, then mesh-control run, "
                         "which rewrites it with the store's nodes",
                         config.store_plugin, common::described(why), path);
  std::cout << path << "\n";
  return common::kExitOk;
}

}  // namespace mesh::control::detail
