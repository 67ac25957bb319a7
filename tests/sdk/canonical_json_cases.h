// Values and the exact canonical JSON text each must give. Module digests (fleet) and the
// container provider's configuration hash are SHA-256 of this text, so it must never change:
// every implementation or caller of canonical JSON is tested against this one table.
// Header-only test data; included by the SDK, fleet and container provider tests.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "mesh/sdk/value.h"

namespace mesh::test {

struct CanonicalJsonCase {
  const char* name;
  sdk::Value value;
  std::string text;  ///< the exact expected output
};

inline std::vector<CanonicalJsonCase> canonical_json_cases() {
  using sdk::Value;
  std::vector<CanonicalJsonCase> out;

  out.push_back({"null", Value(), "null"});
  out.push_back({"true", Value(true), "true"});
  out.push_back({"false", Value(false), "false"});
  out.push_back({"empty object", Value::object(), "{}"});
  out.push_back({"empty array", Value::array(), "[]"});
  out.push_back({"empty string", Value(""), R"("")"});

  {  // nested, members sorted at every depth, arrays keep their order
    Value leaf = Value::object();
    leaf.set("z", nullptr);
    leaf.set("y", "s");
    Value d = Value::array();
    d.as_array().emplace_back(3);
    d.as_array().push_back(leaf);
    Value a = Value::object();
    a.set("d", d);
    a.set("c", true);
    Value v = Value::object();
    v.set("b", 1);
    v.set("a", a);
    v.set("e", Value::array());
    v.set("f", Value::object());
    out.push_back({"nested", v, R"({"a":{"c":true,"d":[3,{"y":"s","z":null}]},"b":1,"e":[],"f":{}})"});
  }
  {  // keys compare as bytes: upper case before lower case, a prefix first, UTF-8 after ASCII
    Value v = Value::object();
    for (const char* k : {"b", "\xc3\xa9", "a", "B", "ab", "a b", "A", "", "~"}) v.set(k, 0);
    out.push_back({"key byte order", v,
                   "{\"\":0,\"A\":0,\"B\":0,\"a\":0,\"a b\":0,\"ab\":0,\"b\":0,\"~\":0,"
                   "\"\xc3\xa9\":0}"});
  }
  {  // arrays of arrays and objects are not reordered
    Value inner = Value::array();
    inner.as_array().emplace_back("z");
    inner.as_array().emplace_back("a");
    Value o = Value::object();
    o.set("y", 2);
    o.set("x", 1);
    Value v = Value::array();
    v.as_array().push_back(inner);
    v.as_array().push_back(o);
    v.as_array().push_back(Value::array());
    v.as_array().push_back(Value::object());
    out.push_back({"array order", v, R"([["z","a"],{"x":1,"y":2},[],{}])"});
  }
  out.push_back({"escapes", Value(std::string("\"\\/\n\r\t\b\f\x01\x1f\x7f", 11)),
                 "\"\\\"\\\\/\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\""});
  out.push_back({"NUL byte", Value(std::string("a\0b", 3)), R"("a\u0000b")"});
  out.push_back({"unicode kept as UTF-8",
                 Value("\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
                 "\"\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\""});
  out.push_back({"ill-formed UTF-8 becomes U+FFFD",
                 Value(std::string("a\xff" "b\xc0\xaf" "c\xed\xa0\x80")),
                 R"("a\ufffdb\ufffd\ufffdc\ufffd\ufffd\ufffd")"});
  {  // an escaped key sorts by its raw bytes, not by its escaped text
    Value v = Value::object();
    v.set("a\"", 1);
    v.set("a\n", 2);
    v.set("a", 3);
    out.push_back({"escaped keys", v, R"({"a":3,"a\n":2,"a\"":1})"});
  }
  {
    Value v = Value::array();
    auto& a = v.as_array();
    a.emplace_back(0);
    a.emplace_back(-1);
    a.emplace_back(std::numeric_limits<std::int64_t>::max());
    a.emplace_back(std::numeric_limits<std::int64_t>::min());
    a.emplace_back(1.5);
    a.emplace_back(2.0);
    a.emplace_back(0.1);
    a.emplace_back(-0.0);
    a.emplace_back(1e300);
    a.emplace_back(1e-7);
    out.push_back({"numbers", v,
                   "[0,-1,9223372036854775807,-9223372036854775808,1.5,2,0.10000000000000001,-0,"
                   "1.0000000000000001e+300,9.9999999999999995e-08]"});
  }
  return out;
}

}  // namespace mesh::test
