#!/usr/bin/env python3
"""A scripted model server for checking aw-mcp against real agent CLIs without an API key.

It speaks just enough of two wire formats:

  POST .../messages     Anthropic Messages API (Claude Code), streaming or not
  POST .../responses    OpenAI Responses API (Codex), streaming or not

and plays one agent turn. When the request offers the aw tools (a tool whose name ends in
channel_send), it answers, one request at a time:

  1. no tool result yet    -> call <prefix>my_inbox {}
  2. one tool result       -> call <prefix>channel_send {"message": SAY}
  3. two or more results   -> a final text, "Done."

--say may be given more than once: the n-th conversation to reach step 2 sends the n-th
SAY, the last one repeating. A conversation is known by the id of its first tool call, so a
request sent again gets the same answer. So an agent run again (each run is a new
conversation) can say something else, and two agents need not mention each other forever.

Any other request (titles, summaries, quota checks) gets a short text answer. Every request
is appended to the log as one JSON line: {"method", "path", "body"}.

Usage: mock_model.py --log FILE [--port N] [--port-file FILE] [--say TEXT]...

With --port 0 (the default) the system picks a free port; it is written to --port-file,
once the server is listening.

Standard library only.
"""

import argparse
import functools
import gzip
import json
import os
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTER = [0]


def next_id(prefix):
    with LOCK:
        COUNTER[0] += 1
        return "%s_%06d" % (prefix, COUNTER[0])


def tool_names(tools):
    """Every tool name a request offers, whatever the wire format nests them in."""
    names = []
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("name"), str):
            names.append(t["name"])
        if isinstance(t.get("tools"), list):
            names.extend(tool_names(t["tools"]))
    return names


def aw_prefix(names):
    """The prefix the client put before the aw tool names, or None without aw tools."""
    for n in names:
        if n.endswith("channel_send"):
            return n[: -len("channel_send")]
    return None


def aw_namespace(tools):
    """The Responses API namespace that holds the aw tools (Codex groups an MCP server's
    tools as {"type": "namespace", "name": "mcp__aw", "tools": [...]}), or None."""
    for t in tools or []:
        if isinstance(t, dict) and t.get("type") == "namespace":
            if aw_prefix(tool_names(t.get("tools"))) is not None:
                return t.get("name")
    return None


