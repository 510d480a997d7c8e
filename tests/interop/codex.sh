#!/bin/sh
# Check the README's Codex recipe with the real `codex` CLI and a mock model.
#
# Installs @openai/codex with npm into a scratch prefix (set AW_INTEROP_CODEX to another
# npm spec, e.g. @openai/codex@0.169.0), starts mock_model.py as an OpenAI Responses API
# provider in a scratch CODEX_HOME, runs the recipe in a scratch Git repository, then once
# more from a directory outside any repository with --skip-git-repo-check, and checks that:
#   - the first model request offers every aw-mcp tool,
#   - the tool results reached the model and none was an approval refusal,
#   - the agent's channel_send landed in the channel as "coder",
#   - aw-run with a `backend: codex` agent does the same by itself.
# Needs npm, node, python3 and git; no API key. See common.sh for the other settings.

# shellcheck source=common.sh
. "$(dirname -- "$0")/common.sh"

command -v git >/dev/null 2>&1 || fail "git is needed"
install_codex

check tools "$bin_dir/aw-mcp" >"$tmp/tools.txt"
start_mock "@reviewer done"

# Codex talks to the mock only: a CODEX_HOME of its own whose default provider is the mock.
CODEX_HOME=$tmp/codex-home
export CODEX_HOME
codex_home "$CODEX_HOME" "$port"

project=$tmp/project
elsewhere=$tmp/elsewhere
mkdir "$project" "$elsewhere"
cd "$project" || exit
git init -q .

# The README recipe, as written.
eval "set -- $(aw-ctl mcp-config coder@review --codex | tr '\n' ' ')"
say "run 1: codex exec \"\$@\" ... in a Git repository"
run "$tmp/codex-1.out" codex exec "$@" "Check your inbox with my_inbox and do the work"
check offered "$tmp/requests.jsonl" mcp__aw__ "$tmp/tools.txt"
check results "$tmp/requests.jsonl" mcp__aw__
aw-peek -i review --json -n 0 >"$tmp/channel.jsonl"
check channel coder "@reviewer done" 1 <"$tmp/channel.jsonl"

# Now that aw-mcp registered coder, give it work, and run from outside any repository.
aw-send -i review "@coder please fix PR 42" >/dev/null
cd "$elsewhere" || exit
say "run 2: codex exec --skip-git-repo-check \"\$@\" ... from another directory"
run "$tmp/codex-2.out" codex exec --skip-git-repo-check "$@" \
	"Check your inbox with my_inbox and do the work"
[ ! -e "$elsewhere/.workflow" ] || fail "aw-mcp made a .workflow in the working directory"
check results "$tmp/requests.jsonl" mcp__aw__ "please fix PR 42"
aw-peek --root "$project/.workflow" -i review --json -n 0 >"$tmp/channel.jsonl"
check channel coder "@reviewer done" 2 <"$tmp/channel.jsonl"

# aw-run with a codex agent: it runs `codex exec --json -` itself, prompt on stdin, the
# server as -c overrides, and reads the event stream.
cd "$project" || exit
cat >workflow.yaml <<'YAML'
name: review
agents:
  coder:
    backend: codex
    timeout: 5m
kickoff: "@coder please fix PR 43"
YAML
say "run 3: aw-run workflow.yaml with a codex agent"
run "$tmp/aw-run.out" aw-run -q --retries 1 workflow.yaml
aw-peek -i review --json -n 0 >"$tmp/channel.jsonl"
check channel coder "@reviewer done" 3 <"$tmp/channel.jsonl"
[ "$(aw-peek -i review coder | wc -l)" = 0 ] || fail "aw-run left coder's inbox unread"

say "OK: the Codex recipe works"
