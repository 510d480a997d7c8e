//! The checks a newcomer meets first, with real processes and files: `aw-run --check`
//! reports every problem of every phase in one pass, a program that cannot start fails
//! once (no retries), `aw-run --serve` names every agent it cannot serve, and a YAML syntax
//! error points at what was never closed.

use crate::common;

use std::process::{Command, Output};

use common::runner::*;
use common::tool;

/// `PATH` holding only an empty folder of the setup: no claude, no codex, no other program.
fn bare_path(s: &Setup) -> std::path::PathBuf {
    let bin = s.dir().join("empty-bin");
    std::fs::create_dir_all(&bin).unwrap();
    bin
}

/// aw-run `args` on `wf.yaml` with nothing in `PATH` and no API key.
fn bare(s: &Setup, args: &[&str]) -> Command {
    let mut c = s.cmd(args);
    c.env("PATH", bare_path(s))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL");
    c
}

fn lines(out: &Output) -> Vec<String> {
    stderr(out).lines().map(str::to_string).collect()
}

const EVERY_PHASE: &str = "\
agents:
  alice:
    modle: sonnet
  bob:
    backend: codex
  carol:
    model: anthropic/sonnet
  dave:
    command: [./nope.sh]
  erin:
    command: [no-such-program, --flag]
kickoff: '@bob ${{ nothing }}'
";

#[test]
fn the_check_reports_every_problem_of_every_phase_in_one_pass() {
    let s = Setup::new();
    s.write("wf.yaml", EVERY_PHASE);
    let out = run_hang_guarded(bare(&s, &["--check"]));
    assert_code(&out, 65);
    let dave = s.dir().join("nope.sh");
    let want = [
        "wf.yaml:2:3: alice: the claude backend needs its CLI: no 'claude' in PATH".to_string(),
        "wf.yaml:3:5: agents.alice: unknown key 'modle' (did you mean 'model'?)".to_string(),
        "wf.yaml:5:14: bob: the codex backend needs its CLI: no 'codex' in PATH".to_string(),
        "wf.yaml:7:12: carol: the anthropic backend needs ANTHROPIC_API_KEY (in the environment or the agent's env)".to_string(),
        format!("wf.yaml:9:15: dave: command '{}': no such program", dave.display()),
        "wf.yaml:11:15: erin: command 'no-such-program': no such program in PATH".to_string(),
        "wf.yaml:12:16: kickoff: undefined variable 'nothing'".to_string(),
    ];
    assert_eq!(lines(&out), want);
    assert!(!s.root.inst_dir(INST).exists(), "the check wrote something");

    // The file fixed, what the machine lacks is still reported whole: exit 69.
    s.write(
        "wf.yaml",
        &EVERY_PHASE
            .replace("modle: sonnet", "mock: {}")
            .replace(" ${{ nothing }}", ""),
    );
    let out = run_hang_guarded(bare(&s, &["--check"]));
    assert_code(&out, 69);
    assert_eq!(lines(&out), want[2..6]);
    // A run refuses the same, every one of them, before anything is written.
    let out = run_hang_guarded(bare(&s, &["-q"]));
    assert_code(&out, 69);
    let errors: Vec<String> = want[2..6]
        .iter()
        .map(|l| format!("aw-run: {}", l.splitn(4, ':').nth(3).unwrap().trim()))
        .collect();
    assert_eq!(lines(&out), errors);
    assert!(!s.root.inst_dir(INST).exists(), "the run wrote something");

    // With the programs and the key, the check passes quietly.
    s.script("nope.sh", "exit 0\n");
    s.script("empty-bin/codex", "exit 0\n");
    s.script("empty-bin/no-such-program", "exit 0\n");
    let mut c = bare(&s, &["--check"]);
    c.env("ANTHROPIC_API_KEY", "sk-ant-test");
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    assert_eq!(stderr(&out), "");

    // A setup task may make an exec agent's program: it is not asked for up front.
    std::fs::remove_file(s.dir().join("nope.sh")).unwrap();
    s.write(
        "wf.yaml",
        "agents:\n  dave:\n    command: [./nope.sh]\nsetup:\n  - shell: printf '#!/bin/sh\\necho made\\n' > nope.sh && chmod +x nope.sh\nkickoff: '@dave hi'\n",
    );
    let out = run_hang_guarded(bare(&s, &["--check"]));
    assert_code(&out, 0);
    assert_eq!(
        lines(&out),
        [format!(
            "wf.yaml:3:15: warning: dave: command '{}' does not exist (a setup or shell task may create it)",
            dave.display()
        )]
    );
    let mut c = bare(&s, &["-q"]);
    c.env("PATH", format!("{}:/usr/bin:/bin", bare_path(&s).display()));
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    assert_eq!(s.transcript("dave", 1)["status"], "ok");
}

