#include "apt_repository.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "mesh/support/sha256.h"
#include "tool.h"

namespace mesh::stages::publish {
namespace {

namespace fs = std::filesystem;
using sdk::ErrorCode;

sdk::Error failed(const std::string& message) { return sdk::Error{ErrorCode::Failed, message, {}}; }
sdk::Error bad_package(const std::string& message) { return sdk::Error{ErrorCode::InvalidArgument, message, "package"}; }

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Writes `text` to `path` through a temporary file and a rename.
sdk::Result<void> write_atomic(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) return sdk::fail(failed("cannot write " + tmp));
  }
  ::chmod(tmp.c_str(), mode);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return sdk::fail(failed("cannot rename " + tmp + " to " + path + ": " + std::strerror(e)));
  }
  return {};
}

sdk::Result<void> make_dir(const std::string& path, fs::perms perms) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return sdk::fail(failed("cannot create " + path + ": " + ec.message()));
  fs::permissions(path, perms, ec);
  return {};
}

// The lock of the repository directory (another mesh-control on the same directory, or a second
// stage object) as well as the in-process mutex.
class DirLock {
 public:
  explicit DirLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A Debian package name, version and architecture as dpkg accepts them (Debian Policy 5.6.1,
// 5.6.12); the version's characters only, its order is apt's business.
const std::regex kName("^[a-z0-9][a-z0-9+.-]+$");
const std::regex kVersion("^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$");
const std::regex kArch("^[a-z0-9][a-z0-9-]*$");

}  // namespace

sdk::Result<std::string> file_sha256(const std::string& path, std::uint64_t* size) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return sdk::fail(failed("cannot read " + path));
  support::Sha256 h;
  std::vector<char> buf(1 << 20);
  std::uint64_t total = 0;
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = f.gcount();
    if (n > 0) {
      h.update(buf.data(), static_cast<std::size_t>(n));
      total += static_cast<std::uint64_t>(n);
    }
  }
  if (f.bad()) return sdk::fail(failed("error reading " + path));
  if (size) *size = total;
  return h.hex_digest();
}

AptRepository::~AptRepository() {
  // The agent gpg started for this GnuPG home goes with us (nothing else uses the home).
  if (!options_.gnupg_home.empty() && !fingerprint_.empty()) {
    sdk::CancelToken none;
    (void)run_tool(Tool{{"gpgconf", "--homedir", options_.gnupg_home, "--kill", "gpg-agent"}, "", "",
                        std::chrono::seconds(10)},
                   none);
  }
}

std::vector<std::string> AptRepository::gpg_args() const {
  return {"gpg", "--batch", "--no-tty", "--quiet", "--homedir", options_.gnupg_home, "--pinentry-mode", "loopback",
          "--passphrase", ""};
}

sdk::Result<void> AptRepository::ensure_key(const sdk::CancelToken& cancel) {
  if (auto ok = make_dir(options_.gnupg_home, fs::perms::owner_all); !ok) return ok;
  auto list = [&]() -> sdk::Result<std::string> {
    auto args = gpg_args();
    for (const char* a : {"--with-colons", "--list-secret-keys"}) args.emplace_back(a);
    ToolResult r = run_tool(Tool{args, "", "", options_.tool_timeout}, cancel);
    // No key yet: gpg exits 2 with "No secret key" on some versions, 0 with nothing on others.
    std::string fpr;
    bool in_sec = false;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("sec:", 0) == 0) in_sec = true;
      else if (in_sec && line.rfind("fpr:", 0) == 0) {
        // fpr:::::::::FINGERPRINT:
        std::vector<std::string> f;
        std::stringstream ls(line);
        for (std::string x; std::getline(ls, x, ':');) f.push_back(x);
        if (f.size() > 9) fpr = f[9];
        break;
      }
    }
    if (!r.started) return sdk::fail(failed(r.describe("gpg")));
    return fpr;
  };
  auto fpr = list();
  if (!fpr) return sdk::fail(fpr.error());
  if (fpr->empty()) {
    auto args = gpg_args();
    for (const std::string& a : {std::string("--quick-generate-key"), options_.key_uid, std::string("ed25519"),
                                 std::string("sign"), std::string("never")})
      args.push_back(a);
    ToolResult r = run_tool(Tool{args, "", "", options_.tool_timeout}, cancel);
    if (!r.ok()) return sdk::fail(failed("generating the repository key: " + r.describe("gpg")));
    fpr = list();
    if (!fpr) return sdk::fail(fpr.error());
    if (fpr->empty()) return sdk::fail(failed("gpg made no secret key in " + options_.gnupg_home));
  }
  fingerprint_ = *fpr;
  auto args = gpg_args();
  for (const std::string& a : {std::string("--armor"), std::string("--export"), fingerprint_}) args.push_back(a);
  const std::string exported = options_.gnupg_home + "/public.asc";
  ToolResult r = run_tool(Tool{args, "", exported, options_.tool_timeout}, cancel);
  if (!r.ok()) return sdk::fail(failed("exporting the repository key: " + r.describe("gpg")));
  public_key_ = read_all(exported);
  if (public_key_.find("BEGIN PGP PUBLIC KEY BLOCK") == std::string::npos)
    return sdk::fail(failed("gpg exported no public key for " + fingerprint_));
  if (read_all(public_key_path()) != public_key_)
    if (auto ok = write_atomic(public_key_path(), public_key_, 0644); !ok) return ok;
  return {};
}

