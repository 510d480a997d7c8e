//! `aw-send --wait` against an `aw-run --keep` serving the agent: the reply printed, a
//! timeout, an agent whose runs fail, and the refusal when nobody serves the agent.

use crate::common;

use common::runner::*;

/// `aw-run --keep` on `wf`, once every agent is served.
fn keep(s: &Setup, wf: &str, agents: &[&str]) -> Server {
    s.write("wf.yaml", wf);
    let child = Server::new(spawn(s.cmd(&["--keep", "-q"])));
    // Served and registered: a server shows its agents once every one is registered.
    wait_for("the agents to be served", || {
        agents
            .iter()
            .all(|a| common::runner::shown(s.root.path(), INST, a))
    });
    child
}

fn send(s: &Setup, args: &[&str]) -> std::process::Output {
    let mut c = s.tool_cmd("aw-send");
    c.args(["-i", INST]).args(args);
    run_hang_guarded(c)
}

const WF: &str = "agents:
  bob:
    command: [sh, -c, 'grep -q slow && sleep 5; echo \"pong to $AW_AGENT\"']
  carol:
    mock: {fail: 100}
";

#[test]
fn the_reply_is_printed_and_timeouts_and_failures_exit_1() {
    let s = Setup::new();
    let server = keep(&s, WF, &["bob", "carol"]);

    let out = send(&s, &["--wait", "-t", "bob", "ping"]);
    assert_code(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "pong to bob\n");
    assert_eq!(s.unread("bob"), 0);

    let out = send(&s, &["--wait", "--json", "-t", "bob", "ping again"]);
    assert_code(&out, 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["from"], "bob");
    assert_eq!(v["message"].as_str().unwrap().trim_end(), "pong to bob");

    let out = send(
        &s,
        &["--wait", "--timeout", "0.5s", "-t", "bob", "slow please"],
    );
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("no reply from bob after 0.5 s"),
        "{}",
        stderr(&out)
    );

    let out = send(&s, &["--wait", "-t", "carol", "anything"]);
    assert_code(&out, 1);
    assert!(stderr(&out).contains("carol failed"), "{}", stderr(&out));
    let out = server.term();
    assert_code(&out, 0);
}

#[test]
fn waiting_for_nobody_is_refused_at_once() {
    let s = Setup::new();
    // bob is registered (an unregistered -t is refused), but nothing serves him.
    let mut new = s.tool_cmd("aw-ctl");
    new.args(["-i", INST, "new", "bob", "--backend", "mock"]);
    assert_code(&run_hang_guarded(new), 0);
    let out = send(&s, &["--to", "bob", "hello"]);
    assert_code(&out, 0);
    let out = send(&s, &["--wait", "-t", "bob", "anyone?"]);
    assert_code(&out, 69);
    assert!(
        stderr(&out).contains(
            "no aw-run serves bob@w\nhint: start one: aw-run --keep FILE, or aw-run --serve"
        ),
        "{}",
        stderr(&out)
    );
    // Nothing was sent.
    assert_eq!(s.entries().len(), 1);
    for (args, why) in [
        (
            vec!["--wait", "hello"],
            "--wait needs the agent to wait for: -t AGENT",
        ),
        (
            vec!["--timeout", "1s", "-t", "bob", "x"],
            "--timeout goes with --wait",
        ),
        (
            vec!["--wait", "--lines", "-t", "bob"],
            "--wait and --lines do not go together",
        ),
    ] {
        let out = send(&s, &args);
        assert_code(&out, 64);
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
    }
}

/// An aw-run takes its serving locks before its setup runs and registers its agents after:
/// a `--wait` sent in between waits for the registration, so the mention reaches the agent.
#[test]
fn a_wait_sent_while_the_server_starts_is_answered() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "setup:
  - shell: sleep 1
agents:
  bob:
    command: [sh, -c, 'echo pong']
",
    );
    let server = Server::new(spawn(s.cmd(&["--keep", "-q"])));
    let inst = aw::instance::Root::new(s.root.path())
        .instance(INST)
        .expect("instance");
    wait_for("the lock to be taken", || {
        aw::serve::is_served(&inst, "bob")
    });
    let out = send(&s, &["--wait", "--timeout", "20s", "-t", "bob", "ping"]);
    assert_code(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "pong\n");
    assert_code(&server.term(), 0);
}
