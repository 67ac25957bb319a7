#!/usr/bin/env bash
# Installs the build tree into a temp prefix, builds examples/provider-hello against the installed
# SDK package (find_package(NoxMeshSdk)) with GCC and with clang (g++ and clang++-14, which
# scripts/setup-debian.sh installs; MESH_EXAMPLE_COMPILERS="g++" builds with one), lists each with the installed mesh-host and applies a
# declaration through it (a plugin built by the other compiler than the host's loads alike), and
# builds a program against the installed conformance suite (NoxMesh::sdk_testing, which brings
# GoogleTest).
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compilers=${MESH_EXAMPLE_COMPILERS:-g++ clang++-14}
for cxx in $compilers; do
  command -v "$cxx" >/dev/null 2>&1 || { echo "compiler $cxx not found (scripts/setup-debian.sh installs it)"; exit 1; }
done
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in bin/mesh-host bin/mesh-control bin/mesh; do test -x "$tmp/prefix/$f" || { echo "missing $f"; exit 1; }; done
plugins=$(find "$tmp/prefix" -type d -path '*nox-mesh/plugins' | head -n1)
for p in mesh-provider-file mesh-provider-package mesh-provider-service mesh-provider-container \
         mesh-transport-nats mesh-store-sqlite; do
  test -f "$plugins/$p.so" || { echo "missing installed plugin $p.so"; exit 1; }
done
test -f "$tmp/prefix/include/mesh/sdk/provider.h" || { echo "SDK headers not installed"; exit 1; }
for cxx in $compilers; do
  hello=$tmp/hello-$cxx
  cmake -S "$src/examples/provider-hello" -B "$hello" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
  cmake --build "$hello" >/dev/null
  out=$("$tmp/prefix/bin/mesh-host" plugins --plugin-dir "$hello/plugins")
  echo "$out"
  grep -q "provider   hello" <<<"$out" || { echo "hello plugin ($cxx) not listed"; exit 1; }
  cat >"$tmp/decl.json" <<JSON
{"resources": [{"type": "hello", "id": "$tmp/greeting-$cxx", "properties": {"name": "plugin author"}}]}
JSON
  "$tmp/prefix/bin/mesh-host" apply "$tmp/decl.json" --plugin-dir "$hello/plugins" --load hello --state-dir "$tmp/state-$cxx"
  test "$(cat "$tmp/greeting-$cxx")" = "hello, plugin author" || { echo "greeting not written ($cxx)"; exit 1; }
  # Applying again changes nothing (read-back and plan are empty).
  "$tmp/prefix/bin/mesh-host" apply "$tmp/decl.json" --plugin-dir "$hello/plugins" --load hello --state-dir "$tmp/state-$cxx" | grep -q "0 changed"
  echo "out-of-tree plugin ($cxx): built, listed, applied"
done

# The conformance suite as a third party links it: NoxMesh::sdk_testing alone brings GoogleTest
# (find_package(NoxMeshSdk COMPONENTS testing) finds it).
mkdir -p "$tmp/suite"
cat >"$tmp/suite/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(mesh_sdk_testing_check LANGUAGES CXX)
find_package(NoxMeshSdk 0.1 REQUIRED COMPONENTS testing)
add_executable(suite_check main.cpp)
target_link_libraries(suite_check PRIVATE NoxMesh::sdk_testing)
CMAKE
cat >"$tmp/suite/main.cpp" <<'CPP'
#include <mesh/sdk/testing/conformance.h>
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
CPP
cmake -S "$tmp/suite" -B "$tmp/suite/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/suite/build" >/dev/null
"$tmp/suite/build/suite_check" >/dev/null
echo "installed conformance suite: found, linked with GoogleTest, ran"
