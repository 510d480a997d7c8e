//! `aw-run --iter`: one exec agent over many iterations in a temporary git work tree, each
//! iteration that changed files committed with its trailers, the aw root never committed,
//! records, `--resume` after a crash, the duration limit, the done signal, and bad input.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::runner::{assert_code, path_with_bins, run_hang_guarded, spawn, stderr, wait_for};
use common::{assert_error, tool};
use serde_json::Value;

/// The agent: saves its prompt as `logs/prompt-K.txt` (K counts its runs), appends a line to
/// `work.txt` unless `logs/idle-K` exists, sleeps for `logs/sleep` seconds when that file
/// exists, hangs at run `logs/hang-at` when it says K, and prints its summary (with
/// `AW-DONE` at run `logs/done-at`).
const AGENT: &str = r#"set -e
mkdir -p logs
k=$(( $(cat logs/count 2>/dev/null || echo 0) + 1 ))
echo $k > logs/count
cat > logs/prompt-$k.txt
[ -e logs/idle-$k ] || echo "line $k" >> work.txt
[ -e logs/sleep ] && sleep "$(cat logs/sleep)"
if [ "$(cat logs/hang-at 2>/dev/null)" = "$k" ]; then
  touch logs/hanging
  exec sleep 30
fi
echo "Added line $k"
if [ "$(cat logs/done-at 2>/dev/null)" = "$k" ]; then echo AW-DONE; fi
if [ "$(cat logs/status-done-at 2>/dev/null)" = "$k" ]; then
  printf '%s\n' \
   '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}' \
   '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
   '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"my_status_set","arguments":{"state":"done"}}}' \
   | aw-mcp --root "$AW_ROOT" --agent "$AW_AGENT@$AW_INSTANCE" > /dev/null
fi
"#;

const WORKFLOW: &str = "\
name: w
agents:
  coder:
    command: [./agent.sh]
kickoff: Write the lines of work.txt.
";

/// A temporary folder with the workflow and the agent, as a git work tree (unless `git`
/// is false) whose first commit holds them.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new(git: bool) -> Repo {
        let r = Repo {
            dir: tempfile::tempdir().expect("temporary directory"),
        };
        r.write("wf.yaml", WORKFLOW);
        r.write("agent.sh", &format!("#!/bin/sh\n{AGENT}"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            r.path().join("agent.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        std::fs::create_dir(r.path().join("logs")).expect("logs");
        if git {
            r.git(&["init", "-q"]);
            for (k, v) in [
                ("user.name", "Test"),
                ("user.email", "test@example.org"),
                ("commit.gpgsign", "false"),
            ] {
                r.git(&["config", k, v]);
            }
            r.write(".gitignore", "logs/\n");
            r.git(&["add", "wf.yaml", "agent.sh", ".gitignore"]);
            r.git(&["commit", "-q", "-m", "start"]);
        }
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path().join(name), text).expect("write a file");
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.path())
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    /// aw-run in the folder, its root the default `.workflow/` inside it.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = tool("aw-run");
        c.current_dir(self.path())
            .env("PATH", path_with_bins())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["--backoff", "0.01s", "--retries", "1"])
            .args(args)
            .arg("wf.yaml");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        run_hang_guarded(self.cmd(args))
    }

    /// Commits after the first, newest first: (id, message, files).
    fn commits(&self) -> Vec<(String, String, Vec<String>)> {
        let ids = self.git(&["rev-list", "HEAD"]);
        let mut ids: Vec<&str> = ids.lines().collect();
        ids.pop();
        ids.iter()
            .map(|id| {
                let msg = self.git(&["show", "-s", "--format=%B", id]);
                let files = self.git(&["show", "--name-only", "--format=", id]);
                (
                    id.to_string(),
                    msg,
                    files.lines().map(str::to_string).collect(),
                )
            })
            .collect()
    }

    /// The `Aw-Iteration` trailers of those commits, oldest first.
    fn trailers(&self) -> Vec<String> {
        let mut t: Vec<String> = self
            .commits()
            .iter()
            .map(|(_, msg, _)| {
                let found: Vec<&str> = msg
                    .lines()
                    .filter_map(|l| l.strip_prefix("Aw-Iteration: "))
                    .collect();
                assert_eq!(found.len(), 1, "one trailer in {msg:?}");
                assert!(msg.contains("\nAw-Instance: w\n"), "{msg:?}");
                found[0].to_string()
            })
            .collect();
        t.reverse();
        t
    }

    fn records(&self) -> Vec<Value> {
        let p = self
            .path()
            .join(".workflow/w/_state/iterations/coder.jsonl");
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a JSON record"))
            .collect()
    }

    fn prompt(&self, k: u32) -> String {
        std::fs::read_to_string(self.path().join(format!("logs/prompt-{k}.txt")))
            .expect("a saved prompt")
    }

    fn exists(&self, p: &str) -> bool {
        self.path().join(p).exists()
    }
}

