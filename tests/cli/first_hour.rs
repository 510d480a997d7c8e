//! A newcomer's first hour: the root is found from any directory of the project (as git
//! finds `.git`), errors name it absolutely and suggest near names, a typo in a write never
//! succeeds, `.workflow/` ignores itself in git, and patterns pick agents and documents.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::runner::{Server, assert_code, stderr, wait_for};
use common::{json_lines, run_with, tool};

/// A project directory (with a subdirectory `a/b`) where the tools run without `--root`,
/// with its own registry of servers (`XDG_RUNTIME_DIR`), unless it shares another's.
struct Project {
    dir: tempfile::TempDir,
    runtime: PathBuf,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().expect("temporary directory");
        let runtime = dir.path().join("run");
        std::fs::create_dir_all(&runtime).expect("mkdir");
        Project::in_dir(dir, runtime)
    }

    /// A second project whose servers are listed in the same registry as `other`'s.
    fn sharing(other: &Project) -> Project {
        Project::in_dir(
            tempfile::tempdir().expect("temporary directory"),
            other.runtime.clone(),
        )
    }

    fn in_dir(dir: tempfile::TempDir, runtime: PathBuf) -> Project {
        std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
        Project { dir, runtime }
    }

    fn path(&self) -> PathBuf {
        // Absolute and free of symlinks, as the tools print it.
        self.dir.path().canonicalize().expect("canonical path")
    }

    fn root(&self) -> PathBuf {
        self.path().join(".workflow")
    }

    /// Tool `name` run in `sub` (relative to the project) with `args`, no `--root`.
    fn cmd(&self, sub: &str, name: &str, args: &[&str]) -> Command {
        let mut c = tool(name);
        c.current_dir(self.path().join(sub))
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .args(args);
        c
    }

    fn run(&self, sub: &str, name: &str, args: &[&str]) -> Output {
        run_with(self.cmd(sub, name, args), None)
    }

    fn ok(&self, sub: &str, name: &str, args: &[&str]) -> String {
        let out = self.run(sub, name, args);
        assert_code(&out, 0);
        String::from_utf8(out.stdout).expect("UTF-8")
    }

    /// The messages of instance `inst`, read from the project's top.
    fn messages(&self, inst: &str) -> Vec<String> {
        json_lines(
            self.ok("", "aw-peek", &["-i", inst, "--json", "-n", "0"])
                .as_bytes(),
        )
        .iter()
        .map(|e| e["message"].as_str().expect("message").to_string())
        .collect()
    }
}

fn out_str(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_tool_finds_the_root_from_a_subdirectory() {
    let p = Project::new();
    // The first send, at the top, creates .workflow/ there and says so with its path.
    let out = p.run("", "aw-send", &["-i", "hello", "first"]);
    assert_code(&out, 0);
    let inst_dir = p.root().join("hello");
    assert_eq!(
        stderr(&out),
        format!(
            "aw-send: created instance 'hello' at {}\n",
            inst_dir.display()
        )
    );
    // From a subdirectory, every tool works on that root: no new .workflow/ appears there.
    p.ok("a/b", "aw-ctl", &["new", "bob@hello", "--backend", "mock"]);
    let out = p.run(
        "a/b",
        "aw-send",
        &["-i", "hello", "-t", "bob", "from below"],
    );
    assert_code(&out, 0);
    assert_eq!(stderr(&out), "", "no instance is created");
    let peek = p.ok("a/b", "aw-peek", &["-i", "hello", "-n", "0"]);
    assert!(
        peek.contains("first") && peek.contains("@bob from below"),
        "{peek}"
    );
    let ls = p.ok("a", "aw-ctl", &["ls"]);
    assert_eq!(ls, "hello\t2 entries\tbob (1 unread)\n");
    // aw-mcp registers its agent in the same root (end of input ends it at once).
    let mut mcp = p.cmd("a/b", "aw-mcp", &["--agent", "carol@hello"]);
    mcp.stdin(Stdio::null());
    assert_code(&run_with(mcp, None), 0);
    let agents = std::fs::read_to_string(inst_dir.join("_state/agents.json")).unwrap();
    assert!(agents.contains("\"carol\""), "{agents}");
    assert!(!p.path().join("a/.workflow").exists());
    assert!(!p.path().join("a/b/.workflow").exists());
    assert_eq!(p.messages("hello").len(), 2);
}

#[test]
fn without_a_root_reads_say_where_they_looked() {
    let p = Project::new();
    let here = p.path().join("a/b");
    let out = p.run("a/b", "aw-peek", &["-i", "hello"]);
    assert_code(&out, 66);
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "aw-peek: no such instance 'hello': no .workflow/ found in {} or any directory above it\n",
            here.display()
        )),
        "{err}"
    );
    assert!(err.contains("--root DIR or AW_ROOT"), "{err}");
    // Empty listings print nothing on stdout and say on stderr where they looked.
    for (args, what) in [
        (&["ls"][..], "no instances"),
        (&["ps"][..], "no served agents"),
    ] {
        let out = p.run("a/b", "aw-ctl", args);
        assert_code(&out, 0);
        assert_eq!(out_str(&out), "");
        assert_eq!(
            stderr(&out),
            format!(
                "aw-ctl: {what}: no .workflow/ found in {} or any directory above it\n",
                here.display()
            )
        );
    }
    let out = p.run("a/b", "aw-ctl", &["stop", "--all"]);
    assert_code(&out, 0);
    assert!(stderr(&out).contains("nothing to stop"), "{}", stderr(&out));
    // Reads created nothing.
    assert!(!p.root().exists() && !here.join(".workflow").exists());
}

