#!/bin/bash
# What writing traces costs a run: examples/hello.yaml (two mock agents) run REPS times with
# traces on and REPS times with AW_OTEL=0, alternating, each run in a fresh root; the median
# wall time of each (spawn to exit of aw-run), their ratio, and the spans and bytes a run
# writes to _state/otel/. Nothing here asserts on time.
#
# Usage: bash bench/otel.sh [--reps N] [--bin DIR]
set -eu
cd "$(dirname "$0")/.."
REPS=21
BIN=target/release
while [ $# -gt 0 ]; do
	case $1 in
	--reps | --bin)
		[ $# -ge 2 ] || { echo "bench/otel.sh: $1 needs a value (hint: --help)" >&2; exit 64; } ;;&
	--reps) REPS=$2; shift 2 ;;
	--bin) BIN=$2; shift 2 ;;
	-h | --help) sed -n '2,7p' "$0"; exit 0 ;;
	*) echo "bench/otel.sh: unknown argument '$1' (hint: --help)" >&2; exit 64 ;;
	esac
done
case $REPS in '' | *[!0-9]* | 0) echo "bench/otel.sh: --reps: '$REPS' is not a positive whole number" >&2; exit 64 ;; esac
[ -x "$BIN/aw-run" ] || { echo "bench/otel.sh: no aw-run in $BIN" >&2; exit 66; }
BIN=$(cd "$BIN" && pwd)
HELLO=$PWD/examples/hello.yaml
tmp=$(mktemp -d)
. bench/lib.sh
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
# A registry of servers of the bench's own, as in bench/e2e.sh.
export XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"

# once OTEL FILE: one run with AW_OTEL=OTEL in a fresh root, its wall ms appended to FILE.
once() {
	root=$(mktemp -d "$tmp/root.XXXXXX")
	t0=$EPOCHREALTIME
	(cd "$tmp" && AW_OTEL=$1 "$BIN/aw-run" --root "$root" -i h -q "$HELLO" >/dev/null 2>&1)
	t1=$EPOCHREALTIME
	ms "$t0" "$t1" >>"$2"
	echo >>"$2"
	last=$root
}

median() { sort -n | awk 'NF { a[++n] = $1 } END { print a[int((n + 1) / 2)] }'; }

: >"$tmp/on.ms"
: >"$tmp/off.ms"
for _ in 1 2; do once 1 /dev/null; once 0 /dev/null; done
for _ in $(seq "$REPS"); do
	once 1 "$tmp/on.ms"
	spans=$(cat "$last"/h/_state/otel/*.jsonl | wc -l)
	bytes=$(cat "$last"/h/_state/otel/*.jsonl | wc -c)
	rm -rf "$last"
	once 0 "$tmp/off.ms"
	rm -rf "$last"
done
on=$(median <"$tmp/on.ms")
off=$(median <"$tmp/off.ms")
echo "# Traces: what writing them costs a run of examples/hello.yaml"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median of $REPS runs each, alternating, each in a fresh root"
echo
echo "| traces | run ms | spans per run | bytes per run |"
echo "|---|---:|---:|---:|"
echo "| off (AW_OTEL=0) | $off | 0 | 0 |"
echo "| on | $on | $spans | $bytes |"
echo
awk -v a="$on" -v b="$off" 'BEGIN { printf "on / off: %.3f\n", a / b }'
