#!/bin/bash
# Growth curves of one `aw-run --keep` serving N mock agents (a generated workflow, one
# instance): ready time (spawn of `aw-run --keep --detach` until it returns, which it does
# once the server serves its agents), the server's memory (VmRSS and VmHWM), threads and
# open descriptors (/proc/PID/status, /proc/PID/fd) once ready, its idle CPU over IDLE
# seconds, its CPU per message (utime + stime from /proc/PID/stat over MSGS messages from
# `user` that each mention the last agent, waited for one at a time with `aw-send --wait`,
# divided by MSGS), and the wake latency of the last agent (the timestamp of its reply
# entry minus that of the message, both written by aw: 1 ms resolution).
#
# Usage: bash bench/agents.sh [--sizes "10 100 1000 10000"] [--msgs M] [--idle SECS]
#                             [--reps R] [--cap SECS] [--kind mock|exec]
#                             [--before DIR] [--after DIR]
# --kind exec serves exec agents instead (each runs `echo ok`, whose output aw-run posts as
# its reply) to weigh what a program's agent costs the server.
# DIR holds the aw-* binaries to measure; every build given is measured, each on its own
# root (without --before or --after: --after target/release). Each case (one N, one build)
# starts R servers, one after another; every figure is the median over them (wake: the
# median over all messages). A case stops at its cap (default 300 s, from the spawn of its
# server): what was not measured by then is shown as "> cap", and the next case runs. The
# soft descriptor limit is raised to the hard one first (a server holds one per agent).
# Prints Markdown; nothing here asserts on time. Every server started is stopped on exit.
set -eu
cd "$(dirname "$0")/.."
BENCH=bench/agents.sh
. bench/lib.sh
SIZES="10 100 1000 10000"
MSGS=20
IDLE=5
REPS=3
CAP=300
KIND=mock
BEFORE=
AFTER=
parse_args "sizes msgs idle reps cap kind before after" "$@"
case $KIND in mock | exec) ;; *) usage "--kind takes mock or exec, not '$KIND'" ;; esac
checked_setup "$SIZES" "$MSGS" "$IDLE" "$REPS" "$CAP"

# The workflow of N agents a1 .. aN, each answering every message with "ok": mock agents,
# or with --kind exec programs.
workflow() {
	awk -v n="$1" -v kind="$KIND" 'BEGIN { print "name: scale"; print "agents:"
		for (i = 1; i <= n; i++)
			if (kind == "exec") printf "  a%d:\n    command: [echo, ok]\n", i
			else printf "  a%d:\n    mock:\n      replies: [\"ok\"]\n", i }' >"$tmp/agents-$1.yaml"
}

# One server of N agents with build BIN: prints "ready_ms rss_kb hwm_kb threads fds idle_ms_per_s
# cpu_ms_per_msg hwm_after_kb", "-" for a figure past the cap; wake latencies go to $tmp/wake.
one() {
	bin=$1 n=$2
	t0=$EPOCHREALTIME
	if ! start_server "$bin" scale "$tmp/agents-$n.yaml"; then
		echo "- - - - - - - -"
		return
	fi
	t1=$EPOCHREALTIME
	pid=$PID
	ready=$(ms "$t0" "$t1")
	read -r rss hwm threads < <(proc_mem "$pid")
	fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
	c0=$(cpu_ms "$pid")
	sleep "$IDLE"
	c1=$(cpu_ms "$pid")
	idle=$(awk -v a="$c0" -v b="$c1" -v s="$IDLE" 'BEGIN { printf "%.1f", (b - a) / s }')
	last=$(newest_id "$bin" scale)
	c0=$(cpu_ms "$pid")
	sent=0
	while [ "$sent" -lt "$MSGS" ]; do
		left=$((DEADLINE - $(date +%s)))
		[ "$left" -gt 0 ] || break
		"$bin/aw-send" --root "$ROOT" -i scale -f user -t "a$n" --wait --timeout "$left" \
			"ping $sent" >/dev/null || break
		sent=$((sent + 1))
	done
	c1=$(cpu_ms "$pid")
	cpu=-
	[ "$sent" = "$MSGS" ] && cpu=$(awk -v a="$c0" -v b="$c1" -v m="$MSGS" 'BEGIN { printf "%.1f", (b - a) / m }')
	entries_since "$bin" scale "$last" "^(user|a$n)\$" |
		awk '$1 == "user" { u = $2; next }
			u != "" { d = $2 - u; if (d < 0) d += 86400000; print d; u = "" }' >>"$tmp/wake"
	read -r _ hwm_after _ < <(proc_mem "$pid")
	echo "$ready $rss $hwm $threads $fds $idle $cpu $hwm_after"
	stop_pid "$pid"
}

echo "# aw-run --keep: $KIND agents per server"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg); descriptors $(ulimit -n)"
echo "$REPS servers per case, $MSGS messages each, idle over $IDLE s, cap $CAP s; medians"
echo
echo "| N | build | ready | VmRSS | VmHWM | threads | fds | idle CPU | CPU per message | VmHWM after | wake of the last agent (median, mean) |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
# row N BUILD: the table row of a case.
row() {
	wake=$(median_or_cap <"$tmp/wake")
	mean=$(awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n }' "$tmp/wake")
	[ "$wake" = "> cap" ] || wake="$wake ms, $mean ms"
	printf '| %s | %s | %s ms | %s | %s | %s | %s | %s ms/s | %s ms | %s | %s |\n' \
		"$1" "$2" "$(col 1)" "$(kb "$(col 2)")" "$(kb "$(col 3)")" "$(col 4)" "$(col 5)" \
		"$(col 6)" "$(col 7)" "$(kb "$(col 8)")" "$wake" |
		sed 's#> cap ms/s#> cap#g; s/> cap ms/> cap/g'
}
each_case row