#[test]
fn three_iterations_make_three_commits_and_never_commit_the_root() {
    let r = Repo::new(true);
    // A root made by the user: aw gives it no .gitignore, so git sees it.
    std::fs::create_dir(r.path().join(".workflow")).expect("mkdir .workflow");
    let out = r.run(&["--iter", "3"]);
    assert_code(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Added line 3\n");
    let err = stderr(&out);
    for k in 1..=3 {
        assert!(
            err.contains(&format!("aw-run: iter {k}/3 ok ")),
            "line of iteration {k}: {err}"
        );
    }
    let commits = r.commits();
    assert_eq!(commits.len(), 3, "{commits:?}");
    assert_eq!(r.trailers(), ["1/3", "2/3", "3/3"]);
    for (id, msg, files) in &commits {
        assert_eq!(files, &["work.txt"], "{id}");
        assert!(msg.starts_with("Added line "), "{msg:?}");
    }
    // The root lies in the work tree, is not ignored, and was never committed.
    assert!(r.exists(".workflow/w/channel.md"));
    let all = r.git(&["log", "--all", "--name-only", "--format="]);
    assert!(!all.contains(".workflow"), "{all}");
    assert!(r.git(&["status", "--porcelain"]).contains(".workflow/"));
    assert_eq!(
        std::fs::read_to_string(r.path().join("work.txt")).unwrap(),
        "line 1\nline 2\nline 3\n"
    );
    // Records: three, each with its commit.
    let recs = r.records();
    assert_eq!(recs.len(), 3);
    let oldest_first: Vec<&String> = commits.iter().rev().map(|c| &c.0).collect();
    for (k, rec) in recs.iter().enumerate() {
        assert_eq!(rec["iteration"], k as u64 + 1);
        assert_eq!(rec["status"], "ok");
        assert_eq!(rec["summary"], format!("Added line {}", k + 1));
        assert_eq!(rec["commit"].as_str(), Some(oldest_first[k].as_str()));
        assert_eq!(rec["files"], serde_json::json!(["work.txt"]));
    }
    // The prompt of iteration 2 has the task, and iteration 1's summary and commit.
    let p1 = r.prompt(1);
    assert!(p1.contains("Write the lines of work.txt."), "{p1}");
    assert!(!p1.contains("Previous Iterations"), "{p1}");
    let p2 = r.prompt(2);
    assert!(p2.contains("Write the lines of work.txt."), "{p2}");
    assert!(p2.contains("Iteration: 2 of 3"), "{p2}");
    assert!(
        p2.contains(&format!(
            "### Iteration 1 -> commit {}\nFiles: work.txt\nSummary: Added line 1\n",
            oldest_first[0]
        )),
        "{p2}"
    );
    let p3 = r.prompt(3);
    assert!(p3.contains(&format!("commit {}", oldest_first[1])), "{p3}");
    // aw-ctl runs shows which run was which iteration.
    let runs = tool("aw-ctl")
        .current_dir(r.path())
        .args(["runs", "--json", "-i", "w"])
        .output()
        .expect("aw-ctl");
    let lines = common::json_lines(&runs.stdout);
    let iters: Vec<u64> = lines
        .iter()
        .map(|v| v["iteration"].as_u64().expect("an iteration"))
        .collect();
    assert_eq!(iters, [1, 2, 3]);
}

#[test]
fn an_iteration_that_changes_nothing_makes_no_commit() {
    let r = Repo::new(true);
    // Changed but not committed before the start: left alone.
    r.write("wf.yaml", &format!("{WORKFLOW}# a local change\n"));
    r.write("logs/idle-2", "");
    let out = r.run(&["--iter", "3", "--json"]);
    assert_code(&out, 0);
    assert_eq!(r.trailers(), ["1/3", "3/3"]);
    let recs = r.records();
    assert_eq!(recs.len(), 3);
    assert!(recs[1]["commit"].is_null(), "{}", recs[1]);
    assert_eq!(recs[1]["status"], "ok");
    for (_, _, files) in r.commits() {
        assert_eq!(files, ["work.txt"]);
    }
    assert!(r.git(&["status", "--porcelain"]).contains(" M wf.yaml"));
    // --json: one object per iteration, then the summary.
    let lines = common::json_lines(&out.stdout);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[1]["event"], "iteration");
    assert_eq!(lines[1]["iteration"], 2);
    assert!(lines[1]["commit"].is_null());
    assert_eq!(lines[3]["event"], "iterations");
    assert_eq!(lines[3]["iterations"], 3);
    assert_eq!(lines[3]["stopped"], "limit");
    assert_eq!(lines[3]["summary"], "Added line 3");
}

