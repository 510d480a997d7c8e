//! The mention index (`_state/mentions/`): inboxes and unread counts answered from it equal
//! those found by reading the whole channel, for agents that never acked, messages to several
//! agents, the sender's own mentions, an instance written before the index existed, an index
//! left behind the channel (writers killed, a head from before the last appends, an unusable
//! or newer head), concurrent writers, and random channels.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use common::{Entry, Rng, Root, entry_from_json, json_lines};

const INST: &str = "w";
const AGENTS: [&str; 5] = ["alice", "bob", "carol", "dave", "erin"];
/// The length of `_state/mentions/_head`, and where it keeps the boot it was written in.
const HEAD_LEN: usize = 56;
const BOOT: std::ops::Range<usize> = 48..56;

fn setup(root: &Root, inst: &str) {
    for a in AGENTS {
        root.ok("aw-ctl", &["-i", inst, "new", a], None);
    }
}

/// A new root with the agents registered and `n` messages from alice to `to`.
fn team_with(n: usize, to: &str) -> Root {
    let root = Root::new();
    setup(&root, INST);
    for i in 0..n {
        root.send(INST, &["-f", "alice"], &format!("{to} number {i}"));
    }
    root
}

fn mentions_dir(root: &Root, inst: &str) -> std::path::PathBuf {
    root.inst_dir(inst).join("_state/mentions")
}

/// The ids an agent's file of the index holds.
fn index_ids(root: &Root, inst: &str, agent: &str) -> Option<Vec<u64>> {
    let b = std::fs::read(mentions_dir(root, inst).join(agent)).ok()?;
    assert_eq!(b.len() % 8, 0, "{agent}: not whole ids");
    Some(
        b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    )
}

fn cursors(root: &Root, inst: &str) -> BTreeMap<String, u64> {
    match std::fs::read(root.inst_dir(inst).join("_state/cursors.json")) {
        Ok(b) => serde_json::from_slice(&b).unwrap(),
        Err(_) => BTreeMap::new(),
    }
}

/// What every inbox holds, found by reading the whole channel: the entries after the agent's
/// cursor that mention it and are not from it.
fn scanned(root: &Root, inst: &str) -> BTreeMap<String, Vec<u64>> {
    // Damage met (a torn entry) is reported on stderr and is in no inbox.
    let all = root.read_all(inst).0;
    let cur = cursors(root, inst);
    AGENTS
        .iter()
        .map(|a| {
            let after = cur.get(*a).copied().unwrap_or(0);
            let ids = all
                .iter()
                .filter(|e| e.id > after && e.from != *a && e.mentions.iter().any(|m| m == a))
                .map(|e| e.id)
                .collect();
            (a.to_string(), ids)
        })
        .collect()
}

fn inbox(root: &Root, inst: &str, agent: &str) -> Vec<Entry> {
    let out = root.ok("aw-peek", &["-i", inst, "--inbox", agent, "--json"], None);
    json_lines(out.as_bytes())
        .iter()
        .map(|v| entry_from_json(&v["entry"]))
        .collect()
}

