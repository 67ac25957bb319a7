// Content by digest fetched into the host's cache (content_fetch.h, decision record 111).
#include "content_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/common/parts.h"
#include "mesh/common/protocol.h"
#include "mesh/common/text.h"
#include "mesh/common/trust.h"
#include "mesh/support/sha256.h"

namespace mesh::host {

namespace {

using sdk::ErrorCode;

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

sdk::Error local_error(const std::string& hex, const std::string& what) {
  return sdk::Error{ErrorCode::Failed, "content sha256:" + hex + ": " + what + ": " + std::strerror(errno), {}};
}

}  // namespace

std::vector<DeclaredContent> declared_content(const engine::Declaration& decl) {
  std::vector<DeclaredContent> out;
  std::set<std::string> seen;
  for (const auto& r : decl.resources) {
    if (r.rid.type != "file") continue;
    const sdk::Value* source = r.properties.find("source");
    if (!source || !source->is_string()) continue;
    const std::string& text = source->as_string();
    if (text.rfind("sha256:", 0) != 0 || !is_hex64(std::string_view(text).substr(7))) continue;
    std::string hex = text.substr(7);
    if (seen.insert(hex).second) out.push_back(DeclaredContent{std::move(hex), r.rid.str()});
  }
  return out;
}

std::string content_cache_root(const std::string& state_dir) { return state_dir + "/plugins/file/content"; }

std::string content_cache_path(const std::string& state_dir, const std::string& hex) {
  return content_cache_root(state_dir) + "/sha256/" + hex;
}

sdk::Result<void> fetch_content(const ContentFetch& how, const std::string& hex) {
  const std::string target = content_cache_path(how.state_dir, hex);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return {};
  const std::string root = content_cache_root(how.state_dir);
  const std::string incoming = root + "/incoming";
  for (const std::string& d : {how.state_dir + "/plugins", how.state_dir + "/plugins/file", root, root + "/sha256", incoming})
    if (auto ok = common::make_dirs(d, 0700); !ok) return sdk::fail(ok.error());
  const std::string temp = incoming + "/" + hex + "." + common::to_hex(common::random_bytes(6));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return sdk::fail(local_error(hex, "open " + temp));
  bool kept = false;
  struct Cleanup {
    int fd;
    const std::string& temp;
    bool& kept;
    ~Cleanup() {
      if (fd >= 0) ::close(fd);
      if (!kept) ::unlink(temp.c_str());
    }
  } cleanup{fd, temp, kept};

  const std::string name = "content sha256:" + hex;
  support::Sha256 hash;
  std::uint64_t offset = 0;
  std::int64_t total = -1;
  while (total < 0 || offset < static_cast<std::uint64_t>(total)) {
    sdk::Value body = sdk::Value::object();
    body.set("digest", "sha256:" + hex);
    body.set("offset", static_cast<std::int64_t>(offset));
    body.set("length", static_cast<std::int64_t>(how.range));
    auto req = protocol::make_message(protocol::content_subject(how.node), body.to_json());
    trust::sign_request(req, protocol::kHeaderNode, how.node, how.secret_key, how.now_ms());
    protocol::parts::RequestOptions opts;
    opts.timeout = std::chrono::seconds(10);
    opts.inbox_prefix = protocol::node_inbox_prefix(how.node);
    auto reply = protocol::parts::request(*how.transport, req, opts);
    if (!reply)
      return sdk::fail(ErrorCode::Unavailable, name + ": no answer from the control plane at byte " +
                                                   std::to_string(offset) + ": " + reply.error().message);
    if (auto ok = how.verify(*reply, req); !ok)
      return sdk::fail(ErrorCode::Unavailable, name + ": the reply is not trusted: " + ok.error().message);
    const std::string* status = reply->header(protocol::kHeaderStatus);
    if (status && *status == "none")
      return sdk::fail(ErrorCode::NotFound, name + " is not on the control plane (put it there with `mesh content "
                                                   "push FILE`, then declare again)");
    if (!status || *status != "ok") {
      auto v = common::parse_json(reply->body, {1 << 16, 8});
      const sdk::Value* e = v ? v->find("error") : nullptr;
      const std::string why = e && e->is_object() ? e->get_string("message") : common::printable(reply->body, 512);
      return sdk::fail(ErrorCode::Unavailable, name + ": refused by the control plane: " + why);
    }
    const std::string* size_text = reply->header(protocol::kHeaderContentSize);
    std::int64_t size = -1;
    if (size_text) size = std::strtoll(size_text->c_str(), nullptr, 10);
    if (size < 0 || (total >= 0 && size != total))
      return sdk::fail(ErrorCode::PermissionDenied, name + ": the control plane's size of it changed or is missing "
                                                           "(refused; nothing written)");
    total = size;
    if (reply->body.empty() && offset < static_cast<std::uint64_t>(total))
      return sdk::fail(ErrorCode::Unavailable, name + ": an empty range at byte " + std::to_string(offset));
    if (offset + reply->body.size() > static_cast<std::uint64_t>(total))
      return sdk::fail(ErrorCode::PermissionDenied, name + ": a range ends beyond its size of " +
                                                        std::to_string(total) + " bytes (refused; nothing written)");
    hash.update(reply->body);
    std::size_t done = 0;
    while (done < reply->body.size()) {
      const ssize_t n = ::write(fd, reply->body.data() + done, reply->body.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sdk::fail(local_error(hex, "write " + temp));
      done += static_cast<std::size_t>(n);
    }
    offset += reply->body.size();
  }
  const std::string got = hash.hex_digest();
  if (got != hex)
    return sdk::fail(ErrorCode::PermissionDenied,
                     name + ": the " + std::to_string(total) + " bytes from the control plane have sha256:" + got +
                         " (a corrupted or swapped range): refused, nothing written");
  if (::fsync(fd) != 0) return sdk::fail(local_error(hex, "fsync " + temp));
  if (::rename(temp.c_str(), target.c_str()) != 0) return sdk::fail(local_error(hex, "rename into " + target));
  kept = true;
  const int dir = ::open((root + "/sha256").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {};
}

}  // namespace mesh::host
