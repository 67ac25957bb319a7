#include "sysctl_provider.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace sysctl {

using namespace mesh::sdk;

namespace {

constexpr std::size_t kMaxComponents = 32;
constexpr std::size_t kMaxComponent = 255;
constexpr std::size_t kMaxKey = 1024;
constexpr std::size_t kMaxValue = 4095;      // the kernel takes at most a page per write
constexpr std::size_t kMaxRead = 64 * 1024;  // no /proc/sys value comes near it

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

ErrorCode code_for(int e) {
  return e == EACCES || e == EPERM ? ErrorCode::PermissionDenied : ErrorCode::Failed;
}

/// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string path_of(const std::string& root, const std::vector<std::string>& key) {
  std::string path = root;
  for (const auto& c : key) path += "/" + c;
  return path;
}

/// Opens the key's file with `flags` (O_NOFOLLOW and O_CLOEXEC added), walking from `root` one
/// directory at a time, each opened relative to the one before with O_NOFOLLOW: a symbolic link
/// below the root is refused, never followed. nullopt when a component does not exist.
Result<std::optional<Fd>> open_key(const std::string& root, const std::vector<std::string>& key,
                                   int flags) {
  Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    const int e = errno;
    return fail(code_for(e), "open " + root + ": " + errno_text(e));
  }
  for (std::size_t i = 0; i < key.size(); ++i) {
    const bool last = i + 1 == key.size();
    const int f = (last ? flags : O_RDONLY | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC;
    Fd next(::openat(dir.get(), key[i].c_str(), f));
    if (next.get() < 0) {
      const int e = errno;
      if (e == ENOENT) return std::optional<Fd>{};
      std::string path = root;
      for (std::size_t k = 0; k <= i; ++k) path += "/" + key[k];
      if (e == ELOOP || (e == ENOTDIR && !last))
        return fail(ErrorCode::Failed, path + " is a symbolic link or not a directory (refused)");
      return fail(code_for(e), "open " + path + ": " + errno_text(e));
    }
    dir = std::move(next);
  }
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) {
    const int e = errno;
    return fail(ErrorCode::Failed, "stat " + path_of(root, key) + ": " + errno_text(e));
  }
  if (!S_ISREG(st.st_mode))
    return fail(ErrorCode::Failed, path_of(root, key) + " is not a key (a directory of keys?)");
  return std::optional<Fd>(std::move(dir));
}

}  // namespace