fn unread_ls(root: &Root, inst: &str) -> BTreeMap<String, u64> {
    let out = root.ok("aw-ctl", &["-i", inst, "ls", "--json"], None);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().into(),
                a["unread"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn unread_status(root: &Root, inst: &str) -> BTreeMap<String, u64> {
    let out = root.ok("aw-ctl", &["-i", inst, "status", "--json"], None);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().into(),
                a["unread"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Inboxes (`aw-peek --inbox`), and unread counts of `aw-ctl ls` and `status`, equal what a
/// read of the whole channel finds.
fn assert_answers_equal_scan(root: &Root, inst: &str) {
    let want = scanned(root, inst);
    let all: BTreeMap<u64, Entry> = root
        .read_all(inst)
        .0
        .into_iter()
        .map(|e| (e.id, e))
        .collect();
    let ls = unread_ls(root, inst);
    let status = unread_status(root, inst);
    for (agent, ids) in &want {
        let got = inbox(root, inst, agent);
        let got_ids: Vec<u64> = got.iter().map(|e| e.id).collect();
        assert_eq!(&got_ids, ids, "inbox of {agent}");
        for e in &got {
            assert_eq!(e, &all[&e.id], "inbox entry #{} of {agent}", e.id);
        }
        assert_eq!(ls[agent], ids.len() as u64, "aw-ctl ls: unread of {agent}");
        assert_eq!(
            status[agent],
            ids.len() as u64,
            "aw-ctl status: unread of {agent}"
        );
    }
}

/// The index files of `inst` equal those of an index rebuilt from its channel alone.
fn assert_index_equals_rebuilt(root: &Root, inst: &str) {
    let copy = format!("{inst}-rebuilt");
    let (from, to) = (root.inst_dir(inst), root.inst_dir(&copy));
    let _ = std::fs::remove_dir_all(&to);
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&from)
        .arg(&to)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::remove_dir_all(mentions_dir(root, &copy)).unwrap();
    // Any read builds it.
    root.ok("aw-ctl", &["-i", &copy, "ls"], None);
    assert_eq!(
        files(&mentions_dir(root, inst)),
        files(&mentions_dir(root, &copy)),
        "the live index differs from one rebuilt from the channel"
    );
    std::fs::remove_dir_all(&to).unwrap();
}

/// Every file of a directory with its content, empty agent files left out (a cut may leave
/// one where a rebuild writes none).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|d| {
            let d = d.unwrap();
            (
                d.file_name().into_string().unwrap(),
                std::fs::read(d.path()).unwrap(),
            )
        })
        .filter(|(_, b)| !b.is_empty())
        .collect()
}

#[test]
fn an_agent_that_never_acked_reads_its_inbox_from_the_index() {
    let root = Root::new();
    setup(&root, INST);
    let a = root.send(INST, &["-f", "alice"], "@bob first");
    root.send(INST, &["-f", "alice"], "nobody");
    let c = root.send(INST, &["-f", "carol"], "@bob second");
    root.send(INST, &["-f", "bob"], "@carol reply");
    assert_eq!(index_ids(&root, INST, "bob"), Some(vec![a, c]));
    // dave was never mentioned: no file, an empty inbox, nothing unread.
    assert_eq!(index_ids(&root, INST, "dave"), None);
    assert!(inbox(&root, INST, "dave").is_empty());
    assert_eq!(unread_ls(&root, INST)["dave"], 0);
    assert_eq!(unread_status(&root, INST)["dave"], 0);
    let ids: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![a, c]);
    assert_eq!(unread_ls(&root, INST)["bob"], 2);
    assert_answers_equal_scan(&root, INST);
    // Acked up to the first: the second is left.
    root.ok(
        "aw-ctl",
        &["-i", INST, "ack", "bob", "--until", &a.to_string()],
        None,
    );
    let ids: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![c]);
    assert_eq!(unread_status(&root, INST)["bob"], 1);
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}

#[test]
fn a_message_to_several_agents_is_in_each_inbox_once_and_never_the_senders() {
    let root = Root::new();
    setup(&root, INST);
    let id = root.send(
        INST,
        &["-f", "alice"],
        "@bob @carol @bob @alice @alice all of you",
    );
    for (agent, want) in [
        ("bob", true),
        ("carol", true),
        ("alice", false),
        ("dave", false),
    ] {
        let ids: Vec<u64> = inbox(&root, INST, agent).iter().map(|e| e.id).collect();
        assert_eq!(ids, if want { vec![id] } else { vec![] }, "{agent}");
        assert_eq!(
            index_ids(&root, INST, agent).unwrap_or_default(),
            if want { vec![id] } else { vec![] },
            "index of {agent}"
        );
    }
    // Several messages in one append (aw-send --lines).
    root.ok("aw-ctl", &["-i", INST, "ack", "bob"], None);
    let out = root.ok(
        "aw-send",
        &["-i", INST, "-f", "erin", "--lines"],
        Some(b"@bob @erin one\n@carol two\n@bob @carol @dave three\n"),
    );
    let sent: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(sent.len(), 3);
    let ids: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![sent[0], sent[2]]);
    assert_eq!(
        index_ids(&root, INST, "erin"),
        None,
        "the sender's own mention"
    );
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}

