//! Typos never succeed silently, and nothing is made silently: options, commands and names
//! get a did-you-mean, each aw-ctl command takes only its own options, an instance or agent
//! named that does not exist is an error (66) in every tool, an agent tool refuses an
//! argument its schema does not name, and a root `.workflow/` made by a first write is named
//! on stderr, absolutely (in a real git work tree too).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::runner::{assert_code, stderr};
use common::{run_with, tool};

/// Tool `name` run in `dir` with `args`, its own registry of servers.
fn run_in(dir: &Path, name: &str, args: &[&str]) -> Output {
    let mut c = tool(name);
    c.current_dir(dir)
        .env("XDG_RUNTIME_DIR", dir.join(".run"))
        .args(args);
    let _ = std::fs::create_dir_all(dir.join(".run"));
    run_with(c, None)
}

/// The first line of standard error.
fn first_line(out: &Output) -> String {
    stderr(out).lines().next().unwrap_or_default().to_string()
}

fn project() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("temporary directory");
    let p = d.path().canonicalize().expect("canonical path");
    (d, p)
}

#[test]
fn options_commands_and_names_get_a_did_you_mean() {
    let (_d, p) = project();
    assert_code(
        &run_in(&p, "aw-ctl", &["new", "alice@hello", "--backend", "mock"]),
        0,
    );
    for (tool, args, code, want) in [
        (
            "aw-ctl",
            &["stauts"][..],
            64,
            "aw-ctl: unknown command 'stauts' (did you mean 'status'?)",
        ),
        (
            "aw-ctl",
            &["-i", "hello", "status", "--jsno"],
            64,
            "aw-ctl: invalid option '--jsno' (did you mean '--json'?)",
        ),
        (
            "aw-ctl",
            &["-i", "hello", "doc", "raed"],
            64,
            "aw-ctl: doc raed: unknown subcommand or wrong arguments (did you mean 'read'?)",
        ),
        (
            "aw-send",
            &["-i", "hello", "--form", "x", "hi"],
            64,
            "aw-send: invalid option '--form' (did you mean '--from'?)",
        ),
        (
            "aw-run",
            &["--chekc", "wf.yaml"],
            64,
            "aw-run: invalid option '--chekc' (did you mean '--check'?)",
        ),
        (
            "aw-send",
            &["-i", "hello", "-t", "alce", "hi"],
            66,
            "aw-send: no agent 'alce' in instance 'hello' (did you mean 'alice'?) \
             (registered: alice)",
        ),
        (
            "aw-ctl",
            &["-i", "helo", "ls"],
            66,
            "aw-ctl: no such instance 'helo' under",
        ),
    ] {
        let out = run_in(&p, tool, args);
        assert_code(&out, code);
        assert!(
            first_line(&out).starts_with(want),
            "{tool} {args:?}: {}",
            stderr(&out)
        );
    }
    for cmd in ["status", "ack", "rm", "runs"] {
        let out = run_in(&p, "aw-ctl", &["-i", "hello", cmd, "alce"]);
        assert_code(&out, 66);
        assert_eq!(
            first_line(&out),
            "aw-ctl: no agent 'alce' in instance 'hello' (did you mean 'alice'?)",
            "{cmd}"
        );
    }
    let out = run_in(&p, "aw-peek", &["-i", "hello", "--inbox", "alce"]);
    assert_code(&out, 66);
    assert_eq!(
        first_line(&out),
        "aw-peek: no agent 'alce' in instance 'hello' (did you mean 'alice'?)"
    );
    let out = run_in(&p, "aw-ctl", &["-i", "helo", "ls"]);
    assert!(
        first_line(&out).ends_with("(did you mean 'hello'?)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    // Nothing was sent by the refused aw-send.
    let out = run_in(&p, "aw-peek", &["-i", "hello", "-n", "0"]);
    assert_code(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

#[test]
fn each_aw_ctl_command_takes_only_its_own_options() {
    let (_d, p) = project();
    assert_code(
        &run_in(&p, "aw-ctl", &["new", "alice@w", "--backend", "mock"]),
        0,
    );
    for (args, want) in [
        (
            &["-i", "w", "status", "--create", "--replace", "--until", "3"][..],
            "aw-ctl: status takes no --create (it takes --json)",
        ),
        (
            &["-i", "w", "ls", "--all"],
            "aw-ctl: ls takes no --all (it takes --json)",
        ),
        (
            &["-i", "w", "top", "--json"],
            "aw-ctl: top takes no option, not --json",
        ),
        (
            &["-i", "w", "ack", "alice", "-m", "x"],
            "aw-ctl: ack takes no -m (it takes --until)",
        ),
        (
            &["-i", "w", "ps", "--all"],
            "aw-ctl: ps takes no --all (it takes --all-roots, --json)",
        ),
        // Each subcommand of doc takes only its own.
        (
            &["-i", "w", "doc", "list", "--as", "alice"],
            "aw-ctl: doc list takes no --as (it takes --json)",
        ),
        (
            &["-i", "w", "doc", "read", "--jsn"],
            "aw-ctl: invalid option '--jsn' (did you mean '--json'?)",
        ),
        (
            &["-i", "w", "doc", "read", "--json"],
            "aw-ctl: doc read takes no option, not --json",
        ),
        (
            &["-i", "w", "doc", "read", "a.md", "b.md"],
            "aw-ctl: wrong number of arguments for 'doc read'",
        ),
        (
            &["-i", "w", "budget", "clear"],
            "aw-ctl: budget: unknown subcommand 'clear'",
        ),
    ] {
        let out = run_in(&p, "aw-ctl", args);
        assert_code(&out, 64);
        assert_eq!(first_line(&out), want, "{args:?}");
    }
    // Their own options are taken.
    for args in [
        &["-i", "w", "status", "--json"][..],
        &["-i", "w", "ack", "alice", "--until", "0"],
        &["-i", "w", "ls", "--json"],
    ] {
        assert_code(&run_in(&p, "aw-ctl", args), 0);
    }
}

const WF: &str = "agents:\n  alice:\n    mock: {replies: [done]}\nkickoff: '@alice go'\n";

#[test]
fn aw_run_refuses_an_instance_near_an_existing_one_unless_created_on_purpose() {
    let (_d, p) = project();
    std::fs::write(p.join("wf.yaml"), WF).unwrap();
    assert_code(&run_in(&p, "aw-run", &["-q", "-i", "hello", "wf.yaml"]), 0);
    let out = run_in(&p, "aw-run", &["-q", "-i", "helo", "wf.yaml"]);
    assert_code(&out, 66);
    assert_eq!(
        first_line(&out),
        format!(
            "aw-run: no such instance 'helo' under {} (did you mean 'hello'?)",
            p.join(".workflow").display()
        )
    );
    // The command line says which of its options creates it anyway.
    assert!(
        stderr(&out).contains("\nhint: pass --create to create a new instance with that name"),
        "{}",
        stderr(&out)
    );
    assert!(!p.join(".workflow/helo").exists());
    let out = run_in(&p, "aw-run", &["-q", "-i", "helo", "--create", "wf.yaml"]);
    assert_code(&out, 0);
    assert!(p.join(".workflow/helo/channel.md").exists());
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .current_dir(dir)
        .args(args)
        .status()
        .expect("git must be installed");
    assert!(st.success(), "git {args:?}");
}

/// The `.workflow/` directories under `top`, the temporary registry aside.
fn roots_under(top: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![top.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            if !e.file_type().unwrap().is_dir() || path.ends_with(".git") {
                continue;
            }
            if path.ends_with(".workflow") {
                found.push(path);
            } else {
                dirs.push(path);
            }
        }
    }
    found
}

#[test]
fn a_root_made_by_a_first_write_is_named_absolutely_even_deep_in_a_git_work_tree() {
    for (tool, args) in [
        ("aw-ctl", &["new", "alice@w", "--backend", "mock"][..]),
        ("aw-run", &["-q", "../../wf.yaml"]),
    ] {
        let (_d, p) = project();
        git(&p, &["init", "-q"]);
        std::fs::write(p.join("wf.yaml"), WF).unwrap();
        let deep = p.join("src/lib");
        std::fs::create_dir_all(&deep).unwrap();
        let out = run_in(&deep, tool, args);
        assert_code(&out, 0);
        let roots = roots_under(&p);
        assert_eq!(roots.len(), 1, "{roots:?}");
        let err = stderr(&out);
        let said: Vec<&str> = err.lines().filter(|l| l.contains("created")).collect();
        assert_eq!(
            said,
            [format!("{tool}: created {}", roots[0].display())],
            "{tool}"
        );
        // The second write makes nothing and says nothing.
        let again = match tool {
            "aw-ctl" => run_in(&deep, tool, &["new", "bob@w", "--backend", "mock"]),
            _ => run_in(&deep, tool, args),
        };
        assert_code(&again, 0);
        assert!(!stderr(&again).contains("created"), "{}", stderr(&again));
    }
}
