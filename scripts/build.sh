#!/usr/bin/env bash
# Configures and builds Nox Mesh into BUILD_DIR (default: ./build). Extra args go to cmake's
# configure step. MESH_BUILD_TARGET=nox-mesh builds only the programs and plugins (no tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build "$build" -j"$(nproc)" ${MESH_BUILD_TARGET:+--target "$MESH_BUILD_TARGET"}
