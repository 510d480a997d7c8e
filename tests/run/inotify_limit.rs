//! aw-run past the inotify limit: it polls instead, and says so once on the terminal of the
//! user who started it, in the foreground and with `--detach` (where its own stderr is the
//! log, so the starting process prints the line before it returns).
//!
//! How the limit is reached: each aw-run runs in a user namespace of its own (`unshare
//! --user --map-root-user`) whose `/proc/sys/user/max_inotify_instances` is set to 0, so
//! that inotify_init1(2) fails there with EMFILE exactly as past
//! `fs.inotify.max_user_instances`. The limit of the machine and of every other process is
//! untouched (lowering the global sysctl would break the watchers of everything else
//! running). A machine without `unshare` (util-linux) or without user namespaces fails the
//! test with a message saying so, never skips it.

use crate::common;

use std::process::Command;

use common::runner::*;

const ALICE: &str = "agents:\n  alice:\n    mock: {replies: ['@user got it']}\n";

/// `cmd` run inside a user namespace where no inotify instance can be made.
fn without_inotify(cmd: &Command) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_inotify_instances && exec \"$@\"")
        .arg("sh")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

/// Fail with what to install when user namespaces cannot be used here.
fn require_userns() {
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_inotify_instances")
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "this test needs user namespaces (unshare --user): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("this test needs unshare (util-linux, see scripts/test-deps.sh): {e}"),
    }
}

/// The lines of `err` that tell of the fallback to polling.
fn fallback_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.contains("polling")).collect()
}

/// The one line: a warning naming the limit to raise and the way to poll on purpose.
fn assert_one_fallback_line(err: &str) {
    let lines = fallback_lines(err);
    assert_eq!(lines.len(), 1, "{err}");
    let line = lines[0];
    assert!(line.starts_with("aw-run: warning: "), "{line}");
    assert!(line.contains("fs.inotify.max_user_instances"), "{line}");
    assert!(line.contains("--poll"), "{line}");
}

#[test]
fn a_foreground_run_past_the_inotify_limit_warns_once_and_still_works() {
    require_userns();
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {replies: ['@user got it']}\nkickoff: '@alice hi'\n",
    );
    let out = run_hang_guarded(without_inotify(&s.cmd(&["-q"])));
    assert_code(&out, 0);
    assert_one_fallback_line(&stderr(&out));
    assert_eq!(
        s.entries(),
        [
            ("system".to_string(), "@alice hi".to_string()),
            ("alice".to_string(), "@user got it".to_string())
        ]
    );
}

#[test]
fn a_detached_server_past_the_inotify_limit_warns_where_it_was_started() {
    require_userns();
    let s = Setup::new();
    s.write("wf.yaml", ALICE);
    let out = run_hang_guarded(without_inotify(&s.cmd(&["--keep", "--detach"])));
    let (pid, _guard) = detached(&out);
    assert_one_fallback_line(&stderr(&out));
    // It serves, polling: a message wakes alice.
    let sent = s
        .tool_cmd("aw-send")
        .args(["-i", INST, "@alice ping"])
        .output();
    assert_eq!(sent.expect("aw-send").status.code(), Some(0));
    wait_for("alice's reply", || s.entries().len() == 2);
    assert_eq!(
        s.entries()[1],
        ("alice".to_string(), "@user got it".to_string())
    );
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    wait_for("the server to end", || !alive(pid));
    // The log has the line too.
    let log = std::fs::read_to_string(s.root.inst_dir(INST).join("_state/aw-run.log")).unwrap();
    assert_one_fallback_line(&log);
}

#[test]
fn a_server_of_two_instances_past_the_limit_names_the_instance_of_each_warning() {
    require_userns();
    let s = Setup::new();
    for inst in ["one", "two"] {
        let out = s
            .tool_cmd("aw-ctl")
            .args(["-i", inst, "new", "alice", "--backend", "mock"])
            .output()
            .expect("aw-ctl");
        assert_code(&out, 0);
    }
    let mut serve = s.tool_cmd("aw-run");
    serve.args(["--serve", "--keep", "--detach", "-i", "one", "-i", "two"]);
    let out = run_hang_guarded(without_inotify(&serve));
    let (pid, _guard) = detached(&out);
    let err = stderr(&out);
    let mut lines = fallback_lines(&err);
    lines.sort();
    assert_eq!(lines.len(), 2, "{err}");
    for (line, inst) in lines.iter().zip(["one", "two"]) {
        let head = format!("aw-run: warning: instance {inst}: ");
        assert!(line.starts_with(&head), "{line}");
        assert!(line.contains("fs.inotify.max_user_instances"), "{line}");
    }
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    wait_for("the server to end", || !alive(pid));
}
