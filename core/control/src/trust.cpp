#include "mesh/control/trust.h"

#include <sodium.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "instance.h"
#include "mesh/control/key_rotation.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"

#include <spdlog/spdlog.h>
#include "mesh/common/json.h"
#include "mesh/common/trust.h"
#include "mesh/sdk/value.h"

namespace mesh::control {
namespace {

using sdk::ErrorCode;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

ControlKeys control_keys_from_seed(const std::string& seed) {
  ControlKeys k;
  k.signing = common::keypair_from_seed(seed);
  // Keyed BLAKE2b with its own context: independent of the Ed25519 use of the seed.
  static const char kContext[] = "nox-mesh heartbeat master v1";
  k.heartbeat_master.assign(32, '\0');
  (void)common::crypto_init();
  crypto_generichash(reinterpret_cast<unsigned char*>(k.heartbeat_master.data()), 32,
                     reinterpret_cast<const unsigned char*>(kContext), sizeof kContext - 1,
                     reinterpret_cast<const unsigned char*>(seed.data()), seed.size());
  return k;
}

sdk::Result<ControlKeys> load_or_create_control_keys(const std::string& state_dir, bool* created) {
  const std::string path = state_dir + "/control.key";
  if (created) *created = false;
  std::string seed;
  auto text = common::read_file(path, 4096);
  if (text) {
    auto raw = common::from_hex(trim(*text));
    if (!raw || raw->size() != 32)
      return sdk::fail(ErrorCode::InvalidArgument,
                       path + " is not a control plane key (64 hex characters of an Ed25519 seed)");
    seed = std::move(*raw);
  } else if (text.error().code == ErrorCode::NotFound) {
    seed = common::random_bytes(32);
    if (auto ok = common::write_file_atomic(path, common::to_hex(seed) + "\n", 0600); !ok)
      return sdk::fail(ok.error());
    if (created) *created = true;
  } else {
    return sdk::fail(text.error());
  }
  ControlKeys keys = control_keys_from_seed(seed);
  sodium_memzero(seed.data(), seed.size());
  const common::KeyPair root = keys.signing;
  std::size_t rotations = 0;
  if (auto ok = apply_key_rotations(state_dir, keys, &rotations); !ok) return sdk::fail(ok.error());
  keys.watch = std::make_shared<SigningKeyWatch>(state_dir, root, SigningKey{keys.signing, keys.key_chain, rotations});
  const std::string pub = common::to_hex(keys.signing.public_key) + "\n";
  auto old = common::read_file(state_dir + "/control.pub", 4096);
  if (!old || *old != pub)
    if (auto ok = common::write_file_atomic(state_dir + "/control.pub", pub, 0644); !ok)
      return sdk::fail(ok.error());
  return keys;
}

namespace {

OperatorRegistry::FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return OperatorRegistry::FileStamp{true, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                                     static_cast<std::int64_t>(st.st_size),
                                     static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// The lock several instances sharing keys_dir take around a change of the operators file:
// read again, change, write — no instance's change is lost to another's.
sdk::Result<detail::KeysLock> lock_operators(const std::string& path) {
  if (path.empty()) return detail::KeysLock();
  const auto dir = std::filesystem::path(path).parent_path().string();
  return detail::lock_keys_dir(dir.empty() ? "." : dir, "operators.lock");
}

sdk::Result<std::vector<OperatorRecord>> load_operators(const std::string& path) {
  std::vector<OperatorRecord> ops;
  auto text = common::read_file(path, 16 << 20);
  if (!text) {
    if (text.error().code == ErrorCode::NotFound) return ops;
    return sdk::fail(text.error());
  }
  auto bad = [&](const std::string& why) {
    return sdk::fail(ErrorCode::InvalidArgument, path + ": " + why);
  };
  auto v = common::parse_json(*text, common::JsonLimits{16 << 20, 8});
  if (!v || !v->is_object() || !v->find("operators") || !v->find("operators")->is_array())
    return bad("not an operators file ({\"operators\": [...]})");
  for (const auto& o : v->find("operators")->as_array()) {
    if (!o.is_object()) return bad("an operator entry is not an object");
    OperatorRecord r;
    r.name = o.get_string("name");
    r.role = o.get_string("role");
    auto pk = common::from_hex(o.get_string("public_key"));
    if (!trust::valid_operator_name(r.name) || !trust::valid_role(r.role) || !pk || pk->size() != 32)
      return bad("operator entry '" + r.name + "' has a bad name, role or public_key");
    r.public_key = *pk;
    r.added_at_ms = o.get_int("added_at_ms", 0);
    r.added_by = o.get_string("added_by");
    ops.push_back(std::move(r));
  }
  return ops;
}

}  // namespace

sdk::Result<std::shared_ptr<OperatorRegistry>> OperatorRegistry::open(const std::string& path) {
  auto reg = std::shared_ptr<OperatorRegistry>(new OperatorRegistry());
  reg->path_ = path;
  if (path.empty()) return reg;
  reg->loaded_ = stamp_of(path);
  auto ops = load_operators(path);
  if (!ops) return sdk::fail(ops.error());
  reg->ops_ = std::move(*ops);
  return reg;
}

void OperatorRegistry::refresh_locked() const {
  if (path_.empty()) return;
  const FileStamp seen = stamp_of(path_);
  if (loaded_ == seen) return;
  auto ops = load_operators(path_);
  if (!ops) {
    // Another instance's file that does not parse: the operators known so far stay in force.
    common::logger()->warn("operators not reloaded: {}", ops.error().message);
    return;
  }
  ops_ = std::move(*ops);
  loaded_ = seen;
}

std::optional<OperatorRecord> OperatorRegistry::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  refresh_locked();
  for (const auto& o : ops_)
    if (o.name == name) return o;
  return std::nullopt;
}

std::vector<OperatorRecord> OperatorRegistry::list() const {
  std::lock_guard lock(mu_);
  refresh_locked();
  auto out = ops_;
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

bool OperatorRegistry::empty() const {
  std::lock_guard lock(mu_);
  refresh_locked();
  return ops_.empty();
}

sdk::Result<void> OperatorRegistry::save_locked() const {
  if (path_.empty()) return {};
  sdk::Value list = sdk::Value::array();
  for (const auto& o : ops_) {
    sdk::Value e = sdk::Value::object();
    e.set("name", o.name);
    e.set("role", o.role);
    e.set("public_key", common::to_hex(o.public_key));
    e.set("added_at_ms", o.added_at_ms);
    e.set("added_by", o.added_by);
    list.as_array().push_back(std::move(e));
  }
  sdk::Value doc = sdk::Value::object();
  doc.set("operators", std::move(list));
  auto ok = common::write_file_atomic(path_, doc.to_json() + "\n", 0600);
  if (ok) loaded_ = stamp_of(path_);
  return ok;
}

sdk::Result<void> OperatorRegistry::add(const OperatorRecord& op) {
  if (!trust::valid_operator_name(op.name))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "'" + op.name + "' is not an operator name (1-64 characters of a-z, 0-9, '-' and '_', "
                                     "starting with a letter or digit)",
                     "name");
  if (!trust::valid_role(op.role))
    return sdk::fail(ErrorCode::InvalidArgument, "'" + op.role + "' is not a role (admin, deployer, reader)", "role");
  if (op.public_key.size() != 32) return sdk::fail(ErrorCode::InvalidArgument, "bad public key", "public_key");
  std::lock_guard lock(mu_);
  auto file_lock = lock_operators(path_);
  if (!file_lock) return sdk::fail(file_lock.error());
  refresh_locked();
  for (const auto& o : ops_)
    if (o.name == op.name)
      return sdk::fail(ErrorCode::AlreadyExists, "operator " + op.name + " already exists", "name");
  ops_.push_back(op);
  if (auto ok = save_locked(); !ok) {
    ops_.pop_back();
    return ok;
  }
  return {};
}

sdk::Result<void> OperatorRegistry::remove(std::string_view name) {
  std::lock_guard lock(mu_);
  auto file_lock = lock_operators(path_);
  if (!file_lock) return sdk::fail(file_lock.error());
  refresh_locked();
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& o) { return o.name == name; });
  if (it == ops_.end()) return sdk::fail(ErrorCode::NotFound, "no operator named " + std::string(name), "name");
  if (it->role == "admin" &&
      std::count_if(ops_.begin(), ops_.end(), [](const auto& o) { return o.role == "admin"; }) == 1)
    return sdk::fail(ErrorCode::FailedPrecondition,
                     "operator " + std::string(name) + " is the last admin; add another admin first", "name");
  OperatorRecord removed = *it;
  auto pos = ops_.erase(it);
  if (auto ok = save_locked(); !ok) {
    ops_.insert(pos, removed);
    return ok;
  }
  return {};
}

