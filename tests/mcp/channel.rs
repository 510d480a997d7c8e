//! `aw-mcp --channel`: mentions pushed into a live session as `notifications/claude/channel`,
//! seen on the wire by a raw JSON-RPC stdio client; and the inbox hook for sessions without
//! channels.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_common::{GUARD, Raw, Team};

const METHOD: &str = "notifications/claude/channel";

/// A team with `amy` and `bob` registered.
fn team() -> Team {
    let t = Team::new();
    t.register("amy");
    t.register("bob");
    t
}

/// The next push on the wire (answers read on the way are kept in `seen`).
fn next_push(raw: &mut Raw) -> Value {
    loop {
        let v = raw.next(GUARD);
        if v["method"] == METHOD {
            return v;
        }
    }
}

/// Every push that arrives before the answer to a ping sent now.
fn pushes_before_ping(raw: &mut Raw, id: u64) -> Vec<Value> {
    raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
    let mut pushes = Vec::new();
    loop {
        let v = raw.next(GUARD);
        if v.get("id") == Some(&json!(id)) {
            return pushes;
        }
        if v["method"] == METHOD {
            pushes.push(v);
        }
    }
}

/// Every push that arrives within two rate-limit gaps.
fn pushes_for_a_while(raw: &mut Raw, id: u64) -> Vec<Value> {
    std::thread::sleep(Duration::from_millis(2500));
    pushes_before_ping(raw, id)
}

/// Bob's ack cursor (null when he never acked).
fn cursor(t: &Team) -> Value {
    t.state("cursors.json")["bob"].clone()
}

fn send_as(t: &Team, from: &str, text: &str) -> u64 {
    t.send(&["--from", from, text])
}

#[test]
fn the_capability_and_the_older_revision_come_only_with_channel() {
    let t = team();
    let mut plain = Raw::start(&t, "bob");
    let r = plain.initialize_only("2025-11-25");
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    assert!(
        r["result"]["capabilities"]
            .get("experimental")
            .is_none_or(|e| e.get("claude/channel").is_none()),
        "{r}"
    );
    for (asked, answered) in [
        ("2026-07-28", "2025-11-25"),
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
    ] {
        let mut raw = Raw::start_with(&t, "bob", &["--channel"]);
        let r = raw.initialize_only(asked);
        assert_eq!(r["result"]["protocolVersion"], answered, "{asked}: {r}");
        assert_eq!(
            r["result"]["capabilities"]["experimental"],
            json!({"claude/channel": {}}),
            "{r}"
        );
        assert!(r["result"]["capabilities"]["tools"].is_object(), "{r}");
    }
    // The environment turns the mode on too.
    let mut env = Raw::start_env(&t, "bob", &[], &[("AW_CHANNEL", "mentions")]);
    let r = env.initialize_only("2025-11-25");
    assert_eq!(
        r["result"]["capabilities"]["experimental"],
        json!({"claude/channel": {}}),
        "{r}"
    );
}

#[test]
fn a_mention_is_pushed_once_with_the_exact_shape_and_others_are_not() {
    let t = team();
    let mut raw = Raw::start_with(&t, "bob", &["--channel"]);
    raw.initialize();
    let id = send_as(&t, "amy", "@bob the build is green");
    let p = next_push(&mut raw);
    assert_eq!(
        p,
        json!({
            "jsonrpc": "2.0",
            "method": METHOD,
            "params": {
                "content": "@bob the build is green",
                "meta": {"from": "amy", "id": id.to_string(), "instance": "default"}
            }
        })
    );
    // Bob's own message, and one that does not mention him: no push.
    send_as(&t, "bob", "@amy thanks, I saw it");
    send_as(&t, "amy", "a note for nobody");
    let urgent = send_as(&t, "amy", "@bob urgent: the disk is full");
    let p = next_push(&mut raw);
    assert_eq!(p["params"]["meta"]["id"], urgent.to_string(), "{p}");
    assert_eq!(p["params"]["meta"]["priority"], "high", "{p}");
    assert_eq!(p["params"]["content"], "@bob urgent: the disk is full");
    for k in p["params"]["meta"].as_object().unwrap().keys() {
        assert!(
            k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "meta key {k:?} is not an identifier"
        );
    }
    // Never twice.
    assert_eq!(pushes_for_a_while(&mut raw, 50), Vec::<Value>::new());
    // A push is not an acknowledgement.
    assert_eq!(cursor(&t), Value::Null);
    let unread = t.run("aw-peek", &["--inbox", "bob", "--json"]);
    let n = String::from_utf8_lossy(&unread.stdout).lines().count();
    assert_eq!(n, 2, "{}", String::from_utf8_lossy(&unread.stdout));
}

