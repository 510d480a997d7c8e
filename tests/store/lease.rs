//! Leases on paths, through the library: racing takers, conflicts that name the holder,
//! release, check and lapse by time to live. The files are readable without aw.

use crate::common;

use std::time::Duration;

use aw::lease::{self, Request};
use common::Root;

fn request(holder: &str, paths: &[&str], shared: bool) -> Request {
    Request {
        holder: holder.into(),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        shared,
        ttl: lease::DEFAULT_TTL,
        reason: format!("{holder} edits"),
        card: None,
    }
}

#[test]
fn racing_exclusive_takers_leave_exactly_one_holder() {
    let root = Root::new();
    let takers: Vec<_> = (0..16)
        .map(|n| {
            let path = root.path().to_path_buf();
            std::thread::spawn(move || {
                let inst = aw::instance::Root::new(path).instance("race").unwrap();
                let paths: &[&str] = if n % 2 == 0 {
                    &["src/**"]
                } else {
                    &["src/a.rs"]
                };
                lease::take(&inst, &request(&format!("w{n}"), paths, false)).is_ok()
            })
        })
        .collect();
    let won = takers
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|won| *won)
        .count();
    assert_eq!(won, 1);
    let inst = aw::instance::Root::new(root.path())
        .instance("race")
        .unwrap();
    assert_eq!(lease::list(&inst).unwrap().len(), 1);
}

#[test]
fn a_conflict_names_holder_until_and_reason_and_release_frees_it() {
    let root = Root::new();
    let inst = aw::instance::Root::new(root.path()).instance("c").unwrap();
    let held = lease::take(&inst, &request("alice", &["src/**"], false)).unwrap();
    let err = lease::take(&inst, &request("bob", &["src/a.rs"], true)).unwrap_err();
    assert_eq!(err.exit_code(), 75);
    let msg = err.to_string();
    assert!(
        msg.contains("alice") && msg.contains(held.until()) && msg.contains("alice edits"),
        "{msg}"
    );
    // The same holder, and disjoint paths, are never in the way.
    lease::take(&inst, &request("alice", &["src/a.rs"], false)).unwrap();
    lease::take(&inst, &request("bob", &["tests/**"], false)).unwrap();
    // check: leased by someone other than the asker.
    let hits = lease::check(&inst, &["src/x/y.rs".into()], Some("bob")).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].1.agent(), "alice");
    assert!(
        lease::check(&inst, &["src/x/y.rs".into()], Some("alice"))
            .unwrap()
            .is_empty()
    );
    // Only the holder releases; then the path is free.
    assert_eq!(
        lease::release(&inst, &held.id, "bob")
            .unwrap_err()
            .exit_code(),
        77
    );
    assert_eq!(lease::release_holder(&inst, "alice", &[]).unwrap().len(), 2);
    let taken = lease::take(&inst, &request("bob", &["src/a.rs"], false)).unwrap();
    // Each lease is plain JSON under leases/; a released one is gone.
    let dir = root.path().join("c/leases");
    assert!(!dir.join(format!("{}.json", held.id)).exists());
    let text = std::fs::read_to_string(dir.join(format!("{}.json", taken.id))).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["agent"], "bob");
    assert_eq!(json["pid"], std::process::id());
    assert_eq!(json["served"], false);
    assert_eq!(json["ttl"], lease::DEFAULT_TTL.as_secs());
    for key in ["host", "host_id", "since", "until", "reason"] {
        assert!(json[key].is_string(), "{key}: {json}");
    }
    assert_eq!(json["paths"][0], "src/a.rs");
    assert_eq!(json["mode"], "exclusive");
}

#[test]
fn shared_leases_coexist_and_a_lapsed_lease_is_in_no_ones_way() {
    let root = Root::new();
    let inst = aw::instance::Root::new(root.path()).instance("s").unwrap();
    lease::take(&inst, &request("a", &["docs/*.md"], true)).unwrap();
    lease::take(&inst, &request("b", &["docs/x.md"], true)).unwrap();
    assert!(lease::take(&inst, &request("c", &["docs/x.md"], false)).is_err());
    let mut short = request("d", &["lib/**"], false);
    short.ttl = Duration::from_millis(1);
    lease::take(&inst, &short).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    lease::take(&inst, &request("e", &["lib/z.rs"], false)).unwrap();
    let ids: Vec<String> = lease::list(&inst)
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(ids, ["L1", "L2", "L4"]);
}

#[test]
fn only_the_holder_renews_a_live_lease_and_its_file_says_until_when() {
    let root = Root::new();
    let inst = aw::instance::Root::new(root.path()).instance("r").unwrap();
    let held = lease::take(&inst, &request("alice", &["src/**"], false)).unwrap();
    let err = lease::renew(&inst, &held.id, "bob").unwrap_err();
    assert_eq!(err.exit_code(), 77, "{err}");
    let renewed = lease::renew(&inst, &held.id, "alice").unwrap();
    assert!(renewed.until() >= held.until());
    assert_eq!(renewed.holder.since, held.holder.since);
    let text = std::fs::read_to_string(root.path().join(format!("r/leases/{}.json", held.id)));
    let json: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
    assert_eq!(json["until"], renewed.until());
    // A lapsed lease is no one's to renew.
    let mut short = request("carol", &["lib/**"], false);
    short.ttl = Duration::from_millis(1);
    let gone = lease::take(&inst, &short).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let err = lease::renew(&inst, &gone.id, "carol").unwrap_err();
    assert_eq!(err.exit_code(), 66, "{err}");
}

#[test]
fn the_leases_taken_for_a_card_are_released_with_it_and_no_others() {
    let root = Root::new();
    let inst = aw::instance::Root::new(root.path()).instance("k").unwrap();
    let mut a = request("alice", &["src/a.rs"], false);
    a.card = Some(4);
    let mut b = request("alice", &["src/b.rs"], false);
    b.card = Some(5);
    let a = lease::take(&inst, &a).unwrap();
    let b = lease::take(&inst, &b).unwrap();
    let c = lease::take(&inst, &request("alice", &["docs/**"], false)).unwrap();
    let text = std::fs::read_to_string(root.path().join(format!("k/leases/{}.json", a.id)));
    let json: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
    assert_eq!(json["card"], 4);
    let released: Vec<String> = lease::release_card(&inst, 4)
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(released, [a.id]);
    let left: Vec<String> = lease::list(&inst)
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(left, [b.id, c.id]);
    assert!(lease::release_card(&inst, 4).unwrap().is_empty());
}

#[test]
fn twenty_processes_racing_for_overlapping_globs_leave_exactly_one_exclusive_holder() {
    let root = Root::new();
    let globs = ["src/**", "src/a.rs", "src/*.rs", "**/a.rs", "src/"];
    let takers: Vec<_> = (0..20)
        .map(|n| {
            let mut c = common::tool("aw-ctl");
            c.current_dir(root.path())
                .arg("--root")
                .arg(root.path())
                .args(["-i", "race", "lease", "take", globs[n % globs.len()]])
                .args(["--as", &format!("w{n}")])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    let mut codes: Vec<i32> = takers
        .into_iter()
        .map(|t| t.wait_with_output().unwrap().status.code().unwrap())
        .collect();
    codes.sort();
    let mut want = vec![0];
    want.extend([75; 19]);
    assert_eq!(codes, want);
    let inst = aw::instance::Root::new(root.path())
        .instance("race")
        .unwrap();
    let held = lease::list(&inst).unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].id, "L1");
}
