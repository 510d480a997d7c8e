//! The registry's name index (`_state/agents/` and `_state/agents.stamp`): exact after every
//! change aw makes (register, replace, unregister, concurrent registrations); a registry
//! edited by hand, and an index damaged, deleted or stamped in another boot, are seen at
//! once by `aw-send -t` and a mention, and the index is rebuilt; a large registry is spread
//! over buckets whose number follows it; a send that resolves names,
//! an inbox read and an ack, with an exact index, never open `agents.json`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

use common::agent_index::{Opens, assert_exact, bucket_file, indexed, registered};
use common::{Root, assert_error};

const INST: &str = "w";

/// A root with `names` registered in instance `w`.
fn team(names: &[&str]) -> Root {
    let root = Root::new();
    for n in names {
        root.ok("aw-ctl", &["-i", INST, "new", n], None);
    }
    root
}

fn state(root: &Root) -> PathBuf {
    root.inst_dir(INST).join("_state")
}

/// `aw-send -i w -t AGENT ping`: its exit status.
fn send_to(root: &Root, agent: &str) -> i32 {
    let out = root.run("aw-send", &["-i", INST, "-t", agent, "ping"], None);
    out.status.code().unwrap()
}

/// The mentions of the entry `aw-send -i w --json -- TEXT` posts.
fn mentions(root: &Root, text: &str) -> Vec<String> {
    let out = root.ok("aw-send", &["-i", INST, "--json", "--", text], None);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    v["mentions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

/// Write `agents.json` by hand, as another program would: `agents` in that order, no lock,
/// a new file renamed over the old one.
fn write_registry(root: &Root, agents: &[Value]) {
    let path = state(root).join("agents.json");
    let tmp = state(root).join("agents.json.by-hand");
    let text = serde_json::to_string_pretty(&json!({ "agents": agents })).unwrap();
    std::fs::write(&tmp, text + "\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

fn record(name: &str) -> Value {
    json!({"name": name, "backend": "external", "created": "2026-01-01T00:00:00.000Z"})
}

/// The file of the index that holds `name`'s record (with a few agents, every name's).
fn agent_file(root: &Root, name: &str) -> PathBuf {
    bucket_file(&root.inst_dir(INST), name)
}

#[test]
fn the_index_follows_register_replace_and_unregister_exactly() {
    let root = team(&["alice", "bob", "carol"]);
    let inst = root.inst_dir(INST);
    assert_exact(&inst);
    assert_eq!(registered(&inst).len(), 3);

    // Replaced: the file holds the new record (its model), created kept.
    let created = registered(&inst)["bob"]["created"].clone();
    root.ok(
        "aw-ctl",
        &["-i", INST, "new", "bob", "--replace", "--model", "gpt-5"],
        None,
    );
    assert_exact(&inst);
    let bob = indexed(&inst, "bob").unwrap();
    assert_eq!(bob["model"], "gpt-5");
    assert_eq!(bob["created"], created);

    // Unregistered: its record goes, and a send to it is refused.
    root.ok("aw-ctl", &["-i", INST, "rm", "carol"], None);
    assert_exact(&inst);
    assert_eq!(indexed(&inst, "carol"), None);
    assert_eq!(send_to(&root, "carol"), 66);
    assert_eq!(send_to(&root, "bob"), 0);
    assert_eq!(mentions(&root, "@alice @carol @bob"), ["alice", "bob"]);

    // A refused registration changes nothing.
    let out = root.run("aw-ctl", &["-i", INST, "new", "alice"], None);
    assert_error(&out, "aw-ctl", 73, "a second alice");
    assert_exact(&inst);
}

/// The inode of each file of the index, by name.
fn inodes(root: &Root) -> std::collections::BTreeMap<String, u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(state(root).join("agents"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            (name, e.metadata().unwrap().ino())
        })
        .collect()
}

#[test]
fn a_large_registry_is_spread_over_buckets_whose_number_follows_it() {
    let root = team(&["x"]);
    let inst = root.inst_dir(INST);
    // 33 agents written by hand: rebuilt by the first send, in two buckets.
    let agents: Vec<Value> = (1..=33).map(|i| record(&format!("a{i}"))).collect();
    write_registry(&root, &agents);
    assert_eq!(send_to(&root, "a7"), 0);
    assert_exact(&inst);
    assert_eq!(inodes(&root).len(), 2, "{:?}", inodes(&root));
    // 32: one bucket; 33 again: two.
    root.ok("aw-ctl", &["-i", INST, "rm", "a33"], None);
    assert_exact(&inst);
    assert_eq!(inodes(&root).len(), 1, "{:?}", inodes(&root));
    root.ok("aw-ctl", &["-i", INST, "new", "zed"], None);
    assert_exact(&inst);
    assert_eq!(inodes(&root).len(), 2, "{:?}", inodes(&root));

    // 300 agents: 16 buckets; a change writes the file of its name's bucket only.
    let agents: Vec<Value> = (1..=300).map(|i| record(&format!("a{i}"))).collect();
    write_registry(&root, &agents);
    assert_eq!(send_to(&root, "zed"), 66);
    assert_exact(&inst);
    let before = inodes(&root);
    assert_eq!(before.len(), 16, "{before:?}");
    root.ok("aw-ctl", &["-i", INST, "rm", "a150"], None);
    assert_exact(&inst);
    let after = inodes(&root);
    let mine = bucket_file(&inst, "a150");
    let mine = mine.file_name().unwrap().to_str().unwrap();
    for (file, ino) in &before {
        assert_eq!(after[file] == *ino, file != mine, "{file} (a150's: {mine})");
    }
    assert_eq!(send_to(&root, "a150"), 66);
    assert_eq!(send_to(&root, "a151"), 0);
    assert_eq!(mentions(&root, "@a1 @a150 @a300"), ["a1", "a300"]);
}

#[test]
fn twenty_processes_registering_at_once_leave_an_exact_index() {
    let root = team(&["lead"]);
    let children: Vec<_> = (0..20)
        .map(|i| {
            let mut c = root.cmd("aw-ctl");
            c.args(["-i", INST, "new", &format!("w{i}")])
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let inst = root.inst_dir(INST);
    assert_eq!(registered(&inst).len(), 21);
    assert_exact(&inst);
    for i in 0..20 {
        assert_eq!(send_to(&root, &format!("w{i}")), 0, "w{i}");
    }
}

#[test]
fn a_registry_edited_by_hand_is_seen_at_once_and_the_index_rebuilt() {
    let root = team(&["alice", "bob"]);
    let inst = root.inst_dir(INST);
    let mut agents: Vec<Value> = registered(&inst).into_values().collect();

    // dave added by hand: a send to him is taken, and the index has his file again.
    agents.push(record("dave"));
    write_registry(&root, &agents);
    assert_eq!(send_to(&root, "dave"), 0);
    assert_exact(&inst);

    // bob removed by hand: a send to him is refused (66), a mention of him is no mention.
    agents.retain(|a| a["name"] != "bob");
    write_registry(&root, &agents);
    assert_eq!(send_to(&root, "bob"), 66);
    assert_exact(&inst);
    assert_eq!(mentions(&root, "@bob and @dave"), ["dave"]);

    // An edit in place (same inode), of the record's content only.
    let path = state(&root).join("agents.json");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"dave\"", "\"erin\"");
    std::fs::write(&path, text).unwrap();
    assert_eq!(send_to(&root, "dave"), 66);
    assert_eq!(send_to(&root, "erin"), 0);
    assert_exact(&inst);
}

#[test]
fn a_damaged_deleted_or_stray_file_of_the_index_never_gives_a_wrong_answer() {
    let root = team(&["alice", "bob", "carol"]);
    let inst = root.inst_dir(INST);
    let bob = agent_file(&root, "bob");
    type Harm = fn(&Root, &Path);
    let cases: [(&str, Harm, &str, i32); 7] = [
        (
            "bob's file cut short",
            |_, f| std::fs::write(f, "{\"na").unwrap(),
            "bob",
            0,
        ),
        (
            "bob's file deleted",
            |_, f| std::fs::remove_file(f).unwrap(),
            "bob",
            0,
        ),
        (
            "bob's name over alice's record, written in place",
            |r, f| {
                let mut bucket: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
                bucket["bob"] = indexed(&r.inst_dir(INST), "alice").unwrap();
                std::fs::write(f, serde_json::to_vec_pretty(&bucket).unwrap()).unwrap()
            },
            "bob",
            0,
        ),
        (
            "a file for zed, no agent",
            |r, _| {
                let zed = serde_json::to_vec(&record("zed")).unwrap();
                std::fs::write(state(r).join("agents/zed.json"), zed).unwrap()
            },
            "zed",
            66,
        ),
        (
            "the stamp deleted",
            |r, _| std::fs::remove_file(state(r).join("agents.stamp")).unwrap(),
            "bob",
            0,
        ),
        (
            "the stamp damaged",
            |r, _| std::fs::write(state(r).join("agents.stamp"), "{}\n").unwrap(),
            "carol",
            0,
        ),
        (
            "the folder deleted",
            |r, _| std::fs::remove_dir_all(state(r).join("agents")).unwrap(),
            "alice",
            0,
        ),
    ];
    for (what, harm, name, code) in cases {
        harm(&root, &bob);
        assert_eq!(send_to(&root, name), code, "{what}: aw-send -t {name}");
        assert_exact(&inst);
    }
    // Damaged again, then a mention resolves right and rebuilds it too.
    std::fs::remove_file(&bob).unwrap();
    assert_eq!(mentions(&root, "@bob @zed"), ["bob"]);
    assert_exact(&inst);
}

#[test]
fn a_stamp_of_another_boot_is_not_trusted_and_an_exact_index_spares_the_registry() {
    let root = team(&["alice", "bob"]);
    let inst = root.inst_dir(INST);
    let registry = state(&root).join("agents.json");
    let opens = Opens::watch(&registry);

    // Exact: a send to bob that mentions alice, strict, resolves both without opening
    // agents.json; so does a mention of a name that is no agent.
    let out = root.ok(
        "aw-send",
        &[
            "-i",
            INST,
            "-t",
            "bob",
            "--strict",
            "--json",
            "--",
            "and @alice",
        ],
        None,
    );
    assert!(out.contains(r#""mentions":["bob","alice"]"#), "{out}");
    assert_eq!(opens.count(), 0, "agents.json was opened");
    assert_eq!(mentions(&root, "@alice and @nobody"), ["alice"]);
    // Only to list the agents in its warning about @nobody.
    assert_eq!(opens.count(), 1, "agents.json opened more than once");
    assert_eq!(mentions(&root, "@alice @bob"), ["alice", "bob"]);
    assert_eq!(opens.count(), 0, "agents.json was opened");
    // The refusal of an unknown recipient lists the agents: the registry is read whole.
    assert_eq!(send_to(&root, "nobody"), 66);
    assert!(opens.count() > 0, "the watch saw no open");

    // Another boot: the same stamp, its boot id changed. Not trusted (agents.json is read),
    // and stamped anew with this boot.
    let stamp_path = state(&root).join("agents.stamp");
    let mut stamp: Value = serde_json::from_slice(&std::fs::read(&stamp_path).unwrap()).unwrap();
    stamp["boot"] = json!("00000000-0000-0000-0000-000000000000");
    std::fs::write(&stamp_path, serde_json::to_vec(&stamp).unwrap()).unwrap();
    // And bob's file gone with it, as a crash may leave it.
    std::fs::remove_file(agent_file(&root, "bob")).unwrap();
    assert_eq!(send_to(&root, "bob"), 0);
    assert!(opens.count() > 0, "agents.json was not read");
    assert_exact(&inst);
    opens.count(); // The opens of assert_exact.
    assert_eq!(send_to(&root, "bob"), 0);
    assert_eq!(opens.count(), 0, "read again once the index was rebuilt");
}

#[test]
fn a_link_in_the_index_is_never_followed() {
    let root = team(&["alice", "bob"]);
    let inst = root.inst_dir(INST);
    let outside = root.path().join("outside.json");
    std::fs::write(&outside, "keep").unwrap();
    let bob = agent_file(&root, "bob");
    std::fs::remove_file(&bob).unwrap();
    std::os::unix::fs::symlink(&outside, &bob).unwrap();
    assert_eq!(send_to(&root, "bob"), 0);
    root.ok("aw-ctl", &["-i", INST, "new", "carol"], None);
    assert_exact(&inst);
    assert!(!bob.is_symlink(), "the link was replaced by bob's file");
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
}

#[test]
fn an_inbox_read_and_an_ack_check_their_agent_in_the_index_too() {
    let root = team(&["alice", "bob"]);
    root.send(INST, &["-f", "alice"], "@bob look");
    let opens = Opens::watch(&state(&root).join("agents.json"));
    let inbox = root.ok("aw-peek", &["-i", INST, "--inbox", "bob"], None);
    assert!(inbox.contains("@bob look"), "{inbox}");
    root.ok("aw-ctl", &["-i", INST, "ack", "bob"], None);
    assert_eq!(opens.count(), 0, "agents.json was opened");
    for (tool, args) in [
        ("aw-peek", &["-i", INST, "--inbox", "nobody"][..]),
        ("aw-ctl", &["-i", INST, "ack", "nobody"][..]),
    ] {
        let out = root.run(tool, args, None);
        let line = assert_error(&out, tool, 66, "an agent that is not");
        assert!(line.contains("no agent 'nobody'"), "{line}");
    }
}