#[test]
fn a_missing_instance_is_named_under_its_absolute_root_with_a_suggestion() {
    let p = Project::new();
    p.ok("", "aw-send", &["-i", "hello", "-q", "hi"]);
    let out = p.run("a", "aw-peek", &["-i", "helo"]);
    assert_code(&out, 66);
    assert_eq!(
        stderr(&out),
        format!(
            "aw-peek: no such instance 'helo' under {} (did you mean 'hello'?)\n",
            p.root().display()
        )
    );
    // A relative --root is named absolutely too.
    let out = p.run(
        "a",
        "aw-ctl",
        &["--root", "../.workflow", "-i", "hell", "status"],
    );
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains(&format!(
            "under {}",
            p.path().join("a/../.workflow").display()
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_created_root_ignores_itself_in_git() {
    let p = Project::new();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(p.path())
            .args(args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
        out_str(&out)
    };
    git(&["init", "-q"]);
    p.ok("a", "aw-send", &["-i", "hello", "-q", "hi"]);
    assert!(p.path().join("a/.workflow/hello/channel.md").is_file());
    assert_eq!(
        std::fs::read_to_string(p.path().join("a/.workflow/.gitignore")).unwrap(),
        "*\n"
    );
    assert_eq!(git(&["status", "--porcelain", "--untracked-files=all"]), "");
    // The .gitignore is not taken for an instance.
    assert_eq!(
        p.ok("a", "aw-ctl", &["ls"]),
        "hello\t1 entries\tno agents\n"
    );
}

#[test]
fn a_send_to_a_near_name_is_refused_unless_created_on_purpose() {
    let p = Project::new();
    p.ok("", "aw-send", &["-i", "hello", "-q", "hi"]);
    for typo in ["helo", "hell", "hellos"] {
        let out = p.run("a", "aw-send", &["-i", typo, "oops"]);
        assert_code(&out, 66);
        let err = stderr(&out);
        assert!(err.contains("(did you mean 'hello'?)"), "{err}");
        assert!(err.contains("--create"), "{err}");
        assert!(!p.root().join(typo).exists(), "{typo} was created");
    }
    // Asked for: created, and said so in one line with the absolute path.
    let out = p.run("a", "aw-send", &["-i", "helo", "--create", "on purpose"]);
    assert_code(&out, 0);
    assert_eq!(
        stderr(&out),
        format!(
            "aw-send: created instance 'helo' at {}\n",
            p.root().join("helo").display()
        )
    );
    // A name near nothing is created as before, and so is one of a numbered series; -q
    // keeps it quiet.
    for name in ["review", "review2", "review3"] {
        let out = p.run("a", "aw-send", &["-i", name, "-q", "fresh"]);
        assert_code(&out, 0);
        assert_eq!(stderr(&out), "");
        assert_eq!(p.messages(name), ["fresh"]);
    }
    assert_eq!(p.messages("hello"), ["hi"]);
    // aw-ctl's and aw-mcp's writes follow the same rule.
    let mut doc = p.cmd("a", "aw-ctl", &["-i", "hallo", "doc", "write", "notes.md"]);
    doc.stdin(Stdio::null());
    let out = run_with(doc, Some(b"text"));
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains("did you mean 'hello'?"),
        "{}",
        stderr(&out)
    );
    let out = p.run("a", "aw-ctl", &["new", "bob@hellp", "--backend", "mock"]);
    assert_code(&out, 66);
    let mut mcp = p.cmd("a", "aw-mcp", &["--agent", "bob@hell"]);
    mcp.stdin(Stdio::null());
    let out = run_with(mcp, None);
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains("did you mean 'hello'?"),
        "{}",
        stderr(&out)
    );
    for typo in ["hallo", "hellp", "hell"] {
        assert!(!p.root().join(typo).exists(), "{typo} was created");
    }
    p.ok(
        "a",
        "aw-ctl",
        &["new", "bob@hellp", "--create", "--backend", "mock"],
    );
    assert!(p.root().join("hellp").is_dir());
}

#[test]
fn an_explicit_recipient_must_be_registered() {
    let p = Project::new();
    p.ok(
        "",
        "aw-ctl",
        &["--create", "new", "sleeper@team", "--backend", "mock"],
    );
    for (to, near) in [("sleepr", " (did you mean 'sleeper'?)"), ("ghost", "")] {
        let out = p.run("", "aw-send", &["-i", "team", "-t", to, "wake up"]);
        assert_code(&out, 66);
        assert!(
            stderr(&out).starts_with(&format!(
                "aw-send: no agent '{to}' in instance 'team'{near} (registered: sleeper)\n"
            )),
            "{}",
            stderr(&out)
        );
        assert_eq!(out_str(&out), "");
    }
    assert_eq!(p.messages("team"), Vec::<String>::new());
    // A bare @name in the text is still sent, with a warning.
    let out = p.run("", "aw-send", &["-i", "team", "@ghost are you there"]);
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains("@ghost is not an agent"),
        "{}",
        stderr(&out)
    );
    let out = p.run("", "aw-send", &["-i", "team", "-t", "sleeper", "wake up"]);
    assert_code(&out, 0);
    assert_eq!(
        p.messages("team"),
        ["@ghost are you there", "@sleeper wake up"]
    );
}

