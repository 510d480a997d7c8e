#!/bin/bash
# The wake of an exec agent: from the entry appended to the channel to the first instruction
# of the program that `aw-run --keep` starts for it. Two helpers, compiled here with
# `cc -O2 -static` (bench/wake/): `watch` stamps each change of channel.md as inotify tells
# it, an independent process; `stamp`, the agent's program, stamps its own start in a
# constructor, before main. Both read CLOCK_MONOTONIC. `user` mentions the agent COUNT
# times, one mention at a time: the next is sent once the run of the last has ended (the
# program stamped, and the agent's record under _state/serve/ says idle with one run
# more). The wake of a mention is its program's stamp minus the watcher's stamp of the
# append; the table gives its p50, p90, p99 and maximum.
#
# The first row, "floor", is the same measurement without aw-run: the watcher itself starts
# the stamp program with posix_spawn on each change and waits for it. What is left there
# is inotify, a spawn and an exec: what no server can beat on this machine.
#
# Usage: bash bench/wake.sh [--count N] [--reps R] [--rt yes|no] [--cap SECS]
#                           [--before DIR] [--after DIR]
# DIR holds the aw-* binaries to measure; every build given is measured (without --before
# or --after: --after target/release). R runs of COUNT mentions per build (default 1 of
# 200), each on a new server, alternating between the builds; the percentiles are medians
# over the R runs, and so is the load average (1 min) read at the end of each. With
# `--rt yes` aw-run and the watcher run under `chrt -f 1` (SCHED_FIFO, to take the
# scheduler's noise out: needs the right to, else exit 69). A run stops at its cap
# (default 300 s, from the spawn of its server): it is then shown as "> cap". Exits 69
# when cc is missing or the helpers do not build. Prints Markdown; nothing here asserts on
# time. Every process started is stopped on exit.
set -eu
cd "$(dirname "$0")/.."
BENCH=bench/wake.sh
. bench/lib.sh
COUNT=200
REPS=1
RT=no
CAP=300
BEFORE=
AFTER=
parse_args "count reps rt cap before after" "$@"
[ -n "$COUNT" ] || usage "--count is empty"
case $RT in yes | no) ;; *) usage "--rt takes yes or no, not '$RT'" ;; esac
checked_setup "$COUNT" "$REPS" "$CAP"
trap 'stop_servers; stop_watch; for r in "$tmp"/root.*; do stop_root "$r"; done; rm -rf "$tmp"' EXIT

# The helpers, statically linked when the C library allows it (said otherwise).
if ! command -v cc >/dev/null 2>&1; then
	echo "$BENCH: NO C COMPILER: cc is missing, the stamp and watch helpers cannot be built (apt-get install gcc)" >&2
	exit 69
fi
linked=static
for h in stamp watch; do
	if ! cc -O2 -static -o "$tmp/$h" "bench/wake/$h.c" 2>"$tmp/cc.err"; then
		linked=dynamic
		if ! cc -O2 -o "$tmp/$h" "bench/wake/$h.c" 2>"$tmp/cc.err"; then
			echo "$BENCH: cannot build bench/wake/$h.c: $(head -n 1 "$tmp/cc.err")" >&2
			exit 69
		fi
	fi
done
if [ "$linked" = dynamic ]; then
	echo "$BENCH: WARNING: no static C library; the helpers are linked dynamically (their start includes the loader)" >&2
fi
if [ "$RT" = yes ]; then
	WRAP=(chrt -f 1)
	if ! chrt -f 1 true 2>/dev/null; then
		echo "$BENCH: --rt yes: chrt -f 1 is refused here (no right to SCHED_FIFO)" >&2
		exit 69
	fi
fi

# The program stamps into a FIFO that this script holds open: the wait for a stamp is a
# blocking read, with no polling beside the wake being measured.
mkfifo "$tmp/stamps"
exec 3<>"$tmp/stamps"
cat >"$tmp/wake.yaml" <<EOF
name: wake
agents:
  w:
    command: ["$tmp/stamp", "$tmp/stamps"]
EOF

WATCH=
# stop_watch: stop the watcher, if one runs.
stop_watch() {
	if [ -n "$WATCH" ]; then
		kill "$WATCH" 2>/dev/null || true
		wait "$WATCH" 2>/dev/null || true
		WATCH=
	fi
}

# start_watch CHANNEL [PROGRAM ARG...]: the watcher of CHANNEL, stamping into
# $tmp/appends; returns once its watch is in place.
start_watch() {
	: >"$tmp/appends"
	# Emptied here, not by the redirection below: that one happens in the background.
	: >"$tmp/watch.out"
	"${WRAP[@]}" "$tmp/watch" "$1" "$tmp/appends" "${@:2}" >"$tmp/watch.out" &
	WATCH=$!
	until [ -s "$tmp/watch.out" ]; do
		kill -0 "$WATCH" 2>/dev/null || { echo "$BENCH: the watcher failed" >&2; exit 1; }
		sleep 0.01
	done
}

