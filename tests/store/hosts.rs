//! One instance shared by processes of several "hosts": here, pid and UTS namespaces of this
//! kernel (`unshare --pid --fork --kill-child --uts --mount-proc`), each with its own host name
//! and its own pids, so that pid 1 exists on every side. What names a process names its host;
//! nothing is ever signalled or judged dead by a pid of another namespace; `aw-ctl stop`
//! works across them; a temp file of a live writer of another host survives a sweep.

use crate::common;

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use common::runner::*;
use common::{bin, json_lines, run_with};
use serde_json::Value;

/// A process tree in its own pid and UTS namespace: the first process runs `argv` as pid 1,
/// with host name `host`. Killed with its whole namespace when dropped.
struct Namespace(Child);

impl Namespace {
    fn start(host: &str, argv: &[&str], out: Stdio) -> Namespace {
        let child = unshare(host, argv)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        Namespace(child)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // unshare --kill-child takes its namespace along.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `argv` as pid 1 of a new pid namespace whose host name is `host`.
fn unshare(host: &str, argv: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args([
        "--pid",
        "--fork",
        "--kill-child",
        "--uts",
        "--mount-proc",
        "sh",
        "-c",
        "hostname \"$0\" && exec \"$@\"",
        host,
    ]);
    c.args(argv);
    for v in ["AW_ROOT", "AW_INSTANCE", "AW_AGENT", "AW_SYNC"] {
        c.env_remove(v);
    }
    c.env("PATH", path_with_bins());
    c
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

struct Hosts {
    s: Setup,
    awrun: String,
    awctl: String,
}

impl Hosts {
    fn new() -> Hosts {
        let s = Setup::new();
        let h = Hosts {
            awrun: path_str(&bin("aw-run")).to_string(),
            awctl: path_str(&bin("aw-ctl")).to_string(),
            s,
        };
        // An exec agent: each run posts what it prints.
        h.ctl_ok(&["-i", INST, "new", "alice", "--", "echo", "pong"]);
        h
    }

    fn root(&self) -> &str {
        path_str(self.s.root.path())
    }

    fn ctl(&self, args: &[&str]) -> Output {
        let mut c = self.s.tool_cmd("aw-ctl");
        c.args(args);
        run_with(c, None)
    }

    fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert_code(&out, 0);
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    fn ps(&self) -> Vec<Value> {
        json_lines(self.ctl_ok(&["ps", "--json"]).as_bytes())
    }

    /// `aw-run --serve --keep alice` as pid 1 of host `host`, once it serves alice.
    fn serve_in(&self, host: &str) -> Namespace {
        self.serve_agent_in(host, "alice")
    }

    /// `aw-run --serve --keep AGENT` as pid 1 of host `host`, once it serves the agent.
    fn serve_agent_in(&self, host: &str, agent: &str) -> Namespace {
        self.serve_with(host, &[agent])
    }

    /// `aw-run --serve --keep ARGS...` as pid 1 of host `host`, once it serves the agent
    /// named last.
    fn serve_with(&self, host: &str, args: &[&str]) -> Namespace {
        let agent = *args.last().expect("an agent");
        let mut argv = vec![
            self.awrun.as_str(),
            "--root",
            self.root(),
            "-i",
            INST,
            "--serve",
            "--keep",
            "-q",
        ];
        argv.extend_from_slice(args);
        let ns = Namespace::start(host, &argv, Stdio::null());
        wait_for("the agent to be served", || {
            self.ps().iter().any(|p| p["agent"] == agent)
        });
        ns
    }

    fn serve_dir(&self) -> PathBuf {
        self.s.root.path().join(INST).join("_state/serve")
    }
}

#[test]
fn ps_names_the_host_of_a_server_in_another_namespace() {
    let h = Hosts::new();
    let _b = h.serve_in("hostb");
    let ps = h.ps();
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_eq!(ps[0]["host"], "hostb");
    assert_eq!(ps[0]["pid"], 1);
    assert_eq!(ps[0]["agent"], "alice");
    // In a pipe: rows only, the host after the agent.
    let text = h.ctl_ok(&["ps"]);
    let cols: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        cols,
        [INST, "alice", "hostb", "1", "idle", "0", "-"],
        "{text}"
    );
    // A second server on this side is refused, and told where the first one runs.
    let mut again = h.s.tool_cmd("aw-run");
    again.args(["-i", INST, "--serve", "--keep", "alice"]);
    let out = run_hang_guarded(again);
    assert_code(&out, 75);
    let err = stderr(&out);
    assert!(
        err.contains("alice@w: already served by aw-run pid 1 on hostb"),
        "{err}"
    );
    // On a terminal: a header row first.
    let cmd = format!("{} --root {} ps", h.awctl, h.root());
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("script");
    assert_code(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [
            vec![
                "INSTANCE", "AGENT", "HOST", "PID", "STATE", "RUNS", "WORKFLOW"
            ],
            vec![INST, "alice", "hostb", "1", "idle", "0", "-"],
        ],
        "{text}"
    );
}

#[test]
fn a_mention_from_one_namespace_wakes_a_server_in_another() {
    let h = Hosts::new();
    let _b = h.serve_in("hostb");
    h.s.root.send(INST, &[], "@alice ping");
    wait_for("alice's reply", || {
        h.s.root
            .entries(INST)
            .iter()
            .any(|e| e.from == "alice" && e.message.contains("pong"))
    });
    // Its transcript names the server: host B's pid 1.
    wait_for("the transcript", || {
        h.s.transcript_path("alice", 1).exists()
    });
    let t = h.s.transcript("alice", 1);
    assert_eq!(t["server"]["host"], "hostb", "{t}");
    assert_eq!(t["server"]["pid"], 1, "{t}");
    let id = t["server"]["host_id"].as_str().expect("host_id");
    assert_eq!(id.len(), 16, "{t}");
}

/// The host id that the server of alice wrote in its claim (third line; the fourth names
/// the server's own lock, which begins with that host id).
fn lock_host_id(h: &Hosts) -> String {
    let lock = std::fs::read_to_string(h.serve_dir().join("alice.lock")).expect("lock");
    let lines: Vec<&str> = lock.lines().collect();
    assert_eq!(lines.len(), 4, "{lock}");
    assert!(
        lines[3].starts_with(&format!("{}.{}.", lines[2], lines[0]))
            && lines[3].ends_with(".server"),
        "{lock}"
    );
    lines[2].to_string()
}

/// `aw-ctl stop TARGET --timeout SECS` in namespace C, whose pid 1 is a shell that records a
/// SIGTERM (a trap, so that the signal is not ignored as it would be by an init without a
/// handler); the output, with `rc=` and `pid=` lines from that shell. Panics if the shell got
/// SIGTERM.
fn stop_from_c(h: &Hosts, target: &str, timeout: &str) -> Output {
    let marker = h.s.dir().join("pid1-got-sigterm");
    let script = format!(
        "trap 'echo TERM >> {m}' TERM; {ctl} --root {root} stop {target} --timeout {timeout}; \
         echo \"rc=$?\"; echo \"pid=$$\"",
        m = path_str(&marker),
        ctl = h.awctl,
        root = h.root(),
    );
    let out = unshare("hostc", &["sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("unshare");
    assert!(
        !marker.exists(),
        "pid 1 of the stopping namespace got SIGTERM"
    );
    out
}

#[test]
fn stop_from_another_namespace_stops_the_server_and_signals_no_local_pid_1() {
    let h = Hosts::new();
    let b = h.serve_in("hostb");
    assert_eq!(h.ps()[0]["pid"], 1);
    let out = stop_from_c(&h, "alice@w", "20");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert_eq!(
        text,
        format!("stopped alice@{INST} (aw-run pid 1)\nrc=0\npid=1\n")
    );
    // The server in B ended cleanly, and nothing serves alice.
    let mut b = b;
    let status = b.0.wait().expect("wait unshare");
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(h.ps().is_empty());
    // The request was taken back: only the agent's own files are left.
    let mut left: Vec<String> = std::fs::read_dir(h.serve_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["alice.json", "alice.lock"]);
}

#[test]
fn stop_of_a_server_that_does_not_finish_exits_75_and_signals_nothing() {
    let h = Hosts::new();
    let b = h.serve_in("hostb");
    let id = lock_host_id(&h);
    // A server that never looks at its requests: the record of B's server, its lock held by
    // another process of B's (a stand-in that ignores requests), is asked to stop.
    drop(b);
    wait_for("alice to be let go", || h.ps().is_empty());
    let lock = h.serve_dir().join("alice.lock");
    let holder = Namespace::start(
        "hostb",
        &["flock", path_str(&lock), "sleep", "600"],
        Stdio::null(),
    );
    wait_for("the stand-in to hold the lock", || {
        std::fs::File::open(&lock)
            .unwrap()
            .try_lock_shared()
            .is_err()
    });
    let json = std::fs::read_to_string(h.serve_dir().join("alice.json")).unwrap();
    assert!(json.contains(&id), "{json}");
    let out = stop_from_c(&h, "alice@w", "1");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "rc=75\npid=1\n");
    let err = stderr(&out);
    assert!(
        err.contains("still served after 1 s: alice@w (aw-run pid 1 on hostb)"),
        "{err}"
    );
    // The request stays for the server to see; the stand-in was not signalled.
    assert!(h.serve_dir().join(format!("stop.{id}.1")).exists());
    assert!(h.ps().iter().any(|p| p["agent"] == "alice"));
    drop(holder);
}

/// Write a temp file `name` in `dir` last modified `age` ago.
fn temp_file(dir: &Path, name: &str, age: Duration) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(dir.join(name))
        .expect("create temp");
    f.set_modified(SystemTime::now() - age).expect("mtime");
}

#[test]
fn a_live_temp_of_another_namespace_survives_a_sweep_and_an_abandoned_one_goes() {
    let h = Hosts::new();
    let b = h.serve_in("hostb");
    let id = lock_host_id(&h);
    drop(b);
    // A pid that runs in no namespace of this side: here, it names nothing.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let dir = h.s.root.path().join(INST).join("_state");
    let live = format!(".agents.json.tmp.{id}.{pid}.7");
    let old = format!(".agents.json.tmp.{id}.{pid}.8");
    temp_file(&dir, &live, Duration::from_secs(60));
    temp_file(&dir, &old, Duration::from_secs(2 * 3600));
    // A write into that folder from this side (the registry) sweeps it.
    h.ctl_ok(&["-i", INST, "new", "bob", "--backend", "mock"]);
    let temps: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert_eq!(temps, [live]);
}

#[test]
fn a_record_without_a_host_is_this_hosts_and_its_server_gets_sigterm() {
    let h = Hosts::new();
    let dir = h.serve_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let lock = dir.join("alice.lock");
    // A server of a version that knew no hosts: a process of this side that holds the lock
    // and wrote its pid alone, and a record without host keys.
    let mut old = hold_like_an_earlier_version(&lock);
    let pid = old.id();
    let record = format!(
        "{{\"instance\":\"{INST}\",\"agent\":\"alice\",\"pid\":{pid},\"state\":\"idle\",\
         \"runs\":0,\"workflow\":null,\"started\":\"2026-11-26T00:00:00.000Z\"}}\n"
    );
    std::fs::write(dir.join("alice.json"), record).unwrap();
    let ps = h.ps();
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_eq!(ps[0]["host"], Value::Null);
    assert_eq!(ps[0]["pid"], pid);
    let text = h.ctl_ok(&["ps"]);
    let cols: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(cols[2], "-", "{text}");
    // Stopped as before: SIGTERM to its pid, which ends it and lets the lock go.
    let out = h.ctl_ok(&["stop", &format!("alice@{INST}")]);
    assert_eq!(out, format!("stopped alice@{INST} (aw-run pid {pid})\n"));
    let status = old.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15), "{status}");
    // No request was written for it.
    assert!(std::fs::read_dir(&dir).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("stop.")
    }));
}