#[test]
fn a_backend_that_cannot_be_read_is_reported_alone() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    backend: mokc\n  bob:\n    mock: {}\nkickoff: '@alice hi'\n",
    );
    let out = run_hang_guarded(bare(&s, &["--check"]));
    assert_code(&out, 65);
    let got = lines(&out);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("wf.yaml:3:14: agents.alice.backend: unknown backend 'mokc'"),
        "{got:?}"
    );
    assert!(got[0].contains("(did you mean 'mock'?)"), "{got:?}");
}

#[test]
fn a_shell_variable_named_like_a_task_output_gets_a_warning() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "\
agents:
  alice:
    mock: {}
setup:
  - shell: git log -1
    as: diff
  - shell: |
      echo \"$diff\" \"${diff}\" \"$HOME\" ${{ diff }}
tasks:
  - shell: printf '%s' \"$diff\"
kickoff: '@alice hi'
",
    );
    let out = run_hang_guarded(bare(&s, &["--check"]));
    assert_code(&out, 0);
    let warning = |path: &str, written: &str| {
        format!(
            "warning: {path}: '{written}' is a shell variable, not the task output 'diff': write ${{{{ diff }}}}"
        )
    };
    assert_eq!(
        lines(&out),
        [
            format!("wf.yaml:8:13: {}", warning("setup[1].shell", "$diff")),
            format!("wf.yaml:8:21: {}", warning("setup[1].shell", "${diff}")),
            format!("wf.yaml:10:25: {}", warning("tasks[0].shell", "$diff")),
        ]
    );
}

#[test]
fn a_program_that_cannot_start_fails_once_without_retries() {
    let s = Setup::new();
    s.script("gone.sh", "echo never\n");
    s.script("locked.sh", "echo never\n");
    // The check passes; the setup then takes the programs away.
    s.write(
        "wf.yaml",
        "\
agents:
  alice:
    command: [./gone.sh]
  bob:
    command: [./locked.sh]
setup:
  - shell: rm gone.sh && chmod a-x locked.sh
kickoff: '@alice @bob hi'
",
    );
    let out = run_hang_guarded(s.cmd(&["--retries", "3"]));
    assert_code(&out, 1);
    for (agent, why) in [
        ("alice", "No such file or directory"),
        ("bob", "Permission denied"),
    ] {
        let t = s.transcript(agent, 1);
        assert_eq!(t["status"], "failed");
        assert_eq!(t["attempt"], 1);
        let reason = t["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("cannot start") && reason.contains(why),
            "{reason}"
        );
        assert!(
            !s.transcript_path(agent, 2).exists(),
            "{agent}: retried a program that cannot start"
        );
        assert_eq!(s.unread(agent), 1, "{agent}'s message stays unread");
    }
    let err = stderr(&out);
    assert!(err.contains("alice 1 run(s) 1 failure(s)"), "{err}");
}

/// aw-ctl on the setup's instance.
fn ctl(s: &Setup, args: &[&str]) {
    let out = s.tool_cmd("aw-ctl").args(["-i", INST]).args(args).output();
    assert_code(&out.expect("aw-ctl"), 0);
}

#[test]
fn serve_names_every_agent_it_skips_and_refuses_named_ones_it_cannot_serve() {
    let s = Setup::new();
    ctl(&s, &["new", "bob", "--backend", "mock"]);
    ctl(&s, &["new", "carol", "--backend", "claude"]);
    ctl(
        &s,
        &["new", "dan", "--backend", "anthropic", "-m", "sonnet"],
    );
    let serve = |agents: &[&str]| {
        let mut c = tool("aw-run");
        c.current_dir(s.dir())
            .env("PATH", bare_path(&s))
            .env_remove("ANTHROPIC_API_KEY")
            .arg("--root")
            .arg(s.root.path())
            .args(["-i", INST, "--serve"])
            .args(agents);
        run_hang_guarded(c)
    };
    common::Root::send(&s.root, INST, &[], "@bob @carol @dan hello");

    // Named: each agent that cannot be served is named, and nothing is served.
    let out = serve(&["bob", "carol", "dan", "zed"]);
    assert_code(&out, 69);
    assert_eq!(
        lines(&out),
        [
            "aw-run: carol: the claude backend needs its CLI: no 'claude' in PATH",
            "aw-run: dan: the anthropic backend needs ANTHROPIC_API_KEY (in the environment or the agent's env)",
            "aw-run: no agent 'zed' in instance 'w' (register it with aw-ctl new)",
        ]
    );
    assert_eq!(s.unread("bob"), 1, "bob was served by a refused command");

    // Unnamed: the others are served, and each one skipped is named with why.
    let out = serve(&[]);
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains("aw-run: warning: carol: not served: the claude backend needs its CLI: no 'claude' in PATH"),
        "{err}"
    );
    assert!(
        err.contains(
            "aw-run: warning: dan: not served: the anthropic backend needs ANTHROPIC_API_KEY"
        ),
        "{err}"
    );
    assert_eq!(s.unread("bob"), 0);
    assert_eq!(s.unread("carol"), 1);
}

