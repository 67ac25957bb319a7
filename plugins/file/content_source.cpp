// A file resource's content by digest (content_source.h, decision record 111).
#include "content_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mesh/support/sha256.h"

namespace mesh::plugins::file::content {

using sdk::ErrorCode;

sdk::Result<std::string> parse_source(const std::string& text) {
  bool ok = text.size() == 7 + 64 && text.rfind("sha256:", 0) == 0;
  for (std::size_t i = 7; ok && i < text.size(); ++i)
    ok = (text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f');
  if (!ok)
    return sdk::fail(ErrorCode::InvalidArgument, "must be \"sha256:\" and 64 lower-case hex characters (mesh content push FILE prints it)",
                     "properties.source");
  return text.substr(7);
}

std::string cache_path(const std::string& state_dir, const std::string& hex) {
  return state_dir + "/content/sha256/" + hex;
}

sdk::Result<std::string> load_verified(const std::string& state_dir, const std::string& hex) {
  const std::string path = cache_path(state_dir, hex);
  const std::string name = "content sha256:" + hex;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return sdk::fail(ErrorCode::FailedPrecondition,
                     name + " is not in this host's content cache (" + path +
                         "): mesh-host run fetches it from the control plane before an apply (put it there with "
                         "`mesh content push FILE`)",
                     "properties.source");
  if (fd < 0) return sdk::fail(ErrorCode::Failed, "open " + path + ": " + std::strerror(errno), "properties.source");
  std::string bytes;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) bytes.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return sdk::fail(ErrorCode::Failed, "read " + path + ": " + std::strerror(err), "properties.source");
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (const std::string got = support::sha256_hex(bytes); got != hex) {
    ::unlink(path.c_str());  // fetched again at the next apply
    return sdk::fail(ErrorCode::Failed,
                     name + " in this host's cache has sha256:" + got + ": removed, nothing written (fetched again at "
                            "the next apply)",
                     "properties.source");
  }
  return bytes;
}

}  // namespace mesh::plugins::file::content
