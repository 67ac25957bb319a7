#include "mesh/common/json.h"

#include <boost/json/stream_parser.hpp>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace mesh::common {
namespace {

namespace od = simdjson::ondemand;
using sdk::ErrorCode;
using sdk::Value;

/// Documents up to this size — the broker's default message limit, so every pushed declaration
/// under the default — are read by the thread's cached parser (which then keeps buffers for at
/// most this size: ~5.7 bytes per byte, touched only as far as the documents reached); larger
/// ones (a local `mesh-host apply` of 20,000 files is 2.8 MB, a large state.json) by a parser of
/// their own, released when the call returns.
constexpr std::size_t kCachedParserBytes = 1u << 20;

// Where the syntax error in `text` is, as " at line L, column C" (1-based; the column counts
// characters), or "" when it cannot be told. Only on the error path: simdjson's On-Demand API
// reports no offset, Boost.JSON's parser stops at the first byte it cannot take.
std::string error_position(std::string_view text) {
  boost::json::parse_options opt;
  opt.max_depth = 1u << 20;  // depth is checked by the reader; only the syntax error is wanted
  boost::json::stream_parser p({}, opt);
  boost::system::error_code ec;
  std::size_t offset = p.write_some(text.data(), text.size(), ec);
  if (!ec) {
    if (offset < text.size()) {
      // A complete value followed by more: the first byte after it that is not white space.
      while (offset < text.size() && (text[offset] == ' ' || text[offset] == '\t' || text[offset] == '\n' ||
                                      text[offset] == '\r'))
        ++offset;
      if (offset == text.size()) return "";
    } else {
      p.finish(ec);
      if (!ec) return "";
      offset = text.size();  // the text ended too early
    }
  }
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return " at line " + std::to_string(line) + ", column " + std::to_string(column);
}

/// Turns On-Demand values into sdk::Values, checking depth and duplicate keys on the way, and
/// keeps the first failure. The path of the value being read is kept as a stack of segments and
/// written out only for an error.
class Reader {
 public:
  Reader(std::string_view text, const JsonLimits& limits) : text_(text), max_depth_(limits.max_depth) {}

  /// Reads `v`, a value whose parent is at nesting `depth` (0: `v` is the root), into `out`.
  bool read(od::value v, std::size_t depth, Value& out) {
    return read_with(v, depth, [&](auto&& x) { out = Value(std::forward<decltype(x)>(x)); });
  }

  /// Reads `v` and hands what the Value is made of (a std::string, std::int64_t, double, bool,
  /// nullptr, Value::Object or Value::Array) to `put`, which constructs the Value where it
  /// belongs (in place in its parent's list: no Value moved or assigned per member).
  template <typename Put>
  bool read_with(od::value& v, std::size_t depth, Put&& put) {
    od::json_type type;
    if (auto e = v.type().get(type)) return syntax(e);
    switch (type) {
      case od::json_type::object: {
        od::object obj;
        if (auto e = v.get_object().get(obj)) return syntax(e);
        Value::Object members;
        if (!read_object(obj, depth + 1, members)) return false;
        put(std::move(members));
        return true;
      }
      case od::json_type::array: {
        od::array arr;
        if (auto e = v.get_array().get(arr)) return syntax(e);
        Value::Array items;
        if (!read_array(arr, depth + 1, items)) return false;
        put(std::move(items));
        return true;
      }
      case od::json_type::string: {
        std::string_view s;
        if (!string_value(v, s)) return false;
        put(std::string(s));
        return true;
      }
      case od::json_type::number: {
        od::number n;
        if (auto e = v.get_number().get(n)) return syntax(e);
        switch (n.get_number_type()) {
          case od::number_type::signed_integer: put(std::int64_t(n.get_int64())); return true;
          // Above INT64_MAX: kept as a double rather than wrapped around.
          case od::number_type::unsigned_integer: put(double(n.get_uint64())); return true;
          case od::number_type::floating_point_number: put(double(n.get_double())); return true;
        }
        return syntax(simdjson::NUMBER_ERROR);
      }
      case od::json_type::boolean: {
        bool b;
        if (auto e = v.get_bool().get(b)) return syntax(e);
        put(bool(b));
        return true;
      }
      case od::json_type::null: {
        bool null = false;
        if (auto e = v.is_null().get(null)) return syntax(e);
        if (!null) return syntax(simdjson::N_ATOM_ERROR);
        put(nullptr);
        return true;
      }
    }
    return syntax(simdjson::TAPE_ERROR);
  }

