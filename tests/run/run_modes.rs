//! aw-run's modes with real processes: `--keep` woken by a separate `aw-send` (inotify and
//! polling), stopped by SIGTERM with exit 0; `--serve` of registered agents; `--detach`;
//! the cooldown after a failure; and the context forms (`false`, `memory`, `config.dir`).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::runner::*;
use common::tool;

/// A `--keep` server of `workflow`, started and serving.
fn keep(s: &Setup, workflow: &str, args: &[&str]) -> Server {
    s.write("wf.yaml", workflow);
    let mut a = vec!["--keep"];
    a.extend_from_slice(args);
    let child = Server::new(spawn(s.cmd(&a)));
    wait_for("the agents to be served", || {
        common::runner::shown(s.root.path(), INST, "alice")
    });
    child
}

/// Is `agent` served? (read as `aw-ctl ps` does)
fn served(s: &Setup, agent: &str) -> bool {
    let inst = aw::instance::Root::new(s.root.path())
        .instance(INST)
        .expect("instance");
    aw::serve::is_served(&inst, agent)
}

/// The record of `agent`'s controller: as `aw-ctl ps` reads it while it is served (its
/// server's record for its agents until it writes its own), else its file.
fn serve_state(s: &Setup, agent: &str) -> serde_json::Value {
    let inst = aw::instance::Root::new(s.root.path())
        .instance(INST)
        .expect("instance");
    if let Some(r) = aw::serve::record(&inst, agent) {
        return serde_json::to_value(r).expect("JSON");
    }
    let p = s
        .root
        .inst_dir(INST)
        .join(format!("_state/serve/{agent}.json"));
    serde_json::from_slice(&std::fs::read(&p).expect("serve state")).expect("JSON")
}

fn send(s: &Setup, text: &str) {
    let out = tool("aw-send")
        .args(["--root"])
        .arg(s.root.path())
        .args(["-i", INST, text])
        .output()
        .expect("aw-send");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const ALICE: &str = "agents:\n  alice:\n    mock: {replies: ['@user got it']}\n";

fn keep_is_woken_by_a_separate_aw_send(args: &[&str]) {
    let s = Setup::new();
    let child = keep(&s, ALICE, args);
    let st = serve_state(&s, "alice");
    assert_eq!(st["state"], "idle");
    assert_eq!(st["runs"], 0);
    assert_eq!(st["pid"], child.pid());
    assert_eq!(st["instance"], INST);
    assert!(
        st["workflow"].as_str().unwrap().ends_with("wf.yaml"),
        "{st}"
    );
    for i in 1..=3 {
        send(&s, &format!("@alice job {i}"));
        wait_for("alice's reply", || s.entries().len() == 2 * i);
    }
    wait_for("the third run to end", || {
        let st = serve_state(&s, "alice");
        st["runs"] == 3 && st["state"] == "idle"
    });
    assert_eq!(s.unread("alice"), 0);
    let out = child.term();
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains("summary: alice 3 run(s) 0 failure(s)"),
        "{}",
        stderr(&out)
    );
    assert!(!served(&s, "alice"), "the serving lock is released");
    assert_eq!(serve_state(&s, "alice")["state"], "stopped");
    let froms: Vec<String> = s.entries().into_iter().map(|e| e.0).collect();
    assert_eq!(froms, ["user", "alice", "user", "alice", "user", "alice"]);
}

#[test]
fn keep_is_woken_by_aw_send_and_sigterm_ends_it_with_0() {
    keep_is_woken_by_a_separate_aw_send(&[]);
}

#[test]
fn keep_with_polling_is_woken_by_aw_send() {
    keep_is_woken_by_a_separate_aw_send(&["--poll", "0.02"]);
}

