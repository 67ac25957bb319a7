#include "safe_path.h"

#include "mesh/support/errno_text.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace mesh::plugins::paths {
namespace {

using sdk::Error;
using sdk::ErrorCode;

using support::errno_text;

std::string group_name(gid_t gid) {
  group g{};
  group* out = nullptr;
  std::vector<char> buf(16384);
  if (getgrgid_r(gid, &g, buf.data(), buf.size(), &out) == 0 && out)
    return "gid " + std::to_string(gid) + " (" + out->gr_name + ")";
  return "gid " + std::to_string(gid);
}

bool trusted_uid(uid_t uid, const Trust& trust) {
  return uid == 0 || uid == ::geteuid() || (trust.owner && uid == *trust.owner);
}

// Why a directory (or, with object_trusted, a file) could be changed by someone other than root,
// the host's user and the declared owner; nullopt when it cannot. `as_dir`: the sticky bit
// protects entries owned by others (their owners are judged at the next component).
std::optional<std::string> untrusted(const struct stat& st, const Trust& trust, bool as_dir) {
  if (!trusted_uid(st.st_uid, trust))
    return "is owned by " + describe_uid(st.st_uid) + ", who is neither root nor the declared owner";
  const bool sticky = as_dir && (st.st_mode & S_ISVTX);
  if ((st.st_mode & S_IWOTH) && !sticky) return "is writable by everyone";
  if ((st.st_mode & S_IWGRP) && st.st_gid != 0 && !sticky)
    return "is writable by group " + group_name(st.st_gid);
  return std::nullopt;
}

Error refusal(const std::string& what, std::string message) {
  return Error{ErrorCode::PermissionDenied, "refusing " + what + ": " + std::move(message), {}};
}

Error symlink_refusal(int dir_fd, const std::string& name, const std::string& at,
                      const std::string& what) {
  char target[PATH_MAX];
  const ssize_t n = ::readlinkat(dir_fd, name.c_str(), target, sizeof target - 1);
  std::string m = at + " is a symbolic link";
  if (n >= 0) m += " (to " + std::string(target, static_cast<std::size_t>(n)) + ")";
  return refusal(what, m + "; symbolic links on a managed path are never followed: declare the "
                           "real path");
}

Error denied_refusal(const std::string& at, const std::string& root, const std::string& what) {
  return refusal(what, (at == root ? at : at + " (" + root + ")") +
                           " is denied by the host's path policy (its own state directory, the "
                           "control plane's, and [paths] deny in host.toml): nothing under it is "
                           "ever managed");
}

// The denied roots that exist, by device and inode, stat'ed once (following links, as
// DeniedRoots::inode_match does): one walk compares every directory on its way with these.
class RootIdentities {
 public:
  explicit RootIdentities(const DeniedRoots& denied) {
    ids_.reserve(denied.roots().size());
    for (const auto& r : denied.roots()) {
      struct stat rst {};
      if (::stat(r.c_str(), &rst) == 0) ids_.push_back(Id{rst.st_dev, rst.st_ino, &r});
    }
  }
  const std::string* match(const struct stat& st) const noexcept {
    for (const auto& id : ids_)
      if (id.dev == st.st_dev && id.ino == st.st_ino) return id.root;
    return nullptr;
  }

