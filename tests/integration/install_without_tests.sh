#!/usr/bin/env bash
# A packager's build (BUILD_TESTING=OFF) installs the whole product: configures the source tree
# that way in a temporary build folder (configure only, no compiling: CMake's file API says what
# `cmake --install` would install, target by target) and checks that the three programs, the four
# providers (file, package, service, container), the nats transport, the sqlite store and the
# text, json and junit report plugins are installed — the plugins into <libdir>/nox-mesh/plugins —
# and that the `nox-mesh` target builds them all.
#   install_without_tests.sh SOURCE_DIR [CMAKE] [CXX_COMPILER] [C_COMPILER]
set -euo pipefail
src=$1 cmake=${2:-cmake} cxx=${3:-} cc=${4:-}
tmp=$(mktemp -d /tmp/mesh-install-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/.cmake/api/v1/query"
touch "$tmp/build/.cmake/api/v1/query/codemodel-v2"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
args=(-DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
[ -n "$cxx" ] && args+=(-DCMAKE_CXX_COMPILER="$cxx")
[ -n "$cc" ] && args+=(-DCMAKE_C_COMPILER="$cc")
if ! "$cmake" -S "$src" -B "$tmp/build" "${gen[@]}" "${args[@]}" >"$tmp/configure.log" 2>&1; then
  cat "$tmp/configure.log"
  echo "install check: configuring with BUILD_TESTING=OFF failed"
  exit 1
fi
python3 - "$tmp/build" <<'PY'
import glob, json, os, sys
reply = os.path.join(sys.argv[1], ".cmake/api/v1/reply")
index = json.load(open(sorted(glob.glob(os.path.join(reply, "index-*.json")))[-1]))
model = next(o for o in index["objects"] if o["kind"] == "codemodel")
codemodel = json.load(open(os.path.join(reply, model["jsonFile"])))
targets = {}
for t in codemodel["configurations"][0]["targets"]:
    targets[t["name"]] = json.load(open(os.path.join(reply, t["jsonFile"])))
ids = {t["id"]: name for name, t in targets.items()}
programs = ["mesh", "mesh-host", "mesh-control"]
plugins = ["mesh-provider-file", "mesh-provider-package", "mesh-provider-service",
           "mesh-provider-container", "mesh-transport-nats", "mesh-store-sqlite",
           "mesh-report-text", "mesh-report-json", "mesh-report-junit"]
problems = []
for name in programs + plugins:
    t = targets.get(name)
    if t is None:
        problems.append(f"{name}: no such target with BUILD_TESTING=OFF")
        continue
    dests = [d["path"] for d in t.get("install", {}).get("destinations", [])]
    if not dests:
        problems.append(f"{name}: built but not installed")
    elif name in plugins and not all(d.endswith("nox-mesh/plugins") for d in dests):
        problems.append(f"{name}: installed into {dests}, not <libdir>/nox-mesh/plugins")
    elif name in programs and dests != ["bin"]:
        problems.append(f"{name}: installed into {dests}, not bin")
product = targets.get("nox-mesh")
built = {ids.get(d["id"]) for d in (product or {}).get("dependencies", [])}
for name in programs + plugins:
    if name not in built:
        problems.append(f"nox-mesh target: does not build {name}")
for p in problems:
    print("install check: " + p)
if problems:
    sys.exit(1)
print("install check: BUILD_TESTING=OFF installs " + ", ".join(programs + plugins))
PY
