//! Another user's files are never trusted: a `.workflow/` that another user planted above
//! the current directory is refused (exit 77) unless chosen explicitly or listed in the
//! user's allow list, and `aw-ctl stop` never signals a pid read from a file another user
//! owns, nor reads a registry of servers another user made. Two real Unix users are made
//! for each test (the tests run as root: `useradd` and `runuser` are needed) and removed
//! at its end.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use common::runner::{assert_code, stderr};
use common::{assert_error, bin, run_with, tool};

static NEXT_USER: AtomicU32 = AtomicU32::new(0);

/// A Unix user made for one test, with a home of its own under `base`; removed when
/// dropped.
struct User {
    name: String,
    uid: u32,
    home: PathBuf,
}

impl User {
    fn new(base: &Path) -> User {
        let name = format!(
            "awt{}u{}",
            std::process::id(),
            NEXT_USER.fetch_add(1, Ordering::Relaxed)
        );
        let st = Command::new("useradd")
            .args(["--no-create-home", "--user-group", "--shell", "/bin/sh"])
            .arg(&name)
            .status()
            .expect("useradd must be installed (the tests run as root)");
        assert!(st.success(), "useradd {name} failed");
        let id = Command::new("id").args(["-u", &name]).output().unwrap();
        let uid = String::from_utf8(id.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let home = base.join(format!("home-{name}"));
        let user = User { name, uid, home };
        user.mkdir(&user.home, 0o755);
        user
    }

    /// A directory owned by this user, with `mode`.
    fn mkdir(&self, dir: &Path, mode: u32) {
        std::fs::create_dir_all(dir).unwrap();
        self.own(dir);
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Give `path` to this user, as if the user had made it.
    fn own(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.uid)).unwrap();
    }