 private:
  struct Id {
    dev_t dev;
    ino_t ino;
    const std::string* root;
  };
  std::vector<Id> ids_;
};

std::string join(const std::string& dir, std::string_view name) {
  return (dir == "/" ? "/" : dir + "/") + std::string(name);
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

int Fd::close_checked() noexcept {
  const int rc = ::close(std::exchange(fd_, -1));
  return rc == 0 ? 0 : errno;
}

void Fd::reset() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

std::optional<std::string> path_problem(std::string_view p, bool allow_root) {
  if (p.empty()) return "the path is empty";
  if (p.find('\0') != std::string_view::npos) return "the path contains a NUL byte";
  if (p.size() >= PATH_MAX)
    return "the path is " + std::to_string(p.size()) + " bytes long; the limit is " +
           std::to_string(PATH_MAX - 1);
  const std::string quoted = "'" + std::string(p) + "'";
  if (p.front() != '/') return quoted + " is not an absolute path";
  if (p == "/") {
    if (allow_root) return std::nullopt;
    return "'/' is a directory, not a file";
  }
  if (p.back() == '/') return quoted + " ends with '/'";
  if (p.find("//") != std::string_view::npos) return quoted + " contains '//'";
  for (std::size_t start = 1; start <= p.size();) {
    std::size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    const std::string_view part = p.substr(start, end - start);
    if (part == "." || part == "..")
      return quoted + " contains a '" + std::string(part) + "' component";
    if (part.size() > NAME_MAX)
      return quoted + " has a component longer than " + std::to_string(NAME_MAX) + " bytes";
    start = end + 1;
  }
  return std::nullopt;
}

bool within(std::string_view path, std::string_view root) noexcept {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.substr(0, root.size()) == root &&
                          path[root.size()] == '/');
}

std::string describe_uid(uid_t uid) {
  passwd pw{};
  passwd* out = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) == 0 && out)
    return "uid " + std::to_string(uid) + " (" + out->pw_name + ")";
  return "uid " + std::to_string(uid);
}

sdk::Result<DeniedRoots> DeniedRoots::from_config(const sdk::Value* list, const std::string& key) {
  DeniedRoots d;
  if (!list || list->is_null()) return d;
  if (!list->is_array()) return sdk::fail(ErrorCode::InvalidArgument, "must be a list of strings", key);
  for (std::size_t i = 0; i < list->as_array().size(); ++i) {
    const sdk::Value& v = list->as_array()[i];
    const std::string where = key + "[" + std::to_string(i) + "]";
    if (!v.is_string()) return sdk::fail(ErrorCode::InvalidArgument, "must be a string", where);
    if (auto problem = path_problem(v.as_string(), /*allow_root=*/false))
      return sdk::fail(ErrorCode::InvalidArgument, *problem, where);
    d.roots_.push_back(v.as_string());
  }
  return d;
}

const std::string* DeniedRoots::lexical_match(std::string_view path) const noexcept {
  for (const auto& r : roots_)
    if (within(path, r)) return &r;
  return nullptr;
}

const std::string* DeniedRoots::inode_match(const struct stat& st) const noexcept {
  for (const auto& r : roots_) {
    struct stat rst {};
    if (::stat(r.c_str(), &rst) == 0 && rst.st_dev == st.st_dev && rst.st_ino == st.st_ino)
      return &r;
  }
  return nullptr;
}

bool trusted_dir(const struct stat& st, const Trust& trust) noexcept {
  if (!trust.check_transitions || trust.allow_untrusted) return true;
  try {
    return !untrusted(st, trust, /*as_dir=*/true);
  } catch (...) {  // the reason's text could not be made: judge it untrusted
    return false;
  }
}

Fd reopen_dir_without_links(const std::string& dir, struct stat* st, int* err) noexcept {
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, AT_FDCWD, dir.c_str(), &how, sizeof how);
  if (fd < 0) {
    *err = errno;
    return Fd();
  }
  Fd out(static_cast<int>(fd));
  if (::fstat(out.get(), st) != 0) {
    *err = errno;
    return Fd();
  }
  return out;
}

