// `mesh publish FILE.deb`: the file's SHA-256 is computed here, the file is sent in chunks
// (publish.part, each one signed API request, in parts when larger than the broker's limit),
// then `publish` names the upload with its size and digest; the control plane checks both
// before its publish stage runs, and the answer's digest (of the file as the repository holds
// it) is checked against ours. `mesh repository key` prints the repository's public key.
#include "cmd_publish.h"

#include <sys/stat.h>

#include <fstream>
#include <iostream>

#include "mesh/cli/exit_codes.h"
#include "mesh/common/error_text.h"
#include "mesh/common/crypto.h"
#include "mesh/common/text.h"
#include "mesh/sdk/schema.h"
#include "mesh/support/sha256.h"

namespace mesh::cli {
namespace {

using sdk::Value;

constexpr std::uint64_t kMaxUpload = 1ull << 30;  // the control plane's limit (api_publish.cpp)
constexpr auto kPublishTimeout = std::chrono::minutes(5);  // checking, indexing and signing

std::string shown(const Value& v, const char* key) { return common::printable(v.get_string(key), 256); }

}  // namespace

bool PublishCommands::parsed() const { return publish_->parsed() || repository_key_->parsed(); }

std::shared_ptr<PublishCommands> register_publish_commands(CLI::App& app) {
  auto c = std::make_shared<PublishCommands>();
  c->publish_ = app.add_subcommand("publish", "put a .deb into the mesh's apt repository (publish stage)");
  c->publish_->add_option("FILE", c->file_, "the .deb file")->required();
  c->publish_->add_option("--chunk", c->chunk_, "bytes per upload request (e.g. 4MiB)")->capture_default_str();
  c->repository_ = app.add_subcommand("repository", "the mesh's apt repository");
  c->repository_->require_subcommand(1);
  c->repository_key_ = c->repository_->add_subcommand(
      "key", "print the repository's public key (for apt's signed-by, e.g. in a file resource)");
  for (CLI::App* sub : {c->publish_, c->repository_, c->repository_key_}) sub->fallthrough();
  return c;
}

int PublishCommands::run(const ConnectFn& connect, bool json, std::ostream& out, std::ostream& err) {
  auto fail = [&](int code, const std::string& message) {
    err << "error: " << common::printable(message, 4096) << "\n";
    return code;
  };
  if (repository_key_->parsed()) {
    auto client = connect();
    if (!client) return fail(client.error().code, client.error().message);
    auto r = (*client)->call("repository.key", Value::object());
    if (!r) return fail(exit_code_for(r.error().code), r.error().message);
    if (json) out << r->to_json() << "\n";
    else out << r->get_string("key");
    return kExitOk;
  }

  // Local checks first: nothing is sent for a file that cannot be a .deb.
  auto chunk = sdk::parse_size(chunk_);
  if (!chunk || *chunk < 4096 || *chunk > (32u << 20))
    return fail(kExitUsage, "--chunk: must be a size from 4KiB to 32MiB (e.g. 4MiB)");
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return fail(kExitUsage, file_ + ": not a readable file");
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  if (size == 0 || size > kMaxUpload)
    return fail(kExitUsage, file_ + ": " + std::to_string(size) + " bytes; a package must be 1 byte to 1 GiB");
  std::ifstream in(file_, std::ios::binary);
  if (!in) return fail(kExitUsage, file_ + ": cannot be read");
  {
    char magic[21] = {};
    in.read(magic, 21);
    if (in.gcount() < 21 || std::string_view(magic, 8) != "!<arch>\n" || std::string_view(magic + 8, 13) != "debian-binary")
      return fail(kExitUsage, file_ + ": not a Debian binary package (.deb): no ar archive starting with debian-binary");
  }
  support::Sha256 hash;
  in.clear();
  in.seekg(0);
  std::vector<char> buf(static_cast<std::size_t>(*chunk));
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) hash.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  const std::string sha256 = hash.hex_digest();

  auto client = connect();
  if (!client) return fail(client.error().code, client.error().message);
  const std::string upload = common::to_hex(common::random_bytes(16));
  in.clear();
  in.seekg(0);
  std::uint64_t sent = 0;
  while (sent < size) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(buf.size(), size - sent)));
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n == 0) return fail(kExitFailed, file_ + ": changed while it was sent (shorter than " + std::to_string(size) + " bytes)");
    Value p = Value::object();
    p.set("upload", upload);
    p.set("offset", static_cast<std::int64_t>(sent));
    p.set("data", common::base64url_encode(std::string_view(buf.data(), n)));
    auto r = (*client)->call("publish.part", p);
    if (!r) return fail(exit_code_for(r.error().code), "upload of " + file_ + " stopped at byte " + std::to_string(sent) +
                                                        " of " + std::to_string(size) + ": " + r.error().message +
                                                        " (nothing was published; run mesh publish again to start over)");
    if (r->get_int("received", -1) != static_cast<std::int64_t>(sent + n))
      return fail(kExitFailed, "the control plane acknowledged " + std::to_string(r->get_int("received", -1)) +
                                   " bytes, not " + std::to_string(sent + n) + "; nothing was published");
    // The spool file is on the instance that took the first chunk: the rest, and `publish`, go
    // there (decision record 170). A control plane that does not say (one instance of an older
    // version) gets them through the queue group, as before.
    if (sent == 0)
      if (const sdk::Value* at = r->find("instance"); at && at->is_string())
        if (auto ok = (*client)->set_instance(at->as_string()); !ok)
          return fail(kExitFailed, "the control plane's answer to the first chunk: " + ok.error().message +
                                       "; nothing was published");
    sent += n;
  }
  std::string name = file_;
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  Value p = Value::object();
  p.set("upload", upload);
  p.set("file", name);
  p.set("size", static_cast<std::int64_t>(size));
  p.set("sha256", sha256);
  (*client)->set_timeout_at_least(kPublishTimeout);
  auto r = (*client)->call("publish", p);
  if (!r) return fail(exit_code_for(r.error().code), r.error().code == sdk::ErrorCode::InvalidArgument ? common::described(r.error())
                                                                                                    : r.error().message);
  // End to end: the repository holds exactly the bytes read here.
  if (r->get_string("sha256") != sha256)
    return fail(kExitFailed, "the repository reports sha256 " + common::printable(r->get_string("sha256"), 80) +
                                 " for " + name + ", not " + sha256 + " as sent: not believed");
  if (json) {
    out << r->to_json() << "\n";
    return kExitOk;
  }
  const bool already = r->get_bool("already", false);
  out << (already ? "already published " : "published ") << shown(*r, "name") << " " << shown(*r, "version") << " ("
      << shown(*r, "architecture") << ") as " << shown(*r, "filename") << "\n"
      << "sha256 " << sha256 << " (" << size << " bytes), checked end to end"
      << (already ? "; the repository already held this file: nothing changed" : "") << "\n";
  return kExitOk;
}

}  // namespace mesh::cli
