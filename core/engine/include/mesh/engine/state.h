// The host's state directory: what it owns, what it applied, reports not yet acknowledged, and
// the lock that keeps one apply at a time. Every file is written atomically (temp, fsync, rename,
// fsync the directory), so a `kill -9` at any point leaves the old or the new record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::engine {

/// One owned resource: its name and the properties it was last applied with (drift repair and
/// prune need them even after the declaration that named them is gone).
struct OwnedResource {
  std::string resource;          ///< "type:id"
  sdk::Value properties;         ///< declared properties (defaults applied)
  /// Position of the resource in the apply order of the declaration that last recorded it.
  /// Prune removes in descending `order` (dependents before what they require).
  std::uint64_t order = 0;
  /// state_digest() of the state the provider read back when this host last applied (or found
  /// unchanged) the resource; "" when unknown. Sent in the report for the recovery copy, so that
  /// a host with wiped state removes an orphan only when it still finds exactly that state.
  std::string digest;
};

/// SHA-256 (hex) of a read-back State: of "nox-mesh state v1\n" and the JSON of its properties
/// with object members sorted by key at every level (so the order a provider sets them in does
/// not matter). Generic: the engine names no provider type; whatever a provider reads back
/// (a file's sha256, mode, owner; a package's version) is in it. Never throws except bad_alloc.
std::string state_digest(const sdk::Value& properties);

/// `<state_dir>/state.json`.
struct HostState {
  std::uint64_t applied_revision = 0;  ///< newest revision applied successfully (0: none)
  std::string applied_digest;          ///< its digest
  std::uint64_t last_revision = 0;     ///< newest revision attempted (applied or failed)
  std::string last_outcome;            ///< "applied", "failed", "refused" or ""
  std::vector<OwnedResource> owned;    ///< sorted by resource name
};

class StateDir {
 public:
  /// Opens (creating, mode 0700) the directory. Errors: PermissionDenied / Failed with the path;
  /// InvalidArgument when state.json is unreadable JSON (named, never silently reset).
  static sdk::Result<StateDir> open(const std::string& path);

  const std::string& path() const noexcept { return path_; }
  /// True when the directory had no state.json at open (new host, or wiped state).
  bool fresh() const noexcept { return fresh_; }

  const HostState& state() const noexcept { return state_; }
  /// The same state, for the apply lock holder to change in place: the engine records ownership
  /// here, so one ownership set is in memory during an apply, not the engine's copy beside this
  /// one (at 20,000 resources each copy held every owned property: docs/benchmarks.md, "First
  /// apply: memory"). The caller keeps `owned` sorted by resource and names what it changed to
  /// save_change() / save_changes() (or calls save()), passing this state back: those then write
  /// from it and copy nothing. A change made here and not yet saved is not durable, but state()
  /// shows it. Not thread-safe: the apply lock holder only.
  HostState& mutable_state() noexcept { return state_; }
  /// Replaces state.json atomically (a snapshot) and drops the journal: O(size of the state).
  /// `state` may be mutable_state() (then nothing is copied; `owned` is sorted in place if it is
  /// not sorted). Errors: PermissionDenied / Failed naming the file.
  sdk::Result<void> save(const HostState& state);
  /// Records one ownership change durably in O(1): appends one line to `state.journal` and
  /// fdatasyncs it, instead of rewriting state.json. `state` is the caller's full state after the
  /// change; `resource` ("type:id") is the entry that changed — present in `state.owned` (owned
  /// now, or its properties/order changed) or absent (forgotten). Only that entry is taken from
  /// `state`; revisions and outcomes are written by the next save(). When the journal has grown
  /// past 4 MiB it is folded into a snapshot (save(state)). Errors: as save(); on error the
  /// in-memory state is unchanged (when `state` is another object than mutable_state(); when it
  /// is that one, it keeps the caller's change). Format and crash rules: see state.cpp.
  /// Thread safety: not thread-safe; the apply lock holder only.
  sdk::Result<void> save_change(const HostState& state, const std::string& resource);

  /// One target of a batch (docs/decisions/0106): written to the journal before any of the
  /// batch's writes becomes visible.
  struct IntentEntry {
    std::string resource;     ///< "type:id"
    bool existed = false;     ///< the provider's read found the resource before this apply
    std::uint64_t order = 0;  ///< its position in the declaration (OwnedResource::order)
    sdk::Value properties;    ///< its declared properties (OwnedResource::properties)
  };
  /// Appends one `{"intent": [...]}` line naming every target of a batch and fdatasyncs it (one
  /// sync for the batch). An intent whose every entry existed adopts nothing (below), so it is
  /// not written at all (decision 0200: a repair of files that exist journals nothing before its
  /// writes). Until a later save_changes() (or save()) settles it, the intent stands:
  /// should the process die first, the next open() records as owned every entry that did not
  /// exist before (`existed` false) and is not owned yet — the mesh may have created it, so it
  /// must be prunable — and never an entry that existed before (a file that was there and that
  /// no apply verified is never adopted, so never pruned). With no snapshot yet, writes one first.
  /// Errors: as save_change(). Thread safety: the apply lock holder only.
  sdk::Result<void> save_intent(const std::vector<IntentEntry>& entries);
  /// Records the ownership changes of a batch and settles the open intent: one line per entry of
  /// `resources` (as save_change() would write it, taken from `state`), then `{"settled": true}`,
  /// in one write, **not synced** (decision 0200): the lines are durable at the next sync of the
  /// journal (save_change(), an intent with a new entry) or the next snapshot (save();
  /// the engine ends every apply that wrote an intent with one). Should the machine stop before
  /// that, the intent is open at the next open(): what it adopts is what the batch may have
  /// created, never what existed before; a kill -9 of the process loses nothing written.
  /// `resources` may be empty (nothing verified: settles only; nothing is written when no intent
  /// is open either).
  /// A kill -9 during the write leaves a prefix of complete lines (each one a change the engine
  /// verified) and the intent still open. Errors: as save_change().
  sdk::Result<void> save_changes(const HostState& state, const std::vector<std::string>& resources);