OpenedDir open_dir(const std::string& dir, const Trust& trust, const DeniedRoots& denied,
                   const std::string& what, std::vector<struct stat>* chain) {
  if (chain) chain->clear();
  OpenedDir o;
  if (const std::string* root = denied.lexical_match(dir)) {
    o.at = dir;
    o.refused = denied_refusal(dir, *root, what);
    return o;
  }
  std::vector<std::string> parts;
  for (std::size_t start = 1; start < dir.size();) {
    std::size_t end = dir.find('/', start);
    if (end == std::string::npos) end = dir.size();
    parts.emplace_back(dir.substr(start, end - start));
    start = end + 1;
  }
  // Intermediate directories are opened O_PATH (search permission is enough, as for a path
  // lookup); the last one for reading, because callers list it (temporary files) and fsync it.
  auto flags = [&](std::size_t i) {
    return (i == parts.size() ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  };
  // The denied roots' identities, taken once for the whole walk (not once per component).
  const RootIdentities roots(denied);
  std::string at = "/";
  Fd cur(::open("/", flags(0)));
  if (!cur.valid()) {
    o.err = errno;
    o.at = at;
    return o;
  }
  for (std::size_t i = 0;; ++i) {
    struct stat st {};
    if (::fstat(cur.get(), &st) != 0) {
      o.err = errno;
      o.at = at;
      return o;
    }
    if (!S_ISDIR(st.st_mode)) {  // O_PATH|O_NOFOLLOW may hand back the link itself
      o.at = at;
      o.err = ENOTDIR;
      return o;
    }
    if (const std::string* root = roots.match(st)) {
      o.at = at;
      o.refused = denied_refusal(at, *root, what);
      return o;
    }
    if (chain) chain->push_back(st);
    if (trust.check_transitions && !trust.allow_untrusted) {
      if (auto why = untrusted(st, trust, /*as_dir=*/true)) {
        o.at = at;
        std::string m = at + " " + *why + ", and could replace what lies below it (an unsafe "
                                          "path transition)";
        if (!trust.opt_out_hint.empty()) m += "; " + trust.opt_out_hint;
        o.refused = refusal(what, std::move(m));
        return o;
      }
    }
    if (i == parts.size()) {
      o.fd = std::move(cur);
      o.st = st;
      o.at = at;
      return o;
    }
    const std::string& name = parts[i];
    const std::string next = join(at, name);
    const int fd = ::openat(cur.get(), name.c_str(), flags(i + 1));
    if (fd < 0) {
      const int err = errno;
      struct stat lst {};
      if (::fstatat(cur.get(), name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
        o.at = next;
        o.refused = symlink_refusal(cur.get(), name, next, what);
        return o;
      }
      o.err = err;
      o.at = next;
      return o;
    }
    Fd opened(fd);
    struct stat lst {};
    if (::fstat(opened.get(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      o.at = next;
      o.refused = symlink_refusal(cur.get(), name, next, what);
      return o;
    }
    cur = std::move(opened);
    at = next;
  }
}

sdk::Result<std::optional<struct stat>> inspect(const std::string& path, const Trust& trust,
                                                const DeniedRoots& denied, const std::string& what,
                                                bool object_trusted) {
  if (auto problem = path_problem(path, /*allow_root=*/true))
    return sdk::fail(ErrorCode::InvalidArgument, *problem);
  if (const std::string* root = denied.lexical_match(path))
    return sdk::fail(denied_refusal(path, *root, what));
  if (path == "/") {
    struct stat st {};
    if (::lstat("/", &st) != 0) return sdk::fail(ErrorCode::Failed, "stat /: " + errno_text(errno));
    return std::optional<struct stat>(st);
  }
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  const std::string base = path.substr(slash + 1);
  OpenedDir parent = open_dir(dir, trust, denied, what);
  if (parent.refused) return sdk::fail(*parent.refused);
  if (!parent.ok()) {
    if (parent.err == ENOENT) return std::optional<struct stat>();
    return sdk::fail(parent.err == EACCES || parent.err == EPERM ? ErrorCode::PermissionDenied
                                                                  : ErrorCode::Failed,
                     "open " + parent.at + ": " + errno_text(parent.err) + " (on the way to " + path + ")");
  }
  struct stat st {};
  if (::fstatat(parent.fd.get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<struct stat>();
    return sdk::fail(ErrorCode::Failed, "lstat " + path + ": " + errno_text(errno));
  }
  if (S_ISLNK(st.st_mode)) return sdk::fail(symlink_refusal(parent.fd.get(), base, path, what));
  if (S_ISDIR(st.st_mode))
    if (const std::string* root = denied.inode_match(st)) return sdk::fail(denied_refusal(path, *root, what));
  if (object_trusted && !trust.allow_untrusted)
    if (auto why = untrusted(st, trust, /*as_dir=*/false))
      return sdk::fail(refusal(what, path + " " + *why + ", and could change what it says"));
  return std::optional<struct stat>(st);
}

}  // namespace mesh::plugins::paths
