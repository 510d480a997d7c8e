//! One dispatcher serves every agent of a server: idle agents cost no thread, and a new
//! entry makes the server look at the inboxes of the agents it mentions and no other (nor
//! list a folder that grows with the agents).

use crate::common;

use common::runner::{Server, Setup, spawn, wait_for};

/// A workflow of `n` mock agents, `agent1` .. `agentN`, each answering `pong`.
fn agents(n: usize) -> String {
    let mut wf = String::from("name: w\nagents:\n");
    for i in 1..=n {
        wf.push_str(&format!(
            "  agent{i}:\n    mock:\n      replies: ['pong {i}']\n"
        ));
    }
    wf
}

/// The number of threads of process `pid`.
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads line")
}

/// Wait until `agent` is served (shown once every agent is registered).
fn served(s: &Setup, agent: &str) {
    wait_for(&format!("{agent} to be served"), || {
        common::runner::shown(s.root.path(), common::runner::INST, agent)
    });
}

/// Send `text` as `user` and wait until `agent` has answered `n` times in all.
fn ask(s: &Setup, agent: &str, text: &str, n: usize) {
    let out = s
        .tool_cmd("aw-send")
        .args(["-i", common::runner::INST, "--from", "user", text])
        .output()
        .expect("aw-send");
    assert!(out.status.success(), "{out:?}");
    wait_for(&format!("{agent}'s answer number {n}"), || {
        s.entries().iter().filter(|(f, _)| f == agent).count() >= n
    });
}

