// The host's state directory.
//
// Layout of <dir> (created mode 0700; every file written with write_file_atomic, mode 0600):
//   state.json      the HostState, see below (a snapshot)
//   state.journal   ownership changes since that snapshot, one JSON line each (see below)
//   applied.json    the text of the last successfully applied declaration, byte for byte
//   applied.json.next  the text of the apply under way, staged before it touches anything and
//                   renamed over applied.json at its commit (stage_applied_declaration)
//   outbox/<key>.json  reports not yet acknowledged by the control plane
//   lock            flock()ed by the process applying; holds that process's pid ("1234\n")
//
// state.json (compact JSON, written as sdk::Value::to_json would, read with common::parse_json_members):
//   {"format": 1,
//    "applied_revision": 43,              // newest revision applied successfully; 0 = none
//    "applied_digest": "<sha256 hex>",    // its digest; "" when none
//    "last_revision": 44,                 // newest revision attempted
//    "last_outcome": "failed",            // "applied" | "failed" | "refused" | ""
//    "owned": [                           // sorted by "resource"
//      {"resource": "file:/etc/motd",     // type:id
//       "order": 0,                       // position in the apply order that recorded it
//       "properties": {"content": "hi\n", "mode": "0644", "ensure": "present"},
//       "digest": "…"}]}                 // optional: state_digest() of the read-back state
//    "generation": 7}                     // bumped by every snapshot; absent = 0
// Revisions are stored as JSON integers (int64). Unknown members are refused, as is a format
// other than 1: a state file this program does not understand is an error, never a reset.
//
// state.journal: rewriting state.json for every resource applied made a first apply of n
// resources cost O(n²) bytes (2,000 files: 27 s, mostly writing state). Instead, each ownership
// change is appended and fdatasync'ed:
//   {"journal":1,"generation":7}                                   header: the snapshot it follows
//   {"own":{"resource":"file:/etc/motd","order":0,"properties":{…}}}   owned / updated
//   {"forget":"file:/etc/old"}                                       no longer owned
//   {"intent":[{"resource":"file:/a","existed":false,"order":3,"properties":{…}}, …]}
//                                   a batch's targets, before any is visible (decision 0106)
//   {"settled":true}                the intent before it is settled (its changes precede it)
// An intent still open at the end of the journal (a kill -9 inside a batch) makes every entry
// with "existed":false owned, unless owned already; an entry that existed before is never adopted.
// An intent whose entries all existed is not written (it would adopt nothing). Every line is
// fdatasync'ed when appended except a batch's settling lines (decision 0200): those are made
// durable by the next sync of the journal or the next snapshot; losing them in a machine's stop
// leaves the intent open.
// At open the journal is replayed over the snapshot when its generation matches (otherwise it is
// a leftover of a snapshot whose unlink did not reach the disk, and is ignored). A last line
// without its newline is a torn append (kill -9 during write) and is dropped — that change was
// never acknowledged to the engine; any other bad line is an error naming the line. save()
// writes a new snapshot with generation + 1, then unlinks the journal.
#include "mesh/engine/state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "mesh/common/fs.h"
#include "mesh/common/json.h"
#include "mesh/sdk/resource.h"

