//! One `aw-run --serve` process serving agents of several instances (`a@one b@two`, or
//! `-i one -i two`): real servers, mock agents registered with `aw-ctl new`, real signals.

use crate::common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output};

use common::runner::*;
use serde_json::Value;

/// A root with mock agent `a` in instance `one` and `b` in instance `two`, and a private
/// registry of servers (`XDG_RUNTIME_DIR`) so that `--all-roots` sees only this test's.
struct Two {
    s: Setup,
    runtime: tempfile::TempDir,
}

impl Two {
    fn new() -> Two {
        Two::with(|_, _| vec!["--backend".into(), "mock".into()])
    }

    /// `a` in `one` and `b` in `two`, registered with the `aw-ctl new` arguments that
    /// `backend` gives for (instance, agent).
    fn with(backend: impl Fn(&Two, &str) -> Vec<String>) -> Two {
        let t = Two {
            s: Setup::new(),
            runtime: tempfile::tempdir().expect("runtime dir"),
        };
        for (inst, agent) in [("one", "a"), ("two", "b")] {
            let mut args = vec!["-i", inst, "new", agent];
            let more = backend(&t, inst);
            args.extend(more.iter().map(String::as_str));
            let out = t.run("aw-ctl", &args);
            assert_code(&out, 0);
        }
        t
    }

    fn cmd(&self, tool: &str, args: &[&str]) -> Command {
        let mut c = self.s.tool_cmd(tool);
        c.env_remove("AW_INSTANCE")
            .env("XDG_RUNTIME_DIR", self.runtime.path())
            .args(args);
        c
    }

    fn run(&self, tool: &str, args: &[&str]) -> Output {
        run_hang_guarded(self.cmd(tool, args))
    }

    /// A serving aw-run with `args`, its output piped.
    fn serve(&self, args: &[&str]) -> Server {
        let mut c = self.cmd("aw-run", &["--serve", "--backoff", "0.01s"]);
        c.args(args);
        Server::new(spawn(c))
    }

    /// `aw-ctl ps --json` rows (with `args`): (instance, agent, pid).
    fn ps(&self, args: &[&str]) -> Vec<(String, String, u64)> {
        let mut all = vec!["ps", "--json"];
        all.extend_from_slice(args);
        let out = self.run("aw-ctl", &all);
        assert_code(&out, 0);
        common::json_lines(&out.stdout)
            .iter()
            .map(|v: &Value| {
                (
                    v["instance"].as_str().unwrap_or_default().to_string(),
                    v["agent"].as_str().unwrap_or_default().to_string(),
                    v["pid"].as_u64().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Wait until `pid` serves `a@one` and `b@two`, as `aw-ctl ps` shows them.
    fn wait_served(&self, pid: u32) {
        let want = vec![
            ("one".to_string(), "a".to_string(), u64::from(pid)),
            ("two".to_string(), "b".to_string(), u64::from(pid)),
        ];
        wait_for("one server of a@one and b@two", || self.ps(&[]) == want);
    }

    /// The messages of instance `inst`, as (from, message).
    fn entries(&self, inst: &str) -> Vec<(String, String)> {
        self.s
            .root
            .entries(inst)
            .into_iter()
            .map(|e| (e.from, e.message.trim_end().to_string()))
            .collect()
    }

    fn send(&self, inst: &str, text: &str) {
        self.s.root.send(inst, &[], text);
    }
}

/// The output of a server that was stopped, its stdout and stderr as text.
fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr(out),
    )
}

#[test]
fn one_server_answers_mentions_in_two_instances_and_sigterm_stops_both() {
    let t = Two::new();
    let server = t.serve(&["--keep", "a@one", "b@two"]);
    let pid = server.pid();
    t.wait_served(pid);
    // Each instance shows the one server, and so does the list of every root.
    assert_eq!(t.ps(&["-i", "one"]).len(), 1);
    assert_eq!(t.ps(&["-i", "two"]).len(), 1);
    let out = t.run("aw-ctl", &["ps", "--all-roots", "--json"]);
    let dirs: Vec<String> = common::json_lines(&out.stdout)
        .iter()
        .map(|v| v["dir"].as_str().unwrap_or_default().to_string())
        .collect();
    let root = t.s.root.path().canonicalize().unwrap();
    assert_eq!(
        dirs,
        [root.join("one"), root.join("two")].map(|p| p.display().to_string())
    );

    t.send("one", "@a hello one");
    t.send("two", "@b hello two");
    let handled = |agent: &str| (agent.to_string(), format!("{agent}: handled 1 message(s)"));
    wait_for("a reply in each instance", || {
        t.entries("one").contains(&handled("a")) && t.entries("two").contains(&handled("b"))
    });
    assert_eq!(t.entries("one").len(), 2);
    assert_eq!(t.entries("two").len(), 2);

    // A second server of an agent it serves is refused, naming it.
    let again = t.run("aw-run", &["--serve", "a@one"]);
    assert_code(&again, 75);
    let err = stderr(&again);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("a@one: already served by aw-run pid {pid}")),
        "{err}"
    );

