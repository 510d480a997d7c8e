//! Running aw-run in tests: a root with a working directory beside it for workflow files
//! and scripts, and what a test needs to watch processes (alive, process groups).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{Root, tool};

pub const INST: &str = "w";

/// A root with a working directory beside it, where workflow files and scripts live and
/// where aw-run runs.
pub struct Setup {
    pub root: Root,
    pub dir: tempfile::TempDir,
}

impl Setup {
    pub fn new() -> Setup {
        Setup {
            root: Root::new(),
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir().join(name);
        std::fs::write(&p, text).expect("write a file");
        p
    }

    /// An executable `#!/bin/sh` script.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.write(name, &format!("#!/bin/sh\n{body}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    /// aw-run on `wf.yaml` with `args`, run in the working directory with the binaries'
    /// directory first in PATH.
    pub fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_file(args, Path::new("wf.yaml"))
    }

    /// aw-run on `file`, as [`Setup::cmd`].
    pub fn cmd_file(&self, args: &[&str], file: &Path) -> Command {
        let mut c = self.tool_cmd("aw-run");
        c.args(["-i", INST, "--backoff", "0.01s"])
            .args(args)
            .arg(file);
        c
    }

    /// Tool `name` with `--root`, run in the working directory with the binaries' directory
    /// first in PATH.
    pub fn tool_cmd(&self, name: &str) -> Command {
        let mut c = tool(name);
        c.current_dir(self.dir())
            .env("PATH", path_with_bins())
            .arg("--root")
            .arg(self.root.path());
        c
    }

    pub fn run(&self, workflow: &str, args: &[&str]) -> Output {
        self.write("wf.yaml", workflow);
        run_hang_guarded(self.cmd(args))
    }

    pub fn entries(&self) -> Vec<(String, String)> {
        self.root
            .entries(INST)
            .into_iter()
            .map(|e| (e.from, e.message.trim_end().to_string()))
            .collect()
    }

    pub fn unread(&self, agent: &str) -> usize {
        let inst = aw::instance::Root::new(self.root.path())
            .instance(INST)
            .expect("instance");
        aw::inbox::unread(&inst, agent).expect("inbox").0.len()
    }

