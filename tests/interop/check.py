#!/usr/bin/env python3
"""Checks for the interop scripts. Each prints what it found and exits 1 when the check fails.

  check.py tools AW_MCP
      Print the names of the tools aw-mcp lists, one per line (asks a throw-away server).

  check.py offered LOG PREFIX TOOLS_FILE
      The first model request that offers any tool must offer every tool of TOOLS_FILE
      as PREFIX + name (Codex's namespaces count as "<namespace>__<name>").

  check.py delegated LOG PREFIX AW_MCP [--only] [NAME...]
      The first model request that offers any tool offers exactly the aw tools of
      `aw-mcp --delegate` as PREFIX + name; with --only, no other tool at all; and none of
      the NAMEs (a CLI's own shell or file tools).

  check.py results LOG PREFIX [TEXT]
      Some aw tool result was sent back to the model (one containing TEXT, if given), and
      none of them is a permission or approval refusal.

  check.py channel FROM MESSAGE COUNT
      Standard input is `aw-peek --json -n 0`: at least COUNT entries are from FROM with
      exactly MESSAGE as their text.

  check.py entries FROM MESSAGE [FROM MESSAGE]...
      Standard input is `aw-peek --json -n 0`: the channel holds exactly these entries, in
      this order.

  check.py runs AGENT=COUNT...
      Standard input is `aw-ctl runs --json`: every transcript is ok and has a usage
      object, and each AGENT has exactly COUNT transcripts (no other agent has any).

  check.py requests LOG SUFFIX
      Some POST of LOG went to a path ending in SUFFIX.

  check.py carried LOG TEXT...
      The last model request that offers the aw tools carries every TEXT in its
      conversation (the Anthropic `messages`, the Responses `input`): a continued session
      sends the turns before it.

  check.py stream FLAG...
      Standard input is one transcript (`aw-ctl runs AGENT N --json`) of a claude agent: the
      run is ok, its command has every FLAG, and its stdout is Claude Code's JSON Lines
      stream: a system line first, a successful result line last.

Standard library only.
"""

import json
import re
import subprocess
import sys
import tempfile

