#!/bin/bash
# Growth curves of the reads the mention index answers: aw-send, aw-peek --inbox (an agent
# with a cursor, and one never mentioned and never acked), aw-ctl ls, aw-ctl status, and
# aw-peek -n 0 (the whole channel), as processes on channels of M entries: median wall time
# and peak RSS (GNU time's %M) of REPS runs each.
#
# Usage: bash bench/mentions.sh [--sizes "10000 100000 1000000"] [--reps N]
#                               [--before DIR] [--after DIR]
# DIR holds the aw-* binaries to measure (--after: target/release). With --before, the same
# channels are measured with both, each on its own copy: the layout the older binaries
# write (no mention index) is upgraded by the first command of the newer ones, whose time
# is shown as "upgrade". Channels are cached under target/bench-data/mentions/M/; nothing
# here asserts on time.
set -eu
cd "$(dirname "$0")/.."
SIZES="10000 100000 1000000"
REPS=7
BEFORE=
AFTER=target/release
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) SIZES=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--before) BEFORE=$2; shift 2 ;;
	--after) AFTER=$2; shift 2 ;;
	-h | --help) sed -n '2,12p' "$0"; exit 0 ;;
	*) echo "bench/mentions.sh: unknown argument '$1' (hint: --help)" >&2; exit 64 ;;
	esac
done
for b in $BEFORE $AFTER; do
	[ -x "$b/aw-send" ] || { echo "bench/mentions.sh: no aw-send in $b" >&2; exit 66; }
done
DATA=target/bench-data/mentions
mkdir -p "$DATA"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# A channel of M entries in the layout of the oldest binaries measured: alice, carol and user
# write; one entry in ten mentions bob; dave is registered and never mentioned.
channel() {
	m=$1
	dir=$DATA/$m
	if [ -f "$dir/READY" ]; then return; fi
	rm -rf "$dir"
	gen=${BEFORE:-$AFTER}
	for a in alice bob carol dave; do
		"$gen/aw-ctl" --root "$dir" -i big new "$a" >/dev/null
	done
	awk -v m="$m" 'BEGIN { for (i = 1; i <= m; i++) {
		if (i % 10 == 0) printf "@bob status update %d: the second test run still fails on the empty input case\n", i;
		else printf "status update %d: the parser change looks right to me, but the second test run fails\n", i } }' |
		"$gen/aw-send" --root "$dir" -i big -f alice --lines >/dev/null
	"$gen/aw-ctl" --root "$dir" -i big ack bob >/dev/null
	touch "$dir/READY"
}

# median of the numbers on stdin
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# measure LABEL BIN ROOT CMD ARGS...: REPS runs; prints "LABEL ms KB"
measure() {
	label=$1 bin=$2 root=$3 cmd=$4
	shift 4
	: >"$tmp/ms"
	: >"$tmp/kb"
	for _ in $(seq "$REPS"); do
		t0=$EPOCHREALTIME
		/usr/bin/time -f %M -o "$tmp/rss" "$bin/$cmd" --root "$root" -i big "$@" >/dev/null
		t1=$EPOCHREALTIME
		echo "$t0 $t1" | awk '{ printf "%.2f\n", ($2 - $1) * 1000 }' >>"$tmp/ms"
		tail -n 1 "$tmp/rss" >>"$tmp/kb"
	done
	echo "$label $(median <"$tmp/ms") $(median <"$tmp/kb")"
}

run_set() {
	name=$1 bin=$2 root=$3
	measure "aw-send" "$bin" "$root" aw-send -f carol "@bob ping"
	measure "inbox-cursor" "$bin" "$root" aw-peek --inbox bob
	measure "inbox-never" "$bin" "$root" aw-peek --inbox dave
	measure "ls" "$bin" "$root" aw-ctl ls
	measure "status" "$bin" "$root" aw-ctl status
	measure "peek-all" "$bin" "$root" aw-peek -n 0 --json
}

echo "# aw mention index: growth curves"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median of $REPS runs: wall ms / peak RSS KB"
echo
for m in $SIZES; do
	channel "$m"
	for set in ${BEFORE:+before} after; do
		bin=$AFTER
		[ "$set" = before ] && bin=$BEFORE
		root=$tmp/$set-$m
		rm -rf "$root"
		cp -a "$DATA/$m" "$root"
		if [ "$set" = after ]; then
			t0=$EPOCHREALTIME
			"$bin/aw-ctl" --root "$root" -i big ls >/dev/null
			t1=$EPOCHREALTIME
			echo "$m after upgrade $(echo "$t0 $t1" | awk '{ printf "%.1f", ($2 - $1) * 1000 }') -"
		fi
		run_set "$set" "$bin" "$root" | sed "s/^/$m $set /"
		rm -rf "$root"
	done
done
