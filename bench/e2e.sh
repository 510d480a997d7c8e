#!/bin/sh
# The end-to-end row of BENCHMARKS.md for two builds of aw-run, alternating: spawn -> exit
# of `aw-run --root FRESH -q WORKFLOW` (a fresh root each run, an empty registry of servers
# at the start, two warm-up rounds not counted), then the system calls of one run of each
# build that do not depend on the load (strace -f -c: fsync, rename, statfs, execve).
# Usage: sh bench/e2e.sh BEFORE AFTER [ROUNDS [WORKFLOW]]
#   BEFORE, AFTER: aw-run executables; ROUNDS: counted rounds (default 21);
#   WORKFLOW: default examples/hello.yaml (two mock agents).
# Prints Markdown. Nothing here asserts on time.
set -eu
case ${1:-} in
-h | --help)
	echo "usage: sh bench/e2e.sh BEFORE AFTER [ROUNDS [WORKFLOW]]"
	exit 0
	;;
esac
if [ $# -lt 2 ]; then
	echo "bench/e2e.sh: two aw-run executables needed (hint: --help)" >&2
	exit 64
fi
before=$1
after=$2
rounds=${3:-21}
wf=${4:-$(cd "$(dirname "$0")/.." && pwd)/examples/hello.yaml}
for b in "$before" "$after"; do
	[ -x "$b" ] || {
		echo "bench/e2e.sh: $b: not an executable" >&2
		exit 66
	}
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# A registry of servers of the bench's own (see aw-ctl(1), FILES), so that the figures do
# not depend on how many entries earlier runs on the machine left in the user's.
XDG_RUNTIME_DIR=$tmp/run
export XDG_RUNTIME_DIR
mkdir -m 700 "$XDG_RUNTIME_DIR"

once() { # once BINARY OUTFILE: one timed run in a fresh root, microseconds appended
	root=$(mktemp -d "$tmp/root.XXXXXX")
	s=$(date +%s%N)
	"$1" --root "$root" -q "$wf" >/dev/null
	e=$(date +%s%N)
	echo $(((e - s) / 1000)) >>"$2"
	rm -rf "$root"
}

median() { # median FILE: the median and the 90th percentile, in ms
	sort -n "$1" | awk '{v[NR] = $1} END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		p = v[int(NR * 0.9 + 0.999)]
		printf "%.1f ms | %.1f ms", m / 1000, p / 1000
	}'
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
i=0
while [ "$i" -lt $((rounds + 2)) ]; do
	if [ "$i" -lt 2 ]; then
		once "$before" "$tmp/warm"
		once "$after" "$tmp/warm"
	elif [ $((i % 2)) = 0 ]; then
		once "$before" "$tmp/before"
		once "$after" "$tmp/after"
	else
		once "$after" "$tmp/after"
		once "$before" "$tmp/before"
	fi
	i=$((i + 1))
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

echo "load average before: $load0; after: $load1; $rounds alternating rounds"
echo
echo "| build | n | median | p90 |"
echo "|---|---:|---:|---:|"
echo "| before | $rounds | $(median "$tmp/before") |"
echo "| after | $rounds | $(median "$tmp/after") |"

if command -v strace >/dev/null 2>&1; then
	echo
	echo "| build | fsync | rename | statfs + fstatfs | execve |"
	echo "|---|---:|---:|---:|---:|"
	for b in before after; do
		eval "bin=\$$b"
		root=$(mktemp -d "$tmp/root.XXXXXX")
		strace -f -c -o "$tmp/strace" -e trace=fsync,fdatasync,rename,renameat,renameat2,statfs,fstatfs,execve \
			"$bin" --root "$root" -q "$wf" >/dev/null
		awk -v b="$b" '$NF ~ /^[a-z0-9_]+$/ && $NF != "total" && $4 ~ /^[0-9]+$/ { n[$NF] = $4 }
			END { printf "| %s | %d | %d | %d | %d |\n", b, n["fsync"] + n["fdatasync"],
				n["rename"] + n["renameat"] + n["renameat2"], n["statfs"] + n["fstatfs"], n["execve"] }' "$tmp/strace"
	done
fi
