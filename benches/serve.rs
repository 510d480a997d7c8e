//! Claiming agents (`aw::serve::take`): the time to claim N agents of a fresh instance, to
//! claim them again over claims left by a server that died, and to let them go, beside what
//! an earlier version did (one lock file per agent, open and locked for the server's life);
//! the descriptors the process has open while it serves them; and `aw-run --keep` of N mock
//! agents as a process (descriptors and threads once every agent is served).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aw::instance::{Instance, Root};
use aw::serve;
use common::{Opts, Stats, Table};

/// A bound that only stops a hung benchmark.
const HANG: Duration = Duration::from_secs(120);

fn main() {
    let opts = Opts::from_args();
    common::heading("serving many agents", &opts);
    let dir = common::scratch("serve-");
    claims(dir.path(), &opts);
    servers(dir.path(), &opts);
}

fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("a{i}")).collect()
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A fresh instance `name` under `dir`.
fn instance(dir: &Path, name: &str) -> Instance {
    let inst = Root::new(dir).instance(name).expect("instance");
    inst.create().expect("create instance");
    inst
}

/// What an earlier version did to serve `agents` in `inst`: each agent's lock file opened
/// (created when new), locked for the server's life and written its pid, host and host id.
fn lock_per_agent(inst: &Instance, agents: &[&str]) -> Vec<std::fs::File> {
    use std::io::Write;
    let d = serve::dir(inst);
    std::fs::create_dir_all(&d).expect("serve dir");
    let text = format!("{}\nhost\n0000000000000000\n", std::process::id());
    agents
        .iter()
        .map(|a| {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(d.join(format!("{a}.lock")))
                .expect("open lock");
            f.try_lock().expect("lock");
            f.set_len(0).expect("truncate");
            f.write_all(text.as_bytes()).expect("write");
            f
        })
        .collect()
}

fn claims(dir: &Path, opts: &Opts) {
    // The earlier version's way holds one descriptor per agent.
    aw::process::open_files_for(10_000);
    let mut t = Table::new(&[
        "claims (in process)",
        "n",
        "median",
        "p99",
        "descriptors while held",
    ]);
    for n in [10, 1_000, 10_000] {
        let reps = opts.reps(if n == 10_000 { 20 } else { 50 }).max(3);
        let agents = names(n);
        let refs: Vec<&str> = agents.iter().map(String::as_str).collect();
        let (mut fresh, mut stale, mut release) = (Vec::new(), Vec::new(), Vec::new());
        let mut before = Vec::new();
        let mut fds_before = 0;
        let mut fds = 0;
        for r in 0..reps {
            let inst = instance(dir, &format!("c{n}-{r}"));
            let t0 = Instant::now();
            let held = serve::take(&inst, &refs).expect("take");
            fresh.push(t0.elapsed());
            fds = open_descriptors(std::process::id());
            let t0 = Instant::now();
            drop(held);
            release.push(t0.elapsed());
            // Claims that name a server that died: each names a server file nobody holds.
            let serve_dir = serve::dir(&inst);
            let dead = "0000000000000000.1.1.server";
            std::fs::write(serve_dir.join(dead), "1\n").expect("dead server");
            for a in &agents {
                std::fs::write(
                    serve_dir.join(format!("{a}.lock")),
                    format!("1\nelsewhere\n0000000000000000\n{dead}\n"),
                )
                .expect("stale claim");
            }
            let t0 = Instant::now();
            let held = serve::take(&inst, &refs).expect("take over stale claims");
            stale.push(t0.elapsed());
            drop(held);
            std::fs::remove_dir_all(inst.dir()).expect("remove instance");
            let inst = instance(dir, &format!("b{n}-{r}"));
            let t0 = Instant::now();
            let held = lock_per_agent(&inst, &refs);
            before.push(t0.elapsed());
            fds_before = open_descriptors(std::process::id());
            drop(held);
            std::fs::remove_dir_all(inst.dir()).expect("remove instance");
        }
        t.stats(
            &format!("{n} agents, fresh instance"),
            &Stats::of(&fresh),
            vec![fds.to_string()],
        );
        t.stats(
            &format!("{n} agents, over a dead server's claims"),
            &Stats::of(&stale),
            vec![String::new()],
        );
        t.stats(
            &format!("{n} agents, a lock per agent (earlier version), fresh instance"),
            &Stats::of(&before),
            vec![fds_before.to_string()],
        );
        t.stats(
            &format!("{n} agents, let go"),
            &Stats::of(&release),
            vec![String::new()],
        );
    }
    t.print();
    println!(
        "A claim is open, flock, read, write in place, close: no descriptor stays open per \
         agent. \"Over a dead server's claims\" also finds that server's file free once \
         (and the new server first sweeps it away).\n"
    );
}

fn servers(dir: &Path, opts: &Opts) {
    let mut t = Table::new(&[
        "aw-run --keep, N mock agents",
        "n",
        "median ready",
        "p99",
        "descriptors",
        "threads",
    ]);
    for n in [10, 100, 1_000] {
        let reps = opts.reps(if n == 1_000 { 5 } else { 10 }).max(2);
        let wf = dir.join(format!("wf{n}.yaml"));
        let mut text = String::from("agents:\n");
        for a in names(n) {
            text.push_str(&format!("  {a}:\n    backend: mock\n"));
        }
        std::fs::write(&wf, text).expect("workflow");
        let mut ready = Vec::new();
        let (mut fds, mut threads) = (0, 0);
        for r in 0..reps {
            let root = dir.join(format!("k{n}-{r}"));
            let t0 = Instant::now();
            let mut child = Command::new(common::aw_run())
                .arg("--root")
                .arg(&root)
                .args(["-i", "w", "--keep", "-q"])
                .arg(&wf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn aw-run");
            let inst = Root::new(&root).instance("w").expect("instance");
            while serve::list(&inst).len() < n {
                assert!(t0.elapsed() < HANG, "aw-run of {n} agents never got ready");
                std::thread::sleep(Duration::from_millis(2));
            }
            ready.push(t0.elapsed());
            // Once settled: the fewest over a few looks.
            std::thread::sleep(Duration::from_millis(200));
            fds = (0..10)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(10));
                    open_descriptors(child.id())
                })
                .min()
                .unwrap_or(0);
            threads =
                std::fs::read_dir(format!("/proc/{}/task", child.id())).map_or(0, |d| d.count());
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&root);
        }
        t.stats(
            &format!("{n} agents"),
            &Stats::of(&ready),
            vec![fds.to_string(), threads.to_string()],
        );
    }
    t.print();
    println!(
        "Ready: from spawn until `aw::serve::list` shows every agent served. Descriptors and \
         threads of the server once ready (threads: one controller per agent, for now).\n"
    );
}
