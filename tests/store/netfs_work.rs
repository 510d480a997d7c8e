//! The board and leases of one instance shared by two hosts over a real network file
//! system (GlusterFS mounted twice; host B in its own pid and UTS namespace): claims made
//! on both hosts at once give each card to exactly one claimer, and a claim held for an
//! agent served on host B lapses on host A once that server is killed, which host A says
//! in the channel; a lease taken on host A refuses a commit on host B.

use crate::common;

use std::collections::BTreeMap;

use common::gluster::Volume;
use common::runner::*;

use super::netfs::{Host, ok_on, serve_on_b, tool_on};

/// Cards on the board, and claimers racing for them per host.
const CARDS: usize = 8;
const PER_HOST: usize = 8;

/// Claimers on host A and host B, all started at once, race for the cards: each card is
/// claimed by exactly one of them, every claimer that got none exits 1, and each card file
/// names the claimer that printed its id.
#[test]
fn claimers_on_two_hosts_claim_each_card_exactly_once() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    for n in 1..=CARDS {
        let id = ok_on(
            &vol,
            Host::A,
            cwd.path(),
            "aw-ctl",
            &["board", "add", &format!("card {n}")],
            "",
        );
        assert_eq!(id.trim(), n.to_string());
    }
    let mut children = Vec::new();
    for host in [Host::A, Host::B] {
        for k in 0..PER_HOST {
            let who = format!("{}{k}", if host == Host::A { "a" } else { "b" });
            let mut c = tool_on(&vol, host, cwd.path(), "aw-ctl");
            c.args(["-i", INST, "board", "claim", "--next", "--as", &who]);
            children.push((who, spawn(c)));
        }
    }
    let mut got: BTreeMap<u64, String> = BTreeMap::new();
    let mut empty = 0;
    for (who, child) in children {
        let out = child.wait_with_output().unwrap();
        match out.status.code() {
            Some(0) => {
                let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
                let before = got.insert(id, who.clone());
                assert!(
                    before.is_none(),
                    "card {id} claimed by {before:?} and {who}"
                );
            }
            Some(1) => empty += 1,
            _ => panic!("{who}: {out:?}"),
        }
    }
    assert_eq!(got.len(), CARDS, "{got:?}");
    assert_eq!(empty, 2 * PER_HOST - CARDS);
    for (id, who) in &got {
        let card: serde_json::Value = serde_json::from_slice(&common::gluster::read_listed(
            &vol.b().join(INST).join(format!("board/{id}.json")),
        ))
        .unwrap();
        assert_eq!(card["state"], "claimed", "{card}");
        assert_eq!(card["holder"]["agent"], who.as_str(), "{card}");
    }
}

/// A card claimed for alice while her server runs on host B is held (host A cannot take
/// it); once that server is killed -9, host A's claimer gets the card, and its history says
/// the claim lapsed because the server is gone.
#[test]
fn a_claim_held_by_a_server_killed_on_host_b_frees_the_card_on_host_a() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let (mut server, _) = serve_on_b(&vol, cwd.path());
    ok_on(
        &vol,
        Host::A,
        cwd.path(),
        "aw-ctl",
        &["board", "add", "the work"],
        "",
    );
    let out = ok_on(
        &vol,
        Host::B,
        cwd.path(),
        "aw-ctl",
        &["board", "claim", "1", "--as", "alice"],
        "",
    );
    assert_eq!(out.trim(), "1");
    let card = ok_on(
        &vol,
        Host::A,
        cwd.path(),
        "aw-ctl",
        &["board", "ls", "--json"],
        "",
    );
    let v: serde_json::Value = serde_json::from_str(card.trim()).unwrap();
    assert_eq!(
        (v["state"].as_str(), v["holder"].as_str()),
        (Some("claimed"), Some("alice")),
        "{v}"
    );
    let file = vol.a().join(INST).join("board/1.json");
    let held: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(held["holder"]["served"], true, "{held}");
    assert_eq!(
        held["holder"]["pid"], 1,
        "held by B's server, pid 1 of its namespace: {held}"
    );

    let mut c = tool_on(&vol, Host::A, cwd.path(), "aw-ctl");
    c.args(["-i", INST, "board", "claim", "--next", "--as", "bob"]);
    let out = common::run_with(c, None);
    assert_code(&out, 1);

    let child = server.child();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_for("host A to claim the card of the killed server", || {
        let mut c = tool_on(&vol, Host::A, cwd.path(), "aw-ctl");
        c.args(["-i", INST, "board", "claim", "--next", "--as", "bob"]);
        let out = common::run_with(c, None);
        out.status.code() == Some(0) && String::from_utf8_lossy(&out.stdout).trim() == "1"
    });
    let now: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(now["holder"]["agent"], "bob", "{now}");
    let events: Vec<&str> = now["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["added", "claimed", "lapsed", "claimed"], "{now}");
    let lapsed = &now["history"][2]["note"];
    assert!(lapsed.as_str().unwrap().contains("is gone"), "{lapsed}");
    // Host A announced the lapse in the channel, once.
    let log = ok_on(&vol, Host::A, cwd.path(), "aw-peek", &["-n", "0"], "");
    let news: Vec<&str> = log.lines().filter(|l| l.contains("lapsed")).collect();
    assert_eq!(news.len(), 1, "{log}");
    assert!(news[0].contains("card 1 \"the work\" lapsed"), "{log}");
}