  /// The root of `doc`, whatever it is.
  bool read_root(od::document& doc, Value& out) {
    od::json_type type;
    if (auto e = doc.type().get(type)) return syntax(e);
    switch (type) {
      case od::json_type::object:
      case od::json_type::array: {
        od::value v;
        if (auto e = doc.get_value().get(v)) return syntax(e);
        return read(v, 0, out);
      }
      case od::json_type::string: {
        std::string_view s;
        if (auto e = doc.get_string().get(s)) return syntax(e);
        out = Value(std::string(s));
        return true;
      }
      case od::json_type::number: {
        od::number n;
        if (auto e = doc.get_number().get(n)) return syntax(e);
        return number(n, out);
      }
      case od::json_type::boolean: {
        bool b;
        if (auto e = doc.get_bool().get(b)) return syntax(e);
        out = Value(b);
        return true;
      }
      case od::json_type::null: {
        bool null = false;
        if (auto e = doc.is_null().get(null)) return syntax(e);
        if (!null) return syntax(simdjson::N_ATOM_ERROR);
        out = Value();
        return true;
      }
    }
    return syntax(simdjson::TAPE_ERROR);
  }

  /// After the root was read: nothing but white space may follow it.
  bool end(od::document& doc) {
    // current_location() is OUT_OF_BOUNDS exactly when every token was read.
    const char* where = nullptr;
    if (doc.current_location().get(where) == simdjson::OUT_OF_BOUNDS) return true;
    return syntax(simdjson::TRAILING_CONTENT);
  }

  /// Whether entering a container at nesting `depth` is allowed (records the failure if not).
  bool enter(std::size_t depth) {
    if (depth <= max_depth_) return true;
    fail(sdk::Error{ErrorCode::InvalidArgument,
                    "nesting deeper than " + std::to_string(max_depth_) + " levels", ""});
    return false;
  }

  /// A syntax error found by simdjson: the message names where it is (Boost.JSON's position).
  bool syntax(simdjson::error_code e) {
    // An On-Demand getter meeting a malformed token reports INCORRECT_TYPE ("tru" is read as a
    // boolean); say what it is instead.
    const char* what = e == simdjson::INCORRECT_TYPE ? simdjson::error_message(simdjson::TAPE_ERROR)
                                                    : simdjson::error_message(e);
    fail(sdk::Error{ErrorCode::InvalidArgument,
                    std::string("not valid JSON") + error_position(text_) + ": " + what, ""});
    return false;
  }

  /// Records `e` as the failure (the first one counts).
  void fail(sdk::Error e) {
    if (!failed_) {
      failed_ = true;
      error_ = std::move(e);
    }
  }

  bool failed() const noexcept { return failed_; }
  sdk::Error take_error() { return std::move(error_); }

  /// The path segments the caller is inside of (a streamed list's key and index).
  void push_key(std::string_view key) { path_.push_back(Segment{key, 0, true}); }
  void push_index(std::size_t i) { path_.push_back(Segment{{}, i, false}); }
  void pop() { path_.pop_back(); }

  /// The path as the errors give it: `resources[3].properties.mode`.
  std::string path() const {
    std::string out;
    for (const auto& s : path_) {
      if (s.is_key) {
        if (!out.empty()) out += '.';
        out += s.key;
      } else {
        out += '[';
        out += std::to_string(s.index);
        out += ']';
      }
    }
    return out;
  }

  /// Refuses `key` when a member of `members` has it: compared one by one up to 16 members,
  /// past that through `seen` (copies of the keys: the members' own strings move when their
  /// list grows), which takes it.
  bool unique_key(std::string_view key, const Value::Object& members,
                  std::optional<std::unordered_set<std::string>>& seen) {
    bool dup = false;
    if (members.size() < 16) {
      for (const auto& m : members)
        if (m.first == key) {
          dup = true;
          break;
        }
    } else {
      if (!seen) {
        seen.emplace();
        for (const auto& m : members) seen->insert(m.first);
      }
      dup = !seen->insert(std::string(key)).second;
    }
    if (!dup) return true;
    push_key(key);
    fail(sdk::Error{ErrorCode::InvalidArgument, "duplicate key '" + std::string(key) + "'", path()});
    pop();
    return false;
  }