namespace mesh::engine {
namespace {

using sdk::ErrorCode;
using sdk::Value;

constexpr std::int64_t kFormat = 1;
/// state.json can be large (every owned resource with its declared properties).
constexpr std::size_t kMaxStateBytes = 64u << 20;

sdk::ErrorCode code_for(std::error_code ec) {
  if (ec == std::errc::permission_denied || ec == std::errc::operation_not_permitted)
    return ErrorCode::PermissionDenied;
  if (ec == std::errc::no_such_file_or_directory) return ErrorCode::NotFound;
  return ErrorCode::Failed;
}

sdk::ErrorCode code_for_errno(int err) { return code_for(std::error_code(err, std::generic_category())); }

/// Writes the snapshot of `st` (generation `generation`) to `file` a piece at a time: the text is
/// built in a buffer of kSnapshotChunk bytes that is written out whenever it is full, so the
/// snapshot is never whole in memory (at 20,000 owned resources it is ~5.8 MB, and it was the
/// largest single allocation at the end of a first apply: docs/benchmarks.md, "The end of an
/// apply"). The owned entries are written straight from `st`, not through a Value tree of them.
/// Same text as Value::to_json of the whole state would give.
constexpr std::size_t kSnapshotChunk = 256u << 10;

sdk::Result<void> write_snapshot_text(const HostState& st, std::uint64_t generation, common::AtomicFileWriter& file) {
  Value root = Value::object();
  root.set("format", kFormat);
  root.set("applied_revision", static_cast<std::int64_t>(st.applied_revision));
  root.set("applied_digest", st.applied_digest);
  root.set("last_revision", static_cast<std::int64_t>(st.last_revision));
  root.set("last_outcome", st.last_outcome);
  std::string out;
  out.reserve(kSnapshotChunk + 4096);
  root.write_json(out);
  out.pop_back();  // the closing brace
  out += ",\"owned\":[";
  for (std::size_t i = 0; i < st.owned.size(); ++i) {
    const OwnedResource& o = st.owned[i];
    if (i) out += ',';
    out += "{\"resource\":";
    Value::write_json_string(out, o.resource);
    out += ",\"order\":";
    out += std::to_string(static_cast<std::int64_t>(o.order));
    out += ",\"properties\":";
    o.properties.write_json(out);
    if (!o.digest.empty()) {
      out += ",\"digest\":";
      Value::write_json_string(out, o.digest);
    }
    out += '}';
    if (out.size() >= kSnapshotChunk) {
      if (auto ok = file.write(out); !ok) return ok;
      out.clear();
    }
  }
  out += "],\"generation\":" + std::to_string(static_cast<std::int64_t>(generation)) + "}\n";
  return file.write(out);
}

constexpr std::size_t kJournalCompactBytes = 4u << 20;

std::string journal_header(std::uint64_t generation) {
  return "{\"journal\":1,\"generation\":" + std::to_string(generation) + "}\n";
}

// The journal lines are written straight from the entries, as serialise() writes the snapshot:
// no Value tree (a copy of the properties) per line. Same text as Value::to_json would give.
void write_owned_fields(std::string& out, const std::string& resource, std::uint64_t order,
                        const Value& properties) {
  out += "{\"resource\":";
  Value::write_json_string(out, resource);
  out += ",\"order\":" + std::to_string(static_cast<std::int64_t>(order)) + ",\"properties\":";
  properties.write_json(out);
}

std::string journal_own(const OwnedResource& o) {
  std::string out = "{\"own\":";
  write_owned_fields(out, o.resource, o.order, o.properties);
  if (!o.digest.empty()) {
    out += ",\"digest\":";
    Value::write_json_string(out, o.digest);
  }
  out += "}}\n";
  return out;
}

std::string journal_forget(const std::string& resource) {
  Value root = Value::object();
  root.set("forget", resource);
  return root.to_json() + "\n";
}

std::vector<OwnedResource>::iterator find_in(std::vector<OwnedResource>& owned, const std::string& name) {
  auto it = std::lower_bound(owned.begin(), owned.end(), name,
                             [](const OwnedResource& o, const std::string& n) { return o.resource < n; });
  return it != owned.end() && it->resource == name ? it : owned.end();
}

void apply_own(std::vector<OwnedResource>& owned, OwnedResource o) {
  auto it = std::lower_bound(owned.begin(), owned.end(), o.resource,
                             [](const OwnedResource& a, const std::string& n) { return a.resource < n; });
  if (it != owned.end() && it->resource == o.resource) *it = std::move(o);
  else owned.insert(it, std::move(o));
}

void apply_forget(std::vector<OwnedResource>& owned, const std::string& name) {
  if (auto it = find_in(owned, name); it != owned.end()) owned.erase(it);
}

constexpr const char* kSettledLine = "{\"settled\":true}\n";

std::string journal_intent(const std::vector<StateDir::IntentEntry>& entries) {
  std::string out = "{\"intent\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (i) out += ',';
    out += "{\"resource\":";
    Value::write_json_string(out, e.resource);
    out += e.existed ? ",\"existed\":true" : ",\"existed\":false";
    out += ",\"order\":" + std::to_string(static_cast<std::int64_t>(e.order)) + ",\"properties\":";
    e.properties.write_json(out);
    out += '}';
  }
  out += "]}\n";
  return out;
}

/// Replays `text` (the journal) over `st` when its header names `generation`. Returns the byte
/// length of the complete lines that count (0: ignore the journal), or an error naming the line.
/// `adopted`: the entries an intent left open at the end made owned (see the file comment).
sdk::Result<std::size_t> replay_journal(std::string_view text, std::uint64_t generation, HostState& st,
                                        const std::string& file, std::vector<std::string>& adopted) {
  std::vector<OwnedResource> open_intent;  // entries with existed=false of the open intent
  bool intent_open = false;
  const std::size_t first_end = text.find('\n');
  if (first_end == std::string_view::npos) return std::size_t{0};  // torn header
  if (text.substr(0, first_end + 1) != journal_header(generation)) return std::size_t{0};  // stale
  std::size_t pos = first_end + 1;
  std::size_t line_no = 1;
  while (pos < text.size()) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) break;  // torn last append: never acknowledged
    ++line_no;
    auto bad = [&](const std::string& why) {
      return sdk::fail(ErrorCode::InvalidArgument,
                       "state journal " + file + " line " + std::to_string(line_no) + " is not valid: " + why);
    };
    common::JsonLimits limits;
    limits.max_bytes = kMaxStateBytes;
    limits.max_depth = 64;
    auto parsed = common::parse_json(text.substr(pos, end - pos), limits);
    if (!parsed) return bad(parsed.error().describe());
    Value& line = *parsed;
    if (!line.is_object() || line.as_object().size() != 1)
      return bad("not {\"own\": …}, {\"forget\": …}, {\"intent\": […]} or {\"settled\": true}");
    auto& [key, v] = line.as_object().front();
    if (key == "forget" && v.is_string()) {
      apply_forget(st.owned, v.as_string());
    } else if (key == "settled" && v.is_bool() && v.as_bool()) {
      intent_open = false;
      open_intent.clear();
    } else if (key == "intent" && v.is_array()) {
      open_intent.clear();
      for (auto& e : v.as_array()) {
        const Value* res = e.find("resource");
        const Value* existed = e.find("existed");
        const Value* order = e.find("order");
        Value* props = nullptr;
        if (e.is_object())
          for (auto& [k, pv] : e.as_object())
            if (k == "properties") props = &pv;
        if (!res || !res->is_string() || !existed || !existed->is_bool() || !order || !order->is_int() ||
            order->as_int() < 0 || !props || !props->is_object() || e.as_object().size() != 4u)
          return bad("intent entry is not {\"resource\", \"existed\", \"order\", \"properties\"}");
        if (auto rid = sdk::ResourceId::parse(res->as_string()); !rid) return bad(rid.error().message);
        if (!existed->as_bool())
          open_intent.push_back(OwnedResource{res->as_string(), std::move(*props),
                                              static_cast<std::uint64_t>(order->as_int()), std::string()});
      }
      intent_open = true;
    } else if (key == "own" && v.is_object()) {
      const Value* res = v.find("resource");
      const Value* order = v.find("order");
      Value* props = nullptr;
      for (auto& [k, pv] : v.as_object())
        if (k == "properties") props = &pv;
      const Value* digest = v.find("digest");
      if (!res || !res->is_string() || !order || !order->is_int() || order->as_int() < 0 || !props ||
          !props->is_object() || (digest && !digest->is_string()) ||
          v.as_object().size() != (digest ? 4u : 3u))
        return bad("own is not {\"resource\", \"order\", \"properties\"[, \"digest\"]}");
      if (auto rid = sdk::ResourceId::parse(res->as_string()); !rid) return bad(rid.error().message);
      apply_own(st.owned, OwnedResource{res->as_string(), std::move(*props),
                                        static_cast<std::uint64_t>(order->as_int()),
                                        digest ? digest->as_string() : std::string()});
    } else {
      return bad("not {\"own\": …}, {\"forget\": …}, {\"intent\": […]} or {\"settled\": true}");
    }
    pos = end + 1;
  }
  if (intent_open)
    for (auto& o : open_intent)
      if (find_in(st.owned, o.resource) == st.owned.end()) {
        adopted.push_back(o.resource);
        apply_own(st.owned, std::move(o));
      }
  return pos;
}

