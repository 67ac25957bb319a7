// The `jetstream-kv` store's binary encoding of its operations (docs/decisions/0087): integers as
// little-endian 8 bytes, strings as a u64 length then the bytes, optionals as a flag byte then
// the value, lists as a u64 count then the items.
//
// Internal to the plugin. Thread safety: none (a Writer or Reader is used by one thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/sdk/result.h"
#include "mesh/sdk/store.h"

namespace mesh::stores::jetstream_kv {

/// Appends values to a byte string.
class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u64(std::uint64_t v);
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(std::string_view s);
  void opt_u64(const std::optional<std::uint64_t>& v);
  void opt_i64(const std::optional<std::int64_t>& v);
  void opt_str(const std::optional<std::string>& v);
  void strings(const std::vector<std::string>& v);
  /// The bytes written so far.
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

/// Reads values back; every read past the end or of a bad length sets a sticky error (then
/// returns zero values), reported by ok()/error().
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::uint8_t u8();
  std::uint64_t u64();
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  bool boolean() { return u8() != 0; }
  std::string str();
  std::optional<std::uint64_t> opt_u64();
  std::optional<std::int64_t> opt_i64();
  std::optional<std::string> opt_str();
  std::vector<std::string> strings();
  /// A list count, refused (error) when it cannot fit in what is left (each item at least
  /// `min_item_bytes`).
  std::uint64_t count(std::size_t min_item_bytes);
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  bool need(std::size_t n);
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// The store's records, each as its fields in declaration order.
void put(Writer& w, const sdk::TokenRecord& t);
void get(Reader& r, sdk::TokenRecord& t);
void put(Writer& w, const sdk::ApplyReport& a);
void get(Reader& r, sdk::ApplyReport& a);
void put(Writer& w, const sdk::DriftReport& d);
void get(Reader& r, sdk::DriftReport& d);
void put(Writer& w, const sdk::ContactUpdate& c);
void get(Reader& r, sdk::ContactUpdate& c);
void put(Writer& w, const sdk::RequestRecord& q);
void get(Reader& r, sdk::RequestRecord& q);

}  // namespace mesh::stores::jetstream_kv
