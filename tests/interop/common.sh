# Shared set-up of the interop scripts (claude-code.sh, codex.sh): sourced, not run.
#
# Environment:
#   AW_BIN_DIR        where aw-ctl, aw-mcp, aw-peek and aw-send are (default: target/release)
#   AW_INTEROP_KEEP   when set, keep the scratch directory (it is always kept on failure)
#   AW_INTEROP_TIMEOUT  seconds one CLI run may take (default 300; needs timeout(1))

set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
repo=$(CDPATH='' cd -- "$here/../.." && pwd)
name=$(basename -- "$0" .sh)
tmp=
keep=${AW_INTEROP_KEEP:-}
mock_pid=

say() {
	printf '%s: %s\n' "$name" "$*"
}

fail() {
	printf '%s: FAIL: %s\n' "$name" "$*" >&2
	if [ -n "$tmp" ]; then
		printf '%s: scratch files kept in %s\n' "$name" "$tmp" >&2
		keep=1
	fi
	exit 1
}

cleanup() {
	if [ -n "$mock_pid" ]; then
		kill "$mock_pid" 2>/dev/null || :
	fi
	if [ -n "$tmp" ] && [ -z "$keep" ]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bin_dir=${AW_BIN_DIR:-$repo/target/release}
for t in aw-ctl aw-mcp aw-peek aw-send; do
	[ -x "$bin_dir/$t" ] ||
		fail "no $bin_dir/$t (build first: cargo build --release, or set AW_BIN_DIR)"
done
for c in npm node python3; do
	command -v "$c" >/dev/null 2>&1 || fail "$c is needed"
done
PATH=$bin_dir:$PATH
export PATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/aw-interop.XXXXXX")

# npm_install SPEC: install an npm package into the scratch prefix $tmp/npm.
npm_install() {
	say "installing $1 with npm into a scratch prefix"
	npm install --prefix "$tmp/npm" --no-audit --no-fund --loglevel=error "$1" \
		>"$tmp/npm.log" 2>&1 || {
		cat "$tmp/npm.log" >&2
		fail "npm install $1 failed"
	}
}

# start_mock SAY: start mock_model.py, whose agent posts SAY; sets $port.
start_mock() {
	python3 "$here/mock_model.py" --log "$tmp/requests.jsonl" --port-file "$tmp/port" \
		--say "$1" 2>"$tmp/mock.log" &
	mock_pid=$!
	i=0
	while [ ! -s "$tmp/port" ]; do
		i=$((i + 1))
		[ "$i" -le 100 ] || fail "the mock model did not start: $(cat "$tmp/mock.log")"
		sleep 0.1
	done
	port=$(cat "$tmp/port")
	: >"$tmp/requests.jsonl"
}

# run OUT CMD...: run a CLI with no input, its output to OUT, within the time limit.
run() {
	out=$1
	shift
	if command -v timeout >/dev/null 2>&1; then
		set -- timeout "${AW_INTEROP_TIMEOUT:-300}" "$@"
	fi
	"$@" </dev/null >"$out" 2>&1 || {
		status=$?
		cat "$out" >&2
		fail "$(basename -- "$out" .out) exited with status $status (output above)"
	}
}

# check WHAT ARGS...: run one check of check.py.
check() {
	python3 "$here/check.py" "$@" || fail "check '$1' failed (see above)"
}
