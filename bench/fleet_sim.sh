#!/usr/bin/env bash
# Fleet benchmarks with mesh-sim over the real stack on loopback (decision records 95-97):
# nats-server, mesh-control (the sqlite store, or STORE=jetstream-kv) and one mesh-sim process, all started here, all on
# 127.0.0.1, everything in a temporary folder that is removed at the end (kept with KEEP=1).
#
#   bench/fleet_sim.sh BUILD_DIR [HOSTS ...]        (default HOSTS: 1000 10000)
#
# For each HOSTS it measures, with a fresh control plane and store:
#   enrol    mesh-sim issues a token per host (token.issue with the admin identity, and one more
#            admin per 5,000 hosts), enrols and briefs every host: the time until all are
#            enrolled and briefed;
#   deploy   `mesh deploy` of one module (one file) to every host, assigned by `name=sim-*` (after
#            every host synced once after its enrolment), timed
#            from the start of `mesh deploy ... --wait` until it returns with nothing outstanding
#            (every host's signed report verified and recorded) — twice (versions 1.0, 1.1);
#   api      an operator's request (`mesh module list`) while the fleet asks for its declarations
#            after its enrolment, and again during the storm below: the time to its answer;
#   storm    nats-server stopped and started again on the same port: the time from the restart
#            until every connection of mesh-sim is up and every host has asked for its latest
#            declaration and got a verified answer (mesh-sim's status), and until the control
#            plane holds a last contact after the restart for every host (mesh nodes);
#   heartbeats  mesh-sim again on the same identities, each host's period chosen so that all of
#            them offer RATES heartbeats/s (default "10000 50000"), for HB_SECONDS (default 10):
#            the rate mesh-sim actually sent, mesh-control's CPU (% of one core) and resident
#            memory, and how many lines mesh-control logged about dropping or refusing anything.
# Knobs (environment): STORE (sqlite, the default, or jetstream-kv: nats-server then runs with
# JetStream in the temporary folder and the stream has one replica), PER_CONNECTION (hosts per connection, default 100), WORKERS (mesh-sim
# workers, default 16), STORM_HEARTBEAT (the heartbeat during enrolment, deploy and storm,
# default 5s: a last contact after the restart needs one), RATES, HB_SECONDS, IDLE_SECONDS (default 0:
# no idle phase; > 0: mesh-sim again with a 30 s heartbeat, mesh-control's CPU over that many
# seconds and its RSS, then a nats-server restart and the time until every host is synced).
# PROFILE=DIR records a CPU profile (perf, cpu-clock, DWARF call graphs) of mesh-control and mesh-sim
# during each deploy into DIR/deploy-HOSTS-VERSION.perf (`perf report -i FILE --no-children`).
# SKIP_DEPLOY=1 leaves out the deploys and the first storm, RATES="" the heartbeat rates (for the
# idle figures alone at 50,000 hosts: IDLE_SECONDS=60 RATES= SKIP_DEPLOY=1 ... 1000 10000 50000).
# Prints one line per figure, `figure=... hosts=... value=... unit=... load=...` (load: the
# 1-minute load average at that moment).
set -euo pipefail
build=$(cd "${1:?usage: fleet_sim.sh BUILD_DIR [HOSTS ...]}" && pwd)
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000)
per=${PER_CONNECTION:-100}
workers=${WORKERS:-16}
storm_heartbeat=${STORM_HEARTBEAT:-5s}
store=${STORE:-sqlite}
case $store in sqlite|jetstream-kv) ;; *) echo "fleet_sim: STORE is sqlite or jetstream-kv, not '$store'" >&2; exit 2;; esac
bin=$build/bin
plugins=$build/plugins
for p in mesh mesh-control mesh-sim; do [ -x "$bin/$p" ] || { echo "fleet_sim: no $bin/$p (build it)" >&2; exit 2; }; done
command -v nats-server >/dev/null || { echo "fleet_sim: nats-server not installed" >&2; exit 2; }
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d /tmp/mesh-fleet-sim.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "fleet_sim: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
load() { cut -d' ' -f1 /proc/loadavg; }
figure() { echo "figure=$1 hosts=$2 value=$3 unit=$4 store=$store load=$(load)"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
status_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], -1))' "$1" "$2" 2>/dev/null || echo -1; }
proc_cpu_s() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
proc_rss_mib() { awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

run_size() {
  local n=$1 dir=$work/n$n port
  mkdir -p "$dir"
  port=$(free_port)
  local url=nats://127.0.0.1:$port
  start_nats() {
    local js=()
    [ "$store" = jetstream-kv ] && js=(-js -sd "$dir/jetstream")
    nats-server -a 127.0.0.1 -p "$port" -l "$dir/nats.log" "${js[@]}" &
    nats_pid=$!
    pids+=("$nats_pid")
    for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && return 0; sleep 0.1; done
    echo "fleet_sim: nats-server did not start" >&2; return 1
  }
  start_nats
  cat > "$dir/control.toml" <<TOML
[control]
state_dir = "$dir/control"

[plugins]
dir = "$plugins"

$(if [ "$store" = jetstream-kv ]; then printf '[store]\nplugin = "jetstream-kv"\nreplicas = 1\n'; else printf '[store]\nplugin = "sqlite"\npath = "%s"\n' "$dir/control/mesh.db"; fi)

[transport]
plugin = "nats"
servers = ["$url"]
TOML
  "$bin/mesh-control" run --config "$dir/control.toml" --log-level warn 2> "$dir/control.log" &
  local control_pid=$!
  pids+=("$control_pid")
  local admin=$dir/control/admin.identity
  mesh() { "$bin/mesh" --server "$url" --plugin-dir "$plugins" --identity "$admin" --timeout 30s "$@"; }
  for _ in $(seq 150); do [ -f "$admin" ] && mesh nodes > /dev/null 2>&1 && break; sleep 0.2; done
  # The deploys are another operator's (a deployer): the admin's nonces go to the tokens.
  mesh operator add bench --role deployer > "$dir/bench.identity"
  chmod 600 "$dir/bench.identity"
  deployer() { "$bin/mesh" --server "$url" --plugin-dir "$plugins" --identity "$dir/bench.identity" --timeout 30s "$@"; }

  # Tokens are issued by one admin identity per 5,000 hosts: each identity's replay cache holds
  # 10,000 nonces per 120 s (replay_capacity), and every token.issue takes one.
  local ids=(--identity "$admin") k
  for k in $(seq 1 $(( n / 5000 ))); do
    mesh operator add "tokens$k" --role admin > "$dir/tokens$k.identity" 2>/dev/null
    chmod 600 "$dir/tokens$k.identity"
    ids+=(--identity "$dir/tokens$k.identity")
  done
  local t0 t1 status=$dir/sim-status.json
  t0=$(now_ms)
  "$bin/mesh-sim" run --server "$url" --plugin-dir "$plugins" --hosts "$n" --hosts-per-connection "$per" \
    --workers "$workers" "${ids[@]}" --state "$dir/sim-state.jsonl" --heartbeat "$storm_heartbeat" \
    --reconnect-jitter 2s --status "$status" --log-level warn 2> "$dir/sim.log" &
  local sim_pid=$!
  pids+=("$sim_pid")
  for _ in $(seq 6000); do
    [ "$(status_field "$status" enrolled)" = "$n" ] && break
    kill -0 "$sim_pid" 2>/dev/null || { echo "fleet_sim: mesh-sim ended:" >&2; tail -20 "$dir/sim.log" >&2; return 1; }
    sleep 0.2
  done
  t1=$(now_ms)
  figure enrol "$n" $(( t1 - t0 )) ms
  # Every host asks for its latest declaration once enrolled (spread over --reconnect-jitter): an
  # operator's request meanwhile is timed (it must not wait behind the fleet's), then the deploy
  # starts after that, so that its figure is the deploy's alone.
  t0=$(now_ms)
  deployer module list > /dev/null 2>&1 || echo "  (module list during the fleet's first sync: no answer)"
  figure api_during_sync "$n" $(( $(now_ms) - t0 )) ms
  for _ in $(seq 3000); do [ "$(status_field "$status" hosts_synced)" = "$n" ] && break; sleep 0.1; done

  cat > "$dir/module.json" <<'JSON'
{"module": "motd", "version": "VERSION", "resources": [{"type": "file", "id": "/srv/sim/{{node.name}}/motd",
 "properties": {"content": "{{node.name}} VERSION on {{facts.os.id}}\n", "mode": "0644"}}]}
JSON
  deployer assign motd 'name=sim-*' > /dev/null 2>&1 || true
  local versions="1.0 1.1"
  [ "${SKIP_DEPLOY:-0}" = 1 ] && versions=""
  for v in $versions; do
    sed "s/VERSION/$v/g" "$dir/module.json" > "$dir/module-$v.json"
    deployer module push "$dir/module-$v.json" > /dev/null
    [ "$v" = 1.0 ] && deployer assign motd 'name=sim-*' > /dev/null
    local cc0 cs0 cn0
    cc0=$(proc_cpu_s "$control_pid"); cs0=$(proc_cpu_s "$sim_pid"); cn0=$(proc_cpu_s "$nats_pid")
    local perf_pid=
    if [ -n "${PROFILE:-}" ]; then
      # A CPU profile of mesh-control and mesh-sim during the deploy (PROFILE: a folder to keep it in).
      mkdir -p "$PROFILE"
      perf record -q -e cpu-clock -F 999 --call-graph dwarf,16384 -p "$control_pid,$sim_pid" \
        -o "$PROFILE/deploy-$n-$v.perf" > /dev/null 2>&1 &
      perf_pid=$!
      sleep 0.5
    fi
    t0=$(now_ms)
    deployer deploy motd "$v" --wait 600s --output json > "$dir/deploy-$v.json" || true
    t1=$(now_ms)
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; fi
    local applied outstanding
    applied=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["applied"]))' "$dir/deploy-$v.json")
    outstanding=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["outstanding"]))' "$dir/deploy-$v.json")
    figure "deploy_$v" "$n" $(( t1 - t0 )) ms
    echo "  applied=$applied outstanding=$outstanding nodes_per_s=$(( applied * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1) ))" \
      "cpu_s: mesh-control=$(awk -v a="$cc0" -v b="$(proc_cpu_s "$control_pid")" 'BEGIN { printf "%.1f", b - a }')" \
      "mesh-sim=$(awk -v a="$cs0" -v b="$(proc_cpu_s "$sim_pid")" 'BEGIN { printf "%.1f", b - a }')" \
      "nats-server=$(awk -v a="$cn0" -v b="$(proc_cpu_s "$nats_pid")" 'BEGIN { printf "%.1f", b - a }')"
  done

  # The reconnect storm.
  local reconnects before_restart restart_s
  if [ "${SKIP_DEPLOY:-0}" != 1 ]; then
  reconnects=$(status_field "$status" reconnects)
  kill "$nats_pid"; wait "$nats_pid" 2>/dev/null || true
  sleep 2
  before_restart=$(now_ms)
  restart_s=$(( before_restart / 1000 + 1 ))
  start_nats
  for _ in $(seq 600); do [ "$(status_field "$status" reconnects)" -gt "$reconnects" ] && break; sleep 0.05; done
  t0=$(now_ms)
  deployer module list > /dev/null 2>&1 || echo "  (module list during the reconnect storm: no answer)"
  figure api_during_storm "$n" $(( $(now_ms) - t0 )) ms
  for _ in $(seq 6000); do
    if [ "$(status_field "$status" reconnects)" -gt "$reconnects" ] &&
       [ "$(status_field "$status" connections_up)" = "$(status_field "$status" connections)" ] &&
       [ "$(status_field "$status" hosts_synced)" = "$n" ]; then break; fi
    sleep 0.1
  done
  t1=$(now_ms)
  figure storm_synced "$n" $(( t1 - before_restart )) ms
  for _ in $(seq 600); do
    if mesh nodes --output json > "$dir/nodes.json" 2>/dev/null && python3 - "$dir/nodes.json" "$restart_s" "$n" <<'PY'
