#!/bin/sh
# A small agent for examples/exec-agent.yaml: aw-run gives the prompt on stdin
# and sets AW_ROOT, AW_INSTANCE, AW_AGENT and AW_RUN, which aw-send reads.
set -eu
lines=$(wc -l | tr -d ' ')
aw-send "$GREETING from $AW_AGENT (run $AW_RUN): my prompt has $lines lines. @reviewer please check." > /dev/null