sdk::Result<void> AptRepository::prepare(const sdk::CancelToken& cancel) {
  std::lock_guard guard(mu_);
  if (auto ok = make_dir(options_.dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                           fs::perms::others_read | fs::perms::others_exec);
      !ok)
    return ok;
  DirLock lock(options_.dir + "/.lock");
  if (!lock.ok()) return sdk::fail(failed("cannot lock " + options_.dir + "/.lock: " + std::strerror(errno)));
  for (const std::string& d : {options_.dir + "/pool/" + options_.component, options_.dir + "/dists"})
    if (auto ok = make_dir(d, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
        !ok)
      return ok;
  if (auto ok = ensure_key(cancel); !ok) return ok;
  // What an interrupted publish left: half-built indexes (never served: hidden names).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.dir + "/dists", ec))
    if (e.path().filename().string().rfind("." + options_.codename + ".", 0) == 0) fs::remove_all(e.path(), ec);
  for (const auto& e : fs::recursive_directory_iterator(options_.dir + "/pool", ec))
    if (e.path().filename().string().rfind(".incoming-", 0) == 0) fs::remove(e.path(), ec);
  const std::string release = options_.dir + "/dists/" + options_.codename + "/InRelease";
  // An index signed by another key (the GnuPG home was replaced) is rebuilt too.
  if (!fs::exists(release) || read_all(options_.dir + "/dists/" + options_.codename + "/.signed-by") != fingerprint_)
    return reindex(cancel);
  return {};
}

sdk::Result<void> AptRepository::reindex(const sdk::CancelToken& cancel) {
  const std::string dists = options_.dir + "/dists";
  const std::string live = dists + "/" + options_.codename;
  std::string pattern = dists + "/." + options_.codename + ".new-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) return sdk::fail(failed("cannot make a directory in " + dists + ": " + std::strerror(errno)));
  const std::string fresh = buf.data();
  ::chmod(fresh.c_str(), 0755);
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code ec;
      if (!path.empty()) fs::remove_all(path, ec);
    }
  } cleanup{fresh};

  std::string archs;
  for (const auto& arch : options_.architectures) {
    archs += (archs.empty() ? "" : " ") + arch;
    const std::string bin = fresh + "/" + options_.component + "/binary-" + arch;
    if (auto ok = make_dir(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                    fs::perms::others_read | fs::perms::others_exec);
        !ok)
      return ok;
    // Packages of this architecture and of `all`, by the pool file names (*_<arch>.deb).
    std::vector<std::string> argv{"apt-ftparchive", "--arch", arch};
    if (!options_.cache_db.empty()) argv.insert(argv.end(), {"--db", options_.cache_db});
    argv.insert(argv.end(), {"packages", "pool/" + options_.component});
    ToolResult p = run_tool(Tool{argv, options_.dir, bin + "/Packages", options_.tool_timeout}, cancel);
    if (!p.ok()) return sdk::fail(failed(p.describe("apt-ftparchive packages")));
    ToolResult z = run_tool(Tool{{"gzip", "-9", "-n", "-c", "Packages"}, bin, bin + "/Packages.gz", options_.tool_timeout},
                            cancel);
    if (!z.ok()) return sdk::fail(failed(z.describe("gzip")));
  }
  const std::string prefix = "APT::FTPArchive::Release::";
  std::vector<std::string> release{"apt-ftparchive",
                                   "-o", prefix + "Origin=" + options_.origin,
                                   "-o", prefix + "Label=" + options_.label,
                                   "-o", prefix + "Suite=" + options_.codename,
                                   "-o", prefix + "Codename=" + options_.codename,
                                   "-o", prefix + "Architectures=" + archs,
                                   "-o", prefix + "Components=" + options_.component,
                                   "-o", prefix + "Description=the Nox Mesh repository",
                                   "release", "."};
  const std::string release_tmp = dists + "/." + options_.codename + ".release-" + std::to_string(::getpid());
  ToolResult rel = run_tool(Tool{release, fresh, release_tmp, options_.tool_timeout}, cancel);
  if (!rel.ok()) {
    ::unlink(release_tmp.c_str());
    return sdk::fail(failed(rel.describe("apt-ftparchive release")));
  }
  if (::rename(release_tmp.c_str(), (fresh + "/Release").c_str()) != 0)
    return sdk::fail(failed("cannot move the Release file into " + fresh + ": " + std::strerror(errno)));
  ::chmod((fresh + "/Release").c_str(), 0644);
  for (const auto& [mode, out] : {std::pair<std::string, std::string>{"--clearsign", "InRelease"},
                                  std::pair<std::string, std::string>{"--detach-sign", "Release.gpg"}}) {
    auto args = gpg_args();
    for (const std::string& a : {std::string("--local-user"), fingerprint_, std::string("--digest-algo"),
                                 std::string("SHA512"), mode, std::string("--output"), fresh + "/" + out,
                                 fresh + "/Release"})
      args.push_back(a);
    ToolResult s = run_tool(Tool{args, "", "", options_.tool_timeout}, cancel);
    if (!s.ok()) return sdk::fail(failed("signing the index: " + s.describe("gpg")));
    ::chmod((fresh + "/" + out).c_str(), 0644);
  }
  {
    std::ofstream f(fresh + "/.signed-by");
    f << fingerprint_;
  }
  if (cancel.cancelled()) return sdk::fail(ErrorCode::Cancelled, "cancelled before the index was replaced");
  // The swap: readers see the old index or the new one.
  if (fs::exists(live)) {
    if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, live.c_str(), RENAME_EXCHANGE) != 0)
      return sdk::fail(failed("cannot swap " + fresh + " with " + live + ": " + std::strerror(errno)));
    // `fresh` now holds the old index: the cleanup removes it.
  } else {
    if (::rename(fresh.c_str(), live.c_str()) != 0)
      return sdk::fail(failed("cannot rename " + fresh + " to " + live + ": " + std::strerror(errno)));
    cleanup.path.clear();
  }
  return {};
}

