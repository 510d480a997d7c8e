#!/bin/sh
# The lead of examples/worktrees.yaml: woken by an approval asked of it (a verified merge
# into main), it approves every request still waiting for it. A person does the same
# with `aw-ctl approve ID`, or `aw-ctl reject ID --reason TEXT`.
set -eu
cat > /dev/null
for id in $(aw-ctl approvals --json | grep '"by":\[[^]]*"lead"' | sed 's/.*"id":\([0-9]*\).*/\1/'); do
  aw-ctl approve "$id" --as lead --reason "verified, and fine by me"
  echo "Approved #$id."
done
