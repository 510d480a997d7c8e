#!/bin/bash
# A chain of K mock agents served by one `aw-run --keep`: `user` mentions c1, and the reply
# of agent ci mentions c(i+1), up to cK, whose reply mentions nobody. Per K: the total time
# (from the timestamp of the user's message to that of cK's reply) and the mean time per
# hop over the first and the last 10% of the hops (at least one hop each), so that a cost
# per hop that grows along the chain shows; and the CPU time aw-run spent on the chain
# (user and system, from /proc), which a busy machine disturbs less than the wall clock. The times are those of the entries, written by
# aw with 1 ms resolution: a mean over many hops is finer than that, one hop is not.
#
# Usage: bash bench/chain.sh [--sizes "10 100 300 1000"] [--reps R] [--cap SECS]
#                            [--before DIR] [--after DIR]
# DIR holds the aw-* binaries to measure; every build given is measured, each on its own
# root (without --before or --after: --after target/release). Each case (one K, one build)
# runs the chain R times on a new server each time; figures are medians over the R runs. A
# case stops at its cap (default 300 s, from the spawn of its server): its figures are then
# shown as "> cap", and the next case runs. Prints Markdown; nothing here asserts on time.
# Every server started is stopped on exit.
set -eu
cd "$(dirname "$0")/.."
BENCH=bench/chain.sh
. bench/lib.sh
SIZES="10 100 300 1000"
REPS=3
CAP=300
BEFORE=
AFTER=
parse_args "sizes reps cap before after" "$@"
checked_setup "$SIZES" "$REPS" "$CAP"

# The workflow of the chain c1 .. cK.
workflow() {
	awk -v k="$1" 'BEGIN { print "name: chain"; print "agents:"
		for (i = 1; i <= k; i++) {
			r = (i < k) ? sprintf("@c%d next", i + 1) : "end"
			printf "  c%d:\n    mock:\n      replies: [\"%s\"]\n", i, r } }' >"$tmp/chain-$1.yaml"
}

# One run of the chain of K agents with build BIN: prints "total_ms first_ms last_ms cpu_ms"
# (mean ms per hop; CPU ms of aw-run), or "- - - -" past the cap.
one() {
	bin=$1 k=$2
	if ! start_server "$bin" chain "$tmp/chain-$k.yaml"; then
		echo "- - - -"
		return
	fi
	last=$(newest_id "$bin" chain)
	cpu=$(cpu_ms "$PID")
	"$bin/aw-send" --root "$ROOT" -i chain -f user -t c1 go >/dev/null
	left=$((DEADLINE - $(date +%s)))
	if [ "$left" -le 0 ] || ! timeout "$left" "$bin/aw-peek" --root "$ROOT" -i chain --since "$last" \
		-F --json | grep -q -m 1 "\"from\":\"c$k\""; then
		echo "- - - -"
		stop_pid "$PID"
		return
	fi
	cpu=$(($(cpu_ms "$PID") - cpu))
	entries_since "$bin" chain "$last" '^(user|c[0-9]+)$' |
		awk -v k="$k" -v cpu="$cpu" '$1 == "user" { u = $2; next }
			{ d = $2 - u; if (d < 0) d += 86400000; at[substr($1, 2) + 0] = d }
			END { h = int(k / 10); if (h < 1) h = 1
				printf "%d %.2f %.2f %d\n", at[k], at[h] / h, (at[k] - at[k - h]) / h, cpu }'
	stop_pid "$PID"
}

echo "# aw-run --keep: a chain of agents"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$REPS runs per case, cap $CAP s; medians; entry timestamps (1 ms resolution)"
echo
echo "| K | build | total | per hop, first 10% | per hop, last 10% | last / first | aw-run CPU | CPU per hop |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
# row K BUILD: the table row of a case.
row() {
	total=$(col 1) first=$(col 2) lastp=$(col 3) cpu=$(col 4)
	per=$(awk -v c="$cpu" -v k="$1" 'BEGIN { if (c ~ /^[0-9]+$/) printf "%.2f", c / k; else print "-" }')
	ratio=$(awk -v a="$first" -v b="$lastp" 'BEGIN { if (a + 0 > 0) printf "%.1f", b / a; else print "-" }')
	case $total in "> cap") ratio="> cap" ;; esac
	printf '| %s | %s | %s ms | %s ms | %s ms | %s | %s ms | %s ms |\n' "$1" "$2" "$total" "$first" \
		"$lastp" "$ratio" "$cpu" "$per" |
		sed "s/> cap ms/> cap ($CAP s)/g"
}
each_case row
