#include "file_provider.h"

#include "mesh/support/errno_text.h"
#include "mesh/support/sha256.h"
#include "content_source.h"
#include "safe_path.h"
#include "staged_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <mutex>
#include <memory>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mesh::plugins::file {
namespace {

using sdk::Error;
using sdk::ErrorCode;
using sdk::fail;
using sdk::Result;
using sdk::Value;

// A file created without a declared mode gets this, whatever the host's umask: the result must
// not depend on how the host process was started.
constexpr mode_t kDefaultMode = 0644;
// Permission bits plus setuid, setgid and sticky: everything chmod(2) accepts.
constexpr mode_t kModeBits = 07777;
constexpr std::size_t kReadChunkBytes = 64 * 1024;
// Temporary files are `.<name>.mesh-tmp-<random>` next to the target, so a crash leaves a
// recognisable dot-file rather than a half-written target.
constexpr std::string_view kTempMarker = ".mesh-tmp-";
constexpr std::size_t kTempRandomBytes = 6;
constexpr int kTempAttempts = 16;
// Largest numeric uid/gid accepted; (uid_t)-1 means "no change" to chown(2).
constexpr std::uint64_t kMaxNumericId = 4294967294ULL;

using support::errno_text;

// "open /etc/x: Permission denied", with the resource named in parentheses when the failing
// object is not the target itself (a temporary file, the parent directory).
Error sys_error(int err, const std::string& what, const std::string& context = {}) {
  const ErrorCode code =
      (err == EACCES || err == EPERM) ? ErrorCode::PermissionDenied : ErrorCode::Failed;
  std::string message = what + ": " + errno_text(err);
  if (!context.empty()) message += " (" + context + ")";
  return Error{code, std::move(message), {}};
}

using paths::Fd;
using paths::path_problem;
using paths::within;

// --- input rules --------------------------------------------------------------------------------

// Offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or nullopt.
std::optional<std::size_t> invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (s.size() - i < len) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const bool overlong =
        (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

// Standard base64 (RFC 4648 §4, padded). Line breaks and spaces are skipped because `base64(1)`
// wraps its output at 76 columns and people paste that.
std::optional<std::string> decode_base64(const std::string& text) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  std::size_t out_len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), " \t\r\n", &out_len, &end,
                        sodium_base64_VARIANT_ORIGINAL) != 0)
    return std::nullopt;
  if (end != text.data() + text.size()) return std::nullopt;
  out.resize(out_len);
  return out;
}

using support::sha256_hex;

// "0644", "644", "4755": three or four octal digits. Five digits ("12345") would need bits above
// 07777, which are file-type bits, not permissions.
std::optional<mode_t> parse_mode(std::string_view s) {
  if (s.size() < 3 || s.size() > 4) return std::nullopt;
  mode_t mode = 0;
  for (char c : s) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<mode_t>(c - '0');
  }
  return mode;
}

std::string format_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & kModeBits));
  return buf;
}

std::optional<std::uint32_t> parse_numeric_id(std::string_view s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > kMaxNumericId) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

// The passwd and group databases differ only in names; these traits let one lookup serve both.
struct UserDb {
  using Entry = passwd;
  using Id = uid_t;
  static constexpr const char* kWhat = "user";
  static constexpr int kSizeHint = _SC_GETPW_R_SIZE_MAX;
  static int by_name(const char* n, Entry* e, char* b, std::size_t l, Entry** r) {
    return getpwnam_r(n, e, b, l, r);
  }
  static int by_id(Id id, Entry* e, char* b, std::size_t l, Entry** r) {
    return getpwuid_r(id, e, b, l, r);
  }
  static Id id_of(const Entry& e) { return e.pw_uid; }
  static const char* name_of(const Entry& e) { return e.pw_name; }
};

struct GroupDb {
  using Entry = group;
  using Id = gid_t;
  static constexpr const char* kWhat = "group";
  static constexpr int kSizeHint = _SC_GETGR_R_SIZE_MAX;
  static int by_name(const char* n, Entry* e, char* b, std::size_t l, Entry** r) {
    return getgrnam_r(n, e, b, l, r);
  }
  static int by_id(Id id, Entry* e, char* b, std::size_t l, Entry** r) {
    return getgrgid_r(id, e, b, l, r);
  }
  static Id id_of(const Entry& e) { return e.gr_gid; }
  static const char* name_of(const Entry& e) { return e.gr_name; }
};

// Calls a *_r lookup, growing the buffer on ERANGE (groups with many members need more than the
// sysconf hint). Returns the lookup's error number; `*result` is null when nothing was found.
template <class Db, class Key>
int lookup(Key key, typename Db::Entry* entry, std::vector<char>& buf,
           typename Db::Entry** result) {
  long hint = sysconf(Db::kSizeHint);
  buf.resize(hint > 0 ? static_cast<std::size_t>(hint) : 16384);
  for (;;) {
    int rc = 0;
    if constexpr (std::is_same_v<Key, const char*>)
      rc = Db::by_name(key, entry, buf.data(), buf.size(), result);
    else
      rc = Db::by_id(key, entry, buf.data(), buf.size(), result);
    if (rc != ERANGE || buf.size() >= (1u << 20)) return rc;
    buf.resize(buf.size() * 2);
  }
}

// getpwnam_r(3): "not found" may be reported as 0, ENOENT, ESRCH, EBADF or EPERM depending on the
// NSS module; anything else means the lookup itself failed (LDAP down, ...).
bool means_not_found(int rc) {
  return rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM;
}

template <class Db>
Result<typename Db::Id> resolve(const std::string& name, const std::string& path) {
  if (name.empty()) return fail(ErrorCode::InvalidArgument, "is empty", path);
  if (auto numeric = parse_numeric_id(name)) return static_cast<typename Db::Id>(*numeric);
  if (name.find('\0') != std::string::npos)
    return fail(ErrorCode::InvalidArgument, std::string(Db::kWhat) + " name contains a NUL byte",
                path);
  typename Db::Entry entry{};
  typename Db::Entry* result = nullptr;
  std::vector<char> buf;
  const int rc = lookup<Db>(name.c_str(), &entry, buf, &result);
  if (result) return Db::id_of(entry);
  if (means_not_found(rc))
    return fail(ErrorCode::InvalidArgument, "unknown " + std::string(Db::kWhat) + " '" + name + "'",
                path);
  return fail(ErrorCode::Unavailable,
              "cannot look up " + std::string(Db::kWhat) + " '" + name + "': " + errno_text(rc),
              path);
}

// The name for an id, or the number as a string when the database has no entry for it. Every
// read of a file asks this twice (owner, group); a drift scan of 1,000 files would make 2,000
// NSS lookups (each reading /etc/passwd or asking sssd/LDAP). Answers are kept for
// kNameCacheTtl, so a renamed user shows under its new name within that time. Thread-safe.
constexpr auto kNameCacheTtl = std::chrono::seconds(5);