sdk::Result<bool> bootstrap_admin(const std::string& state_dir, OperatorRegistry& operators, std::int64_t now_ms,
                                  const std::string& control_public_key) {
  const std::string path = state_dir + "/admin.identity";
  if (!control_public_key.empty())
    if (auto existing = common::read_file(path, 64 * 1024); existing) {
      // An identity written before signed API replies: pin the key in it, keeping the rest.
      auto id = trust::parse_operator_identity(*existing, path);
      if (id && id->control_key.empty()) {
        id->control_key = control_public_key;
        if (auto ok = common::write_file_atomic(path, trust::operator_identity_json(*id) + "\n", 0600); !ok)
          return sdk::fail(ok.error());
      }
    }
  if (!operators.empty()) return false;
  if (auto existing = common::read_file(path, 64 * 1024); existing) {
    // A start that crashed between writing the identity and registering it: register it now.
    auto id = trust::parse_operator_identity(*existing, path);
    if (!id) return sdk::fail(id.error());
    if (auto ok = operators.add(OperatorRecord{id->name, id->role, id->public_key, now_ms, ""}); !ok)
      return sdk::fail(ok.error());
    return true;
  }
  auto kp = common::generate_keypair();
  trust::OperatorIdentity id{"admin", "admin", kp.public_key, kp.secret_key, control_public_key};
  // The identity is written first: after a crash between the two, the next start registers it.
  if (auto ok = common::write_file_atomic(path, trust::operator_identity_json(id) + "\n", 0600); !ok)
    return sdk::fail(ok.error());
  if (auto ok = operators.add(OperatorRecord{"admin", "admin", kp.public_key, now_ms, ""}); !ok)
    return sdk::fail(ok.error());
  return true;
}

}  // namespace mesh::control