    /// Tool `name` run by this user in `dir` through runuser, with a clean environment of
    /// aw (its home, config and temporary directories its own, no `AW_*`).
    fn cmd(&self, dir: &Path, name: &str, args: &[&str]) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", &self.name, "--", "env"]);
        for v in ["AW_ROOT", "AW_INSTANCE", "AW_AGENT", "XDG_RUNTIME_DIR"] {
            c.args(["-u", v]);
        }
        c.arg(format!("HOME={}", self.home.display()))
            .arg(format!(
                "XDG_CONFIG_HOME={}",
                self.home.join(".config").display()
            ))
            .arg(format!("TMPDIR={}", self.home.display()))
            .arg(bin(name))
            .args(args)
            .current_dir(dir);
        c
    }

    fn run(&self, dir: &Path, name: &str, args: &[&str]) -> Output {
        run_with(self.cmd(dir, name, args), None)
    }

    /// A process of this user that sleeps until killed.
    fn sleeper(&self) -> Child {
        Command::new("sleep")
            .arg("600")
            .uid(self.uid)
            .gid(self.uid)
            .process_group(0)
            .spawn()
            .expect("spawn sleep")
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

/// A base directory every test user may enter.
fn base() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A directory as `/tmp` is: everyone may write in it, sticky.
fn sticky(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
}

fn alive(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

/// Processes a test started, killed (with their process groups) when dropped: before the
/// users who own them are removed, even when the test fails.
#[derive(Default)]
struct Procs(Vec<Child>);

impl Procs {
    fn add(&mut self, child: Child) -> &mut Child {
        self.0.push(child);
        self.0.last_mut().unwrap()
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, killpg};
        for c in &mut self.0 {
            let _ = killpg(nix::unistd::Pid::from_raw(c.id() as i32), Signal::SIGKILL);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn a_workflow_another_user_planted_above_is_refused() {
    let base = base();
    let victim = User::new(base.path());
    let other = User::new(base.path());
    let shared = base.path().join("shared");
    sticky(&shared);
    // The other user plants a root in the shared directory, with a message in it ...
    let out = other.run(&shared, "aw-send", &["-q", "planted"]);
    assert_code(&out, 0);
    let planted = shared.join(".workflow");
    assert_eq!(std::fs::metadata(&planted).unwrap().uid(), other.uid);
    // ... and the victim works in a project of theirs below it, with no root of its own.
    let proj = shared.join("proj");
    victim.mkdir(&proj, 0o755);
    let mcp_agent = ["--agent", "me@default"];
    for (name, args) in [
        ("aw-peek", &["-n", "0"][..]),
        ("aw-send", &["-q", "secret"][..]),
        ("aw-ctl", &["ls"][..]),
        ("aw-mcp", &mcp_agent[..]),
        ("aw-run", &["--serve", "--keep"][..]),
    ] {
        let out = victim.run(&proj, name, args);
        let line = assert_error(&out, name, 77, name);
        assert_eq!(
            line,
            format!(
                "{name}: {}: not trusted: it is owned by user {} (uid {})",
                planted.display(),
                other.name,
                other.uid
            )
        );
        let err = stderr(&out);
        assert!(
            err.contains(&format!("--root {}", planted.display()))
                && err.contains(".config/aw/safe-roots"),
            "{err}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(planted.join("default/channel.md"))
            .unwrap()
            .matches("### ")
            .count(),
        1,
        "nothing was written in the planted root"
    );
    // Root trusts root's roots alone.
    let mut c = tool("aw-peek");
    c.current_dir(&proj).env("HOME", &victim.home);
    assert_code(&run_with(c, None), 77);
    // Chosen explicitly, or listed in the victim's allow list, it is used.
    let out = victim.run(&proj, "aw-peek", &["--root", planted.to_str().unwrap()]);
    assert_code(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("planted"));
    let config = victim.home.join(".config/aw");
    victim.mkdir(&config, 0o755);
    let list = config.join("safe-roots");
    std::fs::write(&list, format!("# shared\n{}\n", shared.display())).unwrap();
    victim.own(&list);
    assert_code(&victim.run(&proj, "aw-peek", &[]), 0);
    std::fs::write(&list, "*\n").unwrap();
    assert_code(&victim.run(&proj, "aw-peek", &[]), 0);
}

#[test]
fn a_root_of_ones_own_is_refused_only_where_another_could_swap_it() {
    let base = base();
    let me = User::new(base.path());
    let other = User::new(base.path());
    // One's own root in a sticky directory: used.
    let shared = base.path().join("shared");
    sticky(&shared);
    assert_code(&me.run(&shared, "aw-send", &["-q", "mine"]), 0);
    let out = me.run(&shared, "aw-peek", &[]);
    assert_code(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("mine"));
    // Reached through another user's directory: refused.
    let theirs = shared.join("theirs");
    other.mkdir(&theirs, 0o755);
    let out = me.run(&theirs, "aw-peek", &[]);
    let line = assert_error(&out, "aw-peek", 77, "through another's directory");
    assert!(
        line.ends_with(&format!(
            "not trusted: it is reached through {}, owned by user {} (uid {})",
            theirs.display(),
            other.name,
            other.uid
        )),
        "{line}"
    );
    // In a directory everyone may write that is not sticky: refused.
    let open = base.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mine = open.join(".workflow");
    me.mkdir(&mine, 0o755);
    let out = me.run(&open, "aw-peek", &[]);
    let line = assert_error(&out, "aw-peek", 77, "in a directory everyone may write");
    assert!(
        line.ends_with(&format!(
            "not trusted: it is reached through {}, writable by everyone",
            open.display()
        )),
        "{line}"
    );
}

/// Plant, as `owner`, the record of `agent@w` under `root` that an aw-run of an older
/// version would have written (no host id), naming `pid`, with a claim of that version
/// (no server file named: served while its own lock is held).
fn plant_record(owner: &User, root: &Path, agent: &str, pid: u32) {
    let serve = root.join("w/_state/serve");
    let record = serve.join(format!("{agent}.json"));
    std::fs::write(
        &record,
        format!(
            "{{\"instance\":\"w\",\"agent\":\"{agent}\",\"pid\":{pid},\"state\":\"idle\",\
             \"runs\":0,\"workflow\":null,\"started\":\"2026-01-01T00:00:00.000Z\"}}\n"
        ),
    )
    .unwrap();
    let claim = serve.join(format!("{agent}.lock"));
    std::fs::write(&claim, format!("{pid}\nthere\n")).unwrap();
    owner.own(&record);
    owner.own(&claim);
}

#[test]
fn stop_never_signals_a_pid_read_from_another_users_file() {
    let base = base();
    let victim = User::new(base.path());
    let other = User::new(base.path());
    // The other user's root ...
    let root = base.path().join("theirs/.workflow");
    other.mkdir(root.parent().unwrap(), 0o755);
    let r = root.to_str().unwrap();
    assert_code(
        &other.run(
            base.path(),
            "aw-send",
            &["--root", r, "-i", "w", "-q", "hi"],
        ),
        0,
    );
    let serve = root.join("w/_state/serve");
    other.mkdir(&serve, 0o755);
    let mut procs = Procs::default();
    // ... with records naming processes of the victim's, one for each way in ...
    let mine = procs.add(victim.sleeper()).id();
    plant_record(&other, &root, "alice", mine);
    let roots = procs
        .add(
            Command::new("sleep")
                .arg("600")
                .process_group(0)
                .spawn()
                .unwrap(),
        )
        .id();
    plant_record(&other, &root, "carol", roots);
    // ... and their claims held (the other user holds their locks).
    for agent in ["alice", "carol"] {
        let claim = serve.join(format!("{agent}.lock"));
        procs.add(
            Command::new("flock")
                .arg(&claim)
                .args(["sleep", "600"])
                .uid(other.uid)
                .gid(other.uid)
                .process_group(0)
                .stdout(Stdio::null())
                .spawn()
                .expect("flock must be installed"),
        );
        common::runner::wait_for("the lock to be held", || {
            let f = std::fs::File::open(&claim).unwrap();
            f.try_lock_shared().is_err()
        });
    }

    // The victim stops alice in that root: the pid in the other user's record is not
    // signalled.
    let out = victim.run(base.path(), "aw-ctl", &["--root", r, "stop", "alice@w"]);
    let line = assert_error(&out, "aw-ctl", 77, "stop with another's record");
    assert!(
        line.starts_with("aw-ctl: not stopped: alice@w (")
            && line.contains(&format!("is owned by user {}", other.name))
            && line.contains(&format!("pid {mine} not signalled")),
        "{line}"
    );
    assert!(alive(&mut procs.0[0]), "the victim's process was signalled");

    // The other user made the registry of servers of root in the temporary directory
    // first, listing that root: it is not read, and nothing is signalled.
    let tmp = base.path().join("tmp");
    sticky(&tmp);
    let registry = tmp.join("aw-0/servers");
    other.mkdir(registry.parent().unwrap(), 0o700);
    other.mkdir(&registry, 0o700);
    let entry = registry.join(format!("{roots}.w"));
    std::fs::write(&entry, format!("{}\n", root.join("w").display())).unwrap();
    other.own(&entry);
    let elsewhere = base.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let as_root = |args: &[&str]| {
        let mut c = tool("aw-ctl");
        c.current_dir(&elsewhere)
            .env("TMPDIR", &tmp)
            .env_remove("XDG_RUNTIME_DIR")
            .args(args);
        run_with(c, None)
    };
    let out = as_root(&["stop", "--all"]);
    assert_code(&out, 0);
    assert!(stderr(&out).contains("nothing to stop"), "{}", stderr(&out));
    for args in [&["stop", "--all-roots"][..], &["ps", "--all-roots"][..]] {
        let out = as_root(args);
        let line = assert_error(&out, "aw-ctl", 77, "a registry of another user");
        assert_eq!(
            line,
            format!(
                "aw-ctl: {}: not a private directory of this user",
                registry.display()
            )
        );
    }
    assert!(alive(&mut procs.0[1]), "root's process was signalled");
}

/// A merge request is served only by its own user's processes: another user who serves the
/// queue (with write access to the instance) never runs its verify command, and says so.
#[test]
fn a_merge_request_is_never_served_by_another_user() {
    let base = base();
    let other = User::new(base.path());
    let (root, repo, mark) = (
        base.path().join("root"),
        base.path().join("repo"),
        base.path().join("verified"),
    );
    std::fs::create_dir(&repo).unwrap();
    common::git(&repo, &["init", "-q", "-b", "main"]);
    common::git(&repo, &["commit", "-q", "--allow-empty", "-m", "start"]);
    common::git(&repo, &["checkout", "-q", "-b", "feature"]);
    common::git(&repo, &["commit", "-q", "--allow-empty", "-m", "feature"]);
    common::git(&repo, &["checkout", "-q", "--detach", "main"]);
    let verify = format!("touch '{}'", mark.display());
    let mut c = tool("aw-ctl");
    c.current_dir(&repo).arg("--root").arg(&root).args([
        "merge",
        "request",
        "--branch",
        "feature",
        "--verify",
        &verify,
        "--no-wait",
    ]);
    let out = run_with(c, None);
    assert_code(&out, 0);
    // The other user may write everywhere in the instance.
    let st = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(&root)
        .status();
    assert!(st.unwrap().success());
    sticky(&base.path().join("tmp"));

    let root_arg = root.to_str().unwrap();
    let out = other.run(&repo, "aw-ctl", &["--root", root_arg, "merge", "serve"]);
    assert_code(&out, 0);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        stderr(&out).contains("merge #1: asked by another user"),
        "{}",
        stderr(&out)
    );
    assert!(!mark.exists(), "the verify command ran as the other user");
    let state = std::fs::read_to_string(root.join("default/merges/1.json")).unwrap();
    assert!(state.contains("\"state\": \"queued\""), "{state}");

    let mut c = tool("aw-ctl");
    c.current_dir(&repo)
        .args(["--root", root_arg, "merge", "serve"]);
    let out = run_with(c, None);
    assert_code(&out, 0);
    let state = std::fs::read_to_string(root.join("default/merges/1.json")).unwrap();
    assert!(state.contains("\"state\": \"merged\""), "{state} {out:?}");
    assert!(mark.exists());
}