def first_call_anthropic(body):
    for m in body.get("messages") or []:
        content = m.get("content")
        for b in content if isinstance(content, list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                return b.get("id")
    return None


def first_call_responses(body):
    items = body.get("input")
    for i in items if isinstance(items, list) else []:
        if isinstance(i, dict) and i.get("type") == "function_call":
            return i.get("call_id")
    return None


def count_results_anthropic(body):
    n = 0
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            n += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def count_results_responses(body):
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    return sum(
        1
        for i in items
        if isinstance(i, dict) and str(i.get("type", "")).endswith("call_output")
    )


class Plan:
    """What to answer: a tool call (name, arguments) or a text. say() gives the message."""

    def __init__(self, names, results, say):
        self.tool = None
        self.args = None
        self.text = None
        prefix = aw_prefix(names)
        if prefix is None:
            self.text = "OK."
        elif results == 0:
            self.tool, self.args = prefix + "my_inbox", {}
        elif results == 1:
            self.tool, self.args = prefix + "channel_send", {"message": say()}
        else:
            self.text = "Done."


def sse(event, data):
    return ("event: %s\ndata: %s\n\n" % (event, json.dumps(data))).encode()


class Handler(BaseHTTPRequestHandler):
    server_version = "mock-model/1"

    def log_message(self, fmt, *args):  # keep stderr quiet
        pass

    def record(self, body):
        entry = {"method": self.command, "path": self.path, "body": body}
        with LOCK, open(self.server.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            raw = gzip.decompress(raw)
        elif enc == "deflate":
            raw = zlib.decompress(raw)
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return {"_unparsed": raw.decode("utf-8", "replace")}

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_GET(self):
        self.record(None)
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            self.send_json({"object": "list", "data": [], "models": []})
        else:
            self.send_json({"ok": True})

    def do_HEAD(self):
        self.record(None)
        self.send_response(200)
        self.end_headers()

    def do_POST(self):
        body = self.read_body()
        self.record(body)
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            self.send_json({"input_tokens": 100})
        elif path.endswith("/messages"):
            self.anthropic(body)
        elif path.endswith("/responses"):
            self.openai_responses(body)
        else:
            self.send_json({"error": {"type": "not_found", "message": path}}, 404)

    # Anthropic Messages API.
    def anthropic(self, body):
        say = functools.partial(self.server.say_in, first_call_anthropic(body))
        plan = Plan(tool_names(body.get("tools")), count_results_anthropic(body), say)
        model = body.get("model") or "mock"
        if plan.tool:
            block = {"type": "tool_use", "id": next_id("toolu"), "name": plan.tool, "input": plan.args}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": plan.text}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        msg = {
            "id": next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            self.send_json(msg)
            return
        self.start_stream()
        start = dict(msg, content=[], stop_reason=None, usage={"input_tokens": 10, "output_tokens": 1})
        out = [sse("message_start", {"type": "message_start", "message": start})]
        if plan.tool:
            first = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(plan.args)}
        else:
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": plan.text}
        out.append(sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": first}))
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        out.append(sse("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }))
        out.append(sse("message_stop", {"type": "message_stop"}))
        self.wfile.write(b"".join(out))
        self.wfile.flush()

    # OpenAI Responses API.
    def openai_responses(self, body):
        say = functools.partial(self.server.say_in, first_call_responses(body))
        plan = Plan(tool_names(body.get("tools")), count_results_responses(body), say)
        rid = next_id("resp")
        if plan.tool:
            item = {
                "type": "function_call",
                "id": next_id("fc"),
                "call_id": next_id("call"),
                "name": plan.tool,
                "arguments": json.dumps(plan.args),
                "status": "completed",
            }
            namespace = aw_namespace(body.get("tools"))
            if namespace:
                item["namespace"] = namespace
        else:
            item = {
                "type": "message",
                "id": next_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": plan.text, "annotations": []}],
            }
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        response = {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": body.get("model") or "mock",
            "output": [item],
            "usage": usage,
        }
        if body.get("stream") is False:
            self.send_json(response)
            return
        self.start_stream()
        created = dict(response, status="in_progress", output=[], usage=None)
        out = [sse("response.created", {"type": "response.created", "response": created})]
        added = dict(item, status="in_progress")
        if not plan.tool:
            added["content"] = []
        out.append(sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": added}))
        if plan.tool:
            out.append(sse("response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done",
                "output_index": 0,
                "item_id": item["id"],
                "arguments": item["arguments"],
            }))
        else:
            out.append(sse("response.output_text.delta", {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 0,
                "item_id": item["id"],
                "delta": plan.text,
            }))
        out.append(sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}))
        out.append(sse("response.completed", {"type": "response.completed", "response": response}))
        self.wfile.write(b"".join(out))
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, log_path, says):
        super().__init__(address, Handler)
        self.log_path = log_path
        self.says = says
        self.conversations = {}

    def say_in(self, conversation):
        """The message of a conversation, known by its first tool call's id."""
        with LOCK:
            n = self.conversations.setdefault(conversation, len(self.conversations))
        return self.says[min(n, len(self.says) - 1)]


def main():
    p = argparse.ArgumentParser(description="Scripted model server for interop checks.")
    p.add_argument("--log", required=True, help="append every request here, one JSON line each")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    p.add_argument("--port-file", help="write the port here once listening")
    p.add_argument("--say", action="append",
                   help="the channel_send message (default: done: inbox checked); again: "
                   "that of the next conversation, the last one repeating")
    a = p.parse_args()
    srv = Server(("127.0.0.1", a.port), a.log, a.say or ["done: inbox checked"])
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, a.port_file)
    print("mock model listening on 127.0.0.1:%d" % port, file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