Result<std::vector<std::string>> parse_key(std::string_view key) {
  if (key.empty()) return fail(ErrorCode::InvalidArgument, "the key is empty", "id");
  if (key.size() > kMaxKey)
    return fail(ErrorCode::InvalidArgument,
                "the key is longer than " + std::to_string(kMaxKey) + " bytes", "id");
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    const std::string_view part =
        key.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    const std::string where = "component " + std::to_string(parts.size() + 1);
    if (part.empty())
      return fail(ErrorCode::InvalidArgument,
                  where + " is empty (a key is dotted like net.ipv4.ip_forward: no leading, "
                          "trailing or double dot)",
                  "id");
    if (part.size() > kMaxComponent)
      return fail(ErrorCode::InvalidArgument,
                  where + " is longer than " + std::to_string(kMaxComponent) + " bytes", "id");
    for (char c : part) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
      if (!ok) {
        const std::string shown =
            c == '/' ? std::string("'/' (use dots: net.ipv4.ip_forward)")
            : static_cast<unsigned char>(c) > 0x20 && c != 0x7f
                ? "'" + std::string(1, c) + "'"
                : "byte " + std::to_string(static_cast<unsigned char>(c));
        return fail(ErrorCode::InvalidArgument,
                    where + " has " + shown + "; components are [A-Za-z0-9_-]", "id");
      }
    }
    parts.emplace_back(part);
    if (parts.size() > kMaxComponents)
      return fail(ErrorCode::InvalidArgument,
                  "the key has more than " + std::to_string(kMaxComponents) + " components", "id");
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::string normalise(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (char c : value) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

Result<std::optional<std::string>> read_key(const std::string& root,
                                            const std::vector<std::string>& key) {
  auto fd = open_key(root, key, O_RDONLY);
  if (!fd) {
    if (fd.error().code == ErrorCode::PermissionDenied)
      fd.error().message += " (a write-only key cannot be managed: it cannot be read back)";
    return fail(fd.error());
  }
  if (!*fd) return std::optional<std::string>{};
  std::string text;
  char buf[4096];
  while (text.size() < kMaxRead) {
    const ssize_t n = ::read((*fd)->get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      return fail(code_for(e), "read " + path_of(root, key) + ": " + errno_text(e));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return std::optional<std::string>(normalise(text));
}

Result<void> write_key(const std::string& root, const std::vector<std::string>& key,
                       std::string_view value) {
  auto fd = open_key(root, key, O_WRONLY | O_TRUNC);
  if (!fd) return fail(fd.error());
  const std::string path = path_of(root, key);
  if (!*fd) return fail(ErrorCode::NotFound, path + " does not exist: the kernel has no such key");
  const std::string line = std::string(value) + "\n";
  ssize_t n;
  do {
    n = ::write((*fd)->get(), line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    const int e = errno;
    return fail(code_for(e), "write " + path + ": " + errno_text(e) +
                                 (e == EINVAL ? " (the kernel refused the value)" : ""));
  }
  if (static_cast<std::size_t>(n) != line.size())
    return fail(ErrorCode::Failed, "write " + path + ": short write (" + std::to_string(n) +
                                       " of " + std::to_string(line.size()) + " bytes)");
  if (::close((*fd)->release()) != 0) {
    const int e = errno;
    return fail(code_for(e), "close " + path + ": " + errno_text(e));
  }
  return {};
}

const Schema& SysctlProvider::schema() const noexcept {
  static const Schema s{"sysctl", "a kernel parameter under /proc/sys (its running value)", {
      {"value", ValueType::String, true,
       "the value, as `sysctl -n` prints it; whitespace between the numbers of a multi-value key "
       "is compared as one space (\"32768 60999\")"},
  }};
  return s;
}

const Schema& SysctlProvider::config_schema() const noexcept {
  static const Schema s{"sysctl", "configuration of the sysctl provider", {
      {"root", ValueType::String, false,
       "absolute path of the directory the keys live under (a test uses a temporary directory)",
       {}, Value("/proc/sys")},
  }};
  return s;
}

Result<void> SysctlProvider::do_configure(const Value& config) {
  root_ = config.get_string("root", root_);
  if (root_.empty() || root_[0] != '/')
    return fail(ErrorCode::InvalidArgument, "must be an absolute path", "root");
  struct stat st {};
  if (::stat(root_.c_str(), &st) != 0) {
    const int e = errno;
    return fail(ErrorCode::InvalidArgument, root_ + ": " + errno_text(e), "root");
  }
  if (!S_ISDIR(st.st_mode))
    return fail(ErrorCode::InvalidArgument, root_ + " is not a directory", "root");
  return {};
}

Result<void> SysctlProvider::do_capabilities(ProviderCapabilities& caps) const {
  caps.removal = Removal::Release;
  caps.exists_before_management = true;
  return {};
}

Result<void> SysctlProvider::do_validate(const ValidateRequest& req, ValidateResponse& resp) {
  auto invalid = [&](std::string message, std::string path) {
    resp.errors.push_back(Error{ErrorCode::InvalidArgument, std::move(message), std::move(path)});
  };
  if (auto key = parse_key(req.resource.rid.id); !key) resp.errors.push_back(key.error());
  const std::string value = req.resource.properties.get_string("value");
  if (normalise(value).empty()) invalid("must not be empty", "properties.value");
  if (value.size() > kMaxValue)
    invalid("is longer than " + std::to_string(kMaxValue) + " bytes", "properties.value");
  for (char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && !is_space(c)) || c == 0x7f) {
      invalid("has the control character " + std::to_string(static_cast<unsigned char>(c)),
              "properties.value");
      break;
    }
  return {};
}

Result<void> SysctlProvider::do_read(const ReadRequest& req, ReadResponse& resp) {
  auto key = parse_key(req.rid.id);
  if (!key) return fail(key.error());
  auto value = read_key(root_, *key);
  if (!value) return fail(value.error());
  if (*value) {
    resp.state = State{};
    resp.state->properties.set("value", **value);
  }
  return {};
}

Result<void> SysctlProvider::do_plan(const PlanRequest& req, PlanResponse& resp) {
  resp.plan = Plan{req.desired.rid, PlanAction::None, {}, req.desired};
  const Value declared(normalise(req.desired.properties.get_string("value")));
  const Value* have = req.observed ? req.observed->properties.find("value") : nullptr;
  if (have && *have == declared) return {};
  // An absent key plans Create so that --dry-run shows it; apply then says the kernel has no
  // such key (a sysctl key cannot be created).
  resp.plan.action = req.observed ? PlanAction::Update : PlanAction::Create;
  resp.plan.changes.push_back({"properties.value", have ? *have : Value(), declared});
  return {};
}

Result<void> SysctlProvider::do_apply(const ApplyRequest& req, ApplyResponse& resp) {
  if (req.cancel->cancelled()) return fail(ErrorCode::Cancelled, "cancelled before writing");
  if (req.plan.action == PlanAction::Remove)
    return fail(ErrorCode::Unsupported, "a sysctl key cannot be removed");
  auto key = parse_key(req.plan.rid.id);
  if (!key) return fail(key.error());
  const std::string value = normalise(req.plan.desired.properties.get_string("value"));
  if (auto written = write_key(root_, *key, value); !written) return fail(written.error());
  log().info("resource=sysctl:" + req.plan.rid.id + " outcome=changed");
  resp.state.properties.set("value", value);
  return {};
}

Result<void> SysctlProvider::do_remove(const RemoveRequest& req, RemoveResponse& resp) {
  // Release: nothing is deleted or written. The key keeps the value it has now, which is what we
  // tell the engine we left (its read-back checks it); a key the kernel no longer has is fine.
  auto key = parse_key(req.rid.id);
  if (!key) return fail(key.error());
  auto value = read_key(root_, *key);
  if (!value) return fail(value.error());
  if (*value) {
    resp.left = Value::object();
    resp.left->set("value", **value);
  }
  log().info("resource=sysctl:" + req.rid.id + " outcome=released (value left as it is)");
  return {};
}

}  // namespace sysctl

MESH_PLUGIN(provider, "sysctl", "1.0.0", "kernel parameters under /proc/sys (example)",
            sysctl::SysctlProvider)