#[test]
fn an_unknown_name_among_thousands_of_agents_lists_a_few_and_a_count() {
    let p = Project::new();
    p.ok(
        "",
        "aw-ctl",
        &["--create", "new", "sleeper@team", "--backend", "mock"],
    );
    let inst = aw::instance::Root::new(p.root()).instance("team").unwrap();
    let agents = (1..5000)
        .map(|i| aw::registry::Agent {
            name: format!("agent-{i:04}"),
            backend: "mock".into(),
            ..Default::default()
        })
        .collect();
    aw::registry::register_all(&inst, agents, false).unwrap();
    let listed = "(registered: sleeper, agent-0001, agent-0002, agent-0003, agent-0004, \
                  agent-0005, agent-0006, agent-0007, agent-0008, agent-0009, … and 4990 more)";
    let out = p.run("", "aw-send", &["-i", "team", "@ghost are you there"]);
    assert_code(&out, 0);
    assert_eq!(
        stderr(&out),
        format!(
            "aw-send: warning: @ghost is not an agent of instance 'team' {listed}; not a mention\n"
        )
    );
    let out = p.run("", "aw-send", &["-i", "team", "-t", "ghost", "wake up"]);
    assert_code(&out, 66);
    let err = stderr(&out);
    assert_eq!(
        err.lines().next(),
        Some(&*format!(
            "aw-send: no agent 'ghost' in instance 'team' {listed}"
        )),
        "{err}"
    );
    assert!(err.len() < 1000, "{err}");
}