/// One entry of `owned` as written (moved out of `item`), or why it is not one.
sdk::Result<OwnedResource> owned_entry(Value& item, const std::string& where) {
  const Value* res = item.find("resource");
  const Value* order = item.find("order");
  Value* props = nullptr;
  if (item.is_object())
    for (auto& [k, pv] : item.as_object())
      if (k == "properties") props = &pv;
  const Value* digest = item.is_object() ? item.find("digest") : nullptr;
  if (!item.is_object() || !res || !res->is_string() || !order || !order->is_int() || order->as_int() < 0 ||
      !props || !props->is_object() || (digest && !digest->is_string()) ||
      item.as_object().size() != (digest ? 4u : 3u))
    return sdk::fail(ErrorCode::InvalidArgument,
                     where + " is not {\"resource\", \"order\", \"properties\"[, \"digest\"]}");
  auto rid = sdk::ResourceId::parse(res->as_string());
  if (!rid) return sdk::fail(ErrorCode::InvalidArgument, where + ": " + rid.error().message);
  return OwnedResource{res->as_string(), std::move(*props), static_cast<std::uint64_t>(order->as_int()),
                       digest ? digest->as_string() : std::string()};
}

// state.json is read member by member and `owned` entry by entry (common::parse_json_members):
// each entry's properties move into the HostState as the entry is read, so neither a DOM of the
// text nor a Value tree of the whole state exists beside the state (at 20,000 owned resources
// that was the no-op apply's peak: docs/benchmarks.md, "Parse without a whole tree"). The checks
// and their messages are those of a read of the whole tree: `format` first, then the first
// problem in document order.
sdk::Result<HostState> deserialise(const common::PaddedText& text, const std::string& file,
                                   std::uint64_t& generation) {
  auto bad = [&](const std::string& why) {
    return sdk::fail(ErrorCode::InvalidArgument, "state file " + file + " is not valid: " + why);
  };
  common::JsonLimits limits;
  limits.max_bytes = kMaxStateBytes;
  limits.max_depth = 64;
  HostState st;
  bool have_owned = false;
  bool is_object = true;
  const Value* format_seen = nullptr;
  Value format;
  std::string first_problem;  // the first problem after `format`'s, in document order
  auto problem = [&](std::string why) {
    if (first_problem.empty()) first_problem = std::move(why);
  };
  auto revision = [](const Value& v, std::uint64_t& out) -> bool {
    if (!v.is_int() || v.as_int() < 0) return false;
    out = static_cast<std::uint64_t>(v.as_int());
    return true;
  };
  common::JsonMembers reader;
  reader.list_key = "owned";
  reader.count_list = true;  // every entry is kept: one allocation of the list, no doublings
  reader.other_root = [&](Value) -> sdk::Result<void> {
    is_object = false;
    return {};
  };
  reader.member = [&](std::string_view key, Value v) -> sdk::Result<void> {
    if (key == "format") {
      format = std::move(v);
      format_seen = &format;
    } else if (key == "generation") {
      if (!revision(v, generation)) problem(std::string(key) + " is not an integer ≥ 0");
    } else if (key == "applied_revision") {
      if (!revision(v, st.applied_revision)) problem(std::string(key) + " is not an integer ≥ 0");
    } else if (key == "last_revision") {
      if (!revision(v, st.last_revision)) problem(std::string(key) + " is not an integer ≥ 0");
    } else if (key == "applied_digest" || key == "last_outcome") {
      if (!v.is_string()) problem(std::string(key) + " is not a string");
      else (key == "applied_digest" ? st.applied_digest : st.last_outcome) = std::move(v.as_string());
    } else if (key == "owned") {
      problem("owned is not a list");  // a list is handed over element by element instead
    } else {
      problem("unknown member '" + std::string(key) + "'");
    }
    return {};
  };
  reader.list_begin = [&](std::size_t count) -> sdk::Result<void> {
    have_owned = true;
    st.owned.reserve(count);
    return {};
  };
  reader.element = [&](std::size_t i, Value& item) -> sdk::Result<void> {
    if (!first_problem.empty()) return {};  // the state is refused anyway: keep nothing more
    auto entry = owned_entry(item, "owned[" + std::to_string(i) + "]");
    if (!entry) problem(entry.error().message);
    else st.owned.push_back(std::move(*entry));
    return {};
  };
  if (auto read = common::parse_json_members(text, limits, reader); !read) return bad(read.error().describe());
  if (!is_object) return bad("not a JSON object");
  if (!format_seen || !format_seen->is_int() || format_seen->as_int() != kFormat)
    return bad("format is not " + std::to_string(kFormat));
  if (!first_problem.empty()) return bad(first_problem);
  if (!have_owned) return bad("owned is missing");
  std::sort(st.owned.begin(), st.owned.end(),
            [](const OwnedResource& a, const OwnedResource& b) { return a.resource < b.resource; });
  for (std::size_t i = 1; i < st.owned.size(); ++i)
    if (st.owned[i].resource == st.owned[i - 1].resource)
      return bad("resource " + st.owned[i].resource + " is listed twice in owned");
  return st;
}

