//! Several hosts on a real GlusterFS volume (two FUSE mounts on this machine, "host B" in
//! its own pid and UTS namespace; the harness of tests/store/netfs.rs): cross-host wake latency
//! of `aw-peek --follow` with default and tuned volume options, cross-host send
//! throughput, and the idle CPU of `aw-run --keep` with 10 and 100 agents (polling).
//! Needs root and GlusterFS (`sh scripts/test-deps.sh`).

mod common;

#[path = "../tests/common/gluster.rs"]
#[allow(dead_code)]
mod gluster;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use common::{Opts, Rng, Stats, Table};
use gluster::Volume;

const INST: &str = "w";

fn main() {
    let opts = Opts::from_args();
    common::heading("several hosts on GlusterFS", &opts);
    let mut rng = Rng::new();
    let n = opts.reps(200);

    let mut t = Table::new(&[
        "cross-host wake (aw-send on A → aw-peek --follow on B)",
        "n",
        "median",
        "p99",
        "max",
    ]);
    for (label, options) in [
        ("default volume options", &[][..]),
        (
            "md-cache off (performance.stat-prefetch off)",
            &[("performance.stat-prefetch", "off")][..],
        ),
        (
            "md-cache and quick-read off",
            &[
                ("performance.stat-prefetch", "off"),
                ("performance.quick-read", "off"),
            ][..],
        ),
    ] {
        let vol = Volume::new();
        for (k, v) in options {
            vol.set(k, v);
        }
        let sample = wake(&vol, n, &mut rng, Duration::ZERO);
        let s = Stats::of(&sample);
        t.stats(label, &s, vec![common::fmt(s.max)]);
    }
    let vol = Volume::new();
    let sample = wake(&vol, n.div_ceil(4), &mut rng, Duration::from_millis(1500));
    let s = Stats::of(&sample);
    t.stats(
        "default volume options, after 1.5–1.7 s of quiet",
        &s,
        vec![common::fmt(s.max)],
    );
    println!(
        "Each round sends one entry from host A after a random pause (0–200 ms, or 1.5 s plus \
         that where said) and times from the aw-send process's exit to the entry's JSON line \
         on host B's follower."
    );
    println!();
    t.print();
    println!();

    let vol = Volume::new();
    let sends = opts.reps(200);
    let (elapsed, total) = throughput(&vol, 4, sends);
    let mut t = Table::new(&[
        "cross-host sends",
        "writers",
        "entries",
        "elapsed",
        "per second",
    ]);
    t.row(vec![
        "2 hosts, one aw-send process per entry".into(),
        "2 x 4".into(),
        total.to_string(),
        common::fmt(elapsed),
        format!("{:.0}", total as f64 / elapsed.as_secs_f64()),
    ]);
    t.print();
    println!();

    let mut t = Table::new(&[
        "aw-run --keep",
        "agents",
        "CPU per 5 s, idle",
        "CPU in the 5 s after an entry",
    ]);
    let local = common::scratch("netfs-");
    for agents in [10, 100] {
        let (idle, after) = idle_cpu(vol.a(), agents);
        t.row(vec![
            "GlusterFS (inotify + polling)".into(),
            agents.to_string(),
            common::fmt(idle),
            common::fmt(after),
        ]);
        let (idle, after) = idle_cpu(local.path(), agents);
        t.row(vec![
            format!("local disk ({})", common::fs_type(local.path())),
            agents.to_string(),
            common::fmt(idle),
            common::fmt(after),
        ]);
    }
    println!(
        "Idle: 5 s from 3 s after the last agent is served (past the fast polling that follows \
         a change). After an entry: the 5 s from an entry that mentions no agent, sent on the \
         same mount."
    );
    println!();
    t.print();
}

fn aw(root: &Path, on_b: bool, program: &Path) -> Command {
    let mut c = if on_b {
        Volume::on_b(program)
    } else {
        Command::new(program)
    };
    for v in ["AW_ROOT", "AW_INSTANCE", "AW_AGENT", "AW_SYNC", "AW_POLL"] {
        c.env_remove(v);
    }
    c.arg("--root").arg(root).args(["-i", INST]);
    c
}

