#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang-14 in their own build tree and runs each one
# for a bounded time on a copy of its committed seed corpus (fuzz/corpus/<target>/; the copy
# grows, the committed corpus does not). Fails on any crash, leak, sanitizer report or timeout.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default: $FUZZ_SECONDS, else 60)
#
# Environment: FUZZ_BUILD_DIR (default ./build-fuzz), FUZZ_JOBS (targets run at once; default 2,
# at most the number of CPUs), FUZZ_TARGETS (space-separated subset). Findings (crash-*, leak-*,
# timeout-* inputs) and each target's log stay in $FUZZ_BUILD_DIR/fuzz-out/<target>/; reproduce
# one with: $FUZZ_BUILD_DIR/fuzz/<target> <input>. Skips (exit 0) only when clang-14 is absent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-${FUZZ_SECONDS:-60}}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
out=$build/fuzz-out
targets=(${FUZZ_TARGETS:-fuzz_json fuzz_declaration fuzz_config fuzz_control_messages fuzz_host_messages fuzz_fleet})
jobs=${FUZZ_JOBS:-2}
cpus=$(nproc)
((jobs > cpus)) && jobs=$cpus
((jobs < 1)) && jobs=1

if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]" >&2
  exit 2
fi
if ! command -v clang++-14 >/dev/null 2>&1 || ! command -v clang-14 >/dev/null 2>&1; then
  echo "fuzz: SKIPPED: clang-14 is not installed (scripts/setup-debian.sh installs clang-14 and libclang-rt-14-dev)"
  exit 0
fi

# --- build ----------------------------------------------------------------------------------------
# -O1 and line tables only: the usual fuzzing trade (fast enough, stacks with lines) and a third
# of the build time of -O2 -g. No NDEBUG: assertions are checks too.
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
start=$(date +%s)
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" "${gen[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DMESH_BUILD_FUZZ=ON -DBUILD_TESTING=OFF -DMESH_BUILD_BENCH=OFF >"$build.configure.log" 2>&1 || {
    cat "$build.configure.log" >&2
    echo "fuzz: FAILED: configure (clang-14; is libclang-rt-14-dev installed?)" >&2
    exit 1
  }
fi
if ! cmake --build "$build" --target mesh_fuzzers -j"$jobs" >"$build/fuzz-build.log" 2>&1; then
  tail -n 60 "$build/fuzz-build.log" >&2
  echo "fuzz: FAILED: build (log: $build/fuzz-build.log)" >&2
  exit 1
fi
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start)) s ($build)"

# --- run ------------------------------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

run_one() {
  local t=$1 dir=$out/$1
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp "$root/fuzz/corpus/$t/." "$dir/corpus/" -r
  local dict=(-dict="$root/fuzz/dict/json.dict")
  [ "$t" = fuzz_config ] && dict=(-dict="$root/fuzz/dict/toml.dict")
  [ "$t" = fuzz_fleet ] && dict=(-dict="$root/fuzz/dict/mustache.dict")
  local rc=0
  # The outer timeout only catches a fuzzer that stops making progress altogether.
  timeout --signal=KILL $((seconds + 300)) "$build/fuzz/$t" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
}

summary() {
  local t=$1 dir=$out/$1 rc execs rate seeds corp result
  rc=$(cat "$dir/rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -n 1)
  seeds=$(find "$root/fuzz/corpus/$t" -type f | wc -l)
  corp=$(find "$dir/corpus" -type f | wc -l)
  local findings
  findings=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \))
  if [ "$rc" = 0 ] && [ -z "$findings" ] &&
     ! grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz finding' "$dir/log"; then
    result=ok
  else
    result="FAILED (exit $rc)"
  fi
  printf 'fuzz: %-22s %10s execs in %ss (%s/s), corpus %s -> %s: %s\n' "$t" "${execs:-?}" "$seconds" \
    "${rate:-?}" "$seeds" "$corp" "$result"
  if [ "$result" != ok ]; then
    grep -E -A 12 'ERROR: |runtime error:|fuzz finding' "$dir/log" | head -n 40 | sed 's/^/    /'
    for f in $findings; do echo "    input: $f (reproduce: $build/fuzz/$t $f)"; done
    echo "    log: $dir/log"
    return 1
  fi
}

for t in "${targets[@]}"; do
  if [ ! -x "$build/fuzz/$t" ] || [ ! -d "$root/fuzz/corpus/$t" ]; then
    echo "fuzz: FAILED: no target or no corpus for $t" >&2
    exit 1
  fi
done
run_start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
wait || true

passed=0
failed=0
for t in "${targets[@]}"; do
  if summary "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz: ran for $(($(date +%s) - run_start)) s, $jobs at a time"
echo "$passed passed, $failed failed"
((failed == 0))
