// The `jetstream-kv` store's import of a `sqlite` store file (docs/decisions/0088): the whole
// database, copied consistently (VACUUM INTO), becomes the stream's first operation; applying it
// replaces the local file by that image (with the applied sequence written into the image before
// it is renamed into place: exactly once).
//
// Internal to the plugin. Thread safety: none (the store's mutex is held).
#pragma once

#include <cstdint>
#include <string>

#include "mesh/sdk/result.h"

namespace mesh::stores::jetstream_kv {

/// A consistent copy of the sqlite store file `source` (read-only; it must be a sqlite store:
/// a schema_version table), made with VACUUM INTO a temporary file beside `scratch_dir` and read
/// back as bytes. Errors: InvalidArgument naming `import_sqlite` (missing, not a store),
/// Unavailable (I/O).
sdk::Result<std::string> snapshot_sqlite_file(const std::string& source, const std::string& scratch_dir);

/// Writes the database image `image` as the local file `local_path`: to a temporary file beside
/// it, with the jetstream_log row (stream, created_ns, last_op_seq = seq) set inside it, then
/// renamed over `local_path` (its -wal and -shm removed first). The caller has closed its
/// connection to `local_path`. Errors: Unavailable (I/O), Failed (the image is not a database).
sdk::Result<void> install_image(const std::string& image, const std::string& local_path, const std::string& stream,
                                std::int64_t created_ns, std::uint64_t seq);

}  // namespace mesh::stores::jetstream_kv