#[test]
fn sigterm_during_a_run_kills_the_backend_and_leaves_the_message_unread() {
    let s = Setup::new();
    s.script("slow.sh", "echo $$ > \"$AW_AGENT.pid\"\nexec sleep 30\n");
    let wf = "agents:\n  alice:\n    command: [./slow.sh]\n";
    let child = keep(&s, wf, &[]);
    send(&s, "@alice work");
    let pid_file = s.dir().join("alice.pid");
    wait_for("the backend to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let backend: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(serve_state(&s, "alice")["state"], "running");
    let out = child.term();
    assert_code(&out, 0);
    assert!(!alive(backend), "the backend was stopped with aw-run");
    assert!(group_members(backend).is_empty());
    assert_eq!(
        s.unread("alice"),
        1,
        "the message stays for the next server"
    );
    assert_eq!(s.transcript("alice", 1)["status"], "killed");
}

#[test]
fn serve_runs_registered_agents_until_done() {
    let s = Setup::new();
    let ctl = |args: &[&str]| {
        let mut c = tool("aw-ctl");
        c.current_dir(s.dir())
            .arg("--root")
            .arg(s.root.path())
            .args(["-i", INST])
            .args(args);
        c.output().expect("aw-ctl")
    };
    assert!(ctl(&["new", "bob", "--backend", "mock"]).status.success());
    assert!(ctl(&["new", "carol"]).status.success());
    send(&s, "@bob one");
    send(&s, "@bob two");
    let serve = |args: &[&str]| {
        let mut c = tool("aw-run");
        c.arg("--root")
            .arg(s.root.path())
            .args(["-i", INST, "--serve"])
            .args(args);
        run_hang_guarded(c)
    };
    let out = serve(&["bob"]);
    assert_code(&out, 0);
    assert_eq!(s.unread("bob"), 0);
    let last = s.entries().pop().unwrap();
    assert_eq!(last, ("bob".into(), "bob: handled 2 message(s)".into()));
    // Without names: every runnable agent (carol is claude: not runnable here).
    send(&s, "@bob three");
    assert_code(&serve(&[]), 0);
    assert_eq!(s.unread("bob"), 0);
    // A named agent that cannot run, or does not exist.
    let out = serve(&["carol"]);
    assert_code(&out, 69);
    assert!(stderr(&out).contains("carol"), "{}", stderr(&out));
    let out = serve(&["dave"]);
    assert_code(&out, 66);
    assert!(stderr(&out).contains("no agent 'dave'"), "{}", stderr(&out));
    assert_eq!(
        s.entries().len(),
        5,
        "nothing was posted by the refused runs"
    );
}

#[test]
fn detach_prints_the_pid_and_serves_in_the_background() {
    let s = Setup::new();
    s.write("wf.yaml", ALICE);
    let out = run_hang_guarded(s.cmd(&["--keep", "--detach"]));
    let (pid, _guard) = detached(&out);
    assert!(alive(pid));
    assert!(served(&s, "alice"));
    assert_eq!(serve_state(&s, "alice")["pid"], pid);
    // The pid alone on stdout; where it logs and how to stop it on stderr.
    let log_path = s.root.inst_dir(INST).join("_state/aw-run.log");
    assert_eq!(
        stderr(&out),
        format!(
            "aw-run: serving in the background as pid {pid}; log: {}; stop it with \
             aw-ctl --root {} stop @{INST} (or kill {pid})\n",
            log_path.display(),
            s.root.path().display()
        )
    );
    // A second one is refused, and says so on the caller's stderr.
    let again = run_hang_guarded(s.cmd(&["--keep", "--detach"]));
    assert_code(&again, 75);
    assert!(
        stderr(&again).contains(&format!("already served by aw-run pid {pid}")),
        "{}",
        stderr(&again)
    );
    send(&s, "@alice background");
    wait_for("alice's reply", || s.entries().len() == 2);
    // Stopped as it said, from another directory.
    let stop = tool("aw-ctl")
        .current_dir("/")
        .args(["--root".as_ref(), s.root.path().as_os_str()])
        .args(["stop", &format!("@{INST}")])
        .output()
        .unwrap();
    assert_code(&stop, 0);
    wait_for("the server to end", || !alive(pid));
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("@alice: @user got it"), "{log}");
    assert!(log.contains("summary: alice 1 run(s)"), "{log}");
}

#[test]
fn a_failed_run_is_tried_again_after_the_cooldown() {
    let s = Setup::new();
    let wf = "agents:\n  alice:\n    mock: {fail: 2, replies: ['@user finally']}\n";
    let child = keep(&s, wf, &["--retries", "1", "--cooldown", "0.05s"]);
    send(&s, "@alice try");
    wait_for("the reply after two cooldowns", || s.entries().len() == 2);
    let out = child.term();
    assert_code(&out, 0);
    assert_eq!(s.unread("alice"), 0);
    assert_eq!(s.statuses("alice", 3), ["failed", "failed", "ok"]);
    assert!(
        stderr(&out).contains("summary: alice 3 run(s) 2 failure(s)"),
        "{}",
        stderr(&out)
    );
}

/// A script that saves its prompt and environment, then answers.
const RECORD: &str = "cat > \"prompt.$AW_RUN\"\necho \"$AW_ROOT\" > root.txt\necho done\n";