#[test]
fn an_instance_written_before_the_index_is_upgraded_in_place() {
    let root = Root::new();
    setup(&root, INST);
    let mut rng = Rng::new(7);
    for i in 0..60 {
        let from = rng.pick(&AGENTS);
        let to = rng.pick(&AGENTS);
        root.send(INST, &["-f", from], &format!("@{to} message {i}"));
    }
    root.ok(
        "aw-ctl",
        &["-i", INST, "ack", "carol", "--until", "20"],
        None,
    );
    // Today's layout: no index at all.
    std::fs::remove_dir_all(mentions_dir(&root, INST)).unwrap();
    let channel = std::fs::read(root.channel(INST)).unwrap();
    let want = scanned(&root, INST);
    // The first read builds the index.
    let ids: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(ids, want["bob"]);
    assert!(
        mentions_dir(&root, INST).join("_head").exists(),
        "no index after a read"
    );
    let head = std::fs::read(mentions_dir(&root, INST).join("_head")).unwrap();
    assert_eq!(&head[..4], b"awmi");
    assert_eq!(
        u32::from_le_bytes(head[4..8].try_into().unwrap()),
        2,
        "version"
    );
    assert_answers_equal_scan(&root, INST);
    assert_eq!(
        std::fs::read(root.channel(INST)).unwrap(),
        channel,
        "channel changed"
    );
    // The same through aw-ctl ls first, and through a send (the writer upgrades it).
    for first in ["ls", "send"] {
        std::fs::remove_dir_all(mentions_dir(&root, INST)).unwrap();
        match first {
            "ls" => drop(unread_ls(&root, INST)),
            _ => drop(root.send(INST, &["-f", "dave"], "@erin after the upgrade")),
        }
        assert!(mentions_dir(&root, INST).join("_head").exists(), "{first}");
        assert_answers_equal_scan(&root, INST);
        assert_index_equals_rebuilt(&root, INST);
    }
}

#[test]
fn an_index_left_behind_the_channel_catches_up_exactly() {
    let root = team_with(10, "@bob @carol");
    let head = mentions_dir(&root, INST).join("_head");
    let old_head = std::fs::read(&head).unwrap();
    for i in 0..10 {
        root.send(INST, &["-f", "carol"], &format!("@bob @dave late {i}"));
    }
    // An append that wrote its ids but not the head: ids past the head.
    std::fs::write(&head, &old_head).unwrap();
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);

    // An append by a writer that knows no index (an older aw): the log is ahead.
    std::fs::write(&head, &old_head).unwrap();
    let bob = index_ids(&root, INST, "bob").unwrap();
    let keep: Vec<u8> = bob
        .iter()
        .filter(|&&id| id <= 10)
        .flat_map(|id| id.to_le_bytes())
        .collect();
    std::fs::write(mentions_dir(&root, INST).join("bob"), keep).unwrap();
    std::fs::write(mentions_dir(&root, INST).join("dave"), b"").unwrap();
    assert_answers_equal_scan(&root, INST);
    root.send(INST, &["-f", "erin"], "@bob after");
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);

    // A head that cannot be read, or one cut short: rebuilt whole.
    for bad in [
        &b"garbage that is no head at all"[..],
        &b"awmi"[..],
        &[][..],
    ] {
        std::fs::write(&head, bad).unwrap();
        assert_answers_equal_scan(&root, INST);
        assert_index_equals_rebuilt(&root, INST);
    }

    // A head of a newer version is left alone, and inboxes are read from the channel.
    let mut newer = std::fs::read(&head).unwrap();
    newer[4..8].copy_from_slice(&3u32.to_le_bytes());
    std::fs::write(&head, &newer).unwrap();
    root.send(INST, &["-f", "erin"], "@bob @carol with a newer index");
    assert_answers_equal_scan(&root, INST);
    assert_eq!(
        std::fs::read(&head).unwrap(),
        newer,
        "a newer head was changed"
    );
}

