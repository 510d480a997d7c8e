#!/bin/sh
# Run aw's benchmarks: aw-send per call, reads at 10k/100k/1M entries, follow wake latency,
# inbox, ls and status growth curves with the channel (bench/mentions.sh), a send to one of
# 10, 10,000 and 100,000 agents (bench/names.sh), agents per
# aw-run --keep and a chain of agents (bench/agents.sh, bench/chain.sh, short sizes),
# aw-mcp start-up and tool round trips, aw-run end to end, wake latency, idle cost and
# throughput, claiming many agents and a server's descriptors, and `aw-ctl report` at 1,000
# and 10,000 entries (bench/report.sh), what writing traces costs a run (bench/otel.sh), and
# the wake of an exec agent from the append to its program's start (bench/wake.sh).
# Usage: sh bench/run.sh [--quick]    (make bench runs it after make build)
# Prints Markdown tables; a copy goes to target/bench-data/last-run.md. Nothing here asserts
# on time: figures are measured and printed, and BENCHMARKS.md is updated by hand.
set -eu
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
BENCHES="send read follow mcp run backend serve board"

QUICK=
for a in "$@"; do
	case $a in
	--quick) QUICK=--quick ;;
	-h | --help)
		echo "usage: sh bench/run.sh [--quick]"
		exit 0
		;;
	*)
		echo "bench/run.sh: unknown argument '$a' (hint: --quick)" >&2
		exit 64
		;;
	esac
done

mkdir -p target/bench-data
log=target/bench-data/last-run.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Build first, so that compiler output stays out of the figures.
set --
for b in $BENCHES; do set -- "$@" --bench "$b"; done
"$CARGO" bench --no-run "$@"

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -n 1)
start=$(date +%s)
{
	echo "# aw benchmarks"
	echo
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "machine: nproc $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN), CPU ${cpu:-unknown}, kernel $(uname -r)"
	echo "toolchain: $(rustc --version 2>/dev/null || echo unknown)"
	echo
} | tee "$log"

for b in $BENCHES; do
	# A pipeline's status is tee's: keep the benchmark's own in a file.
	{
		if "$CARGO" bench -q --bench "$b" -- $QUICK 2>&1; then
			echo 0 >"$tmp/rc"
		else
			echo $? >"$tmp/rc"
		fi
	} | tee -a "$log"
	rc=$(cat "$tmp/rc")
	if [ "$rc" != 0 ]; then
		echo "bench/run.sh: benchmark '$b' failed (exit $rc)" >&2
		exit "$rc"
	fi
done

# Growth curves of inbox reads and unread counts with the channel, as processes (the binaries
# of make build; --quick: 10k and 100k entries only), and the short end of the curves of
# agents per server and of a chain of agents (make bench-scale runs them whole).
sizes="10000 100000 1000000"
agents="10 100 1000"
chain="10 100 300"
report="1000 10000"
otel=21
names="10 10000 100000"
names_reps=21
wake=200
if [ -n "$QUICK" ]; then
	sizes="10000 100000"
	agents="10 100"
	chain="10 100"
	report="1000"
	otel=5
	names="10 10000"
	names_reps=5
	wake=50
fi
bin=${AW_BENCH_BIN_DIR:-target/release}
if [ -x "$bin/aw-send" ]; then
	bash bench/mentions.sh --after "$bin" --sizes "$sizes" | tee -a "$log"
	bash bench/names.sh --after "$bin" --sizes "$names" --reps "$names_reps" | tee -a "$log"
	bash bench/agents.sh --after "$bin" --sizes "$agents" --reps 1 | tee -a "$log"
	bash bench/chain.sh --after "$bin" --sizes "$chain" --reps 1 | tee -a "$log"
	bash bench/report.sh --bin "$bin" --sizes "$report" | tee -a "$log"
	bash bench/otel.sh --bin "$bin" --reps "$otel" | tee -a "$log"
	bash bench/wake.sh --after "$bin" --count "$wake" | tee -a "$log"
else
	echo "bench/run.sh: no binaries in $bin; growth curves skipped (make build)" | tee -a "$log"
fi

echo "total: $(($(date +%s) - start)) s; figures saved in $log" | tee -a "$log"