template <class Db>
std::string name_for(typename Db::Id id) {
  struct Cached {
    std::string name;
    std::chrono::steady_clock::time_point at;
  };
  static std::mutex mu;
  static std::unordered_map<typename Db::Id, Cached> cache;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(id); it != cache.end() && now - it->second.at < kNameCacheTtl) return it->second.name;
  }
  typename Db::Entry entry{};
  typename Db::Entry* result = nullptr;
  std::vector<char> buf;
  lookup<Db>(id, &entry, buf, &result);
  std::string name = result ? std::string(Db::name_of(entry)) : std::to_string(id);
  std::lock_guard lock(mu);
  if (cache.size() >= 4096) cache.clear();  // bounded: ids seen on one host are few
  cache[id] = Cached{name, now};
  return name;
}

// A declaration, parsed and checked.
struct Desired {
  bool absent = false;
  std::optional<std::string> content;  // bytes to write (decoded when given as base64)
  std::string content_key;             // "content", "content_base64" or "source"
  std::optional<std::string> source;   // the hex of source = "sha256:<hex>" (content_source.h)
  std::optional<mode_t> mode;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  bool allow_untrusted = false;  // allow_untrusted_parents
};

Result<const std::string*> string_property(const Value& props, const char* key) {
  const Value* v = props.find(key);
  if (!v || v->is_null()) return nullptr;
  if (!v->is_string())
    return fail(ErrorCode::InvalidArgument, "must be a string", std::string("properties.") + key);
  return &v->as_string();
}

Result<Desired> parse_desired(const Value& props) {
  Desired d;
  if (!props.is_null() && !props.is_object())
    return fail(ErrorCode::InvalidArgument, "must be an object", "properties");

  auto ensure = string_property(props, "ensure");
  if (!ensure) return fail(ensure.error());
  if (*ensure) {
    if (**ensure == "absent")
      d.absent = true;
    else if (**ensure != "present")
      return fail(ErrorCode::InvalidArgument, "'" + **ensure + "' is not one of: present, absent",
                  "properties.ensure");
  }
  if (const Value* allow = props.find("allow_untrusted_parents"); allow && !allow->is_null()) {
    if (!allow->is_bool())
      return fail(ErrorCode::InvalidArgument, "must be a bool", "properties.allow_untrusted_parents");
    d.allow_untrusted = allow->as_bool();
  }

  auto content = string_property(props, "content");
  if (!content) return fail(content.error());
  auto content_b64 = string_property(props, "content_base64");
  if (!content_b64) return fail(content_b64.error());
  if (*content && *content_b64)
    return fail(ErrorCode::InvalidArgument, "cannot be given together with 'content'",
                "properties.content_base64");
  if (*content) {
    if (auto at = invalid_utf8_at(**content))
      return fail(ErrorCode::InvalidArgument,
                  "is not valid UTF-8 (at byte " + std::to_string(*at) +
                      "); use content_base64 for binary data",
                  "properties.content");
    d.content = **content;
    d.content_key = "content";
  } else if (*content_b64) {
    auto bytes = decode_base64(**content_b64);
    if (!bytes)
      return fail(ErrorCode::InvalidArgument,
                  "is not valid base64 (RFC 4648 standard alphabet, with '=' padding)",
                  "properties.content_base64");
    d.content = std::move(*bytes);
    d.content_key = "content_base64";
  }

  auto source = string_property(props, "source");
  if (!source) return fail(source.error());
  if (*source && (*content || *content_b64))
    return fail(ErrorCode::InvalidArgument, "cannot be given together with 'content' or 'content_base64'",
                "properties.source");
  if (*source) {
    auto hex = content::parse_source(**source);
    if (!hex) return fail(hex.error());
    d.source = std::move(*hex);
    d.content_key = "source";
  }

  auto mode = string_property(props, "mode");
  if (!mode) return fail(mode.error());
  if (*mode) {
    d.mode = parse_mode(**mode);
    if (!d.mode)
      return fail(ErrorCode::InvalidArgument,
                  "'" + **mode + "' is not an octal mode of 3 or 4 digits such as \"0644\"",
                  "properties.mode");
  }

  auto owner = string_property(props, "owner");
  if (!owner) return fail(owner.error());
  if (*owner) {
    auto uid = resolve<UserDb>(**owner, "properties.owner");
    if (!uid) return fail(uid.error());
    d.uid = *uid;
  }
  auto grp = string_property(props, "group");
  if (!grp) return fail(grp.error());
  if (*grp) {
    auto gid = resolve<GroupDb>(**grp, "properties.group");
    if (!gid) return fail(gid.error());
    d.gid = *gid;
  }
  return d;
}

// --- the filesystem -----------------------------------------------------------------------------


// Who may control the directories above a file: root, the host's user and the declared owner
// (a user's own home directory), unless the declaration accepts more. Without a declaration
// (read, prune) only symbolic links and denied roots are refused.
paths::Trust trust_for(const Desired* d) {
  paths::Trust t;
  if (!d) {
    t.check_transitions = false;
    return t;
  }
  if (d->uid) t.owner = *d->uid;
  t.allow_untrusted = d->allow_untrusted;
  return t;
}

// The parent directory, reached from "/" without following a symbolic link (safe_path.h):
// everything done to the file afterwards is relative to this descriptor. `chain`: as open_dir's.
Parent walk_parent(const std::string& path, const paths::Trust& trust, const paths::DeniedRoots& denied,
                   std::vector<struct stat>* chain) {
  Parent p;
  const std::size_t slash = path.rfind('/');
  p.dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  p.base = path.substr(slash + 1);
  paths::OpenedDir opened = paths::open_dir(p.dir, trust, denied, "file:" + path, chain);
  if (opened.refused) {
    p.refused = std::move(opened.refused);
    p.open_errno = EACCES;
  } else if (!opened.ok()) {
    p.open_errno = opened.err;
  } else {
    p.fd = SharedFd(std::make_shared<Fd>(std::move(opened.fd)));
    p.dev = opened.st.st_dev;
    p.ino = opened.st.st_ino;
  }
  return p;
}

Error parent_error(const Parent& p, const std::string& path) {
  if (p.refused) return *p.refused;
  if (p.open_errno == ENOENT)
    return Error{ErrorCode::Failed,
                 "parent directory " + p.dir + " of " + path +
                     " does not exist (it is not created; declare it first)",
                 {}};
  return sys_error(p.open_errno, "open " + p.dir, "parent directory of " + path);
}