# next_stamp: read the program's next stamp into $tmp/starts; 1 past DEADLINE.
next_stamp() {
	left=$((DEADLINE - EPOCHSECONDS))
	[ "$left" -gt 0 ] && read -r -t "$left" -u 3 stamp && echo "$stamp" >>"$tmp/starts"
}

# idle_after N: wait until the agent's record says idle with N runs (the run is over); 1
# past DEADLINE.
idle_after() {
	until [ "$(jq -r '"\(.state) \(.runs)"' "$ROOT/wake/_state/serve/w.json" 2>/dev/null)" = "idle $1" ]; do
		[ "$EPOCHSECONDS" -lt "$DEADLINE" ] || return 1
		sleep 0.002
	done
}

# watching_after N: wait until the watcher that starts the program has done so N times and
# watches again (a change made before would be merged with the last); 1 past DEADLINE.
watching_after() {
	until [ "$(wc -l <"$tmp/watch.out")" -gt "$1" ]; do
		[ "$EPOCHSECONDS" -lt "$DEADLINE" ] || return 1
		sleep 0.001
	done
}

# one BUILD BIN: COUNT mentions, waited for one at a time, on a new root (BUILD floor: no
# server, the watcher starts the program); the wakes in ms, one a line, go to
# $tmp/wakes.BUILD. Prints "p50 p90 p99 max load", "- - - - load" past the cap.
one() {
	set=$1 bin=$2
	: >"$tmp/starts"
	: >"$tmp/before-each"
	if [ "$set" = floor ]; then
		ROOTS=$((ROOTS + 1))
		ROOT=$tmp/root.$ROOTS
		DEADLINE=$((EPOCHSECONDS + CAP))
	elif ! start_server "$bin" wake "$tmp/wake.yaml"; then
		echo "- - - - $(cut -d' ' -f1 /proc/loadavg)"
		return
	fi
	# The channel exists before it is watched: a first entry that mentions nobody. Without a
	# server the agent is registered by hand, so that every send is the same.
	if [ "$set" = floor ]; then
		"$bin/aw-ctl" --root "$ROOT" -i wake new w -- "$tmp/stamp" "$tmp/stamps" >/dev/null 2>&1
	fi
	"$bin/aw-send" --root "$ROOT" -i wake -f user "start" >/dev/null
	if [ "$set" = floor ]; then
		start_watch "$ROOT/wake/channel.md" "$tmp/stamp" "$tmp/stamps"
	else
		start_watch "$ROOT/wake/channel.md"
	fi
	done=0
	for i in $(seq "$COUNT"); do
		wc -l <"$tmp/appends" >>"$tmp/before-each"
		"$bin/aw-send" --root "$ROOT" -i wake -f user -t w "ping $i" >/dev/null
		next_stamp || break
		if [ "$set" = floor ]; then
			watching_after "$i" || break
		else
			idle_after "$i" || break
		fi
		done=$i
	done
	load=$(cut -d' ' -f1 /proc/loadavg)
	stop_watch
	[ "$set" = floor ] || stop_pid "$PID"
	if [ "$done" != "$COUNT" ]; then
		echo "- - - - $load"
		return
	fi
	# The wake of mention i: its start minus the first append after those counted before it.
	awk 'FILENAME == ARGV[1] { a[FNR] = $1; next }
		FILENAME == ARGV[2] { b[FNR] = $1; next }
		{ printf "%.3f\n", ($1 - a[b[FNR] + 1]) / 1e6 }' \
		"$tmp/appends" "$tmp/before-each" "$tmp/starts" | tee -a "$tmp/wakes.$set" |
		sort -n | awk -v load="$load" '{ v[++n] = $1 }
			function at(p) { i = int(p * n + 0.999999); if (i < 1) i = 1; return v[i] }
			END { printf "%s %s %s %s %s\n", at(0.5), at(0.9), at(0.99), v[n], load }'
}

echo "# aw-run --keep: the wake of an exec agent"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
sched="normal scheduling"
[ "$RT" = yes ] && sched="aw-run and the watcher under chrt -f 1 (SCHED_FIFO)"
echo "$COUNT mentions per run, $REPS run(s) per build, alternating; medians over the runs;" \
	"helpers linked $linked; $sched"
echo
echo "| build | p50 | p90 | p99 | max | load (1 min) |"
echo "|---|---:|---:|---:|---:|---:|"
sets="floor $(builds)"
for set in $sets; do : >"$tmp/rows.$set"; done
for _ in $(seq "$REPS"); do
	for set in $sets; do
		bin=$AFTER
		[ "$set" = before ] && bin=$BEFORE
		[ -n "$bin" ] || bin=$BEFORE
		one "$set" "$bin" >>"$tmp/rows.$set"
	done
done
for set in $sets; do
	cp "$tmp/rows.$set" "$tmp/rows"
	printf '| %s | %s ms | %s ms | %s ms | %s ms | %s |\n' "$set" "$(col 1)" "$(col 2)" "$(col 3)" \
		"$(col 4)" "$(col 5)" | sed "s/> cap ms/> cap ($CAP s)/g"
done
