#!/usr/bin/env bash
# Tests for tools/check-records.
#
# usage: run_tests.sh [CHECKER [RECORDS_DIR]]
#   CHECKER      the checker to test (default: <repo>/tools/check-records)
#   RECORDS_DIR  the project's own records, which must pass (default: <repo>/docs/decisions)
#
# Fixtures: every directory fixtures/<case>/ holds
#   records/   the directory handed to the checker
#   expect     line 1: the expected exit code
#              every further line: a fixed string that must appear in stdout, or,
#              prefixed "stderr:", in stderr. Lines starting with '#' are comments.
# Cases are named pass-<rule>/ (the rule holds; exit 0), fail-<rule>[-variant]/ (the rule
# is violated; exit 1) and warn-<rule>/ (a warning only; exit 0).
#
# Beyond the listed strings, each fixture is held to its expect file exactly, so a failing
# fixture cannot pass by failing for a different rule:
#   - every stdout line must contain one of the stdout strings, and every string must match;
#   - stderr must be empty unless stderr strings are listed, and then every line must match;
#   - stdout must be sorted by file name.
# The script also checks usage errors (exit 2), --help, the default directory, and the
# project's own records (exit 0, no output). It ends with "N passed, M failed" and exits
# non-zero if anything failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
checker="${1:-$repo/tools/check-records}"
project_records="${2:-$repo/docs/decisions}"
fixtures="$here/fixtures"

passed=0
failed=0
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

pass() { passed=$((passed + 1)); echo "ok    $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL  $1: $2"
  if [ -s "$scratch/out" ]; then sed 's/^/      stdout| /' "$scratch/out"; fi
  if [ -s "$scratch/err" ]; then sed 's/^/      stderr| /' "$scratch/err"; fi
}

# run_checker [ARGS...]: runs the checker, leaving stdout/stderr in $scratch and the exit code in $rc.
run_checker() {
  rc=0
  "$checker" "$@" >"$scratch/out" 2>"$scratch/err" || rc=$?
}

# lines_match STREAM_FILE PATTERNS_FILE: every line matches a pattern and every pattern a line.
lines_match() {
  local stream="$1" patterns="$2" line pattern found
  while IFS= read -r line; do
    found=no
    while IFS= read -r pattern; do
      if [[ "$line" == *"$pattern"* ]]; then found=yes; break; fi
    done <"$patterns"
    if [ "$found" = no ]; then echo "unexpected line: $line"; return 1; fi
  done <"$stream"
  while IFS= read -r pattern; do
    if ! grep -qF -- "$pattern" "$stream"; then echo "missing: $pattern"; return 1; fi
  done <"$patterns"
  return 0
}

if [ ! -f "$checker" ] || [ ! -x "$checker" ] || [ ! -d "$project_records" ]; then
  echo "FAIL  '$checker' must be an executable file and '$project_records' a directory"
  echo "0 passed, 1 failed"
  exit 1
fi
# Absolute paths, so the default-directory tests can run the checker from elsewhere.
checker="$(cd "$(dirname "$checker")" && pwd)/$(basename "$checker")"
project_records="$(cd "$project_records" && pwd)"

