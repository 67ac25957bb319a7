#!/usr/bin/env bash
# Installs the build tree into a temp prefix, builds examples/provider-hello against the installed
# SDK package (find_package(NoxMeshSdk)), lists it with the installed mesh-host and applies a
# declaration through it.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in bin/mesh-host bin/mesh-control bin/mesh; do test -x "$tmp/prefix/$f" || { echo "missing $f"; exit 1; }; done
plugins=$(find "$tmp/prefix" -type d -path '*nox-mesh/plugins' | head -n1)
for p in mesh-provider-file mesh-transport-nats mesh-store-sqlite; do
  test -f "$plugins/$p.so" || { echo "missing installed plugin $p.so"; exit 1; }
done
test -f "$tmp/prefix/include/mesh/sdk/provider.h" || { echo "SDK headers not installed"; exit 1; }
cmake -S "$src/examples/provider-hello" -B "$tmp/hello" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/hello" >/dev/null
out=$("$tmp/prefix/bin/mesh-host" plugins --plugin-dir "$tmp/hello/plugins")
echo "$out"
grep -q "provider   hello" <<<"$out" || { echo "hello plugin not listed"; exit 1; }
cat >"$tmp/decl.json" <<JSON
{"resources": [{"type": "hello", "id": "$tmp/greeting", "properties": {"name": "plugin author"}}]}
JSON
"$tmp/prefix/bin/mesh-host" apply "$tmp/decl.json" --plugin-dir "$tmp/hello/plugins" --load hello --state-dir "$tmp/state"
test "$(cat "$tmp/greeting")" = "hello, plugin author" || { echo "greeting not written"; exit 1; }
# Applying again changes nothing (read-back and plan are empty).
"$tmp/prefix/bin/mesh-host" apply "$tmp/decl.json" --plugin-dir "$tmp/hello/plugins" --load hello --state-dir "$tmp/state" | grep -q "0 changed"
echo "out-of-tree plugin: built, listed, applied"
