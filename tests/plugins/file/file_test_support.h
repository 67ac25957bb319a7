// Helpers shared by the file provider's tests: a temporary directory per test, small file I/O
// that does not go through the provider, and a fingerprint of what is really on disk.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "file_provider.h"
#include "mesh/sdk/logger.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/provider.h"

namespace mesh::plugins::file::test {

/// mkdtemp under $TMPDIR (or /tmp); removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mesh-file-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    // Tests make read-only directories; an unprivileged run could not empty them otherwise.
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory(ec) && !it->is_symlink(ec))
        std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                     std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& content, mode_t mode = 0644) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  ASSERT_GE(fd, 0) << "open " << path << ": " << std::strerror(errno);
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ASSERT_EQ(::fchmod(fd, mode), 0);
  ::close(fd);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline struct stat lstat_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) st.st_mode = 0;
  return st;
}

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

/// Names in `dir`, sorted, without "." and "..".
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// Names in `dir` that look like the provider's temporary files.
inline std::vector<std::string> temp_files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& n : list_dir(dir))
    if (n.find(".mesh-tmp-") != std::string::npos) out.push_back(n);
  return out;
}

/// What is on disk at `path`, bypassing the provider: lstat fields (including inode and change
/// time, so a needless chmod or rewrite shows), the content of a regular file, and the parent
/// directory's listing (so a stray temporary file shows). Any id is accepted.
inline std::string fingerprint(const std::string& path) {
  if (path.empty() || path.front() != '/' || path.find('\0') != std::string::npos ||
      path.size() >= PATH_MAX)
    return "not a usable absolute path";
  std::ostringstream out;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    out << "absent(" << errno << ")";
  } else {
    out << "mode=" << std::oct << st.st_mode << std::dec << " ino=" << st.st_ino
        << " uid=" << st.st_uid << " gid=" << st.st_gid << " size=" << st.st_size
        << " mtime=" << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec
        << " ctime=" << st.st_ctim.tv_sec << "." << st.st_ctim.tv_nsec;
    if (S_ISREG(st.st_mode)) out << " content=" << read_file(path);
  }
  const std::string dir = path.substr(0, std::max<std::size_t>(path.rfind('/'), 1));
  out << " dir:";
  for (const auto& n : list_dir(dir)) out << " " << n;
  return out.str();
}

/// A FileProvider constructed directly (no dlopen), with its own host context.
struct Harness {
  explicit Harness(std::vector<std::string> roots = {}) {
    host.logger = &logger;
    host.role = "tool";
    provider = std::make_unique<FileProvider>(host);
    sdk::Value config = sdk::Value::object();
    if (!roots.empty()) {
      sdk::Value::Array list;
      for (auto& r : roots) list.emplace_back(r);
      config.set("allowed_roots", sdk::Value(std::move(list)));
    }
    auto ok = provider->configure(config);
    if (!ok) throw std::runtime_error("configure: " + ok.error().describe());
  }
  sdk::NullLogger logger;
  sdk::HostContext host;
  std::unique_ptr<FileProvider> provider;
};

inline sdk::Resource file_resource(
    const std::string& path, std::initializer_list<std::pair<std::string, sdk::Value>> props) {
  sdk::Resource r;
  r.rid = sdk::ResourceId{"file", path};
  for (const auto& [k, v] : props) r.properties.set(k, v);
  return r;
}

}  // namespace mesh::plugins::file::test
