// The jetstream-kv store: catching up with the stream and applying its operations to the
// local file (decision 87).
#include <algorithm>

#include "connection.h"
#include "import.h"
#include "jetstream_kv_store.h"
#include "mesh/support/sha256.h"
#include "sqlite_store.h"
#include "store_paths.h"

namespace mesh::stores::jetstream_kv {

using sdk::ErrorCode;
using sdk::Result;
using sqlite::Connection;

Result<void> JetStreamKvStore::catch_up() {
  // Numbered before the bounds are asked for: see rounds_started_ (decision 128).
  const std::uint64_t round = rounds_started_.fetch_add(1) + 1;
  MESH_TRY(bounds, log_->bounds());
  if (bounds.first > position_ + 1 && !gap_from_) gap_from_ = position_ + 1;  // purged before we read it
  if (bounds.first > position_ + 1) position_ = std::min(bounds.first, bounds.last + 1) - 1;
  if (bounds.last - position_ > kScanFrom && !gap_from_) {
    // Far behind (a new instance, a long stop): one ordered consumer instead of a request per
    // message. Whatever it does not deliver is read one by one below.
    MESH_TRY(log_->scan(position_ + 1, bounds.last, [&](LogMessage&& m) -> Result<void> {
      if (m.seq != position_ + 1 && !gap_from_) gap_from_ = position_ + 1;  // deleted in between
      if (m.subject != log_->op_subject()) {
        position_ = m.seq;
        return {};
      }
      MESH_TRY(applied, apply(m.seq, m.data));
      for (const auto& id : pending_ids_)
        if (id == applied.first) pending_result_ = std::move(applied.second);
      return {};
    }));
  }
  auto caught = catch_up_to(bounds.last);
  // Another instance's compaction may have purged what this catch-up was reading (decision 104):
  // the snapshot that replaces it lies after `bounds.last`. Look again (a few times) before
  // calling the gap final.
  for (int again = 0; again < 3 && !caught && gap_from_; ++again) {
    MESH_TRY(now, log_->bounds());
    if (now.last <= bounds.last) break;
    bounds = now;
    if (bounds.first > position_ + 1) position_ = std::min(bounds.first, bounds.last + 1) - 1;
    caught = catch_up_to(bounds.last);
  }
  if (caught) rounds_done_ = std::max(rounds_done_, round);
  return caught;
}

Result<void> JetStreamKvStore::catch_up_to(std::uint64_t limit) {
  while (position_ < limit) {
    const std::uint64_t seq = position_ + 1;
    MESH_TRY(msg, log_->get(seq));
    if (!msg || msg->subject != log_->op_subject()) {
      if (!msg && !gap_from_) gap_from_ = seq;  // deleted: an operation may be gone
      position_ = seq;                           // a part is read with its commit
      continue;
    }
    MESH_TRY(applied, apply(seq, msg->data));
    for (const auto& id : pending_ids_)
      if (id == applied.first) pending_result_ = std::move(applied.second);
  }
  if (gap_from_) return sdk::fail(gap_error());
  return {};
}

std::uint64_t JetStreamKvStore::lost_races() noexcept {
  std::lock_guard lock(mutex_);
  return lost_races_;
}

std::uint64_t JetStreamKvStore::reads_shared() noexcept {
  std::lock_guard lock(mutex_);
  return reads_shared_;
}

sdk::Error JetStreamKvStore::gap_error() const {
  return sdk::Error{ErrorCode::FailedPrecondition,
                    "jetstream-kv: stream '" + settings_.prefix + "' no longer holds its messages from sequence " +
                        std::to_string(*gap_from_) + " on (purged or deleted by hand?), and no snapshot follows: the "
                        "local file '" + local_path_ + "' cannot be brought up to date; restore the stream from a "
                        "backup, or migrate a sqlite store into a new one",
                    {}};
}

Result<std::pair<std::string, OpResult>> JetStreamKvStore::apply(std::uint64_t seq, const std::string& data) {
  if (!db_)  // an import whose file could not be opened again: nothing more is applied
    return sdk::fail(ErrorCode::Unavailable, "jetstream-kv: the local file '" + local_path_ + "' is not open");
  std::string inline_form;
  const std::string* body = &data;
  std::string id;
  auto malformed = [&](const std::string& why) -> OpResult {
    this->log().error("jetstream-kv operation skipped seq=" + std::to_string(seq) + " outcome=malformed " + why);
    return Result<void>(sdk::fail(ErrorCode::Failed, "jetstream-kv: the operation at stream sequence " +
                                                         std::to_string(seq) + " is malformed (" + why + ")"));
  };
  std::optional<OpResult> result;
  std::uint64_t first_seq = seq;  // of the operation's first message (its first part)
  {
    Reader r(data);
    const std::uint8_t version = r.u8();
    const std::uint8_t kind = r.u8();
    id = r.str();
    if (!r.ok() || version != kVersion) {
      result = malformed("unknown version");
    } else if (kind == kParts) {
      std::vector<std::uint64_t> parts(r.count(8));
      for (auto& p : parts) first_seq = std::min(first_seq, p = r.u64());
      const std::string digest = r.str();
      if (!r.ok() || !r.at_end()) {
        result = malformed("bad parts list");
      } else {
        for (std::size_t n = 0; n < parts.size() && !result; ++n) {
          MESH_TRY(part, log_->get(parts[n]));
          if (!part) {  // deleted: what this operation was is gone
            if (!gap_from_) gap_from_ = parts[n];
            return sdk::fail(gap_error());
          }
          if (part->subject != log_->part_subject(id, n))
            result = malformed("part " + std::to_string(n) + " missing");
          else
            inline_form += part->data;
        }
        if (!result && support::sha256_hex(inline_form) != digest) result = malformed("parts digest differs");
        body = &inline_form;
      }
    } else if (kind != kInline) {
      result = malformed("unknown kind");
    }
  }
  bool hook_ran = false;
  if (!result) {
    Reader r(*body);
    r.u8();
    r.u8();
    const bool same_id = r.str() == id;
    const auto method = static_cast<Method>(r.u8());
    if (gap_from_ && !(same_id && method == Method::Import)) {
      return sdk::fail(gap_error());  // only a whole image may follow a gap
    } else if (!same_id) {
      result = malformed("op id differs");
    } else if (method == Method::Import) {
      const std::string image = r.str();
      if (!r.ok() || !r.at_end()) {
        result = malformed("bad import");
      } else {
        // The whole file is replaced by the image, the applied sequence set inside it first.
        db_.reset();
        auto installed = install_image(image, local_path_, settings_.prefix, log_->created_ns(), seq);
        MESH_TRY(db, open_local());
        db_ = std::move(db);
        if (!installed) return sdk::fail(std::move(installed).error());
        hook_ran = true;
        gap_from_.reset();  // the image is the whole state: nothing before it is needed
        ops_since_snapshot_ = 0;
        bytes_since_snapshot_ = 0;
        image_bytes_ = image.size();
        image_seq_ = seq;
        image_first_seq_ = first_seq;
        result = Result<void>{};
      }
    } else {
      MESH_TRY(db_->with_connection([&](Connection& conn) -> Result<void> {
        conn.set_before_commit([seq, &hook_ran](Connection& c) -> Result<void> {
          MESH_TRY(st, c.prepare("UPDATE jetstream_log SET last_op_seq = ?1 WHERE id = 1"));
          st.bind(1, static_cast<std::int64_t>(seq));
          MESH_TRY(st.run());
          hook_ran = true;
          return {};
        });
        return {};
      }));
      result = apply_operation(*db_, method, r, seq);
      (void)db_->with_connection([](Connection& conn) -> Result<void> {
        conn.set_before_commit({});
        return {};
      });
    }
  }
  if (const sdk::Error* e = error_of(*result); e && retryable(e->code) && !hook_ran)
    return sdk::fail(*e);  // a local failure (disk full, busy): applied later, nothing skipped
  if (!hook_ran) {
    // Nothing committed (a refused write, or one that changed nothing): only the sequence moves.
    MESH_TRY(db_->with_connection([seq](Connection& conn) -> Result<void> {
      MESH_TRY(st, conn.prepare("UPDATE jetstream_log SET last_op_seq = ?1 WHERE id = 1"));
      st.bind(1, static_cast<std::int64_t>(seq));
      return st.run();
    }));
  }
  last_op_seq_ = seq;
  position_ = std::max(position_, seq);
  if (hook_ran) ++ops_since_snapshot_;  // an Import set it to 0 above; counted as one (compaction.cpp)
  // Every operation after the image takes the stream's room, applied or refused (decision 186).
  if (image_seq_ != seq) bytes_since_snapshot_ += body->size();
  return std::make_pair(std::move(id), std::move(*result));
}


}  // namespace mesh::stores::jetstream_kv
