#!/usr/bin/env bash
# The README's first command: on a fresh Debian 12 machine, install what is needed, build, start a
# local mesh (nats-server on a free loopback port, mesh-control with the sqlite store, one host),
# enrol the host (printing its briefing), declare examples/hello, print the delivery report, and
# stop everything started. Operator signatures (the control plane's admin.identity), declaration
# signatures and node signatures are on, as in every mesh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-debian.sh"
MESH_BUILD_TARGET=nox-mesh "$root/scripts/build.sh"   # programs and plugins only, no tests

run=$(mktemp -d /tmp/nox-mesh-demo-run.XXXXXX)
prefix="$run/prefix"
cmake --install "${BUILD_DIR:-$root/build}" --prefix "$prefix" >/dev/null
bin="$prefix/bin"
plugins=$(find "$prefix" -type d -path '*nox-mesh/plugins' | head -n1)

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nats_server=$(command -v nats-server || echo /usr/sbin/nats-server)
"$nats_server" -a 127.0.0.1 -p "$port" -l "$run/nats.log" &
pids+=($!)
server="nats://127.0.0.1:$port"
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done

cat >"$run/control.toml" <<TOML
[control]
state_dir = "$run/control"

[plugins]
dir = "$plugins"

[store]
plugin = "sqlite"
path = "$run/control/mesh.db"

[transport]
plugin = "nats"
servers = ["$server"]
TOML
"$bin/mesh-control" run --config "$run/control.toml" 2>"$run/control.log" &
pids+=($!)

# mesh-control writes its signing key and the first operator identity on its first start; every
# `mesh` request below is signed with that identity.
export NOX_MESH_SERVER="$server" NOX_MESH_PLUGIN_DIR="$plugins" NOX_MESH_IDENTITY="$run/control/admin.identity"
for _ in $(seq 100); do "$bin/mesh" nodes >/dev/null 2>&1 && break; sleep 0.1; done

token=$("$bin/mesh" token issue demo-01 --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')

rm -rf /tmp/nox-mesh-demo   # the demo's own folder: start empty so the listing below shows this run
mkdir -p /tmp/nox-mesh-demo
cat >"$run/host.toml" <<TOML
[node]
name = "demo-01"
state_dir = "$run/host"

[plugins]
dir = "$plugins"
load = ["file"]

[transport]
plugin = "nats"
servers = ["$server"]

[timers]
heartbeat = "5s"
drift = "1m"
TOML
"$bin/mesh-host" enrol --config "$run/host.toml" --token "$token"
"$bin/mesh-host" run --config "$run/host.toml" 2>"$run/host.log" &
pids+=($!)

"$bin/mesh" declare demo-01 "$root/examples/hello/declaration.json"
set +e
"$bin/mesh" report --wait 30s
rc=$?
set -e
echo
echo "applied files:"
ls -l /tmp/nox-mesh-demo
echo "logs and configs: $run"
exit $rc
