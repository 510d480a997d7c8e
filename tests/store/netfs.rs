//! One instance shared over a real network file system: a GlusterFS volume mounted twice on
//! this machine, "host B" in its own pid and UTS namespace (see tests/common/gluster.rs).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use common::gluster::{HOST_B, Volume};
use common::runner::*;

/// The harness itself: both mounts show one volume, host B has a host name of its own, and
/// nothing stays mounted once the volume is dropped.
#[test]
fn harness_two_mounts_of_one_volume() {
    let vol = Volume::new();
    let (a, b) = (vol.a().to_path_buf(), vol.b().to_path_buf());
    std::fs::write(a.join("from-a"), "hello\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(b.join("from-a")).unwrap(),
        "hello\n"
    );
    let out = Volume::on_b(std::path::Path::new("sh"))
        .args(["-c", "hostname; echo $$"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines, [HOST_B, "1"], "host B runs in its own namespaces");
    drop(vol);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&*a.to_string_lossy()),
        "{a:?} left mounted"
    );
    assert!(
        !mounts.contains(&*b.to_string_lossy()),
        "{b:?} left mounted"
    );
    assert!(!a.exists(), "volume directory removed");
}

/// Host A or host B of a [`Volume`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Host {
    A,
    B,
}

/// Tool `name` on `host`, with `--root` on that host's mount, run from `cwd` with the
/// binaries first in PATH and no `AW_*` variable of the caller.
pub(crate) fn tool_on(vol: &Volume, host: Host, cwd: &Path, name: &str) -> Command {
    let (mut c, root) = match host {
        Host::A => (Command::new(common::bin(name)), vol.a()),
        Host::B => (Volume::on_b(&common::bin(name)), vol.b()),
    };
    for v in ["AW_ROOT", "AW_INSTANCE", "AW_AGENT", "AW_SYNC", "AW_POLL"] {
        c.env_remove(v);
    }
    c.current_dir(cwd)
        .env("PATH", path_with_bins())
        .arg("--root")
        .arg(root);
    c
}

/// Lines of `child`'s stdout, read by a thread.
fn lines_of(child: &mut std::process::Child) -> Receiver<String> {
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The next line, within a bound that only stops a hung test.
fn next_line(rx: &Receiver<String>, what: &str) -> String {
    rx.recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("gave up waiting for {what}"))
}

/// A bound that only stops a hung test.
const HANG: Duration = Duration::from_secs(30);

/// `aw-peek --follow` on host B of `vol` (no `--poll` given) shows each send of host A, none
/// of which warns.
fn follow_on_b_sees_the_sends_of_a(vol: Volume) {
    let cwd = tempfile::tempdir().unwrap();
    let send = |text: &str| {
        let out = tool_on(&vol, Host::A, cwd.path(), "aw-send")
            .args(["-i", INST, "--from", "alice", text])
            .output()
            .unwrap();
        assert_code(&out, 0);
        assert_eq!(warnings(&out), Vec::<String>::new());
    };
    send("first");
    let mut follow = tool_on(&vol, Host::B, cwd.path(), "aw-peek");
    follow.args(["-i", INST, "--follow", "--json"]);
    let mut child = Server::new(spawn(follow));
    let rx = lines_of(child.child());
    let v: serde_json::Value = serde_json::from_str(&next_line(&rx, "the first entry")).unwrap();
    assert_eq!(v["id"], 1);
    for n in 2..=5 {
        send(&format!("entry {n}"));
        let v: serde_json::Value =
            serde_json::from_str(&next_line(&rx, "a remote send past the cached length")).unwrap();
        assert_eq!(v["id"], n);
        assert_eq!(
            v["message"].as_str().unwrap().trim_end(),
            format!("entry {n}")
        );
    }
}

/// `aw-peek --follow` on host B shows what host A sends (no `--poll` given).
#[test]
fn follow_on_one_host_sees_the_sends_of_the_other() {
    follow_on_b_sees_the_sends_of_a(Volume::new());
}

/// What a tool wrote to stderr, but the note that the instance was created (its first
/// write).
fn warnings(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.contains(": created instance "))
        .map(str::to_string)
        .collect()
}

