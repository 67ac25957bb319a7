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