# ---- fixtures --------------------------------------------------------------------------
for dir in "$fixtures"/*/; do
  dir="${dir%/}"
  name="$(basename "$dir")"
  if [ ! -f "$dir/expect" ] || [ ! -d "$dir/records" ]; then
    fail "$name" "fixture needs an expect file and a records/ directory"
    continue
  fi
  expected_rc="$(head -n 1 "$dir/expect")"
  tail -n +2 "$dir/expect" | grep -v '^#' | grep -v '^stderr:' | grep -v '^$' >"$scratch/want-out" || true
  tail -n +2 "$dir/expect" | grep '^stderr:' | sed 's/^stderr://' >"$scratch/want-err" || true

  run_checker "$dir/records"
  case "$name" in
    pass-*|warn-*) [ "$expected_rc" = 0 ] || { fail "$name" "pass/warn fixture must expect exit 0"; continue; } ;;
    fail-*) [ "$expected_rc" = 1 ] || { fail "$name" "fail fixture must expect exit 1"; continue; } ;;
    *) fail "$name" "fixture name must start with pass-, fail- or warn-"; continue ;;
  esac
  if [ "$rc" != "$expected_rc" ]; then
    fail "$name" "exit code $rc, expected $expected_rc"
    continue
  fi
  if ! why="$(lines_match "$scratch/out" "$scratch/want-out")"; then
    fail "$name" "stdout: $why"
    continue
  fi
  if [ -s "$scratch/want-err" ]; then
    if ! why="$(lines_match "$scratch/err" "$scratch/want-err")"; then
      fail "$name" "stderr: $why"
      continue
    fi
  elif [ -s "$scratch/err" ]; then
    fail "$name" "unexpected stderr"
    continue
  fi
  if ! cut -d: -f1 "$scratch/out" | LC_ALL=C sort -c 2>/dev/null; then
    fail "$name" "stdout is not sorted by file name"
    continue
  fi
  pass "$name"
done

# The chain case, spelled out: the line names the rule and both records.
run_checker "$fixtures/fail-accepted-extends-proposed/records"
if [ "$rc" = 1 ] && grep '\[accepted-extends-proposed\]' "$scratch/out" \
    | grep '^0002-accepted\.md:' | grep -q '0001-proposed\.md'; then
  pass "chain: accepted extending proposed names both records"
else
  fail "chain: accepted extending proposed names both records" "rc=$rc"
fi
run_checker "$fixtures/pass-proposed-extends-proposed/records"
if [ "$rc" = 0 ] && [ ! -s "$scratch/out" ]; then
  pass "chain: proposed extending proposed passes"
else
  fail "chain: proposed extending proposed passes" "rc=$rc"
fi

# Determinism: the same input gives the same output.
run_checker "$fixtures/fail-several/records"
cp "$scratch/out" "$scratch/first"
run_checker "$fixtures/fail-several/records"
if cmp -s "$scratch/first" "$scratch/out"; then
  pass "output is deterministic"
else
  fail "output is deterministic" "two runs differ"
fi

# ---- usage -----------------------------------------------------------------------------
# expect_usage NAME EXPECTED_RC STREAM PATTERN ARGS...
expect_usage() {
  local name="$1" want_rc="$2" stream="$3" pattern="$4"
  shift 4
  run_checker "$@"
  if [ "$rc" = "$want_rc" ] && grep -qF -- "$pattern" "$scratch/$stream"; then
    pass "$name"
  else
    fail "$name" "exit $rc (expected $want_rc), $stream should contain '$pattern'"
  fi
}
expect_usage "--help prints usage, exit 0" 0 out "usage: check-records" --help
expect_usage "-h prints usage, exit 0" 0 out "usage: check-records" -h
expect_usage "--help lists the rule ids" 0 out "accepted-extends-proposed" --help
expect_usage "unknown option, exit 2" 2 err "unknown option '--bogus'" --bogus "$project_records"
expect_usage "too many arguments, exit 2" 2 err "too many arguments" "$project_records" "$project_records"
expect_usage "missing directory, exit 2" 2 err "is not a directory" "$scratch/no-such-dir"
expect_usage "a file is not a directory, exit 2" 2 err "is not a directory" "$checker"
mkdir "$scratch/empty"
expect_usage "empty directory passes with a warning" 0 err "warning:" "$scratch/empty"

# Usage errors print nothing on stdout.
run_checker --bogus
if [ "$rc" = 2 ] && [ ! -s "$scratch/out" ]; then
  pass "usage error leaves stdout empty"
else
  fail "usage error leaves stdout empty" "rc=$rc"
fi

# Without DIR, the checker reads docs/decisions under the current directory.
mkdir -p "$scratch/clone/docs"
cp -R "$fixtures/fail-superseded-by/records" "$scratch/clone/docs/decisions"
rc=0
(cd "$scratch/clone" && "$checker") >"$scratch/out" 2>"$scratch/err" || rc=$?
if [ "$rc" = 1 ] && grep -qF "[superseded-by]" "$scratch/out"; then
  pass "default directory is ./docs/decisions"
else
  fail "default directory is ./docs/decisions" "rc=$rc"
fi
rc=0
(cd "$scratch/empty" && "$checker") >"$scratch/out" 2>"$scratch/err" || rc=$?
if [ "$rc" = 2 ] && grep -qF "docs/decisions" "$scratch/err"; then
  pass "no ./docs/decisions is a usage error"
else
  fail "no ./docs/decisions is a usage error" "rc=$rc"
fi

# ---- the project's own records ---------------------------------------------------------
run_checker "$project_records"
if [ "$rc" = 0 ] && [ ! -s "$scratch/out" ] && [ ! -s "$scratch/err" ]; then
  pass "project records pass with no warnings"
else
  fail "project records pass with no warnings" "exit $rc"
fi

: >"$scratch/out"
: >"$scratch/err"
missing_from_index=""
for record in "$project_records"/[0-9][0-9][0-9][0-9]-*.md; do
  [ -e "$record" ] || continue
  base="$(basename "$record")"
  grep -qF "($base)" "$project_records/README.md" || missing_from_index="$missing_from_index $base"
done
if [ -z "$missing_from_index" ]; then
  pass "README.md index links every record"
else
  fail "README.md index links every record" "missing:$missing_from_index"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
