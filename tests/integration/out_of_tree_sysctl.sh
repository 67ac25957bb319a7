#!/usr/bin/env bash
# examples/provider-sysctl as a third party builds and uses it, in three steps (ctest runs each as
# its own test; `build` is the fixture the other two need):
#   out_of_tree_sysctl.sh build  BUILD SRC WORK  install BUILD into WORK/prefix, build the example
#                                                against the installed SDK into WORK/sysctl
#   out_of_tree_sysctl.sh tmproot BUILD SRC WORK the example's own tests (unit + the SDK's
#                                                conformance suite), then mesh-host apply against a
#                                                temporary root: apply, read-back, drift, prune
#   out_of_tree_sysctl.sh netns  BUILD SRC WORK  mesh-host apply against the real /proc/sys, only
#                                                inside a new network namespace, with per-namespace
#                                                net.* keys; exits 77 (skipped) without namespaces
# Nothing here changes the machine's own kernel settings: the netns step refuses to write unless it
# is in a network namespace of its own, and checks the machine's values are unchanged afterwards.
set -euo pipefail
step=$1 build=$2 src=$3 work=$4
prefix=$work/prefix example=$work/sysctl
plugins=$example/plugins
mesh_host=$prefix/bin/mesh-host

die() { echo "FAIL: $*" >&2; exit 1; }

# apply DECLARATION CONFIG [EXPECTED_EXIT]: mesh-host apply, output kept in $out.
apply() {
  local rc=0
  out=$("$mesh_host" apply "$1" --config "$2" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = "${3:-0}" ] || die "mesh-host apply $1 exited $rc, expected ${3:-0}"
}

# host_config FILE STATE_DIR [ROOT]: a host.toml loading only the sysctl provider.
host_config() {
  {
    echo "[node]"
    echo "name = \"sysctl-example\""
    echo "state_dir = \"$2\""
    echo "[plugins]"
    echo "dir = \"$plugins\""
    echo "load = [\"sysctl\"]"
    if [ -n "${3:-}" ]; then
      echo "[provider.sysctl]"
      echo "root = \"$3\""
    fi
  } >"$1"
}

case $step in
build)
  rm -rf "$work"
  mkdir -p "$work"
  cmake --install "$build" --prefix "$prefix" >/dev/null
  test -f "$prefix/include/mesh/sdk/testing/conformance.h" || die "conformance suite not installed"
  cmake -S "$src/examples/provider-sysctl" -B "$example" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$example" >/dev/null
  so=$plugins/mesh-provider-sysctl.so
  exported=$(nm -D --defined-only "$so" | awk '{print $NF}')
  [ "$exported" = "mesh_plugin_info_v1" ] || die "$so exports more than its entry point: $exported"
  listed=$("$mesh_host" plugins --plugin-dir "$plugins")
  echo "$listed"
  grep -q "provider   sysctl" <<<"$listed" || die "sysctl plugin not listed"
  echo "sysctl example: built against the installed SDK, listed"
  ;;

tmproot)
  ctest --test-dir "$example" --output-on-failure
  tmp=$(mktemp -d /tmp/sysctl-example.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  root=$tmp/root
  mkdir -p "$root/net/ipv4"
  printf '0\n' >"$root/net/ipv4/ip_forward"
  printf '32768\t60999\n' >"$root/net/ipv4/ip_local_port_range"
  host_config "$tmp/host.toml" "$tmp/state" "$root"
  cat >"$tmp/both.json" <<'JSON'
{"resources": [
  {"type": "sysctl", "id": "net.ipv4.ip_forward", "properties": {"value": "1"}},
  {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "1024 65000"}}
]}
JSON
  apply "$tmp/both.json" "$tmp/host.toml"
  grep -q "2 changed" <<<"$out" || die "first apply did not change both keys"
  [ "$(cat "$root/net/ipv4/ip_forward")" = 1 ] || die "ip_forward not written"
  [ "$(cat "$root/net/ipv4/ip_local_port_range")" = "1024 65000" ] || die "port range not written"
  # The kernel prints a multi-value key with a tab: still the declared value, nothing to do.
  printf '1024\t65000\n' >"$root/net/ipv4/ip_local_port_range"
  apply "$tmp/both.json" "$tmp/host.toml"
  grep -q "0 changed" <<<"$out" || die "a second apply changed something"
  # Drift: someone sets the key back; the next apply sees and repairs it (read-back verified).
  printf '0\n' >"$root/net/ipv4/ip_forward"
  apply "$tmp/both.json" "$tmp/host.toml"
  grep -q "1 changed" <<<"$out" || die "drift not repaired"
  [ "$(cat "$root/net/ipv4/ip_forward")" = 1 ] || die "drift repair not written"
  # A key the kernel does not have fails the apply and is not created.
  cat >"$tmp/missing.json" <<'JSON'
{"resources": [
  {"type": "sysctl", "id": "net.ipv4.ip_forward", "properties": {"value": "1"}},
  {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "1024 65000"}},
  {"type": "sysctl", "id": "net.ipv4.no_such_key", "properties": {"value": "1"}}
]}
JSON
  apply "$tmp/missing.json" "$tmp/host.toml" 1
  grep -q "no such key" <<<"$out" || die "a missing key is not named"
  [ ! -e "$root/net/ipv4/no_such_key" ] || die "a missing key was created"
  # A key that could leave the root is refused before anything is applied.
  cat >"$tmp/escape.json" <<'JSON'
{"resources": [
  {"type": "sysctl", "id": "net.ipv4.ip_forward", "properties": {"value": "0"}},
  {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "1024 65000"}},
  {"type": "sysctl", "id": "..", "properties": {"value": "1"}}
]}
JSON
  apply "$tmp/escape.json" "$tmp/host.toml" 2
  grep -q "sysctl:\.\." <<<"$out" || die "the refused resource is not named"
  [ "$(cat "$root/net/ipv4/ip_forward")" = 1 ] || die "a refused declaration applied something"
  # Prune: drop ip_forward from the declaration. The key stays, with the value it has.
  cat >"$tmp/one.json" <<'JSON'
{"resources": [
  {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "1024 65000"}}
]}
JSON
  apply "$tmp/one.json" "$tmp/host.toml"
  [ "$(cat "$root/net/ipv4/ip_forward")" = 1 ] || die "prune changed the released key"
  # No longer managed: drift on it is left alone.
  printf '0\n' >"$root/net/ipv4/ip_forward"
  apply "$tmp/one.json" "$tmp/host.toml"
  grep -q "0 changed" <<<"$out" || die "a released key is still managed"
  [ "$(cat "$root/net/ipv4/ip_forward")" = 0 ] || die "a released key was written"
  echo "sysctl example: unit and conformance tests, apply, read-back, drift, prune (temporary root)"
  ;;