 private:
  struct Segment {
    std::string_view key;  // a view of the parser's string buffer, valid for the document
    std::size_t index;
    bool is_key;
  };

  bool number(od::number& n, Value& out) {
    switch (n.get_number_type()) {
      case od::number_type::signed_integer: out = Value(std::int64_t(n.get_int64())); return true;
      // Above INT64_MAX: kept as a double rather than wrapped around.
      case od::number_type::unsigned_integer: out = Value(double(n.get_uint64())); return true;
      case od::number_type::floating_point_number: out = Value(n.get_double()); return true;
    }
    return syntax(simdjson::NUMBER_ERROR);
  }

 public:
  // Objects start with room for 4 members — what most objects here have: a resource (type, id,
  // properties, requires), its properties with the schema's defaults filled in afterwards
  // (the file provider's content, mode, ensure, allow_untrusted_parents), an owned entry of
  // state.json — so that they are allocated once, and grow by doubling past that.
  /// The members of `obj`, an object at nesting `depth`, appended to `members`.
  bool read_object(od::object& obj, std::size_t depth, Value::Object& members) {
    if (!enter(depth)) return false;
    members.reserve(4);
    std::optional<std::unordered_set<std::string>> seen;  // past 16 members
    for (auto field_result : obj) {
      od::field field;
      if (auto e = std::move(field_result).get(field)) return syntax(e);
      // A view of the text (a key without escapes) or of the parser's string buffer: valid for
      // the whole document, as the path's segments need.
      std::string_view key;
      if (!raw_string(field.key().raw(), key))
        if (auto e = field.unescaped_key().get(key)) return syntax(e);
      if (!unique_key(key, members, seen)) return false;
      push_key(key);
      const bool ok = read_with(field.value(), depth, [&](auto&& x) {
        members.emplace_back(std::piecewise_construct, std::forward_as_tuple(key),
                             std::forward_as_tuple(std::forward<decltype(x)>(x)));
      });
      pop();
      if (!ok) return false;
    }
    return true;
  }

  /// The elements of `arr`, an array at nesting `depth`, appended to `items`.
  /// The elements are gathered in a list kept per nesting level, then moved into `items` at
  /// their exact number: a long array (a declaration's `resources` read whole) is one
  /// allocation of its size, not doublings up to twice it.
  bool read_array(od::array& arr, std::size_t depth, Value::Array& items) {
    if (!enter(depth)) return false;
    while (scratch_.size() < depth) scratch_.push_back(std::make_unique<Value::Array>());
    Value::Array& gathered = *scratch_[depth - 1];
    gathered.clear();
    std::size_t i = 0;
    for (auto element : arr) {
      od::value v;
      if (auto e = element.get(v)) return syntax(e);
      push_index(i++);
      const bool ok = read_with(v, depth, [&](auto&& x) { gathered.emplace_back(std::forward<decltype(x)>(x)); });
      pop();
      if (!ok) return false;
    }
    items.reserve(items.size() + gathered.size());
    for (auto& e : gathered) items.push_back(std::move(e));
    gathered.clear();
    return true;
  }


 private:
  /// A string token without escapes is its own value: `raw` points just after its opening quote
  /// (into the padded text). Sets `out` to the bytes up to the closing quote and returns true;
  /// false when a backslash comes first (the string needs unescaping). The text is valid UTF-8
  /// without unescaped control characters (checked before: stage 1), and the padding holds no
  /// quote or backslash before the closing quote of a string the index found closed.
  static bool raw_string(const char* raw, std::string_view& out) {
    const char* p = raw;
    for (;; ++p) {
      if (*p == '"') break;
      if (*p == '\\') return false;
    }
    out = std::string_view(raw, static_cast<std::size_t>(p - raw));
    return true;
  }

