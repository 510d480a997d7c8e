//! Serving many agents from one `aw-run`: a server's open descriptors do not
//! grow with its agents, and an agent is still served by one process at a time: a second
//! server is refused, a killed one frees its agents at once, and the claim of an earlier
//! version (a process holding the flock of `<agent>.lock`) is respected.

use crate::common;

use std::time::Duration;

use common::runner::*;

/// A workflow of `n` mock agents `a1` .. `an`, each answering `pong from` its name.
fn mock_agents(n: usize) -> String {
    let mut wf = String::from("agents:\n");
    for i in 1..=n {
        wf.push_str(&format!(
            "  a{i}:\n    mock: {{replies: ['pong from a{i}']}}\n"
        ));
    }
    wf
}

/// `aw-run --keep` of the workflow `wf` in a root of its own, once every one of its `n`
/// agents is served.
fn keep_serving(s: &Setup, n: usize, limit: Option<u64>) -> Server {
    s.write("wf.yaml", &mock_agents(n));
    // Every controller reads the channel on every entry (one thread each): under a low
    // limit of open files some of those reads fail and wait out a cooldown, kept short.
    let mut c = s.cmd(&["--keep", "-q", "--retries", "5", "--cooldown", "0.2s"]);
    if let Some(limit) = limit {
        use std::os::unix::process::CommandExt;
        // SAFETY: between fork and exec, one async-signal-safe system call.
        unsafe {
            c.pre_exec(move || {
                nix::sys::resource::setrlimit(
                    nix::sys::resource::Resource::RLIMIT_NOFILE,
                    limit,
                    limit,
                )
                .map_err(std::io::Error::from)
            });
        }
    }
    let server = Server::new(spawn(c));
    let pid = u64::from(server.pid());
    wait_for("every agent to be served", || {
        let ps = serving(s);
        ps.len() == n && ps.iter().all(|(_, p)| *p == pid)
    });
    server
}

/// `aw-run --serve --keep AGENT`, once it serves the agent, the only one served.
fn serve_alone(s: &Setup, agent: &str) -> Server {
    let mut c = s.tool_cmd("aw-run");
    c.args(["-i", INST, "--serve", "--keep", "-q", agent]);
    let server = Server::new(spawn(c));
    let me = u64::from(server.pid());
    wait_for(&format!("{agent} to be served"), || {
        serving(s) == [(agent.to_string(), me)]
    });
    server
}

/// Stop the server of `agent` with `aw-ctl stop`, which it watches for from its start (a
/// SIGTERM that comes before it blocks the signal would end it by default), and wait for it
/// to exit 0.
fn stop(s: &Setup, server: Server, agent: &str) {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "stop", agent, "--timeout", "30"]);
    assert_code(&common::run_with(c, None), 0);
    assert_code(&server.wait(), 0);
}