#[test]
fn a_staged_index_is_refused_and_nothing_runs() {
    let r = Repo::new(true);
    r.write("staged.txt", "mine\n");
    r.git(&["add", "staged.txt"]);
    let out = r.run(&["--iter", "2"]);
    let line = assert_error(&out, "aw-run", 73, "staged index");
    assert!(line.contains("staged changes"), "{line}");
    assert!(!r.exists(".workflow"), "something ran");
    assert!(!r.exists("logs/count"), "the agent ran");
    assert_eq!(r.commits().len(), 0);
    assert!(
        r.git(&["diff", "--cached", "--name-only"])
            .contains("staged.txt")
    );
}

#[test]
fn resume_after_a_crash_completes_the_iterations_without_repeating_one() {
    let r = Repo::new(true);
    r.write("logs/hang-at", "2\n");
    let child = spawn(r.cmd(&["--iter", "3"]));
    let pid = child.id();
    let guard = common::runner::Server::new(child);
    wait_for("iteration 2 to run", || r.exists("logs/hanging"));
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    guard.wait();
    let recs = r.records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(r.trailers(), ["1/3"]);
    std::fs::remove_file(r.path().join("logs/hang-at")).unwrap();
    let out = r.run(&["--iter", "3", "--resume"]);
    assert_code(&out, 0);
    assert_eq!(r.trailers(), ["1/3", "2/3", "3/3"]);
    let recs = r.records();
    let numbers: Vec<u64> = recs
        .iter()
        .map(|v| v["iteration"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert!(recs.iter().all(|v| v["series"] == recs[0]["series"]));
    // Iteration 2 ran again: its prompt names iteration 1 and only that.
    let p = r.prompt(3);
    assert!(p.contains("Iteration: 2 of 3"), "{p}");
    assert!(p.contains("### Iteration 1 -> commit"), "{p}");
    // Nothing left: another --resume runs nothing.
    let again = r.run(&["--iter", "3", "--resume"]);
    assert_code(&again, 0);
    assert_eq!(r.records().len(), 3);
    assert_eq!(String::from_utf8_lossy(&again.stdout), "Added line 4\n");
}

#[test]
fn a_duration_limit_stops_after_the_running_iteration() {
    let r = Repo::new(true);
    r.write("logs/sleep", "0.4\n");
    let out = r.run(&["--iter", "1s"]);
    assert_code(&out, 0);
    let n = r.records().len();
    // Each iteration takes at least 0.4 s: at most three start within 1 s.
    assert!((2..=3).contains(&n), "{n} iterations");
    let want: Vec<String> = (1..=n).map(|k| format!("{k}/?")).collect();
    assert_eq!(r.trailers(), want);
}

#[test]
fn the_done_signal_stops_after_its_iteration() {
    let r = Repo::new(true);
    r.write("logs/done-at", "2\n");
    let out = r.run(&["--iter", "5"]);
    assert_code(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Added line 2\n");
    let recs = r.records();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1]["done"], true);
    assert_eq!(recs[1]["summary"], "Added line 2");
    assert_eq!(r.trailers(), ["1/5", "2/5"]);
    assert!(!r.commits()[0].1.contains("AW-DONE"));

    // The agent's status set to done (through aw-mcp) says the same.
    let r = Repo::new(true);
    r.write("logs/status-done-at", "1\n");
    let out = r.run(&["--iter", "5"]);
    assert_code(&out, 0);
    assert_eq!(r.records().len(), 1);
    assert_eq!(r.records()[0]["done"], true);
    // A status left at done from before does not stop a new series.
    std::fs::remove_file(r.path().join("logs/status-done-at")).unwrap();
    let out = r.run(&["--iter", "2"]);
    assert_code(&out, 0);
    assert_eq!(r.records().len(), 3);
}

#[test]
fn resume_on_a_finished_series_says_it_is_finished() {
    let r = Repo::new(true);
    assert_code(&r.run(&["--iter", "2"]), 0);
    let out = r.run(&["--iter", "2", "--resume"]);
    assert_code(&out, 0);
    let series = r.records()[0]["series"].as_str().unwrap().to_string();
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "aw-run: coder: the series begun {series} is finished (2 iterations, its 2 iterations have run): nothing to resume"
        )),
        "{err}"
    );
    assert_eq!(r.records().len(), 2);
    assert_eq!(r.trailers(), ["1/2", "2/2"]);
    // A larger limit resumes it.
    let out = r.run(&["--iter", "3", "--resume"]);
    assert_code(&out, 0);
    assert!(!stderr(&out).contains("is finished"), "{}", stderr(&out));
    assert_eq!(r.records().len(), 3);

    // Finished because the agent said so.
    let r = Repo::new(true);
    r.write("logs/done-at", "1\n");
    assert_code(&r.run(&["--iter", "3"]), 0);
    let out = r.run(&["--iter", "3", "--resume"]);
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains(
            "is finished (1 iteration, the agent said the task is done): nothing to resume"
        ),
        "{err}"
    );
    assert_eq!(r.records().len(), 1);
}

