//! The board under concurrency: real `aw-ctl board claim` processes racing for cards, and
//! claimers killed with SIGKILL, on one instance.

use crate::common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

use common::Root;
use serde_json::Value;

const CARDS: u64 = 10;
const CLAIMERS: usize = 50;
const ROUNDS: usize = 3;

/// `aw-ctl board ARGS` on instance `inst` of `root`, its output piped.
fn board(root: &Root, inst: &str, args: &[&str]) -> Command {
    let mut c = root.cmd("aw-ctl");
    c.args(["-i", inst, "board"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Add `n` cards to `inst`, each with no dependency.
fn add_cards(root: &Root, inst: &str, n: u64) {
    for i in 1..=n {
        let out = root.ok(
            "aw-ctl",
            &[
                "-i",
                inst,
                "board",
                "add",
                &format!("card {i}"),
                "--as",
                "lead",
            ],
            None,
        );
        assert_eq!(
            out.trim(),
            i.to_string(),
            "the ids of new cards count from 1"
        );
    }
}

/// The card files of `inst`, parsed, by id.
fn cards(root: &Root, inst: &str) -> BTreeMap<u64, Value> {
    let dir = root.inst_dir(inst).join("board");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap())
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
        out.insert(v["id"].as_u64().unwrap(), v);
    }
    out
}

/// Start `n` claimers of `--next` at once, named `w0`..; they are started before any is
/// waited for.
fn start_claimers(root: &Root, inst: &str, n: usize) -> Vec<Child> {
    (0..n)
        .map(|i| {
            board(root, inst, &["claim", "--next", "--as", &format!("w{i}")])
                .spawn()
                .expect("spawn aw-ctl")
        })
        .collect()
}

#[test]
fn fifty_claimers_racing_for_ten_cards_claim_each_exactly_once() {
    let root = Root::new();
    for round in 0..ROUNDS {
        let inst = format!("race{round}");
        add_cards(&root, &inst, CARDS);
        let claimers = start_claimers(&root, &inst, CLAIMERS);
        let mut won: BTreeMap<u64, String> = BTreeMap::new();
        let mut none = 0;
        for (i, c) in claimers.into_iter().enumerate() {
            let out = c.wait_with_output().unwrap();
            let stdout = String::from_utf8(out.stdout.clone()).unwrap();
            match out.status.code() {
                Some(0) => {
                    let id: u64 = stdout.trim().parse().expect("claim prints the id");
                    let before = won.insert(id, format!("w{i}"));
                    assert!(before.is_none(), "round {round}: card {id} claimed twice");
                }
                Some(1) => {
                    common::assert_error(&out, "aw-ctl", 1, "a claimer that found no card");
                    none += 1;
                }
                code => panic!(
                    "round {round}: claimer w{i} exited {code:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
        assert_eq!(won.len() as u64, CARDS, "round {round}: every card claimed");
        assert_eq!(
            none,
            CLAIMERS - CARDS as usize,
            "round {round}: the others got none"
        );
        // The files say the same: each card claimed once, by the one that printed its id.
        for (id, card) in cards(&root, &inst) {
            assert_eq!(card["state"], "claimed", "round {round}: card {id}");
            assert_eq!(card["holder"]["agent"], won[&id].as_str());
            let claims = card["history"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["event"] == "claimed")
                .count();
            assert_eq!(claims, 1, "round {round}: card {id} has one claim");
        }
        // With every card held, one more claimer finds none.
        let out = board(&root, &inst, &["claim", "--next", "--as", "late"])
            .output()
            .unwrap();
        common::assert_error(&out, "aw-ctl", 1, "a claimer after all cards went");
    }
}

#[test]
fn claimers_racing_for_one_card_by_id_let_one_win_and_refuse_the_others_with_75() {
    let root = Root::new();
    add_cards(&root, "one", 1);
    let claimers: Vec<Child> = (0..20)
        .map(|i| {
            board(&root, "one", &["claim", "1", "--as", &format!("w{i}")])
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<Option<i32>> = claimers
        .into_iter()
        .map(|c| c.wait_with_output().unwrap().status.code())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == Some(0)).count(),
        1,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == Some(75)).count(),
        19,
        "{codes:?}"
    );
}

#[test]
fn claimers_killed_mid_claim_leave_every_card_whole_and_none_claimed_twice() {
    let root = Root::new();
    let inst = "killed";
    add_cards(&root, inst, CARDS);
    for round in 0..ROUNDS {
        // Half of the claimers are killed at once, whatever they are doing.
        let mut claimers = start_claimers(&root, inst, 20);
        for (i, c) in claimers.iter_mut().enumerate() {
            if i % 2 == round % 2 {
                c.kill().unwrap();
            }
        }
        for c in claimers {
            let out = c.wait_with_output().unwrap();
            let code = out.status.code();
            assert!(
                matches!(code, None | Some(0) | Some(1)),
                "a claimer exited {code:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Every card file is whole, and none was claimed more than once.
        for (id, card) in cards(&root, inst) {
            let claims = card["history"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["event"] == "claimed")
                .count();
            assert!(claims <= 1, "card {id} claimed {claims} times");
            assert_eq!(card["state"] == "claimed", claims == 1, "card {id}: {card}");
        }
    }
    // The lock was not left held: the cards still open go, one each, to new claimers.
    let open = cards(&root, inst)
        .values()
        .filter(|c| c["state"] == "open")
        .count();
    for i in 0..open {
        let out = board(
            &root,
            inst,
            &["claim", "--next", "--as", &format!("after{i}")],
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let out = board(&root, inst, &["claim", "--next", "--as", "last"])
        .output()
        .unwrap();
    common::assert_error(&out, "aw-ctl", 1, "no card left");
}

#[test]
fn a_claim_whose_time_ran_out_makes_the_card_ready_again() {
    let root = Root::new();
    add_cards(&root, "lapse", 1);
    root.ok(
        "aw-ctl",
        &[
            "-i", "lapse", "board", "claim", "1", "--as", "w1", "--ttl", "1h",
        ],
        None,
    );
    let held = board(&root, "lapse", &["claim", "--next", "--as", "w2"])
        .output()
        .unwrap();
    common::assert_error(&held, "aw-ctl", 1, "the card is held");
    // The claim's time runs out: its file says so (as a reader without aw sees it).
    let path = root.inst_dir("lapse").join("board/1.json");
    let mut card: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    card["holder"]["until"] = "2000-01-01T00:00:00.000Z".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&card).unwrap()).unwrap();
    let ls = root.ok(
        "aw-ctl",
        &["-i", "lapse", "board", "ls", "--ready", "--json"],
        None,
    );
    let ready = common::json_lines(ls.as_bytes());
    assert_eq!(ready.len(), 1, "{ls}");
    assert_eq!(
        (&ready[0]["state"], &ready[0]["holder"]),
        (&"open".into(), &Value::Null)
    );
    let out = root.ok(
        "aw-ctl",
        &["-i", "lapse", "board", "claim", "--next", "--as", "w2"],
        None,
    );
    assert_eq!(out.trim(), "1");
    let card = &cards(&root, "lapse")[&1];
    assert_eq!(card["holder"]["agent"], "w2");
    let events: Vec<&str> = card["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["added", "claimed", "lapsed", "claimed"]);
    // The first holder can no longer finish it.
    let late = board(&root, "lapse", &["done", "1", "--as", "w1"])
        .output()
        .unwrap();
    let line = common::assert_error(&late, "aw-ctl", 75, "done by a holder whose claim lapsed");
    assert!(line.contains("held by w2"), "{line}");
}

/// The files `aw-ctl board ARGS` opens on instance `inst` and the reads of folders it makes
/// (`strace -f`), with its exit code.
fn opens(root: &Root, inst: &str, args: &[&str]) -> (u64, Option<i32>) {
    let dir = tempfile::tempdir().expect("a folder for the trace");
    let log = dir.path().join("strace.txt");
    let out = Command::new("strace")
        .args([
            "-f",
            "-c",
            "-e",
            "trace=open,openat,openat2,getdents64",
            "-o",
        ])
        .arg(&log)
        .arg(common::bin("aw-ctl"))
        .arg("--root")
        .arg(root.path())
        .args(["-i", inst, "board"])
        .args(args)
        .output()
        .expect("strace must be installed (scripts/test-deps.sh)");
    let text = std::fs::read_to_string(&log).expect("strace summary");
    let calls = text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let traced = |n: &&str| n.starts_with("open") || *n == "getdents64";
            (w.len() >= 5 && w.last().is_some_and(traced))
                .then(|| w[3].parse::<u64>().ok())
                .flatten()
        })
        .sum();
    (calls, out.status.code())
}

/// Write card `id` of `inst` by hand, as aw writes a card file.
fn write_card(root: &Root, inst: &str, card: Value) {
    let id = card["id"].as_u64().unwrap();
    let path = root.inst_dir(inst).join(format!("board/{id}.json"));
    std::fs::write(path, serde_json::to_vec_pretty(&card).unwrap()).unwrap();
}

fn card_json(id: u64, state: &str, extra: Value) -> Value {
    let mut c = serde_json::json!({
        "id": id, "title": format!("card {id}"), "body": "", "state": state,
        "creator": "lead", "labels": [], "after": [],
        "created": "2030-01-01T00:00:00.000Z", "updated": "2030-01-01T00:00:00.000Z",
        "history": [],
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

#[test]
fn a_claim_opens_and_lists_as_much_with_two_thousand_cards_done_as_with_none() {
    let root = Root::new();
    for inst in ["small", "big"] {
        add_cards(&root, inst, 1);
    }
    // 2,000 cards done and one waiting for card 2, written by hand (the last in the form of
    // files made before pools, `for` a single name), with no index: it is rebuilt.
    for id in 2..=2001 {
        write_card(&root, "big", card_json(id, "done", serde_json::json!({})));
    }
    write_card(
        &root,
        "big",
        card_json(
            2002,
            "open",
            serde_json::json!({"after": [2], "for": "alice"}),
        ),
    );
    std::fs::remove_file(root.inst_dir("big").join("_state/board-index.json")).unwrap();
    let ls = board(&root, "big", &["ls", "--ready", "--json"])
        .output()
        .unwrap();
    let ready: Vec<u64> = common::json_lines(&ls.stdout)
        .iter()
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ready, [1, 2002], "{ls:?}");
    // The rebuild gave card 2 the card that waits for it.
    assert_eq!(cards(&root, "big")[&2]["blocks"], serde_json::json!([2002]));

    let small = opens(&root, "small", &["claim", "--next", "--as", "w"]);
    let big = opens(&root, "big", &["claim", "--next", "--as", "w"]);
    assert_eq!((small.1, big.1), (Some(0), Some(0)));
    assert!(
        big.0 <= small.0,
        "a claim opened or listed {} times with 2,000 cards done, {} with none",
        big.0,
        small.0
    );
    let index = root.inst_dir("big").join("_state/board-index.json");
    let kept: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    assert_eq!(
        kept["counts"],
        serde_json::json!({"ready": 1, "waiting": 0, "claimed": 1, "done": 2000, "dropped": 0})
    );
    assert_eq!(kept["held"]["1"]["agent"], "w");
    assert_eq!(kept["ready_for"], serde_json::json!({"alice": [2002]}));
    assert_eq!(kept["ready_for_anyone"], serde_json::json!([]));

    // The index is derived: missing or unreadable, it is made again the same from the cards.
    for broken in [None, Some(&b"not json"[..])] {
        match broken {
            None => std::fs::remove_file(&index).unwrap(),
            Some(b) => std::fs::write(&index, b).unwrap(),
        }
        let out = board(&root, "big", &["claim", "--next", "--as", "w"])
            .output()
            .unwrap();
        common::assert_error(&out, "aw-ctl", 1, "no card left for w");
        let again: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
        assert_eq!(again, kept, "rebuilt after {broken:?}");
    }
    let out = root.ok(
        "aw-ctl",
        &["-i", "big", "board", "claim", "--next", "--as", "alice"],
        None,
    );
    assert_eq!(out, "2002\n");
}