/// Outbox keys become file names: [A-Za-z0-9._-], not starting with '.', at most 128 bytes.
bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 128 || key[0] == '.') return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
  });
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Numbers in numeric order (whether or not they were zero-padded), then other keys by bytes.
bool key_less(const std::string& a, const std::string& b) {
  const bool da = all_digits(a), db = all_digits(b);
  if (da && db) {
    auto strip = [](const std::string& s) {
      const auto nz = s.find_first_not_of('0');
      return nz == std::string::npos ? std::string_view() : std::string_view(s).substr(nz);
    };
    const auto sa = strip(a), sb = strip(b);
    if (sa.size() != sb.size()) return sa.size() < sb.size();
    if (sa != sb) return sa < sb;
    return a < b;
  }
  if (da != db) return da;
  return a < b;
}

}  // namespace

sdk::Result<StateDir> StateDir::open(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return sdk::fail(ErrorCode::InvalidArgument, "state directory path is empty");
  for (const std::string& dir : {path, path + "/outbox"}) {
    std::error_code ec;
    const bool created = fs::create_directories(dir, ec);
    if (ec)
      return sdk::fail(code_for(ec), "cannot create state directory " + dir + ": " + ec.message());
    if (created && ::chmod(dir.c_str(), 0700) != 0)
      return sdk::fail(code_for_errno(errno),
                       "cannot set mode 0700 on " + dir + ": " + std::strerror(errno));
    if (!fs::is_directory(dir, ec))
      return sdk::fail(ErrorCode::Failed, "state directory " + dir + " is not a directory");
  }
  StateDir out;
  out.path_ = path;
  const std::string file = path + "/state.json";
  // Read with simdjson's padding after it, so that it is parsed in place (no second copy of a
  // snapshot that is ~5 MB at 20,000 owned resources).
  auto text = common::read_file_padded(file, kMaxStateBytes);
  if (!text) {
    if (text.error().code != ErrorCode::NotFound) return sdk::fail(text.error());
    out.fresh_ = true;
    return out;
  }
  auto st = deserialise(*text, file, out.generation_);
  text->data.reset();  // the snapshot's text is not needed past this point
  if (!st) return sdk::fail(st.error());
  out.state_ = std::move(*st);
  const std::string journal = path + "/state.journal";
  auto jtext = common::read_file(journal, kMaxStateBytes);
  if (!jtext) {
    if (jtext.error().code != ErrorCode::NotFound) return sdk::fail(jtext.error());
    return out;
  }
  auto valid = replay_journal(*jtext, out.generation_, out.state_, journal, out.adopted_);
  if (!valid) return sdk::fail(valid.error());
  out.journal_bytes_ = *valid;  // 0: ignored; the next change starts a new journal
  return out;
}

