#!/usr/bin/env bash
# What an install builds and installs, checked in the two configurations that install (configure
# only, no compiling: CMake's file API says what `cmake --install` would install, target by
# target, and what each target depends on):
# - the demo's and `scripts/build.sh`'s (tests configured, RelWithDebInfo; scripts/demo.sh then
#   builds only the `nox-mesh` target and runs `cmake --install`): every target `cmake --install`
#   installs must be built by `nox-mesh`, or the demo's install fails on a fresh clone for the
#   file it cannot find (as it once did for the stage plugins);
# - a packager's (BUILD_TESTING=OFF; README "Build by hand" builds everything, then installs):
#   the same, and the three programs, the four providers (file, package, service, container),
#   the nats transport, the sqlite store, the text, json and junit report plugins and the build,
#   publish and deploy stage plugins are installed — the plugins into <libdir>/nox-mesh/plugins.
# In both, the product's programs and plugins above must be installed and built by `nox-mesh`.
#   install_without_tests.sh SOURCE_DIR [CMAKE] [CXX_COMPILER] [C_COMPILER]
set -euo pipefail
src=$1 cmake=${2:-cmake} cxx=${3:-} cc=${4:-}
tmp=$(mktemp -d /tmp/mesh-install-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
base=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
[ -n "$cxx" ] && base+=(-DCMAKE_CXX_COMPILER="$cxx")
[ -n "$cc" ] && base+=(-DCMAKE_C_COMPILER="$cc")
status=0
for config in demo packager; do
  build="$tmp/$config"
  mkdir -p "$build/.cmake/api/v1/query"
  touch "$build/.cmake/api/v1/query/codemodel-v2"
  args=("${base[@]}")
  [ "$config" = packager ] && args+=(-DBUILD_TESTING=OFF)
  if ! "$cmake" -S "$src" -B "$build" "${gen[@]}" "${args[@]}" >"$build/configure.log" 2>&1; then
    cat "$build/configure.log"
    echo "install check ($config): configuring with ${args[*]} failed"
    status=1
    continue
  fi
  python3 - "$build" "$config" <<'PY' || status=1
import glob, json, os, sys
build, config = sys.argv[1], sys.argv[2]
reply = os.path.join(build, ".cmake/api/v1/reply")
index = json.load(open(sorted(glob.glob(os.path.join(reply, "index-*.json")))[-1]))
model = next(o for o in index["objects"] if o["kind"] == "codemodel")
codemodel = json.load(open(os.path.join(reply, model["jsonFile"])))
targets = {}
for t in codemodel["configurations"][0]["targets"]:
    targets[t["name"]] = json.load(open(os.path.join(reply, t["jsonFile"])))
ids = {t["id"]: name for name, t in targets.items()}
programs = ["mesh", "mesh-host", "mesh-control"]
plugins = ["mesh-provider-file", "mesh-provider-package", "mesh-provider-service",
           "mesh-provider-container", "mesh-transport-nats", "mesh-store-sqlite", "mesh-store-jetstream-kv",
           "mesh-report-text", "mesh-report-json", "mesh-report-junit",
           "mesh-stage-build", "mesh-stage-publish", "mesh-stage-deploy"]
problems = []
def destinations(t):
    return [d["path"] for d in t.get("install", {}).get("destinations", [])]
for name in programs + plugins:
    t = targets.get(name)
    if t is None:
        problems.append(f"{name}: no such target")
        continue
    dests = destinations(t)
    if not dests:
        problems.append(f"{name}: built but not installed")
    elif name in plugins and not all(d.endswith("nox-mesh/plugins") for d in dests):
        problems.append(f"{name}: installed into {dests}, not <libdir>/nox-mesh/plugins")
    elif name in programs and dests != ["bin"]:
        problems.append(f"{name}: installed into {dests}, not bin")
# What building `nox-mesh` builds: its dependencies and theirs.
product = targets.get("nox-mesh")
if product is None:
    problems.append("nox-mesh: no such target")
built, todo = set(), [d["id"] for d in (product or {}).get("dependencies", [])]
while todo:
    name = ids.get(todo.pop())
    if name is None or name in built:
        continue
    built.add(name)
    todo.extend(d["id"] for d in targets[name].get("dependencies", []))
for name in programs + plugins:
    if name in targets and name not in built:
        problems.append(f"nox-mesh target: does not build {name}")
# Everything `cmake --install` installs from a build must have been built by `nox-mesh`
# (an INTERFACE library has nothing to build).
for name, t in sorted(targets.items()):
    if destinations(t) and t.get("type") != "INTERFACE_LIBRARY" and name not in built:
        problems.append(f"{name}: installed, but the nox-mesh target does not build it "
                        "(cmake --install after scripts/demo.sh's build would not find it)")
for p in problems:
    print(f"install check ({config}): {p}")
if problems:
    sys.exit(1)
print(f"install check ({config}): nox-mesh builds everything installed; installs "
      + ", ".join(programs + plugins))
PY
done
exit $status
