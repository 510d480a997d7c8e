//! The wake of an exec agent: its program is started with `posix_spawn` (no copy of
//! aw-run's memory, nothing run between fork and exec), with everything it reads at its
//! start already in place, its record under `_state/serve/` written once it runs, and it
//! dies with aw-run killed with SIGKILL at any moment around its start.

use crate::common;

use std::process::{Command, Stdio};

use common::runner::*;

/// Processes whose environment holds `VAR=value` (`VAR=value` as one whole variable).
fn with_env(var: &str, value: &str) -> Vec<u32> {
    let want = format!("{var}={value}");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == want.as_bytes()) && alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// `aw-run --keep -q` of `wf.yaml`, its output thrown away, once the agent `agent` is served.
fn keep(s: &Setup, agent: &str) -> Server {
    serving_agent(s, s.cmd(&["--keep", "-q"]), agent)
}

/// `user` mentions `agent` in the setup's instance.
fn mention(s: &Setup, agent: &str, text: &str) {
    let mut c = s.tool_cmd("aw-send");
    c.args(["-i", INST, "-f", "user", "-t", agent, text]);
    assert_code(&common::run_with(c, None), 0);
}

/// The record of `agent` under `_state/serve/`, as `aw-ctl ps --json` shows it.
fn ps(s: &Setup, agent: &str) -> serde_json::Value {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "ps", "--json"]);
    let out = common::run_with(c, None);
    assert_code(&out, 0);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["agent"] == agent)
        .unwrap_or_else(|| panic!("no record of {agent}"))
}

#[test]
fn the_program_and_its_children_die_with_aw_run_killed_at_any_moment_of_a_wake() {
    // aw-run is killed with SIGKILL 0 to 4 ms after the mention is written, over and over:
    // before it wakes, while it starts the program, once the program runs. Whenever the
    // program started, neither it nor its children outlive aw-run.
    let s = Setup::new();
    let mark = format!("wake-{}", std::process::id());
    s.script(
        "agent.sh",
        "sleep 1000 &\nsleep 1001 &\necho started >> starts\nwait\n",
    );
    s.write(
        "wf.yaml",
        &format!("agents:\n  w:\n    command: [./agent.sh]\n    env: {{WAKE_MARK: {mark}}}\n"),
    );
    // Whatever a failed round leaves running is killed when the test ends.
    let _left = MarkedBy("WAKE_MARK", mark.clone());
    let mut killed_running = 0;
    for round in 0..24u64 {
        let mut server = keep(&s, "w");
        let started =
            std::fs::read_to_string(s.dir().join("starts")).map_or(0, |t| t.lines().count());
        mention(&s, "w", &format!("round {round}"));
        std::thread::sleep(std::time::Duration::from_micros(round % 5 * 1000));
        let runs_now = with_env("WAKE_MARK", &mark).len();
        server.child().kill().expect("kill -9 aw-run");
        server.child().wait().expect("reap aw-run");
        drop(server);
        wait_for("every program of the agent to die with aw-run", || {
            with_env("WAKE_MARK", &mark).is_empty()
        });
        let now = std::fs::read_to_string(s.dir().join("starts")).map_or(0, |t| t.lines().count());
        killed_running += usize::from(runs_now > 0 || now > started);
    }
    // The rounds did catch programs under way, not only aw-run before its wake.
    assert!(
        killed_running > 0,
        "no round killed aw-run with a program under way"
    );
}