REFUSAL = re.compile(r"permission|approval|not granted|denied|rejected", re.I)


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def requests(log):
    with open(log, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def list_tools(aw_mcp, options=()):
    """Ask aw-mcp (with OPTIONS) for its tool list over stdio, in a scratch root."""
    with tempfile.TemporaryDirectory() as root:
        msgs = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "aw-interop-check", "version": "1"},
            }},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ]
        p = subprocess.Popen(
            [aw_mcp, "--agent", "probe@probe", "--root", root, *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for m in msgs:
            p.stdin.write(json.dumps(m) + "\n")
            p.stdin.flush()
        names = None
        for line in p.stdout:
            reply = json.loads(line)
            if reply.get("id") == 2:
                names = [t["name"] for t in reply["result"]["tools"]]
                break
        p.stdin.close()
        p.wait(timeout=10)
    if not names:
        fail("aw-mcp listed no tools")
    return names


def offered_names(tools):
    out = []
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            out.extend("%s__%s" % (t.get("name"), n) for n in offered_names(t.get("tools")))
            continue
        if isinstance(t.get("name"), str):
            out.append(t["name"])
    return out


def first_offer(log):
    """(path, offered tool names) of the first model request of LOG that offers any tool."""
    for r in requests(log):
        body = r.get("body")
        if isinstance(body, dict) and body.get("tools"):
            return r.get("path"), offered_names(body["tools"])
    fail("no model request offered any tool")


def offered(log, prefix, tools_file):
    with open(tools_file, encoding="utf-8") as f:
        want = {prefix + n.strip() for n in f if n.strip()}
    path, names = first_offer(log)
    got = {n for n in names if n.startswith(prefix)}
    missing = sorted(want - got)
    if missing:
        fail("the first model request (%s) offers %d of the %d aw tools; missing: %s"
             % (path, len(got & want), len(want), ", ".join(missing)))
    print("first model request offers all %d aw tools (%d tools in all)" % (len(want), len(names)))


def delegated(log, prefix, aw_mcp, only, absent):
    want = {prefix + n for n in list_tools(aw_mcp, ["--delegate"])}
    path, names = first_offer(log)
    got = {n for n in names if n.startswith(prefix)}
    if got != want:
        fail("the first model request (%s) offers aw tools %s; aw-mcp --delegate lists %s"
             % (path, sorted(got), sorted(want)))
    others = sorted(n for n in names if not n.startswith(prefix))
    if only and others:
        fail("the first model request offers tools beside aw's: %s" % ", ".join(others))
    banned = sorted(set(others) & set(absent))
    if banned:
        fail("the first model request offers %s" % ", ".join(banned))
    print("first model request offers the %d delegate tools%s" % (
        len(want), " and nothing else" if only else
        " and, of its own, %s" % (", ".join(others) or "none")))


def tool_results(body, prefix):
    """(tool name, output text, is_error) for each aw tool result in a request."""
    calls = {}
    out = []
    # Anthropic Messages API.
    for m in body.get("messages") or []:
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                calls[b.get("id")] = b.get("name", "")
            elif b.get("type") == "tool_result":
                c = b.get("content")
                text = c if isinstance(c, str) else json.dumps(c)
                out.append((calls.get(b.get("tool_use_id"), ""), text, bool(b.get("is_error"))))
    # OpenAI Responses API.
    items = body.get("input")
    for i in items if isinstance(items, list) else []:
        if not isinstance(i, dict):
            continue
        if i.get("type") == "function_call":
            name = i.get("name", "")
            if i.get("namespace"):
                name = "%s__%s" % (i["namespace"], name)
            calls[i.get("call_id")] = name
        elif str(i.get("type", "")).endswith("call_output"):
            o = i.get("output")
            text = o if isinstance(o, str) else json.dumps(o)
            out.append((calls.get(i.get("call_id"), ""), text, False))
    return [r for r in out if r[0].startswith(prefix)]


def results(log, prefix, text):
    seen = False
    for r in requests(log):
        body = r.get("body")
        if not isinstance(body, dict):
            continue
        for name, out, is_error in tool_results(body, prefix):
            if is_error or REFUSAL.search(out):
                fail("%s was refused or failed: %s" % (name, out[:300]))
            if text is None or text in out:
                seen = True
    if not seen:
        fail("no aw tool result sent back to the model%s"
             % ("" if text is None else " contains %r" % text))
    print("the model got the aw tool results%s, and no refusal"
          % ("" if text is None else ", %r among them" % text))


def channel(sender, message, count):
    entries = [json.loads(line) for line in sys.stdin if line.strip()]
    n = sum(1 for e in entries if e.get("from") == sender and e.get("message") == message)
    if n < count:
        fail("%d channel entries from %r saying %r, expected %d; the channel has:\n%s"
             % (n, sender, message, count, "\n".join(json.dumps(e) for e in entries)))
    print("%d channel entries from %r saying %r" % (n, sender, message))


def entries(pairs):
    want = list(zip(pairs[0::2], pairs[1::2]))
    got = [json.loads(line) for line in sys.stdin if line.strip()]
    if [(e.get("from"), e.get("message")) for e in got] != want:
        fail("the channel should hold, in order:\n%s\nit has:\n%s"
             % ("\n".join("%s: %s" % w for w in want),
                "\n".join(json.dumps(e) for e in got)))
    for e in got:
        print("%s: %s" % (e["from"], e["message"]))


def runs(counts):
    want = {}
    for c in counts:
        agent, _, n = c.partition("=")
        want[agent] = int(n)
    got = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        t = json.loads(line)
        if t.get("status") != "ok":
            fail("%s's run %s was %s: %s" % (t.get("agent"), t.get("run"), t.get("status"),
                                              t.get("reason")))
        if not isinstance(t.get("usage"), dict):
            fail("%s's run %s has no usage: %s" % (t.get("agent"), t.get("run"), t.get("usage")))
        got[t.get("agent")] = got.get(t.get("agent"), 0) + 1
    if got != want:
        fail("runs per agent: %s, expected %s" % (got, want))
    print("runs per agent, all ok with their usage: %s" % got)


def posted(log, suffix):
    n = sum(1 for r in requests(log)
            if r.get("method") == "POST" and r.get("path", "").split("?")[0].endswith(suffix))
    if n == 0:
        fail("no POST to a path ending in %s; the paths: %s"
             % (suffix, sorted({r.get("path") for r in requests(log)})))
    print("%d POST requests to .../%s" % (n, suffix.lstrip("/")))


def carried(log, texts):
    convs = []
    for r in requests(log):
        body = r.get("body")
        if r.get("method") != "POST" or not isinstance(body, dict):
            continue
        if aw_prefix_of(body) is None:
            continue
        convs.append(body.get("messages") if "messages" in body else body.get("input"))
    if not convs:
        fail("no model request offered the aw tools")
    last = json.dumps(convs[-1])
    missing = [t for t in texts if json.dumps(t)[1:-1] not in last]
    if missing:
        fail("the last request (of %d) lacks %s: %s" % (len(convs), missing, last[:2000]))
    print("the last of %d requests carries %s" % (len(convs), ", ".join(texts)))


def aw_prefix_of(body):
    """The prefix of the aw tools a request offers, or None."""
    for n in offered_names(body.get("tools")):
        if n.endswith("channel_send"):
            return n[: -len("channel_send")]
    return None


def stream(flags):
    t = json.load(sys.stdin)
    if t.get("status") != "ok":
        fail("the run was %s: %s" % (t.get("status"), t.get("reason")))
    missing = [f for f in flags if f not in t.get("command", [])]
    if missing:
        fail("the command lacks %s: %s" % (" ".join(missing), t.get("command")))
    lines = [json.loads(line) for line in t.get("stdout", "").splitlines() if line.strip()]
    if len(lines) < 2 or lines[0].get("type") != "system":
        fail("the stream does not start with a system line: %s" % t.get("stdout", "")[:300])
    last = lines[-1]
    if last.get("type") != "result" or last.get("subtype") != "success":
        fail("the stream does not end with a successful result: %s" % json.dumps(last)[:300])
    print("a stream of %d lines, its result last; the command has %s"
          % (len(lines), " ".join(flags)))


def main():
    a = sys.argv[1:]
    if a[:1] == ["tools"] and len(a) == 2:
        print("\n".join(list_tools(a[1])))
    elif a[:1] == ["offered"] and len(a) == 4:
        offered(a[1], a[2], a[3])
    elif a[:1] == ["delegated"] and len(a) >= 4:
        only = "--only" in a[4:]
        delegated(a[1], a[2], a[3], only, [n for n in a[4:] if n != "--only"])
    elif a[:1] == ["results"] and len(a) in (3, 4):
        results(a[1], a[2], a[3] if len(a) == 4 else None)
    elif a[:1] == ["channel"] and len(a) == 4:
        channel(a[1], a[2], int(a[3]))
    elif a[:1] == ["entries"] and len(a) >= 3 and len(a) % 2 == 1:
        entries(a[1:])
    elif a[:1] == ["runs"] and len(a) >= 2 and all("=" in c for c in a[1:]):
        runs(a[1:])
    elif a[:1] == ["requests"] and len(a) == 3:
        posted(a[1], a[2])
    elif a[:1] == ["carried"] and len(a) >= 3:
        carried(a[1], a[2:])
    elif a[:1] == ["stream"]:
        stream(a[1:])
    else:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(64)


if __name__ == "__main__":
    main()
