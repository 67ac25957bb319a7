#include "instance.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mesh/common/crypto.h"
#include "mesh/common/fs.h"

namespace mesh::control::detail {

KeysLock& KeysLock::operator=(KeysLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void KeysLock::release() noexcept {
  if (fd_ < 0) return;
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

sdk::Result<KeysLock> lock_keys_dir(const std::string& dir, const std::string& name) {
  const std::string path = (dir.empty() ? std::string(".") : dir) + "/" + name;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    return sdk::fail(err == EACCES ? sdk::ErrorCode::PermissionDenied : sdk::ErrorCode::Failed,
                     "cannot open " + path + ": " + std::strerror(err));
  }
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    return sdk::fail(sdk::ErrorCode::Failed, "cannot lock " + path + ": " + std::strerror(err));
  }
  return KeysLock(fd);
}

sdk::Result<KeysLock> lock_state_dir(const std::string& state_dir) {
  const std::string path = (state_dir.empty() ? std::string(".") : state_dir) + "/control.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    return sdk::fail(err == EACCES ? sdk::ErrorCode::PermissionDenied : sdk::ErrorCode::Failed,
                     "cannot open " + path + ": " + std::strerror(err));
  }
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      return sdk::fail(sdk::ErrorCode::Failed, "cannot lock " + path + ": " + std::strerror(err));
    }
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) pid = "unknown";
    return sdk::fail(sdk::ErrorCode::FailedPrecondition,
                     "state_dir " + state_dir + " is in use by another mesh-control (pid " + pid + ", holding " +
                         path + "): each instance needs a state_dir of its own ([control] state_dir; the instance id "
                         "in it names one instance), so this one does not start");
  }
  const std::string text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int err = errno;
    ::close(fd);
    return sdk::fail(sdk::ErrorCode::Failed, "cannot write " + path + ": " + std::strerror(err));
  }
  return KeysLock(fd);
}

sdk::Result<std::string> load_or_create_instance_id(const std::string& state_dir) {
  const std::string path = state_dir + "/instance.id";
  auto text = common::read_file(path, 4096);
  if (text) {
    std::string id = *text;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    bool ok = id.size() == 32;
    for (char c : id) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok)
      return sdk::fail(sdk::ErrorCode::InvalidArgument,
                       path + " is not an instance id (32 lower-case hex characters); remove it to make a new one");
    return id;
  }
  if (text.error().code != sdk::ErrorCode::NotFound) return sdk::fail(text.error());
  std::string id = common::to_hex(common::random_bytes(16));
  if (auto ok = common::write_file_atomic(path, id + "\n", 0600); !ok) return sdk::fail(ok.error());
  return id;
}

}  // namespace mesh::control::detail