namespace {
bool by_resource(const OwnedResource& a, const OwnedResource& b) { return a.resource < b.resource; }
}  // namespace

sdk::Result<void> StateDir::save(const HostState& state) {
  if (&state == &state_) {
    // The engine's own state (mutable_state()): written from where it is, nothing copied.
    if (!std::is_sorted(state_.owned.begin(), state_.owned.end(), by_resource))
      std::stable_sort(state_.owned.begin(), state_.owned.end(), by_resource);
    return write_snapshot(nullptr);
  }
  HostState next = state;
  if (!std::is_sorted(next.owned.begin(), next.owned.end(), by_resource))
    std::stable_sort(next.owned.begin(), next.owned.end(), by_resource);
  return write_snapshot(&next);
}

sdk::Result<void> StateDir::write_snapshot(HostState* next) {
  {
    auto file = common::AtomicFileWriter::create(path_ + "/state.json", 0600);
    if (!file) return sdk::fail(file.error());
    if (auto ok = write_snapshot_text(next ? *next : state_, generation_ + 1, *file); !ok) return ok;
    if (auto ok = file->commit(); !ok) return ok;
  }
  ++generation_;
  if (next) state_ = std::move(*next);
  // The snapshot holds everything the journal did; a journal whose unlink is lost in a crash
  // names the old generation and is ignored at the next open.
  close_journal();
  ::unlink((path_ + "/state.journal").c_str());
  journal_bytes_ = 0;
  journal_unsynced_ = false;
  intent_open_ = false;
  adopted_.clear();
  return {};
}