/// A volume whose clients keep what they cached for a minute or more: each host's kernel
/// keeps a file's attributes and names for ten minutes (FUSE mount options), GlusterFS's
/// md-cache is off and its io-cache serves old content for 60 s. A buffered read then
/// returns what the host saw before (even where `fstat` shows the new length), whatever
/// the other host appended since: the shape of GlusterFS with md-cache off, stretched from
/// its second or so so that a read past the caches is what a test can tell apart.
/// (quick-read, off here, may serve even an `O_DIRECT` read from the content it cached at
/// a lookup, for up to its timeout of 1 s.)
fn volume_with_long_caches() -> Volume {
    let vol = Volume::with_mount_options("attribute-timeout=600,entry-timeout=600");
    vol.set("performance.stat-prefetch", "off");
    vol.set("performance.quick-read", "off");
    vol.set("performance.io-cache", "on");
    vol.set("performance.cache-refresh-timeout", "60");
    vol
}

/// `aw-peek --follow` on host B shows each send of host A although B's kernel still caches
/// the channel's old length: the new bytes are read as the server has them.
#[test]
fn follow_reads_a_remote_send_past_the_cached_length() {
    follow_on_b_sees_the_sends_of_a(volume_with_long_caches());
}

/// Sends alternating between hosts whose kernels keep stale lengths of the log and its
/// index: each append reads both ends as the server has them, so ids stay contiguous and
/// unique, no send warns, and both hosts read the same entries.
#[test]
fn alternating_sends_read_the_log_and_index_past_the_cached_length() {
    const SENDS: u64 = 24;
    let vol = volume_with_long_caches();
    let cwd = tempfile::tempdir().unwrap();
    for n in 1..=SENDS {
        let host = if n % 2 == 1 { Host::A } else { Host::B };
        let out = tool_on(&vol, host, cwd.path(), "aw-send")
            .args(["-i", INST, "--from", "alice", &format!("send {n}")])
            .output()
            .unwrap();
        assert_code(&out, 0);
        assert_eq!(warnings(&out), Vec::<String>::new(), "send {n} on {host:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), n.to_string());
    }
    for host in [Host::A, Host::B] {
        let out = ok_on(
            &vol,
            host,
            cwd.path(),
            "aw-peek",
            &["--json", "--since", "0"],
            "",
        );
        let entries = common::parse_entries(out.as_bytes());
        let got: Vec<(u64, String)> = entries
            .iter()
            .map(|e| (e.id, e.message.trim_end().to_string()))
            .collect();
        let want: Vec<(u64, String)> = (1..=SENDS).map(|n| (n, format!("send {n}"))).collect();
        assert_eq!(got, want, "entries as host {host:?} reads them");
        let out = ok_on(
            &vol,
            host,
            cwd.path(),
            "aw-peek",
            &["--json", "-n", "3"],
            "",
        );
        let ids: Vec<u64> = common::parse_entries(out.as_bytes())
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [SENDS - 2, SENDS - 1, SENDS], "the last 3 on {host:?}");
    }
}

/// `aw-run --keep` on host B serving bob, who answers "pong from HOST" to each message,
/// once host A sees it served; the directory it runs from, and the server.
fn keep_bob_on_b(vol: &Volume) -> (tempfile::TempDir, Server) {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(
        cwd.path().join("wf.yaml"),
        "agents:\n  bob:\n    command: [sh, -c, 'cat >/dev/null; echo \"pong from $(hostname)\"']\n",
    )
    .unwrap();
    let mut keep = tool_on(vol, Host::B, cwd.path(), "aw-run");
    keep.args(["-i", INST, "--backoff", "0.01s", "--keep", "-q", "wf.yaml"]);
    let server = Server::new(spawn(keep));
    wait_for("bob to be served on host B", || {
        common::runner::shown(vol.a(), INST, "bob")
    });
    (cwd, server)
}

/// `aw-run --keep` on host B runs its agent for a message host A sends, and `aw-send
/// --wait` on host A returns the reply written on host B.
#[test]
fn keep_on_one_host_answers_send_wait_from_the_other() {
    let vol = Volume::new();
    let (cwd, _server) = keep_bob_on_b(&vol);
    for n in 0..3 {
        let out = run_hang_guarded({
            let mut c = tool_on(&vol, Host::A, cwd.path(), "aw-send");
            c.args(["-i", INST, "--wait", "-t", "bob", &format!("ping {n}")]);
            c
        });
        assert_code(&out, 0);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("pong from {HOST_B}\n")
        );
    }
}

