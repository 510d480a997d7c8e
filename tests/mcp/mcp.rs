//! Integration tests of `aw-mcp` through a real MCP client (rmcp) talking to the built binary,
//! with `aw-send`, `aw-peek` and `aw-ctl` working on the same instance directory.
//!
//! Nothing here judges speed: waits and timeouts only keep a broken server from hanging the
//! suite.

use crate::mcp_common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use mcp_common::{Agent, Team, exists, json_lines};
use serde_json::{Value, json};

/// The tool names of the reference, in its order.
const TOOLS: [&str; 28] = [
    "channel_send",
    "channel_read",
    "my_inbox",
    "my_inbox_ack",
    "my_status_set",
    "team_members",
    "team_doc_read",
    "team_doc_write",
    "team_doc_append",
    "team_doc_list",
    "team_doc_create",
    "document_suggest",
    "team_proposal_create",
    "team_vote",
    "team_proposal_status",
    "team_proposal_cancel",
    "resource_create",
    "resource_read",
    "board_add",
    "board_claim",
    "board_done",
    "board_list",
    "lease_take",
    "lease_release",
    "lease_list",
    "approve",
    "reject",
    "merge_request",
];

fn ids(entries: &[Value]) -> Vec<u64> {
    entries.iter().map(|e| e["id"].as_u64().unwrap()).collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

// ---------------------------------------------------------------------------------------------
// The tool list

#[tokio::test]
async fn tools_list_has_the_28_tools_in_one_page() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let page = alice.client.list_tools(None).await.expect("tools/list");
    assert!(page.next_cursor.is_none(), "one page, no cursor");
    let names: Vec<&str> = page.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names.len(), 28, "{names:?}");
    let got: BTreeSet<&str> = names.iter().copied().collect();
    let want: BTreeSet<&str> = TOOLS.iter().copied().collect();
    assert_eq!(got, want);

    for t in &page.tools {
        let s = &*t.input_schema;
        assert_eq!(s.get("type"), Some(&json!("object")), "{}", t.name);
        assert_eq!(
            s.get("additionalProperties"),
            Some(&json!(false)),
            "{}: extra arguments are not part of the schema",
            t.name
        );
        assert!(
            t.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{} has a description",
            t.name
        );
        let props = s
            .get("properties")
            .and_then(Value::as_object)
            .expect("properties");
        for who in ["from", "agent", "sender", "voter", "creator", "as"] {
            assert!(
                !props.contains_key(who),
                "{}: no argument may name the speaker ({who})",
                t.name
            );
        }
    }
    let required = |name: &str| -> Vec<String> {
        let t = page.tools.iter().find(|t| t.name == name).unwrap();
        t.input_schema.get("required").map(strs).unwrap_or_default()
    };
    assert_eq!(required("channel_send"), ["message"]);
    assert_eq!(required("my_inbox_ack"), ["until"]);
    assert_eq!(required("team_doc_create"), ["file", "content"]);
    assert_eq!(required("team_vote"), ["proposal", "choice"]);
    assert_eq!(required("resource_read"), ["id"]);
    assert_eq!(required("board_add"), ["title"]);
    assert_eq!(required("board_done"), ["id"]);
    assert_eq!(required("lease_take"), ["paths"]);
    assert!(required("board_claim").is_empty());
    assert!(required("lease_release").is_empty());
    assert!(required("channel_read").is_empty());
    assert!(required("my_inbox").is_empty());

    let all = alice.client.list_all_tools().await.expect("list_all_tools");
    assert_eq!(all.len(), 28);
    alice.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Errors

#[tokio::test]
async fn failures_are_one_line_tool_errors_and_the_server_goes_on() {
    let team = Team::new();
    let alice = team.join("alice").await;
    alice
        .fail_with("no_such_tool", json!({}), &["unknown tool", "channel_send"])
        .await;
    alice
        .fail_with("channel_send", json!({}), &["message"])
        .await;
    alice
        .fail_with(
            "channel_send",
            json!({"message": 42}),
            &["message", "string"],
        )
        .await;
    alice
        .fail_with("channel_send", json!({"message": ""}), &["empty"])
        .await;
    alice
        .fail_with("channel_send", json!({"message": "  \n "}), &["empty"])
        .await;
    alice
        .fail_with("channel_send", json!({"message": "a\u{0}b"}), &["NUL"])
        .await;
    let huge = "x".repeat((4 << 20) + 1);
    alice
        .fail_with("channel_send", json!({ "message": huge }), &["limit"])
        .await;
    alice
        .fail_with("channel_read", json!({"limit": "many"}), &["limit"])
        .await;
    alice
        .fail_with(
            "team_members",
            json!({"includeStatus": 3}),
            &["includeStatus"],
        )
        .await;
    alice
        .fail_with("team_vote", json!({"proposal": "p"}), &["choice"])
        .await;
    alice
        .fail_with("resource_create", json!({}), &["content"])
        .await;
    // An argument the schema does not name is refused, with the near one: the message is
    // not sent without its wait.
    alice
        .fail_with(
            "channel_send",
            json!({"message": "@bob hi", "wiat_for": "bob"}),
            &[
                "channel_send: unknown argument 'wiat_for' (did you mean 'wait_for'?)",
                "nothing was done",
            ],
        )
        .await;
    alice
        .fail_with(
            "team_doc_list",
            json!({"pattern": "*.md"}),
            &["unknown argument 'pattern'", "(arguments: none)"],
        )
        .await;
    // Still answering, and nothing was written by the failed calls.
    let id = alice.say("still here").await;
    assert_eq!(id, 1);
    assert_eq!(team.channel().len(), 1);
    alice.quit().await;
}

#[tokio::test]
async fn an_error_tells_an_agent_what_it_can_do_never_a_command_line_option() {
    let team = Team::new();
    let alice = team.join("alice").await;
    alice.say("hello").await;
    // The root goes away under the running server: the command line would say to choose
    // another with --root; the agent, which cannot, is told whom to ask.
    std::fs::remove_dir_all(&team.root).unwrap();
    for (tool, args) in [
        ("team_doc_read", json!({})),
        ("my_inbox_ack", json!({"until": 1})),
    ] {
        let text = alice
            .fail_with(tool, args, &["no such instance", "ask whoever started it"])
            .await;
        assert!(!text.contains("--"), "{tool}: {text}");
        assert!(!text.contains("AW_ROOT"), "{tool}: {text}");
    }
    alice.quit().await;

    // Waiting for an agent nothing serves: the agent is told what it can do instead.
    let team = Team::new();
    let alice = team.join("alice").await;
    team.register("carol");
    let text = alice
        .fail_with(
            "channel_send",
            json!({"message": "hi", "wait_for": "carol"}),
            &["no aw-run serves carol@", "send without wait_for"],
        )
        .await;
    assert!(!text.contains("--"), "{text}");
    alice.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Identity

#[tokio::test]
async fn identity_is_fixed_when_the_server_starts() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;

    let posted = alice
        .ok("channel_send", json!({"message": "hi @bob"}))
        .await;
    assert_eq!(posted.data["from"], "alice", "bare name, no @instance");
    assert_eq!(strs(&posted.data["mentions"]), ["bob"]);

    // bob tries to speak as alice through extra arguments: ignored or refused, never obeyed.
    for extra in ["from", "agent", "sender", "as"] {
        let r = bob
            .call(
                "channel_send",
                json!({"message": format!("spoof via {extra}"), extra: "alice"}),
            )
            .await;
        if r.is_error != Some(true) {
            let e = r.structured_content.expect("entry");
            assert_eq!(e["from"], "bob", "{extra} must not change the sender");
        }
    }
    for e in team.channel() {
        if e["message"].as_str().unwrap().starts_with("spoof") {
            assert_eq!(e["from"], "bob", "{e}");
        }
    }

    // bob cannot acknowledge alice's inbox.
    let to_alice = bob.say("@alice please look").await;
    let r = bob
        .call(
            "my_inbox_ack",
            json!({"until": to_alice, "agent": "alice", "from": "alice"}),
        )
        .await;
    if r.is_error != Some(true) {
        assert_eq!(r.structured_content.unwrap()["cursor"], to_alice);
    }
    let inbox = alice.ok("my_inbox", json!({})).await;
    assert_eq!(inbox.data["count"], 1, "alice's mention is still unread");
    assert_eq!(team.state("cursors.json")["alice"], Value::Null);

    // Status, votes and proposals are bob's whatever he claims.
    let r = bob
        .call(
            "my_status_set",
            json!({"state": "running", "task": "spoofing", "agent": "alice"}),
        )
        .await;
    if r.is_error != Some(true) {
        let status = team.state("status.json");
        assert_eq!(status["bob"]["task"], "spoofing");
        assert_eq!(status["alice"], Value::Null);
    }
    let r = bob
        .call(
            "team_proposal_create",
            json!({"type": "approval", "title": "Ship it", "creator": "alice", "id": "ship"}),
        )
        .await;
    if r.is_error != Some(true) {
        assert_eq!(r.structured_content.unwrap()["creator"], "bob");
        let r = bob
            .call(
                "team_vote",
                json!({"proposal": "ship", "choice": "yes", "voter": "alice"}),
            )
            .await;
        if r.is_error != Some(true) {
            let p = r.structured_content.unwrap();
            assert_eq!(p["votes"].as_array().unwrap().len(), 1);
            assert_eq!(p["votes"][0]["voter"], "bob");
        }
        // alice cannot cancel bob's proposal, and her vote is still her own to cast.
        alice
            .fail_with(
                "team_proposal_cancel",
                json!({"proposal": "ship"}),
                &["@bob"],
            )
            .await;
        let p = alice
            .ok("team_vote", json!({"proposal": "ship", "choice": "no"}))
            .await
            .data;
        assert_eq!(p["votes"][1]["voter"], "alice");
        assert_eq!(p["votes"][1]["choice"], "no");
    }
    let from: BTreeSet<String> = team
        .channel()
        .iter()
        .map(|e| e["from"].as_str().unwrap().to_string())
        .collect();
    assert!(
        from.iter()
            .all(|f| ["alice", "bob", "system"].contains(&f.as_str())),
        "{from:?}"
    );
    alice.quit().await;
    bob.quit().await;
}

