# shellcheck shell=sh
# Shared set-up of the interop scripts (claude-code.sh, codex.sh, together.sh): sourced,
# not run.
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
mock_pids=

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
	for p in $mock_pids; do
		kill "$p" 2>/dev/null || :
	done
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
# The CLIs that install_claude and install_codex put in.
mkdir "$tmp/bin"
PATH=$tmp/bin:$PATH

# npm_install SPEC: install an npm package into the scratch prefix $tmp/npm.
npm_install() {
	say "installing $1 with npm into a scratch prefix"
	npm install --prefix "$tmp/npm" --no-audit --no-fund --loglevel=error "$1" \
		>"$tmp/npm.log" 2>&1 || {
		cat "$tmp/npm.log" >&2
		fail "npm install $1 failed"
	}
}

# install_claude: install Claude Code (AW_INTEROP_CLAUDE_CODE, an npm spec) as
# $tmp/bin/claude.
install_claude() {
	npm_install "${AW_INTEROP_CLAUDE_CODE:-@anthropic-ai/claude-code}"
	if "$tmp/npm/node_modules/.bin/claude" --version >/dev/null 2>&1; then
		ln -s "$tmp/npm/node_modules/.bin/claude" "$tmp/bin/claude"
	else
		# npm did not run the package's install script: start it through its launcher.
		printf '#!/bin/sh\nexec node "%s" "$@"\n' \
			"$tmp/npm/node_modules/@anthropic-ai/claude-code/cli-wrapper.cjs" >"$tmp/bin/claude"
		chmod +x "$tmp/bin/claude"
	fi
	say "claude $(claude --version)"
}

# install_codex: install Codex (AW_INTEROP_CODEX, an npm spec) as $tmp/bin/codex.
install_codex() {
	npm_install "${AW_INTEROP_CODEX:-@openai/codex}"
	ln -s "$tmp/npm/node_modules/.bin/codex" "$tmp/bin/codex"
	say "$(codex --version)"
}

# codex_home DIR PORT: make DIR a CODEX_HOME whose default provider is the mock on PORT.
codex_home() {
	mkdir "$1"
	cat >"$1/config.toml" <<TOML
model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:$2/v1"
wire_api = "responses"
TOML
}

# start_mock [-d DIR] SAY...: start mock_model.py, whose agent posts the first SAY in its
# first conversation, the next one in the next, the last one repeating; sets $port. Its
# request log is DIR/requests.jsonl, DIR being $tmp unless given (one for each mock when a
# script starts several).
start_mock() {
	dir=$tmp
	if [ "$1" = -d ]; then
		dir=$2
		shift 2
		mkdir -p "$dir"
	fi
	for s in "$@"; do
		set -- "$@" --say "$s"
		shift
	done
	python3 "$here/mock_model.py" --log "$dir/requests.jsonl" --port-file "$dir/port" \
		"$@" 2>"$dir/mock.log" &
	mock_pids="$mock_pids $!"
	i=0
	while [ ! -s "$dir/port" ]; do
		i=$((i + 1))
		[ "$i" -le 100 ] || fail "the mock model did not start: $(cat "$dir/mock.log")"
		sleep 0.1
	done
	# shellcheck disable=SC2034 # for the script that sources this file
	port=$(cat "$dir/port")
	: >"$dir/requests.jsonl"
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