// Symbolic links are refused rather than followed or replaced: following one lets whoever can
// write the link's directory redirect a root-owned write; replacing one silently undoes someone's
// deliberate setup. Either way the operator has to decide.
Error refuse_non_regular(const struct stat& st, const std::string& path, int dir_fd,
                         const std::string& base) {
  std::string what;
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    const ssize_t n = readlinkat(dir_fd, base.c_str(), target, sizeof target - 1);
    what = "it is a symbolic link";
    if (n >= 0) what += " (to " + std::string(target, static_cast<std::size_t>(n)) + ")";
    what +=
        "; symbolic links are never followed or replaced: remove the link or declare the "
        "path it points to";
  } else if (S_ISDIR(st.st_mode)) {
    what = "it is a directory";
  } else if (S_ISFIFO(st.st_mode)) {
    what = "it is a FIFO, not a regular file";
  } else if (S_ISSOCK(st.st_mode)) {
    what = "it is a socket, not a regular file";
  } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    what = "it is a device node, not a regular file";
  } else {
    what = "it is not a regular file";
  }
  return Error{ErrorCode::Failed, "refusing to manage " + path + ": " + what, {}};
}

sdk::State make_state(const struct stat& st, std::string sha256, std::int64_t size) {
  sdk::State state;
  state.properties.set("ensure", "present");
  state.properties.set("sha256", std::move(sha256));
  state.properties.set("size", size);
  state.properties.set("mode", format_mode(st.st_mode));
  state.properties.set("owner", name_for<UserDb>(st.st_uid));
  state.properties.set("group", name_for<GroupDb>(st.st_gid));
  state.properties.set("uid", static_cast<std::int64_t>(st.st_uid));
  state.properties.set("gid", static_cast<std::int64_t>(st.st_gid));
  return state;
}

// What a regular file looks like, from an open descriptor (so the object hashed is the object
// stat'ed, whatever happens to the name meanwhile). `known`: the fstat of `fd` the caller just
// made, or null to make one here.
Result<sdk::State> observe_fd(int fd, const std::string& path, const struct stat* known = nullptr) {
  struct stat st {};
  if (known) {
    st = *known;
  } else if (::fstat(fd, &st) != 0) {
    return fail(sys_error(errno, "fstat " + path));
  }
  support::Sha256 hash;
  // Not zero-filled: a 64 KiB memset per file read was a tenth of a drift scan's CPU. Small
  // files (most managed files) are read into the stack.
  unsigned char small[4096];
  std::unique_ptr<unsigned char[]> large;
  unsigned char* buf = small;
  std::size_t chunk = sizeof small;
  if (st.st_size >= static_cast<off_t>(sizeof small)) {
    large = std::make_unique_for_overwrite<unsigned char[]>(kReadChunkBytes);
    buf = large.get();
    chunk = kReadChunkBytes;
  }
  std::int64_t size = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sys_error(errno, "read " + path));
    }
    if (n == 0) break;
    hash.update(buf, static_cast<std::size_t>(n));
    size += n;
    // A short read that brings the total to the size fstat gave is the end of a regular file:
    // the read that would return 0 is skipped (one system call per file of a scan). A file that
    // grew since the fstat reads on.
    if (static_cast<std::size_t>(n) < chunk && size == st.st_size) break;
  }
  return make_state(st, hash.hex_digest(), size);
}

Result<void> write_all(int fd, std::string_view data, const std::string& what,
                       const std::string& context) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(sys_error(errno, what, context));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}


// ".<name>.mesh-tmp-": what every temporary file of this target starts with. The name is cut so
// that the whole stays within NAME_MAX however long the target's name is.
std::string temp_stem(const Parent& parent) {
  const std::size_t room = NAME_MAX - 1 - kTempMarker.size() - kTempRandomBytes * 2;
  return "." + parent.base.substr(0, std::min(parent.base.size(), room)) + std::string(kTempMarker);
}

// `random(out, n)` fills out[0..n) with random bytes (FileProvider::random_bytes).
template <class Random>
Result<TempFile> create_temp(const Parent& parent, const std::string& path, Random&& random) {
  const std::string stem = temp_stem(parent);
  const std::string dir_prefix = parent.dir == "/" ? "/" : parent.dir + "/";
  int last_errno = EEXIST;
  for (int attempt = 0; attempt < kTempAttempts; ++attempt) {
    unsigned char bytes[kTempRandomBytes];
    random(bytes, sizeof bytes);
    char hex[kTempRandomBytes * 2 + 1];
    sodium_bin2hex(hex, sizeof hex, bytes, sizeof bytes);
    std::string name = stem + hex;
    Fd fd(::openat(parent.fd.get(), name.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.valid()) {
      // Locked while it exists (TempFile): another process's sweep of this directory leaves it.
      Fd lock;
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) lock = Fd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
      return TempFile(parent.fd.get(), name, dir_prefix + name, std::move(fd), std::move(lock));
    }
    last_errno = errno;
    if (last_errno != EEXIST) break;
  }
  return fail(sys_error(last_errno, "create temporary file in " + parent.dir, "for " + path));
}

Error cancelled(const std::string& what, const std::string& path) {
  return Error{ErrorCode::Cancelled, "cancelled before " + what + " " + path, {}};
}

}  // namespace

bool has_content_change(const sdk::Plan& plan) {
  for (const auto& c : plan.changes)
    if (c.path == "properties.content" || c.path == "properties.content_base64" || c.path == "properties.source")
      return true;
  return false;
}

std::string change_list(const sdk::Plan& plan) {
  std::string out;
  for (const auto& c : plan.changes) {
    std::string_view p = c.path;
    if (p.substr(0, 11) == "properties.") p.remove_prefix(11);
    out += (out.empty() ? "" : ",") + std::string(p);
  }
  return out.empty() ? "none" : out;
}


// --- stale temporary files ----------------------------------------------------------------------

