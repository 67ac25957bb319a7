#!/usr/bin/env bash
# Peer harness: `mesh-host apply` against CFEngine's `cf-agent` and Puppet's `puppet apply` on the
# same workload, side by side.
#
#   bench/peer_apply.sh BUILD_DIR [N ...]          (default N: 100 1000 5000 20000)
#
# Workload: N files of 42 bytes (41 × "x" and a newline), mode 0644, in one empty directory. Each
# tool gets its own directory and its own state, and is given the same N files in its own language
# (a mesh declaration, a CFEngine policy with one `files` promise per file, a Puppet manifest with
# one `file` resource per file). For each N and each round, three phases run, interleaved between
# the tools (mesh, cf, puppet for the first apply, then the same order for the no-op, then for the
# drift repair; the order rotates by one tool every round):
#   first   target directory empty, tool state fresh (mesh state dir, CFEngine work dir with its key
#           pair already made, Puppet vardir all new; the previous round's files are moved aside
#           in the temporary folder, not deleted, until the harness exits);
#   noop    the same again: nothing to change;
#   drift   before the run (not timed) every 10th file (f…1, f…11, …) gets other content and every
#           10th from the 6th (f…6, f…16, …) mode 0600, i.e. 20% of the files drifted; the run
#           repairs them.
# After every run the directory is checked: exactly the N names, each a regular file of mode 0644
# holding the 42 bytes. A failed check stops the harness (exit 1) naming tool, N, phase and round.
# Before every run `sync` empties the page cache's dirty pages (not timed), so one run's writeback
# does not land in the next one's time.
#
# Measured per run: wall time (the clock read around the run, in ns), and with /usr/bin/time user
# and system CPU and peak RSS (maximum resident set of
# the process or of its largest child); and the 1-minute load average just before the run. The raw
# rows go to $OUT (default: peer_apply.tsv in the working folder, printed at the end); the summary
# prints, per N and phase, the median of the rounds for each tool and its ratio to cf-agent's median.
#
# Environment:
#   ROUNDS=3                rounds per N
#   TOOLS="mesh cf puppet"  which tools run (cf is the reference for ratios; without it no ratios)
#   OUT=FILE                where the raw rows go (tab-separated, with a header)
#   KEEP=1                  keep the temporary folder (printed) for inspection
#   TMPDIR                  where the temporary folder goes: put it on the disk you mean to measure
#
# Needs (Debian 12): cfengine3, puppet-agent (or puppet), time, python3; and BUILD_DIR holding a
# build of this tree (bin/mesh-host, plugins/mesh-provider-file.so). Every tool runs as the
# invoking user; run as root to compare with how the agents run in production (CFEngine refuses
# some operations otherwise). Nothing is written outside the temporary folder: cf-agent's work
# directory is moved there with CFENGINE_TEST_OVERRIDE_WORKDIR, Puppet's with --confdir,
# --vardir, --codedir, --logdir and --rundir.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,40p' "$0" >&2; exit 2; }
build=$(cd "$1" && pwd); shift
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(100 1000 5000 20000)
rounds=${ROUNDS:-3}
read -r -a tools <<<"${TOOLS:-mesh cf puppet}"
meshhost=$build/bin/mesh-host plugins=$build/plugins
for t in "${tools[@]}"; do
  case $t in
    mesh) [ -x "$meshhost" ] || { echo "peer_apply: $meshhost missing: build the tree first" >&2; exit 2; } ;;
    cf) for p in cf-agent cf-promises cf-key; do command -v $p >/dev/null ||
          { echo "peer_apply: $p missing: apt-get install cfengine3 (or leave cf out of TOOLS)" >&2; exit 2; }; done ;;
    puppet) command -v puppet >/dev/null ||
          { echo "peer_apply: puppet missing: apt-get install puppet-agent (or leave puppet out of TOOLS)" >&2; exit 2; } ;;
    *) echo "peer_apply: unknown tool '$t' in TOOLS (mesh, cf, puppet)" >&2; exit 2 ;;
  esac
