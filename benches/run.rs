//! Figure 6: `aw-run`. End to end, a two-agent mock workflow with one setup task, from spawn
//! to exit; a 5-task pipeline against its programs alone; the wake latency of an exec agent
//! served by `aw-run --keep`, from a mention to its backend's start; `spawn_agent` to the
//! worker's first run; what ten idle agents cost (processor time and memory); and 20 agents
//! handling 2,000 mentions, each checked to be handled exactly once.
//!
//! The exec agent's backend is this program itself, started with `--stamp SOCKET`: it sends
//! the CLOCK_MONOTONIC time at which its `main` runs to SOCKET and exits.

mod common;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use aw::instance::{Instance, Root};
use aw::post::{self, PostOptions};
use aw::serve::{self, ControllerState, Served};
use common::{Opts, Rng, Stats, Table, mono_ns};

/// The first argument that makes this program the stamping backend.
const STAMP: &str = "--stamp";
/// The TypeScript runner's time for the end-to-end exchange.
const ANCHOR: Duration = Duration::from_millis(8300);
/// A bound that only stops a hung benchmark.
const HANG: Duration = Duration::from_secs(60);

fn main() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(OsStr::new(STAMP)) {
        stamp(args.next());
    }
    let opts = Opts::from_args();
    common::heading("aw-run", &opts);
    let dir = common::scratch("run-");
    end_to_end(dir.path(), &opts);
    pipeline(dir.path(), &opts);
    wake(dir.path(), &opts);
    spawn(dir.path(), &opts);
    idle(dir.path(), &opts);
    if !throughput(dir.path()) {
        std::process::exit(1);
    }
}

/// The stamping backend: send the time `main` was reached to `sock`, then exit.
fn stamp(sock: Option<OsString>) -> ! {
    let t = mono_ns();
    let sent = match (sock, UnixDatagram::unbound()) {
        (Some(p), Ok(s)) => s.send_to(&t.to_le_bytes(), p).is_ok(),
        _ => false,
    };
    std::process::exit(if sent { 0 } else { 1 })
}

