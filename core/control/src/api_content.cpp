// File content by digest (decision record 111): `content.put` stores an operator's file in the
// content directory ([content] dir, shared by every instance like the apt repository), one
// range per signed API request, and `mesh.content.<node>` answers a host's request for a range
// of a file it names by digest. Files under sha256/ are immutable and only ever appear whole and
// verified: a range is written into incoming/<hex>.<upload> (pwrite, fsync), and the request
// whose range ends the file hashes the whole temporary file, refuses a mismatch (the temporary
// file removed) and renames it into sha256/<hex>, then fsyncs the directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "fields.h"
#include "service.h"
#include "service_util.h"
#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"
#include "mesh/common/logging.h"
#include "mesh/common/protocol.h"
#include "mesh/support/sha256.h"

namespace mesh::control::detail {

using sdk::ErrorCode;
using sdk::Value;

namespace {

namespace fs = std::filesystem;

// Temporary files of an upload older than this are an interrupted upload: removed when another
// upload starts (by any instance: the directory is shared).
constexpr auto kStaleContentUpload = std::chrono::hours(1);

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

sdk::Error io_error(const std::string& what) {
  return sdk::Error{ErrorCode::Transient, what + ": " + std::strerror(errno) + " (disk full?); send it again", {}};
}

sdk::Result<void> fsync_dir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) return sdk::fail(io_error("fsync " + dir));
  return {};
}

void remove_stale_content_uploads(const std::string& incoming) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(incoming, ec)) {
    auto t = fs::last_write_time(e.path(), ec);
    if (!ec && now - t > kStaleContentUpload) {
      fs::remove(e.path(), ec);
      common::logger()->info("interrupted content upload removed file={}", e.path().filename().string());
    }
  }
}

// SHA-256 of the file at `path`, read in 1 MiB blocks.
sdk::Result<std::string> file_sha256(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return sdk::fail(io_error("open " + path));
  support::Sha256 hash;
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sdk::fail(io_error("read " + path));
    if (n == 0) break;
    hash.update(buf.data(), static_cast<std::size_t>(n));
  }
  return hash.hex_digest();
}

}  // namespace

static sdk::Result<std::string> content_hex(const Fields& f, std::string_view key) {
  MESH_TRY(text, f.string(key));
  constexpr std::string_view kPrefix = "sha256:";
  bool ok = text.size() == kPrefix.size() + 64 && text.rfind(kPrefix, 0) == 0;
  for (std::size_t i = kPrefix.size(); ok && i < text.size(); ++i)
    ok = (text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f');
  if (!ok) return sdk::fail(f.error(key, "must be \"sha256:\" and 64 lower-case hex characters"));
  return text.substr(kPrefix.size());
}

std::string Service::content_path(const std::string& hex) const { return options_.content_dir + "/sha256/" + hex; }

sdk::Result<Value> Service::api_content_put(const ApiCall& call) {
  Fields f(call.params);
  MESH_TRY(hex, content_hex(f, "digest"));
  MESH_TRY(size, f.integer("size", 0, static_cast<std::int64_t>(kMaxContent)));
  MESH_TRY(offset, f.integer("offset", 0, static_cast<std::int64_t>(kMaxContent)));
  MESH_TRY(id, f.string("upload"));
  bool id_ok = id.size() >= 16 && id.size() <= 64;
  for (char c : id) id_ok = id_ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
  if (!id_ok) return sdk::fail(f.error("upload", "must be 16 to 64 letters and digits"));
  MESH_TRY(data_text, f.string("data"));
  MESH_TRY(data, common::base64url_decode(data_text));
  if (options_.content_dir.empty())
    return sdk::fail(ErrorCode::Unsupported, "this control plane has no content directory (control.toml: [content] dir)");
  if (offset > size)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "offset " + std::to_string(offset) + " is beyond the file's size of " + std::to_string(size) +
                         " bytes",
                     "offset");
  if (static_cast<std::uint64_t>(offset) + data.size() > static_cast<std::uint64_t>(size))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "the range of " + std::to_string(data.size()) + " bytes at offset " + std::to_string(offset) +
                         " ends beyond the file's size of " + std::to_string(size) + " bytes",
                     "data");
  const std::string target = content_path(hex);
  Value v = Value::object();
  v.set("digest", "sha256:" + hex);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    // Content-addressed and immutable: whoever sent it first, these are the same bytes.
    v.set("present", true);
    v.set("size", static_cast<std::int64_t>(st.st_size));
    return v;
  }
  const std::string incoming = options_.content_dir + "/incoming";
  for (const std::string& d : {options_.content_dir, options_.content_dir + "/sha256", incoming})
    if (auto ok = common::make_dirs(d, 0750); !ok) return sdk::fail(ok.error());
  if (offset == 0) remove_stale_content_uploads(incoming);
  const std::string temp = incoming + "/" + hex + "." + id;
  {
    Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640));
    if (fd.get() < 0) return sdk::fail(io_error("open " + temp));
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::pwrite(fd.get(), data.data() + done, data.size() - done,
                                 static_cast<off_t>(offset) + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sdk::fail(io_error("write " + temp));
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) return sdk::fail(io_error("fsync " + temp));
  }
  const std::uint64_t end = static_cast<std::uint64_t>(offset) + data.size();
  v.set("present", false);
  v.set("received", static_cast<std::int64_t>(end));
  if (end < static_cast<std::uint64_t>(size)) return v;

  // The range that ends the file: the whole temporary file must be the announced bytes. The
  // ranges before it were answered (and fsynced) before this one was sent.
  std::error_code ec;
  const auto have = fs::file_size(temp, ec);
  if (ec || have != static_cast<std::uint64_t>(size)) {
    fs::remove(temp, ec);
    return sdk::fail(ErrorCode::InvalidArgument,
                     "content sha256:" + hex + ": " + std::to_string(have) + " bytes arrived, not " +
                         std::to_string(size) + " as announced; nothing stored (send it again)",
                     "size");
  }
  MESH_TRY(got, file_sha256(temp));
  if (got != hex) {
    fs::remove(temp, ec);
    common::logger()->warn("content refused digest=sha256:{} operator={}: the bytes have sha256:{}", hex,
                           call.who.name, got);
    return sdk::fail(ErrorCode::PermissionDenied,
                     "the " + std::to_string(size) + " bytes sent have sha256:" + got + ", not sha256:" + hex +
                         " as announced; nothing stored",
                     "digest");
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    fs::remove(temp, ec);
    errno = err;
    return sdk::fail(io_error("rename " + temp + " to " + target));
  }
  if (auto ok = fsync_dir(options_.content_dir + "/sha256"); !ok) return sdk::fail(ok.error());
  common::logger()->info("content stored digest=sha256:{} bytes={} operator={}", hex, size, call.who.name);
  v.set("stored", true);
  return v;
}