    let out = server.term();
    assert_code(&out, 0);
    assert!(t.ps(&[]).is_empty(), "still served: {:?}", t.ps(&[]));
    let (stdout, stderr) = texts(&out);
    // Every line says which instance it is for.
    for line in stdout.lines() {
        assert!(
            line.starts_with("[one] #") || line.starts_with("[two] #"),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains("@a: a: handled 1 message(s)") && stdout.lines().count() == 4,
        "{stdout}"
    );
    assert!(stderr.contains("aw-run: a@one: run 1 started"), "{stderr}");
    assert!(stderr.contains("aw-run: b@two: run 1 ok"), "{stderr}");
    assert!(
        stderr.contains("aw-run: summary of one: a 1 run(s)")
            && stderr.contains("aw-run: summary of two: b 1 run(s)"),
        "{stderr}"
    );
}

#[test]
fn aw_ctl_stop_of_one_instance_stops_the_server_of_both() {
    let t = Two::new();
    // Several -i without AGENT: every runnable agent of each instance.
    let mut server = t.serve(&["--keep", "--json", "-i", "one", "-i", "two"]);
    let pid = server.pid();
    t.wait_served(pid);
    t.send("two", "@b json");
    wait_for("b's reply", || t.entries("two").len() == 2);
    let out = t.run("aw-ctl", &["-i", "one", "stop", "a"]);
    assert_code(&out, 0);
    // Both are waited for and said: the process serves both.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("stopped a@one (aw-run pid {pid})\nstopped b@two (aw-run pid {pid})\n")
    );
    let mut stdout = String::new();
    server
        .child()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let out = server.wait();
    assert_code(&out, 0);
    assert!(t.ps(&[]).is_empty(), "still served: {:?}", t.ps(&[]));
    let summaries: Vec<Value> = common::json_lines(stdout.as_bytes())
        .into_iter()
        .filter(|v| v["event"] == "summary")
        .collect();
    let mut insts: Vec<&str> = summaries
        .iter()
        .map(|v| v["instance"].as_str().unwrap_or("?"))
        .collect();
    insts.sort();
    assert_eq!(insts, ["one", "two"], "{stdout}");
    // Every object says its instance: b's entries, its start and run events.
    let all = common::json_lines(stdout.as_bytes());
    let of = |event: &str| -> Vec<&Value> { all.iter().filter(|v| v["event"] == event).collect() };
    assert_eq!(of("entry").len(), 2, "{stdout}");
    assert_eq!(of("start").len(), 1, "{stdout}");
    assert_eq!(of("run").len(), 1, "{stdout}");
    for v in of("entry").into_iter().chain(of("start")).chain(of("run")) {
        assert_eq!(v["instance"], "two", "{v}");
    }
}

