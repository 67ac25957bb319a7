#include "mesh/common/key_rotation.h"

#include <set>

#include "mesh/common/json.h"
#include "mesh/sdk/value.h"

namespace mesh::common {
namespace {

using sdk::ErrorCode;

std::string shown(const KeyRotation& r, std::size_t i) {
  return "rotation statement " + std::to_string(i) + " (" + to_hex(r.old_key) + " -> " + to_hex(r.new_key) + ")";
}

}  // namespace

std::string key_rotation_text(const KeyRotation& r) {
  return "nox-mesh key rotation v1\n" + to_hex(r.old_key) + "\n" + to_hex(r.new_key) + "\n" + std::to_string(r.at_ms);
}

KeyRotation make_key_rotation(const KeyPair& old_keys, const KeyPair& new_keys, std::int64_t at_ms) {
  KeyRotation r;
  r.old_key = old_keys.public_key;
  r.new_key = new_keys.public_key;
  r.at_ms = at_ms;
  const std::string text = key_rotation_text(r);
  r.old_signature = sign(text, old_keys.secret_key);
  r.new_signature = sign(text, new_keys.secret_key);
  return r;
}

std::string key_chain_json(const std::vector<KeyRotation>& chain) {
  sdk::Value list = sdk::Value::array();
  for (const auto& r : chain) {
    sdk::Value e = sdk::Value::object();
    e.set("old_key", to_hex(r.old_key));
    e.set("new_key", to_hex(r.new_key));
    e.set("at_ms", r.at_ms);
    e.set("old_signature", to_hex(r.old_signature));
    e.set("new_signature", to_hex(r.new_signature));
    list.as_array().push_back(std::move(e));
  }
  sdk::Value doc = sdk::Value::object();
  doc.set("rotations", std::move(list));
  return doc.to_json();
}

sdk::Result<std::vector<KeyRotation>> parse_key_chain(std::string_view json, const std::string& where) {
  auto v = parse_json(json, JsonLimits{256 * 1024, 4});
  if (!v || !v->is_object() || !v->find("rotations") || !v->find("rotations")->is_array())
    return sdk::fail(ErrorCode::InvalidArgument, where + ": not a key chain ({\"rotations\": [...]})");
  const auto& list = v->find("rotations")->as_array();
  if (list.size() > kMaxKeyChain)
    return sdk::fail(ErrorCode::InvalidArgument, where + ": " + std::to_string(list.size()) +
                                                     " rotation statements, more than the " +
                                                     std::to_string(kMaxKeyChain) + " a chain may hold");
  std::vector<KeyRotation> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    auto bad = [&](const std::string& field) {
      return sdk::fail(ErrorCode::InvalidArgument,
                       where + ": rotation statement " + std::to_string(i) + ": " + field + " is missing or malformed");
    };
    if (!e.is_object()) return bad("the entry");
    KeyRotation r;
    auto field = [&](const char* name, std::size_t size, std::string& to) {
      auto raw = from_hex(e.get_string(name));
      if (!raw || raw->size() != size) return false;
      to = std::move(*raw);
      return true;
    };
    if (!field("old_key", 32, r.old_key)) return bad("old_key");
    if (!field("new_key", 32, r.new_key)) return bad("new_key");
    if (!field("old_signature", 64, r.old_signature)) return bad("old_signature");
    if (!field("new_signature", 64, r.new_signature)) return bad("new_signature");
    r.at_ms = e.get_int("at_ms", 0);
    out.push_back(std::move(r));
  }
  return out;
}

std::string key_chain_header(const std::vector<KeyRotation>& chain) {
  return base64url_encode(key_chain_json(chain));
}

sdk::Result<std::vector<KeyRotation>> parse_key_chain_header(std::string_view value) {
  if (value.size() > 512 * 1024)
    return sdk::fail(ErrorCode::InvalidArgument, std::string(kHeaderKeyChain) + " header: too long");
  auto raw = base64url_decode(value);
  if (!raw) return sdk::fail(ErrorCode::InvalidArgument, std::string(kHeaderKeyChain) + " header: not base64url");
  return parse_key_chain(*raw, std::string(kHeaderKeyChain) + " header");
}

sdk::Result<ChainWalk> walk_key_chain(const std::vector<KeyRotation>& chain, const std::string& pinned) {
  if (chain.size() > kMaxKeyChain)
    return sdk::fail(ErrorCode::InvalidArgument, "a key chain of " + std::to_string(chain.size()) + " statements");
  ChainWalk walk{pinned, 0};
  bool named = false;
  std::set<std::string> seen{pinned};
  for (;;) {
    std::size_t i = 0;
    while (i < chain.size() && chain[i].old_key != walk.key) ++i;
    if (i == chain.size()) break;
    named = true;
    const KeyRotation& r = chain[i];
    const std::string text = key_rotation_text(r);
    if (!verify(text, r.old_signature, r.old_key))
      return sdk::fail(ErrorCode::PermissionDenied, shown(r, i) + ": the old key's signature does not verify");
    if (!verify(text, r.new_signature, r.new_key))
      return sdk::fail(ErrorCode::PermissionDenied, shown(r, i) + ": the new key's signature does not verify");
    if (!seen.insert(r.new_key).second)
      return sdk::fail(ErrorCode::PermissionDenied, shown(r, i) + ": leads back to a key already walked");
    walk.key = r.new_key;
    ++walk.steps;
  }
  if (!named)
    for (const auto& r : chain)
      if (r.new_key == pinned) named = true;
  if (!named)
    return sdk::fail(ErrorCode::NotFound, "no statement of the chain names the pinned key " + to_hex(pinned));
  return walk;
}

RotationCheck check_with_rotation(const sdk::Message& m, const std::string& pinned,
                                  const std::function<sdk::Result<void>(const std::string& key)>& verify_with) {
  RotationCheck out{verify_with(pinned), {}, 0, {}};
  // Only a signature that does not verify is a reason to look for a newer key.
  if (out.verified || out.verified.error().code != ErrorCode::PermissionDenied) return out;
  const std::string* header = m.header(kHeaderKeyChain);
  if (!header || pinned.empty()) return out;
  auto chain = parse_key_chain_header(*header);
  if (!chain) {
    out.chain_refused = chain.error().message;
    return out;
  }
  auto walk = walk_key_chain(*chain, pinned);
  if (!walk) {
    out.chain_refused = walk.error().message;
    return out;
  }
  if (walk->steps == 0) return out;  // the pinned key is the newest: the message's own verdict stands
  auto again = verify_with(walk->key);
  if (!again) {
    out.chain_refused = "the message does not verify with the chain's newest key " + to_hex(walk->key) + " either";
    return out;
  }
  out.verified = std::move(again);
  out.new_key = walk->key;
  out.steps = walk->steps;
  return out;
}

}  // namespace mesh::common
