# shellcheck shell=bash
# Helpers of the growth-curve benchmarks (bench/agents.sh, bench/chain.sh, bench/mentions.sh),
# sourced by them: process figures from /proc, medians, and stopping the servers they start.
# SERVERS holds the pids of the servers started and not yet stopped; WRAP, a command that
# start_server runs aw-run under (such as `chrt -f 1`), none unless a script sets it.
SERVERS=
WRAP=()
CLK_TCK=$(getconf CLK_TCK)

# ms T0 T1: the milliseconds between two $EPOCHREALTIME values, one decimal.
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }

# cpu_ms PID: the process's user + system CPU time so far, in ms (10 ms ticks at CLK_TCK 100).
cpu_ms() {
	sed 's/^.*) //' "/proc/$1/stat" | awk -v hz="$CLK_TCK" '{ print ($12 + $13) * 1000 / hz }'
}

# proc_mem PID: "VmRSS VmHWM Threads" (KB, KB, count) from /proc/PID/status.
proc_mem() {
	awk '$1 == "VmRSS:" { r = $2 } $1 == "VmHWM:" { h = $2 } $1 == "Threads:" { t = $2 }
		END { print r, h, t }' "/proc/$1/status"
}

# median_or_cap: the median of the numbers on stdin, "> cap" when one of them is "-" (a
# figure not measured within the cap) or when there is none.
median_or_cap() {
	sort -n | awk '$1 == "-" { cap = 1; next } { a[++n] = $1 }
		END { if (cap || !n) print "> cap"; else print a[int((n + 1) / 2)] }'
}

# kb KB: a size in KB as MB with one decimal ("> cap" passes through).
kb() {
	case $1 in
	"> cap") echo "> cap" ;;
	*) awk -v k="$1" 'BEGIN { printf "%.1f MB", k / 1024 }' ;;
	esac
}

# stop_pid PID: SIGTERM (a clean stop), then SIGKILL if it still runs after 120 s.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	i=0
	while kill -0 "$1" 2>/dev/null && [ "$i" -lt 1200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$1" 2>/dev/null || true
	SERVERS=$(echo "$SERVERS" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ' || true)
}

# stop_root ROOT: stop the processes that run with ROOT (a directory this script made) as an
# argument, such as the server an `aw-run --detach` cut short by the cap had started.
stop_root() {
	for p in /proc/[0-9]*; do
		if tr '\0' '\n' 2>/dev/null <"$p/cmdline" | grep -qxF -- "$1"; then
			stop_pid "${p#/proc/}"
		fi
	done
}

# stop_servers: stop every server still recorded in SERVERS (the exit trap).
stop_servers() {
	for p in $SERVERS; do stop_pid "$p"; done
}

# usage MESSAGE: a usage error of the script $BENCH (exit 64).
usage() { echo "$BENCH: $1 (hint: --help)" >&2; exit 64; }

# parse_args "OPTION..." ARG...: each --OPTION named in the list takes a value, which goes to
# the variable of its name in capitals (--sizes 10 sets SIZES=10); --help prints the
# script's opening comment; anything else is a usage error.
parse_args() {
	known=" $1 "
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		-h | --help)
			awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
			exit 0
			;;
		--*)
			case $known in *" ${1#--} "*) ;; *) usage "unknown argument '$1'" ;; esac
			[ $# -ge 2 ] || usage "$1 needs a value"
			name=${1#--}
			printf -v "${name^^}" '%s' "$2"
			shift 2
			;;
		*) usage "unknown argument '$1'" ;;
		esac
	done
}

# checked_setup SIZES NUMBER...: exit 64 unless SIZES and every NUMBER are positive whole
# numbers; the builds (--after target/release when neither --before nor --after is given)
# must hold aw-run (else exit 66); then the soft descriptor limit is raised to the hard one
# (a server of the older builds holds one per agent) and $tmp, a scratch directory, is made.
checked_setup() {
	[ -n "$1" ] || usage "--sizes is empty"
	for v in $1 "${@:2}"; do
		case $v in '' | *[!0-9]* | 0) usage "'$v' is not a positive whole number" ;; esac
	done
	[ -n "$BEFORE$AFTER" ] || AFTER=target/release
	for b in $BEFORE $AFTER; do
		[ -x "$b/aw-run" ] || { echo "$BENCH: no aw-run in $b" >&2; exit 66; }
	done
	ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	tmp=$(mktemp -d)
	trap 'stop_servers; for r in "$tmp"/root.*; do stop_root "$r"; done; rm -rf "$tmp"' EXIT
	trap 'exit 130' INT TERM
}

# start_server BIN INSTANCE WORKFLOW: `aw-run --keep --detach` of WORKFLOW (under WRAP) on a new root
# ROOT, within CAP seconds (DEADLINE is set to the end of the cap). Sets PID and returns 0
# once it serves; returns 1 past the cap, having stopped what it started; exits 1 when
# aw-run fails. The run limit is set out of reach (--max-runs): it is not measured. The
# roots are removed at the end, not before the next server: deleting the tens of thousands
# of files of a large server slows the file system's next creations for a while, which
# would be counted in the next server's ready time.
ROOTS=0
start_server() {
	ROOTS=$((ROOTS + 1))
	ROOT=$tmp/root.$ROOTS
	DEADLINE=$(($(date +%s) + CAP))
	if PID=$(timeout "$CAP" "${WRAP[@]}" "$1/aw-run" --root "$ROOT" -i "$2" --keep --detach -q \
		--max-runs 1000000 "$3" 2>"$tmp/err"); then
		SERVERS="$SERVERS $PID"
		return 0
	fi
	stop_root "$ROOT"
	if [ "$(date +%s)" -lt "$DEADLINE" ]; then
		echo "$BENCH: aw-run of $3 failed: $(tail -n 1 "$tmp/err")" >&2
		exit 1
	fi
	return 1
}

# newest_id BIN INSTANCE: the id of the newest entry of ROOT (0 when there is none).
newest_id() {
	id=$("$1/aw-peek" --root "$ROOT" -i "$2" -n 1 --json | jq -r '.id')
	echo "${id:-0}"
}

# entries_since BIN INSTANCE ID REGEX: "SENDER MS" for each entry after ID whose sender
# matches REGEX, MS being its timestamp in ms since the start of its UTC day.
entries_since() {
	"$1/aw-peek" --root "$ROOT" -i "$2" --since "$3" -n 0 --json |
		jq -r --arg re "$4" 'select(.from | test($re)) | "\(.from) \(.timestamp)"' |
		awk '{ split(substr($2, 12, 12), t, ":"); print $1, t[1] * 3600000 + t[2] * 60000 + t[3] * 1000 }'
}

# builds: the names of the builds given, "before" and/or "after".
builds() { echo ${BEFORE:+before} ${AFTER:+after}; }

# each_case ROW: for each size of SIZES (the script's `workflow SIZE` written first) and each
# build given, REPS runs of the script's `one BIN SIZE`, one line of figures each, into
# $tmp/rows ($tmp/wake emptied first for it), then `ROW SIZE BUILD` prints the table row.
each_case() {
	for size in $SIZES; do
		workflow "$size"
		for set in $(builds); do
			bin=$AFTER
			[ "$set" = before ] && bin=$BEFORE
			: >"$tmp/rows"
			: >"$tmp/wake"
			for _ in $(seq "$REPS"); do one "$bin" "$size" >>"$tmp/rows"; done
			"$1" "$size" "$set"
		done
	done
}

# col N: the median of column N of $tmp/rows ("> cap" when a run passed the cap).
col() { awk -v c="$1" '{ print $c }' "$tmp/rows" | median_or_cap; }
