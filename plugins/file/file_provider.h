// The `file` provider: regular files, identified by their absolute path (`file:/etc/motd`).
//
// Properties: content | content_base64 | source (exclusive; neither = content not managed;
// source = "sha256:<hex>" is read from the host's verified cache, content_source.h), mode, owner,
// group, ensure (present | absent). Read-back state: sha256, size, mode, owner, group, uid, gid,
// ensure. Writes go through a temporary file in the target's directory (fsync, rename, fsync of
// the directory), so a reader sees the old file or the new one, never half of one. A batch
// (apply_batch, batch_apply.cpp, decision 0106; config `max_batch`, default 256) writes every temp
// file, makes them durable with one syncfs, renames them, and syncs each directory once. A symbolic
// link, a directory or any other non-regular file at the target is refused, never followed or
// replaced; a missing parent directory is an error, never created.
//
// Every path is opened from "/" one component at a time without following symbolic links
// (plugins/paths/safe_path.h, decision record 23), and every later call is relative to the
// parent directory's descriptor. A symbolic link anywhere on the path is refused; so is, for a
// write, chown, chmod or declared removal, a directory on the way that someone other than root,
// the host's user and the declared owner could change (an "unsafe path transition"), unless the
// declaration sets `allow_untrusted_parents`. A metadata-only change of a file with more than
// one hard link is refused. read() and prune refuse symbolic links and denied roots only.
// A walk stands for the next operations in the same directory for up to kWalkTtl (1 s), each
// checked by one openat2(RESOLVE_NO_SYMLINKS) of the directory that must give the same inode,
// whose owner and mode are judged again (decision 150; file_provider.cpp, "the walk cache").
//
// Plugin config: `allowed_roots` (list of directories) confines resources to those trees;
// `denied_roots` (list of paths, filled by mesh-host from its path policy) keeps them out of
// those (PermissionDenied with path "id" at validate; by device and inode on the way at apply).
//
// Errors: InvalidArgument with path "id" or "properties.<name>" (validate, plan; read, apply and
// remove re-check the id); Unavailable with path "properties.owner"/"properties.group" when the
// user or group database cannot be asked (not when the name is unknown); Failed for a non-regular
// file at the path, a missing parent directory, and syscall failures ("open /etc/x: <strerror>");
// PermissionDenied for EACCES/EPERM, for a parent directory that resolves outside
// allowed_roots, and for a refused path (symbolic link, unsafe transition, denied root, the
// message naming the component and its owner or link target); Cancelled when the token fires before the rename.
// Stale temporary files (`.<name>.mesh-tmp-<12 hex>`, left by a write that was killed before its
// rename) are removed once per directory per provider instance, at the first write into it, for
// every target in the directory (file_provider.cpp, "stale temporary files"; decision 73).
// Thread safety: none of its own; the engine calls a provider from one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "mesh/sdk/provider.h"
#include "safe_path.h"
#include "staged_write.h"

namespace mesh::plugins::file {

class FileProvider final : public sdk::Provider {
 public:
  /// Initialises libsodium (for SHA-256 and base64). Throws std::runtime_error when it cannot,
  /// which the MESH_PLUGIN factory turns into a logged nullptr.
  explicit FileProvider(const sdk::HostContext& host);

  const sdk::Schema& schema() const noexcept override;
  const sdk::Schema& config_schema() const noexcept override;

 protected:
  sdk::Result<void> do_configure(const sdk::Value& config) override;
  // ABI 2 entry points: thin adapters over the helpers below (request/response structs are the
  // host's; sdk/provider.h).
  sdk::Result<void> do_validate(const sdk::ValidateRequest& req, sdk::ValidateResponse& resp) override;
  sdk::Result<void> do_read(const sdk::ReadRequest& req, sdk::ReadResponse& resp) override;
  sdk::Result<void> do_plan(const sdk::PlanRequest& req, sdk::PlanResponse& resp) override;
  sdk::Result<void> do_apply(const sdk::ApplyRequest& req, sdk::ApplyResponse& resp) override;
  sdk::Result<void> do_remove(const sdk::RemoveRequest& req, sdk::RemoveResponse& resp) override;
  /// max_batch = the config's max_batch (default kMaxBatch; decision 0106).
  sdk::Result<void> do_capabilities(sdk::ProviderCapabilities& caps) const override;
  /// A batch (batch_apply.cpp, decision 0106): every content write staged in a temporary file,
  /// one syncfs per filesystem for all of them, the host's intent hook, the renames (and the
  /// other plans' applies) in order, then one stale-temp sweep and one fsync per directory.
  sdk::Result<void> do_apply_batch(const sdk::ApplyBatchRequest& req, sdk::ApplyBatchResponse& resp) override;