  /// A string value: from the text when it has no escape, else unescaped by simdjson. The raw
  /// token runs from the opening quote to the next token (white space may follow the closing
  /// quote); without a backslash, the last quote in it closes the string.
  bool string_value(od::value& v, std::string_view& out) {
    std::string_view token = v.raw_json_token();
    while (!token.empty() && (token.back() == ' ' || token.back() == '\n' || token.back() == '\r' ||
                              token.back() == '\t'))
      token.remove_suffix(1);
    if (token.size() >= 2 && token.front() == '"' && token.back() == '"' &&
        std::memchr(token.data() + 1, '\\', token.size() - 2) == nullptr) {
      out = token.substr(1, token.size() - 2);
      od::raw_json_string consumed;  // moves the iterator past the string
      if (auto e = v.get_raw_json_string().get(consumed)) return syntax(e);
      return true;
    }
    if (auto e = v.get_string().get(out)) return syntax(e);
    return true;
  }


  std::string_view text_;
  std::size_t max_depth_;
  std::vector<Segment> path_;
  // read_array's lists, one per nesting level (each behind a pointer: a deeper level added while
  // a shallower one is being filled must not move it).
  std::vector<std::unique_ptr<Value::Array>> scratch_;
  bool failed_ = false;
  sdk::Error error_;
};

/// The checks before any parsing: size, byte order mark, UTF-8.
sdk::Result<void> check_text(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return sdk::fail(ErrorCode::InvalidArgument,
                     "document is " + std::to_string(text.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_bytes) + " bytes");
  if (text.size() >= 3 && text.substr(0, 3) == "\xef\xbb\xbf")
    return sdk::fail(ErrorCode::InvalidArgument,
                     "document starts with a UTF-8 byte order mark (BOM), which JSON does not allow: save it as "
                     "UTF-8 without a BOM");
  if (!simdjson::validate_utf8(text.data(), text.size()))
    return sdk::fail(ErrorCode::InvalidArgument, "document is not valid UTF-8");
  return {};
}

/// The parser a document is read with. One per thread, reused (the hot path: messages and
/// declarations up to kCachedParserBytes), unless the document is larger — its buffers are
/// ~5.7 bytes per byte of the largest document it took — or the thread's parser is busy with a
/// document whose handler parses another (parse_json_members calls back while it reads): then
/// a parser of its own, freed on return.
class ParserLease {
 public:
  explicit ParserLease(std::size_t size) {
    thread_local od::parser cached;
    thread_local bool cached_busy = false;
    if (size > kCachedParserBytes || cached_busy) {
      parser_ = &own_.emplace(std::max(size, std::size_t{4096}));
    } else {
      parser_ = &cached;
      busy_ = &cached_busy;
      cached_busy = true;
    }
  }
  ~ParserLease() {
    if (busy_) *busy_ = false;
  }
  ParserLease(const ParserLease&) = delete;
  ParserLease& operator=(const ParserLease&) = delete;
  od::parser& get() noexcept { return *parser_; }

 private:
  std::optional<od::parser> own_;
  od::parser* parser_ = nullptr;
  bool* busy_ = nullptr;
};

}  // namespace

sdk::Result<Value> parse_json(std::string_view text, const JsonLimits& limits) {
  if (auto ok = check_text(text, limits); !ok) return sdk::fail(ok.error());
  ParserLease lease(text.size());
  simdjson::padded_string padded(text);
  Reader reader(text, limits);
  od::document doc;
  if (auto e = lease.get().iterate(padded).get(doc)) {
    reader.syntax(e);
    return sdk::fail(reader.take_error());
  }
  Value out;
  if (!reader.read_root(doc, out) || !reader.end(doc)) return sdk::fail(reader.take_error());
  return out;
}