void StateDir::close_journal() noexcept {
  if (journal_fd_ >= 0) ::close(journal_fd_);
  journal_fd_ = -1;
}

sdk::Result<void> StateDir::save_change(const HostState& state, const std::string& resource) {
  return save_changes_impl(state, {resource}, false);
}

sdk::Result<void> StateDir::save_changes(const HostState& state, const std::vector<std::string>& resources) {
  return save_changes_impl(state, resources, true);
}

sdk::Result<void> StateDir::save_changes_impl(const HostState& state, const std::vector<std::string>& resources,
                                              bool settle) {
  auto entry = [&](const std::string& resource) -> const OwnedResource* {
    auto it = std::lower_bound(state.owned.begin(), state.owned.end(), resource,
                               [](const OwnedResource& o, const std::string& n) { return o.resource < n; });
    return (it != state.owned.end() && it->resource == resource) ? &*it : nullptr;
  };
  // `state` is this StateDir's own (mutable_state(), as the engine passes it): the changes are
  // in it already; nothing is copied into it.
  const bool own = &state == &state_;
  // Nothing changed and no intent to settle (a batch whose targets all existed wrote none):
  // nothing to write.
  if (resources.empty() && !(settle && intent_open_)) return {};
  // A snapshot exists when one was read at open (not fresh) or written since (generation > 0).
  const bool have_snapshot = !fresh_ || generation_ > 0;
  if (journal_bytes_ >= kJournalCompactBytes || !have_snapshot) {
    // Fold into a snapshot: the journal is large, or there is no snapshot to follow yet. A
    // snapshot settles any intent (it drops the journal).
    if (own) return save(state_);
    HostState next = state_;
    for (const auto& r : resources) {
      if (const OwnedResource* now = entry(r)) apply_own(next.owned, *now);
      else apply_forget(next.owned, r);
    }
    return write_snapshot(&next);
  }
  std::string lines;
  for (const auto& r : resources) {
    const OwnedResource* now = entry(r);
    lines += now ? journal_own(*now) : journal_forget(r);
  }
  if (settle && intent_open_) lines += kSettledLine;
  // A batch's settling lines are not synced on their own (decision 0200): until the next sync of
  // the journal or the next snapshot, a crash that loses them leaves the intent open, whose replay
  // adopts what the batch may have created — what these lines record, or what a failed read-back
  // left (owned, and pruned at once when absent: decision 0106) — and never what existed before.
  if (auto ok = append(lines, /*sync=*/!settle); !ok) return ok;
  if (settle) intent_open_ = false;
  if (own) return {};
  for (const auto& r : resources) {
    if (const OwnedResource* now = entry(r)) apply_own(state_.owned, *now);
    else apply_forget(state_.owned, r);
  }
  return {};
}

sdk::Result<void> StateDir::save_intent(const std::vector<IntentEntry>& entries) {
  // An intent whose every target existed before adopts nothing when replayed (an entry that
  // existed is never adopted), so it is not written at all (decision 0200): a repair of files
  // the mesh owns already journals nothing before its writes. One naming a target that did not
  // exist is written and synced before anything of the batch becomes visible (decision 0106).
  if (std::none_of(entries.begin(), entries.end(), [](const IntentEntry& e) { return !e.existed; })) return {};
  const bool have_snapshot = !fresh_ || generation_ > 0;
  // The intent must be in a journal that follows a snapshot; a large journal is folded first.
  if (journal_bytes_ >= kJournalCompactBytes || !have_snapshot)
    if (auto ok = save(state_); !ok) return ok;
  if (auto ok = append(journal_intent(entries), /*sync=*/true); !ok) return ok;
  intent_open_ = true;
  return {};
}

