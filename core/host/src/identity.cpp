#include "mesh/host/identity.h"

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"

namespace mesh::host {

sdk::Result<std::optional<Identity>> load_identity(const std::string& state_dir) {
  const std::string path = state_dir + "/identity.json";
  auto text = common::read_file(path, 64 * 1024);
  if (!text) {
    if (text.error().code == sdk::ErrorCode::NotFound) return std::optional<Identity>{};
    return sdk::fail(text.error());
  }
  auto v = common::parse_json(*text);
  if (!v || !v->is_object()) return sdk::fail(sdk::ErrorCode::InvalidArgument, path + " is not valid JSON");
  Identity id;
  id.node = v->get_string("node");
  id.enrolled_at_ms = v->get_int("enrolled_at_ms", 0);
  id.generation = static_cast<std::uint64_t>(v->get_int("generation", 0));
  auto pk = common::from_hex(v->get_string("public_key"));
  if (!pk || id.node.empty()) return sdk::fail(sdk::ErrorCode::InvalidArgument, path + ": missing node or public_key");
  id.public_key = *pk;
  auto key_text = common::read_file(state_dir + "/node.key", 4096);
  if (!key_text) return sdk::fail(key_text.error());
  std::string hex = *key_text;
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == ' ')) hex.pop_back();
  auto sk = common::from_hex(hex);
  if (!sk) return sdk::fail(sdk::ErrorCode::InvalidArgument, state_dir + "/node.key is not a hex key");
  id.secret_key = *sk;
  if (const std::string ck = v->get_string("control_key"); !ck.empty()) {
    auto raw = common::from_hex(ck);
    if (!raw || raw->size() != 32)
      return sdk::fail(sdk::ErrorCode::InvalidArgument, path + ": control_key is not a 64-hex-character key");
    id.control_key = *raw;
  }
  if (auto hk = common::read_file(state_dir + "/heartbeat.key", 4096); hk) {
    std::string h = *hk;
    while (!h.empty() && (h.back() == '\n' || h.back() == ' ')) h.pop_back();
    auto raw = common::from_hex(h);
    if (!raw || raw->size() != 32)
      return sdk::fail(sdk::ErrorCode::InvalidArgument, state_dir + "/heartbeat.key is not a hex key");
    id.heartbeat_key = *raw;
  } else if (hk.error().code != sdk::ErrorCode::NotFound) {
    return sdk::fail(hk.error());
  }
  return std::optional<Identity>(std::move(id));
}

sdk::Result<void> save_identity(const std::string& state_dir, const Identity& id) {
  if (auto r = common::write_file_atomic(state_dir + "/node.key", common::to_hex(id.secret_key) + "\n", 0600); !r)
    return r;
  if (!id.heartbeat_key.empty())
    if (auto r = common::write_file_atomic(state_dir + "/heartbeat.key", common::to_hex(id.heartbeat_key) + "\n", 0600);
        !r)
      return r;
  sdk::Value v = sdk::Value::object();
  v.set("node", id.node);
  v.set("enrolled_at_ms", id.enrolled_at_ms);
  v.set("generation", static_cast<std::int64_t>(id.generation));
  v.set("public_key", common::to_hex(id.public_key));
  if (!id.control_key.empty()) v.set("control_key", common::to_hex(id.control_key));
  return common::write_file_atomic(state_dir + "/identity.json", v.to_json() + "\n", 0600);
}

}  // namespace mesh::host
