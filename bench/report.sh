#!/bin/bash
# How long `aw-ctl report` takes to write the HTML page (and the --json data) of an instance
# that holds a run of examples/hello.yaml and N more entries: the median wall time of REPS
# reports for each size, next to `aw-ctl --version` (the cost of starting a process at all),
# with the size of the page. Nothing here asserts on time.
#
# Usage: bash bench/report.sh [--sizes "1000 10000"] [--reps N] [--bin DIR]
set -eu
cd "$(dirname "$0")/.."
SIZES="1000 10000"
REPS=11
BIN=target/release
while [ $# -gt 0 ]; do
	case $1 in
	--sizes | --reps | --bin)
		[ $# -ge 2 ] || { echo "bench/report.sh: $1 needs a value (hint: --help)" >&2; exit 64; } ;;&
	--sizes) SIZES=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--bin) BIN=$2; shift 2 ;;
	-h | --help) sed -n '2,7p' "$0"; exit 0 ;;
	*) echo "bench/report.sh: unknown argument '$1' (hint: --help)" >&2; exit 64 ;;
	esac
done
case $REPS in '' | *[!0-9]* | 0) echo "bench/report.sh: --reps: '$REPS' is not a positive whole number" >&2; exit 64 ;; esac
for n in $SIZES; do
	case $n in *[!0-9]*) echo "bench/report.sh: --sizes: '$n' is not a whole number" >&2; exit 64 ;; esac
done
for t in aw-ctl aw-run aw-send; do
	[ -x "$BIN/$t" ] || { echo "bench/report.sh: no $t in $BIN" >&2; exit 66; }
done
BIN=$(cd "$BIN" && pwd)
HELLO=$PWD/examples/hello.yaml
tmp=$(mktemp -d)
. bench/lib.sh
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# timed FILE CMD ARGS...: one run of CMD, its wall ms appended to FILE.
timed() {
	file=$1
	shift
	t0=$EPOCHREALTIME
	"$@" >/dev/null
	t1=$EPOCHREALTIME
	ms "$t0" "$t1" >>"$file"
	echo >>"$file"
}

median() { sort -n | awk '{ a[++n] = $1 } END { print a[int((n + 1) / 2)] }'; }

echo "# aw-ctl report: the page of a run and N more entries"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median of $REPS reports; the entries are one line each, from one sender, mentioning bob"
echo
echo "| entries | aw-ctl --version ms | report (HTML) ms | report --json ms | page KB |"
echo "|---|---|---|---|---|"
for n in $SIZES; do
	root=$tmp/root-$n
	mkdir -p "$root"
	(cd "$tmp" && "$BIN/aw-run" --root "$root" -i r "$HELLO" >/dev/null 2>&1)
	seq "$n" | sed 's/^/note for @bob number /' |
		"$BIN/aw-send" --root "$root" -i r -f carol --lines >/dev/null
	: >"$tmp/version.ms"
	: >"$tmp/html.ms"
	: >"$tmp/json.ms"
	for _ in $(seq "$REPS"); do
		timed "$tmp/version.ms" "$BIN/aw-ctl" --version
		timed "$tmp/html.ms" "$BIN/aw-ctl" --root "$root" -i r report -o "$tmp/page.html"
		timed "$tmp/json.ms" "$BIN/aw-ctl" --root "$root" -i r report --json -o "$tmp/page.json"
	done
	kb=$(($(stat -c %s "$tmp/page.html") / 1024))
	echo "| $((n + 4)) | $(median <"$tmp/version.ms") | $(median <"$tmp/html.ms") | $(median <"$tmp/json.ms") | $kb |"
done