#[test]
fn outside_a_work_tree_the_iterations_run_without_commits() {
    let r = Repo::new(false);
    let out = r.run(&["--iter", "2"]);
    assert_code(&out, 0);
    let err = stderr(&out);
    assert_eq!(err.matches("not in a git work tree").count(), 1, "{err}");
    let recs = r.records();
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|v| v["commit"].is_null()));
    assert!(!r.exists(".git"));
    assert_eq!(
        std::fs::read_to_string(r.path().join("work.txt")).unwrap(),
        "line 1\nline 2\n"
    );
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let r = Repo::new(true);
    let cases: [(&[&str], i32, &str); 6] = [
        (&["--iter", "0"], 64, "--iter"),
        (&["--iter", "x"], 64, "--iter"),
        (&["--iter", "1.5"], 64, "--iter"),
        (&["--iter", "2", "--agent", "nobody"], 66, "nobody"),
        (&["--resume"], 64, "--resume needs --iter"),
        (&["--agent", "coder"], 64, "--agent needs --iter"),
    ];
    for (args, code, what) in cases {
        let out = r.run(args);
        let line = assert_error(&out, "aw-run", code, &format!("{args:?}"));
        assert!(line.contains(what), "{args:?}: {line}");
    }
    r.write(
        "wf.yaml",
        "name: w\nagents:\n  coder:\n    command: [./agent.sh]\n  reviewer:\n    command: [./agent.sh]\nkickoff: go\n",
    );
    let out = r.run(&["--iter", "2"]);
    let line = assert_error(&out, "aw-run", 64, "two agents");
    assert!(
        line.contains("coder, reviewer") && line.contains("--agent"),
        "{line}"
    );
    r.write(
        "wf.yaml",
        "name: w\nagents:\n  coder:\n    command: [./agent.sh]\n",
    );
    let out = r.run(&["--iter", "2"]);
    let line = assert_error(&out, "aw-run", 65, "no kickoff");
    assert!(
        line.ends_with("wf.yaml: --iter needs a kickoff: the task"),
        "{line}"
    );
    assert!(!r.exists(".workflow"), "something ran");
    assert!(!r.exists("logs/count"), "the agent ran");
    assert_eq!(r.commits().len(), 0);
}

