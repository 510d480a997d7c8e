//! Limits of what aw-run reads: durations longer than the longest accepted (workflow keys
//! refused with FILE:LINE:COL and 65, flags with a one-line usage error and 64, never a
//! panic), a YAML alias bomb that expands to gigabytes (refused by its bytes, under a memory
//! bound), and what `-q --json` prints.

use crate::common;

use std::process::Command;

use common::runner::{Setup, assert_code, run_hang_guarded, stderr, with_soft_open_files};
use common::{assert_error, json_lines};

/// A duration no clock can add to now: 10^19 seconds.
const HUGE: &str = "10000000000000000000";

/// Run `c` and require a refusal: `code`, nothing on stdout, one line on stderr (no panic).
fn refused(c: Command, code: i32, what: &str) -> String {
    let out = run_hang_guarded(c);
    assert_ne!(
        out.status.code(),
        Some(101),
        "{what}: panicked: {}",
        stderr(&out)
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    assert!(out.stdout.is_empty(), "{what}: {:?}", out.stdout);
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    assert!(err.contains("longer than 365 days"), "{what}: {err}");
    err
}

#[test]
fn workflow_durations_past_the_longest_are_refused_with_their_position() {
    let cases = [
        (
            "agent timeout",
            "agents:\n  alice:\n    mock: {replies: [hi]}\n    timeout: 1e19\nkickoff: '@alice go'\n",
            "wf.yaml:4:14: agents.alice.timeout: ",
        ),
        (
            "agent idle_timeout",
            "agents:\n  alice:\n    command: [cat]\n    idle_timeout: 9000h\nkickoff: '@alice go'\n",
            "wf.yaml:4:19: agents.alice.idle_timeout: ",
        ),
        (
            "mock delay",
            "agents:\n  alice:\n    mock: {replies: [hi], delay: 1e19}\nkickoff: '@alice go'\n",
            "wf.yaml:3:34: agents.alice.mock.delay: ",
        ),
        (
            "task timeout",
            "agents:\n  alice:\n    mock: {replies: [hi]}\ntasks:\n  - send: hi\n    to: alice\n    timeout: 1e19\n",
            "wf.yaml:7:14: tasks[0].timeout: ",
        ),
        (
            "task timeout as text",
            "agents:\n  alice:\n    mock: {replies: [hi]}\ntasks:\n  - send: hi\n    to: alice\n    timeout: \"10000000000000000000s\"\n",
            "wf.yaml:7:14: tasks[0].timeout: ",
        ),
    ];
    for (what, wf, want) in cases {
        let s = Setup::new();
        s.write("wf.yaml", wf);
        for args in [vec!["--check"], vec!["-q"]] {
            let err = refused(s.cmd(&args), 65, what);
            assert!(err.starts_with(want), "{what} {args:?}: {err}");
        }
        assert!(!s.root.inst_dir("w").exists(), "{what}: something ran");
    }
}

#[test]
fn duration_flags_past_the_longest_are_usage_errors() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {replies: [hi]}\nkickoff: '@alice go'\n",
    );
    for flag in ["--cooldown", "--timeout", "--debounce", "--backoff"] {
        for value in [HUGE, "8761h", "31536001s"] {
            let out = run_hang_guarded(s.cmd(&[flag, value]));
            let err = assert_error(&out, "aw-run", 64, flag);
            assert!(err.contains(flag) && err.contains("365 days"), "{err}");
        }
    }
    // The longest accepted is accepted.
    let out = run_hang_guarded(s.cmd(&["-q", "--cooldown", "8760h", "--timeout", "8760h"]));
    assert_code(&out, 0);
    let err = refused(s.cmd(&["--iter", "10000000000000000000s"]), 64, "--iter");
    assert!(err.starts_with("aw-run: --iter "), "{err}");
    // aw-send --wait --timeout.
    let mut send = s.tool_cmd("aw-send");
    send.args([
        "-i",
        "w",
        "--wait",
        "--timeout",
        HUGE,
        "-t",
        "alice",
        "hello",
    ]);
    let out = run_hang_guarded(send);
    let err = assert_error(&out, "aw-send", 64, "aw-send --timeout");
    assert!(
        err.contains("--timeout") && err.contains("365 days"),
        "{err}"
    );
}

#[test]
fn a_failed_run_with_the_longest_cooldown_neither_panics_nor_hangs() {
    // Today's shape: a run fails for good, its controller sets the cooldown's end.
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {fail: 9}\n    timeout: 8760h\nkickoff: '@alice go'\n",
    );
    let out = run_hang_guarded(s.cmd(&[
        "--retries",
        "1",
        "--cooldown",
        "8760h",
        "--timeout",
        "8760h",
    ]));
    assert_code(&out, 1);
    assert!(stderr(&out).contains("mock failure"), "{}", stderr(&out));
}

