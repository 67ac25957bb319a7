#!/usr/bin/env bash
# Soak: kill -9 the host mid-apply many times (the suite does 20), checking after every kill that
# no managed file is torn, and at the end that the host finishes in the declared state with a
# correct ownership record.  scripts/soak-kill9.sh [ROUNDS=200] [BUILD_DIR=build]
# Runs the broker-delivered test, then the batched local apply's (batch_kill_test, decision 0106).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-200}
build=${2:-${BUILD_DIR:-$root/build}}
NOX_MESH_KILL9_ROUNDS=$rounds "$build/tests/integration/reconcile_test" \
  --gtest_filter='ReconcileTest.KillNineMidApplyLeavesNoTornFileAndFinishesOnRestart'
NOX_MESH_KILL9_ROUNDS=$rounds exec "$build/tests/integration/batch_kill_test"
