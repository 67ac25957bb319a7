#!/bin/bash
# Runs a command in a private mount namespace where /usr, /etc and /var are overlays whose upper
# layers live in a fresh directory under /tmp, so that dpkg, apt and maintainer scripts inside
# (install, purge, a killed dpkg) change only that directory, never the machine's own package
# database or files. For tests (label `system`); the test binary is run through it as ctest's
# CROSSCOMPILING_EMULATOR.
#
#   overlay-exec.sh CMD [ARGS...]
#
# The command gets NOX_MESH_TEST_OVERLAY=<the directory> (holding usr/, etc/, var/ upper layers).
# When the overlay cannot be made (not root, no overlayfs, unshare refused) the command is run
# as it is with NOX_MESH_TEST_OVERLAY unset and NOX_MESH_TEST_OVERLAY_SKIP=<why>: tests that
# change packages must then skip (gtest's --gtest_list_tests works either way). The directory
# is removed when the command ends; its exit status is the command's.
set -euo pipefail

if [ "${1:-}" = "__inner" ]; then
  shift
  base=$1
  shift
  for d in usr etc var; do
    mkdir -p "$base/$d" "$base/.work/$d"
    mount -t overlay overlay -o "lowerdir=/$d,upperdir=$base/$d,workdir=$base/.work/$d" "/$d"
  done
  export NOX_MESH_TEST_OVERLAY=$base
  exec "$@"
fi

[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
why=""
if [ "$(id -u)" -ne 0 ]; then
  why="needs root to mount overlays (uid $(id -u))"
elif ! grep -qw overlay /proc/filesystems; then
  why="the kernel has no overlayfs"
elif ! command -v unshare >/dev/null; then
  why="unshare (util-linux) is not installed"
fi
if [ -z "$why" ]; then
  base=$(mktemp -d /tmp/mesh-overlay-XXXXXX)
  chmod 0755 "$base"
  rc=0
  unshare --mount --propagation private -- /bin/bash "$0" __inner "$base" "$@" || rc=$?
  # The uppers are owned by whatever dpkg installed; the namespace is gone, so nothing is mounted.
  rm -rf --one-file-system "$base"
  exit "$rc"
fi
export NOX_MESH_TEST_OVERLAY_SKIP=$why
unset NOX_MESH_TEST_OVERLAY
exec "$@"