/// The most address space a checking aw-run is given: far below what the bomb expands to.
const MEMORY_BOUND: u64 = 1 << 30;

#[test]
fn a_yaml_alias_byte_bomb_is_refused_with_its_position_within_a_memory_bound() {
    use std::os::unix::process::CommandExt;
    // 283 KiB: one 200 KB anchored scalar and 30,000 aliases of it, some 6 GB expanded.
    let s = Setup::new();
    let mut bomb = format!(
        "name: w\nvars: {{big: &a \"{}\"}}\nkickoff: [",
        "x".repeat(200_000)
    );
    bomb.push_str(&["*a"; 30_000].join(","));
    bomb.push_str("]\n");
    assert!(bomb.len() < 300 << 10);
    s.write("wf.yaml", &bomb);
    for args in [vec!["--check"], vec!["-q"]] {
        let mut c = s.cmd(&args);
        // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
        unsafe {
            c.pre_exec(|| {
                let lim = nix::libc::rlimit {
                    rlim_cur: MEMORY_BOUND,
                    rlim_max: MEMORY_BOUND,
                };
                if nix::libc::setrlimit(nix::libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = run_hang_guarded(c);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(65), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        // 16 MiB of text: the anchor and 82 aliases fit, the 84th copy does not.
        let col = "kickoff: [".len() + 82 * "*a,".len() + 1;
        assert!(
            err.starts_with(&format!("wf.yaml:3:{col}: ")),
            "{args:?}: {err}"
        );
        assert!(err.contains("aliases expand too much"), "{err}");
    }
    assert!(!s.root.inst_dir("w").exists());
}

#[test]
fn quiet_json_prints_the_runs_and_the_summary_but_no_entry() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {replies: ['@user done']}\nkickoff: '@alice go'\n",
    );
    let kinds = |out: &std::process::Output| -> Vec<String> {
        json_lines(&out.stdout)
            .iter()
            .map(|v| v["event"].as_str().unwrap_or("?").to_string())
            .collect()
    };
    let out = run_hang_guarded(s.cmd(&["--json"]));
    assert_code(&out, 0);
    // The attempt's start and its end come before, between or after the entries, as the
    // threads go; the summary is last.
    let all = kinds(&out);
    let count = |k: &str| all.iter().filter(|x| *x == k).count();
    assert_eq!(
        (count("entry"), count("start"), count("run")),
        (2, 1, 1),
        "{all:?}"
    );
    assert_eq!(all.len(), 5, "{all:?}");
    assert_eq!(all.last().map(String::as_str), Some("summary"), "{all:?}");
    std::fs::remove_dir_all(s.root.inst_dir("w")).unwrap();
    let out = run_hang_guarded(s.cmd(&["-q", "--json"]));
    assert_code(&out, 0);
    assert_eq!(kinds(&out), ["start", "run", "summary"], "{}", stderr(&out));
    let lines = json_lines(&out.stdout);
    assert_eq!(lines[1]["agent"], "alice");
    assert_eq!(lines[1]["status"], "ok");
    assert_eq!(lines[2]["agents"]["alice"]["runs"], 1);
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    // Without --json, -q prints nothing at all.
    std::fs::remove_dir_all(s.root.inst_dir("w")).unwrap();
    let out = run_hang_guarded(s.cmd(&["-q"]));
    assert_code(&out, 0);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
}

/// A soft limit of 64 open files is no limit to the agents one aw-run serves: it raises its
/// soft limit to the hard one (a lock per agent would pass 64 at once), and a program it
/// starts gets the user's 64 back.
#[test]
fn a_low_soft_limit_of_open_files_is_raised_and_given_back_to_programs() {
    let s = Setup::new();
    let seen = s.dir().join("limit-seen");
    let mut wf = String::from("agents:\n");
    for i in 0..150 {
        wf.push_str(&format!(
            "  a{i}:\n    mock: {{replies: ['@probe look']}}\n"
        ));
    }
    wf.push_str(&format!(
        "  probe:\n    command: [sh, -c, 'ulimit -Sn > {}']\nkickoff: '@a149 go'\n",
        seen.display()
    ));
    s.write("wf.yaml", &wf);
    let out = run_hang_guarded(with_soft_open_files(&s, &s.cmd(&[]), "64"));
    assert_code(&out, 0);
    let got = std::fs::read_to_string(&seen).expect("the probe ran");
    assert_eq!(got.trim(), "64", "the program's soft limit");
    assert_eq!(s.unread("probe"), 0);
}