#[test]
fn a_kept_server_has_as_many_threads_for_200_agents_as_for_10() {
    let (small, large) = (Setup::new(), Setup::new());
    small.write("wf.yaml", &agents(10));
    large.write("wf.yaml", &agents(200));
    let a = Server::new(spawn(small.cmd(&["--keep", "-q"])));
    let b = Server::new(spawn(large.cmd(&["--keep", "-q"])));
    served(&small, "agent10");
    served(&large, "agent200");
    // Both answer, and each agent that ran is idle again.
    ask(&small, "agent10", "@agent10 ping", 1);
    ask(&large, "agent200", "@agent200 ping", 1);
    // The run's own thread waits for the next run once this one is over (a few such
    // threads at most): both have the same threads.
    wait_for("the two servers to have the same number of threads", || {
        threads(a.pid()) == threads(b.pid())
    });
    let n = threads(b.pid());
    assert!(n < 20, "a server of 200 agents has {n} threads");
    for out in [a.term(), b.term()] {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
}

/// `aw-run --keep` on the setup's `wf.yaml` under strace, which logs the `calls` of every
/// thread to `strace.txt` in the setup's folder.
fn traced_server(s: &Setup, calls: &str) -> Server {
    let mut c = std::process::Command::new("strace");
    c.current_dir(s.dir())
        .env("PATH", common::runner::path_with_bins())
        .args(["-f", "-y", "-qq", "-e", calls, "-o"])
        .arg(s.dir().join("strace.txt"))
        .arg(common::bin("aw-run"))
        .arg("--root")
        .arg(s.root.path())
        .args(["-i", common::runner::INST, "--keep", "-q", "wf.yaml"]);
    Server::new(spawn(c))
}

/// Stop the traced server with SIGTERM to aw-run itself (strace would only let it go): it
/// ends with 0; what strace logged.
fn stop_traced(s: &Setup, server: Server) -> String {
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", server.pid()))
        .expect("strace's children");
    let aw_run = children
        .split_whitespace()
        .next()
        .expect("aw-run under strace");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", aw_run])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = server.wait();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    std::fs::read_to_string(s.dir().join("strace.txt")).expect("strace log")
}

#[test]
fn a_mention_makes_the_server_look_at_the_inbox_of_the_agent_it_names_alone() {
    let s = Setup::new();
    s.write("wf.yaml", &agents(30));
    let server = traced_server(&s, "trace=openat,openat2,getdents64");
    served(&s, "agent30");
    // Five messages to agent7, one after the other, each answered.
    for n in 1..=5 {
        ask(&s, "agent7", &format!("@agent7 ping {n}"), n);
    }
    let trace = stop_traced(&s, server);
    let opens = |agent: &str| {
        let name = format!("mentions/{agent}\"");
        trace.lines().filter(|l| l.contains(&name)).count()
    };
    // agent7's inbox is read for each message.
    assert!(
        opens("agent7") >= 5,
        "agent7's inbox read {} times",
        opens("agent7")
    );
    // The others' at the start, each file opened once (the check of the index and the read
    // of the inbox share it), and not for each message to agent7 (nothing mentions them
    // afterwards). The first reader, which catches the index up under the lock, checks the
    // file of the agent it reads before and after: one agent may be opened twice.
    let others: Vec<usize> = (1..=30)
        .filter(|i| *i != 7)
        .map(|i| opens(&format!("agent{i}")))
        .collect();
    assert!(
        others.iter().all(|n| *n <= 2) && others.iter().sum::<usize>() <= others.len() + 1,
        "the inboxes of agents nothing mentions opened {others:?} times"
    );
    // The folder of the serving records (two files per agent) is listed a few times at the
    // start at most, not at each of the runs' state changes (a write sweeps a folder of old
    // temporary files once per process).
    let listings = trace
        .lines()
        .filter(|l| l.contains("getdents64(") && l.contains("/_state/serve>"))
        .count();
    assert!(listings <= 8, "_state/serve listed {listings} times");
    // Every message was answered once, by agent7 alone.
    let answers: Vec<String> = s
        .entries()
        .into_iter()
        .filter(|(f, _)| f != "user")
        .map(|(f, m)| format!("{f}: {m}"))
        .collect();
    assert_eq!(answers, vec!["agent7: pong 7"; 5]);
}

#[test]
fn a_server_reads_the_registry_again_only_once_it_changed() {
    let s = Setup::new();
    // agent1 answers every message with a mention of bob, who is not registered yet.
    let mut wf = agents(20);
    wf = wf.replace("replies: ['pong 1']", "replies: ['@bob pong 1']");
    s.write("wf.yaml", &wf);
    let server = traced_server(&s, "trace=openat,openat2");
    served(&s, "agent20");
    let mentions_of_last = || {
        let entries = s.root.entries(common::runner::INST);
        let last = entries.last().expect("an entry");
        assert_eq!(last.from, "agent1");
        last.mentions.clone()
    };
    ask(&s, "agent1", "@agent1 one", 1);
    assert_eq!(mentions_of_last(), Vec::<String>::new());
    // Registered while the server runs: the next answer mentions bob.
    let out = s
        .tool_cmd("aw-ctl")
        .args(["-i", common::runner::INST, "new", "bob"])
        .output()
        .expect("aw-ctl");
    assert!(out.status.success(), "{out:?}");
    ask(&s, "agent1", "@agent1 two", 2);
    assert_eq!(mentions_of_last(), ["bob"]);
    // Ten more answers with a mention each, the registry unchanged.
    for n in 3..=12 {
        ask(&s, "agent1", &format!("@agent1 ping {n}"), n);
    }
    let trace = stop_traced(&s, server);
    // Read at the start, and again after bob was registered: not for each answer.
    let reads = trace
        .lines()
        .filter(|l| l.contains("_state/agents.json\"") && !l.contains("ENOENT"))
        .count();
    assert!(
        reads <= 6,
        "agents.json opened {reads} times for 12 answers"
    );
}

#[test]
fn a_waiting_send_reads_its_agents_record_alone_and_never_the_registry() {
    let s = Setup::new();
    // 100 agents: four files of the name index.
    s.write("wf.yaml", &agents(100));
    let server = Server::new(spawn(s.cmd(&["--keep", "-q"])));
    served(&s, "agent100");
    let log = s.dir().join("send.strace");
    let out = std::process::Command::new("strace")
        .current_dir(s.dir())
        .args(["-f", "-qq", "-e", "trace=openat,openat2", "-o"])
        .arg(&log)
        .arg(common::bin("aw-send"))
        .arg("--root")
        .arg(s.root.path())
        .args([
            "-i",
            common::runner::INST,
            "--from",
            "user",
            "--to",
            "agent7",
            "--wait",
            "--timeout",
            "60",
            "ping",
        ])
        .output()
        .expect("strace aw-send");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "pong 7\n");
    let trace = std::fs::read_to_string(&log).expect("strace log");
    let opened = |needle: &str| {
        trace
            .lines()
            .filter(|l| l.contains(needle) && !l.contains("ENOENT"))
            .count()
    };
    // Whether agent7 is served and in what state: its claim and record, no other agent's.
    for i in (1..=100).filter(|i| *i != 7) {
        for f in [
            format!("/serve/agent{i}.json\""),
            format!("/serve/agent{i}.lock\""),
        ] {
            assert_eq!(opened(&f), 0, "{f} read by aw-send");
        }
    }
    // The claim is always read (is agent7 served at all?); its record only while the
    // answer is not there yet, which a fast agent makes never.
    assert!(opened("/serve/agent7.lock\"") >= 1);
    // Whether agent7 is an agent: the file of its bucket of the registry's name index, no
    // other, and never the whole registry.
    let inst = s.root.path().join(common::runner::INST);
    let mine = common::agent_index::bucket_file(&inst, "agent7");
    let mine = format!(
        "_state/agents/{}\"",
        mine.file_name().unwrap().to_str().unwrap()
    );
    assert_eq!(opened("_state/agents.json\""), 0);
    assert!(opened(&mine) >= 1, "{mine} not read by aw-send");
    for b in 0..4 {
        let f = format!("_state/agents/{b}.json\"");
        if f != mine {
            assert_eq!(opened(&f), 0, "{f} read by aw-send");
        }
    }
    let out = server.term();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
