//! `isolation: worktree` on real git repositories: each agent works in a worktree of its
//! own on `aw/<instance>/<agent>`, the main work tree untouched; a worktree kept across
//! runs and made again on the same branch after `rm -rf`; the headline case of two agents
//! editing one line, the first merged and the second told of its conflict, fixing it and
//! merged; a merged worktree removed and the next run started afresh; the API backends'
//! file tools, `--iter` and workers in worktrees; `--check` outside git; `aw-ctl worktree
//! ls` and `rm`; and `examples/worktrees.sh` to its end.

use crate::common;

use std::path::{Path, PathBuf};

use crate::backend_api::{KEY, answer, tool_use};
use common::fake_api::FakeApi;
use common::runner::{
    INST, Server, Setup, assert_code, run_hang_guarded, serving, spawn, stderr, wait_for,
};
use common::{git, json_lines};
use serde_json::json;

/// A setup whose working directory is a git repository on `main` with `f.txt` of five
/// lines, the workflow `wf` and the agent script `body` committed; and a folder for what
/// the agents record (`$LOGS`).
fn repo(wf: &str, body: &str) -> (Setup, tempfile::TempDir) {
    let s = Setup::new();
    let d = s.dir();
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.name", "t"]);
    git(d, &["config", "user.email", "t@example.com"]);
    s.write("f.txt", "1\n2\n3\n4\n5\n");
    s.write("wf.yaml", wf);
    s.script("agent.sh", body);
    std::fs::create_dir(d.join("sub")).unwrap();
    s.write("sub/keep", "");
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "start"]);
    (s, tempfile::tempdir().unwrap())
}

/// aw-run (run mode) in the repository, `$LOGS` set.
fn run(s: &Setup, logs: &Path, args: &[&str]) -> std::process::Output {
    let mut c = s.cmd(args);
    c.env("LOGS", logs).env("GIT_CONFIG_NOSYSTEM", "1");
    run_hang_guarded(c)
}

/// aw-ctl with `args`, in `dir`.
fn ctl(s: &Setup, dir: &Path, args: &[&str]) -> std::process::Output {
    let mut c = s.tool_cmd("aw-ctl");
    c.current_dir(dir).args(["-i", INST]).args(args);
    c.output().unwrap()
}

fn top(s: &Setup) -> PathBuf {
    std::fs::canonicalize(s.dir()).unwrap()
}

