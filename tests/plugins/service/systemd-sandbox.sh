#!/bin/bash
# Boots a real systemd as PID 1 of a private PID/mount/cgroup/UTS namespace, for tests.
#
#   systemd-sandbox.sh [--overlay UPPER] DIR TARGET [KEEP_PATH...]
#
# --overlay UPPER  absolute path of a folder (e.g. DIR/root; made if missing, outside the trees it
#          covers): /usr, /etc, /var and /opt — and /bin, /sbin, /lib, /lib32, /lib64, /libx32
#          where they are real directories, not the merged-/usr symlinks — become overlays inside
#          the sandbox's mount namespace, the machine's trees read-only below and every change
#          written to UPPER/<tree>/upper (UPPER/<tree>/work is overlayfs's own). So `dpkg -i`,
#          apt, purge or a killed dpkg inside change only UPPER, never the machine's package
#          database or files; the changes stay in UPPER and the next sandbox booted with the same
#          UPPER sees them (a reboot). Reading UPPER/var/upper/lib/dpkg/status from outside shows
#          what dpkg recorded inside. Units dpkg installs into /lib/systemd/system are seen by
#          the sandbox's systemd; /etc/systemd/system is still DIR/units.
# DIR      absolute path of the test's own folder. DIR/units is bound over /etc/systemd/system
#          inside (enable/disable write their symlinks there, never in the host's
#          /etc/systemd/system); DIR/units/TARGET must exist. The script writes DIR/init.pid (the
#          host PID of the sandbox's systemd, for `nsenter -t PID -p -m`) once it is known.
# TARGET   the one unit systemd boots (`--unit=TARGET`): a test-owned *.target that is not one
#          of systemd's own (default.target would run tmpfiles, which empties /tmp, and start
#          every service enabled on the machine). Units started in the sandbox need
#          DefaultDependencies=no (else they pull sysinit.target) and, with no journald, log with
#          StandardOutput=append:FILE.
# KEEP_PATH  paths under /tmp that must stay visible inside (the build tree holding the test
#          binaries); DIR is kept automatically. Everything else in /tmp is hidden behind a
#          private tmpfs, so nothing inside can touch the host's /tmp.
#
# Stop it with `nsenter -t $(cat DIR/init.pid) -p -m systemctl poweroff` (this script then exits 0;
# unshare's own status would be 130, the SIGINT the kernel sends a PID namespace's init on
# reboot(2)), or with SIGTERM to this script (the namespace's init is SIGKILLed). In both cases
# the cgroups made for the sandbox are removed before the script exits.
#
# cgroups: the sandbox first moves itself into a fresh child cgroup `nox-mesh-test-<pid>` of its
# own cgroup in every hierarchy, so the sandbox's systemd (whose cgroup-namespace root is that
# child) never reorganises the caller's cgroup. Inside it mounts, as the parent has them:
#   unified (stat -f /sys/fs/cgroup is cgroup2fs, stock Debian 12): cgroup2 on /sys/fs/cgroup;
#   hybrid  (tmpfs with v1 controllers, name=systemd and cgroup2 on /sys/fs/cgroup/unified) and
#   legacy  (v1 only): a tmpfs on /sys/fs/cgroup, each v1 hierarchy with its own mount options,
#           the parent's symlinks (cpu -> cpu,cpuacct), and cgroup2 on unified when present.
#
# Exit status: 0 after a poweroff; 2 for bad arguments; 3 when the sandbox cannot be set up
# (not root, no CAP_SYS_ADMIN, unshare refused); otherwise systemd's own status.
set -euo pipefail

die() { echo "systemd-sandbox: $*" >&2; exit "${2:-3}"; }
log() { echo "systemd-sandbox: $*" >&2; }

