#!/bin/sh
# Several hosts on a real GlusterFS volume: cross-host wake latency (default and tuned
# volume options), cross-host send throughput, idle CPU of aw-run --keep with polling for
# 10 and 100 agents. Needs root and GlusterFS (sh scripts/test-deps.sh); the volume is
# created, mounted twice and removed by the program (benches/netfs.rs).
# Usage: sh bench/netfs.sh [--quick]    (prints Markdown; a copy goes to
# target/bench-data/netfs.md)
set -eu
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
case ${1:-} in
'' | --quick) ;;
-h | --help)
	echo "usage: sh bench/netfs.sh [--quick]"
	exit 0
	;;
*)
	echo "bench/netfs.sh: unknown argument '$1' (hint: --quick)" >&2
	exit 64
	;;
esac
mkdir -p target/bench-data
"$CARGO" bench --no-run --bench netfs
"$CARGO" bench -q --bench netfs -- "$@" | tee target/bench-data/netfs.md