#[test]
fn a_yaml_syntax_error_points_at_what_was_never_closed() {
    let s = Setup::new();
    let cases = [
        (
            "agents: {alice: {mock: {}}\nkickoff: hi\n",
            "wf.yaml:1:9: invalid YAML: this '{' is never closed (at 2:1: invalid indentation in flow construct)",
        ),
        (
            "agents:\n  alice:\n    mock: {replies: [a, b\n    fail: 1\nkickoff: hi\n",
            "wf.yaml:3:21: invalid YAML: this '[' is never closed (at 4:9: illegal placement of ':' indicator)",
        ),
        (
            "name: x\nkickoff: \"hello\nagents:\n  alice: {mock: {}}\n",
            "wf.yaml:2:10: invalid YAML: this quote is never closed (invalid indentation in quoted scalar)",
        ),
        (
            "agents:\n  alice: {mock: {}}\nkickoff: 'it''s\n",
            "wf.yaml:3:10: invalid YAML: this quote is never closed (while scanning a quoted scalar, found unexpected end of stream)",
        ),
    ];
    for (text, want) in cases {
        s.write("wf.yaml", text);
        for args in [vec!["--check"], vec!["-q"]] {
            let out = run_hang_guarded(s.cmd(&args));
            assert_code(&out, 65);
            assert_eq!(lines(&out), [want], "{text}");
        }
    }
    assert!(!s.root.inst_dir(INST).exists());
    // A quote or bracket closed on a later line is not blamed.
    s.write(
        "wf.yaml",
        "agents: {alice: {mock: {}},\n  bob: {mock: {}}}\nkickoff: \"@alice\n  hi\"\n",
    );
    let out = run_hang_guarded(s.cmd(&["--check"]));
    assert_code(&out, 0);
}

#[test]
fn with_iter_the_check_asks_only_for_what_the_iterated_agent_needs() {
    let s = Setup::new();
    s.write(
        "wf.yaml",
        "agents:\n  coder:\n    mock: {}\n  reviewer:\n    backend: codex\nkickoff: Write it.\n",
    );
    let out = run_hang_guarded(bare(&s, &["--check", "--iter", "2", "--agent", "coder"]));
    assert_code(&out, 0);
    assert_eq!(stderr(&out), "");
    let out = run_hang_guarded(bare(&s, &["--check"]));
    assert_code(&out, 69);
    assert_eq!(
        lines(&out),
        ["wf.yaml:5:14: reviewer: the codex backend needs its CLI: no 'codex' in PATH"]
    );
    // An agent --iter cannot choose is refused after the file's warnings.
    let out = run_hang_guarded(bare(&s, &["--check", "--iter", "2"]));
    assert_code(&out, 64);
    assert!(
        stderr(&out).contains("name one with --agent"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn with_json_the_check_prints_one_object_per_problem_on_stdout() {
    let s = Setup::new();
    s.write("wf.yaml", EVERY_PHASE);
    let text = run_hang_guarded(bare(&s, &["--check"]));
    let out = run_hang_guarded(bare(&s, &["--check", "--json"]));
    assert_code(&out, 65);
    assert_eq!(stderr(&out), "");
    let problems = common::json_lines(&out.stdout);
    // The same problems as the lines, in the same order, field by field.
    let rendered: Vec<String> = problems
        .iter()
        .map(|p| {
            assert_eq!(p["event"], "problem", "{p}");
            assert_eq!(p["severity"], "error", "{p}");
            format!(
                "{}:{}:{}: {}",
                p["file"].as_str().unwrap(),
                p["line"],
                p["col"],
                p["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(rendered, lines(&text));
    assert_eq!(problems.len(), 7);
    assert!(!s.root.inst_dir(INST).exists(), "the check wrote something");

    // A YAML syntax error, and a warning alone (exit 0).
    s.write("wf.yaml", "agents: {alice: {mock: {}}\nkickoff: hi\n");
    let out = run_hang_guarded(s.cmd(&["--check", "--json"]));
    assert_code(&out, 65);
    let problems = common::json_lines(&out.stdout);
    assert_eq!(problems.len(), 1);
    assert_eq!(
        (&problems[0]["line"], &problems[0]["col"]),
        (&1.into(), &9.into())
    );
    s.write(
        "wf.yaml",
        "agents:\n  alice:\n    mock: {}\nsetup:\n  - shell: git log -1\n    as: diff\n\
         tasks:\n  - shell: echo \"$diff\"\nkickoff: '@alice hi'\n",
    );
    let out = run_hang_guarded(s.cmd(&["--check", "--json"]));
    assert_code(&out, 0);
    let problems = common::json_lines(&out.stdout);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["severity"], "warning");
    assert_eq!(problems[0]["line"], 8);
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("write ${{ diff }}"),
        "{problems:?}"
    );
}
