#!/bin/bash
# The cost of a claim and of a lease as the board grows: on boards of N cards (one card
# claimed, the others but 20 waiting in a chain behind it, 20 ready), the median wall time of
# REPS processes each of `aw-ctl board claim --next` (then released), `aw-ctl board claim
# ID` (then released), `aw-ctl board done ID` of a claimed card, and `aw-ctl lease take`
# (then released, with 10 leases of others held), next to `aw-ctl --version` (the cost of
# starting a process at all). Peak RSS from GNU time. Boards are cached under
# target/bench-data/board/N/ (or DATA/N); nothing here asserts on time.
#
# Usage: bash bench/board.sh [--sizes "10 1000 100000"] [--reps N] [--bin DIR] [--data DATA]
set -eu
cd "$(dirname "$0")/.."
SIZES="10 1000 100000"
REPS=21
BIN=target/release
DATA=target/bench-data/board
while [ $# -gt 0 ]; do
	case $1 in
	--sizes | --reps | --bin | --data)
		[ $# -ge 2 ] || { echo "bench/board.sh: $1 needs a value (hint: --help)" >&2; exit 64; } ;;&
	--sizes) SIZES=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--bin) BIN=$2; shift 2 ;;
	--data) DATA=$2; shift 2 ;;
	-h | --help) sed -n '2,11p' "$0"; exit 0 ;;
	*) echo "bench/board.sh: unknown argument '$1' (hint: --help)" >&2; exit 64 ;;
	esac
done
for v in $SIZES $REPS; do
	case $v in '' | *[!0-9]*) echo "bench/board.sh: '$v' is not a whole number" >&2; exit 64 ;; esac
done
for n in $SIZES; do
	[ "$n" -ge 4 ] || { echo "bench/board.sh: a board of $n cards: at least 4" >&2; exit 64; }
done
[ "$REPS" -ge 1 ] || { echo "bench/board.sh: --reps 0: at least 1" >&2; exit 64; }
[ -x "$BIN/aw-ctl" ] || { echo "bench/board.sh: no aw-ctl in $BIN" >&2; exit 66; }
mkdir -p "$DATA"
tmp=$(mktemp -d)
. bench/lib.sh
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# ready N: how many cards of a board of N are ready: 20, or half of a smaller board.
ready() { if [ "$1" -ge 40 ]; then echo 20; else echo $(($1 / 2)); fi; }

# board N: a board of N cards, made once by aw-ctl itself: card 1 claimed for ten days,
# the cards after it but the ready ones each waiting for the one before (a chain behind
# card 1), and the ready ones.
board() {
	n=$1
	dir=$DATA/$n
	if [ -f "$dir/READY" ]; then return; fi
	rm -rf "$dir"
	make() { "$BIN/aw-ctl" --root "$dir" -i big "$@" >/dev/null; }
	make board add "the blocker" --as lead
	make board claim 1 --as lead --ttl 240h
	for i in $(seq 2 $((n - $(ready "$n")))); do
		make board add "waiting card $i" --after $((i - 1)) --as lead
	done
	for i in $(seq 1 "$(ready "$n")"); do
		make board add "ready card $i" --as lead
	done
	touch "$dir/READY"
}

# timed LABEL CMD ARGS...: one run of CMD, its wall ms and peak KB appended to LABEL's files.
timed() {
	label=$1
	shift
	t0=$EPOCHREALTIME
	/usr/bin/time -f %M -o "$tmp/rss" "$@" >"$tmp/out"
	t1=$EPOCHREALTIME
	ms "$t0" "$t1" >>"$tmp/$label.ms"
	echo >>"$tmp/$label.ms"
	tail -n 1 "$tmp/rss" >>"$tmp/$label.kb"
}

report() {
	for label in "$@"; do
		echo "$N $label $(median_or_cap <"$tmp/$label.ms") $(median_or_cap <"$tmp/$label.kb")"
	done
}

echo "# aw board and leases: cost as the board grows"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median of $REPS runs: cards, operation, wall ms, peak RSS KB"
echo
for N in $SIZES; do
	board "$N"
	root=$tmp/$N
	rm -rf "$root"
	cp -a "$DATA/$N" "$root"
	ctl() { "$BIN/aw-ctl" --root "$root" -i big "$@"; }
	rm -f "$tmp"/*.ms "$tmp"/*.kb
	for k in $(seq 1 10); do
		ctl lease take "other/$k/**" --as "other$k" --ttl 1h >/dev/null
	done
	for i in $(seq "$REPS"); do
		timed start "$BIN/aw-ctl" --version
		timed claim-next "$BIN/aw-ctl" --root "$root" -i big board claim --next --as w
		id=$(cat "$tmp/out")
		ctl board release "$id" --as w >/dev/null
		timed claim-id "$BIN/aw-ctl" --root "$root" -i big board claim "$id" --as w
		ctl board release "$id" --as w >/dev/null
		timed lease-take "$BIN/aw-ctl" --root "$root" -i big lease take "src/$i.rs" --as w
		ctl lease release --as w >/dev/null
	done
	# done: each of REPS cards claimed first, outside the timing (a card is added once the
	# ready ones run out).
	for i in $(seq "$REPS"); do
		id=$(ctl board claim --next --as w)
		timed done "$BIN/aw-ctl" --root "$root" -i big board done "$id" --as w
		[ "$i" -lt "$(ready "$N")" ] || ctl board add "ready again $i" --as lead >/dev/null
	done
	report start claim-next claim-id done lease-take
	rm -rf "$root"
done
