#!/bin/sh
# The triage agent of examples/keep.yaml: it reads its prompt on stdin and hands a message
# that mentions a failure to @fixer. Only the messages that woke it count (the prompt's
# "## Inbox" section), not the recent channel history after them, so an old failure is not
# handed on again. Whatever it prints is posted as its reply.
set -eu
inbox=$(sed -n -e '/^## Inbox/,/^## /{' -e '/^## /!p' -e '}')
if printf '%s\n' "$inbox" | grep -qiE 'broke|fail|error'; then
	echo "@fixer please look at this (run $AW_RUN)."
else
	echo "Noted, nothing to do."
fi