done
[ -x /usr/bin/time ] || { echo "peer_apply: /usr/bin/time missing: apt-get install time" >&2; exit 2; }
command -v python3 >/dev/null || { echo "peer_apply: python3 missing: apt-get install python3" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/peer_apply.XXXXXX")
out=${OUT:-$PWD/peer_apply.tsv}
if [ "${KEEP:-0}" = 1 ]; then trap 'echo "kept $tmp" >&2' EXIT; else trap 'rm -rf "$tmp"' EXIT; fi

# The workload in each tool's language, written once per N (not timed).
gen() {  # gen N DIR_PREFIX -> $tmp/w/N/{decl.json,policy.cf,manifest.pp}
  python3 - "$1" "$2" <<'EOF'
import json, os, sys
n, root = int(sys.argv[1]), sys.argv[2]
w = os.path.join(root, "w", str(n)); os.makedirs(w, exist_ok=True)
names = ["f%06d" % i for i in range(1, n + 1)]
line = "x" * 41 + "\n"
target = lambda tool: os.path.join(root, tool, str(n), "d")
with open(os.path.join(w, "decl.json"), "w") as f:
    json.dump({"resources": [{"type": "file", "id": os.path.join(target("mesh"), x),
                              "properties": {"content": line, "mode": "0644"}} for x in names]}, f,
              separators=(",", ":"))
with open(os.path.join(w, "policy.cf"), "w") as f:
    f.write('body common control { bundlesequence => { "main" }; }\n'
            'body perms m { mode => "0644"; rxdirs => "false"; }\n'
            'bundle agent main {\nfiles:\n')
    for x in names:
        f.write('  "%s/%s" create => "true", content => "%s$(const.n)", perms => m;\n' % (target("cf"), x, "x" * 41))
    f.write("}\n")
os.chmod(os.path.join(w, "policy.cf"), 0o600)
with open(os.path.join(w, "manifest.pp"), "w") as f:
    for x in names:
        f.write("file { '%s/%s': ensure => file, content => \"%s\\n\", mode => '0644' }\n" % (target("puppet"), x, "x" * 41))
EOF
}

verify() {  # verify DIR N -> exit 1 with the first difference
  python3 - "$1" "$2" <<'EOF'
import os, stat, sys
d, n = sys.argv[1], int(sys.argv[2])
want = {"f%06d" % i for i in range(1, n + 1)}
have = set(os.listdir(d))
if have != want:
    extra, missing = sorted(have - want), sorted(want - have)
    sys.exit("%d entries; extra %s; missing %s" % (len(have), extra[:5], missing[:5]))
line = b"x" * 41 + b"\n"
for x in sorted(want):
    p = os.path.join(d, x); st = os.lstat(p)
    if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o644:
        sys.exit("%s: mode %o" % (p, st.st_mode))
    with open(p, "rb") as f:
        if f.read() != line:
            sys.exit("%s: content differs" % p)
EOF
}

drift() {  # drift DIR N: 10% of the files get other content, another 10% mode 0600
  python3 - "$1" "$2" <<'EOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1, 10):
    with open(os.path.join(d, "f%06d" % i), "w") as f: f.write("drifted\n")
for i in range(6, n + 1, 10):
    os.chmod(os.path.join(d, "f%06d" % i), 0o600)
EOF
}

# CFEngine's work directory needs cf-promises beside it and a key pair; made once, copied per round.
if printf '%s\n' "${tools[@]}" | grep -qx cf; then
  mkdir -p "$tmp/cfwork/bin" && ln -s "$(command -v cf-promises)" "$tmp/cfwork/bin/cf-promises"
  CFENGINE_TEST_OVERRIDE_WORKDIR=$tmp/cfwork cf-key >/dev/null
fi

# A round's files are moved aside, not deleted, until the harness exits: on an ext4 without a
# journal the inode allocator skips every inode freed in the last 60-360 s, scanning them again at
# each create (recently_deleted() in fs/ext4/ialloc.c), so deleting N files right before a first
# apply made its creates cost in proportion to them — for whichever tool happened to create next
# in that block group (docs/benchmarks.md, "First apply, no-op and drift: the per-file cost").
reset() {  # reset TOOL N: empty target directory, fresh state
  local t=$1 n=$2 base=$tmp/$1/$2
  if [ -e "$base" ]; then mkdir -p "$tmp/old" && mv "$base" "$(mktemp -d "$tmp/old/$t.$n.XXXXXX")/"; fi
  mkdir -p "$base/d"
  case $t in
    mesh) mkdir -p "$base/state"
          # The 20,000-file declaration (2.8 MB) is over mesh-host's 1 MiB default message limit.
          printf '[node]\nname = "peer-apply"\nstate_dir = "%s"\n[plugins]\ndir = "%s"\nload = ["file"]\n[limits]\nmax_message = 67108864\n' \
            "$base/state" "$plugins" >"$base/mesh.toml" ;;
    cf) cp -a "$tmp/cfwork" "$base/work" ;;
    puppet) mkdir -p "$base/pp" ;;
  esac
}

