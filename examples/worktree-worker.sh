#!/bin/sh
# A worker of examples/worktrees.yaml: it runs in its own worktree (AW_WORKTREE), on its
# branch (AW_BRANCH). It signs line 2 of greeting.txt, commits, and asks the merge queue
# to merge its branch; when the queue says its request conflicts, it brings the branch
# onto main, resolving the line by hand, and asks again. It does nothing while a request
# of its own is under way, or once its name is on main.
set -eu
cat > /dev/null
export GIT_EDITOR=true GIT_AUTHOR_NAME="$AW_AGENT" GIT_COMMITTER_NAME="$AW_AGENT" \
  GIT_AUTHOR_EMAIL="$AW_AGENT@example.invalid" GIT_COMMITTER_EMAIL="$AW_AGENT@example.invalid"
if git show main:greeting.txt | grep -q " $AW_AGENT\$\| $AW_AGENT "; then
  echo "My change is on main: nothing left to do."
  exit 0
fi
if aw-ctl merge ls --json | grep "\"agent\":\"$AW_AGENT\"" | grep -q '"state":"\(queued\|running\)"'; then
  echo "My merge request is under way."
  exit 0
fi
if [ -z "$(git log --format=%h main..HEAD)" ]; then
  sed -i "2s/\$/ $AW_AGENT/" greeting.txt
  git commit -q -a -m "$AW_AGENT: sign the greeting"
elif ! git rebase -q main > /dev/null 2>&1; then
  # The queue said it conflicts: keep main's line, and sign it too.
  git show main:greeting.txt | sed "2s/\$/ and $AW_AGENT/" > greeting.txt
  git add greeting.txt
  git rebase --continue > /dev/null
fi
id=$(aw-ctl merge request --no-wait)
echo "Asked to merge $AW_BRANCH into main (request $id)."