#[test]
fn the_program_finds_its_configuration_and_environment_at_its_start() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat \"$AW_MCP_CONFIG\" > config.$AW_RUN\n\
         env | grep -E '^(AW_[A-Z_]+)=' | sort > env.$AW_RUN\n\
         cat > /dev/null\n",
    );
    s.write("wf.yaml", "agents:\n  w:\n    command: [./agent.sh]\n");
    let server = keep(&s, "w");
    let pid = server.pid();
    mention(&s, "w", "one");
    wait_for("the first run to end", || s.unread("w") == 0);
    let config = std::fs::read_to_string(s.dir().join("config.1")).expect("read at start");
    let parsed: serde_json::Value = serde_json::from_str(&config).expect("JSON");
    let args = parsed["mcpServers"]["aw"]["args"].to_string();
    assert!(args.contains(&format!("w@{INST}")), "{config}");
    let env = std::fs::read_to_string(s.dir().join("env.1")).unwrap();
    for want in [
        "AW_AGENT=w".to_string(),
        format!("AW_INSTANCE={INST}"),
        "AW_RUN=1".to_string(),
        format!("AW_RUN_SPAWN={pid}/"),
        "AW_MCP_CONFIG=".to_string(),
    ] {
        assert!(
            env.lines().any(|l| l.starts_with(&want)),
            "{want} in:\n{env}"
        );
    }
    // A configuration rewritten between two runs (the same size, even) does not take
    // effect: the next run finds the one aw-run wrote.
    let path = s.root.inst_dir(INST).join("_state/mcp/w.json");
    let planted = config.replace("aw", "xx");
    assert_eq!(planted.len(), config.len());
    std::fs::write(&path, &planted).unwrap();
    mention(&s, "w", "two");
    wait_for("the second run to end", || s.unread("w") == 0);
    assert_eq!(
        std::fs::read_to_string(s.dir().join("config.2")).unwrap(),
        config
    );
    // And one made readable by others is made private again.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    mention(&s, "w", "three");
    wait_for("the third run to end", || s.unread("w") == 0);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let spawns: Vec<String> = (1..=3)
        .map(|n| std::fs::read_to_string(s.dir().join(format!("env.{n}"))).unwrap())
        .map(|e| {
            e.lines()
                .find_map(|l| l.strip_prefix("AW_RUN_SPAWN="))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        spawns.len(),
        spawns
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        "each program its own number: {spawns:?}"
    );
}

#[test]
fn the_agent_s_record_says_running_while_its_program_runs_and_idle_after() {
    let s = Setup::new();
    s.script(
        "agent.sh",
        "cat > /dev/null\n\
         while [ ! -e go ]; do sleep 0.01; done\n",
    );
    s.write("wf.yaml", "agents:\n  w:\n    command: [./agent.sh]\n");
    let _server = keep(&s, "w");
    mention(&s, "w", "one");
    wait_for("the record to say running", || {
        let r = ps(&s, "w");
        r["state"] == "running" && r["runs"] == 1
    });
    std::fs::write(s.dir().join("go"), "").unwrap();
    wait_for("the record to say idle", || {
        let r = ps(&s, "w");
        r["state"] == "idle" && r["runs"] == 1
    });
}

