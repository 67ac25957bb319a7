#include "mesh/host/path_policy.h"

#include <algorithm>
#include <filesystem>

#include "mesh/common/config.h"
#include "mesh/host/host_config.h"
#include "mesh/sdk/logger.h"

namespace mesh::host {
namespace {

// "/a/b/" -> "/a/b"; keeps "/" and relative paths as they are (they are refused by providers).
std::string normalised(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// A path the host was given relative to its working directory (`--config host.toml`, a relative
// state_dir) is denied by its absolute form: a declaration names absolute paths only.
std::string absolute(const std::string& p) {
  if (p.empty() || p.front() == '/') return p;
  std::error_code ec;
  auto a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

void add(std::vector<std::string>& out, const std::string& given) {
  const std::string p = absolute(given);
  if (p.empty() || p.front() != '/' || p == "/") return;
  std::string n = normalised(p);
  if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
}

// A config value that is a path or a list of paths ([broker] pid_file, [plugins] dir); anything
// else is the control plane's to refuse.
void add_each(std::vector<std::string>& out, const sdk::Value* v) {
  if (!v) return;
  if (v->is_string()) add(out, v->as_string());
  if (v->is_array())
    for (const auto& item : v->as_array())
      if (item.is_string()) add(out, item.as_string());
}

// A SQLite file and the files beside it that are part of it: "-wal", "-shm", "-journal", and
// the stores' in-use lock "<file>.lock" (stores/sqlite/backup.h).
void add_with_siblings(std::vector<std::string>& out, const std::string& file) {
  if (file.empty()) return;
  add(out, file);
  for (const char* suffix : {"-wal", "-shm", "-journal", ".lock"}) add(out, file + suffix);
}

}  // namespace

sdk::Result<std::vector<std::string>> denied_paths(const HostConfig* config, const std::string& state_dir) {
  std::vector<std::string> out;
  add(out, state_dir);
  if (config) add(out, config->path);
  add(out, kDefaultControlStateDir);
  if (!config) return out;
  for (const auto& p : config->deny) add(out, p);
  if (config->control_config.empty()) return out;
  auto cf = common::ConfigFile::load(config->control_config);
  if (!cf)
    return sdk::fail(config->file.error_at("paths.control_config", "cannot read the control plane's config: " +
                                                                       cf.error().describe()));
  add(out, config->control_config);
  const sdk::Value control = cf->table("control");
  const std::string control_state = control.get_string("state_dir");
  add(out, control_state);
  // keys_dir holds operators.json, control.key, signing.json, broker.nk: whoever writes there
  // is an admin of the mesh (newuser finding 4).
  add(out, control.get_string("keys_dir"));
  // The store's file and what SQLite and the store keep beside it: a forged -wal is a forged store.
  const sdk::Value store = cf->table("store");
  for (const char* key : {"path", "local_path"}) add_with_siblings(out, store.get_string(key));
  // A jetstream-kv store imports this file into a new stream: a forged one is a forged store.
  add(out, store.get_string("import_sqlite"));
  // Credentials and the CA the control plane (and its store) connect with.
  const sdk::Value transport = cf->table("transport");
  for (const char* key : {"nkey_seed", "password_file", "tls_ca"}) {
    add(out, store.get_string(key));
    add(out, transport.get_string(key));
  }
  const sdk::Value broker = cf->table("broker");
  const std::string authorization = broker.get_string("authorization_file");
  add(out, authorization);
  if (authorization.size() > 1 && authorization.find('/') != std::string::npos)
    add(out, std::filesystem::path(authorization).parent_path().string() + "/authorization.lock");
  for (const char* key : {"enrol_password_file", "operator_password_file"}) add(out, broker.get_string(key));
  // nats-server's pid files: mesh-control (as root) sends SIGHUP to whatever pid they name.
  add_each(out, broker.find("pid_file"));
  // Code and content the control plane takes from disk: its plugins (loaded into it), the
  // pipeline files (their commands run), the apt repository and content by digest (served to
  // every node).
  add_each(out, cf->table("plugins").find("dir"));
  add(out, cf->table("pipelines").get_string("dir"));
  add(out, cf->table("repository").get_string("dir"));
  add(out, cf->table("content").get_string("dir"));
  if (const sdk::Value stages = cf->table("stages"); stages.is_object())
    if (const sdk::Value* publish = stages.find("publish"); publish && publish->is_object())
      add(out, publish->get_string("repository"));
  return out;
}

bool add_denied_roots(sdk::Value& provider_config, bool schema_has_key, const std::vector<std::string>& denied) {
  if (!schema_has_key) return false;
  sdk::Value::Array list;
  if (const sdk::Value* own = provider_config.find("denied_roots"); own && own->is_array()) list = own->as_array();
  for (const auto& p : denied) list.emplace_back(p);
  provider_config.set("denied_roots", sdk::Value(std::move(list)));
  return true;
}

namespace {

std::string lexically_normal(const std::string& p) {
  std::vector<std::string> parts;
  for (std::size_t start = 1; start <= p.size();) {
    std::size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string part = p.substr(start, end - start);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(std::move(part));
    }
    start = end + 1;
  }
  std::string out;
  for (const auto& part : parts) out += "/" + part;
  return out.empty() ? "/" : out;
}

bool within(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

class PathGuard final : public sdk::Provider {
 public:
  PathGuard(std::shared_ptr<sdk::Provider> inner, std::vector<std::string> denied)
      : sdk::Provider(context()), inner_(std::move(inner)), denied_(std::move(denied)) {}
  const sdk::Schema& schema() const noexcept override { return inner_->schema(); }
  const sdk::Schema& config_schema() const noexcept override { return inner_->config_schema(); }

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override { return inner_->configure(config); }
  // The wrapper is host code: it hands the host-allocated structs straight to the wrapped
  // provider, and declares what that provider declares.
  sdk::Result<void> do_capabilities(sdk::ProviderCapabilities& caps) const override {
    auto inner = inner_->capabilities();
    if (!inner) return sdk::fail(inner.error());
    caps = *inner;
    return {};
  }
  sdk::Result<void> do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) override {
    if (auto ok = check(req.resource.rid); !ok) return sdk::report(resp, ok);
    return inner_->validate(req, resp);
  }
  sdk::Result<void> do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) override {
    if (auto ok = check(req.rid); !ok) return ok;
    return inner_->read(req, resp);
  }
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override {
    return inner_->plan(req, resp);
  }
  sdk::Result<void> do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) override {
    if (auto ok = check(req.plan.rid); !ok) return ok;
    return inner_->apply(req, resp);
  }
  sdk::Result<void> do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse& resp) override {
    if (auto ok = check(req.rid); !ok) return ok;
    return inner_->remove(req, resp);
  }
  // A denied plan in a batch: the plans before it go through, it fails, nothing after it is tried.
  sdk::Result<void> do_apply_batch(const sdk::ApplyBatchRequest& req, sdk::ApplyBatchResponse& resp) override {
    for (std::size_t k = 0; k < req.plans.size(); ++k) {
      auto ok = check(req.plans[k].rid);
      if (ok) continue;
      if (k == 0) return ok;
      sdk::ApplyBatchRequest prefix;
      prefix.plans.assign(req.plans.begin(), req.plans.begin() + static_cast<std::ptrdiff_t>(k));
      prefix.cancel = req.cancel;
      prefix.intent = req.intent;
      if (auto done = inner_->apply_batch(prefix, resp); !done) return done;
      return ok;
    }
    return inner_->apply_batch(req, resp);
  }