/// `aw-ctl stop TARGET` from a third namespace stops the servers of two others, both pid 1,
/// by request, and signals nothing of its own.
fn stop_stops_two_servers_that_are_both_pid_1(target: &str) {
    let h = Hosts::new();
    h.ctl_ok(&["-i", INST, "new", "bob", "--", "echo", "pong"]);
    let b = h.serve_agent_in("hostb", "alice");
    let b2 = h.serve_agent_in("hostb2", "bob");
    let ps = h.ps();
    let hosts: Vec<(&Value, &Value)> = ps.iter().map(|p| (&p["host"], &p["pid"])).collect();
    assert_eq!(
        hosts,
        [
            (&Value::from("hostb"), &Value::from(1)),
            (&Value::from("hostb2"), &Value::from(1))
        ]
    );
    let out = stop_from_c(&h, target, "20");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        text,
        "stopped alice@w (aw-run pid 1)\nstopped bob@w (aw-run pid 1)\nrc=0\npid=1\n",
        "{}",
        stderr(&out)
    );
    for mut ns in [b, b2] {
        assert_eq!(ns.0.wait().unwrap().code(), Some(0));
    }
    assert!(h.ps().is_empty());
}

#[test]
fn stop_of_an_instance_stops_two_servers_that_are_both_pid_1() {
    stop_stops_two_servers_that_are_both_pid_1("@w");
}

#[test]
fn stop_all_stops_two_servers_of_other_namespaces_that_are_both_pid_1() {
    stop_stops_two_servers_that_are_both_pid_1("--all");
}

#[test]
fn stop_reaches_a_server_that_polls_instead_of_using_inotify() {
    // As on a network file system, where inotify does not see another host's writes.
    let h = Hosts::new();
    let b = h.serve_with("hostb", &["--poll", "0.05", "alice"]);
    let out = stop_from_c(&h, "alice@w", "20");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "stopped alice@w (aw-run pid 1)\nrc=0\npid=1\n",
        "{}",
        stderr(&out)
    );
    let mut b = b;
    assert_eq!(b.0.wait().unwrap().code(), Some(0));
}
