//! Figure 1: the cost of one `aw-send`, as a ratio to spawning `/bin/true`; with `AW_SYNC=1`;
//! the throughput of 8 concurrent senders; the throughput of one `aw-send --lines`, and the
//! time from a line written into its open pipe to a follower printing the entry.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use aw::channel::Channel;
use aw::instance::{Instance, Root};
use aw::post::{self, PostOptions};
use common::{Opts, Rng, Stats, Table, fmt, ratio, time};

const TRUE: &str = "/bin/true";
const SENDERS: usize = 8;
/// Runs of `aw-send --lines` timed.
const LINE_RUNS: usize = 5;

fn main() {
    let opts = Opts::from_args();
    common::heading("aw-send per call", &opts);
    let dir = common::scratch("send-");
    let inst = setup(dir.path());

    let n = opts.reps(2000);
    let n_sync = opts.reps(500);
    let per_sender = opts.reps(250);

    let plain = send_cmd(dir.path(), false);
    let synced = send_cmd(dir.path(), true);
    let mut truth = Command::new(TRUE);
    quiet(&mut truth);

    // Warm up the page cache and the binaries.
    for _ in 0..opts.reps(100) {
        run(&mut truth);
        run(&mut plain.clone_cmd());
    }

    let mut version = Command::new(common::aw_send());
    version.arg("--version");
    quiet(&mut version);
    let [t_plain, s_plain, v_plain] = rotate([&mut truth, &mut plain.clone_cmd(), &mut version], n);
    let [t_sync, s_sync] = rotate([&mut truth, &mut synced.clone_cmd()], n_sync);
    let inproc = in_process(&inst, n, false);
    let inproc_sync = in_process(&inst, n_sync, true);

    let (st, ss, sv) = (
        Stats::of(&t_plain),
        Stats::of(&s_plain),
        Stats::of(&v_plain),
    );
    let (sst, sss) = (Stats::of(&t_sync), Stats::of(&s_sync));
    let r_plain = ratio(ss.median, st.median);
    let r_sync = ratio(sss.median, sst.median);

    println!(
        "Each round spawns every command of its group once, in a rotating order, and waits for it; \
         time from spawn to exit."
    );
    println!();
    let mut t = Table::new(&["what", "n", "median", "p99", "median ÷ /bin/true"]);
    t.stats(TRUE, &st, vec!["1.00".into()]);
    t.stats("aw-send", &ss, vec![format!("{r_plain:.2}")]);
    t.stats(
        "aw-send --version (start-up only)",
        &sv,
        vec![format!("{:.2}", ratio(sv.median, st.median))],
    );
    t.stats(
        &format!("{TRUE} (paired with AW_SYNC=1)"),
        &sst,
        vec!["1.00".into()],
    );
    t.stats("aw-send, AW_SYNC=1", &sss, vec![format!("{r_sync:.2}")]);
    t.stats("post() in-process", &Stats::of(&inproc), vec!["-".into()]);
    t.stats(
        "post() in-process, sync",
        &Stats::of(&inproc_sync),
        vec!["-".into()],
    );
    t.print();
    println!(
        "target: aw-send ≤ 1.5× /bin/true: {} ({r_plain:.2}×); with AW_SYNC=1: {r_sync:.2}×",
        if r_plain <= 1.5 { "met" } else { "MISSED" }
    );
    println!();

    // Concurrent senders: SENDERS threads each spawn `per_sender` processes one after the other.
    let before = Channel::new(&inst).last_id().expect("last id");
    let (w_true, c_true) = concurrent(truth_cmd, per_sender);
    let (w_send, c_send) = concurrent(|| plain.clone_cmd(), per_sender);
    let total = SENDERS * per_sender;
    let verified = verify(&inst, before, total);

    println!(
        "{SENDERS} concurrent loops, each spawning {per_sender} processes one after the other:"
    );
    println!();
    let mut t = Table::new(&[
        "what",
        "n",
        "median per call",
        "p99 per call",
        "wall",
        "calls/s",
    ]);
    for (label, wall, calls) in [
        (format!("{SENDERS} × {TRUE}"), w_true, &c_true),
        (format!("{SENDERS} × aw-send"), w_send, &c_send),
    ] {
        t.stats(
            &label,
            &Stats::of(calls),
            vec![
                fmt(wall),
                format!("{:.0}", total as f64 / wall.as_secs_f64()),
            ],
        );
    }
    t.print();
    println!(
        "aw-send throughput: {:.0} messages/s ({:.2}× the wall time of {TRUE}); {verified}",
        total as f64 / w_send.as_secs_f64(),
        ratio(w_send, w_true),
    );
    println!();

    lines_throughput(&inst, opts.reps(100_000));
    lines_latency(&inst, opts.reps(300));
}

