#!/usr/bin/env bash
# The README's second command: install what is needed, build, and run the whole test suite
# (unit, integration and system tests, and the decision-record checker). Exits non-zero when a
# test fails. System tests need root (apt, systemd, podman); they skip with a message otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-debian.sh"
"$root/tools/check-records" "$root/docs/decisions"
"$root/scripts/build.sh"
build=${BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j2 --timeout 600 "$@"
"$root/scripts/fuzz.sh"  # libFuzzer targets, 60 s each (fuzz/README.md)
