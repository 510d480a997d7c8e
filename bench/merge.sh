#!/bin/bash
# The overhead aw adds to a merge beyond git and the verify command: the median wall time of
# REPS merges of a branch of one commit onto main by `aw-ctl merge request --verify true`,
# next to the same git commands run by a shell script (a scratch work tree at main's tip,
# the branch rebased onto it, `sh -c true` there, `git update-ref` from the old commit to the
# new, the work tree removed), and to `aw-ctl --version` (the cost of starting a process at
# all). The difference is what aw adds: its files, its lock, its checks, its post in the
# channel. main is not checked out. Nothing here asserts on time.
#
# Usage: bash bench/merge.sh [--reps N] [--bin DIR]
set -eu
cd "$(dirname "$0")/.."
REPS=21
BIN=target/release
while [ $# -gt 0 ]; do
	case $1 in
	--reps | --bin)
		[ $# -ge 2 ] || { echo "bench/merge.sh: $1 needs a value (hint: --help)" >&2; exit 64; } ;;&
	--reps) REPS=$2; shift 2 ;;
	--bin) BIN=$2; shift 2 ;;
	-h | --help) sed -n '2,10p' "$0"; exit 0 ;;
	*) echo "bench/merge.sh: unknown argument '$1' (hint: --help)" >&2; exit 64 ;;
	esac
done
case $REPS in '' | *[!0-9]* | 0) echo "bench/merge.sh: --reps: '$REPS' is not a positive whole number" >&2; exit 64 ;; esac
[ -x "$BIN/aw-ctl" ] || { echo "bench/merge.sh: no aw-ctl in $BIN" >&2; exit 66; }
BIN=$(cd "$BIN" && pwd)
tmp=$(mktemp -d)
. bench/lib.sh
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com GIT_CONFIG_NOSYSTEM=1

repo=$tmp/repo
git init -q -b main "$repo"
echo start >"$repo/start.txt"
git -C "$repo" add start.txt
git -C "$repo" commit -q -m start
git -C "$repo" worktree add -q --detach "$tmp/work" main
git -C "$repo" checkout -q --detach main

# branch NAME: a branch of one commit (a file of its own) from main's tip.
branch() {
	git -C "$tmp/work" checkout -q -B "$1" main
	echo "$1" >"$tmp/work/$1.txt"
	git -C "$tmp/work" add "$1.txt"
	git -C "$tmp/work" commit -q -m "$1"
	git -C "$tmp/work" checkout -q --detach
}

# by_git NAME: what the queue does for a request, as plain git commands.
by_git() {
	old=$(git -C "$repo" rev-parse refs/heads/main)
	git -C "$repo" worktree add -q --detach "$tmp/scratch" "$1"
	git -C "$tmp/scratch" rebase -q "$old"
	new=$(git -C "$tmp/scratch" rev-parse HEAD)
	(cd "$tmp/scratch" && sh -c true)
	git -C "$repo" update-ref refs/heads/main "$new" "$old"
	git -C "$repo" worktree remove --force "$tmp/scratch"
	git -C "$repo" worktree prune
}

# timed LABEL CMD ARGS...: one run of CMD in the repository, its wall ms appended to LABEL's file.
timed() {
	label=$1
	shift
	t0=$EPOCHREALTIME
	(cd "$repo" && "$@" >/dev/null)
	t1=$EPOCHREALTIME
	ms "$t0" "$t1" >>"$tmp/$label.ms"
	echo >>"$tmp/$label.ms"
}

echo "# aw merge queue: the overhead of a merge beyond git and the verify command"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg); $(git --version)"
echo "median of $REPS merges of a branch of one commit, verify 'true'"
echo
for i in $(seq "$REPS"); do
	branch "a$i"
	branch "g$i"
	timed start "$BIN/aw-ctl" --version
	timed aw "$BIN/aw-ctl" --root "$tmp/root" -i bench merge request --branch "a$i" --verify true
	timed git by_git "g$i"
done
count=$(git -C "$repo" rev-list --count main)
[ "$count" -eq $((2 * REPS + 1)) ] || { echo "bench/merge.sh: main has $count commits, not $((2 * REPS + 1))" >&2; exit 1; }
start=$(median_or_cap <"$tmp/start.ms")
aw=$(median_or_cap <"$tmp/aw.ms")
plain=$(median_or_cap <"$tmp/git.ms")
echo "| what | median ms |"
echo "|---|---|"
echo "| aw-ctl --version | $start |"
echo "| the same git commands from a shell script | $plain |"
echo "| aw-ctl merge request --verify true | $aw |"
awk -v a="$aw" -v g="$plain" 'BEGIN { printf "| overhead of aw | %.1f (ratio %.2f) |\n", a - g, a / g }'
