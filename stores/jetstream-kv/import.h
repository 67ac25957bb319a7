// The `jetstream-kv` store's import of a `sqlite` store file (docs/decisions/0088): the whole
// database, copied consistently (VACUUM INTO), becomes the stream's first operation; applying it
// replaces the local file by that image (with the applied sequence written into the image before
// it is renamed into place: exactly once).
//
// Internal to the plugin. Thread safety: none (the store's mutex is held).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "mesh/sdk/result.h"

namespace mesh::stores::jetstream_kv {

/// A consistent copy of the sqlite store file `source` (read-only; it must be a sqlite store:
/// a schema_version table), made with VACUUM INTO a temporary file in `scratch_dir`, given to
/// `edit` (when set: e.g. to record where it came from) and read back as bytes. Errors:
/// InvalidArgument naming `import_sqlite` (missing, not a store), Unavailable (I/O), `edit`'s.
sdk::Result<std::string> snapshot_sqlite_file(
    const std::string& source, const std::string& scratch_dir,
    const std::function<sdk::Result<void>(const std::string& copy)>& edit = {});

/// The record an import adds to the image it publishes (decision record 189): namespace and key
/// of the sqlite store's records, its value {"digest":"sha256:<hex>","file":"<path>"} naming the
/// file the stream's state was imported from. Carried by compactions and backups like any record.
inline constexpr const char* kImportRecordNs = "jetstream-kv";
inline constexpr const char* kImportRecordKey = "import";
/// The "digest" of such a record's value ("" when there is none).
std::string import_record_digest(const std::string& value);

/// The SHA-256 of the file `path`'s bytes, "sha256:<64 hex>" (read in chunks): what an import
/// records of its file (decision record 189). Errors: InvalidArgument naming `import_sqlite`
/// (cannot be read).
sdk::Result<std::string> file_digest(const std::string& path);

/// Writes the database image `image` as the local file `local_path`: to a temporary file beside
/// it, with the jetstream_log row (stream, created_ns, last_op_seq = seq) set inside it, then
/// renamed over `local_path` (its -wal and -shm removed first). The caller has closed its
/// connection to `local_path`. Errors: Unavailable (I/O), Failed (the image is not a database).
sdk::Result<void> install_image(const std::string& image, const std::string& local_path, const std::string& stream,
                                std::int64_t created_ns, std::uint64_t seq);

}  // namespace mesh::stores::jetstream_kv
