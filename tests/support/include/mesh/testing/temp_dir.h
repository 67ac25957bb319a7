// Nox Mesh test support — a temporary directory that removes itself.
#pragma once

#include <filesystem>

namespace mesh::testing {

/// A fresh directory under $TMPDIR (or /tmp), named `mesh-test-XXXXXX`, mode 0700. The destructor
/// removes it recursively and ignores errors. Not copyable or movable (tests keep it in place).
/// Throws std::runtime_error when the directory cannot be created.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mesh::testing