#[test]
fn sigint_stops_every_instance_with_130_said_once() {
    let t = Two::new();
    let server = t.serve(&["--keep", "-q", "a@one", "b@two"]);
    let pid = server.pid();
    t.wait_served(pid);
    Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill");
    let out = server.wait();
    assert_code(&out, 130);
    assert_eq!(stderr(&out), "aw-run: interrupted\n");
    assert!(t.ps(&[]).is_empty());
}

#[test]
fn bad_addresses_and_repeated_instances_are_one_line_errors() {
    let t = Two::new();
    let s = &t.s;
    s.write(
        "wf.yaml",
        "name: w\nagents:\n  - name: x\n    backend: mock\n",
    );
    let before = (t.entries("one"), t.entries("two"));
    for (args, code, what) in [
        (&["--serve", "a@"][..], 65, "invalid instance name ''"),
        (&["--serve", "@one"], 65, "'@one' names an instance"),
        (&["--serve", "a@one", "b@nope"], 66, "no instance 'nope'"),
        (
            &["--serve", "a@one", "x@two"],
            66,
            "no agent 'x' in instance 'two'",
        ),
        (
            &["--serve", "-i", "one", "-i", "two", "a"],
            64,
            "-i is given more than once with named AGENTs",
        ),
        (
            &["-i", "one", "-i", "two", "wf.yaml"],
            64,
            "-i is given more than once (one, two)",
        ),
    ] {
        let out = t.run("aw-run", args);
        assert_code(&out, code);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("aw-run: ") && err.contains(what),
            "{args:?}: {err}"
        );
        assert!(t.ps(&[]).is_empty(), "{args:?} serves something");
    }
    assert_eq!((t.entries("one"), t.entries("two")), before);
    assert!(!Path::new(&s.root.inst_dir("w")).exists());
    // The same -i twice is one instance.
    let out = t.run("aw-run", &["--serve", "-i", "one", "-i", "one"]);
    assert_code(&out, 0);
}

#[test]
fn the_other_tools_refuse_two_instances_instead_of_taking_the_last() {
    let t = Two::new();
    let before = (t.entries("one"), t.entries("two"));
    for (tool, args) in [
        ("aw-send", &["--from", "user", "@a hi"][..]),
        ("aw-peek", &[][..]),
        ("aw-ctl", &["ls"][..]),
        ("aw-ctl", &["ps"][..]),
        ("aw-ctl", &["ack", "a"][..]),
        ("aw-mcp", &["--agent", "a"][..]),
    ] {
        let mut all = vec!["-i", "one", "-i", "two"];
        all.extend_from_slice(args);
        let out = t.run(tool, &all);
        assert_code(&out, 64);
        let err = stderr(&out);
        assert_eq!(
            err,
            format!(
                "{tool}: -i names several instances ('one', 'two'): this command works in one\n"
            ),
            "{tool} {args:?}"
        );
    }
    assert_eq!((t.entries("one"), t.entries("two")), before);
    // Named twice, one instance: as once.
    let out = t.run(
        "aw-send",
        &["-i", "two", "-i", "two", "--from", "user", "@b hi"],
    );
    assert_code(&out, 0);
    assert_eq!(t.entries("two").len(), before.1.len() + 1);
    assert_eq!(t.entries("one"), before.0);
}

#[test]
fn detach_serves_several_instances_in_the_background() {
    let t = Two::new();
    let out = t.run(
        "aw-run",
        &["--serve", "--keep", "--detach", "a@one", "b@two"],
    );
    let (pid, _guard) = detached(&out);
    t.wait_served(pid);
    t.send("two", "@b in the background");
    wait_for("b's reply", || t.entries("two").len() == 2);
    let out = t.run("aw-ctl", &["stop", "@two"]);
    assert_code(&out, 0);
    wait_for("the server to end", || !alive(pid));
    assert!(t.ps(&[]).is_empty());
    // The log is the first instance's.
    let log = std::fs::read_to_string(t.s.root.inst_dir("one").join("_state/aw-run.log"))
        .expect("the log");
    assert!(log.contains("[two] #2"), "{log}");
    assert!(log.contains("aw-run: summary of one"), "{log}");
}

