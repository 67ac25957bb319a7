#include "publish_stage.h"

#include <functional>
#include <regex>

#include "mesh/sdk/duration.h"

namespace mesh::stages::publish {
namespace {

using sdk::Attribute;
using sdk::ErrorCode;
using sdk::Value;
using sdk::ValueType;

const std::regex kWord("^[a-z0-9][a-z0-9._-]{0,63}$");

// Every {"path": "...deb", "sha256"?: "..."} object inside `v`, in order.
void find_debs(const Value& v, std::vector<std::pair<std::string, std::string>>& out) {
  if (v.is_object()) {
    const Value* path = v.find("path");
    if (path && path->is_string() && path->as_string().size() > 4 &&
        path->as_string().compare(path->as_string().size() - 4, 4, ".deb") == 0) {
      out.emplace_back(path->as_string(), v.get_string("sha256"));
      return;
    }
    for (const auto& [k, x] : v.as_object()) find_debs(x, out);
  } else if (v.is_array()) {
    for (const auto& x : v.as_array()) find_debs(x, out);
  }
}

}  // namespace

bool version_is_the_runs(const std::string& deb_version, const std::string& run_version) {
  if (run_version.empty()) return false;
  if (deb_version == run_version) return true;
  std::string_view v = deb_version;
  // An epoch: digits and ':' before the upstream version.
  if (auto colon = v.find(':'); colon != std::string_view::npos && colon > 0 &&
                                v.substr(0, colon).find_first_not_of("0123456789") == std::string_view::npos)
    v.remove_prefix(colon + 1);
  if (v == run_version) return true;
  // A Debian revision: what follows the last '-', the upstream version before it.
  if (v.size() > run_version.size() + 1 && v.substr(0, run_version.size()) == run_version &&
      v[run_version.size()] == '-' && v.substr(run_version.size() + 1).find('-') == std::string_view::npos)
    return true;
  return false;
}

const sdk::Schema& PublishStage::settings_schema() const noexcept {
  static const sdk::Schema s{
      "publish",
      "puts the .deb artifacts of the earlier stages into the mesh's apt repository",
      {Attribute{"check_version", ValueType::Bool, false,
                 "refuse a .deb whose Version is not the run's version (or it with a Debian revision or an epoch)",
                 {}, Value(true)}}};
  return s;
}

const sdk::Schema& PublishStage::config_schema() const noexcept {
  static const sdk::Schema s{
      "publish",
      "puts .deb files into the mesh's apt repository (apt-ftparchive index, signed by gpg)",
      {Attribute{"repository", ValueType::String, true,
                 "the repository directory (default: [repository] dir of control.toml)"},
       Attribute{"codename", ValueType::String, false, "codename and suite of the index (dists/<codename>)", {},
                 Value("mesh")},
       Attribute{"component", ValueType::String, false, "the one component", {}, Value("main")},
       Attribute{"architectures", ValueType::StringList, false,
                 "architectures indexed; packages of architecture all are in each", {},
                 Value(Value::Array{Value("amd64"), Value("arm64")})},
       Attribute{"origin", ValueType::String, false, "Origin field of the Release file", {}, Value("Nox Mesh")},
       Attribute{"label", ValueType::String, false, "Label field of the Release file", {}, Value("Nox Mesh")},
       Attribute{"tool_timeout", ValueType::Duration, false, "time limit of each dpkg-deb, apt-ftparchive or gpg run",
                 {}, Value("5m"), 1000.0},
       Attribute{"registry", ValueType::String, false,
                 "host[:port] of the container registry images are pushed to (unset: images are refused)"},
       Attribute{"registry_tls_verify", ValueType::Bool, false,
                 "verify the registry's TLS certificate (false: plain HTTP, for a registry on loopback)", {},
                 Value(true)}}};
  return s;
}

sdk::Result<void> PublishStage::do_configure(const Value& config) {
  RepositoryOptions o;
  o.dir = config.get_string("repository");
  if (o.dir.empty() || o.dir.front() != '/')
    return sdk::fail(ErrorCode::InvalidArgument, "must be an absolute directory", "repository");
  if (host().state_dir.empty())
    return sdk::fail(ErrorCode::FailedPrecondition, "the publish stage needs a state directory for its signing key");
  o.gnupg_home = host().state_dir + "/gnupg";
  o.cache_db = host().state_dir + "/packages.db";
  o.codename = config.get_string("codename", "mesh");
  o.component = config.get_string("component", "main");
  for (const auto& [key, value] : {std::pair<const char*, std::string>{"codename", o.codename}, {"component", o.component}})
    if (!std::regex_match(value, kWord))
      return sdk::fail(ErrorCode::InvalidArgument, "'" + value + "' is not a word of a-z, 0-9, '.', '_' and '-'", key);
  o.architectures.clear();
  if (const Value* a = config.find("architectures"))
    for (const auto& x : a->as_array()) {
      if (!std::regex_match(x.as_string(), kWord) || x.as_string() == "all")
        return sdk::fail(ErrorCode::InvalidArgument, "'" + x.as_string() + "' is not an architecture (amd64, arm64, ...)",
                         "architectures");
      o.architectures.push_back(x.as_string());
    }
  if (o.architectures.empty())
    return sdk::fail(ErrorCode::InvalidArgument, "must name at least one architecture", "architectures");
  o.origin = config.get_string("origin", "Nox Mesh");
  o.label = config.get_string("label", "Nox Mesh");
  for (const auto& [key, value] : {std::pair<const char*, std::string>{"origin", o.origin}, {"label", o.label}})
    for (char c : value)
      if (c == '\n' || c == '\r' || static_cast<unsigned char>(c) < 0x20)
        return sdk::fail(ErrorCode::InvalidArgument, "must be one line of printable text", key);
  auto timeout = sdk::parse_duration(config.get_string("tool_timeout", "5m"));
  if (!timeout) return sdk::fail(ErrorCode::InvalidArgument, timeout.error().message, "tool_timeout");
  o.tool_timeout = *timeout;
  registry_.registry = config.get_string("registry");
  if (!registry_.registry.empty() && !std::regex_match(registry_.registry, std::regex("^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")))
    return sdk::fail(ErrorCode::InvalidArgument, "'" + registry_.registry + "' is not host[:port]", "registry");
  registry_.tls_verify = config.get_bool("registry_tls_verify", true);
  registry_.storage_dir = host().state_dir + "/images";
  registry_.tool_timeout = *timeout;
  auto repo = std::make_unique<AptRepository>(std::move(o));
  sdk::CancelToken none;
  if (auto ok = repo->prepare(none); !ok) return ok;
  log().info("publish stage: repository dir=" + repo->options().dir + " codename=" + repo->options().codename +
             " key=" + repo->fingerprint());
  repository_ = std::move(repo);
  return {};
}

sdk::Result<void> PublishStage::do_check(const sdk::StageInput& in, sdk::StageContext& /*context*/) {
  if (!repository_) return sdk::fail(ErrorCode::FailedPrecondition, "the publish stage is not configured");
  if (const Value* p = in.params.find("package"); p && (!p->is_string() || p->as_string().empty()))
    return sdk::fail(ErrorCode::InvalidArgument, "must be the path of a .deb", "package");
  if (const Value* s = in.params.find("sha256"); s && !s->is_string())
    return sdk::fail(ErrorCode::InvalidArgument, "must be a string", "sha256");
  return {};
}

sdk::Result<sdk::StageOutput> PublishStage::do_run(const sdk::StageInput& in, sdk::StageContext& context,
                                                   const sdk::CancelToken& cancel) {
  if (!repository_) return sdk::fail(ErrorCode::FailedPrecondition, "the publish stage is not configured");
  if (const Value* image = in.params.find("image")) return run_image(*image, context, cancel);
  std::vector<std::pair<std::string, std::string>> debs;
  if (const Value* p = in.params.find("package")) {
    if (!p->is_string() || p->as_string().empty())
      return sdk::fail(ErrorCode::InvalidArgument, "must be the path of a .deb", "package");
    const Value* s = in.params.find("sha256");
    if (s && !s->is_string()) return sdk::fail(ErrorCode::InvalidArgument, "must be a string", "sha256");
    debs.emplace_back(p->as_string(), s ? s->as_string() : "");
  } else {
    find_debs(context.artifacts(), debs);
    if (debs.empty())
      return sdk::fail(ErrorCode::InvalidArgument,
                       "nothing to publish: no \"package\" param, and no earlier stage has a .deb artifact", "package");
  }
  // In a pipeline run the package must be the run's version: a run of --version 1.2.4 that
  // publishes a 1.2.3 package would deploy a version no node can find.
  std::string run_version;
  if (!in.pipeline.empty() && in.params.get_bool("check_version", true)) run_version = in.params.get_string("version");
  Value::Array published;
  for (const auto& [path, sha] : debs) {
    AptRepository::Accept accept;
    if (!run_version.empty())
      accept = [&run_version](const PublishedPackage& p) -> sdk::Result<void> {
        if (version_is_the_runs(p.version, run_version)) return {};
        return sdk::fail(ErrorCode::InvalidArgument,
                         "its Version is " + p.version + " (package " + p.name + "), not the run's version " +
                             run_version + " (nor " + run_version + "-<revision> or <epoch>:" + run_version +
                             "); nothing published (check_version = false in the pipeline file turns this check off)",
                         "version");
      };
    auto r = repository_->publish(path, sha, cancel, accept);
    if (!r) {
      sdk::Error e = r.error();
      e.message = path + ": " + e.message;
      context.log("not published: " + e.message);
      return sdk::fail(e);
    }
    context.log((r->already ? "already published: " : "published: ") + r->name + " " + r->version + " (" +
                r->architecture + ") sha256 " + r->sha256 + " as " + r->filename);
    log().info("publish name=" + r->name + " version=" + r->version + " arch=" + r->architecture +
               " sha256=" + r->sha256 + " already=" + (r->already ? "true" : "false") +
               " operator=" + context.operator_name());
    Value v = Value::object();
    v.set("name", r->name);
    v.set("version", r->version);
    v.set("architecture", r->architecture);
    v.set("sha256", r->sha256);
    v.set("size", static_cast<std::int64_t>(r->size));
    v.set("filename", r->filename);
    v.set("already", r->already);
    published.push_back(std::move(v));
  }
  sdk::StageOutput out;
  out.artifacts.set("packages", Value(std::move(published)));
  Value repo = Value::object();
  repo.set("codename", repository_->options().codename);
  repo.set("component", repository_->options().component);
  repo.set("fingerprint", repository_->fingerprint());
  out.artifacts.set("repository", std::move(repo));
  return out;
}

sdk::Result<sdk::StageOutput> PublishStage::run_image(const Value& image, sdk::StageContext& context,
                                                      const sdk::CancelToken& cancel) {
  if (!image.is_object()) return sdk::fail(ErrorCode::InvalidArgument, "must be a table {name, tag, archive}", "image");
  std::string archive = image.get_string("archive");
  if (archive.empty()) {
    // The one OCI archive (a "path" ending in ".tar") among the earlier stages' artifacts.
    std::vector<std::string> found;
    std::function<void(const Value&)> walk = [&](const Value& v) {
      if (v.is_object()) {
        const Value* path = v.find("path");
        if (path && path->is_string() && path->as_string().size() > 4 &&
            path->as_string().compare(path->as_string().size() - 4, 4, ".tar") == 0) {
          found.push_back(path->as_string());
          return;
        }
        for (const auto& [k, x] : v.as_object()) walk(x);
      } else if (v.is_array()) {
        for (const auto& x : v.as_array()) walk(x);
      }
    };
    walk(context.artifacts());
    if (found.size() != 1)
      return sdk::fail(ErrorCode::InvalidArgument,
                       "no image.archive, and the earlier stages have " + std::to_string(found.size()) +
                           " .tar artifacts (one is needed)",
                       "image.archive");
    archive = found.front();
  }
  auto r = publish_image(registry_, archive, image.get_string("name"), image.get_string("tag"), cancel);
  if (!r) {
    sdk::Error e = r.error();
    if (!e.path.empty() && e.path != "image") e.path = "image." + e.path;
    context.log("not published: " + e.message);
    return sdk::fail(e);
  }
  context.log("published image " + r->reference + " (tag " + r->tag + ")");
  log().info("publish image=" + r->reference + " tag=" + r->tag + " operator=" + context.operator_name());
  Value v = Value::object();
  v.set("name", r->name);
  v.set("tag", r->tag);
  v.set("digest", r->digest);
  v.set("reference", r->reference);
  sdk::StageOutput out;
  out.artifacts.set("images", Value(Value::Array{v}));
  return out;
}

}  // namespace mesh::stages::publish