/// aw-mcp's `channel_send` with `wait_for` on host A returns the reply of an agent that
/// `aw-run --keep` serves on host B.
#[test]
fn mcp_channel_send_on_one_host_waits_for_a_reply_from_the_other() {
    use std::io::Write;
    let vol = Volume::new();
    let (cwd, mut server) = keep_bob_on_b(&vol);
    let mut mcp = tool_on(&vol, Host::A, cwd.path(), "aw-mcp");
    mcp.args(["--agent", &format!("alice@{INST}")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = Server::new(mcp.spawn().expect("spawn aw-mcp"));
    let rx = lines_of(child.child());
    let mut stdin = child.child().stdin.take().expect("piped stdin");
    let mut call = |msg: serde_json::Value| {
        writeln!(stdin, "{msg}").expect("write to aw-mcp");
        stdin.flush().unwrap();
    };
    let response = |id: u64| loop {
        let v: serde_json::Value =
            serde_json::from_str(&next_line(&rx, "an answer of aw-mcp")).unwrap();
        if v["id"] == id {
            return v;
        }
    };
    call(serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "netfs-test", "version": "0"}
        }
    }));
    response(1);
    call(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for n in 0..2u64 {
        let id = 2 + n;
        call(serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {
                "name": "channel_send",
                "arguments": {"message": format!("ping {n}"), "wait_for": "bob"}
            }
        }));
        let r = response(id);
        let result = &r["result"];
        if result["isError"] == true {
            panic!("{r}\n{}", what_host_a_sees(&vol, &mut server));
        }
        let reply = result["structuredContent"]["reply"]
            .as_array()
            .unwrap_or_else(|| panic!("a reply: {r}"));
        assert_eq!(reply.len(), 1, "{r}");
        assert_eq!(reply[0]["from"], "bob");
        assert_eq!(
            reply[0]["message"].as_str().unwrap().trim_end(),
            format!("pong from {HOST_B}")
        );
    }
}