sdk::Result<PublishedPackage> AptRepository::publish(const std::string& deb, const std::string& expected_sha256,
                                                     const sdk::CancelToken& cancel, const Accept& accept) {
  if (fingerprint_.empty()) return sdk::fail(ErrorCode::FailedPrecondition, "the repository is not prepared");
  // The file as given: its digest first (an upload that was cut or corrupted stops here).
  std::uint64_t size = 0;
  MESH_TRY(digest, file_sha256(deb, &size));
  if (!expected_sha256.empty() && digest != expected_sha256)
    return sdk::fail(bad_package("the file's SHA-256 is " + digest + ", not " + expected_sha256 +
                                 " as announced: corrupted or incomplete; nothing published"));
  {
    std::ifstream f(deb, std::ios::binary);
    char magic[21] = {};
    f.read(magic, 21);
    if (f.gcount() < 21 || std::string_view(magic, 8) != "!<arch>\n" || std::string_view(magic + 8, 13) != "debian-binary")
      return sdk::fail(bad_package("not a Debian binary package (.deb): no ar archive starting with debian-binary"));
  }
  ToolResult fields = run_tool(Tool{{"dpkg-deb", "--field", deb, "Package", "Version", "Architecture"}, "", "",
                                    options_.tool_timeout},
                               cancel);
  if (!fields.ok()) return sdk::fail(bad_package("not a valid .deb: " + fields.describe("dpkg-deb --field")));
  PublishedPackage p;
  p.sha256 = digest;
  p.size = size;
  {
    std::istringstream lines(fields.out);
    for (std::string line; std::getline(lines, line);) {
      auto colon = line.find(": ");
      if (colon == std::string::npos) continue;
      const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
      if (key == "Package") p.name = value;
      else if (key == "Version") p.version = value;
      else if (key == "Architecture") p.architecture = value;
    }
  }
  if (!std::regex_match(p.name, kName)) return sdk::fail(bad_package("Package field '" + p.name.substr(0, 100) + "' is not a package name"));
  if (!std::regex_match(p.version, kVersion)) return sdk::fail(bad_package("Version field '" + p.version.substr(0, 100) + "' is not a Debian version"));
  if (!std::regex_match(p.architecture, kArch)) return sdk::fail(bad_package("Architecture field '" + p.architecture.substr(0, 100) + "' is not an architecture"));
  bool arch_ok = p.architecture == "all";
  std::string archs;
  for (const auto& a : options_.architectures) {
    arch_ok = arch_ok || a == p.architecture;
    archs += (archs.empty() ? "" : ", ") + a;
  }
  if (!arch_ok)
    return sdk::fail(bad_package("architecture " + p.architecture + " is not one of this repository's (" + archs + ", all)"));
  if (accept)
    if (auto ok = accept(p); !ok) return sdk::fail(ok.error());
  // The whole archive must unpack (a .deb cut short but announced with its own digest).
  ToolResult contents = run_tool(Tool{{"dpkg-deb", "--contents", deb}, "", "/dev/null", options_.tool_timeout}, cancel);
  if (!contents.ok()) return sdk::fail(bad_package("not a valid .deb: " + contents.describe("dpkg-deb --contents")));

  std::string upstream = p.version;
  if (auto c = upstream.find(':'); c != std::string::npos) upstream = upstream.substr(c + 1);
  const std::string rel_dir = "pool/" + options_.component + "/" + p.name;
  p.filename = rel_dir + "/" + p.name + "_" + upstream + "_" + p.architecture + ".deb";
  const std::string target = options_.dir + "/" + p.filename;

  std::lock_guard guard(mu_);
  DirLock lock(options_.dir + "/.lock");
  if (!lock.ok()) return sdk::fail(failed("cannot lock " + options_.dir + "/.lock: " + std::strerror(errno)));
  std::error_code ec;
  if (fs::exists(target, ec)) {
    MESH_TRY(existing, file_sha256(target));
    if (existing != digest)
      return sdk::fail(ErrorCode::AlreadyExists,
                       p.name + " " + p.version + " (" + p.architecture + ") is already published with other content "
                       "(sha256 " + existing + ", this one " + digest + "); a published version never changes: publish a "
                       "new version, or rebuild it byte for byte (dpkg-deb honours SOURCE_DATE_EPOCH: set it, "
                       "e.g. in the build stage's environment, to make a rebuild reproducible)",
                       "package");
    p.already = true;
    return p;
  }
  if (auto ok = make_dir(options_.dir + "/" + rel_dir, fs::perms::owner_all | fs::perms::group_read |
                                                           fs::perms::group_exec | fs::perms::others_read |
                                                           fs::perms::others_exec);
      !ok)
    return sdk::fail(ok.error());
  // Copy under a hidden name (never served), check the copy, rename into place.
  const std::string incoming = options_.dir + "/" + rel_dir + "/.incoming-" + std::to_string(::getpid());
  fs::copy_file(deb, incoming, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    fs::remove(incoming, ec);
    return sdk::fail(failed("cannot copy the package into " + rel_dir + ": " + ec.message()));
  }
  ::chmod(incoming.c_str(), 0644);
  auto copied = file_sha256(incoming);
  if (!copied || *copied != digest) {
    fs::remove(incoming, ec);
    return sdk::fail(failed("the copy in the pool does not match the package (disk error?); nothing published"));
  }
  if (::rename(incoming.c_str(), target.c_str()) != 0) {
    const int e = errno;
    fs::remove(incoming, ec);
    return sdk::fail(failed("cannot rename into " + target + ": " + std::strerror(e)));
  }
  if (auto ok = reindex(cancel); !ok) {
    fs::remove(target, ec);
    std::error_code ignored;
    fs::remove(options_.dir + "/" + rel_dir, ignored);  // only when empty
    return sdk::fail(ok.error());
  }
  return p;
}

}  // namespace mesh::stages::publish