/// A string as a YAML scalar (a JSON string is a double-quoted YAML one).
fn yaml(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A command without the aw variables of the calling environment.
fn command(program: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(cwd)
        .env_remove("AW_ROOT")
        .env_remove("AW_INSTANCE")
        .env_remove("AW_AGENT")
        .env_remove("AW_SYNC")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// Wait for `child` with a hang bound; `None` if it had to be killed.
fn wait_bounded(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + bound;
    loop {
        if let Some(st) = child.try_wait().expect("wait for a child") {
            return Some(st);
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// 1. End to end.

const HELLO: &str = "\
name: hello
agents:
  alice:
    mock:
      replies:
        - \"@bob what is the answer?\"
        - \"Thanks, done.\"
  bob:
    mock:
      replies:
        - \"@alice the answer is 42.\"
setup:
  - shell: echo 42
    as: expected
kickoff: |
  @alice please find out the answer from bob (expected: ${{ expected }}).
";

/// Who wrote what, in order, in a finished run of [`HELLO`].
const HELLO_SENDERS: [&str; 4] = ["system", "alice", "bob", "alice"];

fn end_to_end(dir: &Path, opts: &Opts) {
    let wf = dir.join("hello.yaml");
    std::fs::write(&wf, HELLO).expect("write the workflow");
    let variants: [(&str, Option<&[&str]>); 2] = [
        ("/bin/true (spawn → exit)", None),
        ("aw-run FILE -q", Some(&[])),
    ];
    let samples = rotating(opts.reps(40), variants.len(), |v, r| match variants[v].1 {
        None => spawn_exit(&mut command(Path::new("/bin/true"), dir)),
        Some(extra) => hello_once(dir, &wf, extra, r),
    });
    println!(
        "### 1. End to end\n\n`aw-run hello.yaml -q`: two mock agents, one setup task (`echo 42`, \
         kept as a variable), kickoff, alice asks bob, bob answers, alice thanks, exit 0 as soon \
         as every agent is idle with nothing unread. Spawn → exit, a fresh root each run, \
         rounds rotating the order; every run's exit status and channel are checked."
    );
    println!();
    let mut t = Table::new(&[
        "what",
        "n",
        "median",
        "p99",
        "max",
        "TypeScript 8.3 s ÷ median",
    ]);
    for ((label, extra), s) in variants.iter().zip(&samples) {
        let s = Stats::of(s);
        let vs = match extra {
            Some(_) => format!("{:.0}×", common::ratio(ANCHOR, s.median)),
            None => "-".into(),
        };
        t.stats(label, &s, vec![common::fmt(s.max), vs]);
    }
    t.print();
}

// 2. Pipeline overhead.

/// The program of each agent of [`PIPELINE`]: it answers at once.
const ANSWER: &str = "cat >/dev/null; echo ok";

/// Five tasks: two shell tasks and three sends, each to its own exec agent.
const PIPELINE: &str = "\
name: pipe
agents:
  a: {command: [sh, -c, 'cat >/dev/null; echo ok']}
  b: {command: [sh, -c, 'cat >/dev/null; echo ok']}
  c: {command: [sh, -c, 'cat >/dev/null; echo ok']}
tasks:
  - shell: echo diff
    as: diff
  - send: 'review ${{ diff }}'
    to: a
    as: review
  - send: 'summarise ${{ review }}'
    to: b
    as: summary
  - send: 'changeset from ${{ summary }}'
    to: c
    as: changeset
  - shell: printf '%s\\n' \"${{ changeset }}\"
";

/// The programs of [`PIPELINE`] run one after the other, with no aw: the agents' own time.
fn pipeline_programs(dir: &Path) -> Duration {
    let t0 = Instant::now();
    let sh = Path::new("/bin/sh");
    for script in ["echo diff", ANSWER, ANSWER, ANSWER, "printf '%s\\n' ok"] {
        let mut c = command(sh, dir);
        c.args(["-c", script]).stdin(Stdio::piped());
        let mut child = c.spawn().expect("spawn sh");
        drop(child.stdin.take());
        let st = wait_bounded(&mut child, HANG).expect("sh hung");
        assert!(st.success());
    }
    t0.elapsed()
}

/// One run of [`PIPELINE`] in a fresh root; checks its output.
fn pipeline_once(dir: &Path, wf: &Path, extra: &[&str], round: usize) -> Duration {
    let root = dir.join(format!("pipe-{round}-{}", extra.len()));
    let mut c = command(&common::aw_run(), dir);
    c.arg("--root").arg(&root).args(extra).arg(wf);
    c.stdout(Stdio::piped()).stderr(Stdio::null());
    let t0 = Instant::now();
    let child = c.spawn().expect("spawn aw-run");
    let out = child.wait_with_output().expect("wait for aw-run");
    let d = t0.elapsed();
    assert!(out.status.success(), "{c:?}: {}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    std::fs::remove_dir_all(&root).expect("remove a scratch root");
    d
}

fn pipeline(dir: &Path, opts: &Opts) {
    let wf = dir.join("pipe.yaml");
    std::fs::write(&wf, PIPELINE).expect("write the workflow");
    let variants: [(&str, Option<&[&str]>); 2] = [
        ("the 5 programs alone, one after the other", None),
        ("aw-run pipe.yaml", Some(&[])),
    ];
    let samples = rotating(opts.reps(40), variants.len(), |v, r| match variants[v].1 {
        None => pipeline_programs(dir),
        Some(extra) => pipeline_once(dir, &wf, extra, r),
    });
    println!(
        "### 2. Pipeline overhead\n\nA 5-task pipeline (`shell`, three `send`s to three exec \
         agents that answer at once, `shell`), spawn → exit of `aw-run pipe.yaml`, its stdout \
         checked; against the same five programs started one after the other without aw (the \
         agents' own time). Overhead = median − median of the programs alone."
    );
    println!();
    let mut t = Table::new(&["what", "n", "median", "p99", "overhead"]);
    let base = Stats::of(&samples[0]).median;
    for ((label, extra), s) in variants.iter().zip(&samples) {
        let s = Stats::of(s);
        let over = match extra {
            Some(_) => common::fmt(s.median.saturating_sub(base)),
            None => "-".into(),
        };
        t.stats(label, &s, vec![over]);
    }
    t.print();
}

/// `n` samples of each of `variants` measured by `measure(variant, round)`, in rounds that
/// rotate the order; two rounds first (not counted) warm the page cache.
fn rotating(
    n: usize,
    variants: usize,
    mut measure: impl FnMut(usize, usize) -> Duration,
) -> Vec<Vec<Duration>> {
    let mut samples = vec![Vec::with_capacity(n); variants];
    for r in 0..n + 2 {
        for k in 0..variants {
            let v = (r + k) % variants;
            let d = measure(v, r);
            if r >= 2 {
                samples[v].push(d);
            }
        }
    }
    samples
}

/// Spawn → exit of one command, which must succeed.
fn spawn_exit(c: &mut Command) -> Duration {
    let t0 = Instant::now();
    let mut child = c.spawn().expect("spawn");
    let st = wait_bounded(&mut child, HANG).expect("the command hung");
    let d = t0.elapsed();
    assert!(st.success(), "{c:?}: {st}");
    d
}

/// One run of the hello workflow in a fresh root; checks what it wrote.
fn hello_once(dir: &Path, wf: &Path, extra: &[&str], round: usize) -> Duration {
    let root = dir.join(format!("e2e-{round}-{}", extra.len()));
    let mut c = command(&common::aw_run(), dir);
    c.arg("--root").arg(&root).args(extra).arg("-q").arg(wf);
    let d = spawn_exit(&mut c);
    let inst = Root::new(&root).instance("hello").expect("instance name");
    let entries = aw::channel::Channel::new(&inst)
        .read_all()
        .expect("read the channel")
        .entries;
    let senders: Vec<&str> = entries.iter().map(|e| e.from.as_str()).collect();
    assert_eq!(senders, HELLO_SENDERS, "channel of {}", root.display());
    assert!(
        entries[0].message.contains("(expected: 42)"),
        "kickoff: {}",
        entries[0].message
    );
    std::fs::remove_dir_all(&root).expect("remove a scratch root");
    d
}

// Serving with --keep.

/// An `aw-run --keep -q` child, killed if still running when dropped.
struct Server {
    child: Child,
    inst: Instance,
}

impl Server {
    /// Write `workflow` to `DIR/NAME.yaml` and serve it on instance NAME of root `DIR/NAME`;
    /// wait until its `agents` controllers are idle.
    fn start(dir: &Path, name: &str, workflow: &str, agents: usize) -> Server {
        let wf = dir.join(format!("{name}.yaml"));
        std::fs::write(&wf, workflow).expect("write the workflow");
        let root = dir.join(name);
        let mut c = command(&common::aw_run(), dir);
        c.arg("--root")
            .arg(&root)
            .args(["-i", name, "--keep", "-q", "--max-runs", "1000000000"])
            .arg(&wf);
        let inst = Root::new(&root).instance(name).expect("instance name");
        let mut s = Server {
            child: c.spawn().expect("spawn aw-run --keep"),
            inst,
        };
        let end = Instant::now() + HANG;
        loop {
            let list = serve::list(&s.inst);
            if list.len() == agents && list.iter().all(|a| a.state == ControllerState::Idle) {
                return s;
            }
            if let Some(st) = s.child.try_wait().expect("wait for aw-run") {
                panic!("aw-run --keep ended before serving: {st}");
            }
            assert!(Instant::now() < end, "aw-run --keep did not get ready");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What `_state/serve/AGENT.json` says now.
    fn served(&self, agent: &str) -> Option<Served> {
        let bytes = std::fs::read(serve::dir(&self.inst).join(format!("{agent}.json"))).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Wait until `agent` is idle again after its run number `run`.
    fn wait_idle_after(&self, agent: &str, run: u64) {
        let end = Instant::now() + HANG;
        loop {
            if let Some(s) = self.served(agent)
                && s.runs >= run
                && s.state == ControllerState::Idle
            {
                assert_eq!(s.runs, run, "{agent}: more runs than mentions");
                return;
            }
            assert!(Instant::now() < end, "{agent} did not finish run {run}");
            std::thread::sleep(Duration::from_micros(500));
        }
    }

    /// SIGTERM, as `aw-ctl stop` sends; the exit status.
    fn stop(&mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM).expect("send SIGTERM");
        wait_bounded(&mut self.child, Duration::from_secs(10))
            .expect("aw-run did not exit within 10 s of SIGTERM")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// "0", or what ended the process instead.
fn status(st: ExitStatus) -> String {
    match st.code() {
        Some(c) => c.to_string(),
        None => format!("{st}"),
    }
}

// 3. Wake latency.

fn wake(dir: &Path, opts: &Opts) {
    // A short path: socket addresses hold at most 107 bytes.
    let sock_dir = tempfile::tempdir().expect("temporary directory");
    let sock_path = sock_dir.path().join("stamp");
    let sock = UnixDatagram::bind(&sock_path).expect("bind the stamp socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("socket timeout");
    let exe = std::env::current_exe().expect("this program's path");
    let exe = exe.to_string_lossy();
    let sp = sock_path.to_string_lossy();
    let wf = format!(
        "name: wake\nagents:\n  echo:\n    command: [{}, {STAMP}, {}]\n    reply_fallback: false\n",
        yaml(&exe),
        yaml(&sp)
    );
    let n = opts.reps(200);
    let mut rng = Rng::new();
    let mut stale = 0;

    // The floor: the helper spawned by this program directly.
    let mut direct = Vec::with_capacity(n);
    for r in 0..n + 5 {
        std::thread::sleep(rng.below(Duration::from_millis(5)));
        let t0 = mono_ns();
        let mut child = command(Path::new(exe.as_ref()), dir)
            .args([STAMP, sp.as_ref()])
            .spawn()
            .expect("spawn the stamp helper");
        let t1 = recv_stamp(&sock);
        let st = wait_bounded(&mut child, HANG).expect("the stamp helper hung");
        assert!(st.success(), "stamp helper: {st}");
        if r >= 5 {
            direct.push(Duration::from_nanos(t1.saturating_sub(t0)));
        }
    }

    let mut server = Server::start(dir, "wake", &wf, 1);
    let inst = server.inst.clone();
    let root = inst.dir().parent().expect("root").to_path_buf();
    let mut runs = 0;
    let mut rounds = |trigger: &mut dyn FnMut() -> Option<Child>| {
        let mut out = Vec::with_capacity(n);
        for r in 0..n + 5 {
            std::thread::sleep(rng.below(Duration::from_millis(5)));
            let t0 = mono_ns();
            let child = trigger();
            let t1 = recv_stamp(&sock);
            if let Some(mut c) = child {
                let st = wait_bounded(&mut c, HANG).expect("aw-send hung");
                assert!(st.success(), "aw-send: {st}");
            }
            runs += 1;
            server.wait_idle_after("echo", runs);
            stale += drain(&sock);
            // The first rounds (not counted) warm the page cache.
            if r >= 5 {
                out.push(Duration::from_nanos(t1.saturating_sub(t0)));
            }
        }
        out
    };
    let in_process = rounds(&mut || {
        post::post(&inst, "user", "@echo ping", &PostOptions::default()).expect("post");
        None
    });
    let spawned = rounds(&mut || {
        let mut c = command(&common::aw_send(), dir);
        c.arg("--root")
            .arg(&root)
            .args(["-i", "wake", "@echo ping"]);
        Some(c.spawn().expect("spawn aw-send"))
    });
    let st = server.stop();

    println!(
        "### 3. Wake latency\n\nOne `aw-run --keep -q` serving one exec agent whose command is \
         this benchmark program in its stamping mode: a dynamically linked Rust program that \
         sends CLOCK_MONOTONIC, read first thing in `main`, over a Unix datagram socket and \
         exits. Measured: from just before the mention is posted (or `aw-send` spawned) to that \
         time, so each figure includes exec and start-up of the backend, as the first row shows \
         alone. Each round waits for the run to end (`_state/serve/echo.json` idle) and pauses \
         0–5 ms; 5 rounds first are not counted."
    );
    println!();
    latencies(
        "path",
        &[
            (
                "floor: this program spawns the backend → its main() runs",
                &direct,
            ),
            (
                "in-process aw::post::post → backend's main() runs",
                &in_process,
            ),
            ("aw-send spawned → backend's main() runs", &spawned),
        ],
        st,
    );
    if stale > 0 {
        println!("warning: {stale} stamp(s) arrived that no round asked for (retried runs?)");
    }
    println!();
}

// 4. spawn_agent.

/// `spawn_agent` with a running `aw-run`: from the call to the worker's backend running.
fn spawn(dir: &Path, opts: &Opts) {
    let sock_dir = tempfile::tempdir().expect("temporary directory");
    let sock_path = sock_dir.path().join("stamp");
    let sock = UnixDatagram::bind(&sock_path).expect("bind the stamp socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("socket timeout");
    let exe = std::env::current_exe().expect("this program's path");
    // The lead is never mentioned; its workers run its program, the stamping backend.
    let wf = format!(
        "name: spawn\nagents:\n  lead:\n    command: [{}, {STAMP}, {}]\n    collab: true\n",
        yaml(&exe.to_string_lossy()),
        yaml(&sock_path.to_string_lossy())
    );
    let mut server = Server::start(dir, "spawn", &wf, 1);
    let inst = server.inst.clone();
    let limits = aw::registry::Collab::default();
    let n = opts.reps(100);
    let mut rng = Rng::new();
    let (mut first_run, mut call) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for r in 0..n + 5 {
        std::thread::sleep(rng.below(Duration::from_millis(5)));
        let t0 = mono_ns();
        let req = aw::collab::SpawnRequest {
            prompt: "go".into(),
            ..Default::default()
        };
        let w = aw::collab::spawn(&inst, "lead", limits, req).expect("spawn_agent");
        let t1 = mono_ns();
        let stamp = recv_stamp(&sock);
        assert_eq!(
            w.served_by,
            Some(server.pid()),
            "taken by the running aw-run"
        );
        aw::collab::close(&inst, "lead", &w.name).expect("close_agent");
        if r >= 5 {
            first_run.push(Duration::from_nanos(stamp.saturating_sub(t0)));
            call.push(Duration::from_nanos(t1.saturating_sub(t0)));
        }
    }
    let st = server.stop();
    println!(
        "### 4. spawn_agent\n\nOne `aw-run --keep -q` serving a lead with `collab: true` \
         (an exec agent whose program is the stamping backend). Each round calls \
         `aw::collab::spawn` in process (what the `spawn_agent` tool runs): the worker is \
         registered, its prompt posted, and the running aw-run takes it and runs it (a copy of \
         the lead's program, so its `main` sends the time). Then `close_agent`. Measured from \
         just before the call; 5 rounds first are not counted."
    );
    println!();
    latencies(
        "what",
        &[
            (
                "spawn_agent call → worker's backend main() runs",
                &first_run,
            ),
            ("spawn_agent call returns (the worker is served)", &call),
        ],
        st,
    );
    println!();
}

/// A table of latency samples (median, p99, max), then how SIGTERM ended the server.
fn latencies(first: &str, rows: &[(&str, &Vec<Duration>)], st: ExitStatus) {
    let mut t = Table::new(&[first, "n", "median", "p99", "max"]);
    for (label, sample) in rows {
        let s = Stats::of(sample);
        t.stats(label, &s, vec![common::fmt(s.max)]);
    }
    t.print();
    println!("SIGTERM → aw-run exit status {}", status(st));
}

fn recv_stamp(sock: &UnixDatagram) -> u64 {
    let mut buf = [0u8; 8];
    let n = sock
        .recv(&mut buf)
        .expect("no stamp from the backend within 10 s");
    assert_eq!(n, 8, "short stamp");
    u64::from_le_bytes(buf)
}

/// Read and count the stamps that are waiting.
fn drain(sock: &UnixDatagram) -> usize {
    sock.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 8];
    let mut n = 0;
    while sock.recv(&mut buf).is_ok() {
        n += 1;
    }
    sock.set_nonblocking(false).expect("blocking");
    n
}

// 5. Idle cost.

/// A workflow of mock agents `PREFIX01`…, without a kickoff.
fn mock_team(name: &str, prefix: &str, agents: usize) -> (String, Vec<String>) {
    let names: Vec<String> = (1..=agents).map(|i| format!("{prefix}{i:02}")).collect();
    let mut wf = format!("name: {name}\nagents:\n");
    for a in &names {
        wf.push_str(&format!("  {a}:\n    mock: {{}}\n"));
    }
    (wf, names)
}

/// Processor use of a process, all its threads.
struct Cpu {
    /// utime + stime from /proc/PID/stat, in clock ticks.
    ticks: u64,
    /// Time on a processor from /proc/PID/task/*/schedstat, in ns (`None` without schedstat).
    sched_ns: Option<u64>,
    /// Voluntary and involuntary context switches of all threads.
    switches: u64,
    threads: usize,
}

fn cpu(pid: u32) -> Cpu {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command name, which ends with the last ')': state is field 3.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> u64 { f[n - 3].parse().expect("a number in /proc/PID/stat") };
    let mut sched_ns = Some(0u64);
    let mut switches = 0;
    let mut threads = 0;
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).expect("read /proc/PID/task") {
        let task = e.expect("a task").path();
        threads += 1;
        let ns = std::fs::read_to_string(task.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
        sched_ns = sched_ns.zip(ns).map(|(a, b)| a + b);
        let status = std::fs::read_to_string(task.join("status")).unwrap_or_default();
        for l in status.lines() {
            if let Some(v) = l
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                switches += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Cpu {
        ticks: field(14) + field(15),
        sched_ns,
        switches,
        threads,
    }
}

/// A line of /proc/PID/status, such as `VmRSS`.
fn proc_status(pid: u32, key: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map_or_else(|| "n/a".into(), |v| v.trim().to_string())
}

fn idle(dir: &Path, opts: &Opts) {
    let window = Duration::from_secs(if opts.quick { 2 } else { 10 });
    let (wf, _) = mock_team("idle", "idle", 10);
    let t0 = Instant::now();
    let mut server = Server::start(dir, "idle", &wf, 10);
    let ready = t0.elapsed();
    let pid = server.pid();
    let a = cpu(pid);
    std::thread::sleep(window);
    let b = cpu(pid);
    let rss = proc_status(pid, "VmRSS");
    let hwm = proc_status(pid, "VmHWM");
    let st = server.stop();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }.max(1) as u64;

    println!(
        "### 5. Idle cost\n\n`aw-run --keep -q` with 10 mock agents and nothing to do, measured \
         from the moment every `_state/serve/*.json` says idle, over {} s.",
        window.as_secs()
    );
    println!();
    let mut t = Table::new(&["what", "value"]);
    t.row(vec![
        "spawn → all 10 controllers idle".into(),
        common::fmt(ready),
    ]);
    t.row(vec![
        format!(
            "processor time while idle, utime+stime (ticks of {} ms)",
            1000 / hz
        ),
        format!("{} ms", (b.ticks - a.ticks) * 1000 / hz),
    ]);
    t.row(vec![
        "processor time while idle, schedstat (all threads)".into(),
        match (a.sched_ns, b.sched_ns) {
            (Some(x), Some(y)) => common::fmt(Duration::from_nanos(y.saturating_sub(x))),
            _ => "n/a".into(),
        },
    ]);
    t.row(vec![
        "context switches while idle (all threads)".into(),
        b.switches.saturating_sub(a.switches).to_string(),
    ]);
    t.row(vec!["threads".into(), b.threads.to_string()]);
    t.row(vec!["VmRSS (VmHWM)".into(), format!("{rss} ({hwm})")]);
    t.row(vec!["SIGTERM → exit status".into(), status(st)]);
    t.print();
}

// 6. Throughput.

const AGENTS: usize = 20;
const PER_AGENT: usize = 100;

/// `false` when a mention was not handled exactly once, or aw-run did not exit 0.
fn throughput(dir: &Path) -> bool {
    let (wf, names) = mock_team("busy", "busy", AGENTS);
    let mut server = Server::start(dir, "busy", &wf, AGENTS);
    let inst = server.inst.clone();
    let mut sent: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let t0 = Instant::now();
    for i in 0..PER_AGENT {
        for a in &names {
            let text = format!("@{a} task {i}");
            let p = post::post(&inst, "user", &text, &PostOptions::default()).expect("post");
            sent.entry(a).or_default().push(p.entry.id);
        }
    }
    let posted = t0.elapsed();
    let mut pending: Vec<&str> = names.iter().map(String::as_str).collect();
    let end = Instant::now() + HANG;
    while !pending.is_empty() {
        pending.retain(|a| !aw::inbox::unread(&inst, a).expect("inbox").0.is_empty());
        if pending.is_empty() {
            break;
        }
        assert!(
            Instant::now() < end,
            "inboxes still not empty after {} s: {pending:?}",
            HANG.as_secs()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let done = t0.elapsed();
    let st = server.stop();

    // Every mention handled exactly once: the ok transcripts' inbox ids, per agent.
    let mut problems = Vec::new();
    let mut runs = 0;
    let mut failed = 0;
    for a in &names {
        let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
        let tdir = aw::transcript::transcript_dir(&inst, a);
        for e in std::fs::read_dir(&tdir).expect("transcript directory") {
            let p: PathBuf = e.expect("a transcript").path();
            let t: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&p).expect("read a transcript"))
                    .expect("a transcript is JSON");
            if t["status"] != "ok" {
                failed += 1;
                continue;
            }
            runs += 1;
            for id in t["inbox"].as_array().expect("inbox ids") {
                *seen.entry(id.as_u64().expect("an id")).or_default() += 1;
            }
        }
        let want = &sent[a.as_str()];
        let missing = want.iter().filter(|id| !seen.contains_key(id)).count();
        let twice = seen.values().filter(|&&c| c > 1).count();
        let foreign = seen.keys().filter(|id| !want.contains(id)).count();
        if missing + twice + foreign > 0 {
            problems.push(format!(
                "{a}: {missing} missing, {twice} handled more than once, {foreign} not its own"
            ));
        }
    }
    let once = problems.is_empty();
    let total = AGENTS * PER_AGENT;

    println!(
        "### 6. Throughput\n\n{AGENTS} mock agents served by one `aw-run --keep -q`; the \
         benchmark posts {total} mentions ({PER_AGENT} per agent, round robin) with \
         `aw::post::post` as fast as it can, then checks every agent's inbox every 5 ms \
         (`aw::inbox::unread`) until all are empty; then SIGTERM. Handled once: the inbox ids \
         of each agent's transcripts (status ok) cover each of its mentions exactly once."
    );
    println!();
    let mut t = Table::new(&["what", "value"]);
    t.row(vec![
        "mentions".into(),
        format!("{total} ({AGENTS} agents × {PER_AGENT})"),
    ]);
    t.row(vec![
        "posting them (in-process)".into(),
        format!(
            "{} ({:.0} posts/s)",
            common::fmt(posted),
            total as f64 / posted.as_secs_f64()
        ),
    ]);
    t.row(vec![
        "first post → every inbox empty".into(),
        common::fmt(done),
    ]);
    t.row(vec![
        "mentions handled per second".into(),
        format!("**{:.0}**", total as f64 / done.as_secs_f64()),
    ]);
    t.row(vec![
        "runs (ok transcripts)".into(),
        format!(
            "{runs} ({:.1} mentions per run){}",
            total as f64 / runs.max(1) as f64,
            if failed > 0 {
                format!(", {failed} failed attempts")
            } else {
                String::new()
            }
        ),
    ]);
    t.row(vec![
        "handled once".into(),
        if once { "yes" } else { "no" }.into(),
    ]);
    t.row(vec!["SIGTERM → exit status".into(), status(st)]);
    t.print();
    for p in &problems {
        eprintln!("run: {p}");
    }
    if st.code() != Some(0) {
        eprintln!(
            "run: aw-run --keep exited with {} after SIGTERM",
            status(st)
        );
    }
    once && st.code() == Some(0)
}