sdk::Result<void> StateDir::append(const std::string& body, bool sync) {
  const std::string file = path_ + "/state.journal";
  auto io_error = [&](const std::string& what) {
    const int err = errno;
    close_journal();
    return sdk::fail(code_for_errno(err), what + " " + file + ": " + std::strerror(err));
  };
  if (journal_fd_ < 0) {
    if (journal_bytes_ > 0) {
      // Continue the journal replayed at open, after its last complete line (a torn append is cut).
      journal_fd_ = ::open(file.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
      if (journal_fd_ < 0) return io_error("cannot open");
      if (::ftruncate(journal_fd_, static_cast<off_t>(journal_bytes_)) != 0) return io_error("cannot truncate");
    } else {
      journal_fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (journal_fd_ < 0) return io_error("cannot create");
      const std::string header = journal_header(generation_);
      if (::write(journal_fd_, header.data(), header.size()) != static_cast<ssize_t>(header.size()))
        return io_error("cannot write");
      journal_bytes_ = header.size();
      // The new file's name must be on disk before a change in it is relied upon.
      if (int dfd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        const int rc = ::fsync(dfd);
        ::close(dfd);
        if (rc != 0) return io_error("cannot fsync the directory of");
      }
    }
    if (::lseek(journal_fd_, 0, SEEK_END) < 0) return io_error("cannot seek");
  }
  // What an intent left open at open() made owned goes first, as own lines, then settles it.
  std::string line;
  for (const auto& name : adopted_)
    if (auto it = find_in(state_.owned, name); it != state_.owned.end()) line += journal_own(*it);
  if (!adopted_.empty()) line += kSettledLine;
  line += body;
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = ::write(journal_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Cut what was written, so that the next append does not follow a partial line.
      (void)::ftruncate(journal_fd_, static_cast<off_t>(journal_bytes_));
      return io_error("cannot append to");
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  journal_bytes_ += line.size();
  adopted_.clear();
  // A sync makes every line before it durable too (the settling lines of earlier batches).
  journal_unsynced_ = true;
  if (sync) {
    if (::fdatasync(journal_fd_) != 0) return io_error("cannot fdatasync");
    journal_unsynced_ = false;
  }
  return {};
}

sdk::Result<std::optional<std::string>> StateDir::applied_declaration() const {
  auto text = common::read_file(path_ + "/applied.json");
  if (!text) {
    if (text.error().code == ErrorCode::NotFound) return std::optional<std::string>{};
    return sdk::fail(text.error());
  }
  return std::optional<std::string>{std::move(*text)};
}

sdk::Result<void> StateDir::save_applied_declaration(const std::string& text) {
  return common::write_file_atomic(path_ + "/applied.json", text, 0600);
}

namespace {
/// Whether the file `path` holds exactly `text` (false when it cannot be read).
bool file_holds(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st {};
  bool same = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) == text.size();
  char buf[65536];
  std::size_t off = 0;
  while (same) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      same = n == 0 && off == text.size();
      break;
    }
    const auto got = static_cast<std::size_t>(n);
    same = got <= text.size() - off && std::memcmp(buf, text.data() + off, got) == 0;
    off += got;
  }
  ::close(fd);
  return same;
}
}  // namespace

sdk::Result<bool> StateDir::stage_applied_declaration(std::string_view text) {
  discard_applied_declaration();
  if (file_holds(path_ + "/applied.json", text)) return false;
  const std::string next = path_ + "/applied.json.next";
  auto io_error = [&](const char* what, int fd) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(next.c_str());
    return sdk::fail(code_for_errno(err), std::string(what) + " " + next + ": " + std::strerror(err));
  };
  const int fd = ::open(next.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return io_error("cannot create", -1);
  if (::fchmod(fd, 0600) != 0) return io_error("cannot chmod", fd);
  std::string_view rest = text;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("cannot write", fd);
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) return io_error("cannot fsync", fd);
  if (::close(fd) != 0) return io_error("cannot close", -1);
  staged_ = true;
  return true;
}

sdk::Result<void> StateDir::commit_applied_declaration() {
  if (!staged_) return {};
  const std::string next = path_ + "/applied.json.next", file = path_ + "/applied.json";
  if (::rename(next.c_str(), file.c_str()) != 0) {
    const int err = errno;
    return sdk::fail(code_for_errno(err), "cannot rename " + next + " onto " + file + ": " + std::strerror(err));
  }
  staged_ = false;
  const int dfd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return sdk::fail(code_for_errno(errno), "cannot open directory " + path_ + ": " + std::strerror(errno));
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return sdk::fail(code_for_errno(err), "cannot fsync directory " + path_ + ": " + std::strerror(err));
  return {};
}

void StateDir::discard_applied_declaration() noexcept {
  if (!staged_) return;
  staged_ = false;
  ::unlink((path_ + "/applied.json.next").c_str());
}

