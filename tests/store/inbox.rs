//! Inboxes and ack cursors, with no other process running: mentions, priority, the sender's
//! own messages, e-mail addresses, reading without acknowledging, `aw-ctl ack` moving forward
//! only and clamped to the newest entry, and concurrent acks that never lose a cursor.

use crate::common;

use std::collections::BTreeMap;
use std::process::Stdio;

use serde_json::Value;

use common::{Entry, Rng, Root, entry_from_json, json_lines, snapshot};

/// One inbox message of `aw-peek --inbox --json`.
#[derive(Debug)]
struct Msg {
    entry: Entry,
    priority: String,
}

fn inbox(root: &Root, inst: &str, agent: &str) -> Vec<Msg> {
    let out = root.ok("aw-peek", &["-i", inst, "--inbox", agent, "--json"], None);
    json_lines(out.as_bytes())
        .iter()
        .map(|v| {
            let o = v.as_object().expect("an inbox message is an object");
            let keys: Vec<&str> = o.keys().map(String::as_str).collect();
            assert_eq!(keys.len(), 3, "inbox message keys: {keys:?}");
            assert_eq!(o.get("unread"), Some(&Value::Bool(true)), "{v}");
            let priority = o
                .get("priority")
                .and_then(Value::as_str)
                .expect("priority")
                .to_string();
            assert!(priority == "normal" || priority == "high", "{v}");
            Msg {
                entry: entry_from_json(o.get("entry").expect("entry")),
                priority,
            }
        })
        .collect()
}

fn ids(msgs: &[Msg]) -> Vec<u64> {
    msgs.iter().map(|m| m.entry.id).collect()
}