import json, sys, datetime
nodes = json.load(open(sys.argv[1])); after = int(sys.argv[2]); n = int(sys.argv[3])
def t(s): return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else -1
ok = len(nodes) == n and all(t(x.get("last_contact")) >= after for x in nodes)
sys.exit(0 if ok else 1)
PY
    then break; fi
    sleep 0.5
  done
  t1=$(now_ms)
  figure storm_contact "$n" $(( t1 - before_restart )) ms
  fi

  kill "$sim_pid"; wait "$sim_pid" 2>/dev/null || true

  # Heartbeats: mesh-sim again on the same identities (--state), each host at the period that
  # offers RATE heartbeats/s in all, for HB_SECONDS; mesh-control's CPU over that time, what
  # mesh-sim sent, and whatever mesh-control logged as dropped (busy, slow consumer, refused).
  local rate period_ms sent0 sent1 c0 c1 s0 s1 drops
  for rate in ${RATES-10000 50000}; do
    period_ms=$(( n * 1000 / rate ))
    # mesh-control takes at most 20 messages/s from one node (decision 29): not more per host.
    [ "$period_ms" -ge 50 ] || { echo "  (rate $rate over $n hosts: more than 20 heartbeats/s per host, over the per-node limit; skipped)"; continue; }
    local lines0
    lines0=$(wc -l < "$dir/control.log")
    "$bin/mesh-sim" run --server "$url" --plugin-dir "$plugins" --hosts "$n" --hosts-per-connection "$per" \
      --workers "$workers" --state "$dir/sim-state.jsonl" --heartbeat "${period_ms}ms" --reconnect-jitter 1s \
      --status "$status" --log-level warn 2>> "$dir/sim.log" &
    sim_pid=$!
    pids+=("$sim_pid")
    for _ in $(seq 600); do [ "$(status_field "$status" hosts_synced)" = "$n" ] && break; sleep 0.1; done
    sleep 3
    sent0=$(status_field "$status" heartbeats); c0=$(proc_cpu_s "$control_pid"); s0=$(proc_cpu_s "$sim_pid")
    sleep "${HB_SECONDS:-10}"
    sent1=$(status_field "$status" heartbeats); c1=$(proc_cpu_s "$control_pid"); s1=$(proc_cpu_s "$sim_pid")
    drops=$(tail -n +"$(( lines0 + 1 ))" "$dir/control.log" | grep -ciE 'busy|slow consumer|expired|replayed|refused|rate limit' || true)
    figure "heartbeats_offered_$rate" "$n" $(( (sent1 - sent0) / ${HB_SECONDS:-10} )) per_s
    echo "  control_cpu=$(python3 -c "print(round(($c1 - $c0) / ${HB_SECONDS:-10} * 100))")% sim_cpu=$(python3 -c "print(round(($s1 - $s0) / ${HB_SECONDS:-10} * 100))")% control_drop_lines=$drops control_rss_mib=$(proc_rss_mib "$control_pid") sim_rss_mib=$(proc_rss_mib "$sim_pid")"
    kill "$sim_pid"; wait "$sim_pid" 2>/dev/null || true
  done
  # Idle (IDLE_SECONDS > 0): mesh-sim on the same identities with a heartbeat every 30 s (the
  # default of a real host), nothing deployed: mesh-control's CPU over IDLE_SECONDS and its
  # resident memory; then nats-server restarted under it: the time from the restart until every
  # connection is up and every host synced again (asked latest, verified answer).
  if [ "${IDLE_SECONDS:-0}" -gt 0 ]; then
    "$bin/mesh-sim" run --server "$url" --plugin-dir "$plugins" --hosts "$n" --hosts-per-connection "$per" \
      --workers "$workers" --state "$dir/sim-state.jsonl" --heartbeat 30s --reconnect-jitter 2s \
      --status "$status" --log-level warn 2>> "$dir/sim.log" &
    sim_pid=$!
    pids+=("$sim_pid")
    for _ in $(seq 6000); do [ "$(status_field "$status" hosts_synced)" = "$n" ] && break; sleep 0.1; done
    sleep 35  # one whole heartbeat period after the start's burst of latest requests
    local n0 n1
    c0=$(proc_cpu_s "$control_pid"); s0=$(proc_cpu_s "$sim_pid"); n0=$(proc_cpu_s "$nats_pid")
    sleep "$IDLE_SECONDS"
    c1=$(proc_cpu_s "$control_pid"); s1=$(proc_cpu_s "$sim_pid"); n1=$(proc_cpu_s "$nats_pid")
    figure idle_control_cpu "$n" "$(python3 -c "print(round(($c1 - $c0) / $IDLE_SECONDS * 100, 1))")" percent_of_a_core
    figure idle_control_rss "$n" "$(proc_rss_mib "$control_pid")" MiB
    echo "  sim_cpu=$(python3 -c "print(round(($s1 - $s0) / $IDLE_SECONDS * 100, 1))")% nats_cpu=$(python3 -c "print(round(($n1 - $n0) / $IDLE_SECONDS * 100, 1))")% sim_rss_mib=$(proc_rss_mib "$sim_pid") nats_rss_mib=$(proc_rss_mib "$nats_pid")"
    reconnects=$(status_field "$status" reconnects)
    kill "$nats_pid"; wait "$nats_pid" 2>/dev/null || true
    sleep 2
    before_restart=$(now_ms)
    start_nats
    for _ in $(seq 12000); do
      if [ "$(status_field "$status" reconnects)" -gt "$reconnects" ] &&
         [ "$(status_field "$status" connections_up)" = "$(status_field "$status" connections)" ] &&
         [ "$(status_field "$status" hosts_synced)" = "$n" ]; then break; fi
      sleep 0.1
    done
    t1=$(now_ms)
    figure idle_storm_synced "$n" $(( t1 - before_restart )) ms
    kill "$sim_pid"; wait "$sim_pid" 2>/dev/null || true
  fi
  kill "$control_pid" "$nats_pid" 2>/dev/null || true
  wait "$control_pid" "$nats_pid" 2>/dev/null || true
}

echo "fleet_sim: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2/1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
for n in "${sizes[@]}"; do run_size "$n"; done