/// The `clone3`/`clone`/`fork`/`vfork` calls of an aw-run that runs an exec agent once, as
/// `strace -f` prints them.
fn process_calls(s: &Setup) -> Vec<String> {
    let log = s.dir().join("strace.txt");
    let mut c = Command::new("strace");
    c.current_dir(s.dir())
        .args(["-f", "-o"])
        .arg(&log)
        .args(["-e", "trace=clone,clone3,fork,vfork"])
        .arg(common::bin("aw-run"))
        .arg("--root")
        .arg(s.root.path())
        .args(["-i", INST, "-q", "wf.yaml"])
        .env("PATH", path_with_bins());
    assert_code(&run_hang_guarded(c), 0);
    std::fs::read_to_string(&log)
        .expect("strace log")
        .lines()
        .filter(|l| {
            let call = l.split_once(' ').map_or("", |(_, c)| c.trim_start());
            ["clone(", "clone3(", "fork(", "vfork("]
                .iter()
                .any(|c| call.starts_with(c))
                && !l.contains("CLONE_THREAD")
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn programs_are_started_without_a_copy_of_aw_run() {
    let s = Setup::new();
    // A program that starts none of its own: every process call traced is aw-run's.
    s.write(
        "wf.yaml",
        "agents:\n  w:\n    command: ['true']\nkickoff: '@w go'\n",
    );
    let calls = process_calls(&s);
    // The guard is aw-run started again (once, a fork); the program shares aw-run's memory
    // until its exec, aw-run waiting (posix_spawn: CLONE_VM|CLONE_VFORK).
    let vfork: Vec<&String> = calls.iter().filter(|l| l.contains("CLONE_VFORK")).collect();
    assert_eq!(vfork.len(), 1, "{calls:#?}");
    assert!(vfork[0].contains("CLONE_VM"), "{calls:#?}");
    assert_eq!(calls.len(), 2, "the guard and the program: {calls:#?}");
    assert_eq!(s.unread("w"), 0);
}

/// With the soft limit of open files too low for the agents served, aw-run raises it and
/// the program still starts with the user's limit; with a limit high enough, aw-run leaves
/// it as it is.
#[test]
fn a_program_gets_the_user_s_limit_of_open_files_raised_or_not() {
    for (soft, agents, raised) in [("64", 10, true), ("1024", 2, false)] {
        let s = Setup::new();
        let mut wf = String::from("agents:\n");
        for i in 1..agents {
            wf.push_str(&format!("  m{i}:\n    mock: {{}}\n"));
        }
        // The program's soft limit, and those of its parent, aw-run.
        wf.push_str(
            "  w:\n    command: [sh, -c, 'ulimit -Sn > seen; \
             grep \"^Max open files\" /proc/$PPID/limits > parent']\nkickoff: '@w go'\n",
        );
        s.write("wf.yaml", &wf);
        let c = with_soft_open_files(&s, &s.cmd(&["-q"]), soft);
        assert_code(&run_hang_guarded(c), 0);
        let seen = std::fs::read_to_string(s.dir().join("seen")).expect("the program ran");
        assert_eq!(seen.trim(), soft, "{agents} agents");
        let parent = std::fs::read_to_string(s.dir().join("parent")).unwrap();
        let limits: Vec<&str> = parent.split_whitespace().skip(3).take(2).collect();
        assert_eq!(limits.len(), 2, "{parent}");
        assert_eq!(limits[0] != soft, raised, "aw-run's limits: {parent}");
    }
}

/// A process group started the way aw-run starts a program: `sleep 1000` (and a child of
/// its own) in a group of its own, with `AW_RUN_SPAWN=PARENT/N` in its environment.
fn program(parent: u32, n: u64) -> (std::process::Child, MarkedBy) {
    let mut c = Command::new("sh");
    c.args(["-c", "sleep 1000 & sleep 1001; wait"])
        .env("AW_RUN_SPAWN", format!("{parent}/{n}"))
        .stdin(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    let child = c.spawn().expect("spawn sh");
    let marked = MarkedBy("AW_RUN_SPAWN", format!("{parent}/{n}"));
    wait_for("the program and its children", || marked.alive().len() == 3);
    (child, marked)
}

/// The live processes with `VAR=value` in their environment, killed when dropped (a
/// failed test).
struct MarkedBy(&'static str, String);

impl MarkedBy {
    fn alive(&self) -> Vec<u32> {
        with_env(self.0, &self.1)
    }
}

impl Drop for MarkedBy {
    fn drop(&mut self) {
        for pid in self.alive() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

#[test]
fn the_guard_finds_a_program_whose_start_aw_run_did_not_live_to_tell() {
    // The guard is told as aw-run tells it, aw-run being this test: program 7 announced and
    // never confirmed (aw-run killed between its start and `+PGID 7`), program 8 announced
    // and confirmed, program 9 confirmed and then released (its group killed; what left it
    // is its own). Once the pipe ends, 7 and 8 are killed with their children, 9 is not.
    let me = std::process::id();
    let mut guard = Command::new(common::bin("aw-run"))
        .env("AW_RUN_GUARD", me.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the guard");
    let (mut p7, m7) = program(me, 7);
    let (mut p8, m8) = program(me, 8);
    let (mut p9, m9) = program(me, 9);
    let mut pipe = guard.stdin.take().unwrap();
    let told = format!("?7\n?8\n+{} 8\n?9\n+{} 9\n-{}\n", p8.id(), p9.id(), p9.id());
    std::io::Write::write_all(&mut pipe, told.as_bytes()).unwrap();
    drop(pipe);
    assert!(guard.wait().unwrap().success());
    wait_for("program 7 and its children to be killed", || {
        m7.alive().is_empty()
    });
    wait_for("program 8 and its children to be killed", || {
        m8.alive().is_empty()
    });
    assert_eq!(m9.alive().len(), 3, "program 9 was released");
    for p in [&mut p7, &mut p8] {
        p.wait().unwrap();
    }
    drop(m9);
    p9.wait().unwrap();
}