fn send(root: &Path, text: &str) {
    let st = aw(root, false, &common::aw_send())
        .args(["--from", "alice", text])
        .stdout(Stdio::null())
        .status()
        .expect("aw-send");
    assert!(st.success(), "aw-send failed");
}

fn lines(child: &mut Child) -> Receiver<(Instant, String)> {
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    rx
}

/// `n` cross-host wakes, each entry sent after a pause of `quiet` plus up to 200 ms.
fn wake(vol: &Volume, n: usize, rng: &mut Rng, quiet: Duration) -> Vec<Duration> {
    send(vol.a(), "start");
    let mut follow = aw(vol.b(), true, &common::aw_peek())
        .args(["--follow", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("aw-peek --follow");
    let rx = lines(&mut follow);
    rx.recv_timeout(Duration::from_secs(30))
        .expect("first line");
    let mut sample = Vec::with_capacity(n);
    for i in 0..n {
        std::thread::sleep(quiet + rng.below(Duration::from_millis(200)));
        send(vol.a(), &format!("round {i}"));
        let sent = Instant::now();
        let (at, line) = rx.recv_timeout(Duration::from_secs(30)).expect("a wake");
        assert!(line.contains(&format!("round {i}")), "{line}");
        sample.push(at.saturating_duration_since(sent));
    }
    let _ = follow.kill();
    let _ = follow.wait();
    sample
}

fn throughput(vol: &Volume, writers: usize, sends: usize) -> (Duration, usize) {
    let script = format!(
        "for i in $(seq 1 {sends}); do \"$2\" --root \"$0\" -i {INST} --from \"$1\" \"$1 $i\" \
         >/dev/null || exit 1; done"
    );
    let start = Instant::now();
    let mut children = Vec::new();
    for (b, root) in [(false, vol.a()), (true, vol.b())] {
        for w in 0..writers {
            let mut c = if b {
                Volume::on_b(Path::new("sh"))
            } else {
                Command::new("sh")
            };
            c.args(["-c", &script])
                .arg(root)
                .arg(format!("w{b}{w}"))
                .arg(common::aw_send());
            children.push(c.spawn().expect("writer"));
        }
    }
    for mut c in children {
        assert!(c.wait().expect("writer").success(), "a writer failed");
    }
    (start.elapsed(), 2 * writers * sends)
}

/// CPU time (all threads) of process `pid`, from /proc/PID/task/*/schedstat.
fn cpu(pid: u32) -> Duration {
    let mut ns = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .flatten()
    {
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

/// The CPU time of an `aw-run --keep` of `agents` agents on `root` during 5 idle seconds,
/// and during the 5 s that follow an entry which mentions none of them.
fn idle_cpu(root: &Path, agents: usize) -> (Duration, Duration) {
    let dir = common::scratch("netfs-wf-");
    let mut wf = String::from("agents:\n");
    for a in 0..agents {
        wf.push_str(&format!(
            "  a{a}:\n    command: [sh, -c, 'cat >/dev/null']\n"
        ));
    }
    let file = dir.path().join("wf.yaml");
    std::fs::write(&file, wf).expect("workflow");
    let inst = format!("idle{agents}");
    let mut c = Command::new(common::aw_run());
    c.env_remove("AW_POLL")
        .arg("--root")
        .arg(root)
        .args(["-i", &inst, "--keep", "-q"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().expect("aw-run --keep");
    let last = root
        .join(&inst)
        .join(format!("_state/serve/a{}.json", agents - 1));
    let end = Instant::now() + Duration::from_secs(60);
    while !last.exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    let before = cpu(child.id());
    std::thread::sleep(Duration::from_secs(5));
    let idle = cpu(child.id()) - before;
    let before = cpu(child.id());
    let st = Command::new(common::aw_send())
        .env_remove("AW_POLL")
        .arg("--root")
        .arg(root)
        .args(["-i", &inst, "--from", "alice", "nobody in particular"])
        .stdout(Stdio::null())
        .status()
        .expect("aw-send");
    assert!(st.success(), "aw-send failed");
    std::thread::sleep(Duration::from_secs(5));
    let after = cpu(child.id()) - before;
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    (idle, after)
}