#[test]
fn the_repository_configuration_runs_nothing_of_its_own() {
    let r = Repo::new(true);
    let marks = tempfile::tempdir().expect("temporary directory");
    let mark = |what: &str| marks.path().join(what);
    // Scripts that would leave a marker: an fsmonitor, hooks, a clean filter, a signing
    // program, a textconv driver; all configured in the repository itself.
    let script = |name: &str, body: &str| {
        let p = marks.path().join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write a script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p.display().to_string()
    };
    let fsmonitor = script(
        "fsmonitor",
        &format!("touch {}\nexit 1", mark("fsmonitor").display()),
    );
    let clean = script("clean", &format!("touch {}\ncat", mark("clean").display()));
    let gpg = script("gpg", &format!("touch {}\nexit 1", mark("gpg").display()));
    let textconv = script(
        "textconv",
        &format!("touch {}\ncat \"$1\"", mark("textconv").display()),
    );
    std::fs::create_dir(r.path().join(".githooks")).expect("mkdir .githooks");
    for hook in [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "prepare-commit-msg",
        "pre-auto-gc",
    ] {
        let body = format!("#!/bin/sh\ntouch {}\n", mark(hook).display());
        let p = r.path().join(".githooks").join(hook);
        std::fs::write(&p, body).expect("write a hook");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    r.write(".gitattributes", "*.txt filter=evil diff=evil\n");
    r.git(&["add", ".gitattributes", ".githooks"]);
    r.git(&["commit", "-q", "-m", "hooks"]);
    for (k, v) in [
        ("core.fsmonitor", fsmonitor.as_str()),
        ("core.hooksPath", ".githooks"),
        ("filter.evil.clean", clean.as_str()),
        ("filter.evil.required", "true"),
        ("diff.evil.textconv", textconv.as_str()),
        ("commit.gpgSign", "true"),
        ("gpg.program", gpg.as_str()),
    ] {
        r.git(&["config", k, v]);
    }
    let out = r.run(&["--iter", "2"]);
    assert_code(&out, 0);
    let ran: Vec<String> = std::fs::read_dir(marks.path())
        .expect("read the markers")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| !["fsmonitor", "clean", "gpg", "textconv"].contains(&n.as_str()))
        .collect();
    assert!(ran.is_empty(), "ran: {ran:?}");
    let subjects = r.git(&["log", "--format=%s%n%(trailers:key=Aw-Iteration,valueonly)"]);
    assert!(
        subjects.starts_with("Added line 2\n2/2\n\nAdded line 1\n1/2\n"),
        "{subjects}"
    );
    // The commits hold the file as written: no filter changed it.
    assert_eq!(r.git(&["show", "HEAD:work.txt"]), "line 1\nline 2\n");
}
