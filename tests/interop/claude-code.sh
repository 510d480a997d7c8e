#!/bin/sh
# Check the README's Claude Code recipe with the real `claude` CLI and a mock model.
#
# Installs @anthropic-ai/claude-code with npm into a scratch prefix (set
# AW_INTEROP_CLAUDE_CODE to another npm spec, e.g. @anthropic-ai/claude-code@2.1.197),
# starts mock_model.py as the Anthropic API, runs the recipe in a scratch directory, then
# once more from another directory, and checks that:
#   - the first model request offers every aw-mcp tool (what `alwaysLoad: true` is for),
#   - the tool results reached the model and none was a permission refusal,
#   - the agent's channel_send landed in the channel as "reviewer",
#   - aw-run with a `backend: claude` agent does the same by itself, Claude Code taking its
#     flags (stream-json output, permission mode, spending cap) and its stream read.
# Needs npm, node and python3; no API key. See common.sh for the other settings.

# shellcheck source=common.sh
. "$(dirname -- "$0")/common.sh"

install_claude

check tools "$bin_dir/aw-mcp" >"$tmp/tools.txt"
start_mock "@coder done"

# Claude Code talks to the mock only, with a configuration directory of its own.
unset ANTHROPIC_AUTH_TOKEN ANTHROPIC_MODEL CLAUDE_CODE_USE_BEDROCK CLAUDE_CODE_USE_VERTEX
ANTHROPIC_BASE_URL=http://127.0.0.1:$port
ANTHROPIC_API_KEY=sk-ant-interop-not-a-key
CLAUDE_CONFIG_DIR=$tmp/claude-config
CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
DISABLE_AUTOUPDATER=1
# With a base URL other than Anthropic's, Claude Code turns its tool search off. Turn it on,
# as against the Anthropic API: MCP tools are then deferred behind the search, except those
# of servers with `alwaysLoad: true`.
ENABLE_TOOL_SEARCH=true
export ANTHROPIC_BASE_URL ANTHROPIC_API_KEY CLAUDE_CONFIG_DIR
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC DISABLE_AUTOUPDATER ENABLE_TOOL_SEARCH

project=$tmp/project
elsewhere=$tmp/elsewhere
mkdir "$project" "$elsewhere"
cd "$project" || exit

# The README recipe, as written.
aw-ctl -i review new reviewer --backend claude >/dev/null
aw-ctl mcp-config reviewer@review > reviewer.json
aw-send -i review "@reviewer please review PR 42" >/dev/null
say "run 1: claude -p ... --mcp-config reviewer.json --allowedTools mcp__aw"
run "$tmp/claude-1.out" claude -p "Check your inbox with my_inbox and do the work" \
	--mcp-config reviewer.json --allowedTools mcp__aw
check offered "$tmp/requests.jsonl" mcp__aw__ "$tmp/tools.txt"
check results "$tmp/requests.jsonl" mcp__aw__ "please review PR 42"
aw-peek -i review --json -n 0 >"$tmp/channel.jsonl"
check channel reviewer "@coder done" 1 <"$tmp/channel.jsonl"

# The same configuration from another directory.
cd "$elsewhere" || exit
say "run 2: the same from another directory"
run "$tmp/claude-2.out" claude -p "Check your inbox with my_inbox and do the work" \
	--mcp-config "$project/reviewer.json" --allowedTools mcp__aw
[ ! -e "$elsewhere/.workflow" ] || fail "aw-mcp made a .workflow in the working directory"
aw-peek --root "$project/.workflow" -i review --json -n 0 >"$tmp/channel.jsonl"
check channel reviewer "@coder done" 2 <"$tmp/channel.jsonl"

# aw-run with a claude agent: it runs Claude Code itself, prompt on stdin, and reads its
# JSON Lines stream.
cd "$project" || exit
cat >workflow.yaml <<'YAML'
name: review
agents:
  reviewer:
    backend: claude
    timeout: 5m
    idle_timeout: 2m
    permission_mode: default
kickoff: "@reviewer please review PR 43"
YAML
say "run 3: aw-run workflow.yaml with a claude agent"
run "$tmp/aw-run.out" aw-run -q --retries 1 --budget-usd 5 workflow.yaml
aw-peek -i review --json -n 0 >"$tmp/channel.jsonl"
check channel reviewer "@coder done" 3 <"$tmp/channel.jsonl"
[ "$(aw-peek -i review reviewer | wc -l)" = 0 ] || fail "aw-run left reviewer's inbox unread"
aw-ctl -i review runs reviewer 1 --json >"$tmp/transcript.json"
check stream --output-format stream-json --verbose --permission-mode --max-budget-usd \
	<"$tmp/transcript.json"

say "OK: the Claude Code recipe works"