netns)
  if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
    isolate=(unshare --net)
  elif unshare --user --map-root-user --net true 2>/dev/null; then
    isolate=(unshare --user --map-root-user --net)
  else
    echo "SKIP: cannot create a network namespace here (neither 'unshare --net' as root nor" \
      "'unshare -rn' is allowed); the real /proc/sys is only ever written inside one"
    exit 77
  fi
  keys=(net/ipv4/ip_forward net/ipv4/ip_local_port_range net/ipv4/conf/all/forwarding)
  machine_before=$(for k in "${keys[@]}"; do echo "$k=$(cat "/proc/sys/$k")"; done)
  tmp=$(mktemp -d /tmp/sysctl-example-netns.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  host_config "$tmp/host.toml" "$tmp/state"  # default root: /proc/sys
  export MESH_HOST=$mesh_host HOST_TOML=$tmp/host.toml TMPD=$tmp
  export OUTER_NS=$(readlink /proc/self/ns/net)
  inner=0
  "${isolate[@]}" bash -euo pipefail -c '
    die() { echo "FAIL (in the namespace): $*" >&2; exit 1; }
    [ "$(readlink /proc/self/ns/net)" != "$OUTER_NS" ] ||
      die "not in a network namespace of our own; refusing to touch /proc/sys"
    apply() {
      local rc=0
      out=$("$MESH_HOST" apply "$1" --config "$HOST_TOML" 2>&1) || rc=$?
      echo "$out"
      [ "$rc" = "${2:-0}" ] || die "mesh-host apply $1 exited $rc, expected ${2:-0}"
    }
    fwd=/proc/sys/net/ipv4/ip_forward range=/proc/sys/net/ipv4/ip_local_port_range
    start=$(cat $fwd)
    want=$([ "$start" = 0 ] && echo 1 || echo 0)
    cat >"$TMPD/both.json" <<JSON
{"resources": [
  {"type": "sysctl", "id": "net.ipv4.ip_forward", "properties": {"value": "$want"}},
  {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "40000 50000"}}
]}
JSON
    apply "$TMPD/both.json"
    grep -q "2 changed" <<<"$out" || die "first apply did not change both keys"
    [ "$(cat $fwd)" = "$want" ] || die "ip_forward is $(cat $fwd), declared $want"
    [ "$(cat $range)" = "$(printf "40000\t50000")" ] || die "the port range is $(cat $range)"
    apply "$TMPD/both.json"
    grep -q "0 changed" <<<"$out" || die "the kernel tab-separated range reads as a change"
    echo "$start" >$fwd  # drift
    apply "$TMPD/both.json"
    grep -q "1 changed" <<<"$out" || die "drift not repaired"
    [ "$(cat $fwd)" = "$want" ] || die "drift repair did not reach the kernel"
    # The kernel refuses a value: the apply fails with its words.
    cat >"$TMPD/bad.json" <<JSON
{"resources": [
  {"type": "sysctl", "id": "net.ipv4.ip_forward", "properties": {"value": "yes"}},
  {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "40000 50000"}}
]}
JSON
    apply "$TMPD/bad.json" 1
    grep -q "Invalid argument" <<<"$out" || die "the kernel refusal is not quoted"
    # Prune: the key stays, with its value.
    cat >"$TMPD/one.json" <<JSON
{"resources": [
  {"type": "sysctl", "id": "net.ipv4.ip_local_port_range", "properties": {"value": "40000 50000"}}
]}
JSON
    apply "$TMPD/one.json"
    [ "$(cat $fwd)" = "$want" ] || die "prune changed the released key"
  ' || inner=$?
  machine_after=$(for k in "${keys[@]}"; do echo "$k=$(cat "/proc/sys/$k")"; done)
  [ "$machine_before" = "$machine_after" ] ||
    die "the machine's own settings changed: $machine_before -> $machine_after"
  [ "$inner" = 0 ] || die "the steps inside the network namespace failed (exit $inner)"
  echo "sysctl example: apply, read-back, drift, kernel refusal, prune on the real /proc/sys" \
    "inside a new network namespace (${isolate[*]}); the machine's settings are unchanged"
  ;;
*)
  die "unknown step '$step' (build, tmproot, netns)"
  ;;
esac