/// The open descriptors of process `pid`, where each points.
fn descriptors(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The fewest descriptors `pid` has open over up to `looks` looks, 10 ms apart, stopping
/// at one of `enough` or fewer (a look may fall while controllers read files).
fn fewest_descriptors(pid: u32, looks: usize, enough: usize) -> Vec<String> {
    let mut fewest = descriptors(pid);
    for _ in 0..looks {
        if fewest.len() <= enough {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        let now = descriptors(pid);
        if now.len() < fewest.len() {
            fewest = now;
        }
    }
    fewest
}

/// Issue 21: a server held one open lock per agent. A `--keep` server of 10 mock agents
/// and one of 300 have the same number of open descriptors.
#[test]
fn a_server_s_descriptors_do_not_grow_with_its_agents() {
    let mut counts: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for n in [10, 300] {
        let s = Setup::new();
        let server = keep_serving(&s, n, None);
        // Once an agent has answered, the server watches the instance: every descriptor it
        // keeps is open.
        s.root.send(INST, &[], "@a1 ping");
        wait_for("a1's answer", || {
            s.entries().iter().any(|(from, _)| from == "a1")
        });
        let fds = match counts.first() {
            None => fewest_descriptors(server.pid(), 20, 0),
            Some(c) => fewest_descriptors(server.pid(), 300, c.1),
        };
        let locks = fds.iter().filter(|f| f.ends_with(".lock")).count();
        assert_eq!(locks, 0, "{n} agents: {fds:#?}");
        counts.push((n, fds.len(), fds));
        stop(&s, server, "a1");
    }
    assert_eq!(counts[0].1, counts[1].1, "{counts:#?}");
}

/// A server's start writes its agents' name index aside while it shows them served: once
/// `--detach` says it is ready, the index mirrors the registry exactly (stamped) and every
/// agent is shown served, idle, by this server, through one record beside the server's
/// file (none of their own), with no temp file left in either folder; so again when the
/// same agents are served a second time (the index then unchanged).
#[test]
fn a_server_is_ready_with_its_name_index_exact_and_every_agent_shown() {
    let s = Setup::new();
    let n = 300;
    s.write("wf.yaml", &mock_agents(n));
    let inst = s.root.inst_dir(INST);
    for round in 0..2 {
        let out = run_hang_guarded(s.cmd(&["--keep", "--detach", "-q"]));
        let (pid, _guard) = detached(&out);
        common::agent_index::assert_exact(&inst);
        let serve = inst.join("_state/serve");
        let (mut records, mut claims) = (Vec::new(), 0);
        for e in std::fs::read_dir(&serve).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(
                !name.starts_with('.'),
                "round {round}: {name} left in serve/"
            );
            claims += usize::from(name.ends_with(".lock"));
            if name.ends_with(".json") {
                records.push(name);
            }
        }
        assert_eq!(claims, n, "round {round}");
        // One record for all, named after the server's file; those of the agents (left
        // stopped by the first round's server) are not this server's.
        let (mine, others): (Vec<String>, Vec<String>) = records
            .into_iter()
            .partition(|r| r.ends_with(".server.json"));
        assert_eq!(mine.len(), 1, "round {round}: {mine:?}");
        assert!(mine[0].contains(&format!(".{pid}.")), "{mine:?}");
        assert_eq!(others.len(), round * n, "round {round}");
        for r in &others {
            let text = std::fs::read_to_string(serve.join(r)).unwrap();
            assert!(
                text.contains("\"stopped\"") && !text.contains(&mine[0][..mine[0].len() - 5]),
                "{text}"
            );
        }
        let shown = aw::serve::list(
            &aw::instance::Root::new(s.root.path())
                .instance(INST)
                .unwrap(),
        );
        assert_eq!(shown.len(), n, "round {round}");
        for (i, r) in shown.iter().enumerate() {
            assert!(r.agent.starts_with('a'), "{r:?}");
            assert_eq!(r.pid, pid, "{r:?}");
            assert_eq!(r.state, aw::serve::ControllerState::Idle, "{r:?}");
            assert_eq!(r.runs, 0, "{r:?}");
            assert!(i == 0 || shown[i - 1].agent < r.agent, "not by name");
        }
        let hidden = std::fs::read_dir(inst.join("_state/agents"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count();
        assert_eq!(hidden, 0, "round {round}");
        let mut c = s.tool_cmd("aw-ctl");
        c.args(["stop", &format!("@{INST}"), "--timeout", "30"]);
        assert_code(&common::run_with(c, None), 0);
        wait_for("the server to end", || !alive(pid));
    }
}

/// Issue 21: with a limit of 64 open files (soft = hard, so that aw-run cannot raise it),
/// a server of 500 agents starts and answers a mention; a second server of one of its
/// agents is refused at once, naming it; once it is killed (SIGKILL) the agent is served
/// again at once, and the dead server's lock file is swept.
#[test]
fn a_server_of_500_agents_under_64_open_files_serves_and_is_replaced_after_sigkill() {
    let s = Setup::new();
    let first = keep_serving(&s, 500, Some(64));
    let pid = first.pid();
    s.root.send(INST, &[], "@a250 ping");
    wait_for("a250's answer", || {
        s.entries()
            .iter()
            .any(|(from, m)| from == "a250" && m == "pong from a250")
    });
    let entries = s.entries();
    assert!(
        entries.iter().skip(1).all(|(from, _)| from == "a250"),
        "{entries:?}"
    );
    // A second server of a250 is refused at once with the first one's pid.
    let mut c = s.tool_cmd("aw-run");
    c.args(["-i", INST, "--serve", "a250"]);
    let out = common::run_with(c, None);
    assert_code(&out, 75);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("a250@{INST}: already served by aw-run pid {pid}")),
        "{err}"
    );
    let serve_dir = s.root.inst_dir(INST).join("_state/serve");
    let servers = |d: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".server"))
            .collect();
        v.sort();
        v
    };
    let dead = servers(&serve_dir);
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(dead[0].contains(&format!(".{pid}.")), "{dead:?}");
    // SIGKILL: nothing of the first server runs on.
    let mut first = first;
    let child = first.child();
    child.kill().unwrap();
    child.wait().unwrap();
    let second = serve_alone(&s, "a250");
    let now = servers(&serve_dir);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, dead, "the dead server's lock was not swept");
    stop(&s, second, "a250");
    assert!(servers(&serve_dir).is_empty());
}

/// A claim of an earlier version: its process holds the flock of `<agent>.lock` and wrote
/// its pid there. A new server of that agent is refused, naming that pid; once that
/// process is gone, the agent is served.
#[test]
fn a_claim_of_an_earlier_version_still_refuses_a_new_server() {
    let s = Setup::new();
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "new", "alice", "--backend", "mock"]);
    assert_code(&common::run_with(c, None), 0);
    let dir = s.root.inst_dir(INST).join("_state/serve");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = dir.join("alice.lock");
    let mut old = hold_like_an_earlier_version(&lock);
    let mut c = s.tool_cmd("aw-run");
    c.args(["-i", INST, "--serve", "alice"]);
    let out = common::run_with(c, None);
    let _ = old.kill();
    let _ = old.wait();
    assert_code(&out, 75);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "alice@{INST}: already served by aw-run pid {}",
            old.id()
        )),
        "{err}"
    );
    // Nothing was written over the old claim, and no server file is left.
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["alice.lock"]);
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{}\n", old.id())
    );
    let server = serve_alone(&s, "alice");
    stop(&s, server, "alice");
}

#[test]
fn a_server_file_left_half_made_by_a_killed_server_is_swept_by_the_next() {
    let s = Setup::new();
    s.write("wf.yaml", &mock_agents(2));
    let dir = s.root.inst_dir(INST).join("_state/serve");
    std::fs::create_dir_all(&dir).unwrap();
    let here = &aw::host::this().id;
    // A process of this host that is gone, this test (alive), and another host.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let dead = format!(".{here}.{gone_pid}.18eb9b82c6be00b5.server.tmp");
    let live = format!(".{here}.{}.18eb9b82c6be00b6.server.tmp", std::process::id());
    let other = ".0123456789abcdef.7.18eb9b82c6be00b7.server.tmp".to_string();
    for f in [&dead, &live, &other] {
        std::fs::write(dir.join(f), "").unwrap();
    }
    let server = Server::new(spawn(s.cmd(&["--keep", "-q"])));
    wait_for("both agents to be served", || serving(&s).len() == 2);
    assert!(!dir.join(&dead).exists(), "{dead} left");
    assert!(dir.join(&live).exists(), "{live} swept");
    assert!(dir.join(&other).exists(), "{other} swept though fresh");
    stop(&s, server, "a1");
}