/// Instance `two` over a recorded budget: its loop cannot start.
fn over_budget(t: &Two) {
    std::fs::write(
        t.s.root.inst_dir("two").join("_state/budget.json"),
        r#"{"limit":{"tokens":10},"spent":{"input_tokens":100,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":null}}"#,
    )
    .expect("write the ledger");
}

#[test]
fn an_instance_that_cannot_start_is_named_and_the_others_are_served() {
    let t = Two::new();
    over_budget(&t);
    // Run mode: one's work is done (0), two's loop failed (1): the highest.
    t.send("one", "@a first");
    let out = t.run("aw-run", &["--serve", "a@one", "b@two"]);
    assert_code(&out, 1);
    let err = stderr(&out);
    assert!(err.contains("aw-run: instance 'two': budget: "), "{err}");
    assert!(!err.contains("(hint"), "{err}");
    assert!(
        t.entries("one")
            .contains(&("a".into(), "a: handled 1 message(s)".into()))
    );

    // Detached: the starting process says it, and the process serves the other.
    let out = t.run(
        "aw-run",
        &["--serve", "--keep", "--detach", "a@one", "b@two"],
    );
    let (pid, _guard) = detached(&out);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0].starts_with("aw-run: instance 'two': budget: "),
        "{err}"
    );
    assert!(lines[1].starts_with("hint: "), "{err}");
    assert!(
        lines[2].starts_with(&format!("aw-run: serving in the background as pid {pid}; ")),
        "{err}"
    );
    assert_eq!(t.ps(&[]), [("one".into(), "a".into(), u64::from(pid))]);
    t.send("one", "@a second");
    wait_for("a's reply", || t.entries("one").len() == 4);
    assert_code(&t.run("aw-ctl", &["stop", "@one"]), 0);
    wait_for("the server to end", || !alive(pid));
}

#[test]
fn a_loop_across_the_instances_of_one_server_is_stopped_by_the_pair_guard() {
    // a answers in two to b, b answers in one to a: neither instance registers the other's
    // agent, yet one process serves both, and to its loop guard both are agents.
    let t = Two::with(|t, inst| {
        let other = if inst == "one" { "two b" } else { "one a" };
        let script = t.s.script(
            &format!("cross-{inst}.sh"),
            "cat >/dev/null\naw-send -i \"$1\" \"@$2 again\" >/dev/null\n",
        );
        let mut args = vec!["--backend".to_string(), "exec".into(), "--".into()];
        args.push(script.display().to_string());
        args.extend(other.split(' ').map(str::to_string));
        args
    });
    let server = t.serve(&["--keep", "--debounce", "0.01s", "a@one", "b@two"]);
    let pid = server.pid();
    t.wait_served(pid);
    t.send("one", "@a go");
    let notice = |t: &Two| {
        ["one", "two"].iter().find_map(|i| {
            t.entries(i).into_iter().find(|(f, m)| {
                f == "system" && m.contains("mentioned each other 10 times within 60 s")
            })
        })
    };
    wait_for("the pair guard", || notice(&t).is_some());
    let (_, why) = notice(&t).unwrap();
    assert!(
        why.starts_with("loop guard: a and b mentioned")
            || why.starts_with("loop guard: b and a mentioned"),
        "{why}"
    );
    // Settled: no new entry in either instance for 0.8 s; at most 11 answers of each.
    let count = |t: &Two| t.entries("one").len() + t.entries("two").len();
    let mut n = 0;
    wait_for("the instances to settle", || {
        let before = count(&t);
        std::thread::sleep(std::time::Duration::from_millis(800));
        n = count(&t);
        n == before
    });
    assert!(
        n <= 1 + 2 * 11 + 2,
        "{n}: {:?} {:?}",
        t.entries("one"),
        t.entries("two")
    );
    assert!(alive(pid));
    let (_, err) = texts(&server.term());
    assert!(err.contains(&format!("aw-run: {why}")), "{err}");
}