# --- inner stage: PID 1 of the new namespaces -------------------------------------------------
if [ "${1:-}" = "__inner" ]; then
  shift
  layout=$1 dir=$2 target=$3 overlay=$4
  shift 4
  # The overlays first, while every host path (UPPER too) is still where it was. Nothing of the
  # machine is written: the lower layer is the machine's tree, the upper UPPER/<tree>/upper.
  if [ "$overlay" != "-" ]; then
    for tree in /usr /etc /var /opt /bin /sbin /lib /lib32 /lib64 /libx32; do
      if [ ! -d "$tree" ] || [ -L "$tree" ]; then continue; fi
      name=${tree#/}
      mkdir -p "$overlay/$name/upper" "$overlay/$name/work"
      mount -t overlay "overlay-$name" \
        -o "lowerdir=$tree,upperdir=$overlay/$name/upper,workdir=$overlay/$name/work" "$tree" ||
        die "cannot mount an overlay on $tree (upper $overlay/$name/upper)"
    done
  fi
  # The parent's cgroup mounts, read before anything is mounted over /sys/fs/cgroup. mountinfo
  # fields: 5 = mount point, then after " - ": fstype, source, super options.
  cgroup_mounts=$(awk '{ for (i = 7; $i != "-"; i++); if ($(i+1) == "cgroup" || $(i+1) == "cgroup2") print $5, $(i+1), $(i+3) }' /proc/self/mountinfo)
  links=()
  for entry in /sys/fs/cgroup/*; do
    [ -L "$entry" ] && links+=("$(basename "$entry")=$(readlink "$entry")")
  done

  # /run: a private tmpfs (systemd's private bus socket and runtime state live there). It also
  # serves as the staging area for the /tmp paths kept visible.
  mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
  keep=("$dir" "$@")
  staged=()
  i=0
  for path in "${keep[@]}"; do
    case "$path" in /tmp/*) ;; *) continue ;; esac
    [ -d "$path" ] || die "keep path $path is not a directory"
    mkdir -p "/run/.keep/$i"
    mount --bind "$path" "/run/.keep/$i"
    staged+=("$i=$path")
    i=$((i + 1))
  done
  # /tmp: private, so that nothing in the sandbox can empty or litter the host's /tmp.
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
  for s in "${staged[@]+"${staged[@]}"}"; do
    mkdir -p "${s#*=}"
    mount --move "/run/.keep/${s%%=*}" "${s#*=}"
  done
  rm -rf /run/.keep

  # cgroups, seen from the cgroup namespace (whose root is the sandbox's own child cgroup). The
  # parent's mounts go first (only from this mount namespace): mount(8) refuses a second cgroup2
  # on the same mount point.
  umount -R -l /sys/fs/cgroup 2>/dev/null || true
  if [ "$layout" = unified ]; then
    mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
  else
    mount -t tmpfs -o mode=0755,nosuid,nodev,noexec tmpfs /sys/fs/cgroup
    while read -r point fstype options; do
      case "$point" in /sys/fs/cgroup/*) ;; *) continue ;; esac
      name=${point#/sys/fs/cgroup/}
      mkdir -p "/sys/fs/cgroup/$name"
      if [ "$fstype" = cgroup2 ]; then
        mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "/sys/fs/cgroup/$name"
      else
        opts=$(echo "$options" | tr ',' '\n' | grep -vxE 'rw|ro' | paste -sd, -)
        mount -t cgroup -o "nosuid,nodev,noexec,$opts" cgroup "/sys/fs/cgroup/$name"
      fi
    done <<<"$cgroup_mounts"
    for l in "${links[@]+"${links[@]}"}"; do ln -s "${l#*=}" "/sys/fs/cgroup/${l%%=*}"; done
    mount -o remount,bind,ro /sys/fs/cgroup
  fi

  # Read-only /sys and /proc/sys (per-mount flags only: `bind` keeps the host's superblocks
  # writable): systemd then knows it is in a container and leaves kernel settings alone.
  mount -o remount,bind,ro /sys
  mount --bind /proc/sys /proc/sys
  mount -o remount,bind,ro /proc/sys

  # The test's own unit folder replaces /etc/systemd/system.
  mount --bind "$dir/units" /etc/systemd/system

  exec env -i container=nox-mesh-test PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    /lib/systemd/systemd --system "--unit=$target" --log-target=console --log-level=notice \
    --show-status=no
fi

# --- outer stage: checks, cgroups, unshare, clean-up -------------------------------------------
overlay="-"
while [ $# -gt 0 ]; do
  case "$1" in
    --overlay)
      [ $# -ge 2 ] || die "--overlay needs a folder" 2
      overlay=$2
      shift 2 ;;
    --overlay=*) overlay=${1#--overlay=}; shift ;;
    --) shift; break ;;
    --*) die "unknown option $1 (usage: $0 [--overlay UPPER] DIR TARGET [KEEP_PATH...])" 2 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || die "usage: $0 [--overlay UPPER] DIR TARGET [KEEP_PATH...]" 2
dir=$1 target=$2
shift 2
if [ "$overlay" != "-" ]; then
  case "$overlay" in /*) ;; *) die "--overlay must be an absolute path: $overlay" 2 ;; esac
  # overlayfs refuses (or misbehaves with) an upper dir inside the tree it covers.
  real=$(realpath -m -- "$overlay")
  for tree in /usr /etc /var /opt /bin /sbin /lib /lib32 /lib64 /libx32; do
    case "$real/" in "$tree"/*) die "--overlay $overlay is inside $tree, which it would cover; use a folder under /tmp" 2 ;; esac
  done
  [ "$real" != / ] || die "--overlay must not be /" 2
  mkdir -p -- "$overlay" || die "cannot create the overlay folder $overlay" 2
  overlay=$real
fi
case "$dir" in /*) ;; *) die "DIR must be absolute: $dir" 2 ;; esac
[ -d "$dir/units" ] || die "$dir/units is not a directory" 2
[[ "$target" =~ ^[A-Za-z0-9_.@-]+\.target$ ]] || die "TARGET must be a *.target unit name: $target" 2
[ -f "$dir/units/$target" ] || die "$dir/units/$target does not exist (the sandbox boots only a test-owned target)" 2
for t in /lib/systemd/system /usr/lib/systemd/system /etc/systemd/system; do
  [ ! -e "$t/$target" ] || die "$target is a unit of the host ($t); use a test-owned target name" 2
done
for p in "$@"; do
  case "$p" in /*) ;; *) die "KEEP_PATH must be absolute: $p" 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || die "needs root (uid $(id -u))"
[ -x /lib/systemd/systemd ] || die "/lib/systemd/systemd is not installed"
command -v unshare >/dev/null || die "unshare (util-linux) is not installed"

fstype=$(stat -fc %T /sys/fs/cgroup)
if [ "$fstype" = cgroup2fs ]; then
  layout=unified
elif [ "$fstype" = tmpfs ]; then
  if [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null || true)" = cgroup2fs ]; then
    layout=hybrid
  else
    layout=legacy
  fi
else
  die "unknown cgroup layout: /sys/fs/cgroup is $fstype"
fi
log "cgroup layout: $layout"

# Our own child cgroup in every hierarchy. /proc/self/cgroup lines are ID:CONTROLLERS:PATH
# (CONTROLLERS empty for cgroup2); a hierarchy's mount root (mountinfo field 4) is stripped from
# PATH to find the directory under the mount point.
child="nox-mesh-test-$$"
created=()
cleanup_cgroups() {
  local d
  for d in "${created[@]+"${created[@]}"}"; do
    # Depth first; a few tries while the last processes of the namespace are reaped.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -d "$d" ] || break
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$d" ] || break
      sleep 0.1
    done
    [ ! -d "$d" ] || log "could not remove cgroup $d"
  done
}
while read -r root point fstype options; do
  case "$point" in /sys/fs/cgroup|/sys/fs/cgroup/*) ;; *) continue ;; esac
  if [ "$fstype" = cgroup2 ]; then
    path=$(awk -F: '$1 == "0" && $2 == "" { print $3 }' /proc/self/cgroup)
  else
    key=$(echo "$options" | tr ',' '\n' | grep -vxE 'rw|ro|xattr|noprefix|clone_children|cpuset_v2_mode|release_agent=.*' | paste -sd, -)
    path=$(awk -F: -v key="$key" '
      { n = split($2, got, ","); m = split(key, want, ","); if (n != m) next
        for (i = 1; i <= n; i++) { found = 0; for (j = 1; j <= m; j++) if (got[i] == want[j]) found = 1
                                   if (!found) next }
        print $3; exit }' /proc/self/cgroup)
  fi
  [ -n "$path" ] || { log "no cgroup of ours in $point; left alone"; continue; }
  [ "$root" = / ] || path=${path#"$root"}
  base="$point${path%/}"
  [ -d "$base" ] || { log "cgroup $base not found; left alone"; continue; }
  mkdir "$base/$child" || { cleanup_cgroups; die "cannot create cgroup $base/$child"; }
  created+=("$base/$child")
  if [ -f "$base/$child/cpuset.cpus" ]; then
    cat "$base/cpuset.cpus" >"$base/$child/cpuset.cpus"
    cat "$base/cpuset.mems" >"$base/$child/cpuset.mems"
  fi
done < <(awk '{ for (i = 7; $i != "-"; i++); if ($(i+1) == "cgroup" || $(i+1) == "cgroup2") print $4, $5, $(i+1), $(i+3) }' /proc/self/mountinfo)

rm -f "$dir/init.pid"
# A subshell joins the new cgroups and becomes unshare; this shell stays where it was, so that it
# can remove the cgroups afterwards.
(
  for c in "${created[@]+"${created[@]}"}"; do
    echo "$BASHPID" >"$c/cgroup.procs" || die "cannot join cgroup $c"
  done
  exec unshare --pid --fork --mount --mount-proc --cgroup --uts --propagation private \
    -- /bin/bash "$0" __inner "$layout" "$dir" "$target" "$overlay" "$@" </dev/null
) &
upid=$!
init=""
on_term() {
  trap - TERM INT
  [ -n "$init" ] && kill -KILL "$init" 2>/dev/null
  kill -KILL "$upid" 2>/dev/null || true
}
trap on_term TERM INT

# The namespace's init is unshare's one child.
for _ in $(seq 1 200); do
  init=$(cat "/proc/$upid/task/$upid/children" 2>/dev/null | awk '{ print $1 }')
  [ -n "$init" ] && break
  kill -0 "$upid" 2>/dev/null || break
  sleep 0.01
done
if [ -n "$init" ]; then
  echo "$init" >"$dir/init.pid.tmp" && mv "$dir/init.pid.tmp" "$dir/init.pid"
fi

rc=0
wait "$upid" || rc=$?
# `wait` returns early when a trapped signal arrives: wait for the real end.
while kill -0 "$upid" 2>/dev/null; do wait "$upid" || rc=$?; done
cleanup_cgroups
rm -f "$dir/init.pid"
case $rc in
  130) log "powered off"; exit 0 ;;
  0) exit 0 ;;
  *) log "unshare/systemd exited with status $rc"; exit "$rc" ;;
esac