void Service::on_content(const sdk::Message& m, const std::string& node, const Value& body) {
  Fields f(body);
  auto run = [&]() -> sdk::Result<sdk::Message> {
    MESH_TRY(hex, content_hex(f, "digest"));
    MESH_TRY(offset, f.integer("offset", 0, static_cast<std::int64_t>(kMaxContent)));
    MESH_TRY(length, f.integer("length", 1, static_cast<std::int64_t>(kMaxContent)));
    if (options_.content_dir.empty())
      return sdk::fail(ErrorCode::Unsupported, "this control plane has no content directory (control.toml: [content] dir)");
    Fd fd(::open(content_path(hex).c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0 && errno == ENOENT) {
      auto r = protocol::make_message(m.reply);
      r.set_header(protocol::kHeaderStatus, "none");
      r.set_header(protocol::kHeaderNode, node);
      return r;
    }
    if (fd.get() < 0) return sdk::fail(ErrorCode::Unavailable, "cannot open content sha256:" + hex + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return sdk::fail(ErrorCode::Unavailable, "cannot stat content sha256:" + hex);
    const auto total = static_cast<std::int64_t>(st.st_size);
    if (offset > total)
      return sdk::fail(f.error("offset", std::to_string(offset) + " is beyond the content's size of " +
                                             std::to_string(total) + " bytes"));
    // One message, with room for the headers: a range never goes in parts.
    const std::size_t limit = body_limit();
    const std::size_t cap = limit > 2 * kContentHeaderRoom ? limit - kContentHeaderRoom : limit / 2;
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::int64_t>({length, total - offset, static_cast<std::int64_t>(cap)}));
    std::string bytes(n, '\0');
    std::size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd.get(), bytes.data() + done, n - done, static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return sdk::fail(ErrorCode::Unavailable, "cannot read content sha256:" + hex);
      done += static_cast<std::size_t>(got);
    }
    auto r = protocol::ok_reply(m, std::move(bytes));
    r.set_header(protocol::kHeaderNode, node);
    r.set_header(protocol::kHeaderContentSize, std::to_string(total));
    return r;
  };
  auto r = run();
  if (!r) return refuse(m, r.error());
  if (m.reply.empty()) return;
  sign_reply_to(*r, m);
  reply(std::move(*r));
}

}  // namespace mesh::control::detail
