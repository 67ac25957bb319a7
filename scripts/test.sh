#!/usr/bin/env bash
# The README's second command: install what is needed, build, and run the whole test suite
# (unit, integration and system tests, and the decision-record checker). Exits non-zero when a
# test fails. System tests need root (apt, systemd, podman); they skip with a message otherwise.
#
# Two build trees (decision 129):
# - GCC ($BUILD_DIR, default ./build): the product at -O2 as the packages are built, with line
#   tables only (-g1) in place of full debug information, and the tests' own code at -O0
#   (MESH_TEST_COMPILE_OPTIONS); every test label runs here.
# - clang-14 ($CLANG_BUILD_DIR, default ./build-clang): the whole tree with AddressSanitizer,
#   UndefinedBehaviorSanitizer and libFuzzer's coverage (MESH_BUILD_FUZZ=ON; the product at -O1
#   with line tables, as fuzz/ wants it, the tests' own code at -O0),
#   so one clang build serves three checks: the tree builds with clang, the unit tests pass under
#   the sanitizers, and the libFuzzer targets (scripts/fuzz.sh, 60 s each) run from it.
# Extra arguments go to the GCC ctest run only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
phase() { echo "test.sh: $1 in $(($(date +%s) - $2)) s"; }

t=$(date +%s)
"$root/scripts/setup-debian.sh"
"$root/tools/check-records" "$root/docs/decisions"
phase "set up and checked the decision records" "$t"

build=${BUILD_DIR:-$root/build}
t=$(date +%s)
BUILD_DIR=$build "$root/scripts/build.sh" -DMESH_TEST_COMPILE_OPTIONS=-O0 \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
phase "GCC: built $build" "$t"
t=$(date +%s)
(cd "$build" && ctest --output-on-failure -j2 --timeout 600 "$@")
phase "GCC: ran ctest" "$t"

clang_build=${CLANG_BUILD_DIR:-$root/build-clang}
if [ -f "$clang_build/CMakeCache.txt" ] && ! grep -q '^MESH_BUILD_FUZZ:BOOL=ON' "$clang_build/CMakeCache.txt"; then
  echo "test.sh: $clang_build was configured without MESH_BUILD_FUZZ=ON (an older layout); remove it or set CLANG_BUILD_DIR" >&2
  exit 1
fi
if command -v clang++-14 >/dev/null 2>&1; then
  t=$(date +%s)
  CC=clang-14 CXX=clang++-14 BUILD_DIR=$clang_build "$root/scripts/build.sh" -DMESH_BUILD_FUZZ=ON -DMESH_TEST_COMPILE_OPTIONS=-O0 \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only"
  phase "clang: built $clang_build (ASan, UBSan, fuzzer coverage)" "$t"
  t=$(date +%s)
  (cd "$clang_build" && ctest --output-on-failure -j2 --timeout 600 -L unit)
  phase "clang: ran the unit tests under ASan and UBSan" "$t"
else
  echo "test.sh: clang-14 is not installed: the clang build, its sanitizer unit tests and the fuzz step are SKIPPED" >&2
fi
FUZZ_BUILD_DIR=$clang_build "$root/scripts/fuzz.sh"  # libFuzzer targets, 60 s each (fuzz/README.md)
