#!/bin/bash
# What resolving an agent's name costs as the registry grows: the median wall time of
# `aw-send -t aN ping` (a send to the last of N registered agents a1 .. aN: the recipient is
# checked, and the mention put in front of the text resolved) in an instance of N agents,
# for each size and build, with its ratio to the send of the smallest size of the same
# build; beside it, what a change of the registry costs there: `aw-ctl new x` and
# `aw-ctl rm x` (one agent registered, then removed), and "first", the first command of the
# build on a registry it did not write (`aw-ctl new b0`: a build with the name index builds
# it from the whole registry then); last, "send after an edit": a send right after another
# program changed agents.json (a blank line added; median of 3), which with the name index
# reads the registry whole and rebuilds the index. The sends are all timed before the
# changes.
#
# Usage: bash bench/names.sh [--sizes "10 10000 100000"] [--reps R] [--before DIR]
#                            [--after DIR]
# DIR holds the aw-* binaries to measure; every build given is measured, each on a root of
# its own per size (without --before or --after: --after target/release). The registry of N
# agents is written by awk, as any program may write one (aw-workflow(5)), never by the
# index's own code. Then R rounds, each running every case (size and build) once, in an
# order that turns from round to round, so that a change in the machine's load weighs on
# all cases alike. Prints Markdown; nothing here asserts on time.
set -eu
cd "$(dirname "$0")/.."
BENCH=bench/names.sh
. bench/lib.sh
SIZES="10 10000 100000"
REPS=21
BEFORE=
AFTER=
parse_args "sizes reps before after" "$@"
checked_setup "$SIZES" "$REPS"

# registry N ROOT: ROOT/w/_state/agents.json with agents a1 .. aN.
registry() {
	mkdir -p "$2/w/_state"
	awk -v n="$1" 'BEGIN { printf "{\"agents\":["
		for (i = 1; i <= n; i++) printf "%s{\"name\":\"a%d\",\"backend\":\"external\",\"created\":\"2026-01-01T00:00:00.000Z\"}", (i > 1 ? "," : ""), i
		print "]}" }' >"$2/w/_state/agents.json"
}

# timed FILE BIN TOOL ARGS...: one run of BIN/TOOL on ROOT, its wall ms appended to FILE;
# the script stops when it fails.
timed() {
	file=$1 bin=$2 tool=$3
	shift 3
	t0=$EPOCHREALTIME
	"$bin/$tool" --root "$ROOT" -i w "$@" >/dev/null 2>"$tmp/err" ||
		{ echo "$BENCH: $tool $*: $(tail -n 1 "$tmp/err")" >&2; exit 1; }
	t1=$EPOCHREALTIME
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }' >>"$file"
}

# median FILE: the median of the times in FILE, in ms with two decimals.
median() { median_or_cap <"$1" | awk '{ printf "%.2f", $1 }'; }

cases=
for n in $SIZES; do
	for set in $(builds); do
		bin=$AFTER
		[ "$set" = before ] && bin=$BEFORE
		ROOT=$tmp/root.$n.$set
		registry "$n" "$ROOT"
		: >"$tmp/$n.$set.first"
		timed "$tmp/$n.$set.first" "$bin" aw-ctl new b0
		cases="$cases $n.$set"
	done
done

# rounds: REPS rounds, each running every case once, in an order that turns from round to
# round (round r starts with case r, modulo their number); for each case, the functions
# named in the array ops, which time commands of the case's build BIN on its root ROOT.
rounds() {
	set -- $cases
	for r in $(seq "$REPS"); do
		k=$(((r - 1) % $#))
		for c in ${*:$((k + 1))} ${*:1:$k}; do
			n=${c%.*} set=${c#*.}
			bin=$AFTER
			[ "$set" = before ] && bin=$BEFORE
			ROOT=$tmp/root.$c
			for op in "${ops[@]}"; do "$op"; done
		done
	done
}
send() { timed "$tmp/$c.send" "$bin" aw-send -t "a$n" ping; }
change() {
	timed "$tmp/$c.new" "$bin" aw-ctl new x
	timed "$tmp/$c.rm" "$bin" aw-ctl rm x
}

# The sends first, all of them, on a file system with nothing left to flush: a change of
# the registry is flushed (fsync), and what it leaves to write back would weigh on the
# command that follows it.
sync
ops=(send)
rounds
ops=(change)
rounds
# Then a registry edited by another program: a blank line added to agents.json, and a send
# (with the name index, that send rebuilds it). Three times.
edited() {
	echo >>"$ROOT/w/_state/agents.json"
	timed "$tmp/$c.edited" "$bin" aw-send -t "a$n" ping
}
ops=(edited)
REPS=3 rounds

echo "# A send to one of N agents"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median of $REPS runs (ms; 3 for the send after an edit); ratio: the send's median over that of N = ${SIZES%% *}, same build"
echo
echo "| N | build | aw-send -t aN ping | ratio | aw-ctl new | aw-ctl rm | first | send after an edit |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for set in $(builds); do
	base=$(median "$tmp/${SIZES%% *}.$set.send")
	for n in $SIZES; do
		c=$n.$set
		send=$(median "$tmp/$c.send")
		ratio=$(awk -v a="$send" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
		echo "| $n | $set | $send | $ratio | $(median "$tmp/$c.new") | $(median "$tmp/$c.rm") | $(median "$tmp/$c.first") | $(median "$tmp/$c.edited") |"
	done
done
