#!/usr/bin/env bash
# The README's first command: on a fresh Debian 12 machine, install what is needed, build, start a
# local mesh (nats-server on a free loopback port, mesh-control with the sqlite store, hosts),
# enrol the host (printing its briefing), declare examples/hello, print the delivery report; then
# enrol two more hosts (one left stopped), label the three, push and assign the module
# examples/web, deploy it in one write and print its report (2 applied, 1 outstanding); and stop
# everything started. Operator signatures (the control plane's admin.identity), declaration
# signatures and node signatures are on, as in every mesh, and so are broker permissions:
# mesh-control writes nats-server's authorization file (its own nkey, the enrolment user, the
# operators' user, one nkey per enrolled node) and reloads the server after each enrolment.
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
server="nats://127.0.0.1:$port"

# Broker permissions: two passwords (the enrolment user's, shared by hosts until they have their
# own nkey; the operators' user's, for `mesh`), an authorization file that mesh-control writes,
# and a nats-server config that includes it and has a pid file for mesh-control's reloads.
python3 -c 'import secrets; print(secrets.token_hex(16))' >"$run/enrol.pw"
python3 -c 'import secrets; print(secrets.token_hex(16))' >"$run/operator.pw"
chmod 600 "$run/enrol.pw" "$run/operator.pw"
cat >"$run/nats.conf" <<CONF
listen: 127.0.0.1:$port
pid_file: "$run/nats.pid"
include "mesh-auth.conf"
CONF

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

[broker]
authorization_file = "$run/mesh-auth.conf"
pid_file = "$run/nats.pid"
enrol_password_file = "$run/enrol.pw"
operator_password_file = "$run/operator.pw"
TOML
# The authorization file must exist before nats-server's first start.
"$bin/mesh-control" broker-config --config "$run/control.toml" >/dev/null 2>"$run/broker-config.log"

nats_server=$(command -v nats-server || echo /usr/sbin/nats-server)
"$nats_server" -c "$run/nats.conf" -l "$run/nats.log" &
pids+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done

"$bin/mesh-control" run --config "$run/control.toml" 2>"$run/control.log" &
pids+=($!)

# mesh-control wrote its signing key and the first operator identity (broker-config above, on its
# first start); every `mesh` request below is signed with that identity, and `mesh` connects to
# the broker as the operators' user (operator.toml).
cat >"$run/operator.toml" <<TOML
[transport]
plugin = "nats"
servers = ["$server"]
user = "mesh-operator"
password_file = "$run/operator.pw"
TOML
export NOX_MESH_CONFIG="$run/operator.toml" NOX_MESH_PLUGIN_DIR="$plugins" NOX_MESH_IDENTITY="$run/control/admin.identity"
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
# Enrolment goes through the enrolment user; after it the host connects with its own nkey
# (<state_dir>/broker.nk, received sealed at enrolment) and these two keys are not used.
user = "mesh-enrol"
password_file = "$run/enrol.pw"

[timers]
heartbeat = "5s"
drift = "1m"

# Files only where the demo declares them; and this machine runs the control plane too, so its
# config, state directory and broker files are denied to every provider (README, security.md).
[provider.file]
allowed_roots = ["/tmp/nox-mesh-demo"]

[paths]
control_config = "$run/control.toml"
TOML
printf "%s\n" "$token" | "$bin/mesh-host" enrol --config "$run/host.toml" --token-file -
"$bin/mesh-host" run --config "$run/host.toml" 2>"$run/host.log" &
pids+=($!)

"$bin/mesh" declare demo-01 "$root/examples/hello/declaration.json"
set +e
"$bin/mesh" report --wait 30s
rc=$?
set -e
[ "$rc" -eq 0 ] || exit "$rc"

# A fleet of three: demo-02 and demo-03 are enrolled too (each sends its briefing, with its
# facts), but demo-03 is never started — a laptop that is switched off. All three are labelled
# role=web, the module examples/web is pushed and assigned by that label, and one deploy writes
# all three declarations at once; the report says two applied and one outstanding.
for n in 02 03; do
  sed -e "s/demo-01/demo-$n/" -e "s|state_dir = \"$run/host\"|state_dir = \"$run/host-$n\"|" "$run/host.toml" >"$run/host-$n.toml"
  t=$("$bin/mesh" token issue "demo-$n" --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
  printf "%s\n" "$t" | "$bin/mesh-host" enrol --config "$run/host-$n.toml" --token-file - >"$run/enrol-$n.log" 2>&1 ||
    { cat "$run/enrol-$n.log"; exit 1; }
done
"$bin/mesh-host" run --config "$run/host-02.toml" 2>"$run/host-02.log" &
pids+=($!)
echo
for n in 01 02 03; do "$bin/mesh" node label "demo-$n" role=web >/dev/null; done
"$bin/mesh" module push "$root/examples/web/module.json"
"$bin/mesh" assign web role=web
set +e
"$bin/mesh" deploy web 1.0 --wait 10s
rc=$?
set -e
echo
echo "applied files:"
ls -l /tmp/nox-mesh-demo
echo "motd-demo-01: $(cat /tmp/nox-mesh-demo/motd-demo-01 2>/dev/null)"
echo "logs and configs: $run"
exit $rc