namespace detail {

bool is_temp_name(std::string_view name) {
  // "." + at least one character of a target's name + ".mesh-tmp-" + 12 lower-case hex digits.
  const std::size_t tail = kTempMarker.size() + kTempRandomBytes * 2;
  if (name.size() < 2 + tail || name.front() != '.') return false;
  const std::string_view marker = name.substr(name.size() - tail, kTempMarker.size());
  const std::string_view random = name.substr(name.size() - kTempRandomBytes * 2);
  return marker == kTempMarker &&
         std::all_of(random.begin(), random.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool sweep_stale_temps(int dir_fd, const std::string& dir, const std::string& keep,
                       sdk::Logger* log, const std::string& path) {
  const int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return false;
  DIR* d = ::fdopendir(dup_fd);
  if (!d) {
    ::close(dup_fd);
    return false;
  }
  std::vector<std::string> stale;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    // DT_UNKNOWN (some filesystems) is settled by the fstatat below.
    if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN) continue;
    if (name != keep && is_temp_name(name)) stale.emplace_back(name);
  }
  const bool read_whole = errno == 0;
  ::closedir(d);  // closes dup_fd
  const std::string prefix = dir == "/" ? "/" : dir + "/";
  for (const auto& name : stale) {
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    // A live write's temporary file is flock'ed by its writer (create_temp): another mesh-host
    // writing into this directory now. Left to it; only an unlocked one is stale. (O_NONBLOCK: the
    // name may have become a FIFO since the fstatat.)
    Fd probe(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (probe.valid() && ::flock(probe.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) continue;
    const bool removed = ::unlinkat(dir_fd, name.c_str(), 0) == 0;
    const int err = errno;
    if (log)
      log->log(removed ? sdk::LogLevel::Info : sdk::LogLevel::Warn,
               "resource=file:" + path + " stale temporary file " + prefix + name +
                   (removed ? " removed (left by an interrupted write)"
                            : " could not be removed: " + errno_text(err) +
                                  " (not retried by this process)"));
  }
  return read_whole;
}

}  // namespace detail

// Stale temporary files are what a write interrupted between creating its temporary file and
// renaming it leaves behind. Each directory is swept once per provider instance (one per
// process: mesh-host loads its providers once), at the first successful write into it, and that
// one pass removes the stale temporary files of every target in the directory (O(N) directory
// reads for N writes into one directory, where a sweep per write was O(N^2)). Once is enough:
//   - a temporary file is left only when its write never reached the rename or its own unlink,
//     i.e. the process was killed or crashed; the next one is a new process, with an empty set,
//     whose first write into the directory removes it;
//   - a write that fails in a live process removes its own temporary file: every return of
//     write_file() before the rename destroys the TempFile, whose destructor unlinks it unless
//     commit() ran, and commit() runs only after the rename succeeded (a cancelled write, a full
//     disk, a failed chown, chmod, fsync, close or rename alike);
//   - the host's apply lock (engine/state.h, StateDir::lock) keeps one apply at a time per host,
//     and the engine calls a provider from one thread at a time (sdk/provider.h), so no other
//     write of this host is in flight when the sweep runs: the only temporary file of ours that
//     can exist is the current write's, which is skipped by name (`keep`; by then it has been
//     renamed to the target anyway).
// What is not covered: a temporary file created after the sweep by a process that is then
// killed stays until the next process's first write into that directory (a stale temporary file
// takes disk space and nothing else: it is never read, and a dot-file); an entry that could not
// be removed is logged once and left. The directory is marked swept only when the whole of it
// was read, so a sweep that could not open or finish reading the directory is tried again at
// the next write.
//
// No mutex: the engine's one-thread-at-a-time contract is what makes the sweep safe at all (a
// concurrent write into the same directory would have a temporary file the sweep could remove),
// so a lock around the set alone would protect nothing that matters.
//
// Memory: one (st_dev, st_ino) pair per directory written into, at most kMaxSweptDirs of them
// (16 bytes each, ~56 with the hash node and bucket: under 1 MiB); when the set is full it is
// emptied, which only means that each directory written into afterwards is swept once more.
void FileProvider::sweep_stale_temps_once(int dir_fd, dev_t dev, ino_t ino, const std::string& dir,
                                          const std::string& keep, const std::string& path) {
  const DirKey key{dev, ino};
  if (swept_dirs_.contains(key)) return;
  if (!detail::sweep_stale_temps(dir_fd, dir, keep, host().logger, path)) return;
  if (swept_dirs_.size() >= kMaxSweptDirs) swept_dirs_.clear();
  swept_dirs_.insert(key);
}

// --- the walk cache ------------------------------------------------------------------------------

// Every operation on a file starts from its parent directory, reached from "/" without following a
// link and judged (decision 23). A first apply of N files in one directory made that walk three
// times per file (read, write, read-back): ~5 openat and ~25 stats each for a path five deep,
// most of the system calls of the apply. So a walk is kept (decision 150), and an operation in the
// same directory within kWalkTtl is checked, instead of walked again, by:
//   - openat2(dir, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS): the kernel resolves the whole
//     declared path now and fails at a symbolic link anywhere on it (reopen_dir_without_links);
//   - the fstat of what it opened: the same device and inode as the walk found (a directory
//     replaced, moved away or re-created since is another inode, and is walked again), and its
//     owner and mode judged now by the operation's Trust (it contains the managed file);
//   - the directories above it judged by the operation's Trust from the stats the walk took
//     (no system call); one that fails is walked again, which gives the refusal its message.
// Anything else sends the operation to a full walk, whose result replaces the entry. What the
// check does not see again within kWalkTtl: a change of owner or mode of a directory *above* the
// parent (the parent's own is seen), and a denied root that becomes one of those directories.
// Neither can redirect the operation: whoever could replace something below such a directory can
// only do it by changing the parent's identity or putting a link on the path, and both are
// checked at every operation; and what the operation does is still relative to the descriptor
// it checked, as before. A batch's staged writes hold their parent's descriptor until the batch
// ends, as they did; a plan of the same batch in the same directory shares it (WalkedDir::open).
// No descriptor is kept between operations, so the cache never keeps a filesystem busy.
// Memory: one entry per directory (its path, and a stat per directory above it), at most
// kMaxWalkedDirs; a full table is emptied.
Parent FileProvider::open_parent(const std::string& path, const paths::Trust& trust) {
  const std::size_t slash = path.rfind('/');
  const auto now = std::chrono::steady_clock::now();
  Parent p;
  p.dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  p.base = path.substr(slash + 1);
  if (auto it = walked_.find(p.dir); it != walked_.end()) {
    WalkedDir& w = it->second;
    const bool above_ok = now - w.walked < kWalkTtl &&
                          std::all_of(w.above.begin(), w.above.end(),
                                      [&](const struct stat& st) { return paths::trusted_dir(st, trust); });
    if (above_ok) {
      if (std::shared_ptr<Fd> held = w.open.lock(); held && paths::trusted_dir(w.self, trust)) {
        p.fd = SharedFd(std::move(held));  // a plan of the same batch, an instant ago
        p.dev = w.dev;
        p.ino = w.ino;
        return p;
      }
      if (reopen_works_) {
        struct stat st {};
        int err = 0;
        Fd fd = paths::reopen_dir_without_links(p.dir, &st, &err);
        if (fd.valid() && st.st_dev == w.dev && st.st_ino == w.ino && paths::trusted_dir(st, trust)) {
          auto shared = std::make_shared<Fd>(std::move(fd));
          w.self = st;
          w.open = shared;
          p.fd = SharedFd(std::move(shared));
          p.dev = w.dev;
          p.ino = w.ino;
          return p;
        }
        if (!fd.valid() && (err == ENOSYS || err == EPERM || err == EINVAL || err == E2BIG)) reopen_works_ = false;
      }
    }
    walked_.erase(it);
  }
  std::vector<struct stat> chain;
  p = walk_parent(path, trust, denied_, &chain);
  if (!p.fd.valid()) return p;
  if (auto ok = check_resolved_parent(p.fd.get(), p.dir); !ok) {
    Parent refused;
    refused.dir = std::move(p.dir);
    refused.base = std::move(p.base);
    refused.refused = ok.error();
    refused.open_errno = EACCES;
    return refused;
  }
  if (chain.empty()) return p;  // cannot happen: the walk's last stat is the directory itself
  if (walked_.size() >= kMaxWalkedDirs) walked_.clear();
  WalkedDir w;
  w.dev = p.dev;
  w.ino = p.ino;
  w.self = chain.back();
  chain.pop_back();
  w.above = std::move(chain);
  w.walked = now;
  w.open = p.fd.shared();
  walked_.insert_or_assign(p.dir, std::move(w));
  return p;
}

void FileProvider::random_bytes(unsigned char* out, std::size_t n) {
  constexpr std::size_t kPool = 4096;
  if (random_pool_.size() - random_used_ < n) {
    random_pool_.resize(std::max(kPool, n));
    randombytes_buf(random_pool_.data(), random_pool_.size());
    random_used_ = 0;
  }
  std::memcpy(out, random_pool_.data() + random_used_, n);
  random_used_ += n;
}

// --- FileProvider -------------------------------------------------------------------------------

FileProvider::FileProvider(const sdk::HostContext& host) : sdk::Provider(host) {
  // sodium_init is idempotent and thread-safe; it seeds randombytes for temporary file names.
  if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised");
}

const sdk::Schema& FileProvider::schema() const noexcept {
  static const sdk::Schema kSchema{
      "file",
      "A regular file, named by its absolute path (file:/etc/motd). Written atomically through a "
      "temporary file in the same directory; symbolic links and directories at the path are "
      "refused, and so is a symbolic link or an unsafe path transition above it; the parent "
      "directory must exist.",
      {
          {"content", sdk::ValueType::String, false,
           "The file's content as UTF-8 text. Not with content_base64. When neither is given "
           "the content is not managed (a new file is created empty)."},
          {"content_base64", sdk::ValueType::String, false,
           "The file's content as standard base64 (RFC 4648, padded; line breaks ignored), for "
           "binary data. Not with content."},
          {"source", sdk::ValueType::String, false,
           "The file's content by digest, \"sha256:<64 hex>\" (what `mesh content push FILE` "
           "prints): mesh-host fetches it from the control plane and checks it against the "
           "digest before writing. Not with content or content_base64."},
          {"mode", sdk::ValueType::String, false,
           "Permission bits as 3 or 4 octal digits (\"0644\", \"644\", \"4755\"); setuid, setgid "
           "and sticky allowed. When absent an existing file keeps its mode and a new one gets "
           "0644."},
          {"owner", sdk::ValueType::String, false,
           "Owning user, a name or a numeric uid. When absent an existing file keeps its owner "
           "and a new one belongs to the host's user."},
          {"group", sdk::ValueType::String, false,
           "Owning group, a name or a numeric gid. When absent an existing file keeps its group "
           "and a new one gets the host's group."},
          {"ensure",
           sdk::ValueType::String,
           false,
           "present: the file exists; absent: it is removed (a directory or symbolic link at the "
           "path is refused, not removed).",
           {"present", "absent"},
           Value("present")},
          {"allow_untrusted_parents", sdk::ValueType::Bool, false,
           "true: manage the file even when a directory above it can be changed by a user other "
           "than root, the host's user and the declared owner (owned by another user, or "
           "writable by a group or by everyone without the sticky bit), which could then "
           "replace what lies below it. Symbolic links on the path are refused either way.",
           {},
           Value(false)},
      },
      {{"content", "content_base64", "source"}},
      sdk::IdFormat::AbsolutePath};
  return kSchema;
}

const sdk::Schema& FileProvider::config_schema() const noexcept {
  static const sdk::Schema kConfig{
      "file",
      "Configuration of the file provider.",
      {
          {"allowed_roots", sdk::ValueType::StringList, false,
           "Absolute directories; when set, only files under them may be managed (checked "
           "lexically at validate and through symbolic links at apply). When absent every path "
           "is allowed."},
          {"denied_roots", sdk::ValueType::StringList, false,
           "Absolute paths nothing under which is managed. mesh-host adds its path policy here "
           "(its state directory, its config file, the control plane's state directory and "
           "files, [paths] deny); entries given here are kept as well."},
          {"max_batch", sdk::ValueType::Int, false,
           "The most independent file resources applied as one batch, whose new contents are made "
           "durable with one syncfs and whose directories are synced once (decision 0106); 1 "
           "applies each file on its own (an fsync of the file and one of its directory each).",
           {}, sdk::Value(std::int64_t{256}), 1.0, 256.0},
      }};
  return kConfig;
}

sdk::Result<void> FileProvider::do_configure(const sdk::Value& config) {
  const Value object = config.is_null() ? Value::object() : config;
  if (auto ok = sdk::validate_against(config_schema(), object, ""); !ok) return fail(ok.error());
  auto denied = paths::DeniedRoots::from_config(object.find("denied_roots"), "denied_roots");
  if (!denied) return fail(denied.error());
  denied_ = std::move(*denied);
  if (const Value* batch = object.find("max_batch"); batch && batch->is_int())
    max_batch_ = static_cast<std::uint32_t>(batch->as_int());
  else
    max_batch_ = kMaxBatch;
  allowed_roots_.clear();
  const Value* roots = object.find("allowed_roots");
  if (!roots || roots->is_null()) return {};
  if (roots->as_array().empty())
    return fail(ErrorCode::InvalidArgument,
                "must name at least one directory (leave it out to allow every path)",
                "allowed_roots");
  std::vector<std::string> parsed;
  for (std::size_t i = 0; i < roots->as_array().size(); ++i) {
    const std::string& root = roots->as_array()[i].as_string();
    if (auto problem = path_problem(root, /*allow_root=*/true))
      return fail(ErrorCode::InvalidArgument, *problem, "allowed_roots[" + std::to_string(i) + "]");
    parsed.push_back(root);
  }
  allowed_roots_ = std::move(parsed);
  return {};
}

sdk::Result<void> FileProvider::check_id(const std::string& path) const {
  if (auto problem = path_problem(path, /*allow_root=*/false))
    return fail(ErrorCode::InvalidArgument, *problem, "id");
  if (const std::string* root = denied_.lexical_match(path))
    return fail(ErrorCode::PermissionDenied,
                "'" + path + "' is under " + *root +
                    ", which the host's path policy denies (its own state directory, the control "
                    "plane's, and [paths] deny in host.toml): nothing under it is ever managed",
                "id");
  if (allowed_roots_.empty()) return {};
  for (const auto& root : allowed_roots_)
    if (within(path, root)) return {};
  std::string list;
  for (const auto& root : allowed_roots_) list += (list.empty() ? "" : ", ") + root;
  return fail(ErrorCode::InvalidArgument, "'" + path + "' is outside allowed roots (" + list + ")",
              "id");
}

sdk::Result<void> FileProvider::check_resolved_parent(int dir_fd, const std::string& dir) const {
  if (allowed_roots_.empty()) return {};
  // The lexical check in check_id cannot see a symbolic link among the parents
  // (/srv/app/link -> /etc); the opened directory's real path can.
  std::string resolved;
  char buf[PATH_MAX];
  const std::string proc = "/proc/self/fd/" + std::to_string(dir_fd);
  const ssize_t n = ::readlink(proc.c_str(), buf, sizeof buf - 1);
  if (n > 0) {
    resolved.assign(buf, static_cast<std::size_t>(n));
  } else if (char* real = ::realpath(dir.c_str(), nullptr)) {  // no /proc: racy but still useful
    resolved = real;
    std::free(real);
  } else {
    return fail(sys_error(errno, "realpath " + dir));
  }
  for (const auto& root : allowed_roots_) {
    std::string real_root = root;
    if (char* real = ::realpath(root.c_str(), nullptr)) {
      real_root = real;
      std::free(real);
    }
    if (within(resolved, real_root)) return {};
  }
  return fail(ErrorCode::PermissionDenied,
              "refusing " + dir + ": it resolves to " + resolved + ", outside allowed roots");
}

sdk::Result<void> FileProvider::validate_one(const sdk::Resource& want) {
  if (auto ok = check_id(want.rid.id); !ok) return ok;
  if (auto ok = sdk::validate_against(schema(), want.properties, "properties"); !ok) return ok;
  auto desired = parse_desired(want.properties);
  if (!desired) return fail(desired.error());
  return {};
}

sdk::Result<std::optional<sdk::State>> FileProvider::read_one(const sdk::ResourceId& rid) {
  const std::string& path = rid.id;
  if (auto ok = check_id(path); !ok) return fail(ok.error());
  Parent parent = open_parent(path, trust_for(nullptr));
  if (!parent.fd.valid()) {
    // No parent (or a parent that is a file): the file cannot exist.
    if (!parent.refused && (parent.open_errno == ENOENT || parent.open_errno == ENOTDIR))
      return std::nullopt;
    return fail(parent_error(parent, path));
  }
  struct stat st {};
  if (::fstatat(parent.fd.get(), parent.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::nullopt;
    return fail(sys_error(errno, "lstat " + path));
  }
  if (!S_ISREG(st.st_mode)) return fail(refuse_non_regular(st, path, parent.fd.get(), parent.base));
  // O_NONBLOCK: should the name be swapped for a FIFO after the lstat, open must not hang.
  Fd fd(::openat(parent.fd.get(), parent.base.c_str(),
                 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP) {
      ::fstatat(parent.fd.get(), parent.base.c_str(), &st, AT_SYMLINK_NOFOLLOW);
      return fail(refuse_non_regular(st, path, parent.fd.get(), parent.base));
    }
    return fail(sys_error(errno, "open " + path));
  }
  struct stat fst {};
  if (::fstat(fd.get(), &fst) != 0) return fail(sys_error(errno, "fstat " + path));
  if (!S_ISREG(fst.st_mode))
    return fail(refuse_non_regular(fst, path, parent.fd.get(), parent.base));
  auto state = observe_fd(fd.get(), path, &fst);
  if (!state) return fail(state.error());
  return std::optional<sdk::State>(std::move(*state));
}

sdk::Result<sdk::Plan> FileProvider::plan_one(const sdk::Resource& want,
                                             const std::optional<sdk::State>& observed) {
  auto desired = parse_desired(want.properties);
  if (!desired) return fail(desired.error());
  const Desired& d = *desired;
  sdk::Plan plan{want.rid, sdk::PlanAction::None, {}, want};
  const bool exists =
      observed.has_value() && observed->properties.get_string("ensure", "present") != "absent";

  if (d.absent) {
    if (exists) {
      plan.action = sdk::PlanAction::Remove;
      plan.changes.push_back({"properties.ensure", Value("present"), Value("absent")});
    }
    return plan;
  }

  const Value empty = Value::object();
  const Value& have = exists ? observed->properties : empty;
  auto observed_value = [&](const char* key) {
    const Value* v = have.find(key);
    return v ? *v : Value();
  };
  if (!exists) plan.changes.push_back({"properties.ensure", Value(), Value("present")});

  // Content is compared, and shown, by digest: plans are printed and stored, and the content
  // may be large or secret.
  if (d.content || d.source) {
    const std::string want_digest = "sha256:" + (d.source ? *d.source : sha256_hex(*d.content));
    const Value* sha = have.find("sha256");
    const Value have_digest =
        sha && sha->is_string() ? Value("sha256:" + sha->as_string()) : Value();
    if (have_digest != Value(want_digest))
      plan.changes.push_back({"properties." + d.content_key, have_digest, Value(want_digest)});
  }
  if (d.mode) {
    const Value* m = have.find("mode");
    const std::optional<mode_t> have_mode =
        m && m->is_string() ? parse_mode(m->as_string()) : std::nullopt;
    if (have_mode != d.mode)
      plan.changes.push_back({"properties.mode", observed_value("mode"), format_mode(*d.mode)});
  }
  // Owners compare as ids: "root" and "0" are the same owner.
  auto observed_id = [&](const char* id_key, const char* name_key,
                         bool user) -> std::optional<std::uint32_t> {
    if (const Value* v = have.find(id_key); v && v->is_int())
      return static_cast<std::uint32_t>(v->as_int());
    const Value* n = have.find(name_key);
    if (!n || !n->is_string()) return std::nullopt;
    if (user) {
      auto id = resolve<UserDb>(n->as_string(), "");
      return id ? std::optional<std::uint32_t>(*id) : std::nullopt;
    }
    auto id = resolve<GroupDb>(n->as_string(), "");
    return id ? std::optional<std::uint32_t>(*id) : std::nullopt;
  };
  if (d.uid && observed_id("uid", "owner", true) != std::optional<std::uint32_t>(*d.uid))
    plan.changes.push_back(
        {"properties.owner", observed_value("owner"), want.properties.get_string("owner")});
  if (d.gid && observed_id("gid", "group", false) != std::optional<std::uint32_t>(*d.gid))
    plan.changes.push_back(
        {"properties.group", observed_value("group"), want.properties.get_string("group")});

  if (!exists)
    plan.action = sdk::PlanAction::Create;
  else if (!plan.changes.empty())
    plan.action = sdk::PlanAction::Update;
  return plan;
}

sdk::Result<sdk::State> FileProvider::apply_one(const sdk::Plan& plan, const sdk::CancelToken& cancel,
                                               UnsyncedFile* unsynced) {
  const std::string& path = plan.rid.id;
  if (auto ok = check_id(path); !ok) return fail(ok.error());
  if (plan.desired.rid != plan.rid)
    return fail(
        ErrorCode::InvalidArgument,
        "plan for " + plan.rid.str() + " carries a declaration of " + plan.desired.rid.str());
  if (cancel.cancelled()) return fail(cancelled("applying", path));
  switch (plan.action) {
    case sdk::PlanAction::None: {
      auto now = read_one(plan.rid);
      if (!now) return fail(now.error());
      if (*now) return **now;
      sdk::State gone;
      gone.properties.set("ensure", "absent");
      return gone;
    }
    case sdk::PlanAction::Remove: {
      auto desired = parse_desired(plan.desired.properties);
      if (!desired) return fail(desired.error());
      if (auto ok = remove_file(plan.rid, trust_for(&*desired), cancel); !ok) return fail(ok.error());
      sdk::State gone;
      gone.properties.set("ensure", "absent");
      return gone;
    }
    case sdk::PlanAction::Create:
    case sdk::PlanAction::Update: break;
  }
  auto state = plan.action == sdk::PlanAction::Create || has_content_change(plan)
                   ? write_file(plan, cancel)
                   : update_metadata(plan, cancel, unsynced);
  if (!state) {
    log().warn("resource=" + plan.rid.str() + " action=" + to_string(plan.action) +
               " outcome=failed error=\"" + state.error().message + "\"");
    return state;
  }
  log().info("resource=" + plan.rid.str() + " action=" + to_string(plan.action) +
             " outcome=applied changes=" + change_list(plan));
  return state;
}

sdk::Result<StagedWrite> FileProvider::stage_write(const sdk::Plan& plan, bool sync) {
  const std::string& path = plan.rid.id;
  auto desired = parse_desired(plan.desired.properties);
  if (!desired) return fail(desired.error());
  if (desired->source) {  // from the host's verified cache, checked once more (content_source.h)
    auto bytes = content::load_verified(host().state_dir, *desired->source);
    if (!bytes) return fail(bytes.error());
    desired->content = std::move(*bytes);
  }
  const Desired& d = *desired;

  StagedWrite staged;
  staged.parent = open_parent(path, trust_for(&d));
  Parent& parent = staged.parent;
  if (!parent.fd.valid()) return fail(parent_error(parent, path));

  struct stat st {};
  bool exists = false;
  if (::fstatat(parent.fd.get(), parent.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISREG(st.st_mode))
      return fail(refuse_non_regular(st, path, parent.fd.get(), parent.base));
    exists = true;
  } else if (errno != ENOENT) {
    return fail(sys_error(errno, "lstat " + path));
  }
  // Without declared content there is nothing to write over a file that appeared since the plan
  // was made; replacing it would destroy data nobody declared.
  if (exists && !d.content)
    return fail(ErrorCode::Failed, path +
                                       " was created by someone else since the plan was made; "
                                       "not replacing content that is not managed");

  // Undeclared mode and ownership are kept: rewriting /etc/shadow's content must not make it 0644.
  const mode_t mode = d.mode ? *d.mode : exists ? (st.st_mode & kModeBits) : kDefaultMode;
  // (uid_t)-1 and (gid_t)-1 mean "leave as created" to fchown(2).
  constexpr uid_t kKeepUid = static_cast<uid_t>(-1);
  constexpr gid_t kKeepGid = static_cast<gid_t>(-1);
  const uid_t uid = d.uid ? *d.uid : exists ? st.st_uid : kKeepUid;
  const gid_t gid = d.gid ? *d.gid : exists ? st.st_gid : kKeepGid;
  const std::string content = d.content.value_or(std::string());

  auto created = create_temp(parent, path, [this](unsigned char* out, std::size_t n) { random_bytes(out, n); });
  if (!created) return fail(created.error());
  staged.temp.emplace(std::move(*created));
  TempFile* temp = &*staged.temp;
  const std::string context = "temporary file for " + path;
  if (auto ok = write_all(temp->fd(), content, "write " + temp->display(), context); !ok)
    return fail(ok.error());
  struct stat tst {};
  if (::fstat(temp->fd(), &tst) != 0)
    return fail(sys_error(errno, "fstat " + temp->display(), context));
  if ((uid != kKeepUid && uid != tst.st_uid) || (gid != kKeepGid && gid != tst.st_gid)) {
    if (::fchown(temp->fd(), uid, gid) != 0)
      return fail(sys_error(errno, "chown " + temp->display(), context));
  }
  // After fchown, which clears setuid/setgid.
  if (::fchmod(temp->fd(), mode) != 0)
    return fail(sys_error(errno, "chmod " + temp->display(), context));
  // A batch makes its temporary files durable together, with one syncfs (batch_apply.cpp).
  if (sync && ::fsync(temp->fd()) != 0)
    return fail(sys_error(errno, "fsync " + temp->display(), context));
  if (mode & S_ISGID) {
    // fchmod may drop setgid without an error (chmod(2)): ask what the file has.
    if (::fstat(temp->fd(), &tst) != 0)
      return fail(sys_error(errno, "fstat " + temp->display(), context));
  } else {
    // What the fchown and fchmod above set, without asking again.
    if (uid != kKeepUid) tst.st_uid = uid;
    if (gid != kKeepGid) tst.st_gid = gid;
    tst.st_mode = (tst.st_mode & ~kModeBits) | mode;
  }
  staged.state = make_state(tst, sha256_hex(content), static_cast<std::int64_t>(content.size()));
  if (int err = temp->file().close_checked(); err != 0)
    return fail(sys_error(err, "close " + temp->display(), context));
  staged.no_replace = !d.content;
  return staged;
}

sdk::Result<void> FileProvider::publish_write(StagedWrite& staged, const std::string& path) {
  Parent& parent = staged.parent;
  TempFile* temp = &*staged.temp;
  if (staged.no_replace) {
    // An empty file for unmanaged content: never clobber one that appeared meanwhile.
    int rc = ::renameat2(parent.fd.get(), temp->name().c_str(), parent.fd.get(),
                         parent.base.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {  // filesystem without renameat2
      rc = ::linkat(parent.fd.get(), temp->name().c_str(), parent.fd.get(), parent.base.c_str(), 0);
      if (rc == 0) ::unlinkat(parent.fd.get(), temp->name().c_str(), 0);
    }
    if (rc != 0 && errno == EEXIST)
      return fail(ErrorCode::Failed, path +
                                         " was created by someone else while it was being "
                                         "written; not replacing content that is not managed");
    if (rc != 0) return fail(sys_error(errno, "rename " + temp->display() + " to " + path));
  } else if (::renameat(parent.fd.get(), temp->name().c_str(), parent.fd.get(),
                        parent.base.c_str()) != 0) {
    return fail(sys_error(errno, "rename " + temp->display() + " to " + path));
  }
  temp->commit();
  return {};
}

sdk::Result<sdk::State> FileProvider::write_file(const sdk::Plan& plan,
                                                 const sdk::CancelToken& cancel) {
  const std::string& path = plan.rid.id;
  auto staged = stage_write(plan, true);
  if (!staged) return fail(staged.error());
  if (cancel.cancelled()) return fail(cancelled("replacing", path));
  if (auto ok = publish_write(*staged, path); !ok) return fail(ok.error());
  const Parent& parent = staged->parent;
  sweep_stale_temps_once(parent.fd.get(), parent.dev, parent.ino, parent.dir, staged->temp->name(), path);
  // The rename (and any sweep) is only durable once the directory entries are on disk.
  if (::fsync(parent.fd.get()) != 0)
    return fail(sys_error(errno, "fsync " + parent.dir, "directory of " + path));
  return std::move(staged->state);
}

sdk::Result<sdk::State> FileProvider::update_metadata(const sdk::Plan& plan, const sdk::CancelToken& cancel,
                                                      UnsyncedFile* unsynced) {
  const std::string& path = plan.rid.id;
  auto desired = parse_desired(plan.desired.properties);
  if (!desired) return fail(desired.error());
  const Desired& d = *desired;

  Parent parent = open_parent(path, trust_for(&d));
  if (!parent.fd.valid()) return fail(parent_error(parent, path));
  // O_NOFOLLOW: fchmod/fchown act on what we opened, never on a link's target.
  Fd fd(::openat(parent.fd.get(), parent.base.c_str(),
                 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    const int err = errno;
    struct stat lst {};
    if (err == ELOOP &&
        ::fstatat(parent.fd.get(), parent.base.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0)
      return fail(refuse_non_regular(lst, path, parent.fd.get(), parent.base));
    if (err == ENOENT)
      return fail(ErrorCode::Failed, path + " was removed since the plan was made");
    return fail(sys_error(err, "open " + path));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(sys_error(errno, "fstat " + path));
  if (!S_ISREG(st.st_mode)) return fail(refuse_non_regular(st, path, parent.fd.get(), parent.base));
  // fchown/fchmod change the inode, whatever names it: a second name (a hard link someone made
  // to a file elsewhere) would carry the change there. A content write replaces the name instead.
  if (st.st_nlink > 1)
    return fail(ErrorCode::PermissionDenied,
                "refusing to change the owner or mode of " + path + ": it has " +
                    std::to_string(st.st_nlink) +
                    " hard links, and the change would apply to every one of them");
  if (cancel.cancelled()) return fail(cancelled("changing", path));

  bool chowned = false;
  if ((d.uid && *d.uid != st.st_uid) || (d.gid && *d.gid != st.st_gid)) {
    if (::fchown(fd.get(), d.uid ? *d.uid : static_cast<uid_t>(-1),
                 d.gid ? *d.gid : static_cast<gid_t>(-1)) != 0)
      return fail(sys_error(errno, "chown " + path));
    chowned = true;
  }
  // chown(2) clears setuid/setgid, so the mode goes on afterwards even when it looked right.
  if (d.mode && (chowned || (st.st_mode & kModeBits) != *d.mode)) {
    if (::fchmod(fd.get(), *d.mode) != 0) return fail(sys_error(errno, "chmod " + path));
  }
  // A batch makes its metadata changes durable together, with one syncfs (batch_apply.cpp).
  if (!unsynced && ::fsync(fd.get()) != 0) return fail(sys_error(errno, "fsync " + path));
  auto state = observe_fd(fd.get(), path);
  if (state && unsynced) {
    unsynced->dev = st.st_dev;
    unsynced->fd = std::move(fd);
  }
  return state;
}

sdk::Result<void> FileProvider::remove_one(const sdk::ResourceId& rid,
                                          const sdk::CancelToken& cancel) {
  // A prune: the declaration that named the file is gone, and with it its owner.
  return remove_file(rid, trust_for(nullptr), cancel);
}

sdk::Result<void> FileProvider::remove_file(const sdk::ResourceId& rid, const paths::Trust& trust,
                                            const sdk::CancelToken& cancel) {
  const std::string& path = rid.id;
  if (auto ok = check_id(path); !ok) return ok;
  if (cancel.cancelled()) return fail(cancelled("removing", path));
  Parent parent = open_parent(path, trust);
  if (!parent.fd.valid()) {
    if (!parent.refused && (parent.open_errno == ENOENT || parent.open_errno == ENOTDIR)) {
      log().debug("resource=" + rid.str() + " action=remove outcome=already_absent");
      return {};
    }
    return fail(parent_error(parent, path));
  }
  struct stat st {};
  if (::fstatat(parent.fd.get(), parent.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      log().debug("resource=" + rid.str() + " action=remove outcome=already_absent");
      return {};
    }
    return fail(sys_error(errno, "lstat " + path));
  }
  if (!S_ISREG(st.st_mode)) return fail(refuse_non_regular(st, path, parent.fd.get(), parent.base));
  if (::unlinkat(parent.fd.get(), parent.base.c_str(), 0) != 0) {
    if (errno != ENOENT) return fail(sys_error(errno, "unlink " + path));
  }
  if (::fsync(parent.fd.get()) != 0)
    return fail(sys_error(errno, "fsync " + parent.dir, "directory of " + path));
  log().info("resource=" + rid.str() + " action=remove outcome=removed");
  return {};
}

// ---- ABI 2 entry points ---------------------------------------------------------------------

sdk::Result<void> FileProvider::do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) {
  return sdk::report(resp, validate_one(req.resource));
}

sdk::Result<void> FileProvider::do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) {
  auto state = read_one(req.rid);
  if (!state) return sdk::fail(state.error());
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> FileProvider::do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) {
  auto plan = plan_one(req.desired, req.observed);
  if (!plan) return sdk::fail(plan.error());
  resp.plan = std::move(*plan);
  return {};
}

sdk::Result<void> FileProvider::do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) {
  auto state = apply_one(req.plan, *req.cancel);
  if (!state) return sdk::fail(state.error());
  resp.state = std::move(*state);
  return {};
}

sdk::Result<void> FileProvider::do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse&) {
  return remove_one(req.rid, *req.cancel);
}

}  // namespace mesh::plugins::file