#[test]
fn channel_all_pushes_every_entry_but_the_agents_own() {
    let t = team();
    let mut raw = Raw::start_with(&t, "bob", &["--channel-all"]);
    raw.initialize();
    send_as(&t, "bob", "my own note");
    let id = send_as(&t, "amy", "a note for nobody");
    let p = next_push(&mut raw);
    assert_eq!(p["params"]["content"], "a note for nobody", "{p}");
    assert_eq!(p["params"]["meta"]["id"], id.to_string(), "{p}");
    assert_eq!(pushes_for_a_while(&mut raw, 50), Vec::<Value>::new());
}

#[test]
fn nothing_is_pushed_before_the_client_is_initialized() {
    let t = team();
    let mut raw = Raw::start_with(&t, "bob", &["--channel"]);
    raw.initialize_only("2025-11-25");
    let id = send_as(&t, "amy", "@bob early");
    assert_eq!(pushes_for_a_while(&mut raw, 7), Vec::<Value>::new());
    raw.initialized();
    let p = next_push(&mut raw);
    assert_eq!(p["params"]["meta"]["id"], id.to_string(), "{p}");
}

#[test]
fn a_burst_of_fifty_mentions_is_folded_into_few_pushes_naming_every_id() {
    let t = team();
    let mut raw = Raw::start_with(&t, "bob", &["--channel"]);
    raw.initialize();
    let lines: String = (0..50).map(|i| format!("@bob burst {i}\n")).collect();
    let out = t.run_stdin("aw-send", &["--from", "amy", "--lines"], Some(&lines));
    assert!(out.status.success());
    let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 50);
    let mut pushes = Vec::new();
    let mut covered = Vec::new();
    while covered.len() < 50 {
        let p = next_push(&mut raw);
        let meta = &p["params"]["meta"];
        let last: u64 = meta["id"].as_str().unwrap().parse().unwrap();
        let first: u64 = meta
            .get("first")
            .map_or(last, |f| f.as_str().unwrap().parse().unwrap());
        let content = p["params"]["content"].as_str().unwrap();
        for id in first..=last {
            assert!(content.contains(&format!("#{id} ")), "{id} in {content}");
            covered.push(id);
        }
        if first < last {
            assert_eq!(meta["count"], (last - first + 1).to_string(), "{p}");
            assert!(content.starts_with(&format!("{} new messages:", last - first + 1)));
        }
        pushes.push(p);
    }
    assert_eq!(covered, ids, "every id once, in order");
    assert!(pushes.len() <= 5, "{} pushes for one burst", pushes.len());
    assert_eq!(pushes_for_a_while(&mut raw, 50), Vec::<Value>::new());
}

#[test]
fn a_long_message_is_cut_with_how_to_fetch_it() {
    let t = team();
    let mut raw = Raw::start_with(&t, "bob", &["--channel"]);
    raw.initialize();
    let text = format!("@bob {}", "long words ".repeat(1000));
    let id = send_as(&t, "amy", &text);
    let p = next_push(&mut raw);
    let content = p["params"]["content"].as_str().unwrap();
    assert!(content.len() <= 2000, "{} bytes", content.len());
    assert!(text.starts_with(content.lines().next().unwrap()));
    assert!(content.contains(&format!("message #{id} cut")), "{content}");
    assert!(content.contains("my_inbox"), "{content}");
    assert_eq!(p["params"]["meta"]["id"], id.to_string());
}

#[test]
fn unread_mentions_from_before_the_session_are_announced_once() {
    let t = team();
    let a = send_as(&t, "amy", "@bob one");
    send_as(&t, "amy", "@bob two");
    let c = send_as(&t, "amy", "@bob three");
    let mut raw = Raw::start_with(&t, "bob", &["--channel"]);
    raw.initialize();
    let p = next_push(&mut raw);
    let content = p["params"]["content"].as_str().unwrap();
    assert!(
        content.starts_with("3 unread messages for you from before this session"),
        "{content}"
    );
    assert!(content.contains(&format!("#{a} to #{c}")), "{content}");
    assert!(content.contains("amy (3)"), "{content}");
    assert_eq!(
        p["params"]["meta"],
        json!({"from": "amy", "id": c.to_string(), "first": a.to_string(),
               "count": "3", "instance": "default"})
    );
    assert_eq!(pushes_for_a_while(&mut raw, 50), Vec::<Value>::new());
    assert_eq!(cursor(&t), Value::Null);
}

