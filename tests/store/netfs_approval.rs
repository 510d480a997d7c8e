//! Approvals on one instance shared by two hosts over a real network file system
//! (GlusterFS mounted twice; host B in its own pid and UTS namespace): a request asked on
//! host A and approved on host B wakes the waiter on host A, and the other way round; a
//! waiter killed -9 on one host is replaced by one on the other that finds the request.

use crate::common;

use std::process::Child;
use std::time::Duration;

use common::gluster::Volume;
use common::runner::*;

use super::netfs::{Host, ok_on, tool_on};

/// `aw-ctl approvals wait ID` on `host`.
fn waiter(vol: &Volume, host: Host, cwd: &std::path::Path, id: &str) -> Child {
    let mut c = tool_on(vol, host, cwd, "aw-ctl");
    c.args(["-i", INST, "approvals", "wait", id]);
    spawn(c)
}

/// The waiter is still waiting: the request is pending.
fn still_waiting(child: &mut Child, what: &str) {
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        child.try_wait().unwrap().is_none(),
        "{what}: the waiter returned while the request is pending"
    );
}

#[test]
fn asked_on_one_host_decided_on_the_other_the_waiter_returns() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let ask = |host, what: &str| -> String {
        let args = ["approvals", "ask", what, "--by", "user", "--as", "ci"];
        ok_on(&vol, host, cwd.path(), "aw-ctl", &args, "")
            .trim()
            .to_string()
    };

    // Asked on A, waited for on A, approved on B.
    let id = ask(Host::A, "deploy from host A");
    assert_eq!(id, "1");
    let mut w = waiter(&vol, Host::A, cwd.path(), &id);
    still_waiting(&mut w, "host A");
    let said = ok_on(
        &vol,
        Host::B,
        cwd.path(),
        "aw-ctl",
        &["approve", &id, "--reason", "ok from B"],
        "",
    );
    assert_eq!(said, "approval 1 approved\n");
    let out = wait_hang_guarded(w);
    assert_code(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "approved by user: ok from B\n"
    );

    // Asked on B, its waiter on B killed -9, a new waiter on A, rejected on B.
    let id = ask(Host::B, "deploy from host B");
    assert_eq!(id, "2", "ids are never given twice, whichever host asks");
    let mut w = waiter(&vol, Host::B, cwd.path(), &id);
    still_waiting(&mut w, "host B");
    w.kill().unwrap();
    w.wait().unwrap();
    let mut w = waiter(&vol, Host::A, cwd.path(), &id);
    still_waiting(&mut w, "host A after the kill on host B");
    ok_on(&vol, Host::B, cwd.path(), "aw-ctl", &["reject", &id], "");
    let out = wait_hang_guarded(w);
    assert_code(&out, 1);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "rejected by user\n");

    let file: serde_json::Value = serde_json::from_slice(&common::gluster::read_listed(
        &vol.a().join(INST).join("approvals/2.json"),
    ))
    .unwrap();
    assert_eq!(file["state"], "rejected");
}
