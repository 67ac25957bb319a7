// mesh-sim's identities: the state file (JSON lines), the tokens file, and tokens issued with an
// operator identity through the operator API client (mesh/cli/client.h), as `mesh token issue`.
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "fleet.h"
#include "mesh/cli/client.h"
#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/common/trust.h"

namespace mesh::sim::detail {

namespace {

sdk::Result<std::string> hex_field(const sdk::Value& v, const char* key, std::size_t bytes, const std::string& where) {
  auto raw = common::from_hex(v.get_string(key));
  if (!raw || raw->size() != bytes)
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     where + ": `" + key + "` must be " + std::to_string(bytes * 2) + " hex characters", key);
  return *raw;
}

}  // namespace

sdk::Result<std::map<std::string, std::pair<host::Identity, bool>>> read_state_file(const std::string& path) {
  std::map<std::string, std::pair<host::Identity, bool>> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(n);
    auto v = common::parse_json(line);
    if (!v || !v->is_object())
      return sdk::fail(sdk::ErrorCode::InvalidArgument, where + ": not a JSON object (a mesh-sim state file)");
    host::Identity id;
    id.node = v->get_string("node");
    if (!protocol::valid_node_name(id.node))
      return sdk::fail(sdk::ErrorCode::InvalidArgument, where + ": `node` is not a node name", "node");
    id.generation = static_cast<std::uint64_t>(v->get_int("generation", 0));
    id.enrolled_at_ms = v->get_int("enrolled_at_ms", 0);
    MESH_TRY(pub, hex_field(*v, "public_key", 32, where));
    MESH_TRY(sec, hex_field(*v, "secret_key", 64, where));
    MESH_TRY(ctl, hex_field(*v, "control_key", 32, where));
    MESH_TRY(hb, hex_field(*v, "heartbeat_key", 32, where));
    id.public_key = pub;
    id.secret_key = sec;
    id.control_key = ctl;
    id.heartbeat_key = hb;
    const std::string node = id.node;  // (the pair is built first: id is moved from before the key is read)
    out[node] = {std::move(id), v->get_bool("briefed", false)};
  }
  return out;
}

sdk::Result<void> write_state_file(const std::string& path, const std::vector<std::unique_ptr<SimHost>>& hosts) {
  std::string text;
  for (const auto& h : hosts) {
    if (!h->enrolled) continue;
    sdk::Value v = sdk::Value::object();
    v.set("node", h->name);
    v.set("generation", static_cast<std::int64_t>(h->id.generation));
    v.set("enrolled_at_ms", h->id.enrolled_at_ms);
    v.set("public_key", common::to_hex(h->id.public_key));
    v.set("secret_key", common::to_hex(h->id.secret_key));
    v.set("control_key", common::to_hex(h->id.control_key));
    v.set("heartbeat_key", common::to_hex(h->id.heartbeat_key));
    v.set("briefed", h->briefed.load());
    text += v.to_json() + "\n";
  }
  return common::write_file_atomic(path, text, 0600);
}

sdk::Result<std::map<std::string, std::string>> read_tokens_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return sdk::fail(sdk::ErrorCode::InvalidArgument, "cannot read " + path, "--tokens");
  std::map<std::string, std::string> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream words(line);
    std::string node, token, extra;
    if (!(words >> node) || node[0] == '#') continue;
    if (!(words >> token) || (words >> extra) || !protocol::valid_node_name(node))
      return sdk::fail(sdk::ErrorCode::InvalidArgument,
                       path + ":" + std::to_string(n) + ": expected \"NODE TOKEN\" (a node name and its token)",
                       "--tokens");
    out[node] = token;
  }
  return out;
}

sdk::Result<std::map<std::string, std::string>> issue_tokens(const SimOptions& options,
                                                             const std::vector<std::string>& nodes,
                                                             const std::atomic<bool>& stop) {
  std::vector<cli::ClientOptions> per_identity;
  for (const auto& path : options.identity_paths) {
    MESH_TRY(identity, trust::load_operator_identity(path));
    cli::ClientOptions co;
    co.plugin_dir = options.plugin_dir;
    co.transport_config = sdk::Value::object();
    sdk::Value servers = sdk::Value::array();
    for (const auto& s : options.servers) servers.as_array().push_back(sdk::Value(s));
    co.transport_config.set("servers", std::move(servers));
    if (!options.user.empty()) co.transport_config.set("user", options.user);
    if (!options.password_file.empty()) co.transport_config.set("password_file", options.password_file);
    co.servers = options.servers.empty() ? "" : options.servers.front();
    // A request not answered within this is asked again (below): it also bounds how long a stop
    // waits for the calls in flight (a call waits for its reply; nothing ends it sooner).
    co.timeout = kTokenRequestTimeout;
    co.control_key = identity.control_key;
    co.identity = identity;
    per_identity.push_back(std::move(co));
  }
  if (per_identity.empty()) return sdk::fail(sdk::ErrorCode::InvalidArgument, "no operator identity", "--identity");

  std::mutex mu;
  std::map<std::string, std::string> out;
  std::optional<sdk::Error> first_error;
  std::size_t next = 0;
  auto work = [&](const cli::ClientOptions& co) {
    auto client = cli::Client::connect(co);
    if (!client) {
      std::lock_guard lk(mu);
      if (!first_error) first_error = client.error();
      return;
    }
    for (;;) {
      std::string node;
      {
        std::lock_guard lk(mu);
        if (first_error || stop || next >= nodes.size()) return;
        node = nodes[next++];
      }
      // As `mesh token issue NODE --reenrol`: the token comes back sealed to a key made for this
      // one request.
      for (int attempt = 0;; ++attempt) {
        if (stop) return;
        const auto reply_keys = common::generate_keypair();
        sdk::Value params = sdk::Value::object();
        params.set("node", node);
        params.set("ttl_ms", static_cast<std::int64_t>(3'600'000));
        params.set("reenrol", true);
        params.set("reply_key", common::to_hex(reply_keys.public_key));
        auto r = (*client)->call("token.issue", params);
        if (!r && (r.error().code == sdk::ErrorCode::Transient || r.error().code == sdk::ErrorCode::Timeout) &&
            attempt < 300) {
          // Busy (a full nonce cache of this operator, a full queue): asked again.
          for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        std::lock_guard lk(mu);
        if (stop) return;  // a call ended by the stop (its connection closed) is no refusal
        if (!r) {
          if (!first_error) first_error = sdk::Error{r.error().code, "token.issue " + node + ": " + r.error().message, {}};
          return;
        }
        auto raw = common::from_hex(r->get_string("token_sealed"));
        auto token = raw ? common::open_sealed(*raw, reply_keys) : sdk::Result<std::string>(sdk::fail(raw.error()));
        if (!token) {
          if (!first_error)
            first_error = sdk::Error{sdk::ErrorCode::Failed, "token.issue " + node + ": the sealed token cannot be opened", {}};
          return;
        }
        out[node] = *token;
        break;
      }
    }
  };
  std::vector<std::thread> threads;
  const std::size_t n = std::max<std::size_t>(1, std::min<std::size_t>(options.workers, 8));
  for (const auto& co : per_identity)
    for (std::size_t i = 0; i < n; ++i) threads.emplace_back(work, std::cref(co));
  for (auto& t : threads) t.join();
  if (stop) return sdk::fail(sdk::ErrorCode::Cancelled, "stopped while issuing tokens");
  if (first_error) return sdk::fail(*first_error);
  return out;
}

}  // namespace mesh::sim::detail