/// What host A sees of the instance and of the server on host B, for a failure's message:
/// whether the server still runs (and what it said when it did not), the registry and the
/// serve folder.
fn what_host_a_sees(vol: &Volume, server: &mut Server) -> String {
    let running = match server.child().try_wait() {
        Ok(None) => "the server on host B runs".to_string(),
        Ok(Some(status)) => {
            let mut said = String::new();
            if let Some(mut err) = server.child().stderr.take() {
                let _ = std::io::Read::read_to_string(&mut err, &mut said);
            }
            format!("the server on host B ended ({status}): {said}")
        }
        Err(e) => format!("the server on host B: {e}"),
    };
    let state = vol.a().join(INST).join("_state");
    let registry = std::fs::read(state.join("agents.json")).map_or_else(
        |e| format!("unreadable ({e})"),
        |b| String::from_utf8_lossy(&b).into_owned(),
    );
    let mut serve: Vec<String> = std::fs::read_dir(state.join("serve"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    serve.sort();
    format!("{running}\nregistry: {registry}\nserve folder: {serve:?}")
}

/// A bad `AW_POLL` is refused with a one-line error naming it, exit 64.
#[test]
fn a_bad_aw_poll_is_refused() {
    let root = common::Root::new();
    root.send(INST, &[], "hello");
    for bad in ["soon", "0", "-1", "3601"] {
        let mut c = root.cmd("aw-peek");
        c.args(["-i", INST, "--follow"]).env("AW_POLL", bad);
        let out = run_hang_guarded(c);
        common::assert_error(&out, "aw-peek", 64, "AW_POLL");
    }
}

/// Run tool `name` with `args` on `host`; require exit 0 and return stdout.
pub(crate) fn ok_on(
    vol: &Volume,
    host: Host,
    cwd: &Path,
    name: &str,
    args: &[&str],
    input: &str,
) -> String {
    let mut c = tool_on(vol, host, cwd, name);
    c.args(["-i", INST]).args(args);
    let out = common::run_with(c, Some(input.as_bytes()));
    assert_code(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// State commands alternating between the hosts, with no pause: every read-modify-write
/// sees what the other host committed just before (no stale file handle, no lost update).
#[test]
fn state_commands_alternating_between_hosts_lose_nothing() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let host = |n: usize| {
        if n.is_multiple_of(2) {
            Host::A
        } else {
            Host::B
        }
    };
    let ok = |n: usize, name: &str, args: &[&str], input: &str| {
        ok_on(&vol, host(n), cwd.path(), name, args, input)
    };
    ok(0, "aw-send", &["--from", "user", "start"], "");

    // Registrations: each one keeps every earlier one.
    const AGENTS: usize = 12;
    for n in 0..AGENTS {
        ok(
            n,
            "aw-ctl",
            &["new", &format!("agent{n}"), "--backend", "mock"],
            "",
        );
    }
    let ls = ok(1, "aw-ctl", &["status", "--json"], "");
    for n in 0..AGENTS {
        assert!(ls.contains(&format!("\"agent{n}\"")), "agent{n} lost: {ls}");
    }

    // Votes: every vote of every host counted.
    ok(
        0,
        "aw-ctl",
        &[
            "propose",
            "decision",
            "lunch",
            "--option",
            "yes",
            "--option",
            "no",
            "--id",
            "lunch",
            "--quorum",
            "12",
            "--timeout",
            "3600",
        ],
        "",
    );
    for n in 0..AGENTS {
        let choice = if n % 3 == 0 { "no" } else { "yes" };
        ok(
            n + 1,
            "aw-ctl",
            &["vote", "lunch", choice, "--as", &format!("agent{n}")],
            "",
        );
    }
    let p = ok(0, "aw-ctl", &["proposals", "--all", "--json"], "");
    let v: serde_json::Value = serde_json::from_str(p.trim()).unwrap();
    assert_eq!(
        v["votes"].as_array().unwrap().len(),
        AGENTS,
        "votes lost: {v}"
    );
    assert_eq!(v["counts"]["no"], 4, "{v}");
    assert_eq!(v["counts"]["yes"], 8, "{v}");

    // Document writes: each host reads back what the other wrote last.
    for n in 0..10 {
        ok(
            n,
            "aw-ctl",
            &["doc", "write", "plan.md"],
            &format!("version {n}\n"),
        );
        let read = ok(n + 1, "aw-ctl", &["doc", "read", "plan.md"], "");
        assert_eq!(read, format!("version {n}\n"));
    }

    // Acks: a lower ack right after a higher one never moves the cursor back.
    for n in 0..10 {
        ok(
            n,
            "aw-send",
            &["--from", "user", &format!("@agent0 task {n}")],
            "",
        );
    }
    let last = ok(0, "aw-send", &["--from", "user", "@agent0 last"], "");
    let last: u64 = last.trim().parse().unwrap();
    for n in 0..10u64 {
        ok(
            n as usize,
            "aw-ctl",
            &["ack", "agent0", "--until", &(last - n).to_string()],
            "",
        );
        ok(
            n as usize + 1,
            "aw-ctl",
            &["ack", "agent0", "--until", "2"],
            "",
        );
    }
    let st = ok(1, "aw-ctl", &["status", "agent0", "--json"], "");
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["agents"][0]["cursor"], last, "cursor moved back: {st}");
    assert_eq!(st["agents"][0]["unread"], 0, "{st}");
}

/// 2 hosts x 4 writers x 100 sends: every message stored once, ids contiguous and unique,
/// each writer's messages in the order it sent them.
#[test]
fn writers_on_two_hosts_get_contiguous_unique_ids() {
    const WRITERS: usize = 4;
    const SENDS: usize = 100;
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let script = format!(
        "for i in $(seq 1 {SENDS}); do aw-send --root \"$0\" -i {INST} --from \"$1\" \"$1 $i\" \
         >/dev/null || exit 1; done"
    );
    let mut writers = Vec::new();
    for host in [Host::A, Host::B] {
        for w in 0..WRITERS {
            let (mut c, root) = match host {
                Host::A => (Command::new("sh"), vol.a()),
                Host::B => (Volume::on_b(Path::new("sh")), vol.b()),
            };
            c.args(["-c", &script])
                .arg(root)
                .arg(format!("{host:?}{w}").to_lowercase())
                .current_dir(cwd.path())
                .env("PATH", path_with_bins())
                .env_remove("AW_ROOT")
                .env_remove("AW_INSTANCE")
                .env_remove("AW_AGENT");
            writers.push(Server::new(spawn(c)));
        }
    }
    for w in writers {
        // 800 appends across two mounts: seconds, or more on a loaded machine.
        let out = w.wait_up_to(std::time::Duration::from_secs(180));
        assert_code(&out, 0);
        // Not even a warning about the index (its end is read as the server has it).
        assert_eq!(warnings(&out), Vec::<String>::new());
    }
    let out = ok_on(
        &vol,
        Host::B,
        cwd.path(),
        "aw-peek",
        &["--json", "--since", "0"],
        "",
    );
    let entries = common::parse_entries(out.as_bytes());
    let total = 2 * WRITERS * SENDS;
    let ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=total as u64).collect::<Vec<_>>(), "ids");
    let mut seen = std::collections::BTreeMap::<String, Vec<usize>>::new();
    for e in &entries {
        let (who, n) = e
            .message
            .trim_end()
            .split_once(' ')
            .expect("writer and number");
        assert_eq!(e.from, who);
        seen.entry(who.to_string())
            .or_default()
            .push(n.parse().unwrap());
    }
    assert_eq!(seen.len(), 2 * WRITERS);
    for (who, ns) in seen {
        assert_eq!(ns, (1..=SENDS).collect::<Vec<_>>(), "{who}'s messages");
    }
}

