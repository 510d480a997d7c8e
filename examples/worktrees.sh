#!/bin/sh
# Run examples/worktrees.yaml in a scratch git repository, with no API key: made in DIR
# (which must not exist yet), or in a new temporary directory.
#   sh examples/worktrees.sh [DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$(mktemp -d)}
mkdir "$dir" 2>/dev/null || [ -z "$(ls -A "$dir")" ] || { echo "worktrees.sh: $dir: not empty" >&2; exit 64; }
cd "$dir"
git init -q -b main
printf 'a greeting\nhello from\nthe end\n' > greeting.txt
git add greeting.txt
git -c user.name=aw -c user.email=aw@example.invalid commit -q -m "a greeting to sign"
aw-run "$here/worktrees.yaml"
echo "--- main, in $dir:"
git log --format='%h %s' main
cat greeting.txt
echo "--- the merge queue:"
aw-ctl -i worktrees merge ls