#[test]
fn doc_list_takes_a_pattern() {
    let p = Project::new();
    for f in [
        "notes.md",
        "findings/auth.md",
        "findings/db.md",
        "findings/old/x.md",
    ] {
        let mut c = p.cmd("", "aw-ctl", &["-i", "docs", "--create", "doc", "write", f]);
        c.stdin(Stdio::null());
        assert_code(&run_with(c, Some(b"text\n")), 0);
    }
    assert_eq!(
        p.ok(
            "a",
            "aw-ctl",
            &["-i", "docs", "doc", "list", "findings/*.md"]
        ),
        "findings/auth.md\nfindings/db.md\n"
    );
    assert_eq!(
        p.ok("a", "aw-ctl", &["-i", "docs", "doc", "list", "*.md"]),
        "notes.md\n"
    );
    assert_eq!(
        p.ok("a/b", "aw-peek", &["-i", "docs", "--docs", "findings/*.md"]),
        "findings/auth.md\nfindings/db.md\n"
    );
    assert_eq!(
        p.ok("a/b", "aw-peek", &["-i", "docs", "--docs", "findings/*/*"]),
        "findings/old/x.md\n"
    );
    let out = p.run("a", "aw-ctl", &["-i", "docs", "doc", "list", "[x"]);
    assert_code(&out, 64);
    assert!(
        stderr(&out).starts_with("aw-ctl: bad pattern '[x'"),
        "{}",
        stderr(&out)
    );
}

/// `aw-run --serve --keep` of `agents` of instance `inst` in project `p`, once served.
fn serve(p: &Project, inst: &str, agents: &[&str]) -> Server {
    let mut args = vec!["-i", inst, "--serve", "--keep", "-q"];
    args.extend_from_slice(agents);
    let mut c = p.cmd("", "aw-run", &args);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let server = Server::new(c.spawn().expect("spawn aw-run"));
    let pid = server.pid();
    wait_for("the agents to be served", || {
        let ps = json_lines(p.ok("", "aw-ctl", &["-i", inst, "ps", "--json"]).as_bytes());
        agents
            .iter()
            .all(|a| ps.iter().any(|s| s["agent"] == *a && s["pid"] == pid))
    });
    server
}