fn ack(root: &Root, inst: &str, agent: &str, until: Option<u64>) -> u64 {
    let mut args = vec!["-i".to_string(), inst.into(), "ack".into(), agent.into()];
    if let Some(u) = until {
        args.extend(["--until".to_string(), u.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::parse_id(&root.ok("aw-ctl", &args, None))
}

fn cursors(root: &Root, inst: &str) -> BTreeMap<String, u64> {
    let path = root.inst_dir(inst).join("_state/cursors.json");
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).expect("cursors.json is a JSON object of ids"),
        Err(_) => BTreeMap::new(),
    }
}

fn register(root: &Root, inst: &str, agents: &[&str]) {
    for a in agents {
        let out = root.ok("aw-ctl", &["-i", inst, "new", a], None);
        assert_eq!(out, format!("{a}@{inst}\n"));
    }
}

#[test]
fn mentions_priority_and_acks() {
    let root = Root::new();
    let i = "team";
    register(&root, i, &["coder", "reviewer", "tester"]);

    let m1 = root.send(i, &[], "@coder please look at line 12");
    let m2 = root.send(i, &[], "@coder and @reviewer: sync up");
    let m3 = root.send(i, &["-f", "coder"], "@coder note to self, @reviewer done");
    let m4 = root.send(i, &[], "mail coder@example.com about it");
    let m5 = root.send(i, &["-f", "reviewer"], "(@coder) this is URGENT!");
    let m6 = root.send(i, &[], "@coder asap please");
    let m7 = root.send(i, &[], "@coder I am blocked.");
    let m8 = root.send(i, &[], "@coder critical bug");
    let m9 = root.send(i, &[], "@coder it is unblocked, no urgency");
    let m10 = root.send(i, &["-t", "coder"], "routed with --to");
    // An unregistered @name is sent as text, with a warning that names the agents.
    let out = root.run(
        "aw-send",
        &["-i", i, "nobody is mentioned here, @nobody"],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let m11 = common::parse_id(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(m11, 11);
    let warning = String::from_utf8(out.stderr).unwrap();
    assert!(
        warning.starts_with("aw-send: warning: ")
            && warning.contains("@nobody")
            && warning.contains("coder, reviewer, tester")
            && warning.lines().count() == 1,
        "warning about @nobody: {warning:?}"
    );

    let entries = root.entries(i);
    let mentions = |id: u64| entries[id as usize - 1].mentions.clone();
    assert_eq!(mentions(m1), ["coder"]);
    assert_eq!(mentions(m2), ["coder", "reviewer"]);
    assert_eq!(mentions(m3), ["coder", "reviewer"]);
    assert!(
        mentions(m4).is_empty(),
        "an e-mail address is not a mention"
    );
    assert_eq!(mentions(m10), ["coder"]);
    assert_eq!(entries[m10 as usize - 1].message, "@coder routed with --to");
    assert!(
        mentions(m11).is_empty(),
        "an unregistered @name is not a mention"
    );

    let coder = inbox(&root, i, "coder");
    assert_eq!(
        ids(&coder),
        [m1, m2, m5, m6, m7, m8, m9, m10],
        "coder's inbox: its mentions, not its own message, not the e-mail"
    );
    let prio: BTreeMap<u64, &str> = coder
        .iter()
        .map(|m| (m.entry.id, m.priority.as_str()))
        .collect();
    assert_eq!(prio[&m1], "normal");
    assert_eq!(prio[&m2], "high", "two agents mentioned");
    assert_eq!(prio[&m5], "high", "urgent");
    assert_eq!(prio[&m6], "high", "asap");
    assert_eq!(prio[&m7], "high", "blocked");
    assert_eq!(prio[&m8], "high", "critical");
    assert_eq!(prio[&m9], "normal", "unblocked and urgency are other words");
    assert_eq!(prio[&m10], "normal");
    for m in &coder {
        assert_eq!(
            m.entry,
            entries[m.entry.id as usize - 1],
            "the entry as in the channel"
        );
    }
    assert_eq!(ids(&inbox(&root, i, "reviewer")), [m2, m3]);
    assert_eq!(inbox(&root, i, "tester").len(), 0);

    // The other spellings of the same inbox.
    let a = root.ok("aw-peek", &["-i", i, "--inbox", "coder", "--json"], None);
    let b = root.ok("aw-peek", &["-i", i, "coder", "--json"], None);
    let c = root.ok("aw-peek", &["coder@team", "--json"], None);
    let d = root.ok("aw-peek", &["--inbox", "coder@team", "--json"], None);
    assert!(a == b && a == c && a == d, "inbox spellings disagree");

    // Reading changes nothing: not the cursors, not any file.
    let before = snapshot(root.path());
    for _ in 0..3 {
        assert_eq!(ids(&inbox(&root, i, "coder")).len(), 8);
        root.ok("aw-peek", &["-i", i, "--json", "-n", "0"], None);
        root.ok("aw-ctl", &["-i", i, "ls"], None);
    }
    common::assert_same_tree(&before, &snapshot(root.path()), "reading");
    assert!(cursors(&root, i).is_empty());

    // ack moves forward only.
    assert_eq!(ack(&root, i, "coder", Some(m5)), m5);
    assert_eq!(ids(&inbox(&root, i, "coder")), [m6, m7, m8, m9, m10]);
    assert_eq!(
        ack(&root, i, "coder", Some(m2)),
        m5,
        "an ack never moves back"
    );
    assert_eq!(ack(&root, i, "coder", Some(0)), m5);
    assert_eq!(ids(&inbox(&root, i, "coder")), [m6, m7, m8, m9, m10]);
    assert_eq!(ack(&root, i, "coder", Some(m7)), m7);
    assert_eq!(ids(&inbox(&root, i, "coder")), [m8, m9, m10]);
    // Another agent's cursor is its own.
    assert_eq!(ids(&inbox(&root, i, "reviewer")), [m2, m3]);
    assert_eq!(
        ack(&root, i, "reviewer", None),
        m11,
        "default: the newest entry"
    );
    assert_eq!(inbox(&root, i, "reviewer").len(), 0);
    assert_eq!(
        cursors(&root, i),
        BTreeMap::from([("coder".to_string(), m7), ("reviewer".to_string(), m11)])
    );

    // --until beyond the newest entry is clamped, so a later message stays unread.
    assert_eq!(ack(&root, i, "coder", Some(1000)), m11);
    assert_eq!(inbox(&root, i, "coder").len(), 0);
    let later = root.send(i, &[], "@coder a later message");
    assert_eq!(later, 12);
    assert_eq!(ids(&inbox(&root, i, "coder")), [later]);
    assert_eq!(cursors(&root, i)["coder"], m11);
    assert_eq!(ack(&root, i, "coder", None), later);
    assert_eq!(inbox(&root, i, "coder").len(), 0);

    // An agent of another instance, through agent@instance.
    register(&root, "other", &["coder"]);
    assert_eq!(inbox(&root, "other", "coder").len(), 0);
    root.send("other", &["-t", "coder@other"], "hello other");
    assert_eq!(root.entries("other")[0].message, "@coder hello other");
    let out = root.ok("aw-peek", &["coder@other", "--json"], None);
    assert_eq!(json_lines(out.as_bytes()).len(), 1);
    assert_eq!(
        cursors(&root, i)["coder"],
        later,
        "other instances are separate"
    );
}

/// 32 `aw-ctl ack` processes at once, for several agents and many on the same agent, with
/// assorted `--until` values: afterwards each cursor is the largest requested value, clamped
/// to the newest entry, and never below where it was.
#[test]
fn concurrent_acks_never_lose_or_move_back_a_cursor() {
    let root = Root::new();
    let i = "acks";
    let agents = ["a0", "a1", "a2", "a3", "hot"];
    register(&root, i, &agents);
    let newest = 40;
    for n in 1..=newest {
        root.send(i, &[], &format!("@a0 @a1 @a2 @a3 @hot message {n}"));
    }
    let mut rng = Rng::new(0xacc);
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for round in 0..6 {
        // Start from known cursors, some above what this round will ask for.
        for a in agents {
            let start = rng.below(20);
            let got = ack(&root, i, a, Some(start));
            let want = expected.get(a).copied().unwrap_or(0).max(start);
            assert_eq!(got, want, "round {round}: {a} before the race");
            expected.insert(a.to_string(), want);
        }
        let at_start = expected.clone();
        let mut children = Vec::new();
        for k in 0..32 {
            // Half of the calls on one agent, the rest spread over the others.
            let agent = if k % 2 == 0 {
                "hot"
            } else {
                agents[rng.below(4) as usize]
            };
            let until = match rng.below(6) {
                0 => None,
                1 => Some(newest + 1 + rng.below(100)),
                _ => Some(rng.below(newest + 1)),
            };
            let mut cmd = root.cmd("aw-ctl");
            cmd.args(["-i", i, "ack", agent]);
            if let Some(u) = until {
                cmd.args(["--until", &u.to_string()]);
            }
            let child = cmd
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn aw-ctl ack");
            let asked = until.unwrap_or(newest).min(newest);
            let e = expected.get_mut(agent).unwrap();
            *e = (*e).max(asked);
            children.push((child, agent, asked));
        }
        for (child, agent, asked) in children {
            let out = child.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "ack {agent}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let printed = common::parse_id(&String::from_utf8(out.stdout).unwrap());
            // The others run in any order: the cursor printed is at least what was asked
            // and what it was before the race, and at most the largest value asked for.
            assert!(
                printed >= asked.max(at_start[agent]) && printed <= expected[agent],
                "round {round}: ack {agent} up to {asked} printed cursor {printed}"
            );
        }
        assert_eq!(
            cursors(&root, i),
            expected,
            "round {round}: cursors after the race"
        );
        for a in agents {
            let unread = ids(&inbox(&root, i, a));
            let want: Vec<u64> = (expected[a] + 1..=newest).collect();
            assert_eq!(unread, want, "round {round}: inbox of {a}");
        }
    }
}