#[tokio::test]
async fn an_unregistered_agent_is_registered_as_external_on_start() {
    let team = Team::new();
    team.register("alice");
    let carol = team.join("carol").await;
    let agents = team.state("agents.json")["agents"].clone();
    let carol_entry = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "carol")
        .expect("carol registered");
    assert_eq!(carol_entry["backend"], "external");

    let ls = json_lines(team.ctl_ok(&["ls", "--json"]).as_bytes());
    let names: Vec<String> = ls[0]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["alice", "carol"]);

    let members = carol.ok("team_members", json!({})).await;
    assert_eq!(members.data["you"], "carol");
    assert!(members.text.contains("@carol (you)"), "{}", members.text);

    // An agent that is registered keeps its registration (alice's backend stays).
    let alice = team.join("alice").await;
    assert_eq!(
        team.state("agents.json")["agents"][0]["backend"],
        "external"
    );
    assert_eq!(
        team.state("agents.json")["agents"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    alice.quit().await;
    carol.quit().await;
}

#[test]
fn bad_identities_are_refused_at_start() {
    let team = Team::new();
    for (args, code) in [
        (vec!["--agent", "system"], 65),
        (vec!["--agent", "user@default"], 65),
        (vec!["--agent", "9lives"], 65),
        (vec!["--agent", "a/b"], 65),
        (vec![], 64),
        (vec!["--agent", "alice@one", "-i", "two"], 64),
    ] {
        let out = team.run("aw-mcp", &args);
        assert_eq!(out.status.code(), Some(code), "aw-mcp {args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "no JSON-RPC on a usage error");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("aw-mcp: "), "{err}");
    }
    assert!(!exists(
        &team.root.join("default").join("_state").join("agents.json")
    ));

    // AW_AGENT names the agent when --agent is not given.
    let out = mcp_common::command("aw-mcp")
        .env("AW_AGENT", "dora@team")
        .arg("--root")
        .arg(&team.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(
            &std::fs::read(team.root.join("team/_state/agents.json")).unwrap()
        )
        .unwrap()["agents"][0]["name"],
        "dora"
    );
}

// ---------------------------------------------------------------------------------------------
// Inbox

#[tokio::test]
async fn inbox_shows_mentions_and_ack_moves_forward_only() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;

    let m1 = alice.say("@bob one").await;
    let m2 = alice.say("@bob this is urgent").await;
    let _ = alice.say("nobody is mentioned").await;
    let m4 = alice.say("@alice @bob three").await;
    let _ = bob.say("@bob talking to myself").await;

    let inbox = bob.ok("my_inbox", json!({})).await;
    assert_eq!(inbox.data["count"], 3);
    let msgs = inbox.data["messages"].as_array().unwrap();
    let got: Vec<u64> = msgs
        .iter()
        .map(|m| m["entry"]["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [m1, m2, m4]);
    let prio: Vec<&str> = msgs
        .iter()
        .map(|m| m["priority"].as_str().unwrap())
        .collect();
    assert_eq!(prio, ["normal", "high", "high"]);
    assert_eq!(msgs[0]["entry"]["from"], "alice");
    assert_eq!(msgs[0]["entry"]["message"], "@bob one");
    assert!(inbox.text.contains("[HIGH]"), "{}", inbox.text);
    assert!(
        inbox.text.contains(&format!("\"until\": {m4}")),
        "{}",
        inbox.text
    );

    // The same as aw-peek shows, and reading acknowledged nothing.
    let peek = team.run("aw-peek", &["--inbox", "bob", "--json"]);
    assert!(peek.status.success());
    let peeked = json_lines(&peek.stdout);
    assert_eq!(
        peeked
            .iter()
            .map(|m| m["entry"].clone())
            .collect::<Vec<_>>(),
        msgs.iter().map(|m| m["entry"].clone()).collect::<Vec<_>>()
    );
    assert_eq!(bob.ok("my_inbox", json!({})).await.data["count"], 3);

    // until as a string of digits
    let r = bob
        .ok("my_inbox_ack", json!({"until": m2.to_string()}))
        .await;
    assert_eq!(r.data["cursor"], m2);
    assert_eq!(r.data["unread"], 1);
    let inbox = bob.ok("my_inbox", json!({})).await;
    assert_eq!(inbox.data["count"], 1);
    assert_eq!(inbox.data["messages"][0]["entry"]["id"], m4);

    // backwards: nothing moves
    let r = bob.ok("my_inbox_ack", json!({"until": m1})).await;
    assert_eq!(r.data["cursor"], m2);
    assert_eq!(bob.ok("my_inbox", json!({})).await.data["count"], 1);

    // as an integer
    let r = bob.ok("my_inbox_ack", json!({ "until": m4 })).await;
    assert_eq!(r.data["cursor"], m4);
    let empty = bob.ok("my_inbox", json!({})).await;
    assert_eq!(empty.data["count"], 0);
    assert!(empty.data["messages"].as_array().unwrap().is_empty());

    // past the newest entry: the cursor stops at the newest, so a later mention is unread
    let newest = team.channel().len() as u64;
    let r = bob.ok("my_inbox_ack", json!({"until": 1_000_000})).await;
    assert_eq!(r.data["cursor"], newest);
    let later = alice.say("@bob later").await;
    let inbox = bob.ok("my_inbox", json!({})).await;
    assert_eq!(inbox.data["messages"][0]["entry"]["id"], later);
    assert_eq!(team.state("cursors.json")["bob"], newest);
    assert_eq!(team.state("cursors.json")["alice"], Value::Null);

    for bad in [
        json!({}),
        json!({"until": "abc"}),
        json!({"until": -1}),
        json!({"until": 1.5}),
        json!({"until": ""}),
        json!({"until": true}),
    ] {
        bob.fail_with("my_inbox_ack", bad, &["until"]).await;
    }
    alice.quit().await;
    bob.quit().await;
}

/// With 10,000 unread messages, `my_inbox` answers the oldest 50 (`MAX_INBOX_MESSAGES`) in
/// full and names the count and id range of the others; acknowledging what it showed moves
/// to the next 50, and never acknowledges what was only counted. A long message makes the
/// 64 KiB bound (`MAX_INBOX_BYTES`) cut the page short, except for the first, always whole.
#[tokio::test]
async fn my_inbox_is_bounded_and_pages_through_10000_unread_messages() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;
    let lines: String = (0..10_000).map(|i| format!("@bob number {i}\n")).collect();
    let out = team.run_stdin("aw-send", &["--from", "carol", "--lines"], Some(&lines));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().expect("an id a line"))
        .collect();
    assert_eq!(ids.len(), 10_000);

    let page = bob.ok("my_inbox", json!({})).await;
    let shown: Vec<u64> = page.data["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["entry"]["id"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, ids[..50]);
    assert_eq!(page.data["count"], 50);
    assert_eq!(page.data["unread"], 10_000);
    assert_eq!(
        page.data["more"],
        json!({"count": 9950, "first": ids[50], "last": ids[9999]})
    );
    assert!(page.text.len() < 16 << 10, "{} bytes", page.text.len());
    assert!(
        page.text.contains("the oldest 50 of 10000 unread messages"),
        "{}",
        page.text
    );
    assert!(
        page.text.contains(&format!(
            "9950 newer unread messages for you, ids {} to {}",
            ids[50], ids[9999]
        )),
        "{}",
        page.text
    );
    assert!(page.text.contains("channel_read"), "{}", page.text);
    assert!(
        page.text
            .contains(&format!("my_inbox_ack {{\"until\": {}}}", ids[49])),
        "{}",
        page.text
    );

    // Acknowledging what was shown: the next 50, and nothing counted was acknowledged.
    let r = bob.ok("my_inbox_ack", json!({"until": ids[49]})).await;
    assert_eq!(r.data["unread"], 9950);
    let page = bob.ok("my_inbox", json!({})).await;
    let first = page.data["messages"][0]["entry"]["id"].as_u64().unwrap();
    assert_eq!(first, ids[50]);
    assert_eq!(page.data["count"], 50);
    assert_eq!(page.data["unread"], 9950);
    assert_eq!(page.data["more"]["first"], ids[100]);

    // Bytes bound the page too: a 40 KB message, then the others fit in what is left.
    let _ = bob.ok("my_inbox_ack", json!({"until": ids[9999]})).await;
    let big = alice.say(&format!("@bob {}", "x".repeat(40_000))).await;
    let next = alice.say(&format!("@bob {}", "y".repeat(30_000))).await;
    let page = bob.ok("my_inbox", json!({})).await;
    assert_eq!(page.data["count"], 1);
    assert_eq!(page.data["messages"][0]["entry"]["id"], big);
    assert_eq!(
        page.data["more"],
        json!({"count": 1, "first": next, "last": next})
    );
    assert!(
        page.text
            .contains(&format!("1 newer unread message for you, id {next}"))
    );
    // The whole inbox fits: no note.
    let _ = bob.ok("my_inbox_ack", json!({"until": big})).await;
    let page = bob.ok("my_inbox", json!({})).await;
    assert_eq!(page.data["count"], 1);
    assert!(page.data.get("more").is_none(), "{}", page.data);
    assert!(!page.text.contains("newer unread"), "{}", page.text);
}

#[tokio::test]
async fn inbox_wait_wakes_on_a_message_from_another_process() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;

    // Nothing comes: the wait ends empty.
    let r = bob.ok("my_inbox", json!({"wait_seconds": 1})).await;
    assert_eq!(r.data["count"], 0);

    // aw-send from another process, a little after the wait started.
    let root = team.root.clone();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        let out = mcp_common::command("aw-send")
            .arg("--root")
            .arg(&root)
            .arg("not for bob")
            .output()
            .unwrap();
        assert!(out.status.success());
        std::thread::sleep(Duration::from_millis(200));
        let out = mcp_common::command("aw-send")
            .arg("--root")
            .arg(&root)
            .args(["--from", "carol", "@bob wake up"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    });
    let r = bob.ok("my_inbox", json!({"wait_seconds": 30})).await;
    sender.join().unwrap();
    assert_eq!(r.data["count"], 1, "{}", r.text);
    let e = &r.data["messages"][0]["entry"];
    assert_eq!(e["message"], "@bob wake up");
    assert_eq!(e["from"], "carol");

    // A mention that is already there answers at once, wait or not.
    let r = alice.ok("my_inbox", json!({"wait_seconds": "0"})).await;
    assert_eq!(r.data["count"], 0);
    bob.fail_with(
        "my_inbox",
        json!({"wait_seconds": "soon"}),
        &["wait_seconds"],
    )
    .await;
    alice.quit().await;
    bob.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Channel

/// `channel_send` with `wait_for`: the question reaches an agent served by `aw-run --serve`
/// and its answer comes back in the result; a timeout, an unserved agent and bad arguments.
#[tokio::test]
async fn channel_send_waits_for_the_reply_of_a_served_agent() {
    let team = Team::new();
    let alice = team.join("alice").await;
    team.ctl_ok(&[
        "new",
        "bob",
        "--backend",
        "exec",
        "--",
        "sh",
        "-c",
        "cat >/dev/null; echo pong",
    ]);
    team.ctl_ok(&["new", "slow", "--backend", "exec", "--", "sleep", "30"]);
    team.register("carol");
    let mut server = mcp_common::command("aw-run")
        .arg("--root")
        .arg(&team.root)
        .args([
            "-i",
            mcp_common::INSTANCE,
            "--serve",
            "--keep",
            "-q",
            "bob",
            "slow",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn aw-run");
    let inst = aw::instance::Root::new(&team.root)
        .instance(mcp_common::INSTANCE)
        .unwrap();
    let end = std::time::Instant::now() + mcp_common::GUARD;
    while !["bob", "slow"]
        .iter()
        .all(|a| aw::serve::is_served(&inst, a))
    {
        assert!(std::time::Instant::now() < end, "aw-run serves in time");
        sleep_ms(10).await;
    }

    // bob is mentioned for us, and its answer comes back.
    let r = alice
        .ok(
            "channel_send",
            json!({"message": "please ask", "wait_for": "bob"}),
        )
        .await;
    let asked = r.data["id"].as_u64().unwrap();
    assert_eq!(r.data["message"], "@bob please ask");
    let reply = r.data["reply"].as_array().unwrap();
    assert_eq!(reply.len(), 1, "{}", r.text);
    assert_eq!(reply[0]["from"], "bob");
    assert_eq!(reply[0]["message"].as_str().unwrap().trim_end(), "pong");
    assert!(reply[0]["id"].as_u64().unwrap() > asked);
    assert!(r.text.contains("Reply from @bob:"), "{}", r.text);
    assert!(r.text.contains("pong"), "{}", r.text);

    // A timeout: the message stays sent, the error says so.
    let before = team.channel().len();
    let why = alice
        .fail_with(
            "channel_send",
            json!({"message": "@slow hurry", "wait_for": "slow", "wait_seconds": 1}),
            &["sent as #", "no reply from slow after 1 s"],
        )
        .await;
    assert!(why.contains(&format!("#{}", before as u64 + 1)), "{why}");
    assert_eq!(team.channel().len(), before + 1);

    // Refused before anything is sent.
    let before = team.channel().len();
    for (args, needle) in [
        (
            json!({"message": "hi", "wait_for": "carol"}),
            "no aw-run serves carol@",
        ),
        (json!({"message": "hi", "wait_for": "alice"}), "yourself"),
        (
            json!({"message": "hi", "wait_seconds": 5}),
            "'wait_seconds' goes with 'wait_for'",
        ),
        (
            json!({"message": "hi", "wait_for": "bob", "wait_seconds": "x"}),
            "wait_seconds",
        ),
        (json!({"message": "hi", "wait_for": "../x"}), "agent"),
    ] {
        alice.fail_with("channel_send", args, &[needle]).await;
    }
    assert_eq!(team.channel().len(), before, "nothing sent");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(server.wait().unwrap().success());
    alice.quit().await;
}

#[tokio::test]
async fn channel_read_since_an_id_or_a_timestamp_with_a_limit() {
    let team = Team::new();
    let alice = team.join("alice").await;
    assert_eq!(
        alice.ok("channel_read", json!({})).await.data["entries"],
        json!([])
    );
    for i in 1..=6 {
        alice.say(&format!("message {i}")).await;
        // distinct timestamps (milliseconds) for the tests with a time below
        sleep_ms(3).await;
    }
    let all = team.channel();
    assert_eq!(all.len(), 6);

    let r = alice.ok("channel_read", json!({})).await;
    assert_eq!(
        r.data["entries"],
        json!(all),
        "structured entries equal aw-peek --json"
    );
    assert!(r.text.contains("message 6"));

    let r = alice.ok("channel_read", json!({"limit": 2})).await;
    assert_eq!(ids(r.data["entries"].as_array().unwrap()), [5, 6]);

    let r = alice.ok("channel_read", json!({"since": 2})).await;
    assert_eq!(ids(r.data["entries"].as_array().unwrap()), [3, 4, 5, 6]);

    let r = alice
        .ok("channel_read", json!({"since": "2", "limit": 2}))
        .await;
    assert_eq!(ids(r.data["entries"].as_array().unwrap()), [3, 4]);

    let r = alice.ok("channel_read", json!({"since": 6})).await;
    assert_eq!(r.data["entries"], json!([]));
    let r = alice.ok("channel_read", json!({"since": 600})).await;
    assert_eq!(r.data["entries"], json!([]));

    // A timestamp: the entries strictly after it.
    let t3 = all[2]["timestamp"].as_str().unwrap();
    let r = alice.ok("channel_read", json!({ "since": t3 })).await;
    let got = ids(r.data["entries"].as_array().unwrap());
    let later: Vec<u64> = all
        .iter()
        .filter(|e| e["timestamp"].as_str().unwrap() > t3)
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, later);
    assert!(!got.is_empty() && got.iter().all(|&i| i > 3), "{got:?}");
    let r = alice
        .ok(
            "channel_read",
            json!({"since": "2000-01-01T00:00:00Z", "limit": 3}),
        )
        .await;
    assert_eq!(ids(r.data["entries"].as_array().unwrap()), [1, 2, 3]);
    let r = alice
        .ok("channel_read", json!({"since": "2999-01-01T00:00:00.000Z"}))
        .await;
    assert_eq!(r.data["entries"], json!([]));

    for bad in ["yesterday", "2026-13-45T99:00:00Z", "-3", "3.5"] {
        alice
            .fail_with("channel_read", json!({ "since": bad }), &["since"])
            .await;
    }
    alice.quit().await;
}

#[tokio::test]
async fn messages_from_aw_send_read_the_same_through_mcp() {
    let team = Team::new();
    team.register("alice");
    team.register("bob");
    let texts = [
        "@alice plain",
        "multi\nline @alice\n\n  indented\n",
        "### not a header\n\\ backslash start\n> quote",
        "trailing spaces   \n\ttab",
        "unicode: héllo wörld — ✓ 🌍 日本語 @bob",
        "mail alice@example.com is not a mention",
        "@alice @bob both of you, asap",
    ];
    let mut sent = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        // half as an argument, half on stdin
        let id = if i % 2 == 0 {
            team.send(&["--from", "carol", t])
        } else {
            let out = team.run_stdin("aw-send", &["--from", "carol"], Some(t));
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        sent.push(id);
    }
    let alice = team.join("alice").await;
    let peek = team.channel();
    assert_eq!(peek.len(), texts.len());
    let r = alice.ok("channel_read", json!({})).await;
    assert_eq!(r.data["entries"], json!(peek));
    for (e, t) in peek.iter().zip(texts) {
        assert_eq!(e["message"], t, "byte for byte, as an argument or on stdin");
        assert_eq!(e["from"], "carol");
    }
    assert_eq!(strs(&peek[0]["mentions"]), ["alice"]);
    assert!(
        strs(&peek[5]["mentions"]).is_empty(),
        "an e-mail address is not a mention"
    );
    assert_eq!(strs(&peek[6]["mentions"]), ["alice", "bob"]);

    let inbox = alice.ok("my_inbox", json!({})).await;
    let entries: Vec<Value> = inbox.data["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["entry"].clone())
        .collect();
    let want: Vec<Value> = peek
        .iter()
        .filter(|e| strs(&e["mentions"]).contains(&"alice".to_string()))
        .cloned()
        .collect();
    assert_eq!(entries, want);
    assert_eq!(ids(&entries), [sent[0], sent[1], sent[6]]);
    alice.quit().await;
}

#[tokio::test]
async fn messages_from_mcp_read_the_same_with_aw_peek() {
    let team = Team::new();
    team.register("bob");
    let alice = team.join("alice").await;
    let texts = [
        "hello @bob",
        "multi\nline\n\n  indented",
        "### looks like a header\n\\ and a backslash",
        "trailing spaces   ",
        "unicode: héllo — ✓ 🌍 日本語",
        "ends with a newline\n",
        "@nobody is not registered",
    ];
    let mut replies = Vec::new();
    for t in texts {
        replies.push(alice.ok("channel_send", json!({ "message": t })).await);
    }
    let peek = team.channel();
    assert_eq!(peek.len(), texts.len());
    for ((e, t), r) in peek.iter().zip(texts).zip(&replies) {
        assert_eq!(e["message"], t, "exact round trip");
        assert_eq!(e["from"], "alice");
        // The reply is the stored entry, plus a warning for an unknown @name.
        let mut data = r.data.clone();
        let warning = data.as_object_mut().and_then(|o| o.remove("warning"));
        assert_eq!(e, &data, "the reply is the stored entry");
        assert_eq!(
            warning.is_some(),
            t.contains("@nobody"),
            "a warning only for an unknown @name: {warning:?}"
        );
        assert!(
            r.text.starts_with(&format!("Sent as #{}", e["id"])),
            "{}",
            r.text
        );
    }
    assert_eq!(strs(&peek[0]["mentions"]), ["bob"]);
    assert!(replies[6].text.contains("Warning") && replies[6].text.contains("@nobody"));
    assert!(strs(&peek[6]["mentions"]).is_empty());

    // The text form of aw-peek shows them too.
    let out = team.run("aw-peek", &["-n", "0"]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("@alice: hello @bob"), "{human}");
    assert!(human.contains("日本語"), "{human}");
    alice.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Status and members

#[tokio::test]
async fn status_is_set_by_the_agent_and_shown_to_the_team() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;
    bob.say("@alice a question").await;

    let r = alice
        .ok(
            "my_status_set",
            json!({"state": "running", "task": "review auth", "metadata": {"pr": 12}}),
        )
        .await;
    assert_eq!(r.data["state"], "running");
    assert_eq!(r.data["task"], "review auth");

    let plain = bob.ok("team_members", json!({})).await;
    let agents = plain.data["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    assert_eq!(agents[0]["name"], "alice");
    assert_eq!(agents[0]["backend"], "external");
    assert!(agents[0].get("state").is_none(), "no status unless asked");

    let full = bob.ok("team_members", json!({"includeStatus": true})).await;
    let a = &full.data["agents"][0];
    assert_eq!(a["name"], "alice");
    assert_eq!(a["state"], "running");
    assert_eq!(a["task"], "review auth");
    assert_eq!(a["metadata"], json!({"pr": 12}));
    assert_eq!(a["unread"], 1);
    let b = &full.data["agents"][1];
    assert_eq!(b["state"], "idle");
    assert_eq!(b["unread"], 0);
    assert!(full.text.contains("review auth"), "{}", full.text);

    let human = team.ctl_ok(&["status"]);
    assert!(
        human.contains("alice") && human.contains("running"),
        "{human}"
    );
    assert!(human.contains("review auth"), "{human}");
    let js = json_lines(team.ctl_ok(&["status", "--json"]).as_bytes());
    let a = &js[0]["agents"][0];
    assert_eq!(a["state"], "running");
    assert_eq!(a["task"], "review auth");
    assert_eq!(a["metadata"], json!({"pr": 12}));

    // Only given fields change; an empty task clears it.
    let r = alice.ok("my_status_set", json!({"state": "idle"})).await;
    assert_eq!(r.data["task"], "review auth");
    let r = alice.ok("my_status_set", json!({"task": ""})).await;
    assert!(r.data.get("task").is_none_or(Value::is_null), "{}", r.data);
    assert_eq!(r.data["state"], "idle");

    alice
        .fail_with(
            "my_status_set",
            json!({"state": "sleeping"}),
            &["sleeping", "idle"],
        )
        .await;
    alice
        .fail_with("my_status_set", json!({"metadata": [1, 2]}), &["metadata"])
        .await;
    alice
        .fail_with(
            "my_status_set",
            json!({"task": "x".repeat(5000)}),
            &["task"],
        )
        .await;
    alice.quit().await;
    bob.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Documents

#[tokio::test]
async fn documents_write_append_read_list_create() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;

    alice
        .fail_with(
            "team_doc_read",
            json!({}),
            &["no such document", "notes.md"],
        )
        .await;
    assert_eq!(
        alice.ok("team_doc_list", json!({})).await.data["files"],
        json!([])
    );

    alice
        .ok("team_doc_write", json!({"content": "# Notes\n"}))
        .await;
    alice
        .ok("team_doc_append", json!({"content": "- ünïcode ✓\n"}))
        .await;
    let r = bob.ok("team_doc_read", json!({})).await;
    assert_eq!(r.text, "# Notes\n- ünïcode ✓\n");
    let r = bob.ok("team_doc_read", json!({"file": "notes.md"})).await;
    assert_eq!(r.text, "# Notes\n- ünïcode ✓\n");
    assert_eq!(
        std::fs::read_to_string(team.docs().join("notes.md")).unwrap(),
        "# Notes\n- ünïcode ✓\n"
    );

    bob.ok(
        "team_doc_create",
        json!({"file": "findings/auth.md", "content": "token leak"}),
    )
    .await;
    let e = bob
        .fail_with(
            "team_doc_create",
            json!({"file": "findings/auth.md", "content": "again"}),
            &["document 'findings/auth.md' already exists"],
        )
        .await;
    assert!(
        !e.contains(team.root.to_str().unwrap()),
        "no host path: {e}"
    );
    alice
        .fail_with(
            "team_doc_create",
            json!({"file": "notes.md", "content": "x"}),
            &["exists"],
        )
        .await;
    assert_eq!(
        alice
            .ok("team_doc_read", json!({"file": "findings/auth.md"}))
            .await
            .text,
        "token leak"
    );
    alice
        .ok(
            "team_doc_append",
            json!({"file": "new/log.md", "content": "first"}),
        )
        .await;
    let list = alice.ok("team_doc_list", json!({})).await;
    assert_eq!(
        list.data["files"],
        json!(["findings/auth.md", "new/log.md", "notes.md"])
    );
    assert!(list.text.contains("findings/auth.md"));

    // Write replaces; the CLI sees the same document.
    alice
        .ok(
            "team_doc_write",
            json!({"file": "notes.md", "content": "replaced"}),
        )
        .await;
    assert_eq!(team.ctl_ok(&["doc", "read"]), "replaced");
    let out = team.run("aw-peek", &["--doc", "notes.md"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "replaced");

    alice
        .fail_with("team_doc_write", json!({"file": "notes.md"}), &["content"])
        .await;
    alice
        .fail_with("team_doc_create", json!({"content": "x"}), &["file"])
        .await;
    alice
        .fail_with("team_doc_write", json!({"content": "a\u{0}b"}), &["NUL"])
        .await;
    alice
        .fail_with("team_doc_read", json!({"file": "findings"}), &["directory"])
        .await;
    alice.quit().await;
    bob.quit().await;
}

#[tokio::test]
async fn document_owner_is_enforced_and_suggestions_reach_the_owner() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;
    alice.ok("team_doc_write", json!({"content": "v1"})).await;
    team.ctl_ok(&["doc", "owner", "bob"]);
    assert_eq!(team.ctl_ok(&["doc", "owner"]).trim(), "bob");

    for (tool, args) in [
        ("team_doc_write", json!({"content": "v2"})),
        ("team_doc_append", json!({"content": "more"})),
        (
            "team_doc_create",
            json!({"file": "mine.md", "content": "x"}),
        ),
    ] {
        alice
            .fail_with(tool, args, &["@bob", "document_suggest"])
            .await;
    }
    assert_eq!(alice.ok("team_doc_read", json!({})).await.text, "v1");
    assert!(!exists(&team.docs().join("mine.md")));
    // The CLI enforces it too.
    let out = team.run_stdin(
        "aw-ctl",
        &["doc", "write", "notes.md", "--as", "alice"],
        Some("cli"),
    );
    assert_eq!(out.status.code(), Some(77), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("@bob"));

    bob.ok("team_doc_write", json!({"content": "v2 by bob"}))
        .await;
    assert_eq!(alice.ok("team_doc_read", json!({})).await.text, "v2 by bob");
    let members = alice.ok("team_members", json!({})).await;
    assert_eq!(members.data["documentOwner"], "bob");
    assert!(
        members.text.contains("@bob (document owner)"),
        "{}",
        members.text
    );

    let r = alice
        .ok(
            "document_suggest",
            json!({"suggestion": "Add a section on tokens", "file": "notes.md", "reason": "the leak"}),
        )
        .await;
    assert_eq!(r.data["owner"], "bob");
    let last = team.channel().pop().unwrap();
    assert_eq!(last["from"], "alice");
    assert_eq!(strs(&last["mentions"]), ["bob"]);
    let m = last["message"].as_str().unwrap();
    assert!(m.starts_with("@bob [DOC_SUGGEST]"), "{m}");
    assert!(m.contains("notes.md"), "{m}");
    assert!(m.contains("Add a section on tokens"), "{m}");
    assert!(m.contains("the leak"), "{m}");
    assert_eq!(r.data["id"], last["id"]);
    let inbox = bob.ok("my_inbox", json!({})).await;
    assert_eq!(inbox.data["messages"][0]["entry"]["id"], last["id"]);

    alice
        .fail_with(
            "document_suggest",
            json!({"file": "notes.md"}),
            &["suggestion"],
        )
        .await;
    alice
        .fail_with(
            "document_suggest",
            json!({"suggestion": "x", "file": "../etc/passwd"}),
            &["invalid document name"],
        )
        .await;

    team.ctl_ok(&["doc", "owner", "--clear"]);
    alice.ok("team_doc_write", json!({"content": "v3"})).await;
    alice.quit().await;
    bob.quit().await;
}

#[tokio::test]
async fn documents_and_resources_stay_inside_the_instance() {
    let team = Team::new();
    let alice = team.join("alice").await;
    alice
        .ok("team_doc_write", json!({"content": "inside"}))
        .await;

    let outside = team.base.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let secret = outside.join("secret.md");
    std::fs::write(&secret, "top secret").unwrap();
    let docs = team.docs();
    std::os::unix::fs::symlink(&secret, docs.join("evil.md")).unwrap();
    std::os::unix::fs::symlink(&outside, docs.join("evildir")).unwrap();
    std::os::unix::fs::symlink(outside.join("missing.md"), docs.join("dangling.md")).unwrap();

    let names = [
        "../x.md",
        "../../x.md",
        "../_state/agents.json",
        "sub/../../x.md",
        "/etc/passwd",
        "/tmp/x.md",
        "a\u{0}b.md",
        ".hidden",
        "sub/.git/config",
        "evil.md",
        "evildir/x.md",
        "evildir/secret.md",
        "dangling.md",
        "",
        "dir/",
    ];
    for file in names {
        for tool in ["team_doc_write", "team_doc_append", "team_doc_create"] {
            alice
                .fail(tool, json!({"file": file, "content": "pwned"}))
                .await;
        }
        alice.fail("team_doc_read", json!({ "file": file })).await;
        alice
            .fail("document_suggest", json!({"suggestion": "x", "file": file}))
            .await;
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    let mut left: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["secret.md"], "nothing new outside");
    assert!(!exists(&team.root.join("x.md")));
    assert!(!exists(&team.inst().join("x.md")));
    assert!(!exists(&team.base.join("x.md")));
    assert_eq!(
        team.state("agents.json")["agents"][0]["name"],
        "alice",
        "state untouched"
    );
    assert_eq!(team.channel().len(), 0, "no suggestion was posted");
    assert_eq!(alice.ok("team_doc_read", json!({})).await.text, "inside");

    // Resources: only well-formed ids are ever used as file names.
    let outside_res = team.inst().join("resources");
    std::fs::create_dir_all(&outside_res).unwrap();
    std::os::unix::fs::symlink(&secret, outside_res.join("res-00000000000000aa.md")).unwrap();
    for id in [
        "../../x",
        "../documents/notes.md",
        "res-../../etc/passwd",
        "res-0123",
        "",
        "RES-0123456789ABCDEF",
        "res-0123456789abcdeg",
        "res-0123456789abcdef.md",
        "/etc/passwd",
    ] {
        alice
            .fail_with(
                "resource_read",
                json!({ "id": id }),
                &["invalid resource id"],
            )
            .await;
    }
    alice
        .fail_with(
            "resource_read",
            json!({"id": "res-0123456789abcdef"}),
            &["no such resource"],
        )
        .await;
    let leak = alice
        .fail("resource_read", json!({"id": "res-00000000000000aa"}))
        .await;
    assert!(!leak.contains("top secret"));
    alice.quit().await;
}

#[tokio::test]
async fn folders_that_lead_outside_are_refused() {
    let team = Team::new();
    let alice = team.join("alice").await;
    alice
        .ok("team_doc_write", json!({"content": "inside"}))
        .await;
    let id = alice
        .ok("resource_create", json!({"content": "inside"}))
        .await
        .data["id"]
        .as_str()
        .unwrap()
        .to_string();
    let outside = team.base.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("res-00000000000000bb.md"), "top secret").unwrap();

    // resources/ as a whole
    let res = team.inst().join("resources");
    std::fs::rename(&res, team.base.join("moved")).unwrap();
    std::os::unix::fs::symlink(&outside, &res).unwrap();
    alice
        .fail_with("resource_create", json!({"content": "x"}), &["outside"])
        .await;
    let e = alice
        .fail("resource_read", json!({"id": "res-00000000000000bb"}))
        .await;
    assert!(!e.contains("top secret"));
    alice.fail("resource_read", json!({ "id": id })).await;
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        1,
        "nothing written outside"
    );

    // documents/ as a whole
    let docs = team.docs();
    std::fs::rename(&docs, team.base.join("moved-docs")).unwrap();
    std::os::unix::fs::symlink(&outside, &docs).unwrap();
    alice
        .fail_with("team_doc_write", json!({"content": "x"}), &["outside"])
        .await;
    alice
        .fail_with("team_doc_append", json!({"content": "x"}), &["outside"])
        .await;
    let e = alice
        .fail("team_doc_read", json!({"file": "res-00000000000000bb.md"}))
        .await;
    assert!(!e.contains("top secret"));
    let e = alice
        .fail_with("team_doc_list", json!({}), &["outside"])
        .await;
    assert!(!e.contains("res-00000000000000bb"), "{e}");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        1,
        "nothing written outside"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("res-00000000000000bb.md")).unwrap(),
        "top secret"
    );
    alice.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Resources

#[tokio::test]
async fn resources_are_stored_and_read_verbatim() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;
    let is_id = |s: &str| {
        s.len() == 20
            && s.starts_with("res-")
            && s[4..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };

    let r = alice
        .ok(
            "resource_create",
            json!({"content": "# Report\n\nAll good.\n"}),
        )
        .await;
    let id = r.data["id"]
        .as_str()
        .expect("structuredContent.id")
        .to_string();
    assert!(is_id(&id), "{id}");
    assert_eq!(r.data["type"], "markdown");
    assert!(r.text.contains(&id));
    assert!(exists(
        &team.inst().join("resources").join(format!("{id}.md"))
    ));
    assert_eq!(
        bob.ok("resource_read", json!({ "id": id })).await.text,
        "# Report\n\nAll good.\n"
    );

    for (kind, ext, content) in [
        ("json", "json", "{\"a\": [1, 2, {\"b\": null}]}"),
        ("text", "txt", "plain text\twith tabs  \n"),
        (
            "diff",
            "diff",
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n",
        ),
        ("markdown", "md", "*md*"),
    ] {
        let r = alice
            .ok("resource_create", json!({"content": content, "type": kind}))
            .await;
        let id = r.data["id"].as_str().unwrap().to_string();
        assert!(is_id(&id));
        assert_eq!(r.data["type"], kind);
        assert!(exists(
            &team.inst().join("resources").join(format!("{id}.{ext}"))
        ));
        assert_eq!(
            bob.ok("resource_read", json!({ "id": id })).await.text,
            content
        );
    }

    // Large content, with lines, quotes, backslashes and Unicode, comes back byte for byte.
    let mut big = String::new();
    let mut i = 0;
    while big.len() < (1 << 20) + 4096 {
        big.push_str(&format!(
            "line {i}: \"quoted\" \\back\\slash\\ tab\t ünïcode ✓ 🌍 <b>&amp;</b>\n"
        ));
        i += 1;
    }
    let r = alice
        .ok("resource_create", json!({"content": big, "type": "text"}))
        .await;
    let id = r.data["id"].as_str().unwrap().to_string();
    assert_eq!(r.data["bytes"], big.len());
    let back = bob.ok("resource_read", json!({ "id": id })).await;
    assert_eq!(back.text.len(), big.len());
    assert!(back.text == big, "large resource differs");

    alice
        .fail_with(
            "resource_create",
            json!({"content": "x", "type": "html"}),
            &["html", "markdown", "json", "text", "diff"],
        )
        .await;
    alice
        .fail_with(
            "resource_create",
            json!({"content": "{not json", "type": "json"}),
            &["JSON"],
        )
        .await;
    alice
        .fail_with("resource_create", json!({"content": ""}), &["empty"])
        .await;
    alice
        .fail_with("resource_create", json!({"content": "a\u{0}"}), &["NUL"])
        .await;
    alice.fail_with("resource_read", json!({}), &["id"]).await;
    alice.quit().await;
    bob.quit().await;
}

#[tokio::test]
async fn content_near_the_size_limits_gets_an_answer() {
    let team = Team::new();
    let alice = team.join("alice").await;
    const LIMIT: usize = 16 << 20;
    // Exactly at the limit: accepted, although the request line is over 16 MiB.
    let full = "a".repeat(LIMIT);
    let r = alice
        .ok("resource_create", json!({ "content": full }))
        .await;
    let id = r.data["id"].as_str().unwrap().to_string();
    let path = team.inst().join("resources").join(format!("{id}.md"));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), LIMIT as u64);
    drop(full);
    // Content that JSON escaping doubles: stored verbatim.
    let quoted = "\"\\\n".repeat(3 << 20);
    let r = alice
        .ok(
            "resource_create",
            json!({"content": quoted, "type": "text"}),
        )
        .await;
    let id = r.data["id"].as_str().unwrap().to_string();
    let path = team.inst().join("resources").join(format!("{id}.txt"));
    assert!(std::fs::read_to_string(&path).unwrap() == quoted);
    alice
        .ok(
            "team_doc_write",
            json!({"file": "big.md", "content": quoted}),
        )
        .await;
    assert!(std::fs::read_to_string(team.docs().join("big.md")).unwrap() == quoted);
    drop(quoted);
    // Over the limit: refused with a reason, and the server goes on.
    let over = "b".repeat(LIMIT + 1);
    alice
        .fail_with("resource_create", json!({ "content": over }), &["limit"])
        .await;
    alice
        .fail_with("team_doc_write", json!({ "content": over }), &["limit"])
        .await;
    alice
        .fail_with("channel_send", json!({ "message": over }), &["limit"])
        .await;
    drop(over);
    assert_eq!(alice.say("still here").await, 1);
    alice.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Proposals

async fn trio(team: &Team) -> (Agent, Agent, Agent) {
    let a = team.join("alice").await;
    let b = team.join("bob").await;
    let c = team.join("carol").await;
    (a, b, c)
}

/// Create a proposal as `a`; the proposal's structured content.
async fn propose(a: &Agent, args: Value) -> Value {
    a.ok("team_proposal_create", args).await.data
}

/// End every server of a test.
async fn quit_all<const N: usize>(agents: [Agent; N]) {
    for a in agents {
        a.quit().await;
    }
}

fn option_ids(p: &Value) -> Vec<String> {
    p["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect()
}

/// Channel entries that start with `[KIND:id]`.
fn announcements(team: &Team, kind: &str, id: &str) -> Vec<Value> {
    team.entries_starting(&format!("[{kind}:{id}]"))
}

#[tokio::test]
async fn election_defaults_to_the_agents_and_resolves_at_quorum() {
    let team = Team::new();
    let (alice, bob, carol) = trio(&team).await;

    let r = alice
        .ok(
            "team_proposal_create",
            json!({"type": "election", "title": "Who leads?"}),
        )
        .await;
    let p = r.data;
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(option_ids(&p), ["alice", "bob", "carol"]);
    assert_eq!(p["quorum"], 3, "quorum defaults to the number of agents");
    assert_eq!(p["status"], "active");
    assert_eq!(p["creator"], "alice");

    let ann = announcements(&team, "PROPOSAL", &id);
    assert_eq!(ann.len(), 1);
    assert_eq!(ann[0]["from"], "alice");
    let mentions = strs(&ann[0]["mentions"]);
    for who in ["alice", "bob", "carol"] {
        assert!(mentions.contains(&who.to_string()), "{mentions:?}");
    }
    assert!(ann[0]["message"].as_str().unwrap().contains("Who leads?"));
    // It is in the voters' inboxes.
    let inbox = bob.ok("my_inbox", json!({})).await;
    assert_eq!(inbox.data["messages"][0]["entry"]["id"], ann[0]["id"]);

    // All active proposals.
    let all = carol.ok("team_proposal_status", json!({})).await;
    assert_eq!(all.data["proposals"].as_array().unwrap().len(), 1);
    assert_eq!(all.data["proposals"][0]["id"], id.as_str());

    alice
        .ok("team_vote", json!({"proposal": id, "choice": "bob"}))
        .await;
    bob.ok(
        "team_vote",
        json!({"proposal": id, "choice": "bob", "reason": "I have time"}),
    )
    .await;
    let mid = carol
        .ok("team_proposal_status", json!({ "proposal": id }))
        .await;
    assert_eq!(mid.data["status"], "active");
    assert_eq!(
        mid.data["counts"],
        json!({"alice": 0, "bob": 2, "carol": 0})
    );
    let last = carol
        .ok("team_vote", json!({"proposal": id, "choice": "carol"}))
        .await;
    assert_eq!(last.data["status"], "resolved");

    let s = alice
        .ok("team_proposal_status", json!({ "proposal": id }))
        .await
        .data;
    for key in [
        "id",
        "type",
        "title",
        "status",
        "options",
        "votes",
        "counts",
        "winner",
        "resolvedBy",
    ] {
        assert!(s.get(key).is_some(), "status has {key}: {s}");
    }
    assert_eq!(s["id"], id.as_str());
    assert_eq!(s["type"], "election");
    assert_eq!(s["title"], "Who leads?");
    assert_eq!(s["status"], "resolved");
    assert_eq!(s["winner"], "bob");
    assert_eq!(s["resolvedBy"], "quorum");
    assert_eq!(s["counts"], json!({"alice": 0, "bob": 2, "carol": 1}));
    let votes: Vec<(String, String)> = s["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["voter"].as_str().unwrap().to_string(),
                v["choice"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        votes,
        [
            ("alice".into(), "bob".into()),
            ("bob".into(), "bob".into()),
            ("carol".into(), "carol".into())
        ]
    );
    assert_eq!(s["votes"][1]["reason"], "I have time");

    // One [VOTE] per vote, sent as the voter; exactly one [RESOLVED].
    let vote_msgs = announcements(&team, "VOTE", &id);
    let voters: Vec<&str> = vote_msgs
        .iter()
        .map(|e| e["from"].as_str().unwrap())
        .collect();
    assert_eq!(voters, ["alice", "bob", "carol"]);
    assert!(
        vote_msgs[1]["message"]
            .as_str()
            .unwrap()
            .contains("I have time")
    );
    let resolved = announcements(&team, "RESOLVED", &id);
    assert_eq!(resolved.len(), 1);
    assert!(resolved[0]["message"].as_str().unwrap().contains("bob"));

    // Closed: no more votes; no longer listed as active.
    alice
        .fail_with(
            "team_vote",
            json!({"proposal": id, "choice": "alice"}),
            &["resolved"],
        )
        .await;
    let all = carol.ok("team_proposal_status", json!({})).await;
    assert_eq!(all.data["proposals"], json!([]));
    assert_eq!(announcements(&team, "RESOLVED", &id).len(), 1);
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn proposal_types_defaults_and_bad_input() {
    let team = Team::new();
    let (alice, bob, carol) = trio(&team).await;

    let p = propose(&alice, json!({"type": "approval", "title": "Merge #12"})).await;
    assert_eq!(option_ids(&p), ["yes", "no"]);
    let p = propose(
        &alice,
        json!({"type": "assignment", "title": "Who takes auth?"}),
    )
    .await;
    assert_eq!(option_ids(&p), ["alice", "bob", "carol"]);
    let p = propose(
        &alice,
        json!({
            "type": "decision",
            "title": "REST or GraphQL?",
            "description": "For the public API",
            "options": [{"id": "rest", "label": "REST"}, {"id": "graphql"}],
            "id": "api-style"
        }),
    )
    .await;
    assert_eq!(p["id"], "api-style");
    assert_eq!(option_ids(&p), ["rest", "graphql"]);
    assert_eq!(p["type"], "decision");
    let ann = announcements(&team, "PROPOSAL", "api-style");
    assert_eq!(ann.len(), 1);
    let m = ann[0]["message"].as_str().unwrap();
    assert!(
        m.contains("For the public API") && m.contains("rest") && m.contains("graphql"),
        "{m}"
    );

    // The generated ids are distinct.
    let listed = bob.ok("team_proposal_status", json!({})).await.data;
    let all_ids: BTreeSet<String> = listed["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(all_ids.len(), 3);

    let t = |extra: Value| {
        let mut v =
            json!({"type": "decision", "title": "T", "options": [{"id": "a"}, {"id": "b"}]});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    for (args, needles) in [
        (
            json!({"type": "poll", "title": "T"}),
            vec!["poll", "election"],
        ),
        (
            json!({"type": "decision", "title": "T"}),
            vec!["two options"],
        ),
        (
            json!({"type": "decision", "title": "T", "options": [{"id": "a"}]}),
            vec!["two options"],
        ),
        (json!({"title": "T"}), vec!["type"]),
        (json!({"type": "decision"}), vec!["title"]),
        (t(json!({"title": ""})), vec!["title"]),
        (t(json!({"title": "two\nlines"})), vec!["title"]),
        (
            t(json!({"options": [{"id": "a"}, {"id": "a"}]})),
            vec!["duplicate"],
        ),
        (
            t(json!({"options": [{"id": "a b"}, {"id": "c"}]})),
            vec!["option id"],
        ),
        (
            t(json!({"options": [{"label": "no id"}, {"id": "c"}]})),
            vec!["id"],
        ),
        (t(json!({"options": "a,b"})), vec!["options"]),
        (
            t(json!({"resolution": {"type": "consensus"}})),
            vec!["consensus", "plurality"],
        ),
        (
            t(json!({"resolution": {"tieBreaker": "coin"}})),
            vec!["coin", "first"],
        ),
        (t(json!({"resolution": {"quorum": 0}})), vec!["quorum"]),
        (t(json!({"resolution": {"quorum": -2}})), vec!["quorum"]),
        (t(json!({"resolution": "majority"})), vec!["resolution"]),
        (t(json!({"timeoutSeconds": 0})), vec!["timeoutSeconds"]),
        (t(json!({"timeoutSeconds": -5})), vec!["timeoutSeconds"]),
        (
            t(json!({"id": "api-style"})),
            vec!["Error: proposal 'api-style' already exists"],
        ),
        (t(json!({"id": "../x"})), vec!["proposal id"]),
        (t(json!({"binding": "maybe"})), vec!["binding"]),
    ] {
        carol
            .fail_with("team_proposal_create", args, &needles)
            .await;
    }
    assert_eq!(
        bob.ok("team_proposal_status", json!({})).await.data["proposals"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "no proposal was created by the failed calls"
    );
    assert_eq!(team.entries_starting("[PROPOSAL:").len(), 3);
    quit_all([alice, bob, carol]).await;
}

/// Create a decision over `options` by `creator`, with `resolution`; its id.
async fn decision(creator: &Agent, options: &[&str], resolution: Value) -> String {
    let opts: Vec<Value> = options.iter().map(|o| json!({ "id": o })).collect();
    propose(
        creator,
        json!({"type": "decision", "title": "Pick one", "options": opts, "resolution": resolution}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn vote(a: &Agent, id: &str, choice: &str) -> Value {
    a.ok("team_vote", json!({"proposal": id, "choice": choice}))
        .await
        .data
}

#[tokio::test]
async fn resolution_rules_and_tie_breakers() {
    let team = Team::new();
    let (alice, bob, carol) = trio(&team).await;

    // majority: more than half of the votes cast
    let id = decision(&alice, &["a", "b", "c"], json!({"type": "majority"})).await;
    vote(&alice, &id, "a").await;
    vote(&bob, &id, "b").await;
    let p = vote(&carol, &id, "a").await;
    assert_eq!(
        (p["status"].as_str(), p["winner"].as_str()),
        (Some("resolved"), Some("a"))
    );

    let id = decision(&alice, &["a", "b", "c"], json!({"type": "majority"})).await;
    vote(&alice, &id, "a").await;
    vote(&bob, &id, "b").await;
    let p = vote(&carol, &id, "c").await;
    assert_eq!(p["status"], "resolved");
    assert_eq!(p["winner"], Value::Null);
    assert_eq!(p["resolvedBy"], "no-majority");
    assert_eq!(announcements(&team, "RESOLVED", &id).len(), 1);

    // 2 of 4 is not more than half
    let id = decision(
        &alice,
        &["a", "b"],
        json!({"type": "majority", "quorum": 2}),
    )
    .await;
    vote(&alice, &id, "a").await;
    let p = vote(&bob, &id, "b").await;
    assert_eq!(p["winner"], Value::Null);
    assert_eq!(p["resolvedBy"], "no-majority");

    // unanimous
    let id = decision(&alice, &["yes", "no"], json!({"type": "unanimous"})).await;
    for a in [&alice, &bob, &carol] {
        vote(a, &id, "yes").await;
    }
    let p = alice
        .ok("team_proposal_status", json!({ "proposal": id }))
        .await
        .data;
    assert_eq!(p["winner"], "yes");
    let id = decision(&alice, &["yes", "no"], json!({"type": "unanimous"})).await;
    vote(&alice, &id, "yes").await;
    vote(&bob, &id, "no").await;
    let p = vote(&carol, &id, "yes").await;
    assert_eq!(p["status"], "resolved");
    assert_eq!(p["winner"], Value::Null);
    assert_eq!(p["resolvedBy"], "not-unanimous");

    // plurality, a clear winner with fewer than half
    let id = decision(&alice, &["a", "b", "c", "d"], json!({"quorum": 3})).await;
    vote(&alice, &id, "c").await;
    vote(&bob, &id, "c").await;
    let p = vote(&carol, &id, "d").await;
    assert_eq!(p["winner"], "c");
    assert_eq!(p["resolvedBy"], "quorum");

    // tie, first: the first tied option in option order, not the first vote
    let id = decision(&alice, &["a", "b", "c"], json!({"quorum": 2})).await;
    vote(&alice, &id, "b").await;
    let p = vote(&bob, &id, "a").await;
    assert_eq!(p["winner"], "a");
    assert_eq!(p["resolvedBy"], "tie-breaker:first");

    // tie, creator-decides: the creator's vote among the tied options
    let id = decision(
        &alice,
        &["x", "y", "z"],
        json!({"quorum": 2, "tieBreaker": "creator-decides"}),
    )
    .await;
    vote(&bob, &id, "x").await;
    let p = vote(&alice, &id, "y").await;
    assert_eq!(p["winner"], "y");
    assert_eq!(p["resolvedBy"], "tie-breaker:creator-decides");
    // ... and when the creator did not vote: the first tied option
    let id = decision(
        &alice,
        &["x", "y"],
        json!({"quorum": 2, "tieBreaker": "creator-decides"}),
    )
    .await;
    vote(&carol, &id, "y").await;
    let p = vote(&bob, &id, "x").await;
    assert_eq!(p["winner"], "x");

    // tie, random: one of the tied options, the same for everyone who looks
    let id = decision(
        &alice,
        &["p", "q", "r"],
        json!({"quorum": 2, "tieBreaker": "random"}),
    )
    .await;
    vote(&alice, &id, "p").await;
    let p = vote(&bob, &id, "q").await;
    let w = p["winner"].as_str().unwrap().to_string();
    assert!(w == "p" || w == "q", "{w}");
    assert_eq!(p["resolvedBy"], "tie-breaker:random");
    for a in [&alice, &bob, &carol] {
        let s = a
            .ok("team_proposal_status", json!({ "proposal": id }))
            .await
            .data;
        assert_eq!(s["winner"], w.as_str());
    }
    let resolved = announcements(&team, "RESOLVED", &id);
    assert_eq!(resolved.len(), 1);
    assert!(
        resolved[0]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{w} wins"))
    );
    assert_eq!(resolved[0]["from"], "system");
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn votes_are_final_and_only_the_creator_cancels() {
    let team = Team::new();
    let (alice, bob, carol) = trio(&team).await;
    let p = propose(&alice, json!({"type": "approval", "title": "Release"})).await;
    let id = p["id"].as_str().unwrap().to_string();
    let other = propose(
        &alice,
        json!({"type": "approval", "title": "Other", "id": "other"}),
    )
    .await;
    assert_eq!(other["id"], "other");

    vote(&bob, &id, "yes").await;
    // same vote again: accepted, changes nothing, not announced twice
    let p = vote(&bob, &id, "yes").await;
    assert_eq!(p["votes"].as_array().unwrap().len(), 1);
    // the label or another case names the same option
    let p = vote(&bob, &id, "YES").await;
    assert_eq!(p["votes"].as_array().unwrap().len(), 1);
    assert_eq!(announcements(&team, "VOTE", &id).len(), 1);
    // a changed vote is refused
    bob.fail_with(
        "team_vote",
        json!({"proposal": id, "choice": "no"}),
        &["already voted", "final"],
    )
    .await;
    let s = carol
        .ok("team_proposal_status", json!({ "proposal": id }))
        .await
        .data;
    assert_eq!(s["counts"], json!({"yes": 1, "no": 0}));

    // unknown proposal: the error lists the active ones
    for tool in ["team_vote", "team_proposal_status", "team_proposal_cancel"] {
        let mut args = json!({"proposal": "nope"});
        if tool == "team_vote" {
            args["choice"] = json!("yes");
        }
        carol.fail_with(tool, args, &["nope", &id, "other"]).await;
    }
    // bad option: the error lists the valid ids
    carol
        .fail_with(
            "team_vote",
            json!({"proposal": id, "choice": "maybe"}),
            &["maybe", "yes", "no"],
        )
        .await;

    // only the creator cancels
    bob.fail_with(
        "team_proposal_cancel",
        json!({ "proposal": id }),
        &["only the creator", "@alice"],
    )
    .await;
    let c = alice
        .ok("team_proposal_cancel", json!({ "proposal": id }))
        .await
        .data;
    assert_eq!(c["status"], "cancelled");
    let cancelled = announcements(&team, "CANCELLED", &id);
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0]["from"], "alice");
    alice
        .fail_with(
            "team_proposal_cancel",
            json!({ "proposal": id }),
            &["cancelled"],
        )
        .await;
    carol
        .fail_with(
            "team_vote",
            json!({"proposal": id, "choice": "yes"}),
            &["cancelled"],
        )
        .await;
    assert_eq!(announcements(&team, "CANCELLED", &id).len(), 1);
    assert!(announcements(&team, "RESOLVED", &id).is_empty());
    // The active list now holds only the other one, and the unknown-proposal error says so.
    let e = carol
        .fail("team_proposal_status", json!({"proposal": "nope"}))
        .await;
    assert!(e.contains("(active: other)"), "{e}");
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn timed_out_proposals_resolve_or_expire_when_someone_looks() {
    let team = Team::new();
    let (alice, bob, carol) = trio(&team).await;
    let quiet = propose(
        &alice,
        json!({"type": "approval", "title": "Nobody votes", "timeoutSeconds": 1}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let partial = propose(
        &alice,
        json!({"type": "approval", "title": "One vote", "timeoutSeconds": 2}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    vote(&bob, &partial, "no").await;
    sleep_ms(2500).await;

    // Reading the proposals applies the expiry.
    let props = team.proposals();
    let get = |id: &str| props.iter().find(|p| p["id"] == id).unwrap().clone();
    let q = get(&quiet);
    assert_eq!(q["status"], "expired");
    assert_eq!(q["resolvedBy"], "no-votes");
    assert_eq!(q["winner"], Value::Null);
    let p = get(&partial);
    assert_eq!(p["status"], "resolved");
    assert_eq!(p["winner"], "no");
    assert_eq!(p["resolvedBy"], "timeout");

    // More looks change nothing.
    for a in [&alice, &bob, &carol] {
        a.ok("team_proposal_status", json!({})).await;
        a.ok("team_proposal_status", json!({ "proposal": quiet }))
            .await;
    }
    team.ctl_ok(&["status"]);
    let expired = announcements(&team, "EXPIRED", &quiet);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0]["from"], "system");
    assert!(announcements(&team, "RESOLVED", &quiet).is_empty());
    assert_eq!(announcements(&team, "RESOLVED", &partial).len(), 1);
    assert!(announcements(&team, "EXPIRED", &partial).is_empty());
    alice
        .fail_with(
            "team_vote",
            json!({"proposal": quiet, "choice": "yes"}),
            &["expired"],
        )
        .await;
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn a_binding_doc_owner_election_sets_the_owner() {
    let team = Team::new();
    let (alice, bob, carol) = trio(&team).await;
    alice
        .ok("team_doc_write", json!({"content": "before"}))
        .await;
    let p = propose(&alice, json!({"type": "election", "title": "Who owns the documents?", "binding": true, "id": "doc-owner-1"})).await;
    assert_eq!(p["binding"], true);

    // While it runs, nobody writes; the refusal names the election.
    for a in [&alice, &bob] {
        a.fail_with(
            "team_doc_write",
            json!({"content": "during"}),
            &["doc-owner-1"],
        )
        .await;
    }
    let out = team.run_stdin("aw-ctl", &["doc", "append", "--as", "carol"], Some("cli"));
    assert_eq!(out.status.code(), Some(77), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("doc-owner-1"));
    assert_eq!(bob.ok("team_doc_read", json!({})).await.text, "before");

    for a in [&alice, &bob, &carol] {
        vote(a, "doc-owner-1", "carol").await;
    }
    assert_eq!(team.ctl_ok(&["doc", "owner"]).trim(), "carol");
    let resolved = announcements(&team, "RESOLVED", "doc-owner-1");
    assert_eq!(resolved.len(), 1);
    assert!(resolved[0]["message"].as_str().unwrap().contains("@carol"));

    alice
        .fail_with(
            "team_doc_write",
            json!({"content": "after"}),
            &["@carol", "document_suggest"],
        )
        .await;
    carol
        .ok("team_doc_write", json!({"content": "after"}))
        .await;
    assert_eq!(bob.ok("team_doc_read", json!({})).await.text, "after");

    // A non-binding election changes nothing.
    let p = propose(
        &alice,
        json!({"type": "election", "title": "Advisory", "id": "doc-owner-2"}),
    )
    .await;
    assert_eq!(p["binding"], false);
    carol.ok("team_doc_append", json!({"content": "+"})).await;
    for a in [&alice, &bob, &carol] {
        vote(a, "doc-owner-2", "bob").await;
    }
    assert_eq!(team.ctl_ok(&["doc", "owner"]).trim(), "carol");
    quit_all([alice, bob, carol]).await;
}

#[tokio::test]
async fn humans_take_part_with_aw_ctl() {
    let team = Team::new();
    let alice = team.join("alice").await;
    let bob = team.join("bob").await;

    let out = team.ctl_ok(&[
        "propose",
        "decision",
        "REST or GraphQL?",
        "--option",
        "rest=REST",
        "--option",
        "graphql",
        "--quorum",
        "3",
        "--as",
        "erin",
        "--id",
        "api",
    ]);
    assert_eq!(out.trim(), "api");
    let ann = announcements(&team, "PROPOSAL", "api");
    assert_eq!(ann.len(), 1);
    assert_eq!(ann[0]["from"], "erin");
    assert!(strs(&ann[0]["mentions"]).contains(&"alice".to_string()));

    // The agents see it and vote through MCP.
    let st = alice
        .ok("team_proposal_status", json!({"proposal": "api"}))
        .await
        .data;
    assert_eq!(option_ids(&st), ["rest", "graphql"]);
    assert_eq!(st["creator"], "erin");
    vote(&alice, "api", "rest").await;

    let active = team.ctl_ok(&["proposals", "--json"]);
    let active = json_lines(active.as_bytes());
    assert_eq!(active.len(), 1);
    assert_eq!(active[0]["id"], "api");
    assert_eq!(active[0]["counts"], json!({"rest": 1, "graphql": 0}));

    let out = team.ctl_ok(&[
        "vote",
        "api",
        "graphql",
        "--as",
        "dave",
        "--reason",
        "typed schema",
        "--json",
    ]);
    let p: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(p["votes"][1]["voter"], "dave");
    assert_eq!(p["votes"][1]["reason"], "typed schema");
    let votes = announcements(&team, "VOTE", "api");
    assert_eq!(votes.len(), 2);
    assert_eq!(votes[1]["from"], "dave");
    assert!(
        votes[1]["message"]
            .as_str()
            .unwrap()
            .contains("typed schema")
    );

    // Bad input from the command line: the exit codes of the contract.
    let out = team.run("aw-ctl", &["vote", "api", "soap", "--as", "dave"]);
    assert_eq!(out.status.code(), Some(65), "{out:?}");
    let out = team.run("aw-ctl", &["vote", "api", "rest", "--as", "dave"]);
    assert_eq!(out.status.code(), Some(77), "a changed vote: {out:?}");
    let out = team.run("aw-ctl", &["vote", "nope", "rest", "--as", "dave"]);
    assert_eq!(out.status.code(), Some(66), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("api"));
    let out = team.run("aw-ctl", &["cancel", "api", "--as", "alice"]);
    assert_eq!(out.status.code(), Some(77), "{out:?}");

    vote(&bob, "api", "graphql").await;
    let all = team.proposals();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["status"], "resolved");
    assert_eq!(all[0]["winner"], "graphql");
    assert!(json_lines(team.ctl_ok(&["proposals", "--json"]).as_bytes()).is_empty());
    assert_eq!(announcements(&team, "RESOLVED", "api").len(), 1);

    // A human cancels their own proposal.
    team.ctl_ok(&[
        "propose", "approval", "Lunch?", "--as", "erin", "--id", "lunch",
    ]);
    team.ctl_ok(&["cancel", "lunch", "--as", "erin"]);
    assert_eq!(announcements(&team, "CANCELLED", "lunch").len(), 1);
    let st = alice
        .ok("team_proposal_status", json!({"proposal": "lunch"}))
        .await
        .data;
    assert_eq!(st["status"], "cancelled");
    alice.quit().await;
    bob.quit().await;
}

// ---------------------------------------------------------------------------------------------
// Many servers at once

const CROWD: usize = 12;

async fn crowd(team: &Arc<Team>) -> Vec<Arc<Agent>> {
    // Start every server at once: their registrations race too.
    let mut set = tokio::task::JoinSet::new();
    for i in 0..CROWD {
        let team = Arc::clone(team);
        set.spawn(async move { (i, team.join(&format!("agent{i:02}")).await) });
    }
    let mut agents: Vec<(usize, Agent)> = set.join_all().await;
    agents.sort_by_key(|(i, _)| *i);
    agents.into_iter().map(|(_, a)| Arc::new(a)).collect()
}

#[tokio::test]
async fn many_servers_voting_at_once_lose_no_vote() {
    let team = Arc::new(Team::new());
    let agents = crowd(&team).await;
    assert_eq!(
        team.state("agents.json")["agents"]
            .as_array()
            .unwrap()
            .len(),
        CROWD,
        "every racing registration kept"
    );
    let id = agents[0]
        .ok(
            "team_proposal_create",
            json!({"type": "approval", "title": "Go?"}),
        )
        .await
        .data["id"]
        .as_str()
        .unwrap()
        .to_string();

    let barrier = Arc::new(tokio::sync::Barrier::new(CROWD));
    let mut set = tokio::task::JoinSet::new();
    for (i, a) in agents.iter().enumerate() {
        let a = Arc::clone(a);
        let id = id.clone();
        let barrier = Arc::clone(&barrier);
        set.spawn(async move {
            barrier.wait().await;
            let choice = if i % 3 == 2 { "no" } else { "yes" };
            a.ok("team_vote", json!({"proposal": id, "choice": choice}))
                .await;
        });
    }
    set.join_all().await;

    let p = team.proposals().pop().unwrap();
    assert_eq!(p["votes"].as_array().unwrap().len(), CROWD);
    assert_eq!(p["counts"], json!({"yes": 8, "no": 4}));
    assert_eq!(p["status"], "resolved");
    assert_eq!(p["winner"], "yes");
    let votes = announcements(&team, "VOTE", &id);
    let from: BTreeSet<String> = votes
        .iter()
        .map(|e| e["from"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(votes.len(), CROWD);
    assert_eq!(from.len(), CROWD, "one [VOTE] per voter, sent as the voter");
    assert_eq!(announcements(&team, "RESOLVED", &id).len(), 1);
    let ch = team.channel();
    assert_eq!(ids(&ch), (1..=ch.len() as u64).collect::<Vec<_>>());
    for a in agents {
        Arc::into_inner(a).unwrap().quit().await;
    }
}

#[tokio::test]
async fn racing_looks_after_a_timeout_announce_it_once() {
    let team = Arc::new(Team::new());
    let agents = crowd(&team).await;
    let create = |title: &str, timeout: u64| json!({"type": "approval", "title": title, "timeoutSeconds": timeout});
    let quiet = agents[0]
        .ok("team_proposal_create", create("Quiet", 1))
        .await
        .data["id"]
        .as_str()
        .unwrap()
        .to_string();
    let partial = agents[1]
        .ok("team_proposal_create", create("Partial", 2))
        .await
        .data["id"]
        .as_str()
        .unwrap()
        .to_string();
    vote(&agents[2], &partial, "yes").await;
    sleep_ms(2500).await;

    let barrier = Arc::new(tokio::sync::Barrier::new(CROWD));
    let mut set = tokio::task::JoinSet::new();
    for (i, a) in agents.iter().enumerate() {
        let a = Arc::clone(a);
        let barrier = Arc::clone(&barrier);
        let (quiet, partial) = (quiet.clone(), partial.clone());
        set.spawn(async move {
            barrier.wait().await;
            let args = match i % 3 {
                0 => json!({ "proposal": quiet }),
                1 => json!({ "proposal": partial }),
                _ => json!({}),
            };
            a.ok("team_proposal_status", args).await;
        });
    }
    set.join_all().await;

    assert_eq!(announcements(&team, "EXPIRED", &quiet).len(), 1);
    assert_eq!(announcements(&team, "RESOLVED", &partial).len(), 1);
    assert!(announcements(&team, "RESOLVED", &quiet).is_empty());
    assert!(announcements(&team, "EXPIRED", &partial).is_empty());
    let props = team.proposals();
    assert!(props.iter().all(|p| p["status"] != "active"), "{props:?}");
    for a in agents {
        Arc::into_inner(a).unwrap().quit().await;
    }
}

// ---------------------------------------------------------------------------------------------
// MCP configuration for agent programs

#[tokio::test]
async fn mcp_config_for_claude_code_and_codex() {
    let team = Team::new();
    // A relative --root is made absolute.
    let out = mcp_common::command("aw-ctl")
        .current_dir(&team.base)
        .args(["--root", "root", "mcp-config", "alice@review"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let cfg: Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let aw = &cfg["mcpServers"]["aw"];
    let command = aw["command"].as_str().unwrap();
    assert!(std::path::Path::new(command).is_absolute(), "{command}");
    assert!(command.ends_with("/aw-mcp"), "{command}");
    assert!(std::path::Path::new(command).is_file());
    assert_eq!(aw["args"], json!(["--agent", "alice@review"]));
    let root = aw["env"]["AW_ROOT"].as_str().unwrap();
    assert!(std::path::Path::new(root).is_absolute());
    assert_eq!(
        std::path::Path::new(root).canonicalize().unwrap(),
        team.root.canonicalize().unwrap()
    );
    assert_eq!(aw["alwaysLoad"], true);

    // The configuration works: start the server it names and talk to it.
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(["--agent", "alice@review"])
        .env("AW_ROOT", root)
        .env_remove("AW_INSTANCE")
        .env_remove("AW_AGENT")
        .current_dir("/");
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use rmcp::ServiceExt;
    let client = ().serve(transport).await.expect("initialise");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 28);
    client.cancel().await.unwrap();
    assert!(exists(
        &team.root.join("review").join("_state").join("agents.json")
    ));

    // --codex: shell-quoted -c 'key=value' lines
    let codex = team.ctl_ok(&["mcp-config", "bob@review", "--codex"]);
    let mut keys = BTreeSet::new();
    for line in codex.lines() {
        let quoted = line.strip_prefix("-c '").and_then(|l| l.strip_suffix('\''));
        let kv = quoted.unwrap_or_else(|| panic!("not -c '...': {line}"));
        let kv = kv.replace(r"'\''", "'");
        let (k, v) = kv.split_once('=').expect("key=value");
        let k = k.strip_prefix("mcp_servers.aw.").expect("mcp_servers.aw.*");
        match k {
            "command" => {
                let c: String = serde_json::from_str(v).unwrap();
                assert!(c.ends_with("/aw-mcp") && c.starts_with('/'), "{c}");
            }
            "args" => assert!(
                v.contains("\"--agent\"") && v.contains("\"bob@review\""),
                "{v}"
            ),
            "env" => assert!(
                v.contains("AW_ROOT") && v.contains(&format!("{:?}", team.root.to_str().unwrap())),
                "{v}"
            ),
            "required" => assert_eq!(v.trim(), "true"),
            "default_tools_approval_mode" => assert_eq!(v.trim(), "\"approve\""),
            "tool_timeout_sec" => assert_eq!(v.trim(), "330"),
            other => panic!("unexpected key {other}"),
        }
        keys.insert(k.to_string());
    }
    for k in [
        "command",
        "args",
        "env",
        "required",
        "default_tools_approval_mode",
        "tool_timeout_sec",
    ] {
        assert!(keys.contains(k), "--codex sets {k}: {codex}");
    }

    // --codex-toml: a config.toml fragment with the same keys
    let toml = team.ctl_ok(&["mcp-config", "bob@review", "--codex-toml"]);
    let mut lines = toml.lines();
    assert_eq!(lines.next(), Some("[mcp_servers.aw]"));
    let mut keys = BTreeSet::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let (k, v) = line
            .split_once(" = ")
            .unwrap_or_else(|| panic!("key = value: {line}"));
        keys.insert(k.to_string());
        match k {
            "required" => assert_eq!(v, "true"),
            "default_tools_approval_mode" => assert_eq!(v, "\"approve\""),
            "tool_timeout_sec" => assert_eq!(v, "330"),
            "env" => assert!(v.contains("AW_ROOT"), "{v}"),
            "args" => assert!(v.contains("bob@review")),
            _ => {}
        }
    }
    for k in [
        "command",
        "args",
        "env",
        "required",
        "default_tools_approval_mode",
        "tool_timeout_sec",
    ] {
        assert!(keys.contains(k), "--codex-toml sets {k}: {toml}");
    }

    // The quoting survives a real shell, with a root that needs it.
    let odd = team.base.join("r o'ot $x");
    std::fs::create_dir(&odd).unwrap();
    let out = mcp_common::command("aw-ctl")
        .arg("--root")
        .arg(&odd)
        .args(["mcp-config", "bob@review", "--codex"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let script = r#"eval "set -- $(tr '\n' ' ')"; for a; do printf '%s\0' "$a"; done"#;
    let mut sh = std::process::Command::new("sh")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = sh.stdin.take().unwrap();
        stdin.write_all(&out.stdout).unwrap();
    }
    let words = sh.wait_with_output().unwrap().stdout;
    let words: Vec<String> = words
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8(w.to_vec()).unwrap())
        .collect();
    assert_eq!(words.len(), 12, "{words:?}");
    assert!(words.iter().step_by(2).all(|w| w == "-c"), "{words:?}");
    let env = words
        .iter()
        .find_map(|w| w.strip_prefix("mcp_servers.aw.env="))
        .expect("env");
    assert_eq!(
        env,
        format!(
            "{{ AW_ROOT = {} }}",
            serde_json::to_string(odd.to_str().unwrap()).unwrap()
        )
    );

    let out = team.run("aw-ctl", &["mcp-config", "system@review"]);
    assert_eq!(out.status.code(), Some(65));
    let out = team.run("aw-ctl", &["mcp-config", "bad/name"]);
    assert_eq!(out.status.code(), Some(65));
}

// ---------------------------------------------------------------------------------------------
// Lifecycle and the wire

/// Generous: only keeps a server that never exits from hanging the suite.
const EXIT_GUARD: Duration = Duration::from_secs(10);

fn call_msg(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
}

#[test]
fn stdout_carries_only_json_rpc_and_end_of_input_exits_0() {
    use mcp_common::Raw;
    let team = Team::new();
    let mut raw = Raw::start(&team, "alice");
    let init = raw.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "aw");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    assert!(
        init["result"]["instructions"]
            .as_str()
            .is_some_and(|s| s.contains("my_inbox"))
    );

    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = raw.response(2);
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 28);
    assert!(list["result"].get("nextCursor").is_none_or(Value::is_null));

    raw.send(call_msg(
        3,
        "channel_send",
        json!({"message": "over the wire @alice"}),
    ));
    let r = raw.response(3);
    assert_eq!(r["result"]["structuredContent"]["from"], "alice");
    assert_ne!(r["result"]["isError"], true);

    // Failures: tool results with isError, logged on stderr, never on stdout.
    raw.send(call_msg(
        4,
        "team_doc_read",
        json!({"file": "../../etc/passwd"}),
    ));
    let r = raw.response(4);
    assert!(r.get("error").is_none(), "not a JSON-RPC error: {r}");
    assert_eq!(r["result"]["isError"], true);
    raw.send(call_msg(5, "no_such_tool", json!({})));
    assert_eq!(raw.response(5)["result"]["isError"], true);
    raw.send(call_msg(6, "resource_read", json!({"id": 7})));
    assert_eq!(raw.response(6)["result"]["isError"], true);
    // Still answering; a call without arguments is a call with none.
    raw.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "team_doc_list"}}));
    let r = raw.response(7);
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert_eq!(r["result"]["structuredContent"]["files"], json!([]));

    raw.close_stdin();
    let (status, stderr) = raw.wait(EXIT_GUARD);
    assert_eq!(status.code(), Some(0), "exit on end of input: {stderr}");
    assert!(stderr.contains("aw-mcp: team_doc_read"), "{stderr}");
    for line in &raw.seen {
        mcp_common::check_jsonrpc(line);
    }
    assert_eq!(
        raw.seen.len(),
        7,
        "one line per response, nothing else: {:?}",
        raw.seen
    );
}

#[test]
fn end_of_input_before_initialisation_exits_0() {
    let team = Team::new();
    let out = team.run("aw-mcp", &["--agent", "alice"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty());
}

#[test]
fn end_of_input_during_an_inbox_wait_exits_0() {
    use mcp_common::Raw;
    let team = Team::new();
    let mut raw = Raw::start(&team, "alice");
    raw.initialize();
    raw.send(call_msg(2, "my_inbox", json!({"wait_seconds": 120})));
    // Other calls are answered while the wait is under way.
    raw.send(call_msg(
        3,
        "channel_send",
        json!({"message": "while waiting"}),
    ));
    let r = raw.response(3);
    assert_eq!(r["result"]["structuredContent"]["message"], "while waiting");
    raw.close_stdin();
    let (status, stderr) = raw.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
}

fn signal_test(sig: nix::sys::signal::Signal, initialise: bool, want: i32) {
    use mcp_common::Raw;
    let team = Team::new();
    let mut raw = Raw::start(&team, "alice");
    if initialise {
        raw.initialize();
        raw.send(call_msg(2, "my_inbox", json!({"wait_seconds": 120})));
        raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
        raw.response(3);
    } else {
        // Serving, but not initialised: a ping is answered before initialize.
        raw.send(json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}));
        raw.response(9);
    }
    nix::sys::signal::kill(raw.pid(), sig).unwrap();
    let (status, stderr) = raw.wait(EXIT_GUARD);
    assert_eq!(status.code(), Some(want), "{sig}: {status:?} {stderr}");
}

#[test]
fn sigterm_exits_0() {
    signal_test(nix::sys::signal::Signal::SIGTERM, true, 0);
}

#[test]
fn sigint_exits_130() {
    signal_test(nix::sys::signal::Signal::SIGINT, true, 130);
}

#[test]
fn signals_before_initialisation_end_the_server() {
    signal_test(nix::sys::signal::Signal::SIGTERM, false, 0);
    signal_test(nix::sys::signal::Signal::SIGINT, false, 130);
}
