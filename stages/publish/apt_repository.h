// The mesh's apt repository (decision record 58): a pool of .deb files under <dir>/pool and the
// index under <dir>/dists/<codename>, made by apt-ftparchive (Packages, Release) and signed by gpg
// (InRelease, Release.gpg) with a key generated at the first start. Every published version is
// kept (a pool, never pruned), so a rollback can always install the version it names.
//
// Layout:
//   <dir>/pool/<component>/<name>/<name>_<version without epoch>_<arch>.deb
//   <dir>/dists/<codename>/{Release,InRelease,Release.gpg}
//   <dir>/dists/<codename>/<component>/binary-<arch>/{Packages,Packages.gz}
//   <dir>/mesh-repository.asc   the public key (armored), for apt's signed-by
// A publish writes the pool file first, then builds a whole new dists/<codename> beside the old
// one and swaps the two directories in one rename (renameat2 RENAME_EXCHANGE), so a reader sees
// the old index or the new one, never a mix; on any failure the pool file is removed again and
// the repository is as it was. Publishes are serialised (a mutex and an flock on <dir>/.lock).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <functional>
#include <vector>

#include "mesh/sdk/cancel.h"
#include "mesh/sdk/result.h"

namespace mesh::stages::publish {

struct RepositoryOptions {
  std::string dir;         ///< the repository's root
  std::string gnupg_home;  ///< the signing key's GnuPG home (made 0700), outside `dir`
  /// apt-ftparchive's cache of the pool files' fields and hashes (`--db`), outside `dir`; ""
  /// = none (every publish hashes every pool file again).
  std::string cache_db;
  std::string codename = "mesh";
  std::string component = "main";
  std::vector<std::string> architectures{"amd64", "arm64"};
  std::string origin = "Nox Mesh";
  std::string label = "Nox Mesh";
  /// The user id of the key generated at the first start.
  std::string key_uid = "Nox Mesh repository <repository@nox-mesh.invalid>";
  std::chrono::milliseconds tool_timeout{std::chrono::minutes(5)};
};

/// A published package as the repository holds it.
struct PublishedPackage {
  std::string name, version, architecture;
  std::string sha256;    ///< of the pool file, computed after it was written
  std::uint64_t size = 0;
  std::string filename;  ///< relative to the repository root: pool/main/...
  bool already = false;  ///< the same file was published before: nothing changed
};

class AptRepository {
 public:
  explicit AptRepository(RepositoryOptions options) : options_(std::move(options)) {}
  ~AptRepository();
  AptRepository(const AptRepository&) = delete;
  AptRepository& operator=(const AptRepository&) = delete;

  /// Makes the directories, the signing key when the GnuPG home holds none (ed25519, no
  /// passphrase, `gpg --batch --quick-generate-key`; the secret never leaves the GnuPG home and
  /// is never logged), writes <dir>/mesh-repository.asc when it differs, removes what an
  /// interrupted publish left (dists/.<codename>.new-*), and writes a signed empty index when
  /// there is none. Errors: Failed naming the tool and its last output lines, or the path.
  sdk::Result<void> prepare(const sdk::CancelToken& cancel);

  /// The signing key's fingerprint (valid after prepare()).
  const std::string& fingerprint() const noexcept { return fingerprint_; }
  /// The armored public key (valid after prepare()).
  const std::string& public_key() const noexcept { return public_key_; }
  /// <dir>/mesh-repository.asc.
  std::string public_key_path() const { return options_.dir + "/mesh-repository.asc"; }
  const RepositoryOptions& options() const noexcept { return options_; }

  /// Publishes the .deb at `deb`. `expected_sha256` (hex), when not empty, must be the file's
  /// SHA-256 (checked before anything is written). The file is checked with dpkg-deb (a real
  /// Debian binary package whose data unpacks), its Package, Version and Architecture read from
  /// it; the architecture must be one of the repository's or `all`. The same name, version and
  /// architecture published before with the same content: nothing written, `already` set; with
  /// other content: AlreadyExists (a version is immutable). Errors: InvalidArgument on path
  /// "package" (not a .deb, bad fields, digest mismatch, wrong architecture), AlreadyExists,
  /// Failed (a tool failed: its last output lines), Cancelled. On every error the repository is
  /// unchanged. Thread-safe (serialised). `accept`, when set, is called with the package's name,
  /// version and architecture as read from the file, before anything is written: its error is
  /// returned as it is (the repository unchanged).
  using Accept = std::function<sdk::Result<void>(const PublishedPackage&)>;
  sdk::Result<PublishedPackage> publish(const std::string& deb, const std::string& expected_sha256,
                                        const sdk::CancelToken& cancel, const Accept& accept = {});

 private:
  sdk::Result<void> ensure_key(const sdk::CancelToken& cancel);
  /// Builds and signs a new index from the pool, then swaps it in. Call with the lock held.
  sdk::Result<void> reindex(const sdk::CancelToken& cancel);
  std::vector<std::string> gpg_args() const;

  RepositoryOptions options_;
  std::string fingerprint_;
  std::string public_key_;
  std::mutex mu_;
};

/// SHA-256 (hex) of the file at `path`, read in 1 MiB chunks. Errors: Failed naming the file.
sdk::Result<std::string> file_sha256(const std::string& path, std::uint64_t* size = nullptr);

}  // namespace mesh::stages::publish