/// A lease taken on host A refuses, on host B, a commit that touches its path: the guard
/// that `aw-ctl hooks install` put into the shared repository names the holder; the holder
/// itself commits, and `git commit --no-verify` still commits. Host B mounts the volume at
/// host A's path, as hosts sharing a work tree do.
#[test]
fn a_lease_taken_on_host_a_refuses_a_commit_on_host_b() {
    let vol = Volume::new();
    let repo = vol.a().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&repo)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(repo.join("src/b.rs"), "fn b() {}\n").unwrap();
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "-m",
        "start",
    ]);
    ok_on(&vol, Host::A, &repo, "aw-ctl", &["hooks", "install"], "");
    let id = ok_on(
        &vol,
        Host::A,
        &repo,
        "aw-ctl",
        &[
            "lease",
            "take",
            "src/a.rs",
            "--as",
            "alice",
            "--reason",
            "the parser",
        ],
        "",
    );
    assert_eq!(id.trim(), "L1");

    // On host B (where git replaces files by renames, which host A would see stale), run
    // `script` in the repository: its exit code, stdout and stderr.
    let on_b = |script: &str| {
        let out = Volume::on_b(std::path::Path::new("sh"))
            .args([
                "-c",
                &format!("mount --bind \"$1\" \"$2\" && cd \"$2/repo\" && {script}"),
                "sh",
            ])
            .arg(vol.b())
            .arg(vol.a())
            .env("PATH", path_with_bins())
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    // As AGENT: change FILE, stage it, and commit with ARGS; the exit code and stderr.
    let commit_on_b = |agent: &str, file: &str, args: &str| {
        let (code, _, err) = on_b(&format!(
            "echo \"// {agent}\" >> {file} && git add {file} && AW_AGENT={agent} \
             git -c user.name={agent} -c user.email={agent}@b commit -q -m '{agent} edits {file}' {args}"
        ));
        (code, err)
    };
    let (code, err) = commit_on_b("bob", "src/a.rs", "");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("alice"), "the holder is named: {err}");
    assert!(err.contains("the parser"), "the reason is named: {err}");
    assert!(err.contains("commit refused"), "{err}");
    let log = || on_b("git log --format=%s").1;
    assert_eq!(log(), "start\n", "nothing was committed");
    assert_eq!(on_b("git reset -q --hard").0, Some(0));
    let (code, err) = commit_on_b("bob", "src/b.rs", "");
    assert_eq!(code, Some(0), "a path no one leases commits: {err}");
    let (code, err) = commit_on_b("alice", "src/a.rs", "");
    assert_eq!(code, Some(0), "the holder commits: {err}");
    let (code, err) = commit_on_b("bob", "src/a.rs", "--no-verify");
    assert_eq!(code, Some(0), "--no-verify commits: {err}");
    assert_eq!(
        log(),
        "bob edits src/a.rs\nalice edits src/a.rs\nbob edits src/b.rs\nstart\n"
    );
}
