// Nox Mesh SDK — the C++ ABI fingerprint: what the C++ types crossing the plugin boundary depend
// on, computed at compile time by whoever includes this header. MESH_PLUGIN (plugin.h) stores the
// plugin's in its descriptor; the host's loader computes its own from this same header and
// compares the two before any C++ call (the fields and the rule: `mesh_cxx_abi` in abi.h;
// docs/decisions/0040).
//
// Detection uses each library's own macros, defined by any standard header: `__GLIBCXX__`,
// `_GLIBCXX_USE_CXX11_ABI` (libstdc++ manual, "Dual ABI"), `_LIBCPP_VERSION`,
// `_LIBCPP_ABI_VERSION` (libc++ `<__config>`). Thread safety: everything here is constexpr or a
// pure function of its arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mesh/sdk/abi.h"
#include "mesh/sdk/plugin.h"
#include "mesh/sdk/result.h"
#include "mesh/sdk/value.h"

namespace mesh::sdk {

/// The fingerprint of the compilation that includes this header: standard library, its ABI switch
/// and version, compiler and version, and the sizes of the boundary types. Returns a value with
/// `struct_size == sizeof(mesh_cxx_abi)`. Evaluated at compile time (consteval).
consteval mesh_cxx_abi cxx_abi_of_this_build() {
  mesh_cxx_abi a{};
  a.struct_size = sizeof(mesh_cxx_abi);
#if defined(_LIBCPP_VERSION)
  a.stdlib = MESH_CXX_STDLIB_LIBCXX;
  a.stdlib_abi = _LIBCPP_ABI_VERSION;
  a.stdlib_version = _LIBCPP_VERSION;
#elif defined(__GLIBCXX__)
  a.stdlib = MESH_CXX_STDLIB_LIBSTDCXX;
  a.stdlib_abi = _GLIBCXX_USE_CXX11_ABI ? 1u : 0u;
  a.stdlib_version = __GLIBCXX__;
#else
  a.stdlib = MESH_CXX_STDLIB_UNKNOWN;
#endif
#if defined(__clang__)
  a.compiler = MESH_CXX_COMPILER_CLANG;
  a.compiler_version = __clang_major__ * 10000u + __clang_minor__ * 100u + __clang_patchlevel__;
#elif defined(__GNUC__)
  a.compiler = MESH_CXX_COMPILER_GCC;
  a.compiler_version = __GNUC__ * 10000u + __GNUC_MINOR__ * 100u + __GNUC_PATCHLEVEL__;
#else
  a.compiler = MESH_CXX_COMPILER_UNKNOWN;
#endif
  a.pointer_size = sizeof(void*);
  a.sizeof_string = sizeof(std::string);
  a.sizeof_vector = sizeof(std::vector<Value>);
  a.sizeof_optional = sizeof(std::optional<std::string>);
  a.sizeof_function = sizeof(std::function<void()>);
  a.sizeof_value = sizeof(Value);
  a.sizeof_error = sizeof(Error);
  a.sizeof_result = sizeof(Result<Value>);
  a.sizeof_host_context = sizeof(HostContext);
  return a;
}

namespace cxx_abi_detail {

/// One compared size field of mesh_cxx_abi: its name in messages ("sizeof(std::string)"), its
/// short name in describe_cxx_abi() ("string"), and where it is.
struct SizeField {
  const char* name;
  const char* short_name;
  std::uint32_t mesh_cxx_abi::*member;
  std::size_t end;  // offset just past the field: the fingerprint has it when struct_size >= end
};

#define MESH_CXX_ABI_SIZE_(NAME, SHORT, MEMBER) \
  SizeField { NAME, SHORT, &mesh_cxx_abi::MEMBER, offsetof(mesh_cxx_abi, MEMBER) + sizeof(std::uint32_t) }

/// The compared fields other than stdlib/stdlib_abi, in message order. Append-only, like the struct.
inline const SizeField kSizes[] = {
    MESH_CXX_ABI_SIZE_("sizeof(void*)", "void*", pointer_size),
    MESH_CXX_ABI_SIZE_("sizeof(std::string)", "string", sizeof_string),
    MESH_CXX_ABI_SIZE_("sizeof(std::vector)", "vector", sizeof_vector),
    MESH_CXX_ABI_SIZE_("sizeof(std::optional)", "optional", sizeof_optional),
    MESH_CXX_ABI_SIZE_("sizeof(std::function)", "function", sizeof_function),
    MESH_CXX_ABI_SIZE_("sizeof(Value)", "Value", sizeof_value),
    MESH_CXX_ABI_SIZE_("sizeof(Error)", "Error", sizeof_error),
    MESH_CXX_ABI_SIZE_("sizeof(Result)", "Result", sizeof_result),
    MESH_CXX_ABI_SIZE_("sizeof(HostContext)", "HostContext", sizeof_host_context),
};

#undef MESH_CXX_ABI_SIZE_

/// Size of the shortest fingerprint a host accepts: up to and including `stdlib_version`.
inline constexpr std::size_t kMinimumSize = offsetof(mesh_cxx_abi, stdlib_version) + sizeof(std::uint32_t);

inline bool has(const mesh_cxx_abi& a, std::size_t end) { return a.struct_size >= end; }

/// "12.2.0" from 120200.
inline std::string dotted(std::uint32_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

/// The macro behind mesh_cxx_abi::stdlib_abi for that library.
inline const char* abi_switch_name(std::uint32_t stdlib) {
  return stdlib == MESH_CXX_STDLIB_LIBSTDCXX ? "_GLIBCXX_USE_CXX11_ABI"
         : stdlib == MESH_CXX_STDLIB_LIBCXX  ? "_LIBCPP_ABI_VERSION"
                                             : "abi";
}

/// "_GLIBCXX_USE_CXX11_ABI=1", "_LIBCPP_ABI_VERSION=1" or "abi=N".
inline std::string abi_switch(std::uint32_t stdlib, std::uint32_t value) {
  return std::string(abi_switch_name(stdlib)) + "=" + std::to_string(value);
}

inline const char* stdlib_name(std::uint32_t stdlib) {
  return stdlib == MESH_CXX_STDLIB_LIBSTDCXX ? "libstdc++"
         : stdlib == MESH_CXX_STDLIB_LIBCXX  ? "libc++"
                                             : "unknown C++ library";
}

}  // namespace cxx_abi_detail

/// One line for messages and `mesh-host plugins`, e.g.
/// "libstdc++ 20230528 _GLIBCXX_USE_CXX11_ABI=1, sizes void* 8 string 32 vector 24 optional 40
/// function 32 Value 40 Error 72 Result 80 HostContext 88, compiler gcc 12.2.0".
/// Fields `a` does not have (a smaller `struct_size`) are left out. Never throws except
/// std::bad_alloc.
inline std::string describe_cxx_abi(const mesh_cxx_abi& a) {
  using namespace cxx_abi_detail;
  std::string out = stdlib_name(a.stdlib);
  if (has(a, offsetof(mesh_cxx_abi, stdlib_version) + 4) && a.stdlib_version != 0)
    out += " " + std::to_string(a.stdlib_version);
  if (a.stdlib != MESH_CXX_STDLIB_UNKNOWN) out += " " + abi_switch(a.stdlib, a.stdlib_abi);
  out += ", sizes";
  for (const auto& f : kSizes) {
    if (!has(a, f.end)) continue;
    out += std::string(" ") + f.short_name + " " + std::to_string(a.*(f.member));
  }
  if (has(a, offsetof(mesh_cxx_abi, compiler_version) + 4)) {
    out += ", compiler ";
    out += a.compiler == MESH_CXX_COMPILER_GCC     ? "gcc "
           : a.compiler == MESH_CXX_COMPILER_CLANG ? "clang "
                                                   : "unknown ";
    out += dotted(a.compiler_version);
  }
  return out;
}

/// The compared fields in which `plugin` differs from `host`, each as
/// "_GLIBCXX_USE_CXX11_ABI 0, this program 1" or "sizeof(std::string) 8, this program 32"
/// (plugin's value first); empty when the plugin may be loaded. A field the plugin did not fill
/// (its `struct_size` ends before it) is not compared; `stdlib` and `stdlib_abi` are always
/// present (the loader refuses a fingerprint shorter than `cxx_abi_detail::kMinimumSize`, which
/// ends after `stdlib_version`). The
/// compiler and the library version are never compared. Never throws except std::bad_alloc.
inline std::vector<std::string> cxx_abi_differences(const mesh_cxx_abi& plugin,
                                                    const mesh_cxx_abi& host) {
  using namespace cxx_abi_detail;
  std::vector<std::string> out;
  if (plugin.stdlib != host.stdlib) {
    out.push_back(std::string("standard library ") + stdlib_name(plugin.stdlib) +
                  ", this program " + stdlib_name(host.stdlib));
  } else if (plugin.stdlib_abi != host.stdlib_abi) {
    out.push_back(std::string(abi_switch_name(plugin.stdlib)) + " " +
                  std::to_string(plugin.stdlib_abi) + ", this program " +
                  std::to_string(host.stdlib_abi));
  }
  for (const auto& f : kSizes) {
    if (!has(plugin, f.end) || !has(host, f.end)) continue;
    if (plugin.*(f.member) != host.*(f.member))
      out.push_back(std::string(f.name) + " " + std::to_string(plugin.*(f.member)) +
                    ", this program " + std::to_string(host.*(f.member)));
  }
  return out;
}

}  // namespace mesh::sdk