/// `aw-send --lines` reading `n` lines from a pipe, `LINE_RUNS` times: time from spawn to exit.
fn lines_throughput(inst: &Instance, n: usize) {
    let mut input = Vec::new();
    for i in 0..n {
        writeln!(
            input,
            "@bob build step {i} ok: 42 crates compiled, 0 warnings"
        )
        .unwrap();
    }
    let mut runs = Vec::with_capacity(LINE_RUNS);
    let mut checks = Vec::new();
    for _ in 0..LINE_RUNS {
        let before = Channel::new(inst).last_id().expect("last id");
        let mut child = lines_cmd(inst, Stdio::piped()).spawn().expect("spawn");
        let t = Instant::now();
        let mut stdin = child.stdin.take().expect("stdin");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let input = &input;
        let printed = std::thread::scope(|s| {
            // The thread owns the pipe: it closes when the input is written, which ends the run.
            s.spawn(move || stdin.write_all(input).expect("feed aw-send --lines"));
            out.lines().count()
        });
        let st = child.wait().expect("wait aw-send --lines");
        runs.push(t.elapsed());
        assert!(
            st.success() && printed == n,
            "aw-send --lines: {st}, {printed} ids"
        );
        checks.push(verify(inst, before, n));
    }
    let st = Stats::of(&runs);
    println!(
        "One `aw-send --lines` process reading {n} lines ({} bytes each on average, one \
         mention) from a pipe:",
        input.len() / n
    );
    println!();
    let mut t = Table::new(&["what", "n", "median", "p99", "messages/s (median)"]);
    t.stats(
        "aw-send --lines, spawn to exit",
        &st,
        vec![format!("{:.0}", n as f64 / st.median.as_secs_f64())],
    );
    t.print();
    let ok = checks.iter().all(|c| c.starts_with("checked"));
    println!(
        "target: ≥ 100000 messages/s: {}; every run {}",
        if n as f64 / st.median.as_secs_f64() >= 100_000.0 {
            "met"
        } else {
            "MISSED"
        },
        if ok {
            "checked: ids dense, no damage"
        } else {
            &checks[0]
        }
    );
    println!();
}

/// Time from a line written into the open stdin of `aw-send --lines` to `aw-peek --follow`
/// printing its entry: `n` rounds after 10 not counted, each after a random pause of 0–5 ms.
fn lines_latency(inst: &Instance, n: usize) {
    let mut writer = lines_cmd(inst, Stdio::null()).spawn().expect("spawn");
    let mut pipe = writer.stdin.take().expect("stdin");
    let last = Channel::new(inst).last_id().expect("last id");
    let mut follower = Command::new(common::aw_peek())
        .arg("--root")
        .arg(inst.dir().parent().expect("root"))
        .args(["-i", "bench", "--follow", "--json", "--since"])
        .arg(last.to_string())
        .env_remove("AW_ROOT")
        .env_remove("AW_INSTANCE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn aw-peek --follow");
    let mut seen = BufReader::new(follower.stdout.take().expect("stdout"));
    let mut rng = Rng::new();
    let mut sample = Vec::with_capacity(n);
    let mut line = String::new();
    for r in 0..n + 10 {
        std::thread::sleep(rng.below(Duration::from_millis(5)));
        let t0 = Instant::now();
        writeln!(pipe, "round {r}").expect("write to aw-send --lines");
        pipe.flush().expect("flush");
        line.clear();
        let got = seen.read_line(&mut line).expect("read follower");
        let d = t0.elapsed();
        assert!(got > 0, "aw-peek --follow ended");
        let e: aw::channel::Entry = serde_json::from_str(&line).expect("a JSON entry");
        assert_eq!(
            e.message,
            format!("round {r}"),
            "follower printed another entry"
        );
        if r >= 10 {
            sample.push(d);
        }
    }
    drop(pipe);
    let st = writer.wait().expect("wait aw-send --lines");
    assert!(st.success(), "aw-send --lines: {st}");
    let _ = follower.kill();
    let _ = follower.wait();
    println!(
        "Line written into the open pipe of `aw-send --lines` → `aw-peek --follow --json` prints it:"
    );
    println!();
    let mut t = Table::new(&["what", "n", "median", "p99"]);
    t.stats("aw-send --lines → follower", &Stats::of(&sample), vec![]);
    t.print();
    println!();
}