namespace {

// parse_json_members of `text`, which `input` holds with simdjson's padding after it.
sdk::Result<void> read_members(std::string_view text, simdjson::padded_string_view input, const JsonLimits& limits,
                               const JsonMembers& handler) {
  ParserLease lease(text.size());
  Reader reader(text, limits);
  od::document doc;
  if (auto e = lease.get().iterate(input).get(doc)) {
    reader.syntax(e);
    return sdk::fail(reader.take_error());
  }
  od::json_type type;
  if (auto e = doc.type().get(type)) {
    reader.syntax(e);
    return sdk::fail(reader.take_error());
  }
  if (type != od::json_type::object) {
    Value root;
    if (!reader.read_root(doc, root) || !reader.end(doc)) return sdk::fail(reader.take_error());
    return handler.other_root ? handler.other_root(std::move(root)) : sdk::Result<void>{};
  }
  // The root object, member by member; the list's elements one by one.
  if (!reader.enter(1)) return sdk::fail(reader.take_error());
  od::object obj;
  if (auto e = doc.get_object().get(obj)) {
    reader.syntax(e);
    return sdk::fail(reader.take_error());
  }
  std::vector<std::string> keys;  // the root's keys so far (a handful): duplicates are refused
  for (auto field_result : obj) {
    od::field field;
    std::string_view key;
    if (auto e = std::move(field_result).get(field)) {
      reader.syntax(e);
      return sdk::fail(reader.take_error());
    }
    if (auto e = field.unescaped_key().get(key)) {
      reader.syntax(e);
      return sdk::fail(reader.take_error());
    }
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      reader.fail(sdk::Error{ErrorCode::InvalidArgument, "duplicate key '" + std::string(key) + "'",
                             std::string(key)});
      return sdk::fail(reader.take_error());
    }
    keys.emplace_back(key);
    od::value v = field.value();
    od::json_type vtype;
    if (auto e = v.type().get(vtype)) {
      reader.syntax(e);
      return sdk::fail(reader.take_error());
    }
    reader.push_key(key);
    if (key == handler.list_key && vtype == od::json_type::array) {
      if (!reader.enter(2)) return sdk::fail(reader.take_error());
      od::array arr;
      if (auto e = v.get_array().get(arr)) {
        reader.syntax(e);
        return sdk::fail(reader.take_error());
      }
      std::size_t count = 0;
      if (handler.count_list)
        if (auto e = arr.count_elements().get(count)) {
          reader.syntax(e);
          return sdk::fail(reader.take_error());
        }
      if (handler.list_begin)
        if (auto ok = handler.list_begin(count); !ok) return ok;
      std::size_t i = 0;
      // An element that is an object (a resource, an owned entry) is read into the member list
      // the previous one left behind, when the callback left it: one allocation less each.
      Value::Object spare;
      for (auto element : arr) {
        od::value ev;
        if (auto e = element.get(ev)) {
          reader.syntax(e);
          return sdk::fail(reader.take_error());
        }
        Value item;
        reader.push_index(i);
        bool ok;
        od::json_type etype;
        if (auto e = ev.type().get(etype)) {
          ok = reader.syntax(e);
        } else if (etype == od::json_type::object) {
          od::object obj;
          if (auto e2 = ev.get_object().get(obj)) {
            ok = reader.syntax(e2);
          } else {
            spare.clear();
            ok = reader.read_object(obj, 3, spare);
            item = Value(std::move(spare));
          }
        } else {
          ok = reader.read(ev, 2, item);
        }
        reader.pop();
        if (!ok) return sdk::fail(reader.take_error());
        if (handler.element)
          if (auto handled = handler.element(i, item); !handled) return handled;
        if (item.is_object()) spare = std::move(item.as_object());
        ++i;
      }
    } else {
      Value member;
      if (!reader.read(v, 1, member)) return sdk::fail(reader.take_error());
      if (handler.member)
        if (auto handled = handler.member(key, std::move(member)); !handled) return handled;
    }
    reader.pop();
  }
  if (!reader.end(doc)) return sdk::fail(reader.take_error());
  return {};
}

}  // namespace

sdk::Result<void> parse_json_members(std::string_view text, const JsonLimits& limits,
                                     const JsonMembers& handler) {
  if (auto ok = check_text(text, limits); !ok) return ok;
  simdjson::padded_string padded(text);
  return read_members(text, padded, limits, handler);
}

sdk::Result<void> parse_json_members(const PaddedText& text, const JsonLimits& limits,
                                     const JsonMembers& handler) {
  static_assert(PaddedText::kPadding >= simdjson::SIMDJSON_PADDING);
  if (auto ok = check_text(text.view(), limits); !ok) return ok;
  return read_members(text.view(),
                      simdjson::padded_string_view(text.data.get(), text.size, text.size + PaddedText::kPadding),
                      limits, handler);
}

}  // namespace mesh::common