#[test]
fn context_false_shows_no_channel_or_document() {
    let s = Setup::new();
    s.script("rec.sh", RECORD);
    let wf = "agents:\n  alice:\n    command: [./rec.sh]\ncontext: false\nkickoff: '@alice go'\n";
    assert_code(&s.run(wf, &[]), 0);
    let prompt = std::fs::read_to_string(s.dir().join("prompt.1")).unwrap();
    assert!(prompt.contains("From @system: @alice go"), "{prompt}");
    assert!(!prompt.contains("Recent Activity"), "{prompt}");
    assert!(!prompt.contains("Current Workspace"), "{prompt}");
    // The default shows both.
    let wf = "agents:\n  alice:\n    command: [./rec.sh]\nkickoff: '@alice go'\n";
    let s2 = Setup::new();
    s2.script("rec.sh", RECORD);
    assert_code(&s2.run(wf, &[]), 0);
    let prompt = std::fs::read_to_string(s2.dir().join("prompt.1")).unwrap();
    assert!(prompt.contains("## Recent Activity"), "{prompt}");
    assert!(prompt.contains("## Current Workspace"), "{prompt}");
}

#[test]
fn memory_context_runs_in_a_root_that_is_gone_afterwards() {
    let s = Setup::new();
    s.script("rec.sh", RECORD);
    let wf = "agents:\n  alice:\n    command: [./rec.sh]\ncontext: {provider: memory}\nkickoff: '@alice go'\n";
    let out = s.run(wf, &[]);
    assert_code(&out, 0);
    let root = std::fs::read_to_string(s.dir().join("root.txt")).unwrap();
    let root = Path::new(root.trim());
    assert_ne!(root, s.root.path());
    assert!(!root.exists(), "{} should be removed", root.display());
    assert!(
        !s.root.inst_dir(INST).exists(),
        "nothing written under --root"
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("@alice: done"), "{printed}");
}

#[test]
fn config_dir_names_the_instance_directory() {
    let s = Setup::new();
    s.script("rec.sh", RECORD);
    let wf = "agents:\n  alice:\n    command: [./rec.sh]\ncontext:\n  config: {dir: ./ctx/team}\nkickoff: '@alice go'\n";
    s.write("wf.yaml", wf);
    let mut c = tool("aw-run");
    c.current_dir(s.dir()).arg("wf.yaml");
    assert_code(&run_hang_guarded(c), 0);
    assert!(s.dir().join("ctx/team/channel.md").is_file());
    let root = std::fs::read_to_string(s.dir().join("root.txt")).unwrap();
    assert_eq!(
        Path::new(root.trim()),
        std::fs::canonicalize(s.dir().join("ctx")).unwrap()
    );
}

/// Context switches of every thread of `pid` so far.
fn context_switches(pid: u32) -> u64 {
    let mut n = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .flatten()
    {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                n += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    n
}

#[test]
fn idle_controllers_do_not_wake_each_other() {
    let s = Setup::new();
    let wf = "agents:\n  alice: {mock: {}}\n  bob: {mock: {}}\n  carol: {mock: {}}\n";
    let child = keep(&s, wf, &[]);
    for a in ["bob", "carol"] {
        wait_for("every agent served", || served(&s, a));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = context_switches(child.pid());
    std::thread::sleep(std::time::Duration::from_millis(500));
    let idle = context_switches(child.pid()) - before;
    // Counted, not timed: an idle server sleeps; it does not spin on its condition variable.
    assert!(idle < 20, "{idle} context switches while idle");
    assert_code(&child.term(), 0);
}

#[test]
fn timeout_ends_an_idle_keep_server_and_quiet_json_prints_only_the_summary() {
    let s = Setup::new();
    s.write("wf.yaml", ALICE);
    let out = run_hang_guarded(s.cmd(&["--keep", "--timeout", "0.3s", "-q", "--json"]));
    assert_code(&out, 1);
    assert!(stderr(&out).contains("timeout"), "{}", stderr(&out));
    // No entry and no run: the summary alone, the run's result.
    let lines = common::json_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(lines[0]["event"], "summary");
    assert_eq!(lines[0]["agents"]["alice"]["runs"], 0);
}

#[test]
fn mcp_config_path_is_absolute_with_a_relative_root() {
    let s = Setup::new();
    s.script("env.sh", "echo \"$AW_MCP_CONFIG\" > mcp.txt\necho ok\n");
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    command: [./env.sh]\nkickoff: '@alice go'\n",
    );
    let mut c = tool("aw-run");
    c.current_dir(s.dir())
        .args(["--root", "rel", "-q", "wf.yaml"]);
    assert_code(&run_hang_guarded(c), 0);
    let p = std::fs::read_to_string(s.dir().join("mcp.txt")).unwrap();
    let p = Path::new(p.trim());
    assert!(p.is_absolute(), "{}", p.display());
    let cfg: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    assert!(cfg["mcpServers"]["aw"].is_object(), "{cfg}");
}

#[test]
fn serve_detach_of_a_missing_instance_is_66_and_creates_nothing() {
    let s = Setup::new();
    let mut c = tool("aw-run");
    c.arg("--root")
        .arg(s.root.path())
        .args(["-i", "nope", "--serve", "--detach"]);
    let out = run_hang_guarded(c);
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains("no instance 'nope'"),
        "{}",
        stderr(&out)
    );
    assert!(!s.root.inst_dir("nope").exists());
}

