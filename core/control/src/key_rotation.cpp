#include "mesh/control/key_rotation.h"

#include <sodium.h>
#include <sys/stat.h>

#include <iostream>
#include <optional>

#include "instance.h"
#include "mesh/common/clock.h"
#include "mesh/common/config.h"
#include "mesh/common/error_text.h"
#include "mesh/common/exit_codes.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/key_rotation.h"
#include "mesh/common/logging.h"
#include "mesh/control/config.h"
#include "mesh/sdk/value.h"

#include <spdlog/spdlog.h>

namespace mesh::control {
namespace {

using sdk::ErrorCode;

struct SigningFile {
  std::string seed;  ///< raw 32 bytes
  std::vector<common::KeyRotation> chain;
};

std::string signing_path(const std::string& keys_dir) { return keys_dir + "/signing.json"; }

// nullopt: no rotation yet.
sdk::Result<std::optional<SigningFile>> read_signing_file(const std::string& keys_dir) {
  const std::string path = signing_path(keys_dir);
  auto text = common::read_file(path, 1 << 20);
  if (!text) {
    if (text.error().code == ErrorCode::NotFound) return std::optional<SigningFile>();
    return sdk::fail(text.error());
  }
  auto v = common::parse_json(*text, common::JsonLimits{1 << 20, 4});
  if (!v || !v->is_object())
    return sdk::fail(ErrorCode::InvalidArgument, path + ": not a signing key file ({\"seed\": hex, \"rotations\": [...]})");
  SigningFile f;
  auto seed = common::from_hex(v->get_string("seed"));
  if (!seed || seed->size() != 32)
    return sdk::fail(ErrorCode::InvalidArgument, path + ": seed must be 64 hex characters of an Ed25519 seed");
  f.seed = std::move(*seed);
  const sdk::Value* rotations = v->find("rotations");
  sdk::Value only = sdk::Value::object();
  if (rotations) only.set("rotations", *rotations);
  MESH_TRY(chain, common::parse_key_chain(only.to_json(), path));
  if (chain.empty()) return sdk::fail(ErrorCode::InvalidArgument, path + ": rotations is empty");
  f.chain = std::move(chain);
  return std::optional<SigningFile>(std::move(f));
}

sdk::Result<void> write_signing_file(const std::string& keys_dir, const SigningFile& f) {
  auto chain = common::parse_json(common::key_chain_json(f.chain));
  sdk::Value doc = sdk::Value::object();
  doc.set("seed", common::to_hex(f.seed));
  doc.set("rotations", *chain->find("rotations"));
  std::string text = doc.to_json() + "\n";
  auto ok = common::write_file_atomic(signing_path(keys_dir), text, 0600);
  sodium_memzero(text.data(), text.size());
  return ok;
}

}  // namespace

sdk::Result<void> apply_key_rotations(const std::string& keys_dir, ControlKeys& keys, std::size_t* rotations) {
  if (rotations) *rotations = 0;
  MESH_TRY(file, read_signing_file(keys_dir));
  if (!file) return {};
  const std::string path = signing_path(keys_dir);
  auto signing = common::keypair_from_seed(file->seed);
  sodium_memzero(file->seed.data(), file->seed.size());
  if (file->chain.back().new_key != signing.public_key)
    return sdk::fail(ErrorCode::InvalidArgument, path + ": the seed is not the key the last rotation names (" +
                                                     common::to_hex(file->chain.back().new_key) + ")");
  auto walk = common::walk_key_chain(file->chain, keys.signing.public_key);
  if (!walk)
    return sdk::fail(ErrorCode::InvalidArgument, path + ": the chain does not lead from control.key's key " +
                                                     common::to_hex(keys.signing.public_key) + ": " + walk.error().message);
  if (walk->key != signing.public_key)
    return sdk::fail(ErrorCode::InvalidArgument, path + ": the chain from control.key's key ends at " +
                                                     common::to_hex(walk->key) + ", not at the seed's key");
  keys.signing = std::move(signing);
  keys.key_chain = common::key_chain_header(file->chain);
  if (rotations) *rotations = file->chain.size();
  return {};
}

std::shared_ptr<const SigningKey> ControlKeys::current() const {
  if (watch) return watch->current();
  return std::make_shared<const SigningKey>(SigningKey{signing, key_chain, 0});
}

SigningKeyWatch::SigningKeyWatch(std::string keys_dir, common::KeyPair root, SigningKey now)
    : keys_dir_(std::move(keys_dir)), root_(std::move(root)),
      current_(std::make_shared<const SigningKey>(std::move(now))), seen_(stamp_of(signing_path(keys_dir_))) {}

SigningKeyWatch::Stamp SigningKeyWatch::stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return Stamp{true, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
               static_cast<std::int64_t>(st.st_size),
               static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::shared_ptr<const SigningKey> SigningKeyWatch::current() {
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::int64_t due = next_check_ns_.load(std::memory_order_relaxed);
  // One caller per interval (0 by default: every call) looks at the file, the one whose exchange
  // wins; the others take the key in force.
  if (now >= due && next_check_ns_.compare_exchange_strong(due, now + interval_ms_.load() * 1'000'000)) check_now();
  std::lock_guard lk(mu_);
  return current_;
}

void SigningKeyWatch::check_now() {
  const Stamp seen = stamp_of(signing_path(keys_dir_));
  std::lock_guard lk(mu_);
  if (seen == seen_) return;
  reload_locked(seen);
}

void SigningKeyWatch::reload_locked(const Stamp& seen) {
  seen_ = seen;  // a file that is refused is not read again until it changes
  auto log = common::logger();
  ControlKeys keys;
  keys.signing = root_;
  std::size_t rotations = 0;
  if (auto ok = apply_key_rotations(keys_dir_, keys, &rotations); !ok) {
    log->warn("signing key not reloaded keys_dir={} reason=\"{}\" (still signing with key={})", keys_dir_,
              common::described(ok.error()), common::to_hex(current_->pair.public_key));
    return;
  }
  if (rotations <= current_->rotations) {
    if (keys.signing.public_key != current_->pair.public_key)
      log->warn("signing key not reloaded keys_dir={} reason=\"{} holds {} rotations, this instance signs after {}: "
                "an older file (restored?)\" (still signing with key={})",
                keys_dir_, signing_path(keys_dir_), rotations, current_->rotations,
                common::to_hex(current_->pair.public_key));
    return;
  }
  log->info("signing key reloaded keys_dir={} old_key={} new_key={} rotations={}", keys_dir_,
            common::to_hex(current_->pair.public_key), common::to_hex(keys.signing.public_key), rotations);
  current_ = std::make_shared<const SigningKey>(SigningKey{std::move(keys.signing), std::move(keys.key_chain), rotations});
}

sdk::Result<Rotated> rotate_signing_key(const std::string& keys_dir, std::int64_t now_ms) {
  const std::string root_path = keys_dir + "/control.key";
  if (auto root_text = common::read_file(root_path, 4096); !root_text) {
    if (root_text.error().code == ErrorCode::NotFound)
      return sdk::fail(ErrorCode::FailedPrecondition,
                       root_path + " does not exist: start the control plane once (mesh-control run) before "
                                   "rotating its key");
    return sdk::fail(root_text.error());
  }
  MESH_TRY(lock, detail::lock_keys_dir(keys_dir));
  // The current keys as the control plane loads them (control.key, then signing.json).
  bool created = false;
  MESH_TRY(current, load_or_create_control_keys(keys_dir, &created));
  MESH_TRY(file, read_signing_file(keys_dir));
  SigningFile next;
  if (file) next.chain = std::move(file->chain);
  if (next.chain.size() >= common::kMaxKeyChain)
    return sdk::fail(ErrorCode::InvalidArgument, signing_path(keys_dir) + " already holds " +
                                                     std::to_string(next.chain.size()) +
                                                     " rotations, the most a chain may hold");
  next.seed = common::random_bytes(32);
  auto fresh = common::keypair_from_seed(next.seed);
  next.chain.push_back(common::make_key_rotation(current.signing, fresh, now_ms));
  if (auto ok = write_signing_file(keys_dir, next); !ok) return sdk::fail(ok.error());
  sodium_memzero(next.seed.data(), next.seed.size());
  const std::string pub = common::to_hex(fresh.public_key) + "\n";
  if (auto ok = common::write_file_atomic(keys_dir + "/control.pub", pub, 0644); !ok) return sdk::fail(ok.error());
  // Instances running on keys_dir take the new key from signing.json before they next sign
  // (SigningKeyWatch); a restart is not needed.
  return Rotated{current.signing.public_key, fresh.public_key, next.chain.size()};
}

int rotate_key_command(const std::string& config_path) {
  auto file = common::ConfigFile::load(config_path);
  if (!file) {
    common::logger()->error("{}", common::described(file.error()));
    return common::kExitUsage;
  }
  auto config = load_control_config(*file);
  if (!config) {
    common::logger()->error("{}", config.error().message);
    return common::kExitUsage;
  }
  if (auto ok = common::crypto_init(); !ok) {
    common::logger()->error("{}", common::described(ok.error()));
    return common::kExitFailed;
  }
  auto r = rotate_signing_key(config->keys_dir, common::now_ms());
  if (!r) {
    common::logger()->error("key rotation in {}: {}; nothing was changed", config->keys_dir,
                            common::described(r.error()));
    return r.error().code == ErrorCode::FailedPrecondition ? common::kExitUsage : common::kExitFailed;
  }
  common::logger()->info("signing key rotated keys_dir={} old_key={} new_key={} rotations={}", config->keys_dir,
                         common::to_hex(r->old_key), common::to_hex(r->new_key), r->chain_length);
  std::cout << "signing key rotated: " << common::to_hex(r->old_key) << " -> " << common::to_hex(r->new_key)
            << "\nevery mesh-control instance sharing " << config->keys_dir
            << " signs with it from its next signature (no restart); hosts and operator identities pin the new key from "
               "the first message signed with it\n";
  return common::kExitOk;
}

}  // namespace mesh::control
