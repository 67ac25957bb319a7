// Files written so that a crash leaves either the old or the new content, never a torn file.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "mesh/sdk/result.h"

namespace mesh::common {

/// Writes `data` to `path` atomically: a temp file in the same directory (O_EXCL), fsync, rename
/// over `path`, fsync the directory. `mode` is the new file's permission bits. Errors: Failed /
/// PermissionDenied with the path and strerror; the old file is untouched on error and no temp
/// file is left behind.
sdk::Result<void> write_file_atomic(const std::string& path, std::string_view data,
                                    mode_t mode = 0644);

/// write_file_atomic for content written in pieces, so that it is never whole in memory (the
/// host's state snapshot: ~5 MB at 20,000 owned resources). create() makes the temp file beside
/// `path` (O_EXCL, `mode`); write() appends to it; commit() fsyncs it, renames it over `path` and
/// fsyncs the directory — the same steps, crash rules and errors as write_file_atomic: a crash
/// or an error leaves the old file or the new one, never a torn one. A writer destroyed without
/// a successful commit() removes its temp file; `path` is untouched.
/// Errors name the temp file or `path` with strerror: PermissionDenied (EACCES, EPERM), NotFound
/// (ENOENT), Failed. After an error of write() or commit(), or after commit(), further calls fail
/// (Failed: "not open"). Not thread-safe; movable, not copyable.
class AtomicFileWriter {
 public:
  static sdk::Result<AtomicFileWriter> create(const std::string& path, mode_t mode = 0644);
  /// Appends `data` (no buffer of its own: one write(2) or more, EINTR retried).
  sdk::Result<void> write(std::string_view data);
  /// fsync, close, rename over `path`, fsync the directory.
  sdk::Result<void> commit();

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

 private:
  AtomicFileWriter() = default;
  /// Closes and removes the temp file (nothing when there is none).
  void abandon() noexcept;
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
};

/// Reads a whole file, refusing files over `max_bytes`. Errors: NotFound, PermissionDenied,
/// InvalidArgument (too large), Failed.
sdk::Result<std::string> read_file(const std::string& path, std::size_t max_bytes = 64 << 20);

/// A file's bytes followed by kPadding zero bytes that are not part of it, so that a parser
/// that reads ahead of its position (simdjson) can read it in place, without a padded copy.
struct PaddedText {
  static constexpr std::size_t kPadding = 64;
  std::unique_ptr<char[]> data;  ///< size + kPadding bytes; the padding is zero
  std::size_t size = 0;
  std::string_view view() const noexcept { return {data.get(), size}; }
};

/// read_file into a PaddedText: the same checks, errors and messages.
sdk::Result<PaddedText> read_file_padded(const std::string& path, std::size_t max_bytes = 64 << 20);

/// Creates a directory and its parents with `mode` (existing ones are left as they are).
sdk::Result<void> make_dirs(const std::string& path, mode_t mode = 0755);

}  // namespace mesh::common
