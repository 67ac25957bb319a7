#!/usr/bin/env bash
# examples/report-markdown as a third party builds and uses it: install BUILD into WORK/prefix,
# build the example against the installed SDK, run its own tests, check it exports only its entry
# point, then have the installed `mesh` find it: `--output markdown` loads (the command goes on to
# its next check), and an unknown --output lists it among the installed report plugins.
#   out_of_tree_report.sh BUILD SRC WORK
set -euo pipefail
build=$1 src=$2 work=$3
prefix=$work/prefix example=$work/markdown plugins=$work/plugins

die() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work" "$plugins"
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/mesh/support/report_text.h" || die "report support header not installed"
cmake -S "$src/examples/report-markdown" -B "$example" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$example" >/dev/null
ctest --test-dir "$example" --output-on-failure
so=$example/plugins/mesh-report-markdown.so
exported=$(nm -D --defined-only "$so" | awk '{print $NF}')
[ "$exported" = "mesh_plugin_info_v1" ] || die "$so exports more than its entry point: $exported"

# A plugin folder as an operator would set one up: the installed plugins and the new one.
installed=$(dirname "$(find "$prefix" -name mesh-report-text.so | head -n1)")
[ -n "$installed" ] || die "mesh-report-text.so not installed"
for f in "$installed"/mesh-*.so "$so"; do ln -s "$f" "$plugins/"; done
mesh=$prefix/bin/mesh
listed=$("$mesh-host" plugins --plugin-dir "$plugins" 2>&1 || true)
echo "$listed"
grep -q "report *markdown" <<<"$listed" || die "mesh-host plugins does not list the markdown report plugin"

# Nothing is sent in either case: the broker address is unreachable and no identity exists.
rc=0
out=$("$mesh" --server nats://127.0.0.1:1 --plugin-dir "$plugins" --identity "$work/none.identity" \
  report --output nosuch 2>&1) || rc=$?
echo "$out"
[ "$rc" = 2 ] || die "unknown --output exited $rc, expected 2"
grep -q "installed: json, junit, markdown, text" <<<"$out" || die "the installed report plugins are not listed"
rc=0
out=$("$mesh" --server nats://127.0.0.1:1 --plugin-dir "$plugins" --identity "$work/none.identity" \
  report --output markdown 2>&1) || rc=$?
echo "$out"
grep -q -- "--output" <<<"$out" && die "--output markdown was refused: $out"
grep -q "none.identity" <<<"$out" || die "mesh did not go on past --output markdown to the identity"
echo "markdown report example: built against the installed SDK, tested, loaded by the installed mesh"
