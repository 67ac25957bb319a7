#!/usr/bin/env bash
# Configures and builds Nox Mesh into BUILD_DIR (default: ./build). Extra args go to cmake's
# configure step (first configure only). MESH_BUILD_TARGET=nox-mesh builds only the programs and
# plugins (no tests). CC and CXX choose the compilers at the first configure, as for cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# ccache when it is installed and no launcher is chosen already (read at the first configure).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build "$build" -j"$(nproc)" ${MESH_BUILD_TARGET:+--target "$MESH_BUILD_TARGET"}
