// Path safety for providers that act on the filesystem as root (decision record 23).
//
// A path is opened one component at a time from "/", each component relative to the directory
// descriptor of the one before it, with O_NOFOLLOW: a symbolic link anywhere on the path is
// refused, never followed, and whatever the caller does next (write, chown, rename, unlink,
// read) it does relative to the descriptor it got (the *at calls), so nothing can be swapped
// between the check and the use.
//
// On the way, each directory that contains the next component is judged like systemd-tmpfiles
// judges "unsafe path transitions": it must be owned by root, by the host's own user or by the
// declared owner, and not be writable by a group (other than root's) or by everyone unless it
// has the sticky bit. Whoever else could change such a directory could replace what lies below
// it. A declaration may accept that explicitly (the providers' `allow_untrusted_parents`).
//
// The host's denied roots (its own state directory, the control plane's, `[paths] deny` in
// host.toml) are refused lexically and, for directories that exist, by device and inode, so a
// bind mount or a second name of the same directory is refused too.
//
// Thread safety: the functions are reentrant; a DeniedRoots is read-only after construction.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::plugins::paths {

/// An owned file descriptor (closed on destruction). Move-only.
class Fd {
 public:
  explicit Fd(int fd = -1) noexcept : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  /// Closes and returns close(2)'s errno (0 on success): on NFS a write error may show only here.
  int close_checked() noexcept;
  void reset() noexcept;

 private:
  int fd_;
};

/// Why `p` is not an absolute, normalised path (no empty, "." or ".." component, no "//", no
/// trailing '/', no NUL, within PATH_MAX and NAME_MAX), or nullopt when it is one. `allow_root`
/// accepts "/" itself. Lexical only.
std::optional<std::string> path_problem(std::string_view p, bool allow_root);

/// True when `path` is `root` or lies below it (both absolute and normalised). Lexical.
bool within(std::string_view path, std::string_view root) noexcept;

/// The paths the host never lets a provider touch (anything at or below them).
class DeniedRoots {
 public:
  DeniedRoots() = default;
  /// Parses `list` (null or a list of strings, as a config schema's StringList): each must be an
  /// absolute, normalised path. Errors: InvalidArgument with path "<key>[i]".
  static sdk::Result<DeniedRoots> from_config(const sdk::Value* list, const std::string& key);

  bool empty() const noexcept { return roots_.empty(); }
  const std::vector<std::string>& roots() const noexcept { return roots_; }
  /// The denied root `path` lies in lexically, or nullptr.
  const std::string* lexical_match(std::string_view path) const noexcept;
  /// The denied root whose directory is the object `st` describes (same device and inode; each
  /// root is stat'ed now, following symbolic links as the host's configuration names it), or
  /// nullptr. Roots that do not exist match nothing.
  const std::string* inode_match(const struct stat& st) const noexcept;

 private:
  std::vector<std::string> roots_;
};

/// Who may control the directories on the way, besides root and the host's own user.
struct Trust {
  /// The declared owner of the managed object: trusted like root (a user's own home directory).
  std::optional<uid_t> owner;
  /// The declaration explicitly accepts directories others can change.
  bool allow_untrusted = false;
  /// false: only symbolic links and denied roots are refused (a read, or a prune, which know no
  /// declared owner; nothing is followed, so they reach only what lies in real directories).
  bool check_transitions = true;
  /// Added to an unsafe-transition refusal: how the declaration can accept it ("" = nothing).
  std::string opt_out_hint = "set the property allow_untrusted_parents to true to accept it";
};

/// A directory opened by open_dir(), or why it could not be.
struct OpenedDir {
  Fd fd;                 ///< O_RDONLY|O_DIRECTORY descriptor; valid only on success
  struct stat st {};     ///< of the opened directory
  int err = 0;           ///< errno of a component that could not be opened (ENOENT, ENOTDIR, EACCES...)
  std::string at;        ///< the path of the component where the walk stopped
  /// Set when the path was refused: a symbolic link, an unsafe transition or a denied root.
  /// PermissionDenied, with a message naming the component (and its owner or link target).
  std::optional<sdk::Error> refused;
  bool ok() const noexcept { return fd.valid(); }
};

/// Opens the absolute, normalised directory `dir` without following any symbolic link, judging
/// every directory on the way (including `dir` itself, which is taken to contain what the caller
/// manages) by `trust`, and refusing `denied` (each denied root is stat'ed once per call).
/// `what` names the managed object in messages ("file:/home/u/.ssh/authorized_keys").
/// `chain`, when not null, is cleared and, on success, filled with the stat of every directory
/// on the way, "/" first and `dir` itself last (what trusted_dir() can judge again later).
/// Never throws; errors are in the result.
OpenedDir open_dir(const std::string& dir, const Trust& trust, const DeniedRoots& denied,
                   const std::string& what, std::vector<struct stat>* chain = nullptr);

/// Whether open_dir() with `trust` accepts a directory whose stat is `st` as one on the way
/// (owner and write bits; always true when `trust` checks no transitions or allows untrusted
/// directories). Pure; thread-safe.
bool trusted_dir(const struct stat& st, const Trust& trust) noexcept;

/// Opens the absolute, normalised directory `dir` again in one openat2(2) call with
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS (O_RDONLY | O_DIRECTORY | O_CLOEXEC): the kernel
/// resolves the whole path and fails with ELOOP at a symbolic link anywhere on it, the last
/// component included. It judges no owners and no denied roots: it is for a caller that walked
/// `dir` with open_dir() before and compares what this returns with what that walk found
/// (device and inode). On success returns the descriptor and fills `*st` with its fstat; on
/// failure returns an invalid Fd and sets `*err` to the errno (ENOSYS or EPERM when openat2 is
/// not available here, e.g. a kernel before 5.6 or a seccomp filter: the caller walks instead).
/// Thread-safe.
Fd reopen_dir_without_links(const std::string& dir, struct stat* st, int* err) noexcept;

/// What a path names, checked like open_dir() checks its parent: every ancestor judged by
/// `trust`, no symbolic link anywhere (the object itself included), not in `denied`. With
/// `object_trusted`, the object itself must also be owned by root, the host's user or
/// `trust.owner` and not writable by a group or by everyone (a file another program reads as
/// root, such as an apt sources file). Returns the object's lstat, or nullopt when it does not
/// exist (ENOENT on the way or at the end). Errors: PermissionDenied for a refusal (message
/// names the component), Failed for other errors ("open /srv/x: Permission denied").
sdk::Result<std::optional<struct stat>> inspect(const std::string& path, const Trust& trust,
                                                const DeniedRoots& denied, const std::string& what,
                                                bool object_trusted = false);

/// "uid 64123" or "uid 1000 (alice)": for messages. Thread-safe.
std::string describe_uid(uid_t uid);

}  // namespace mesh::plugins::paths