 private:
  sdk::Result<void> validate_one(const sdk::Resource& want);
  sdk::Result<std::optional<sdk::State>> read_one(const sdk::ResourceId& rid);
  sdk::Result<sdk::Plan> plan_one(const sdk::Resource& want, const std::optional<sdk::State>& observed);
  /// `unsynced` not null: an owner or mode change is not fsync'ed; the file's descriptor goes
  /// there instead (a batch syncs them together). Left empty for any other plan.
  sdk::Result<sdk::State> apply_one(const sdk::Plan& plan, const sdk::CancelToken& cancel,
                                    UnsyncedFile* unsynced = nullptr);
  sdk::Result<void> remove_one(const sdk::ResourceId& rid, const sdk::CancelToken& cancel);
  /// The path rules plus `allowed_roots`, lexically; InvalidArgument with path "id".
  sdk::Result<void> check_id(const std::string& path) const;
  /// Refuses when the opened parent directory resolves (through symlinks) outside the roots.
  sdk::Result<void> check_resolved_parent(int dir_fd, const std::string& dir) const;
  /// The parent directory of `path`, opened without following a link and judged by `trust`
  /// (safe_path.h), with allowed_roots checked (check_resolved_parent): from the walk cache when
  /// it holds a walk of that directory younger than kWalkTtl and the directory still is what that
  /// walk found (see "the walk cache" in file_provider.cpp), else by a full walk that refreshes
  /// it. A refusal, including allowed_roots', is in Parent::refused.
  Parent open_parent(const std::string& path, const paths::Trust& trust);
  sdk::Result<sdk::State> write_file(const sdk::Plan& plan, const sdk::CancelToken& cancel);
  /// A content write up to its rename: parent opened by the safe walk, temporary file written,
  /// chowned, chmod'ed, fsync'ed when `sync`, closed. The temporary file is unlinked when the
  /// result is destroyed unpublished.
  sdk::Result<StagedWrite> stage_write(const sdk::Plan& plan, bool sync);
  /// Renames a staged write into place (no directory sync: the caller's).
  sdk::Result<void> publish_write(StagedWrite& staged, const std::string& path);
  /// Owner and mode on the file's own descriptor; fsync'ed unless `unsynced` is not null, which
  /// then receives the descriptor.
  sdk::Result<sdk::State> update_metadata(const sdk::Plan& plan, const sdk::CancelToken& cancel,
                                          UnsyncedFile* unsynced);
  /// Removes the file, judging the directories above it by `trust` (prune: none declared).
  sdk::Result<void> remove_file(const sdk::ResourceId& rid, const paths::Trust& trust,
                                const sdk::CancelToken& cancel);

  /// Removes the directory's stale temporary files unless this instance already swept it.
  void sweep_stale_temps_once(int dir_fd, dev_t dev, ino_t ino, const std::string& dir,
                              const std::string& keep, const std::string& path);

  /// A directory, by st_dev and st_ino.
  struct DirKey {
    dev_t dev;
    ino_t ino;
    bool operator==(const DirKey&) const = default;
  };
  struct DirKeyHash {
    std::size_t operator()(const DirKey& k) const noexcept {
      return std::hash<ino_t>{}(k.ino) ^ (std::hash<dev_t>{}(k.dev) * 0x9e3779b97f4a7c15ULL);
    }
  };
  /// The most plans one apply_batch takes: each staged write holds its parent directory open
  /// until the batch's directory syncs, so this bounds the descriptors a batch holds.
  static constexpr std::uint32_t kMaxBatch = 256;
  /// Config `max_batch` (1..kMaxBatch; default kMaxBatch).
  std::uint32_t max_batch_ = kMaxBatch;
  /// A directory walked from "/" by open_parent (decision 150): what the walk found, so that the
  /// next operations in it within kWalkTtl check it with one openat2 and one fstat instead of
  /// walking every component again. Holds no descriptor of its own between calls: `open` only
  /// refers to one that a Parent of an unfinished operation (a batch's staged write) still holds.
  struct WalkedDir {
    dev_t dev = 0;
    ino_t ino = 0;
    /// The stat of every directory from "/" down to the parent of this one, as the walk found
    /// them (judged again for another Trust without a system call).
    std::vector<struct stat> above;
    /// The directory's own stat, from the walk or the latest check.
    struct stat self {};
    std::chrono::steady_clock::time_point walked;
    std::weak_ptr<Fd> open;
  };
  /// How long a walk stands in for the next ones in the same directory.
  static constexpr std::chrono::milliseconds kWalkTtl{1000};
  /// Bound of walked_: when full it is emptied (each directory is then walked once more).
  static constexpr std::size_t kMaxWalkedDirs = 1024;
  std::unordered_map<std::string, WalkedDir> walked_;
  /// Cleared when openat2 turns out not to be available (ENOSYS, EPERM): every use walks.
  bool reopen_works_ = true;
  /// Random bytes for temporary file names, drawn 4 KiB at a time (libsodium's randombytes_buf:
  /// one getrandom per ~42 names instead of one per name); `random_used_` of them are spent.
  std::vector<unsigned char> random_pool_;
  std::size_t random_used_ = 0;
  /// Fills `out` with `n` random bytes from random_pool_.
  void random_bytes(unsigned char* out, std::size_t n);
  /// Bound of swept_dirs_; see sweep_stale_temps_once.
  static constexpr std::size_t kMaxSweptDirs = 16384;
  /// Directories this instance has swept.
  std::unordered_set<DirKey, DirKeyHash> swept_dirs_;
  /// Empty: every path allowed. Else absolute, normalised directories.
  std::vector<std::string> allowed_roots_;
  /// The host's path policy plus the config's own entries.
  paths::DeniedRoots denied_;
};

namespace detail {
/// True for a temporary file name of any target: "." + at least one character + ".mesh-tmp-" +
/// 12 lower-case hex digits.
bool is_temp_name(std::string_view name);
/// One pass over the directory open as `dir_fd` (shown as `dir` in log lines): removes every
/// regular file whose name is_temp_name(), except `keep`, logging each through `log` (may be
/// null) as a line about resource file:`path`. Best effort. Returns false when the directory
/// could not be opened or read to its end. Exposed for tests.
bool sweep_stale_temps(int dir_fd, const std::string& dir, const std::string& keep,
                       sdk::Logger* log, const std::string& path);
}  // namespace detail

}  // namespace mesh::plugins::file
