#!/bin/sh
# A two-agent conversation through an aw channel, driven from the shell.
# Needs aw-send, aw-peek and aw-ctl on PATH (see the README, Install).
set -eu

# Work in a throwaway root so the demo never touches a real workflow.
AW_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/aw-quickstart.XXXXXX")
export AW_ROOT
trap 'rm -rf "$AW_ROOT"' EXIT
echo "root: $AW_ROOT"

# Register two agents in the instance "review" (no process is started).
aw-ctl -i review new reviewer --backend external
aw-ctl -i review new coder --backend external

# A person kicks off; the @mention puts the message in coder's inbox.
aw-send -i review "@coder please fix the auth check in login.rs, then ask @reviewer"

# Scripts speak as agents with --from; the id of each new entry is printed.
id=$(aw-send -i review --from coder "@reviewer fixed in a1b2c3, please verify")
echo "coder's reply is entry #$id"

# Long text comes on stdin, byte for byte.
printf '### Review notes\n- auth: fixed\n- tests: pass\n' | aw-send -i review --from reviewer -

echo "--- the channel"
aw-peek -i review

echo "--- reviewer's inbox (reading does not acknowledge)"
aw-peek -i review --inbox reviewer

# Acknowledge up to the entry the reviewer handled; later mentions stay unread.
aw-ctl -i review ack reviewer --until "$id"
echo "--- reviewer's inbox after ack: $(aw-peek -i review --inbox reviewer | wc -l) unread"

# Shared documents: written from stdin, read back, listed.
printf '# Review\n\n- [x] auth check\n' | aw-ctl -i review doc write --as reviewer
aw-ctl -i review doc create findings/auth.md --as reviewer <<'DOC'
The token was compared with ==; now constant-time.
DOC
echo "--- documents"
aw-peek -i review --docs
aw-peek -i review --doc

echo "--- instances"
aw-ctl ls

# JSON for machines: every entry that mentions coder, through jq-free shell tools.
echo "--- entries mentioning coder, as JSON"
aw-peek -i review --json --limit 0 | grep '"mentions":\[[^]]*"coder"' || true
