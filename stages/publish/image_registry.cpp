#include "image_registry.h"

#include <filesystem>
#include <functional>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "tool.h"

namespace mesh::stages::publish {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;

// The distribution spec's name and tag grammars (opencontainers/distribution-spec).
const std::regex kName("^[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*)*$");
const std::regex kTag("^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$");
const std::regex kDigest("^sha256:[0-9a-f]{64}$");

std::mutex& storage_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

sdk::Result<PublishedImage> publish_image(const RegistryOptions& o, const std::string& archive, const std::string& name,
                                          const std::string& tag, const sdk::CancelToken& cancel) {
  if (o.registry.empty())
    return sdk::fail(ErrorCode::InvalidArgument, "this publish stage has no registry ([stages.publish] registry)", "image");
  if (name.size() > 255 || !std::regex_match(name, kName))
    return sdk::fail(ErrorCode::InvalidArgument, "'" + name.substr(0, 100) + "' is not an image name (a-z, 0-9, '.', '_', '-', '/')", "name");
  if (!std::regex_match(tag, kTag))
    return sdk::fail(ErrorCode::InvalidArgument, "'" + tag.substr(0, 140) + "' is not an image tag", "tag");
  std::error_code ec;
  if (!fs::is_regular_file(archive, ec))
    return sdk::fail(ErrorCode::InvalidArgument, archive + ": not a file (an OCI archive)", "image");

  std::lock_guard lock(storage_mutex());
  for (const char* sub : {"root", "run"}) fs::create_directories(fs::path(o.storage_dir) / sub, ec);
  fs::permissions(o.storage_dir, fs::perms::owner_all, ec);
  const std::vector<std::string> podman{"podman", "--root", o.storage_dir + "/root", "--runroot", o.storage_dir + "/run",
                                        "--storage-driver", "vfs"};
  auto with = [&](std::initializer_list<std::string> args) {
    std::vector<std::string> v = podman;
    v.insert(v.end(), args);
    return v;
  };
  ToolResult pulled = run_tool(Tool{with({"pull", "--quiet", "oci-archive:" + archive}), "", "", o.tool_timeout}, cancel);
  if (!pulled.ok())
    return sdk::fail(ErrorCode::InvalidArgument, archive + ": not an OCI archive podman can read: " + pulled.describe("podman pull"),
                     "image");
  std::string id;
  {
    std::istringstream lines(pulled.out);
    for (std::string line; std::getline(lines, line);)
      if (line.size() == 64 && line.find_first_not_of("0123456789abcdef") == std::string::npos) id = line;
  }
  if (id.empty()) return sdk::fail(ErrorCode::Failed, "podman pull named no image: " + pulled.describe("podman pull"));
  struct Remove {
    std::function<void()> f;
    ~Remove() { f(); }
  } remove{[&] {
    sdk::CancelToken none;
    (void)run_tool(Tool{with({"rmi", "--force", id}), "", "", o.tool_timeout}, none);
  }};
  const std::string digest_file = o.storage_dir + "/digest";
  fs::remove(digest_file, ec);
  const std::string target = o.registry + "/" + name + ":" + tag;
  ToolResult pushed = run_tool(Tool{with({"push", "--quiet", std::string("--tls-verify=") + (o.tls_verify ? "true" : "false"),
                                          "--digestfile", digest_file, id, "docker://" + target}),
                                    "", "", o.tool_timeout},
                               cancel);
  if (!pushed.ok()) return sdk::fail(ErrorCode::Failed, "pushing " + target + ": " + pushed.describe("podman push"));
  std::ifstream df(digest_file);
  std::string digest;
  std::getline(df, digest);
  if (!std::regex_match(digest, kDigest))
    return sdk::fail(ErrorCode::Failed, "podman push wrote no digest for " + target);
  return PublishedImage{name, tag, digest, o.registry + "/" + name + "@" + digest};
}

}  // namespace mesh::stages::publish