  /// True when state.json holds all that state() held when it was read or last saved, as far as
  /// this object knows: a snapshot exists, no journal line stands beside it (none written since,
  /// none replayed at open) and open() adopted nothing. A caller that changed nothing in
  /// mutable_state() since may then skip save() (the engine does, for an apply that changed
  /// nothing). Not thread-safe: the apply lock holder only.
  bool snapshot_current() const noexcept {
    return (!fresh_ || generation_ > 0) && journal_bytes_ == 0 && adopted_.empty();
  }

  /// The last applied declaration text (`applied.json`), or nullopt.
  sdk::Result<std::optional<std::string>> applied_declaration() const;
  /// Writes `text` as applied.json at once (write_file_atomic). Errors: as save().
  sdk::Result<void> save_applied_declaration(const std::string& text);
  /// The first half of save_applied_declaration, for an apply that does not keep its text: when
  /// applied.json already holds exactly `text` (compared 64 KiB at a time, nothing held) it
  /// writes nothing and returns false; else it writes `text` to `applied.json.next` (0600,
  /// fsynced; a leftover of an apply killed before its commit is overwritten) and returns true.
  /// The text is then the caller's to release. commit_applied_declaration() renames it into place,
  /// discard_applied_declaration() removes it. Errors: as save(), naming applied.json.next (nothing
  /// is staged then). Thread safety: the apply lock holder only (the staged file has one name).
  sdk::Result<bool> stage_applied_declaration(std::string_view text);
  /// Renames the staged text over applied.json and fsyncs the directory (the atomic write's last
  /// steps); nothing when none is staged. Errors: as save().
  sdk::Result<void> commit_applied_declaration();
  /// Removes the staged text, if any (an apply that failed, was cancelled or restarts the host).
  void discard_applied_declaration() noexcept;

  /// Takes the exclusive apply lock (`<dir>/lock`, flock). Blocks up to `timeout_ms`; errors:
  /// FailedPrecondition "another mesh-host (pid N) holds <dir>/lock". Released by unlock() or
  /// when the process dies (so kill -9 never leaves a stale lock).
  sdk::Result<void> lock(int timeout_ms);
  void unlock() noexcept;

  /// Outbox of reports not yet acknowledged: `<dir>/outbox/<key>.json`, written atomically.
  sdk::Result<void> outbox_put(const std::string& key, const std::string& body);
  /// All pending (key, body), oldest key first (keys sort as zero-padded numbers/strings).
  sdk::Result<std::vector<std::pair<std::string, std::string>>> outbox_list() const;
  sdk::Result<void> outbox_remove(const std::string& key);

  StateDir(StateDir&&) noexcept;
  StateDir& operator=(StateDir&&) noexcept;
  ~StateDir();

 private:
  StateDir() = default;
  std::string path_;
  bool fresh_ = false;
  HostState state_;
  int lock_fd_ = -1;
  /// Generation of state.json; a journal counts only when its header names the same one.
  std::uint64_t generation_ = 0;
  int journal_fd_ = -1;
  std::size_t journal_bytes_ = 0;
  /// Lines were appended to the journal since its last fdatasync.
  bool journal_unsynced_ = false;
  /// An intent line was appended and not settled yet.
  bool intent_open_ = false;
  /// Entries an unsettled intent made owned at open(); the next append writes them as `own`
  /// lines and settles the intent before its own line (so a later open does not adopt again
  /// over what this process changed since).
  std::vector<std::string> adopted_;
  /// applied.json.next holds a staged text (stage_applied_declaration).
  bool staged_ = false;
  void close_journal() noexcept;
  /// Writes a snapshot of `*next` (nullptr: of state_) with generation + 1, then drops the
  /// journal; on success `*next` becomes state_ (moved).
  sdk::Result<void> write_snapshot(HostState* next);
  /// Appends `lines` (complete lines) to the journal, after the adopted_ prefix, and, with
  /// `sync`, fdatasyncs it (which makes the unsynced lines before them durable too).
  sdk::Result<void> append(const std::string& lines, bool sync);
  sdk::Result<void> save_changes_impl(const HostState& state, const std::vector<std::string>& resources,
                                      bool settle);
};

}  // namespace mesh::engine