run() {  # run TOOL N: the tool's own command line under /usr/bin/time (figures in $tmp/time)
  local t=$1 n=$2 base=$tmp/$1/$2 w=$tmp/w/$2
  local timed=(/usr/bin/time -f '%e\t%U\t%S\t%M' -o "$tmp/time")
  case $t in
    mesh) "${timed[@]}" "$meshhost" apply "$w/decl.json" --config "$base/mesh.toml" --state-dir "$base/state" \
            --plugin-dir "$plugins" --load file ;;
    cf) CFENGINE_TEST_OVERRIDE_WORKDIR=$base/work "${timed[@]}" cf-agent -K -f "$w/policy.cf" ;;
    puppet) "${timed[@]}" puppet apply --color=false --confdir "$base/pp/etc" --vardir "$base/pp/var" --codedir "$base/pp/code" \
              --logdir "$base/pp/log" --rundir "$base/pp/run" "$w/manifest.pp" ;;
  esac
}

printf 'tool\tN\tphase\tround\twall_s\tuser_s\tsys_s\tpeak_rss_kb\tload1\n' >"$out"
echo "peer_apply: tools ${tools[*]}, N ${sizes[*]}, $rounds rounds; raw rows in $out" >&2
for n in "${sizes[@]}"; do
  gen "$n" "$tmp"
  for r in $(seq "$rounds"); do
    order=("${tools[@]:$(( (r - 1) % ${#tools[@]} ))}" "${tools[@]:0:$(( (r - 1) % ${#tools[@]} ))}")
    for t in "${order[@]}"; do reset "$t" "$n"; done
    for phase in first noop drift; do
      for t in "${order[@]}"; do
        [ "$phase" = drift ] && drift "$tmp/$t/$n/d" "$n"
        sync
        load=$(cut -d' ' -f1 /proc/loadavg)
        t0=$(date +%s%N)
        if ! run "$t" "$n" >>"$tmp/$t.$n.log" 2>&1; then
          echo "peer_apply: $t failed (N=$n, $phase, round $r); its output: $tmp/$t.$n.log" >&2
          trap 'echo "kept $tmp" >&2' EXIT; exit 1
        fi
        # The clock stops before the check: the check (a Python process reading every file, ~0.1 s
        # at N = 1,000 and ~0.3 s at 20,000 here) is not the tool's time.
        t1=$(date +%s%N)
        if ! why=$(verify "$tmp/$t/$n/d" "$n" 2>&1); then
          echo "peer_apply: $t left a wrong result (N=$n, $phase, round $r): $why" >&2
          trap 'echo "kept $tmp" >&2' EXIT; exit 1
        fi
        # Wall time from the clock around the run (ns; /usr/bin/time's own is in 10 ms steps).
        wall=$(python3 -c "print('%.4f' % (($t1 - $t0) / 1e9))")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$n" "$phase" "$r" "$wall" "$(tail -n1 "$tmp/time" | cut -f2-)" \
          "$load" >>"$out"
        printf '  %-6s N=%-6s %-5s round %s: %s s, peak %s kB (load %s)\n' "$t" "$n" "$phase" "$r" \
          "$wall" "$(tail -n1 "$tmp/time" | cut -f4)" "$load" >&2
      done
    done
  done
done

# Summary: medians per N, phase and tool; ratios to cf-agent's medians.
python3 - "$out" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = lambda xs: statistics.median(xs) if xs else None
key = lambda r: (int(r["N"]), r["phase"], r["tool"])
groups = {}
for r in rows: groups.setdefault(key(r), []).append(r)
tools = [t for t in ("mesh", "cf", "puppet") if any(k[2] == t for k in groups)]
loads = [float(r["load1"]) for r in rows]
print("median of %d round(s); load average (1 min) %.2f-%.2f over the runs" %
      (max(int(r["round"]) for r in rows), min(loads), max(loads)))
print("%-6s %-5s %-6s %9s %9s %9s %10s %9s" % ("N", "phase", "tool", "wall s", "CPU s", "/cf wall", "peak MiB", "/cf RSS"))
for n in sorted({k[0] for k in groups}):
    for phase in ("first", "noop", "drift"):
        cf = groups.get((n, phase, "cf"))
        cfw = med([float(r["wall_s"]) for r in cf]) if cf else None
        cfm = med([int(r["peak_rss_kb"]) for r in cf]) if cf else None
        for t in tools:
            g = groups.get((n, phase, t))
            if not g: continue
            w = med([float(r["wall_s"]) for r in g])
            c = med([float(r["user_s"]) + float(r["sys_s"]) for r in g])
            m = med([int(r["peak_rss_kb"]) for r in g])
            rw = "%8.2fx" % (w / cfw) if cfw else "%9s" % "-"
            rm = "%8.2fx" % (m / cfm) if cfm else "%9s" % "-"
            print("%-6d %-5s %-6s %9.3f %9.3f %s %10.1f %s" % (n, phase, t, w, c, rw, m / 1024, rm))
EOF
