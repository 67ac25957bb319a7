// The `jetstream-kv` store's compaction (decision 104): the local file's image published as a
// snapshot operation (an Import, which replaces the whole state wherever it is applied), then
// every message before it purged, so that the stream holds one image and what came after it.
#include <algorithm>
#include <filesystem>

#include "codec.h"
#include "import.h"
#include "jetstream_kv_store.h"
#include "store_paths.h"

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;

Result<JetStreamKvStore::Compacted> JetStreamKvStore::compact() noexcept {
  // Published like every write: rendered (the image made) on the caught-up state and committed
  // with the compare-and-swap on the last operation applied, so the image holds every operation
  // before it and none after; a lost race catches up and makes the image again.
  auto snap = write<void>("compact", Method::Import, [&]() -> Result<std::string> {
    const auto dir = std::filesystem::path(local_path_).parent_path().string();
    MESH_TRY(image, snapshot_sqlite_file(local_path_, dir.empty() ? "." : dir));
    Writer w;
    w.str(image);
    return std::move(w.bytes());
  });
  if (!snap) return sdk::fail(std::move(snap).error());
  return sdk::guard("compact", [&]() -> Result<Compacted> {
    std::lock_guard lock(mutex_);
    if (!log_) return sdk::fail(ErrorCode::FailedPrecondition, "jetstream-kv store: compact called before open()");
    // The newest image applied (this one, or one another instance made after it): nothing before
    // its first part is needed by anyone. Messages between its first part and its commit are kept
    // (a concurrent writer's parts whose commit lost the race to it are harmless garbage).
    Compacted c;
    c.snapshot_seq = image_seq_;
    MESH_TRY(purged, log_->purge_before(image_first_seq_));
    c.purged = purged;
    this->log().info("jetstream-kv stream compacted stream=" + settings_.prefix + " snapshot_seq=" +
                     std::to_string(c.snapshot_seq) + " purged=" + std::to_string(c.purged));
    return c;
  });
}

/// The bytes after which the stream is compacted: compact_after_bytes, or the last image's size
/// when larger (a compaction then publishes at most as much as it purges). 0: never by bytes.
static std::uint64_t byte_threshold(std::int64_t compact_after_bytes, std::uint64_t image_bytes) {
  if (compact_after_bytes <= 0) return 0;
  return std::max(static_cast<std::uint64_t>(compact_after_bytes), image_bytes);
}

void JetStreamKvStore::maybe_compact() noexcept {
  if (compact_after_ <= 0) return;
  bool by_bytes = false;
  {
    std::lock_guard lock(mutex_);
    if (!db_ || !log_) return;
    const bool by_ops = ops_since_snapshot_ >= static_cast<std::uint64_t>(compact_after_) &&
                        ops_since_snapshot_ >= compact_retry_at_;
    const std::uint64_t bytes = byte_threshold(compact_after_bytes_, image_bytes_);
    by_bytes = bytes > 0 && bytes_since_snapshot_ >= bytes && bytes_since_snapshot_ >= compact_retry_bytes_;
    if (!by_ops && !by_bytes) return;
  }
  // One compaction at a time in this instance; two instances racing: the compare-and-swap lets
  // one image land, the other is made again after it (and then finds little to purge).
  if (compacting_.exchange(true)) return;
  struct Reset {
    std::atomic<bool>& b;
    ~Reset() { b = false; }
  } reset{compacting_};
  auto c = compact();
  std::lock_guard lock(mutex_);
  if (c) {
    compact_retry_at_ = 0;
    compact_retry_bytes_ = 0;
    if (by_bytes) log().info("jetstream-kv stream compacted by size stream=" + settings_.prefix);
    return;
  }
  // Not at every write after a failure: again after another quarter of compact_after (of the
  // byte threshold).
  compact_retry_at_ = ops_since_snapshot_ + static_cast<std::uint64_t>(compact_after_) / 4;
  compact_retry_bytes_ = bytes_since_snapshot_ + byte_threshold(compact_after_bytes_, image_bytes_) / 4;
  log().warn("jetstream-kv stream not compacted stream=" + settings_.prefix + " reason=\"" + c.error().describe() +
             "\" (tried again after " + std::to_string(compact_after_ / 4) + " more operations or a quarter of the "
             "byte threshold)");
}

std::uint64_t JetStreamKvStore::operations_since_snapshot() noexcept {
  std::lock_guard lock(mutex_);
  return ops_since_snapshot_;
}

std::uint64_t JetStreamKvStore::bytes_since_snapshot() noexcept {
  std::lock_guard lock(mutex_);
  return bytes_since_snapshot_;
}

}  // namespace mesh::stores::jetstream_kv