/// `aw-run --serve --keep alice` on host B (pid 1 of its namespace), once host A sees it
/// served; and B's host identity, from the third line of its serving lock.
pub(crate) fn serve_on_b(vol: &Volume, cwd: &Path) -> (Server, String) {
    ok_on(
        vol,
        Host::A,
        cwd,
        "aw-ctl",
        &["new", "alice", "--", "echo", "pong"],
        "",
    );
    let mut c = tool_on(vol, Host::B, cwd, "aw-run");
    c.args(["-i", INST, "--serve", "--keep", "-q", "alice"]);
    let server = Server::new(spawn(c));
    let lock = vol.a().join(INST).join("_state/serve/alice.lock");
    let mut id = String::new();
    wait_for("alice to be served on host B", || {
        let ps = ok_on(vol, Host::A, cwd, "aw-ctl", &["ps", "--json"], "");
        let text = std::fs::read_to_string(&lock).unwrap_or_default();
        match text.lines().nth(2) {
            Some(l) if ps.contains("\"alice\"") => {
                id = l.to_string();
                true
            }
            _ => false,
        }
    });
    (server, id)
}

/// An agent served on host B (one lock for the server, a claim for the agent) is refused
/// to a second server on host A, which names B's server; once B's server is killed
/// (SIGKILL), host A sees the agent free and serves it, and sweeps B's dead lock away.
#[test]
fn a_server_on_one_host_refuses_a_second_on_the_other_until_it_is_killed() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let (mut server, id) = serve_on_b(&vol, cwd.path());
    let serve_dir = vol.a().join(INST).join("_state/serve");
    let servers = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&serve_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".server"))
            .collect();
        v.sort();
        v
    };
    let b_lock = servers();
    assert_eq!(b_lock.len(), 1, "{b_lock:?}");
    assert!(b_lock[0].starts_with(&format!("{id}.1.")), "{b_lock:?}");
    let mut c = tool_on(&vol, Host::A, cwd.path(), "aw-run");
    c.args(["-i", INST, "--serve", "alice"]);
    let out = common::run_with(c, None);
    assert_code(&out, 75);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "alice@{INST}: already served by aw-run pid 1 on {HOST_B}"
        )),
        "{err}"
    );
    // SIGKILL to the namespace's parent kills B's server (--kill-child).
    let child = server.child();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_for("host A to see alice free", || {
        let mut c = tool_on(&vol, Host::A, cwd.path(), "aw-ctl");
        c.args(["-i", INST, "ps", "--json"]);
        let out = common::run_with(c, None);
        !String::from_utf8_lossy(&out.stdout).contains("\"alice\"")
    });
    let mut c = tool_on(&vol, Host::A, cwd.path(), "aw-run");
    c.args(["-i", INST, "--serve", "--keep", "-q", "alice"]);
    let a = Server::new(spawn(c));
    let me = a.pid();
    wait_for("alice served on host A", || {
        let ps = ok_on(&vol, Host::A, cwd.path(), "aw-ctl", &["ps", "--json"], "");
        common::json_lines(ps.as_bytes())
            .iter()
            .any(|v| v["agent"] == "alice" && v["pid"] == me)
    });
    let now = servers();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, b_lock, "B's dead server lock was not swept");
    drop(a);
}

