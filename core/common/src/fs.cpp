#include "mesh/common/fs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace mesh::common {
namespace {

sdk::Error sys_error(const std::string& what, const std::string& path, int err) {
  auto code = (err == EACCES || err == EPERM) ? sdk::ErrorCode::PermissionDenied
              : err == ENOENT                  ? sdk::ErrorCode::NotFound
                                               : sdk::ErrorCode::Failed;
  return sdk::Error{code, what + " " + path + ": " + std::strerror(err), {}};
}

// A file opened for reading (O_CLOEXEC) whose size, as fstat gave it, is within `max_bytes`;
// closed when destroyed. Errors: the open's and fstat's (named with `path`); InvalidArgument when
// the file is over the limit (nothing is read).
struct OpenedFile {
  int fd = -1;
  std::size_t size = 0;
  OpenedFile(int f, std::size_t n) : fd(f), size(n) {}
  OpenedFile(OpenedFile&& other) noexcept : fd(std::exchange(other.fd, -1)), size(other.size) {}
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;
  OpenedFile& operator=(OpenedFile&&) = delete;
  ~OpenedFile() {
    if (fd >= 0) ::close(fd);
  }
};
sdk::Result<OpenedFile> open_bounded(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sdk::fail(sys_error("open", path, errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return sdk::fail(sys_error("stat", path, err));
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return sdk::fail(sdk::ErrorCode::InvalidArgument,
                     path + " is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                         std::to_string(max_bytes) + " bytes");
  }
  return OpenedFile(fd, static_cast<std::size_t>(st.st_size));
}

// read(2) of at most `n` bytes into `buf`, asked again after EINTR; 0 at the end of the file.
// Errors: the read's, named with `path`.
sdk::Result<std::size_t> read_some(int fd, char* buf, std::size_t n, const std::string& path) {
  for (;;) {
    const ssize_t got = ::read(fd, buf, n);
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno != EINTR) return sdk::fail(sys_error("read", path, errno));
  }
}

sdk::Error over_the_limit(const std::string& path, std::size_t max_bytes) {
  return sdk::Error{sdk::ErrorCode::InvalidArgument,
                    path + " is over the limit of " + std::to_string(max_bytes) + " bytes", {}};
}

}  // namespace

sdk::Result<void> write_file_atomic(const std::string& path, std::string_view data, mode_t mode) {
  auto file = AtomicFileWriter::create(path, mode);
  if (!file) return sdk::fail(file.error());
  if (auto ok = file->write(data); !ok) return ok;
  return file->commit();
}

sdk::Result<AtomicFileWriter> AtomicFileWriter::create(const std::string& path, mode_t mode) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  AtomicFileWriter out;
  out.path_ = path;
  for (int attempt = 0; attempt < 8 && out.fd_ < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".%016llx.tmp", static_cast<unsigned long long>(rng()));
    out.tmp_ = path + suffix;
    out.fd_ = ::open(out.tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (out.fd_ < 0 && errno != EEXIST) return sdk::fail(sys_error("create", out.tmp_, errno));
  }
  if (out.fd_ < 0) return sdk::fail(sys_error("create", out.tmp_, EEXIST));
  if (::fchmod(out.fd_, mode) != 0) {
    const int err = errno;
    out.abandon();
    return sdk::fail(sys_error("chmod", out.tmp_, err));
  }
  return out;
}

sdk::Result<void> AtomicFileWriter::write(std::string_view data) {
  if (fd_ < 0) return sdk::fail(sdk::ErrorCode::Failed, "write " + tmp_ + ": not open");
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      abandon();
      return sdk::fail(sys_error("write", tmp_, err));
    }
    off += static_cast<std::size_t>(n);
  }
  return {};
}

sdk::Result<void> AtomicFileWriter::commit() {
  if (fd_ < 0) return sdk::fail(sdk::ErrorCode::Failed, "commit " + tmp_ + ": not open");
  if (::fsync(fd_) != 0) {
    const int err = errno;
    abandon();
    return sdk::fail(sys_error("fsync", tmp_, err));
  }
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    return sdk::fail(sys_error("close", tmp_, err));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    return sdk::fail(sys_error("rename onto", path_, err));
  }
  const auto slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return sdk::fail(sys_error("open directory", dir, errno));
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) return sdk::fail(sys_error("fsync directory", dir, err));
  return {};
}

void AtomicFileWriter::abandon() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)), tmp_(std::move(other.tmp_)), fd_(std::exchange(other.fd_, -1)) {}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    path_ = std::move(other.path_);
    tmp_ = std::move(other.tmp_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

sdk::Result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  MESH_TRY(opened, open_bounded(path, max_bytes));
  std::string out;
  // The size fstat gave, so a large file is one allocation of its size, not doublings up to 1.5×
  // it (a file that grows meanwhile still reads whole).
  out.reserve(opened.size);
  char buf[65536];
  for (;;) {
    MESH_TRY(n, read_some(opened.fd, buf, sizeof buf, path));
    if (n == 0) break;
    out.append(buf, n);
    if (out.size() > max_bytes) return sdk::fail(over_the_limit(path, max_bytes));
  }
  return out;
}

sdk::Result<PaddedText> read_file_padded(const std::string& path, std::size_t max_bytes) {
  MESH_TRY(opened, open_bounded(path, max_bytes));
  // One buffer of the size fstat gave (and the padding); a file that grows meanwhile is read
  // whole into a larger one.
  std::size_t capacity = opened.size;
  PaddedText out;
  out.data = std::make_unique<char[]>(capacity + PaddedText::kPadding);
  for (;;) {
    if (out.size == capacity) {
      // At the size fstat gave: one more read tells whether the file grew.
      char probe[65536];
      MESH_TRY(n, read_some(opened.fd, probe, sizeof probe, path));
      if (n == 0) break;
      const std::size_t grown = std::max(capacity * 2, capacity + n);
      auto bigger = std::make_unique<char[]>(grown + PaddedText::kPadding);
      std::memcpy(bigger.get(), out.data.get(), out.size);
      std::memcpy(bigger.get() + out.size, probe, n);
      out.data = std::move(bigger);
      out.size += n;
      capacity = grown;
    } else {
      MESH_TRY(n, read_some(opened.fd, out.data.get() + out.size, capacity - out.size, path));
      if (n == 0) break;
      out.size += n;
    }
    if (out.size > max_bytes) return sdk::fail(over_the_limit(path, max_bytes));
  }
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