 private:
  // The wrapper itself never logs; Plugin wants a context that outlives it.
  static const sdk::HostContext& context() {
    static sdk::NullLogger logger;
    static const sdk::HostContext ctx = [] {
      sdk::HostContext c;
      c.logger = &logger;
      c.role = "host";
      return c;
    }();
    return ctx;
  }
  sdk::Result<void> check(const sdk::ResourceId& rid) const {
    const std::string* root = denied_by(rid.id, denied_);
    if (!root) return {};
    return sdk::fail(sdk::ErrorCode::PermissionDenied,
                     "refusing " + rid.str().substr(0, 300) + ": it is under " + *root +
                         ", which the host's path policy denies (its own state directory, the control plane's, "
                         "and [paths] deny in host.toml): nothing under it is ever managed",
                     "id");
  }

  std::shared_ptr<sdk::Provider> inner_;
  std::vector<std::string> denied_;
};

}  // namespace

const std::string* denied_by(const std::string& id, const std::vector<std::string>& denied) {
  if (id.empty() || id.front() != '/') return nullptr;
  const std::string path = lexically_normal(id);
  for (const auto& d : denied)
    if (within(path, d)) return &d;
  return nullptr;
}

std::shared_ptr<sdk::Provider> guard_paths(std::shared_ptr<sdk::Provider> inner, std::vector<std::string> denied) {
  return std::make_shared<PathGuard>(std::move(inner), std::move(denied));
}

}  // namespace mesh::host
