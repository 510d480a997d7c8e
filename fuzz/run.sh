#!/bin/sh
# Run the fuzz targets of aw, one after another, each for a given time.
#
#   sh fuzz/run.sh [SECONDS] [TARGET...]     (default: 60 s, every target)
#
# Needs the nightly toolchain (rustup toolchain install nightly) and cargo-fuzz, which is
# installed here with `cargo install --locked cargo-fuzz` when it is missing. Each target
# grows a working corpus under fuzz/work/<target>/ (not committed) from the seeds under
# fuzz/corpus/<target>/; a crash stops the run with the input saved under fuzz/artifacts/.
# One process per target, one target at a time.
set -eu
cd "$(dirname "$0")"
seconds=${1:-60}
[ $# -gt 0 ] && shift
case $seconds in
'' | *[!0-9]*) echo "fuzz/run.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 64 ;;
esac

# A static link of the C library asked for in RUSTFLAGS (as `make test` asks for the tests)
# is dropped before anything is built here: the sanitizer the fuzz targets are built with
# needs it dynamic, and proc-macros (which cargo-fuzz's install builds) cannot link it at all.
if [ -n "${RUSTFLAGS-}" ]; then
	RUSTFLAGS=$(printf '%s\n' "$RUSTFLAGS" | sed 's/-C *target-feature=+crt-static//g')
	export RUSTFLAGS
fi

if ! command -v rustup >/dev/null 2>&1 || ! rustup run nightly rustc --version >/dev/null 2>&1; then
	echo "fuzz/run.sh: the nightly Rust toolchain is missing; cargo-fuzz needs it." >&2
	echo "fuzz/run.sh: install it with: rustup toolchain install nightly" >&2
	exit 69
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
	echo "fuzz/run.sh: cargo-fuzz is missing: INSTALLING it with cargo install --locked cargo-fuzz" >&2
	cargo install --locked cargo-fuzz
fi

targets=$*
[ -n "$targets" ] || targets=$(cargo fuzz list)

echo "fuzz/run.sh: building the fuzz targets"
cargo +nightly fuzz build

for t in $targets; do
	mkdir -p "work/$t" "artifacts/$t"
	echo "fuzz/run.sh: $t for ${seconds}s"
	cargo +nightly fuzz run "$t" "work/$t" "corpus/$t" -- \
		-max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
		-print_final_stats=1 2>&1 |
		grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::average_exec_per_sec|==[0-9]+==|SUMMARY|Done [0-9]+ runs)|panicked|ERROR|Test unit written|Crash|crash|oom|leak|timeout' || true
	rm -rf /dev/shm/aw-fuzz-"$t"-* "${TMPDIR:-/tmp}"/aw-fuzz-"$t"-*
	# The pipeline hides the status of cargo fuzz: a crash leaves an artifact.
	if ls "artifacts/$t" | grep -q .; then
		echo "fuzz/run.sh: $t: FAILED, see fuzz/artifacts/$t/:" >&2
		ls "artifacts/$t" >&2
		exit 1
	fi
done
echo "fuzz/run.sh: every target ran ${seconds}s without a failure"