    /// The statuses of `agent`'s first `n` transcripts.
    pub fn statuses(&self, agent: &str, n: u64) -> Vec<String> {
        (1..=n)
            .map(|i| {
                self.transcript(agent, i)["status"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string()
            })
            .collect()
    }

    pub fn transcript_path(&self, agent: &str, n: u64) -> PathBuf {
        self.root
            .inst_dir(INST)
            .join(format!("_state/runs/{agent}/{n}.json"))
    }

    pub fn transcript(&self, agent: &str, n: u64) -> serde_json::Value {
        let p = self
            .root
            .inst_dir(INST)
            .join(format!("_state/runs/{agent}/{n}.json"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&text).expect("transcript is JSON")
    }
}

/// Run with a bound that only stops a hung test.
pub fn run_hang_guarded(cmd: Command) -> Output {
    wait_hang_guarded(spawn(cmd))
}

/// Wait for `child` and its output, killing it if it hangs (a bound that only stops a hung
/// test).
pub fn wait_hang_guarded(child: Child) -> Output {
    wait_guarded_for(child, Duration::from_secs(30))
}

/// [`wait_hang_guarded`] with a bound of `limit`: for work that takes long on a loaded
/// machine without hanging.
pub fn wait_guarded_for(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let guard = std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let out = child.wait_with_output().expect("wait for aw-run");
    drop(guard);
    out
}

pub fn spawn(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn aw-run")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn assert_code(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "stderr: {}", stderr(out));
}

/// A server of an earlier version of `lock`'s agent, as far as the lock goes: a process
/// that holds the exclusive flock of the agent's lock file and wrote its pid alone there;
/// returned once it holds it.
pub fn hold_like_an_earlier_version(lock: &Path) -> Child {
    let script = format!(
        "exec 9<>'{}'; flock -x 9; echo $$ >&9; echo ready; exec sleep 600",
        lock.display()
    );
    let mut old = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(old.stdout.as_mut().expect("stdout")),
        &mut ready,
    )
    .expect("read");
    assert_eq!(ready, "ready\n");
    old
}

/// Pids serving each agent, as `aw-ctl ps` shows them.
pub fn serving(s: &Setup) -> Vec<(String, u64)> {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "ps", "--json"]);
    let out = super::run_with(c, None);
    assert_code(&out, 0);
    super::json_lines(&out.stdout)
        .iter()
        .map(|v| {
            (
                v["agent"].as_str().unwrap_or_default().to_string(),
                v["pid"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

/// `agent`, registered with the mock backend, served by an `aw-run --serve --keep` of the
/// setup (killed if the test ends without stopping it), once `aw-ctl ps` shows it served.
pub fn serve_mock(s: &Setup, agent: &str) -> Server {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "new", agent, "--backend", "mock"]);
    assert_code(&super::run_with(c, None), 0);
    let mut c = s.tool_cmd("aw-run");
    c.args(["-i", INST, "--serve", "--keep", "-q", agent]);
    serving_agent(s, c, agent)
}

/// The server `c` (an aw-run that keeps serving), its input and output thrown away, once
/// `aw-ctl ps` shows it serving `agent` (killed if the test ends without stopping it).
pub fn serving_agent(s: &Setup, mut c: Command, agent: &str) -> Server {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let server = Server::new(c.spawn().expect("spawn aw-run"));
    wait_for(&format!("{agent} to be served"), || {
        serving(s).iter().any(|(a, _)| a == agent)
    });
    server
}

/// `inner` (a command of the setup) run by `sh` once it has set the soft limit of open files
/// to `soft`.
pub fn with_soft_open_files(s: &Setup, inner: &Command, soft: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -Sn {soft} && exec \"$0\" \"$@\""))
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(s.dir());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

/// Is `agent` of the instance `inst` under the root `root` shown as served, as `aw-ctl ps`
/// lists it? (A server shows its agents once every one is registered.)
pub fn shown(root: &Path, inst: &str, agent: &str) -> bool {
    let i = aw::instance::Root::new(root)
        .instance(inst)
        .expect("instance");
    aw::serve::record(&i, agent).is_some()
}

/// Wait (hang guard only: generous, for a loaded machine and a FUSE mount) until `f` holds.
pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Is there a live (not zombie) process with this pid?
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => stat_state(&s) != Some('Z'),
        Err(_) => false,
    }
}

/// State and process group of a `/proc/PID/stat` line.
pub fn stat_state(s: &str) -> Option<char> {
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

pub fn stat_pgrp(s: &str) -> Option<u32> {
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// Live processes of process group `pgrp`.
pub fn group_members(pgrp: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(s) = std::fs::read_to_string(e.path().join("stat"))
            && stat_pgrp(&s) == Some(pgrp)
            && stat_state(&s) != Some('Z')
        {
            out.push(pid);
        }
    }
    out
}

/// `PATH` with the directory of the crate's binaries first.
pub fn path_with_bins() -> String {
    let bin_dir = super::bin("aw-send")
        .parent()
        .expect("bin dir")
        .to_path_buf();
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A serving aw-run, killed if a test ends (or panics) without stopping it.
pub struct Server(Option<Child>);

impl Server {
    pub fn new(child: Child) -> Server {
        Server(Some(child))
    }

    pub fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// The running process (to take its pipes).
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }

    /// Wait (hang guard only) for the server to exit after a stop.
    pub fn wait(mut self) -> Output {
        wait_hang_guarded(self.0.take().expect("running"))
    }

    /// [`Server::wait`], for work that may take up to `limit` on a loaded machine.
    pub fn wait_up_to(mut self, limit: Duration) -> Output {
        wait_guarded_for(self.0.take().expect("running"), limit)
    }

    /// SIGTERM, then [`Server::wait`].
    pub fn term(self) -> Output {
        let pid = self.pid().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        self.wait()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Kills a process that is not our child (a detached server) when dropped.
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-9", &self.0.to_string()])
            .status();
    }
}

/// The pid that `aw-run --detach` printed (it must have succeeded), guarded: the server is
/// killed when the guard is dropped.
pub fn detached(out: &Output) -> (u32, KillOnDrop) {
    assert_code(out, 0);
    let pid: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a pid");
    (pid, KillOnDrop(pid))
}