sdk::Result<void> StateDir::lock(int timeout_ms) {
  if (lock_fd_ >= 0) return {};  // this StateDir already holds it
  const std::string file = path_ + "/lock";
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return sdk::fail(code_for_errno(errno), "cannot open " + file + ": " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      return sdk::fail(ErrorCode::Failed, "cannot lock " + file + ": " + std::strerror(err));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      const std::string who =
          all_digits(pid) ? "another mesh-host (pid " + pid + ")" : "another process (pid unknown)";
      return sdk::fail(ErrorCode::FailedPrecondition,
                       who + " holds " + file + " (waited " + std::to_string(timeout_ms) + " ms)");
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        left, std::chrono::milliseconds(50)));
  }
  // Ours now: record who holds it, for the message a contender prints.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock is held either way; a missing pid only makes a contender's message vaguer.
  }
  lock_fd_ = fd;
  return {};
}

void StateDir::unlock() noexcept {
  if (lock_fd_ < 0) return;
  // Clear the pid while still holding the lock, so it never names a process that let go.
  (void)!::ftruncate(lock_fd_, 0);
  ::flock(lock_fd_, LOCK_UN);
  ::close(lock_fd_);
  lock_fd_ = -1;
}

sdk::Result<void> StateDir::outbox_put(const std::string& key, const std::string& body) {
  if (!valid_key(key))
    return sdk::fail(ErrorCode::InvalidArgument,
                     "outbox key '" + key + "' must be 1-128 characters of [A-Za-z0-9._-] not "
                     "starting with '.'");
  return common::write_file_atomic(path_ + "/outbox/" + key + ".json", body, 0600);
}

sdk::Result<std::vector<std::pair<std::string, std::string>>> StateDir::outbox_list() const {
  namespace fs = std::filesystem;
  const std::string dir = path_ + "/outbox";
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory)
      return std::vector<std::pair<std::string, std::string>>{};
    return sdk::fail(code_for(ec), "cannot list " + dir + ": " + ec.message());
  }
  std::vector<std::string> keys;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // Temp files of an interrupted write end in ".tmp" and are skipped.
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
      std::string key = name.substr(0, name.size() - 5);
      if (valid_key(key)) keys.push_back(std::move(key));
    }
  }
  if (ec) return sdk::fail(code_for(ec), "cannot list " + dir + ": " + ec.message());
  std::sort(keys.begin(), keys.end(), key_less);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(keys.size());
  for (auto& key : keys) {
    auto body = common::read_file(dir + "/" + key + ".json");
    if (!body) {
      if (body.error().code == ErrorCode::NotFound) continue;  // removed meanwhile
      return sdk::fail(body.error());
    }
    out.emplace_back(std::move(key), std::move(*body));
  }
  return out;
}

sdk::Result<void> StateDir::outbox_remove(const std::string& key) {
  if (!valid_key(key))
    return sdk::fail(ErrorCode::InvalidArgument, "outbox key '" + key + "' is not valid");
  const std::string file = path_ + "/outbox/" + key + ".json";
  if (::unlink(file.c_str()) != 0 && errno != ENOENT)
    return sdk::fail(code_for_errno(errno), "cannot remove " + file + ": " + std::strerror(errno));
  return {};
}

StateDir::StateDir(StateDir&& other) noexcept
    : path_(std::move(other.path_)),
      fresh_(other.fresh_),
      state_(std::move(other.state_)),
      lock_fd_(std::exchange(other.lock_fd_, -1)),
      generation_(other.generation_),
      journal_fd_(std::exchange(other.journal_fd_, -1)),
      journal_bytes_(other.journal_bytes_),
      journal_unsynced_(std::exchange(other.journal_unsynced_, false)),
      intent_open_(std::exchange(other.intent_open_, false)),
      adopted_(std::move(other.adopted_)),
      staged_(std::exchange(other.staged_, false)) {}

StateDir& StateDir::operator=(StateDir&& other) noexcept {
  if (this != &other) {
    unlock();
    path_ = std::move(other.path_);
    fresh_ = other.fresh_;
    state_ = std::move(other.state_);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
    close_journal();
    generation_ = other.generation_;
    journal_fd_ = std::exchange(other.journal_fd_, -1);
    journal_bytes_ = other.journal_bytes_;
    journal_unsynced_ = std::exchange(other.journal_unsynced_, false);
    intent_open_ = std::exchange(other.intent_open_, false);
    adopted_ = std::move(other.adopted_);
    staged_ = std::exchange(other.staged_, false);
  }
  return *this;
}

StateDir::~StateDir() {
  close_journal();
  unlock();
}

}  // namespace mesh::engine