fn wt(s: &Setup, agent: &str) -> PathBuf {
    top(s).join(".aw-worktrees").join(INST).join(agent)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The subjects of the commits of `rev`, newest first.
fn subjects(s: &Setup, rev: &str) -> Vec<String> {
    git(s.dir(), &["log", "--format=%s", rev])
        .lines()
        .map(str::to_string)
        .collect()
}

fn has_branch(s: &Setup, b: &str) -> bool {
    !git(s.dir(), &["branch", "--list", b]).is_empty()
}

/// Counts its runs; records where it ran and what it was told; in a worktree, adds a line
/// to `f.txt`, commits, and says so through aw-send; elsewhere does nothing more.
const EDITS: &str = r#"cat > /dev/null
n=$(( $(cat "$LOGS/n-$AW_AGENT" 2>/dev/null || echo 0) + 1 ))
echo $n > "$LOGS/n-$AW_AGENT"
pwd > "$LOGS/pwd-$AW_AGENT-$n"
echo "${AW_WORKTREE:-none} ${AW_BRANCH:-none}" > "$LOGS/env-$AW_AGENT-$n"
[ -n "$AW_WORKTREE" ] || exit 0
echo "$AW_AGENT $n" >> f.txt
git add f.txt && git commit -q -m "$AW_AGENT $n"
aw-send "committed $AW_AGENT $n"
"#;

const TWO: &str = "\
name: w
isolation: worktree
agents:
  a:
    command: [./agent.sh]
  b:
    command: [./agent.sh]
  c:
    command: [./agent.sh]
    isolation: none
  d:
    command: [./agent.sh]
    cwd: sub
kickoff: '@a @b @c @d add your line'
";

#[test]
fn each_agent_works_in_its_own_worktree_on_its_own_branch_and_the_main_tree_is_untouched() {
    let (s, logs) = repo(TWO, EDITS);
    let l = logs.path();
    let out = run(&s, l, &[]);
    assert_code(&out, 0);
    for agent in ["a", "b"] {
        let path = wt(&s, agent);
        // The backend ran there, told so in its environment.
        assert_eq!(
            read(&l.join(format!("pwd-{agent}-1"))).trim(),
            path.to_str().unwrap()
        );
        assert_eq!(
            read(&l.join(format!("env-{agent}-1"))).trim(),
            format!("{} aw/w/{agent}", path.display())
        );
        // Its commit is on its branch, its file in its worktree.
        let b = format!("aw/w/{agent}");
        assert_eq!(subjects(&s, &b), [format!("{agent} 1"), "start".into()]);
        assert_eq!(
            read(&path.join("f.txt")),
            format!("1\n2\n3\n4\n5\n{agent} 1\n")
        );
    }
    // A cwd is relative to the worktree's top.
    assert_eq!(
        read(&l.join("pwd-d-1")).trim(),
        wt(&s, "d").join("sub").to_str().unwrap()
    );
    // `isolation: none` works where aw-run runs.
    assert_eq!(read(&l.join("pwd-c-1")).trim(), top(&s).to_str().unwrap());
    assert_eq!(read(&l.join("env-c-1")).trim(), "none none");
    // The main work tree: same file, same branch, nothing untracked (the worktrees hidden).
    assert_eq!(read(&s.dir().join("f.txt")), "1\n2\n3\n4\n5\n");
    assert_eq!(subjects(&s, "main"), ["start"]);
    assert_eq!(
        git(s.dir(), &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    // aw-send from inside a worktree reached the same instance.
    let said: Vec<String> = s
        .entries()
        .into_iter()
        .map(|(f, m)| format!("{f}: {m}"))
        .collect();
    for line in ["a: committed a 1", "b: committed b 1", "d: committed d 1"] {
        assert!(said.iter().any(|e| e == line), "{said:?}");
    }
    // aw-ctl worktree ls: both, clean, one commit ahead of main.
    let ls = ctl(&s, s.dir(), &["worktree", "ls", "--json"]);
    assert_code(&ls, 0);
    let rows = json_lines(&ls.stdout);
    let got: Vec<(String, String, String, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["agent"].as_str().unwrap().to_string(),
                r["branch"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
                r["ahead"].as_u64().unwrap(),
                r["behind"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("a".into(), "aw/w/a".into(), "clean".into(), 1, 0),
            ("b".into(), "aw/w/b".into(), "clean".into(), 1, 0),
            ("d".into(), "aw/w/d".into(), "clean".into(), 1, 0)
        ]
    );
    assert_eq!(rows[0]["path"], wt(&s, "a").to_str().unwrap());
    assert_eq!(rows[0]["target"], "main");
}

#[test]
fn a_worktree_is_kept_across_runs_and_made_again_on_its_branch_after_rm_rf() {
    let wf = "name: w\nagents:\n  a:\n    command: [./agent.sh]\n    isolation: worktree\n\
              kickoff: '@a add your line'\n";
    let (s, logs) = repo(wf, EDITS);
    let l = logs.path();
    for n in 1..=2 {
        assert_code(&run(&s, l, &[]), 0);
        assert_eq!(
            read(&l.join(format!("pwd-a-{n}"))).trim(),
            wt(&s, "a").to_str().unwrap()
        );
    }
    assert_eq!(subjects(&s, "aw/w/a"), ["a 2", "a 1", "start"]);
    // Removed by hand: made again where it was, on the same branch, with its commits.
    std::fs::remove_dir_all(wt(&s, "a")).unwrap();
    let ls = ctl(&s, s.dir(), &["worktree", "ls"]);
    let line = String::from_utf8_lossy(&ls.stdout).to_string();
    assert!(line.ends_with("\taw/w/a\t-\tmissing\t? main\n"), "{line}");
    assert_code(&run(&s, l, &[]), 0);
    assert_eq!(
        read(&l.join("pwd-a-3")).trim(),
        wt(&s, "a").to_str().unwrap()
    );
    assert_eq!(subjects(&s, "aw/w/a"), ["a 3", "a 2", "a 1", "start"]);
    assert_eq!(
        read(&wt(&s, "a").join("f.txt")),
        "1\n2\n3\n4\n5\na 1\na 2\na 3\n"
    );
    assert_eq!(subjects(&s, "main"), ["start"]);
}

/// `a` changes line 3, merges and hands over to `b`; `b` changes the same line and asks to
/// merge: a conflict, which wakes it; it rebases, takes both changes, and asks again. A
/// later run of `a` keeps what its worktree holds in `$LOGS`.
const TAKES_TURNS: &str = r#"cat > /dev/null
n=$(( $(cat "$LOGS/n-$AW_AGENT" 2>/dev/null || echo 0) + 1 ))
echo $n > "$LOGS/n-$AW_AGENT"
export GIT_EDITOR=true
case "$AW_AGENT.$n" in
a.1)
  sed -i 's/^3$/3 by a/' f.txt
  git commit -q -a -m "a: line 3"
  aw-ctl merge request > "$LOGS/merge-a-1" 2>&1
  aw-send "@b your turn" ;;
b.1)
  sed -i 's/^3$/3 by b/' f.txt
  git commit -q -a -m "b: line 3"
  aw-ctl merge request > "$LOGS/merge-b-1" 2>&1 || echo "exit $?" >> "$LOGS/merge-b-1" ;;
b.2)
  if ! git rebase -q main > /dev/null 2>&1; then
    printf '1\n2\n3 by a and b\n4\n5\n' > f.txt
    git add f.txt
    git rebase --continue > /dev/null
  fi
  aw-ctl merge request > "$LOGS/merge-b-2" 2>&1 ;;
a.2)
  git log --format=%s -1 > "$LOGS/a-2-head"
  cp f.txt "$LOGS/a-2-f" ;;
