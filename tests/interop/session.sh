#!/bin/sh
# Check `session: keep` with the real CLIs and a mock model: an agent's second run continues
# its CLI session, so that its request to the model carries the first run's exchange.
#
# Installs @anthropic-ai/claude-code and @openai/codex with npm into a scratch prefix (see
# claude-code.sh and codex.sh for choosing other versions), starts one mock model for each,
# and for a claude agent, then a codex agent, with `session: keep`:
#   - runs aw-run once (a fresh session: the mock has the agent post its first answer),
#   - then a second aw-run on the same instance with a new kickoff, and checks that this
#     run resumed the session the first reported (`--resume ID`, `resume ID -`) with the
#     short prompt, that the model's last request holds the first run's user text, the
#     first answer and the new message, that `aw-ctl session ls` lists the session with its
#     two runs and that the run counted the tokens of its own model call only,
#   - then `aw-ctl session reset` forgets it, and a third run starts a fresh session,
#   - then, given an id the CLI does not have, a fourth run falls back to a fresh session in
#     the same attempt, and aw-run says so.
# Needs npm, node, python3 and git; no API key. See common.sh for the other settings.

# shellcheck source=common.sh
. "$(dirname -- "$0")/common.sh"

command -v git >/dev/null 2>&1 || fail "git is needed"
install_claude
install_codex

unset ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN ANTHROPIC_BASE_URL ANTHROPIC_MODEL
unset CLAUDE_CODE_USE_BEDROCK CLAUDE_CODE_USE_VERTEX CLAUDE_CONFIG_DIR
unset CODEX_HOME OPENAI_API_KEY OPENAI_BASE_URL

start_mock -d "$tmp/mock-a" "first answer from the reviewer"
port_a=$port
start_mock -d "$tmp/mock-b" "first answer from the coder"
codex_home "$tmp/codex-home" "$port"

project=$tmp/project
mkdir "$project"
cd "$project" || exit
git init -q .

# workflow AGENT KICKOFF: write workflow.yaml, one agent with session: keep.
workflow() {
	case $1 in
	reviewer)
		backend="backend: claude
    env:
      ANTHROPIC_BASE_URL: \"http://127.0.0.1:$port_a\"
      ANTHROPIC_API_KEY: sk-ant-interop-not-a-key
      CLAUDE_CONFIG_DIR: \"$tmp/claude-config\"
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: 1
      DISABLE_AUTOUPDATER: 1
      ENABLE_TOOL_SEARCH: true"
		;;
	coder)
		backend="backend: codex
    env:
      CODEX_HOME: \"$tmp/codex-home\""
		;;
	esac
	cat >workflow.yaml <<YAML
name: keep-$1
agents:
  $1:
    session: keep
    timeout: 5m
    idle_timeout: 2m
    $backend
kickoff: "@$1 $2"
YAML
}

# field JSON KEY: the string KEY of the JSON object on standard input.
field() {
	python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

for agent in reviewer coder; do
	inst=keep-$agent
	case $agent in
	reviewer) log=$tmp/mock-a/requests.jsonl flag=--resume ;;
	coder) log=$tmp/mock-b/requests.jsonl flag=resume ;;
	esac

	workflow "$agent" "please review PR 44"
	say "$agent, run 1: a fresh session"
	run "$tmp/$agent-1.out" aw-run -q --retries 1 workflow.yaml
	aw-ctl -i "$inst" session ls --json >"$tmp/$agent-sessions.json"
	id=$(field id <"$tmp/$agent-sessions.json")
	[ -n "$id" ] || fail "no session kept for $agent"
	say "$agent keeps session $id"

	workflow "$agent" "and now PR 45"
	say "$agent, run 2: a new aw-run continues it"
	run "$tmp/$agent-2.out" aw-run -q --retries 1 workflow.yaml
	aw-ctl -i "$inst" runs "$agent" 2 --json >"$tmp/$agent-run2.json"
	python3 - "$tmp/$agent-run2.json" "$flag" "$id" <<'PY' || fail "run 2 of $agent did not continue its session"
import json, sys
t = json.load(open(sys.argv[1]))
cmd, flag, sid = t["command"], sys.argv[2], sys.argv[3]
assert t["status"] == "ok", t.get("reason")
assert [flag, sid] in [cmd[i:i + 2] for i in range(len(cmd))], cmd
assert t["prompt"].startswith("New in the aw workflow instance"), t["prompt"][:200]
assert "PR 44" not in t["prompt"], t["prompt"]
# One model call (the mock answers a conversation with two tool results at once): its
# tokens alone, although Codex reports a resumed thread's whole.
u = t["usage"]
assert (u["input_tokens"], u["output_tokens"]) == (10, 5), u
print("run 2: %s %s, the short prompt, its own usage %s" % (flag, sid, u))
PY
	check carried "$log" "please review PR 44" "first answer from the $agent" "and now PR 45"
	aw-ctl -i "$inst" session ls --json >"$tmp/$agent-sessions.json"
	[ "$(field id <"$tmp/$agent-sessions.json")" = "$id" ] || fail "$agent's session changed"
	[ "$(field runs <"$tmp/$agent-sessions.json")" = 2 ] || fail "$agent's session: not 2 runs"

	aw-ctl -i "$inst" session reset "$agent" >/dev/null
	workflow "$agent" "one more, PR 46"
	say "$agent, run 3: after session reset, a fresh session"
	run "$tmp/$agent-3.out" aw-run -q --retries 1 workflow.yaml
	aw-ctl -i "$inst" runs "$agent" 3 --json >"$tmp/$agent-run3.json"
	python3 - "$tmp/$agent-run3.json" "$flag" <<'PY' || fail "run 3 of $agent was not fresh"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["status"] == "ok", t.get("reason")
assert sys.argv[2] not in t["command"], t["command"]
assert t["prompt"].startswith("You are @"), t["prompt"][:200]
PY
	aw-ctl -i "$inst" session ls --json >"$tmp/$agent-sessions.json"
	[ "$(field id <"$tmp/$agent-sessions.json")" != "$id" ] || fail "$agent kept the old session"

	# A session the CLI does not have: a fresh one in the same attempt, said.
	gone=00000000-0000-4000-8000-000000000000
	python3 - "$project/.workflow/$inst/_state/sessions.json" "$agent" "$gone" <<'PY'
import json, sys
path, agent, gone = sys.argv[1:]
s = json.load(open(path))
s[agent]["id"] = gone
json.dump(s, open(path, "w"))
PY
	workflow "$agent" "last one, PR 47"
	say "$agent, run 4: a session the CLI does not have"
	run "$tmp/$agent-4.out" aw-run -q --retries 1 workflow.yaml
	grep -q "$agent: session $gone not resumed (.*); a fresh session" "$tmp/$agent-4.out" ||
		fail "aw-run did not say that $agent's session was not resumed: $(cat "$tmp/$agent-4.out")"
	aw-ctl -i "$inst" runs "$agent" 4 --json >"$tmp/$agent-run4.json"
	python3 - "$tmp/$agent-run4.json" "$flag" <<'PY' || fail "run 4 of $agent was not fresh"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["status"] == "ok" and t["attempt"] == 1, (t["status"], t["reason"])
assert sys.argv[2] not in t["command"], t["command"]
assert t["prompt"].startswith("You are @"), t["prompt"][:200]
PY
	aw-ctl -i "$inst" session ls --json >"$tmp/$agent-sessions.json"
	[ "$(field id <"$tmp/$agent-sessions.json")" != "$gone" ] || fail "$agent kept the lost session"
done

say "OK: claude and codex agents keep their sessions across runs"
