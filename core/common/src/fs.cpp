#include "mesh/common/fs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace mesh::common {
namespace {

sdk::Error sys_error(const std::string& what, const std::string& path, int err) {
  auto code = (err == EACCES || err == EPERM) ? sdk::ErrorCode::PermissionDenied
              : err == ENOENT                  ? sdk::ErrorCode::NotFound
                                               : sdk::ErrorCode::Failed;
  return sdk::Error{code, what + " " + path + ": " + std::strerror(err), {}};
}

}  // namespace

sdk::Result<void> write_file_atomic(const std::string& path, std::string_view data, mode_t mode) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".%016llx.tmp", static_cast<unsigned long long>(rng()));
    tmp = path + suffix;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0 && errno != EEXIST) return sdk::fail(sys_error("create", tmp, errno));
  }
  if (fd < 0) return sdk::fail(sys_error("create", tmp, EEXIST));
  auto abort_with = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return sdk::fail(sys_error(what, tmp, err));
  };
  if (::fchmod(fd, mode) != 0) return abort_with("chmod", errno);
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return abort_with("write", errno);
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return abort_with("fsync", errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return sdk::fail(sys_error("close", tmp, err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return sdk::fail(sys_error("rename onto", path, err));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return sdk::fail(sys_error("open directory", dir, errno));
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) return sdk::fail(sys_error("fsync directory", dir, err));
  return {};
}

sdk::Result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sdk::fail(sys_error("open", path, errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return sdk::fail(sys_error("stat", path, err));
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     path + " is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                         std::to_string(max_bytes) + " bytes");
  }
  std::string out;
  // The size fstat gave, so a large file is one allocation of its size, not doublings up to 1.5×
  // it (a file that grows meanwhile still reads whole).
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return sdk::fail(sys_error("read", path, err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return sdk::fail(sdk::ErrorCode::InvalidArgument,
                       path + " is over the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  return out;
}

sdk::Result<PaddedText> read_file_padded(const std::string& path, std::size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sdk::fail(sys_error("open", path, errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return sdk::fail(sys_error("stat", path, err));
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     path + " is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                         std::to_string(max_bytes) + " bytes");
  }
  // One buffer of the size fstat gave (and the padding); a file that grows meanwhile is read
  // whole into a larger one.
  std::size_t capacity = static_cast<std::size_t>(st.st_size);
  PaddedText out;
  out.data = std::make_unique<char[]>(capacity + PaddedText::kPadding);
  for (;;) {
    if (out.size == capacity) {
      // At the size fstat gave: one more read tells whether the file grew.
      char probe[65536];
      ssize_t n = ::read(fd, probe, sizeof probe);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return sdk::fail(sys_error("read", path, err));
      }
      if (n == 0) break;
      const std::size_t grown = std::max(capacity * 2, capacity + static_cast<std::size_t>(n));
      auto bigger = std::make_unique<char[]>(grown + PaddedText::kPadding);
      std::memcpy(bigger.get(), out.data.get(), out.size);
      std::memcpy(bigger.get() + out.size, probe, static_cast<std::size_t>(n));
      out.data = std::move(bigger);
      out.size += static_cast<std::size_t>(n);
      capacity = grown;
    } else {
      ssize_t n = ::read(fd, out.data.get() + out.size, capacity - out.size);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return sdk::fail(sys_error("read", path, err));
      }
      if (n == 0) break;
      out.size += static_cast<std::size_t>(n);
    }
    if (out.size > max_bytes) {
      ::close(fd);
      return sdk::fail(sdk::ErrorCode::InvalidArgument,
                       path + " is over the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  return out;
}

sdk::Result<void> make_dirs(const std::string& path, mode_t mode) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return sdk::fail(sdk::ErrorCode::Failed, "create directory " + path + ": " + ec.message());
  (void)mode;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0777) != mode && st.st_uid == ::geteuid())
    ::chmod(path.c_str(), mode);
  return {};
}

}  // namespace mesh::common