#[test]
fn mcp_config_channel_starts_the_server_in_channel_mode_and_names_the_launch_line() {
    let t = team();
    let out = t.run("aw-ctl", &["mcp-config", "bob@default", "--channel"]);
    assert!(out.status.success(), "{out:?}");
    let cfg: Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let aw = &cfg["mcpServers"]["aw"];
    assert_eq!(aw["args"], json!(["--agent", "bob@default", "--channel"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("claude --dangerously-load-development-channels server:aw"),
        "{err}"
    );
    // The configuration works: the server it names declares the capability.
    let mut child = std::process::Command::new(aw["command"].as_str().unwrap())
        .args(
            aw["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap()),
        )
        .env("AW_ROOT", aw["env"]["AW_ROOT"].as_str().unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2026-07-28", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}});
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{init}").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let r: Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap())
        .expect("an answer");
    assert_eq!(
        r["result"]["capabilities"]["experimental"],
        json!({"claude/channel": {}})
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    // Codex has no channels.
    let out = t.run(
        "aw-ctl",
        &["mcp-config", "bob@default", "--codex", "--channel"],
    );
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("aw-ctl: "), "{err}");
    assert!(err.contains("Codex"), "{err}");
}

/// `aw-ctl inbox-hook bob` given `input`: exit code, stdout, stderr.
fn hook(t: &Team, input: &Value) -> (Option<i32>, String, String) {
    let out = t.run_stdin("aw-ctl", &["inbox-hook", "bob"], Some(&input.to_string()));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn stop(active: bool) -> Value {
    json!({"session_id": "s1", "transcript_path": "/dev/null", "cwd": "/",
           "hook_event_name": "Stop", "stop_hook_active": active})
}

#[test]
fn the_inbox_hook_blocks_a_stop_while_mentions_are_unread_and_never_loops() {
    let t = team();
    let quiet = (Some(0), String::new(), String::new());
    assert_eq!(hook(&t, &stop(false)), quiet);
    let a = send_as(&t, "amy", "@bob please review");
    let b = send_as(&t, "user", "@bob and merge");
    let (code, out, err) = hook(&t, &stop(false));
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let v: Value = serde_json::from_str(&out).expect("JSON on stdout");
    assert_eq!(v["decision"], "block", "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "You have 2 unread messages on the aw channel (#{a} to #{b}, from amy, user)."
        )),
        "{reason}"
    );
    assert!(reason.contains("my_inbox"), "{reason}");
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
    // A stop already continued by a stop hook goes through.
    assert_eq!(hook(&t, &stop(true)), quiet);
    // After a tool: a reminder, except after the inbox tools themselves.
    let post = |tool: &str| {
        json!({"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": tool,
               "tool_input": {}, "tool_response": {}})
    };
    let (_, out, _) = hook(&t, &post("Bash"));
    assert!(out.contains("\"decision\":\"block\""), "{out}");
    assert_eq!(hook(&t, &post("mcp__aw__my_inbox")), quiet);
    // Once acknowledged, nothing to say; the hook itself never acknowledges.
    assert_eq!(cursor(&t), Value::Null);
    t.ctl_ok(&["ack", "bob"]);
    assert_eq!(hook(&t, &stop(false)), quiet);
}

#[test]
fn the_inbox_hook_refuses_input_that_is_not_a_hooks_json() {
    let t = team();
    send_as(&t, "amy", "@bob hi");
    for (input, why) in [
        ("{\"hook_event_name\": ", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (
            "{\"hook_event_name\": \"PreToolUse\"}",
            "hook event 'PreToolUse'",
        ),
    ] {
        let out = t.run_stdin("aw-ctl", &["inbox-hook", "bob"], Some(input));
        assert_eq!(out.status.code(), Some(65), "{input}");
        assert!(out.stdout.is_empty(), "{input}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("aw-ctl: ") && err.contains(why),
            "{input}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let out = t.run_stdin("aw-ctl", &["inbox-hook", "nobody"], Some("{}"));
    assert_eq!(out.status.code(), Some(66));
}

#[test]
fn a_bad_channel_mode_is_a_usage_error() {
    let t = team();
    for (options, env, why) in [
        (
            &["--channel", "--channel-all"][..],
            None,
            "do not go together",
        ),
        (&[][..], Some("sometimes"), "AW_CHANNEL: 'sometimes'"),
    ] {
        let mut c = crate::mcp_common::command("aw-mcp");
        c.args(["--agent", "bob@default", "--root"])
            .arg(&t.root)
            .args(options);
        if let Some(v) = env {
            c.env("AW_CHANNEL", v);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{options:?} {env:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("aw-mcp: ") && err.contains(why), "{err}");
        assert!(out.stdout.is_empty());
    }
}