/// `aw-ctl stop alice` on host A, from a namespace whose pid 1 is a shell recording any
/// SIGTERM, stops the server on host B, which is pid 1 of its own namespace: the request
/// crosses the volume, no local pid 1 is signalled.
#[test]
fn stop_from_one_host_stops_a_server_on_the_other() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let (server, _) = serve_on_b(&vol, cwd.path());
    let ps = ok_on(&vol, Host::A, cwd.path(), "aw-ctl", &["ps", "--json"], "");
    let v: serde_json::Value = serde_json::from_str(ps.trim()).unwrap();
    assert_eq!(v["pid"], 1, "{v}");
    assert_eq!(v["host"], HOST_B, "{v}");

    let marker = cwd.path().join("pid1-got-sigterm");
    let script = format!(
        "trap 'echo TERM >> {m}' TERM; \"$1\" --root \"$2\" -i {INST} stop alice --timeout 20; \
         echo \"rc=$?\"; echo \"pid=$$\"",
        m = marker.display(),
    );
    let out = Volume::on_host("aw-host-c", Path::new("sh"))
        .args(["-c", &script, "sh"])
        .arg(common::bin("aw-ctl"))
        .arg(vol.a())
        .output()
        .unwrap();
    assert!(
        !marker.exists(),
        "pid 1 of the stopping namespace got SIGTERM"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("stopped alice@{INST} (aw-run pid 1)\nrc=0\npid=1\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = server.wait();
    assert_code(&out, 0);
}

/// A temp file of host B that is still young survives a write (and so a sweep) on host A;
/// an abandoned one (older than the documented age) is swept.
#[test]
fn a_live_temp_of_host_b_survives_host_a_s_sweep() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let (server, id) = serve_on_b(&vol, cwd.path());
    drop(server);
    let dir = vol.b().join(INST).join("_state");
    let temp = |name: &str, age: Duration| {
        let f = std::fs::File::create_new(dir.join(name)).unwrap();
        f.set_modified(std::time::SystemTime::now() - age).unwrap();
    };
    // Pid 2 exists on host A (a kernel thread) and may on B: liveness is not by pid.
    let live = format!(".agents.json.tmp.{id}.2.7");
    let old = format!(".agents.json.tmp.{id}.2.8");
    temp(&live, Duration::from_secs(60));
    temp(&old, Duration::from_secs(2 * 3600));
    ok_on(
        &vol,
        Host::A,
        cwd.path(),
        "aw-ctl",
        &["new", "bob", "--backend", "mock"],
        "",
    );
    let temps: Vec<String> = std::fs::read_dir(vol.a().join(INST).join("_state"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert_eq!(temps, [live]);
}

/// How many times the threads of process `pid` have been switched out so far (each wake-up
/// of a waiting thread ends with one).
fn switches(pid: u32) -> u64 {
    let mut n = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads") {
        let status =
            std::fs::read_to_string(task.unwrap().path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                n += v.trim().parse::<u64>().unwrap();
            }
        }
    }
    n
}

/// The switches of `pid` during a quiet second, after a quiet second to settle.
fn switches_while_idle(pid: u32) -> u64 {
    std::thread::sleep(Duration::from_secs(1));
    let before = switches(pid);
    std::thread::sleep(Duration::from_secs(1));
    switches(pid) - before
}