/// `aw-send --lines` as alice on the bench instance, stdin piped, stdout as given.
fn lines_cmd(inst: &Instance, stdout: Stdio) -> Command {
    let mut c = Command::new(common::aw_send());
    c.arg("--root")
        .arg(inst.dir().parent().expect("root"))
        .args(["-i", "bench", "--from", "alice", "--lines"])
        .env_remove("AW_ROOT")
        .env_remove("AW_INSTANCE")
        .env_remove("AW_AGENT")
        .env_remove("AW_SYNC")
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::inherit());
    c
}

/// A scratch instance with three registered agents.
fn setup(root: &Path) -> Instance {
    let inst = Root::new(root).instance("bench").expect("instance name");
    common::create_team(&inst);
    inst
}

/// The arguments of one `aw-send` call (a `Command` cannot be cloned).
struct SendCmd {
    root: std::path::PathBuf,
    sync: bool,
}

impl SendCmd {
    fn clone_cmd(&self) -> Command {
        let mut c = Command::new(common::aw_send());
        c.args(["--root"])
            .arg(&self.root)
            .args(["-i", "bench", "--from", "alice"])
            .arg("@bob please review the change to the parser; tests pass here")
            .env_remove("AW_ROOT")
            .env_remove("AW_INSTANCE")
            .env_remove("AW_AGENT");
        if self.sync {
            c.env("AW_SYNC", "1");
        } else {
            c.env_remove("AW_SYNC");
        }
        quiet(&mut c);
        c
    }
}

fn send_cmd(root: &Path, sync: bool) -> SendCmd {
    SendCmd {
        root: root.to_path_buf(),
        sync,
    }
}

fn truth_cmd() -> Command {
    let mut c = Command::new(TRUE);
    quiet(&mut c);
    c
}

fn quiet(c: &mut Command) {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
}

/// Spawn and wait; the time from spawn to exit.
fn run(c: &mut Command) -> Duration {
    let t = Instant::now();
    let st = c.status().expect("spawn");
    let d = t.elapsed();
    assert!(st.success(), "{c:?} failed: {st}");
    d
}

/// `n` rounds that each run every command once, starting with a different one each round, so
/// that a drift of the machine weighs on all of them alike. One sample per command.
fn rotate<const K: usize>(cmds: [&mut Command; K], n: usize) -> [Vec<Duration>; K] {
    let mut out: [Vec<Duration>; K] = std::array::from_fn(|_| Vec::with_capacity(n));
    for i in 0..n {
        for j in 0..K {
            let k = (i + j) % K;
            out[k].push(run(cmds[k]));
        }
    }
    out
}

/// The library call behind aw-send, without the process: what is left of aw-send's cost.
fn in_process(inst: &Instance, n: usize, sync: bool) -> Vec<Duration> {
    let opts = PostOptions {
        strict: false,
        sync,
    };
    (0..n)
        .map(|_| {
            let (d, r) = time(|| {
                post::post(
                    inst,
                    "alice",
                    "@bob please review the change to the parser; tests pass here",
                    &opts,
                )
            });
            r.expect("post");
            d
        })
        .collect()
}

/// `SENDERS` threads each run `per` commands one after the other, all starting together.
/// Returns the wall time and every call's time.
fn concurrent(make: impl Fn() -> Command + Sync, per: usize) -> (Duration, Vec<Duration>) {
    let barrier = Barrier::new(SENDERS + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..SENDERS)
            .map(|_| {
                let (barrier, make) = (&barrier, &make);
                s.spawn(move || {
                    let mut c = make();
                    barrier.wait();
                    (0..per).map(|_| run(&mut c)).collect::<Vec<_>>()
                })
            })
            .collect();
        barrier.wait();
        let t = Instant::now();
        let calls: Vec<Duration> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("sender thread"))
            .collect();
        (t.elapsed(), calls)
    })
}

/// Check that the concurrent senders left exactly `n` whole entries with dense ids.
fn verify(inst: &Instance, before: u64, n: usize) -> String {
    let batch = Channel::new(inst).read_since(before).expect("read channel");
    let dense = batch
        .entries
        .iter()
        .enumerate()
        .all(|(i, e)| e.id == before + 1 + i as u64);
    if batch.entries.len() == n && dense && batch.damage.is_empty() {
        format!("checked: {n} new entries, ids dense, no damage")
    } else {
        format!(
            "CHECK FAILED: {} new entries (want {n}), ids dense: {dense}, damage: {}",
            batch.entries.len(),
            batch.damage.len()
        )
    }
}
