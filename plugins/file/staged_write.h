// What a `file` write is made of before it becomes visible: the parent directory it was opened
// through and its temporary file. Shared by file_provider.cpp (one write) and batch_apply.cpp
// (a batch of writes, decision 0106); not part of any interface.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <fcntl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "mesh/sdk/resource.h"
#include "mesh/sdk/result.h"
#include "safe_path.h"

namespace mesh::plugins::file {

using paths::Fd;

/// A directory descriptor that several writes of one batch share (FileProvider::open_parent
/// hands the same one to every plan of a batch whose parent is that directory, while any of them
/// holds it). Closed when the last holder lets it go.
class SharedFd {
 public:
  SharedFd() = default;
  explicit SharedFd(std::shared_ptr<Fd> fd) noexcept : fd_(std::move(fd)) {}
  int get() const noexcept { return fd_ ? fd_->get() : -1; }
  bool valid() const noexcept { return fd_ && fd_->valid(); }
  const std::shared_ptr<Fd>& shared() const noexcept { return fd_; }

 private:
  std::shared_ptr<Fd> fd_;
};

struct Parent {
  SharedFd fd;
  int open_errno = 0;  // set when fd is not valid and the path was not refused
  std::optional<sdk::Error> refused;  // a symbolic link, an unsafe transition or a denied root on the way
  std::string dir;     // "/a/b" for "/a/b/c"; "/" for "/c"
  std::string base;    // "c"
  // The opened directory's identity, from the fstat of `fd` made by the walk (safe_path.cpp).
  dev_t dev = 0;
  ino_t ino = 0;
};

// A temporary file next to the target; unlinked on destruction unless committed (renamed).
class TempFile {
 public:
  // `lock`: another descriptor of the same open file, holding its flock(LOCK_EX) until the file
  // is renamed or unlinked (the write descriptor is closed before that, when staged): a stale-
  // temp sweep of another process writing into the same directory skips a locked temporary file.
  TempFile(int dir_fd, std::string name, std::string display, Fd fd, Fd lock = Fd())
      : dir_fd_(dir_fd),
        name_(std::move(name)),
        display_(std::move(display)),
        fd_(std::move(fd)),
        lock_(std::move(lock)) {}
  // A moved-from TempFile must not unlink the file its successor owns.
  TempFile(TempFile&& other) noexcept
      : dir_fd_(other.dir_fd_),
        name_(std::move(other.name_)),
        display_(std::move(other.display_)),
        fd_(std::move(other.fd_)),
        lock_(std::move(other.lock_)),
        committed_(std::exchange(other.committed_, true)) {}
  TempFile& operator=(TempFile&&) = delete;
  ~TempFile() {
    fd_.reset();
    if (!committed_) ::unlinkat(dir_fd_, name_.c_str(), 0);
    lock_.reset();  // released only once the name is gone
  }
  int fd() const noexcept { return fd_.get(); }
  Fd& file() noexcept { return fd_; }
  const std::string& name() const noexcept { return name_; }
  const std::string& display() const noexcept { return display_; }
  void commit() noexcept { committed_ = true; }

 private:
  int dir_fd_;
  std::string name_;
  std::string display_;
  Fd fd_;
  Fd lock_;
  bool committed_ = false;
};

/// A content write prepared up to its rename (FileProvider::stage_write): the temporary file is
/// written, chowned and chmod'ed (and fsync'ed when staged with sync), and closed.
struct StagedWrite {
  Parent parent;
  std::optional<TempFile> temp;
  sdk::State state;        ///< what the target will read as once renamed
  bool no_replace = false; ///< content not managed: never clobber a file that appeared meanwhile
};

/// A file whose owner or mode a batch changed without an fsync (update_metadata): its descriptor
/// and filesystem, synced with one syncfs per filesystem at the end of the batch.
struct UnsyncedFile {
  Fd fd;
  dev_t dev = 0;
};

/// The plan changes `content` or `content_base64` (a write through a temporary file).
bool has_content_change(const sdk::Plan& plan);
/// "content,mode": the plan's change paths without "properties.", or "none".
std::string change_list(const sdk::Plan& plan);

}  // namespace mesh::plugins::file
