#!/bin/sh
# The triage agent of examples/keep.yaml: it reads its prompt (the inbox first) on stdin
# and hands anything that mentions a failure to @fixer. Whatever it prints is posted as
# its reply.
set -eu
prompt=$(cat)
if printf '%s\n' "$prompt" | grep -qiE 'broke|fail|error'; then
	echo "@fixer please look at this (run $AW_RUN)."
else
	echo "Noted, nothing to do."
fi