fn served(p: &Project, sub: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec!["ps", "--json"];
    all.extend_from_slice(args);
    json_lines(p.ok(sub, "aw-ctl", &all).as_bytes())
        .iter()
        .map(|s| {
            format!(
                "{}@{}",
                s["agent"].as_str().unwrap(),
                s["instance"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn agent_patterns_pick_served_agents_for_ps_and_stop() {
    let p = Project::new();
    for a in ["worker-1", "worker-2", "lead"] {
        p.ok(
            "",
            "aw-ctl",
            &["--create", "new", &format!("{a}@team"), "--backend", "mock"],
        );
    }
    let workers = serve(&p, "team", &["worker-1", "worker-2"]);
    let lead = serve(&p, "team", &["lead"]);
    assert_eq!(
        served(&p, "a/b", &["worker-*@team"]),
        ["worker-1@team", "worker-2@team"]
    );
    assert_eq!(served(&p, "a/b", &["*@t*"]).len(), 3);
    let out = p.run("a/b", "aw-ctl", &["stop", "worker-*@team"]);
    assert_code(&out, 0);
    let pid = workers.pid();
    assert_eq!(
        out_str(&out),
        format!(
            "stopped worker-1@team (aw-run pid {pid})\nstopped worker-2@team (aw-run pid {pid})\n"
        )
    );
    assert_code(&workers.wait(), 0);
    assert_eq!(served(&p, "a/b", &[]), ["lead@team"]);
    let out = p.run("a/b", "aw-ctl", &["stop", "worker-*@team"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("no served agent matches"),
        "{}",
        stderr(&out)
    );
    let out = p.run("a/b", "aw-ctl", &["stop", "--all"]);
    assert_code(&out, 0);
    assert_code(&lead.wait(), 0);
}

#[test]
fn the_users_servers_are_listed_and_stopped_from_anywhere() {
    let one = Project::new();
    let two = Project::sharing(&one);
    let elsewhere = Project::sharing(&one);
    one.ok("", "aw-ctl", &["new", "alice@w", "--backend", "mock"]);
    two.ok("", "aw-ctl", &["new", "bob@w", "--backend", "mock"]);
    let s1 = serve(&one, "w", &["alice"]);
    let s2 = serve(&two, "w", &["bob"]);
    // A dead server's entry, left behind: ignored and removed.
    let servers = one.runtime.join("aw/servers");
    let stale = servers.join("999999999.w");
    std::fs::write(&stale, format!("{}\n", one.root().join("w").display())).unwrap();
    // From a directory with no .workflow/ above it, ps alone finds nothing ...
    let out = elsewhere.run("a", "aw-ctl", &["ps"]);
    assert_code(&out, 0);
    assert_eq!(out_str(&out), "");
    // ... and --all-roots finds both servers, each with its instance directory.
    let rows = json_lines(
        elsewhere
            .ok("a", "aw-ctl", &["ps", "--all-roots", "--json"])
            .as_bytes(),
    );
    let mut seen: Vec<(String, String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["agent"].as_str().unwrap().to_string(),
                r["dir"].as_str().unwrap().to_string(),
                r["pid"].as_u64().unwrap(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (
                "alice".to_string(),
                one.root().join("w").display().to_string(),
                s1.pid() as u64
            ),
            (
                "bob".to_string(),
                two.root().join("w").display().to_string(),
                s2.pid() as u64
            ),
        ]
    );
    assert!(!stale.exists(), "the dead server's entry was removed");
    // stop --all means the servers of this root: none here ...
    let out = elsewhere.run("a", "aw-ctl", &["stop", "--all"]);
    assert_code(&out, 0);
    assert_eq!(out_str(&out), "");
    assert!(stderr(&out).contains("nothing to stop"), "{}", stderr(&out));
    assert_eq!(served(&one, "a", &[]), ["alice@w"]);
    assert_eq!(served(&two, "a", &[]), ["bob@w"]);
    // ... alice's alone in her project ...
    assert_eq!(
        one.ok("a/b", "aw-ctl", &["stop", "--all"]),
        format!("stopped alice@w (aw-run pid {})\n", s1.pid())
    );
    assert_code(&s1.wait(), 0);
    assert_eq!(served(&two, "a", &[]), ["bob@w"]);
    // ... and --all-roots every server of the user, each line naming its root.
    assert_eq!(
        elsewhere.ok("a", "aw-ctl", &["stop", "--all-roots"]),
        format!(
            "stopped bob@w (aw-run pid {}) in {}\n",
            s2.pid(),
            two.root().display()
        )
    );
    assert_code(&s2.wait(), 0);
    assert_eq!(elsewhere.ok("a", "aw-ctl", &["ps", "--all-roots"]), "");
    assert_eq!(std::fs::read_dir(&servers).unwrap().count(), 0);
}

#[test]
fn status_takes_an_agent_pattern() {
    let p = Project::new();
    for a in ["worker-1", "worker-2", "lead"] {
        p.ok(
            "",
            "aw-ctl",
            &["new", &format!("{a}@team"), "--backend", "mock"],
        );
    }
    let names = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["-i", "team", "status", "--json"];
        all.extend_from_slice(args);
        let v: serde_json::Value = serde_json::from_str(&p.ok("a", "aw-ctl", &all)).unwrap();
        v["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["worker-*"]), ["worker-1", "worker-2"]);
    assert_eq!(names(&[]).len(), 3);
    let out = p.run("a", "aw-ctl", &["-i", "team", "status", "ghost-*"]);
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains("matches 'ghost-*'"),
        "{}",
        stderr(&out)
    );
    let out = p.run("a", "aw-ctl", &["-i", "team", "status", "worker"]);
    assert_code(&out, 66);
    assert!(stderr(&out).contains("did you mean"), "{}", stderr(&out));
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn the_search_for_the_root_stops_at_a_file_system_boundary() {
    let p = Project::new();
    p.ok("", "aw-send", &["-i", "hello", "-q", "hi"]);
    let mnt = p.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "aw-test"])
        .arg(&mnt)
        .output()
        .unwrap_or_else(|e| panic!("cannot run mount(8) ({e}): install util-linux's mount"));
    assert!(
        mounted.status.success(),
        "cannot mount a tmpfs ({}): run the tests as root, with mount allowed",
        String::from_utf8_lossy(&mounted.stderr)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
    );
    let _guard = Mount(mnt.clone());
    std::fs::create_dir(mnt.join("sub")).unwrap();
    // Below the mount point, the project's .workflow/ is on another file system: not used.
    let out = p.run("mnt/sub", "aw-peek", &["-i", "hello"]);
    assert_code(&out, 66);
    assert!(
        stderr(&out).contains(&format!(
            "no .workflow/ found in {} or any directory above it",
            mnt.join("sub").display()
        )),
        "{}",
        stderr(&out)
    );
    // Beside it, on the project's file system, it is.
    assert!(p.ok("a/b", "aw-peek", &["-i", "hello"]).contains("hi"));
}

#[test]
fn a_workflow_run_from_a_subdirectory_is_shown_by_its_plain_path() {
    let p = Project::new();
    std::fs::create_dir(p.root()).unwrap();
    std::fs::write(
        p.path().join("wf.yaml"),
        "name: keep\nagents:\n  alice:\n    mock: {}\nkickoff: '@alice hi'\n",
    )
    .unwrap();
    let mut c = p.cmd("a/b", "aw-run", &["--keep", "-q", "../../wf.yaml"]);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let server = Server::new(c.spawn().expect("spawn aw-run"));
    wait_for("alice served", || {
        p.root().join("keep").exists() && served(&p, "a", &[]) == ["alice@keep"]
    });
    let ps = json_lines(p.ok("a", "aw-ctl", &["ps", "--json"]).as_bytes());
    let want = p.path().join("wf.yaml");
    assert_eq!(ps[0]["workflow"], want.to_str().unwrap());
    let text = p.ok("a/b", "aw-ctl", &["ps"]);
    assert!(text.trim_end().ends_with(want.to_str().unwrap()), "{text}");
    assert!(!text.contains(".."), "{text}");
    assert_code(&p.run("", "aw-ctl", &["stop", "@keep"]), 0);
    assert_code(&server.wait(), 0);
}

#[test]
fn a_root_given_as_the_project_directory_means_its_workflow() {
    let p = Project::new();
    p.ok("", "aw-send", &["-i", "hello", "-q", "first"]);
    for d in ["src", "target", ".workflow/notes"] {
        std::fs::create_dir_all(p.path().join(d)).unwrap();
    }
    let top = p.path();
    let top = top.to_str().unwrap();
    // From anywhere, --root naming the project lists the instances of its .workflow/, and
    // only directories with a channel or aw's state are instances.
    let ls = p.ok("a", "aw-ctl", &["--root", top, "ls"]);
    assert_eq!(ls.lines().count(), 1, "{ls}");
    assert!(ls.starts_with("hello\t"), "{ls}");
    let out = p.run("a", "aw-peek", &["--root", top, "-i", "notes"]);
    assert_code(&out, 66);
    // A write goes into .workflow/, never beside it; AW_ROOT reads the same way.
    p.ok(
        "a",
        "aw-send",
        &["--root", top, "-i", "hello", "-q", "second"],
    );
    p.ok("a", "aw-send", &["--root", top, "-q", "to default"]);
    assert!(!p.path().join("hello").exists() && !p.path().join("default").exists());
    assert!(p.root().join("default/channel.md").is_file());
    let mut peek = p.cmd("a", "aw-peek", &["-i", "hello", "-n", "0"]);
    peek.env("AW_ROOT", top);
    let out = run_with(peek, None);
    assert_code(&out, 0);
    let text = out_str(&out);
    assert!(text.contains("first") && text.contains("second"), "{text}");
}
