#!/usr/bin/env bash
# The README's second command: install what is needed, build, and run the whole test suite
# (unit, integration and system tests, and the decision-record checker). Exits non-zero when a
# test fails. System tests need root (apt, systemd, podman); they skip with a message otherwise.
# Then the whole tree again with clang (clang++-14, its own build folder $CLANG_BUILD_DIR, default
# ./build-clang) and its unit tests, and the libFuzzer targets. Extra arguments go to the first
# (GCC) ctest run only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-debian.sh"
"$root/tools/check-records" "$root/docs/decisions"
"$root/scripts/build.sh"
build=${BUILD_DIR:-$root/build}
(cd "$build" && ctest --output-on-failure -j2 --timeout 600 "$@")

# clang: the tree must build with it too and its unit tests pass (integration and system tests
# run once, above, with GCC; tests/integration/out_of_tree_plugin.sh builds the out-of-tree
# example with both compilers).
clang_build=${CLANG_BUILD_DIR:-$root/build-clang}
start=$(date +%s)
CC=clang-14 CXX=clang++-14 BUILD_DIR=$clang_build "$root/scripts/build.sh"
(cd "$clang_build" && ctest --output-on-failure -j2 --timeout 600 -L unit)
echo "clang: built and ran the unit tests in $(($(date +%s) - start)) s ($clang_build)"

"$root/scripts/fuzz.sh"  # libFuzzer targets, 60 s each (fuzz/README.md)