/// The workflow is read once, by the server in the background: its starter opens no
/// workflow file (strace of the starter alone), yet shows a bad workflow's error on its own
/// stderr with its exit code, and nothing is created.
#[test]
fn detach_reads_the_workflow_in_the_background_alone_and_shows_its_errors() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {replies: [ok]}\n    bogus: 1\n",
    );
    let trace = s.dir().join("starter.txt");
    let mut c = std::process::Command::new("strace");
    c.current_dir(s.dir())
        .args(["-e", "trace=open,openat,openat2", "-o"])
        .arg(&trace)
        .arg(common::bin("aw-run"))
        .arg("--root")
        .arg(s.root.path())
        .args(["-i", INST, "--detach", "wf.yaml"]);
    let out = run_hang_guarded(c);
    assert_code(&out, 65);
    let err = stderr(&out);
    assert!(
        err.contains("wf.yaml:4:5") && err.contains("bogus"),
        "{err}"
    );
    let opened = std::fs::read_to_string(&trace).unwrap();
    // It opened something (the child's stdin), but not the workflow.
    assert!(opened.contains("/dev/null"), "{opened}");
    assert!(!opened.contains("wf.yaml"), "{opened}");
    assert!(!s.root.inst_dir(INST).exists());
}

#[test]
fn election_chooses_the_document_owner_before_the_kickoff() {
    let s = Setup::new();
    let wf = "agents:\n  alice:\n    mock: {vote: bob, replies: ['noted']}\n  bob:\n    mock: {vote: bob, replies: ['noted']}\ncontext:\n  documentOwner: election\nkickoff: '@alice start'\n";
    assert_code(&s.run(wf, &[]), 0);
    let entries = s.entries();
    let resolved = entries
        .iter()
        .position(|(f, m)| f == "system" && m.starts_with("[RESOLVED:doc-owner-"))
        .expect("the election resolved");
    let kickoff = entries
        .iter()
        .position(|(f, m)| f == "system" && m == "@alice start")
        .expect("the kickoff");
    assert!(resolved < kickoff, "{entries:?}");
    assert!(entries[resolved].1.contains("bob wins"), "{entries:?}");
    let config = std::fs::read_to_string(s.root.inst_dir(INST).join("_state/config.json"));
    assert!(config.unwrap().contains("\"bob\""));
    // One agent needs no election.
    let s1 = Setup::new();
    let wf =
        "agents:\n  alice: {mock: {}}\ncontext: {documentOwner: election}\nkickoff: '@alice go'\n";
    assert_code(&s1.run(wf, &[]), 0);
    assert!(!s1.entries().iter().any(|(_, m)| m.contains("[PROPOSAL:")));
    let config = std::fs::read_to_string(s1.root.inst_dir(INST).join("_state/config.json"));
    assert!(config.unwrap().contains("\"alice\""));
}

#[test]
fn keep_example_is_driven_by_aw_send_and_stopped_by_aw_ctl() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = Setup::new();
    let child = Server::new(spawn(
        s.cmd_file(&["--keep", "-q"], &repo.join("examples/keep.yaml")),
    ));
    wait_for("the agents to be served", || {
        common::runner::shown(s.root.path(), INST, "fixer")
    });
    send(&s, "@triage the build broke");
    wait_for("fixer's answer", || s.entries().len() == 3);
    let entries = s.entries();
    assert_eq!(entries[1].0, "triage");
    assert!(
        entries[1].1.starts_with("@fixer please look"),
        "{entries:?}"
    );
    assert_eq!(entries[2].0, "fixer");
    // Only the message that woke triage counts, not the failure in the history before it.
    send(&s, "@triage all green now");
    wait_for("triage's second answer", || s.entries().len() >= 5);
    let entries = s.entries();
    assert_eq!(
        entries[4],
        ("triage".to_string(), "Noted, nothing to do.".to_string()),
        "{entries:?}"
    );
    let stop = s
        .tool_cmd("aw-ctl")
        .args(["stop", &format!("@{INST}")])
        .output()
        .expect("aw-ctl stop");
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let out = child.wait();
    assert_code(&out, 0);
}