#[test]
fn a_channel_replaced_under_the_index_is_indexed_again() {
    let root = Root::new();
    setup(&root, INST);
    setup(&root, "other");
    for i in 0..8 {
        root.send(INST, &["-f", "alice"], &format!("@bob here {i}"));
    }
    for i in 0..12 {
        root.send("other", &["-f", "carol"], &format!("@dave there {i}"));
    }
    // The log (and its offset index) of another instance put in place of this one's.
    for f in ["channel.md", "_state/channel.idx"] {
        std::fs::copy(root.inst_dir("other").join(f), root.inst_dir(INST).join(f)).unwrap();
    }
    assert_answers_equal_scan(&root, INST);
    assert!(inbox(&root, INST, "bob").is_empty());
    assert_eq!(inbox(&root, INST, "dave").len(), 12);
    assert_index_equals_rebuilt(&root, INST);
}

fn spawn_sender(root: &Root, inst: &str, from: &str, text: &str) -> Child {
    root.cmd("aw-send")
        .args(["-i", inst, "-f", from, "--", text])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn writers_killed_mid_append_leave_an_index_equal_to_a_rebuilt_one() {
    let root = Root::new();
    setup(&root, INST);
    let mut rng = Rng::new(21);
    for round in 0..12 {
        let mut kids = Vec::new();
        for i in 0..6 {
            let from = rng.pick(&AGENTS);
            let text = format!(
                "@{} @{} round {round} writer {i}",
                rng.pick(&AGENTS),
                rng.pick(&AGENTS)
            );
            kids.push((spawn_sender(&root, INST, from, &text), rng.below(3000)));
        }
        for (kid, at) in &mut kids {
            std::thread::sleep(Duration::from_micros(*at / 6));
            let _ = kill(Pid::from_raw(kid.id() as i32), Signal::SIGKILL);
        }
        for (mut kid, _) in kids {
            let _ = kid.wait();
        }
        assert_answers_equal_scan(&root, INST);
    }
    // The next append catches up whatever a killed writer left behind.
    root.send(INST, &["-f", "erin"], "@alice @bob after the kills");
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}

#[test]
fn concurrent_writers_of_several_processes_index_every_mention() {
    let root = Root::new();
    setup(&root, INST);
    let mut kids = Vec::new();
    for (w, from) in AGENTS.iter().enumerate() {
        let mut lines = String::new();
        for i in 0..40 {
            let to = AGENTS[(w + i) % AGENTS.len()];
            let also = AGENTS[(w * 3 + i * 7) % AGENTS.len()];
            lines.push_str(&format!("@{to} @{also} from {from} number {i}\n"));
        }
        let mut kid = root
            .cmd("aw-send")
            .args(["-i", INST, "-f", from, "--lines"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = kid.stdin.take().unwrap();
        std::thread::spawn(move || {
            use std::io::Write;
            stdin.write_all(lines.as_bytes()).unwrap();
        });
        kids.push(kid);
    }
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    assert_eq!(root.entries(INST).len(), 200);
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}

#[test]
fn on_random_channels_index_answers_equal_whole_channel_reads() {
    for seed in 1..=4 {
        let root = Root::new();
        setup(&root, INST);
        let mut rng = Rng::new(seed);
        let mut lines = String::new();
        for i in 0..rng.range(20, 80) {
            let mut text = format!("message {i}");
            for _ in 0..rng.below(4) {
                text.push_str(&format!(" @{}", rng.pick(&AGENTS)));
            }
            if rng.chance(10) {
                text.push_str(" @nobody");
            }
            lines.push_str(&text);
            lines.push('\n');
            if rng.chance(20) || i % 17 == 16 {
                let from = rng.pick(&AGENTS);
                root.ok(
                    "aw-send",
                    &["-i", INST, "-f", from, "--lines"],
                    Some(std::mem::take(&mut lines).as_bytes()),
                );
            }
            if rng.chance(8) {
                let until = rng.range(1, i + 2).to_string();
                root.ok(
                    "aw-ctl",
                    &["-i", INST, "ack", rng.pick(&AGENTS), "--until", &until],
                    None,
                );
            }
        }
        if !lines.is_empty() {
            root.ok(
                "aw-send",
                &["-i", INST, "-f", "user", "--lines"],
                Some(lines.as_bytes()),
            );
        }
        assert_answers_equal_scan(&root, INST);
        assert_index_equals_rebuilt(&root, INST);
    }
}

/// A channel larger than the memory aw-peek may use: the whole of it, and everything after
/// `--since`, is printed as it is read (entry for entry), not held first.
#[test]
fn a_whole_channel_read_streams_in_bounded_memory() {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    const ENTRIES: u64 = 280_000;
    /// Address space allowed: far less than the 64 MB channel.
    const LIMIT: u64 = 48 << 20;
    let root = Root::new();
    root.send(INST, &["-q"], "first");
    let mut w = std::io::BufWriter::new(
        std::fs::OpenOptions::new()
            .append(true)
            .open(root.channel(INST))
            .unwrap(),
    );
    for id in 2..=ENTRIES {
        let e = aw::channel::Entry {
            id,
            timestamp: "2026-01-01T10:00:00.000Z".into(),
            from: "alice".into(),
            message: format!(
                "update {id}: {}",
                "the parser change looks right to me ".repeat(5)
            ),
            mentions: Vec::new(),
        };
        w.write_all(&aw::channel::render(&e)).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    assert!(std::fs::metadata(root.channel(INST)).unwrap().len() > 60 << 20);
    for args in [&["-n", "0"][..], &["--since", "0"], &["-n", "0", "--json"]] {
        let mut cmd = root.cmd("aw-peek");
        cmd.args(["-i", INST]).args(args);
        let lim = nix::libc::rlimit {
            rlim_cur: LIMIT,
            rlim_max: LIMIT,
        };
        // SAFETY: setrlimit is async-signal-safe, and `lim` is copied into the closure.
        unsafe {
            cmd.pre_exec(move || {
                if nix::libc::setrlimit(nix::libc::RLIMIT_AS, &lim) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let starts = if args.contains(&"--json") { "{" } else { "#" };
        let n = text.lines().filter(|l| l.starts_with(starts)).count() as u64;
        assert_eq!(n, ENTRIES, "{args:?}: entries printed");
    }
}

/// A log cut inside its last entry (a torn write): the cut entry leaves every inbox, and the
/// entry that takes its id next is in the inboxes of its own mentions only.
#[test]
fn a_torn_final_entry_leaves_the_inboxes_and_its_id_is_indexed_anew() {
    let root = team_with(5, "@bob");
    let log = root.channel(INST);
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let ids: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![1, 2, 3, 4], "the torn entry is not in the inbox");
    assert_answers_equal_scan(&root, INST);
    let out = root.run(
        "aw-send",
        &["-i", INST, "-f", "alice", "--", "@carol the next one"],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(common::parse_id(&String::from_utf8_lossy(&out.stdout)), 5);
    let ids: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![1, 2, 3, 4]);
    let ids: Vec<u64> = inbox(&root, INST, "carol").iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![5]);
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}

/// Mentions as another program may write them in a header (`to=`): a name that is not an
/// agent name (a path) is never a file of the index, and a name given twice counts once.
#[test]
fn mentions_written_by_hand_never_name_a_file_outside_the_index() {
    use std::io::Write;
    let root = Root::new();
    setup(&root, INST);
    root.send(INST, &["-f", "alice"], "@bob first");
    let e = aw::channel::Entry {
        id: 2,
        timestamp: "2026-01-01T10:00:00.000Z".into(),
        from: "carol".into(),
        message: "by hand".into(),
        mentions: vec![
            "../../evil".into(),
            "bob".into(),
            "bob".into(),
            "_head".into(),
        ],
    };
    std::fs::OpenOptions::new()
        .append(true)
        .open(root.channel(INST))
        .unwrap()
        .write_all(&aw::channel::render(&e))
        .unwrap();
    let ids: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![1, 2]);
    root.send(INST, &["-f", "alice"], "@carol after");
    let names: Vec<String> = files(&mentions_dir(&root, INST)).into_keys().collect();
    assert_eq!(names, ["_head", "bob", "carol"]);
    assert!(!root.path().join("evil").exists());
    assert!(!root.inst_dir(INST).join("evil").exists());
    let head = std::fs::read(mentions_dir(&root, INST).join("_head")).unwrap();
    assert_eq!(&head[..4], b"awmi", "the head was not overwritten by ids");
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}

/// An append that wrote ids and stopped before its entry was kept (the head says ids past its
/// entry may be written): the next append cuts them, also from agents it does not mention.
#[test]
fn ids_of_an_append_that_did_not_finish_are_cut_from_every_agent() {
    let root = team_with(5, "@bob");
    let dir = mentions_dir(&root, INST);
    let mut head = std::fs::read(dir.join("_head")).unwrap();
    assert_eq!(head.len(), HEAD_LEN);
    head[32..40].copy_from_slice(&6u64.to_le_bytes());
    std::fs::write(dir.join("_head"), &head).unwrap();
    std::fs::write(dir.join("carol"), 6u64.to_le_bytes()).unwrap();
    assert!(inbox(&root, INST, "carol").is_empty());
    let id = root.send(INST, &["-f", "alice"], "@dave the sixth");
    assert_eq!(id, 6);
    assert!(
        inbox(&root, INST, "carol").is_empty(),
        "a stale id in carol's inbox"
    );
    assert_eq!(
        index_ids(&root, INST, "carol").unwrap_or_default(),
        Vec::<u64>::new()
    );
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}

/// What a crash can leave of an agent's file, neither it nor the head being flushed: cut
/// through an id, emptied, or short of its last ids while the head was kept. Each is found
/// (the file is not whole ids, or the head was written before this boot and the files do
/// not hold what it counts): the inbox still holds every entry of the channel, and the next
/// append repairs the index.
#[test]
fn an_agent_file_a_crash_damaged_is_found_and_rebuilt() {
    type Damage = fn(&[u8]) -> Vec<u8>;
    let cases: [(&str, Damage, bool); 4] = [
        ("cut through an id", |b| b[..b.len() - 3].to_vec(), false),
        (
            "cut through an id, new boot",
            |b| b[..b.len() - 3].to_vec(),
            true,
        ),
        ("emptied", |_| Vec::new(), true),
        (
            "short of its last ids",
            |b| b[..b.len() - 16].to_vec(),
            true,
        ),
    ];
    for (what, damage, new_boot) in cases {
        let root = team_with(6, "@bob @carol");
        let dir = mentions_dir(&root, INST);
        let bob = std::fs::read(dir.join("bob")).unwrap();
        assert_eq!(bob.len(), 6 * 8, "{what}");
        let crash = || {
            std::fs::write(dir.join("bob"), damage(&bob)).unwrap();
            if new_boot {
                // The crash was followed by a new boot: the head was written in another.
                let mut head = std::fs::read(dir.join("_head")).unwrap();
                assert_eq!(head.len(), HEAD_LEN, "{what}");
                head[BOOT].copy_from_slice(&0x5eed_u64.to_le_bytes());
                std::fs::write(dir.join("_head"), &head).unwrap();
            }
        };
        crash();
        let want = scanned(&root, INST);
        let got: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
        assert_eq!(got, want["bob"], "{what}: inbox of bob");
        assert_answers_equal_scan(&root, INST);
        // The next append finds it too, and leaves an index equal to a rebuilt one.
        crash();
        let to = if new_boot { "@carol" } else { "@bob @carol" };
        root.send(INST, &["-f", "erin"], &format!("{to} after the crash"));
        assert_index_equals_rebuilt(&root, INST);
        assert_answers_equal_scan(&root, INST);
    }
}

/// An id in an agent's file whose entry does not mention the agent (a file damaged in
/// place): the inbox holds only the entries for the agent, and the index is rebuilt.
#[test]
fn an_id_whose_entry_does_not_mention_the_agent_is_never_in_its_inbox() {
    let root = team_with(4, "@bob");
    let other = root.send(INST, &["-f", "alice"], "@carol not for bob");
    let dir = mentions_dir(&root, INST);
    let mut bob = std::fs::read(dir.join("bob")).unwrap();
    let n = bob.len();
    bob[n - 8..].copy_from_slice(&other.to_le_bytes());
    std::fs::write(dir.join("bob"), &bob).unwrap();
    let got: Vec<u64> = inbox(&root, INST, "bob").iter().map(|e| e.id).collect();
    assert_eq!(got, [1, 2, 3, 4], "inbox of bob");
    assert_eq!(index_ids(&root, INST, "bob").unwrap(), [1, 2, 3, 4]);
    assert_answers_equal_scan(&root, INST);
    assert_index_equals_rebuilt(&root, INST);
}
