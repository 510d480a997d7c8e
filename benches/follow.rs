//! Figure 3: wake latency of `aw-peek --follow --json`, from an append to the entry's line
//! arriving on the follower's stdout: end to end with an `aw-send` process, in-process through
//! the library (the wake-up alone), and with the polling fallback `--poll 0.05`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aw::channel::{Channel, Entry};
use aw::instance::{Instance, Root};
use aw::registry::{self, Agent};
use common::{Opts, Rng, Stats, Table};

const MSG: &str = "@bob the build is green again, please take the next task";

fn main() {
    let opts = Opts::from_args();
    common::heading("aw-peek --follow wake latency", &opts);
    let dir = common::scratch("follow-");
    let inst = setup(dir.path());
    let ch = Channel::new(&inst);
    let mut rng = Rng::new();
    let n = opts.reps(500);

    let mut rows = Vec::new();
    {
        let mut f = Follower::start(&inst, None);
        let in_process = rounds(&mut f, &ch, n, Duration::from_millis(5), &mut rng, |_| {
            (append(&ch), None)
        });
        let e2e = rounds(&mut f, &ch, n, Duration::from_millis(5), &mut rng, |id| {
            (id, Some(send(&inst)))
        });
        rows.push(("inotify, in-process append → line read", in_process));
        rows.push(("inotify, aw-send spawned → line read", e2e));
    }
    {
        let mut f = Follower::start(&inst, Some("0.05"));
        let polled = rounds(&mut f, &ch, n, Duration::from_millis(50), &mut rng, |_| {
            (append(&ch), None)
        });
        rows.push(("--poll 0.05, in-process append → line read", polled));
    }

    println!(
        "One follower; each round appends one entry after a random pause (0–5 ms, 0–50 ms when \
         polling) and times until its JSON line is read from the follower's stdout."
    );
    println!();
    let mut t = Table::new(&["path", "n", "median", "p99", "max"]);
    for (label, sample) in &rows {
        let s = Stats::of(sample);
        t.stats(label, &s, vec![common::fmt(s.max)]);
    }
    t.print();
}

fn setup(root: &std::path::Path) -> Instance {
    let inst = Root::new(root).instance("bench").expect("instance name");
    inst.create().expect("create instance");
    for name in ["alice", "bob"] {
        let agent = Agent {
            name: name.into(),
            backend: "external".into(),
            created: aw::time::now(),
            ..Default::default()
        };
        registry::register(&inst, agent, false).expect("register agent");
    }
    inst
}

/// Append in-process; the new entry's id.
fn append(ch: &Channel) -> u64 {
    ch.append("alice", MSG, vec!["bob".into()], false)
        .expect("append")
        .0
        .id
}

/// Start one `aw-send` (the round waits for the line, then reaps the process).
fn send(inst: &Instance) -> Child {
    Command::new(common::aw_send())
        .arg("--root")
        .arg(inst.dir().parent().expect("root"))
        .args(["-i", "bench", "--from", "alice", MSG])
        .env_remove("AW_ROOT")
        .env_remove("AW_INSTANCE")
        .env_remove("AW_AGENT")
        .env_remove("AW_SYNC")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn aw-send")
}

/// An `aw-peek --follow --json` child, with a watchdog that kills it when no line comes for
/// a long time (so a lost wake-up ends the run with an error instead of hanging).
struct Follower {
    child: Child,
    out: BufReader<ChildStdout>,
    progress: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
}

impl Follower {
    fn start(inst: &Instance, poll: Option<&str>) -> Follower {
        let mut c = Command::new(common::aw_peek());
        c.arg("--root")
            .arg(inst.dir().parent().expect("root"))
            .args(["-i", "bench", "--follow", "--json"])
            .env_remove("AW_ROOT")
            .env_remove("AW_INSTANCE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        if let Some(p) = poll {
            c.args(["--poll", p]);
        }
        let mut child = c.spawn().expect("spawn aw-peek --follow");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let progress = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let (p, d) = (progress.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen = u64::MAX;
            loop {
                std::thread::sleep(Duration::from_secs(10));
                if d.load(Ordering::Relaxed) {
                    return;
                }
                let now = p.load(Ordering::Relaxed);
                if now == seen {
                    eprintln!("follow: no line from aw-peek --follow for 10 s; killing it");
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGKILL);
                    return;
                }
                seen = now;
            }
        });
        Follower {
            child,
            out,
            progress,
            done,
        }
    }

    /// The next entry printed.
    fn next(&mut self) -> Entry {
        let mut line = String::new();
        let n = self.out.read_line(&mut line).expect("read follower");
        assert!(n > 0, "aw-peek --follow ended");
        self.progress.fetch_add(1, Ordering::Relaxed);
        serde_json::from_str(&line).expect("a JSON entry")
    }

    /// Read entries until the one with `id`.
    fn until(&mut self, id: u64) {
        loop {
            let e = self.next();
            if e.id >= id {
                assert_eq!(e.id, id, "entry {id} was skipped");
                return;
            }
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` rounds after a warm-up: pause (random, below `gap`), then t0, `append(next id)`, read
/// lines until that entry's, t1. `append` returns the id it wrote, and the process that
/// writes it when it runs one (reaped after the round).
fn rounds(
    f: &mut Follower,
    ch: &Channel,
    n: usize,
    gap: Duration,
    rng: &mut Rng,
    mut append: impl FnMut(u64) -> (u64, Option<Child>),
) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for r in 0..n + 10 {
        std::thread::sleep(rng.below(gap));
        let next = ch.last_id().expect("last id") + 1;
        let t0 = Instant::now();
        let (id, child) = append(next);
        f.until(id);
        let d = t0.elapsed();
        if let Some(mut c) = child {
            let st = c.wait().expect("wait aw-send");
            assert!(st.success(), "aw-send failed: {st}");
        }
        // The first rounds (not counted) also wait for the follower to start watching.
        if r >= 10 {
            out.push(d);
        }
    }
    out
}
