#!/usr/bin/env bash
# Host idle footprint: RSS with all configured plugins loaded, and wake-ups over an idle period.
#   bench/host_idle.sh BUILD_DIR [SECONDS=60] [PLUGINS="file"]
# MESH_IDLE_PEER=cf-execd also runs CFEngine's `cf-execd -F` (a one-promise policy, its work
# directory in the temporary folder through CFENGINE_TEST_OVERRIDE_WORKDIR) over the same SECONDS
# and prints the same figures for it on a `peer` line.
# Starts nats-server, mesh-control and one enrolled mesh-host (heartbeat 30s, drift 30m) with one
# small declaration applied, waits until it is idle, then reads VmRSS/VmHWM from /proc and sums
# voluntary+involuntary context switches of every host thread over SECONDS (a wake-up proxy: a
# thread blocked in a wait only switches when it wakes). Then it breaks the RSS down: anonymous vs
# file-backed, private vs shared, and the largest mappings (MESH_IDLE_TOP, default 15).
set -euo pipefail
build=$(cd "$1" && pwd) secs=${2:-60} load=${3:-file}
bin=$build/bin plugins=$build/plugins
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nats-server -a 127.0.0.1 -p "$port" -l "$tmp/nats.log" & pids+=($!)
server=nats://127.0.0.1:$port
sleep 0.3
printf '[control]\nstate_dir = "%s"\n[plugins]\ndir = "%s"\n[store]\nplugin = "sqlite"\n[transport]\nplugin = "nats"\nservers = ["%s"]\n' \
  "$tmp/control" "$plugins" "$server" >"$tmp/control.toml"
"$bin/mesh-control" run --config "$tmp/control.toml" 2>"$tmp/control.log" & pids+=($!)
export NOX_MESH_SERVER=$server NOX_MESH_PLUGIN_DIR=$plugins
for _ in $(seq 50); do [ -f "$tmp/control/admin.identity" ] && break; sleep 0.1; done
[ -f "$tmp/control/admin.identity" ] && export NOX_MESH_IDENTITY=$tmp/control/admin.identity
for _ in $(seq 50); do "$bin/mesh" nodes >/dev/null 2>&1 && break; sleep 0.1; done
token=$("$bin/mesh" token issue idle-01 --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
loadlist=$(python3 -c 'import sys; print(", ".join("\""+p+"\"" for p in sys.argv[1].split(",")))' "$load")
printf '[node]\nname = "idle-01"\nstate_dir = "%s"\n[plugins]\ndir = "%s"\nload = [%s]\n[transport]\nplugin = "nats"\nservers = ["%s"]\n[timers]\nheartbeat = "30s"\ndrift = "30m"\n' \
  "$tmp/host" "$plugins" "$loadlist" "$server" >"$tmp/host.toml"
printf "%s\n" "$token" | "$bin/mesh-host" enrol --config "$tmp/host.toml" --token-file - >/dev/null
"$bin/mesh-host" run --config "$tmp/host.toml" 2>"$tmp/host.log" & hpid=$!; pids+=($hpid)
printf '{"resources":[{"type":"file","id":"%s/idle.txt","properties":{"content":"idle\\n"}}]}' "$tmp" >"$tmp/decl.json"
"$bin/mesh" declare idle-01 "$tmp/decl.json" >/dev/null
"$bin/mesh" report --wait 20s >/dev/null
sleep 2
switches() { cat /proc/$1/task/*/status | awk '/ctxt_switches/ {s+=$2} END {print s}'; }
ppid_=
if [ "${MESH_IDLE_PEER:-}" = cf-execd ]; then
  mkdir -p "$tmp/cfwork" && chmod 700 "$tmp/cfwork"
  printf 'body common control { bundlesequence => { "main" }; }\nbundle agent main { reports: "idle"; }\n' >"$tmp/promises.cf"
  chmod 600 "$tmp/promises.cf"
  CFENGINE_TEST_OVERRIDE_WORKDIR=$tmp/cfwork cf-key >/dev/null 2>&1 || true
  CFENGINE_TEST_OVERRIDE_WORKDIR=$tmp/cfwork cf-execd -F -f "$tmp/promises.cf" >"$tmp/cf-execd.log" 2>&1 & ppid_=$!; pids+=($ppid_)
  sleep 2
fi
threads=$(ls /proc/$hpid/task | wc -l)
s0=$(switches $hpid)
[ -n "$ppid_" ] && p0=$(switches $ppid_)
sleep "$secs"
s1=$(switches $hpid)
if [ -n "$ppid_" ]; then
  p1=$(switches $ppid_)
  awk -v t="$(ls /proc/$ppid_/task | wc -l)" -v cs=$((p1 - p0)) -v secs="$secs" \
    '/^Rss:/ {r=$2} /^Pss:/ {p=$2} /^Private_Clean:/ {pc=$2} /^Private_Dirty:/ {pd=$2}
     END {printf "peer cf-execd       threads %d  VmRSS %d kB  private %d kB (clean %d + dirty %d)  Pss %d kB  context switches %d in %ss\n", t, r, pc+pd, pc, pd, p, cs, secs}' \
    /proc/$ppid_/smaps_rollup
fi
rss=$(awk '/VmRSS/ {print $2}' /proc/$hpid/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$hpid/status)
echo "plugins loaded      $load (+ transport nats)"
echo "threads             $threads"
echo "VmRSS               ${rss} kB (peak ${hwm} kB)"
echo "context switches    $((s1 - s0)) in ${secs}s idle (all threads)"
# Where the RSS is: anonymous (heap, stacks) vs file-backed (mapped code and data), what is
# private to this process, and the mappings that contribute most (from /proc/PID/smaps).
awk '/^(RssAnon|RssFile|RssShmem)/ {printf "%-19s %s kB\n", $1, $2}' /proc/$hpid/status
awk '/^(Pss|Private_Clean|Private_Dirty|Shared_Clean|Shared_Dirty):/ {printf "%-19s %s kB\n", $1, $2}' \
  /proc/$hpid/smaps_rollup
echo "largest contributors (Rss kB, Private kB, mapping):"
awk '/^[0-9a-f]+-[0-9a-f]+ / {name = ($6 == "") ? "[anon]" : $6; next}
     /^Rss:/ {rss[name] += $2}
     /^Private_(Clean|Dirty):/ {priv[name] += $2}
     END {for (n in rss) if (rss[n] > 0) printf "%8d %8d  %s\n", rss[n], priv[n], n}' /proc/$hpid/smaps |
  sort -rn | head -n "${MESH_IDLE_TOP:-15}"
