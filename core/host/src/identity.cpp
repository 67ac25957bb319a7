#include "mesh/host/identity.h"

#include <unistd.h>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"

namespace mesh::host {

namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

/// SHA-256 (hex) of a key file's exact content, or "" when it does not exist.
sdk::Result<std::string> file_digest(const std::string& path) {
  auto text = common::read_file(path, 4096);
  if (!text) {
    if (text.error().code == sdk::ErrorCode::NotFound) return std::string();
    return sdk::fail(text.error());
  }
  return common::sha256_hex(*text);
}

sdk::Error incomplete(const std::string& state_dir, const std::string& node, const std::string& what) {
  const std::string name = node.empty() ? "NODE" : node;
  return sdk::Error{sdk::ErrorCode::FailedPrecondition,
                    "the enrolment of node " + name + " in " + state_dir + " is incomplete (" + what +
                        ": `mesh-host enrol` was interrupted); finish it with a new token: `mesh token issue " + name +
                        " --reenrol`, then `mesh-host enrol --config HOST.toml --token-file FILE`",
                    state_dir + "/identity.json"};
}

}  // namespace

sdk::Result<std::optional<Identity>> load_identity(const std::string& state_dir) {
  const std::string path = state_dir + "/identity.json";
  auto text = common::read_file(path, 64 * 1024);
  if (!text) {
    if (text.error().code == sdk::ErrorCode::NotFound) {
      // identity.json is written last: key files without it are an enrolment that did not finish.
      for (const char* f : {"/node.key", "/heartbeat.key", "/broker.nk"})
        if (exists(state_dir + f)) return sdk::fail(incomplete(state_dir, "", state_dir + f + " without identity.json"));
      return std::optional<Identity>{};
    }
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
  // identity.json is the commit point of an enrolment (save_identity): it names the digest of
  // every key file written with it. A file that differs (or is missing) was left by an enrolment
  // killed part-way. Identities written before these digests existed have no "files" entry.
  if (id.secret_key.size() != 64 || id.secret_key.substr(32) != id.public_key)
    return sdk::fail(incomplete(state_dir, id.node, state_dir + "/node.key does not belong to identity.json's public_key"));
  if (const sdk::Value* files = v->find("files"); files && files->is_object()) {
    for (const auto& [name, want] : files->as_object()) {
      if (name != "node.key" && name != "heartbeat.key" && name != "broker.nk") continue;
      auto got = file_digest(state_dir + "/" + name);
      if (!got) return sdk::fail(got.error());
      const std::string expected = want.is_string() ? want.as_string() : "";
      if (*got != expected)
        return sdk::fail(incomplete(state_dir, id.node,
                                    expected.empty() ? state_dir + "/" + name + " is left from another enrolment"
                                    : got->empty()   ? state_dir + "/" + name + " is missing"
                                                     : state_dir + "/" + name + " is not the one enrolled with identity.json"));
    }
  }
  return std::optional<Identity>(std::move(id));
}

sdk::Result<void> save_identity(const std::string& state_dir, const Identity& id,
                                const std::optional<std::string>& broker_seed) {
  // One atomic step: every key file first (each atomically), identity.json last with their
  // digests. Killed anywhere before identity.json is renamed into place, load_identity() sees an
  // incomplete enrolment (never an identity without the broker credentials it was given).
  sdk::Value files = sdk::Value::object();
  auto put = [&](const std::string& name, const std::string& content) -> sdk::Result<void> {
    if (auto r = common::write_file_atomic(state_dir + "/" + name, content, 0600); !r) return r;
    files.set(name, common::sha256_hex(content));
    return {};
  };
  if (broker_seed) {
    if (auto r = put("broker.nk", *broker_seed + "\n"); !r) return r;
  } else {
    ::unlink((state_dir + "/broker.nk").c_str());  // a re-enrolment without managed permissions: the old key is dead
    files.set("broker.nk", "");
  }
  if (auto r = put("node.key", common::to_hex(id.secret_key) + "\n"); !r) return r;
  if (!id.heartbeat_key.empty()) {
    if (auto r = put("heartbeat.key", common::to_hex(id.heartbeat_key) + "\n"); !r) return r;
  } else {
    ::unlink((state_dir + "/heartbeat.key").c_str());
    files.set("heartbeat.key", "");
  }
  sdk::Value v = sdk::Value::object();
  v.set("node", id.node);
  v.set("enrolled_at_ms", id.enrolled_at_ms);
  v.set("generation", static_cast<std::int64_t>(id.generation));
  v.set("public_key", common::to_hex(id.public_key));
  if (!id.control_key.empty()) v.set("control_key", common::to_hex(id.control_key));
  v.set("files", std::move(files));
  return common::write_file_atomic(state_dir + "/identity.json", v.to_json() + "\n", 0600);
}

}  // namespace mesh::host
