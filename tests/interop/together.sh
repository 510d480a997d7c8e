#!/bin/sh
# Check one aw-run workflow in which a Claude Code agent and a Codex agent talk to each other.
#
# Installs @anthropic-ai/claude-code and @openai/codex with npm into a scratch prefix (see
# claude-code.sh and codex.sh for choosing other versions), starts two mock models, and runs
# a workflow with two agents, each given its own mock by its `env:` in the workflow only:
#   - reviewer, backend claude: the Anthropic API of mock A (ANTHROPIC_BASE_URL and a key),
#   - coder, backend codex: the OpenAI Responses API of mock B (a CODEX_HOME whose default
#     provider it is), in a Git repository.
# The kickoff mentions reviewer, who mentions coder, who mentions reviewer back; reviewer's
# second run answers without a mention, and the work is done. Checks that aw-run exits 0,
# the channel holds exactly that conversation, both inboxes are read, every run is ok with
# its usage, and each mock served its API.
#
# With --delegate, both agents have `delegate: true`, and it also checks what each CLI
# offered its model: Claude Code exactly the aw tools of `aw-mcp --delegate` and none of its
# own (`--tools ""`); Codex the same aw tools and none of its shell, patch or sub-agent tools
# (`features.shell_tool=false`, `agents.enabled=false`, `--sandbox read-only`).
# Needs npm, node, python3 and git; no API key. See common.sh for the other settings.

# shellcheck source=common.sh
. "$(dirname -- "$0")/common.sh"

command -v git >/dev/null 2>&1 || fail "git is needed"
case ${1:-} in
--delegate) delegate=true ;;
'') delegate= ;;
*) fail "usage: together.sh [--delegate]" ;;
esac
if [ -n "$delegate" ]; then
	reviewer_mode="delegate: true"
	coder_mode="delegate: true"
	what="a delegate claude agent and a delegate codex agent"
else
	reviewer_mode="permission_mode: default"
	coder_mode=""
	what="a claude agent and a codex agent"
fi
install_claude
install_codex

# Only the workflow's env: points the CLIs at the mocks.
unset ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN ANTHROPIC_BASE_URL ANTHROPIC_MODEL
unset CLAUDE_CODE_USE_BEDROCK CLAUDE_CODE_USE_VERTEX CLAUDE_CONFIG_DIR
unset CODEX_HOME OPENAI_API_KEY OPENAI_BASE_URL

# Each run of an agent is a new conversation, and the mock answers every conversation the
# same way unless told otherwise: reviewer, run again when coder mentions it, would mention
# coder again, and so on until the loop guard stopped aw-run with status 1. So mock A gives
# reviewer's second conversation a message that mentions no one.
start_mock -d "$tmp/mock-a" "@coder please fix the typo" "thanks, it looks good now"
port_a=$port
start_mock -d "$tmp/mock-b" "@reviewer fixed"
codex_home "$tmp/codex-home" "$port"

project=$tmp/project
mkdir "$project"
cd "$project" || exit
git init -q .

# max_runs only makes a loop fail fast: two runs of reviewer and one of coder are all the
# conversation needs.
cat >workflow.yaml <<YAML
name: review
agents:
  reviewer:
    backend: claude
    timeout: 5m
    idle_timeout: 2m
    $reviewer_mode
    max_runs: 2
    env:
      ANTHROPIC_BASE_URL: "http://127.0.0.1:$port_a"
      ANTHROPIC_API_KEY: sk-ant-interop-not-a-key
      CLAUDE_CONFIG_DIR: "$tmp/claude-config"
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: 1
      DISABLE_AUTOUPDATER: 1
      ENABLE_TOOL_SEARCH: true
  coder:
    backend: codex
    timeout: 5m
    max_runs: 1
    $coder_mode
    env:
      CODEX_HOME: "$tmp/codex-home"
kickoff: "@reviewer please review PR 44"
YAML
say "aw-run workflow.yaml with $what"
run "$tmp/aw-run.out" aw-run -q --retries 1 --budget-usd 5 workflow.yaml

aw-peek -i review --json -n 0 >"$tmp/channel.jsonl"
check entries \
	system "@reviewer please review PR 44" \
	reviewer "@coder please fix the typo" \
	coder "@reviewer fixed" \
	reviewer "thanks, it looks good now" <"$tmp/channel.jsonl"
for agent in reviewer coder; do
	[ "$(aw-peek -i review "$agent" | wc -l)" = 0 ] || fail "aw-run left $agent's inbox unread"
done
aw-ctl -i review runs --json >"$tmp/runs.jsonl"
check runs reviewer=2 coder=1 <"$tmp/runs.jsonl"

# Each mock served its own agent's API, and the messages reached the other side.
check requests "$tmp/mock-a/requests.jsonl" /messages
check requests "$tmp/mock-b/requests.jsonl" /responses
check results "$tmp/mock-a/requests.jsonl" mcp__aw__ "please review PR 44"
check results "$tmp/mock-a/requests.jsonl" mcp__aw__ "@reviewer fixed"
check results "$tmp/mock-b/requests.jsonl" mcp__aw__ "@coder please fix the typo"

if [ -n "$delegate" ]; then
	# What each CLI offered its model.
	check delegated "$tmp/mock-a/requests.jsonl" mcp__aw__ "$bin_dir/aw-mcp" --only
	check delegated "$tmp/mock-b/requests.jsonl" mcp__aw__ "$bin_dir/aw-mcp" \
		shell shell_command exec_command local_shell apply_patch \
		multi_agent_v1__spawn_agent spawn_agent
fi

say "OK: $what worked together"
