#!/bin/sh
# The test suite of `make test`, ending with one total line.
#
#   sh scripts/test-total.sh [CARGO-TEST-ARGUMENT...]
#
# Runs `$CARGO test ARGUMENTS` (CARGO defaults to cargo), its output shown as it comes; then,
# when every test passed, every fuzz target for FUZZ_SMOKE_TIME seconds (default 10) with
# fuzz/run.sh (or the script FUZZ_RUN names). The last line counts both, `N passed, N failed`
# (each fuzz target is one test), followed by why when a step failed without a failing test
# (it did not compile, the fuzz run could not start). The exit status is 0 only when
# everything passed.
set -eu
cd "$(dirname "$0")/.."
cargo=${CARGO:-cargo}
smoke=${FUZZ_SMOKE_TIME:-10}
log=$(mktemp "${TMPDIR:-/tmp}/aw-test.XXXXXX")
trap 'rm -f "$log" "$log.status"' EXIT INT TERM

# The pipeline hides the status of its first command: it is kept in a file.
{
	s=0
	"$cargo" test "$@" 2>&1 || s=$?
	echo "$s" > "$log.status"
} | tee "$log"
status=$(cat "$log.status")
why=""
[ "$status" = 0 ] || why="cargo test exited with status $status"

if [ "$status" = 0 ]; then
	{
		s=0
		sh "${FUZZ_RUN:-fuzz/run.sh}" "$smoke" 2>&1 || s=$?
		echo "$s" > "$log.status"
	} | tee -a "$log"
	fuzz=$(cat "$log.status")
	[ "$fuzz" = 0 ] || { status=$fuzz; why="the fuzz smoke run exited with status $fuzz"; }
fi

# `test result: ok. 12 passed; 0 failed; ...` per test binary; `fuzz/run.sh: T for 10s` per
# fuzz target started, `fuzz/run.sh: T: FAILED, ...` per one that failed.
awk -v why="$why" '
/^test result: / {
	for (i = 1; i <= NF; i++) {
		if ($(i + 1) ~ /^passed;?$/) passed += $i
		if ($(i + 1) ~ /^failed;?$/) failed += $i
	}
}
/^fuzz\/run\.sh: [^ ]+ for [0-9]+s$/ { fuzzed++ }
/^fuzz\/run\.sh: [^ ]+: FAILED/ { fuzzfailed++ }
END {
	passed += fuzzed - fuzzfailed
	failed += fuzzfailed
	line = sprintf("%d passed, %d failed", passed, failed)
	if (why != "" && failed == 0) line = line " (" why ")"
	print line
}' "$log"
exit "$status"
