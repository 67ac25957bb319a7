#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the demo need.
# Idempotent; run as root (or with sudo available). Nothing is downloaded outside apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates python3 curl procps dpkg-dev
  libboost1.81-dev libboost-json1.81-dev libboost-filesystem1.81-dev
  libnats-dev nats-server openssl   # openssl: the tests make the NATS routes' TLS certificates
  libsimdjson-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libexpected-dev libcli11-dev libsodium-dev libsqlite3-dev sqlite3 libsystemd-dev systemd
  libkainjow-mustache-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev
  podman runc busybox-static
  apt-utils gpg gpgv docker-registry libxml2-utils
  lintian
  prometheus prometheus-cpp-dev libuv1-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