#[test]
fn post_commit_hook_example_mentions_the_reviewer() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = Setup::new();
    let git = |args: &[&str]| {
        let st = Command::new("git")
            .current_dir(s.dir())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .expect("git");
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
    };
    git(&["init", "-q"]);
    s.write("a.txt", "a\n");
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "Add a"]);
    let ctl = s
        .tool_cmd("aw-ctl")
        .args(["-i", "review", "new", "reviewer", "--backend", "mock"])
        .output()
        .expect("aw-ctl");
    assert!(ctl.status.success());
    let mut hook = Command::new("sh");
    hook.current_dir(s.dir())
        .arg(repo.join("examples/hooks/post-commit"))
        .env("PATH", path_with_bins())
        .env("AW_ROOT", s.root.path())
        .env_remove("AW_INSTANCE");
    let out = hook.output().expect("hook");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = s.root.entries("review");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].from, "git");
    assert!(
        entries[0].message.starts_with("@reviewer please review "),
        "{}",
        entries[0].message
    );
    assert!(
        entries[0].message.ends_with(": Add a"),
        "{}",
        entries[0].message
    );
}

#[test]
fn keep_mode_loop_guard_counts_runs_since_the_workflow_was_quiet() {
    let s = Setup::new();
    let wf = "agents:\n  alice:\n    mock: {replies: ['@bob ping']}\n  bob:\n    mock: {replies: ['@alice pong']}\n  carol:\n    mock: {}\n";
    let child = keep(&s, wf, &["--max-runs", "3", "-q", "--debounce", "0.01s"]);
    // Bursts that stay under the cap, each followed by quiet, do not add up.
    for i in 1..=5 {
        send(&s, &format!("@carol note {i}"));
        wait_for("carol's reply", || s.entries().len() == 2 * i);
        // Far longer than the debounce: the workflow counts as quiet again.
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    send(&s, "@alice start");
    // The loop is stopped, the kept server is not: alice, at her limit, is paused.
    let why = "loop guard: alice reached the run limit (3 runs on other agents' messages since \
               the workflow was last quiet); paused until a message from someone else";
    wait_for("the loop guard", || {
        s.entries()
            .iter()
            .any(|(f, m)| f == "system" && m.starts_with(why))
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    // 10 from the carol bursts, the start, then 3 runs each of alice and bob, the notice.
    assert_eq!(s.entries().len(), 18, "{:?}", s.entries());
    assert!(alive(child.pid()));
    let out = child.term();
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(err.contains(&format!("aw-run: {why}")), "{err}");
}

#[test]
fn transcripts_never_show_secret_values() {
    let s = Setup::new();
    s.script(
        "leak.sh",
        "echo \"stdout has $API_TOKEN and $1\"\necho \"stderr has $API_TOKEN\" >&2\necho \"own $SERVICE_PASSWORD\" >&2\n",
    );
    let wf = "agents:\n  alice:\n    command: [./leak.sh, 'arg-${{ env.MY_TOKEN }}']\n    env:\n      API_TOKEN: '${{ env.MY_TOKEN }}'\n    reply_fallback: false\nkickoff: '@alice go'\n";
    s.write("wf.yaml", wf);
    let mut c = s.cmd(&["-q"]);
    c.env("MY_TOKEN", "tok-5f3a9c")
        .env("SERVICE_PASSWORD", "hunter2-pw");
    assert_code(&run_hang_guarded(c), 0);
    let path = s.transcript_path("alice", 1);
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600, "a transcript is private");
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("tok-5f3a9c"), "{text}");
    assert!(!text.contains("hunter2-pw"), "{text}");
    let t = s.transcript("alice", 1);
    assert_eq!(t["stdout"], "stdout has [redacted] and arg-[redacted]\n");
    assert_eq!(t["stderr"], "stderr has [redacted]\nown [redacted]\n");
    assert_eq!(t["command"][1], "arg-[redacted]");
}