/// An idle `aw-run --keep` (10 agents) and an idle `aw-peek --follow`: on a local disk
/// nothing polls (inotify only: no thread of theirs wakes up while nothing is written);
/// on the network file system the follower polls, some ten times a second, and a hundred
/// times a second for a second after a change. `AW_POLL` forces either mode.
#[test]
fn idle_waiters_poll_on_the_network_fs_and_never_on_a_local_disk() {
    let root = common::Root::new();
    root.send(INST, &[], "hello");
    let cwd = tempfile::tempdir().unwrap();
    let mut keep = keep_ten_idle_agents(root.path(), cwd.path(), &[]);
    wait_for("10 agents to be served", || {
        common::runner::shown(root.path(), INST, "a9")
    });
    let pid = keep.child().id();
    assert!(
        switches_while_idle(pid) <= 2,
        "an idle aw-run --keep on a local disk wakes up"
    );

    let follow_on = |root: &Path, poll: Option<&str>| {
        let mut c = Command::new(common::bin("aw-peek"));
        match poll {
            Some(p) => c.env("AW_POLL", p),
            None => c.env_remove("AW_POLL"),
        };
        c.arg("--root").arg(root).args(["-i", INST, "--follow"]);
        let mut child = Server::new(spawn(c));
        let rx = lines_of(child.child());
        next_line(&rx, "the first entry");
        (child, rx)
    };
    let (mut local, _rx) = follow_on(root.path(), None);
    assert!(
        switches_while_idle(local.child().id()) <= 2,
        "an idle aw-peek --follow on a local disk wakes up"
    );
    // AW_POLL=SECS forces polling, even on a local disk.
    let (mut forced, _rx) = follow_on(root.path(), Some("0.05"));
    assert!(
        switches_while_idle(forced.child().id()) >= 3,
        "aw-peek --follow with AW_POLL=0.05 polls"
    );

    let vol = Volume::new();
    ok_on(
        &vol,
        Host::A,
        cwd.path(),
        "aw-send",
        &["-i", INST, "--from", "alice", "hello"],
        "",
    );
    let (mut remote, rx) = follow_on(vol.a(), None);
    let pid = remote.child().id();
    let idle = switches_while_idle(pid);
    assert!(idle >= 3, "an idle aw-peek --follow on GlusterFS polls");
    // Right after a change from the other host it polls fast (every 10 ms: a reply may
    // follow), and slows down again (every 100 ms) once nothing changed for a while.
    ok_on(
        &vol,
        Host::B,
        cwd.path(),
        "aw-send",
        &["--from", "bob", "hi"],
        "",
    );
    next_line(&rx, "bob's entry");
    let before = switches(pid);
    std::thread::sleep(Duration::from_millis(500));
    let hot = switches(pid) - before;
    let idle_again = switches_while_idle(pid);
    eprintln!("idle {idle} hot {hot} idle again {idle_again}");
    assert!(
        hot >= 2 * idle_again.max(idle),
        "a follower on GlusterFS right after a change: {hot} switches in 0.5 s; \
         idle: {idle} and {idle_again} in 1 s"
    );
    // AW_POLL=inotify turns polling off, even on a network file system.
    let (mut inotify, _rx) = follow_on(vol.a(), Some("inotify"));
    assert!(
        switches_while_idle(inotify.child().id()) <= 2,
        "aw-peek --follow with AW_POLL=inotify polls on GlusterFS"
    );
}

/// `aw-run --keep` (with `args`) of agents a0 to a9 that read their prompt and answer
/// nothing, in instance [`INST`] under `root`, polling as it chooses.
fn keep_ten_idle_agents(root: &Path, cwd: &Path, args: &[&str]) -> Server {
    let mut wf = String::from("agents:\n");
    for a in 0..10 {
        wf.push_str(&format!(
            "  a{a}:\n    command: [sh, -c, 'cat >/dev/null']\n"
        ));
    }
    std::fs::write(cwd.join("wf.yaml"), wf).unwrap();
    let mut keep = Command::new(common::bin("aw-run"));
    keep.env_remove("AW_POLL")
        .current_dir(cwd)
        .arg("--root")
        .arg(root)
        .args(["-i", INST])
        .args(args)
        .args(["--keep", "-q", "wf.yaml"]);
    Server::new(spawn(keep))
}

/// A server waits for files that may never exist (the channel before the first entry, a
/// request to stop): on GlusterFS it asks for them with a lookup per poll, and lists no
/// folder while it waits (a listing per poll tripled an idle server's CPU).
#[test]
fn an_idle_server_on_glusterfs_lists_no_folder_while_its_files_do_not_exist() {
    let vol = Volume::new();
    let cwd = tempfile::tempdir().unwrap();
    let _keep = keep_ten_idle_agents(vol.a(), cwd.path(), &["--create"]);
    let inst = vol.a().join(INST);
    wait_for("10 agents to be served", || {
        common::runner::shown(vol.a(), INST, "a9")
    });
    assert!(!inst.join("channel.md").exists(), "no entry yet");
    // Past the fast polling that follows the start.
    std::thread::sleep(Duration::from_secs(2));
    vol.count_operations();
    std::thread::sleep(Duration::from_secs(2));
    let lookups = vol.operations("LOOKUP");
    let listings = vol.operations("OPENDIR");
    // Two waiters (the channel, the stop request) at ten polls a second: about 40 in all.
    assert!(
        lookups >= 10,
        "the idle server polls: {lookups} lookups in 2 s"
    );
    assert!(
        listings <= 2,
        "the idle server lists folders: {listings} in 2 s ({lookups} lookups)"
    );
}