esac
"#;

#[test]
fn two_agents_edit_one_line_the_second_is_told_of_its_conflict_fixes_it_and_both_merge() {
    let wf = "name: w\nisolation: worktree\nagents:\n  a:\n    command: [./agent.sh]\n  \
              b:\n    command: [./agent.sh]\nkickoff: '@a start'\n";
    let (s, logs) = repo(wf, TAKES_TURNS);
    let l = logs.path();
    let out = run(&s, l, &[]);
    assert_code(&out, 0);
    assert_eq!(read(&l.join("n-b")).trim(), "2", "{}", stderr(&out));
    // The main branch, and the main work tree where it is checked out, have both changes.
    assert_eq!(read(&s.dir().join("f.txt")), "1\n2\n3 by a and b\n4\n5\n");
    assert_eq!(subjects(&s, "main"), ["b: line 3", "a: line 3", "start"]);
    // The queue: a merged, b's conflict, b merged.
    let ls = ctl(&s, s.dir(), &["merge", "ls", "--json"]);
    let reqs: Vec<(String, String)> = json_lines(&ls.stdout)
        .iter()
        .map(|r| {
            (
                r["agent"].as_str().unwrap().into(),
                r["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        reqs,
        [
            ("a".into(), "merged".into()),
            ("b".into(), "conflict".into()),
            ("b".into(), "merged".into())
        ]
    );
    assert!(read(&l.join("merge-b-1")).contains("exit 1"));
    // The conflict was said to b, naming the file.
    assert!(
        s.entries()
            .iter()
            .any(|(_, m)| m.contains("@b") && m.contains("conflict") && m.contains("f.txt")),
        "{:?}",
        s.entries()
    );
    // Merged and clean: both worktrees are gone, with their branches.
    for agent in ["a", "b"] {
        assert!(!wt(&s, agent).exists(), "{agent}");
        assert!(!has_branch(&s, &format!("aw/w/{agent}")), "{agent}");
    }
    let ls = ctl(&s, s.dir(), &["worktree", "ls"]);
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "");
    // The next run of a starts afresh from main.
    assert_code(&run(&s, l, &[]), 0);
    assert_eq!(read(&l.join("a-2-head")).trim(), "b: line 3");
    assert_eq!(read(&l.join("a-2-f")), "1\n2\n3 by a and b\n4\n5\n");
}

#[test]
fn check_says_why_a_worktree_cannot_be_made_and_a_bad_value_is_placed() {
    let s = Setup::new();
    s.script("agent.sh", "cat > /dev/null\n");
    let wf = "name: w\nisolation: worktree\nagents:\n  a:\n    command: [./agent.sh]\n";
    s.write("wf.yaml", wf);
    let out = run_hang_guarded(s.cmd(&["--check"]));
    assert_code(&out, 66);
    let dir = s.dir().display().to_string();
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "wf.yaml:2:12: isolation: worktree: no git repository at {dir}"
        )),
        "{err}"
    );
    // Only an agent: its own key is where it is said.
    let wf = "name: w\nagents:\n  a:\n    command: [./agent.sh]\n    isolation: worktree\n";
    s.write("wf.yaml", wf);
    let out = run_hang_guarded(s.cmd(&["--check"]));
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains("wf.yaml:5:16: isolation: worktree: no git"),
        "{}",
        stderr(&out)
    );
    // Without git: 69, said at the key.
    let bins = common::bin("aw-run").parent().unwrap().to_path_buf();
    let mut c = s.cmd(&["--check"]);
    c.env("PATH", &bins);
    let out = run_hang_guarded(c);
    assert_code(&out, 69);
    assert!(
        stderr(&out).contains("wf.yaml:5:16: isolation: worktree: git: cannot run it"),
        "{}",
        stderr(&out)
    );
    // A run refuses to start, and writes nothing.
    let out = run_hang_guarded(s.cmd(&[]));
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains("no git repository at"),
        "{}",
        stderr(&out)
    );
    assert!(!s.dir().join(".aw-worktrees").exists());
    // `isolation: none` needs no repository.
    s.write(
        "wf.yaml",
        &wf.replace("isolation: worktree", "isolation: none"),
    );
    assert_code(&run_hang_guarded(s.cmd(&["--check"])), 0);
    // Bad values, at their place.
    for (wf, at) in [
        (
            "name: w\nisolation: worktre\nagents:\n  a:\n    command: [./a]\n",
            "wf.yaml:2:12: ",
        ),
        (
            "name: w\nagents:\n  a:\n    command: [./a]\n    isolation: [x]\n",
            "wf.yaml:5:16: ",
        ),
    ] {
        s.write("wf.yaml", wf);
        let out = run_hang_guarded(s.cmd(&["--check"]));
        assert_code(&out, 65);
        let err = stderr(&out);
        assert!(
            err.contains(at) && err.contains("expected none or worktree, found"),
            "{err}"
        );
    }
    let wf = "name: w\nisolation: worktree\nagents:\n  a:\n    command: [./a]\n    cwd: ../x\n";
    s.write("wf.yaml", wf);
    let out = run_hang_guarded(s.cmd(&["--check"]));
    assert_code(&out, 65);
    assert!(
        stderr(&out).contains("wf.yaml:6:10: agents.a.cwd: in a worktree"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn worktree_rm_refuses_changes_unless_forced_and_keeps_a_branch_not_merged() {
    let (s, logs) = repo(TWO, EDITS);
    assert_code(&run(&s, logs.path(), &[]), 0);
    // A change in a's worktree: refused, nothing removed.
    std::fs::write(wt(&s, "a").join("new.txt"), "x\n").unwrap();
    let out = ctl(&s, s.dir(), &["worktree", "rm", "a"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("has changes to files: not removed"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("hint: commit them, or remove it anyway with --force"));
    assert!(wt(&s, "a").join("new.txt").exists());
    let ls = ctl(&s, s.dir(), &["worktree", "ls"]);
    let text = String::from_utf8_lossy(&ls.stdout).to_string();
    assert!(
        text.starts_with(&format!("a\t{}\taw/w/a\t", wt(&s, "a").display())),
        "{text}"
    );
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with("\tdirty\t+1 -0 main"),
        "{text}"
    );
    // --force: removed, its branch kept (not merged) and said so.
    let out = ctl(&s, s.dir(), &["worktree", "rm", "a", "--force"]);
    assert_code(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "removed {}\nkept branch aw/w/a: it has commits not in main\n",
            wt(&s, "a").display()
        )
    );
    assert!(!wt(&s, "a").exists());
    assert_eq!(subjects(&s, "aw/w/a"), ["a 1", "start"]);
    // b's branch merged into main: removed with its worktree.
    git(s.dir(), &["merge", "-q", "--ff-only", "aw/w/b"]);
    let out = ctl(&s, s.dir(), &["worktree", "rm", "b"]);
    assert_code(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("removed {}\nremoved branch aw/w/b\n", wt(&s, "b").display())
    );
    assert!(!has_branch(&s, "aw/w/b"));
    assert_code(&ctl(&s, s.dir(), &["worktree", "rm", "d"]), 0);
    assert_eq!(
        git(s.dir(), &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    // None left; a name with none: 66.
    assert_eq!(
        String::from_utf8_lossy(&ctl(&s, s.dir(), &["worktree", "ls"]).stdout),
        ""
    );
    let out = ctl(&s, s.dir(), &["worktree", "rm", "a"]);
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains("no worktree for agent 'a' in instance 'w'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn iterations_of_an_agent_in_a_worktree_commit_on_its_branch() {
    let wf = "name: w\nisolation: worktree\nagents:\n  coder:\n    command: [./agent.sh]\n\
              kickoff: Write the lines of work.txt.\n";
    let body = "cat > /dev/null\npwd >> \"$LOGS/pwd\"\necho line >> work.txt\necho Added a line\n";
    let (s, logs) = repo(wf, body);
    let out = run(&s, logs.path(), &["--iter", "2"]);
    assert_code(&out, 0);
    let here = wt(&s, "coder");
    let pwd = format!("{0}\n{0}\n", here.display());
    assert_eq!(read(&logs.path().join("pwd")), pwd);
    assert_eq!(
        subjects(&s, "aw/w/coder"),
        ["Added a line", "Added a line", "start"]
    );
    assert_eq!(read(&here.join("work.txt")), "line\nline\n");
    assert_eq!(subjects(&s, "main"), ["start"]);
    assert!(!s.dir().join("work.txt").exists());
}

fn run_api(s: &Setup, api: &FakeApi) -> std::process::Output {
    let mut c = s.cmd(&["-q", "--retries", "1"]);
    c.env("ANTHROPIC_BASE_URL", &api.url)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("GIT_CONFIG_NOSYSTEM", "1");
    run_hang_guarded(c)
}

#[test]
fn an_api_agents_file_tools_write_in_its_worktree() {
    let wf = "name: w\nisolation: worktree\nagents:\n  alice:\n    backend: anthropic\n    \
              model: claude-test\n    tools: [write_file, read_file]\nkickoff: '@alice write'\n";
    let (s, _logs) = repo(wf, "");
    let api = FakeApi::start(vec![
        answer(
            json!([
                tool_use(
                    "w1",
                    "write_file",
                    json!({"path": "notes.txt", "content": "hi\n"})
                ),
                tool_use("r1", "read_file", json!({"path": "f.txt"})),
            ]),
            "tool_use",
            1,
            1,
        ),
        answer(
            json!([{"type": "text", "text": "@user done"}]),
            "end_turn",
            1,
            1,
        ),
    ]);
    assert_code(&run_api(&s, &api), 0);
    assert_eq!(read(&wt(&s, "alice").join("notes.txt")), "hi\n");
    assert!(!s.dir().join("notes.txt").exists());
    let results = &api.requests()[1].body["messages"][2]["content"];
    assert_eq!(results[1]["content"], "1\n2\n3\n4\n5\n", "{results}");
    assert_eq!(
        git(s.dir(), &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
}

#[test]
fn a_worker_of_an_agent_in_a_worktree_works_in_one_of_its_own() {
    let wf = "name: w\nisolation: worktree\nagents:\n  alice:\n    backend: anthropic\n    \
              model: claude-test\n    collab: true\nkickoff: '@alice summarise, with a worker'\n";
    let (s, _logs) = repo(wf, "");
    let api = FakeApi::start(vec![
        answer(
            json!([tool_use(
                "s1",
                "spawn_agent",
                json!({"prompt": "summarise", "backend": "anthropic", "model": "claude-test"})
            )]),
            "tool_use",
            1,
            1,
        ),
        answer(json!([{"type": "text", "text": "done"}]), "end_turn", 1, 1),
        answer(json!([{"type": "text", "text": "done"}]), "end_turn", 1, 1),
    ]);
    assert_code(&run_api(&s, &api), 0);
    let ls = ctl(&s, s.dir(), &["worktree", "ls", "--json"]);
    let rows = json_lines(&ls.stdout);
    let agents: Vec<&str> = rows.iter().map(|r| r["agent"].as_str().unwrap()).collect();
    assert_eq!(agents.len(), 2, "{rows:?}");
    let worker = agents
        .iter()
        .find(|a| **a != "alice")
        .expect("a worker's worktree");
    let row = rows.iter().find(|r| r["agent"] == *worker).unwrap();
    assert_eq!(row["branch"], format!("aw/w/{worker}"));
    assert_eq!(row["path"], wt(&s, worker).to_str().unwrap());
    assert!(wt(&s, worker).join("f.txt").exists());
}

#[test]
fn worktree_rm_refuses_the_worktree_of_an_agent_being_served_unless_forced() {
    let wf = "name: w\nisolation: worktree\nagents:\n  a:\n    command: [./agent.sh]\n";
    let (s, logs) = repo(wf, EDITS);
    let mut c = s.cmd(&["--keep", "-q"]);
    c.env("LOGS", logs.path());
    let server = Server::new(spawn(c));
    wait_for("a to be served", || {
        serving(&s).iter().any(|(a, _)| a == "a")
    });
    assert!(wt(&s, "a").join("f.txt").exists());
    let out = ctl(&s, s.dir(), &["worktree", "rm", "a"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("a is being served: not removed"),
        "{}",
        stderr(&out)
    );
    assert!(wt(&s, "a").join("f.txt").exists());
    server.term();
    let out = ctl(&s, s.dir(), &["worktree", "rm", "a"]);
    assert_code(&out, 0);
    assert!(!wt(&s, "a").exists());
    // No work of its own: the branch held nothing, and goes too.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("removed {}\nremoved branch aw/w/a\n", wt(&s, "a").display())
    );
}

#[test]
fn the_worktrees_example_merges_both_workers_once_verified_and_approved_after_a_conflict() {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/worktrees.sh");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let bins = common::bin("aw-run").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = std::process::Command::new("sh");
    c.arg(&ex)
        .arg(&dir)
        .env("PATH", path)
        // No git identity but the example's own.
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1");
    for v in ["AW_ROOT", "AW_INSTANCE", "AW_AGENT", "AW_SYNC"] {
        c.env_remove(v);
    }
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    // Both signatures are on main, the second joined to the first by hand after its
    // conflict, and the main work tree has them.
    let greeting = read(&dir.join("greeting.txt"));
    assert!(
        ["hello from w1 and w2", "hello from w2 and w1"]
            .iter()
            .any(|l| greeting == format!("a greeting\n{l}\nthe end\n")),
        "{greeting}"
    );
    let log = git(&dir, &["log", "--format=%s", "main"]);
    assert_eq!(log.lines().count(), 3, "{log}");
    // The queue: one merged, the other's conflict, then merged.
    let ls = std::process::Command::new(common::bin("aw-ctl"))
        .current_dir(&dir)
        .args(["-i", "worktrees", "merge", "ls", "--json"])
        .output()
        .unwrap();
    let states: Vec<String> = json_lines(&ls.stdout)
        .iter()
        .map(|r| r["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states, ["merged", "conflict", "merged"]);
    // Each merge waited for the lead's approval.
    let ls = std::process::Command::new(common::bin("aw-ctl"))
        .current_dir(&dir)
        .args(["-i", "worktrees", "approvals", "--all", "--json"])
        .output()
        .unwrap();
    let approvals = json_lines(&ls.stdout);
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    for a in &approvals {
        assert_eq!(a["state"], "approved", "{a}");
        assert_eq!(a["decision"]["by"], "lead", "{a}");
    }
    // Merged, the worktrees are gone with their branches.
    assert_eq!(
        git(&dir, &["branch", "--format=%(refname:short)"]).trim(),
        "main"
    );
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 1);
}
