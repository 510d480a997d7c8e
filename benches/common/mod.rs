//! Shared helpers of the benchmark programs: statistics, the machine description, paths,
//! command-line options and a small random generator. Nothing here asserts on time.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The aw binaries cargo built for this benchmark.
const BUILT_SEND: &str = env!("CARGO_BIN_EXE_aw-send");
const BUILT_PEEK: &str = env!("CARGO_BIN_EXE_aw-peek");
const BUILT_MCP: &str = env!("CARGO_BIN_EXE_aw-mcp");
const BUILT_RUN: &str = env!("CARGO_BIN_EXE_aw-run");

/// `aw-send` under test: from `$AW_BENCH_BIN_DIR` when set (to compare another build of the
/// same source), else the one cargo built.
pub fn aw_send() -> PathBuf {
    bin("aw-send", BUILT_SEND)
}

/// `aw-peek` under test (see [`aw_send`]).
pub fn aw_peek() -> PathBuf {
    bin("aw-peek", BUILT_PEEK)
}

/// `aw-mcp` under test (see [`aw_send`]).
pub fn aw_mcp() -> PathBuf {
    bin("aw-mcp", BUILT_MCP)
}

/// `aw-run` under test (see [`aw_send`]).
pub fn aw_run() -> PathBuf {
    bin("aw-run", BUILT_RUN)
}

fn bin(name: &str, built: &str) -> PathBuf {
    match std::env::var_os("AW_BENCH_BIN_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join(name),
        _ => PathBuf::from(built),
    }
}

/// Options every benchmark program takes. `cargo bench` adds `--bench`, which is ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opts {
    /// `--quick`: a tenth of the repetitions (a smoke run; figures are not for publishing).
    pub quick: bool,
}

impl Opts {
    pub fn from_args() -> Opts {
        let mut o = Opts::default();
        for a in std::env::args().skip(1) {
            match a.as_str() {
                "--quick" => o.quick = true,
                "--bench" => {}
                "-h" | "--help" => {
                    println!("usage: {} [--quick]", program());
                    std::process::exit(0);
                }
                other => {
                    eprintln!("{}: unknown argument '{other}' (hint: --quick)", program());
                    std::process::exit(64);
                }
            }
        }
        o
    }

    /// `n` repetitions, or a tenth of them (at least 20) with `--quick`.
    pub fn reps(&self, n: usize) -> usize {
        if self.quick { (n / 10).max(20) } else { n }
    }
}

fn program() -> String {
    std::env::args()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "bench".into())
}

/// The cargo target directory (the parent of the profile directory holding the binaries).
pub fn target_dir() -> PathBuf {
    let bin = Path::new(BUILT_SEND);
    bin.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// `target/bench-data/`, created if missing: cached channels and scratch instances.
pub fn data_dir() -> PathBuf {
    let d = target_dir().join("bench-data");
    std::fs::create_dir_all(&d).expect("create target/bench-data");
    d
}

/// A fresh scratch directory under `target/bench-data/` (same file system as the cache),
/// removed when dropped.
pub fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(data_dir())
        .expect("create scratch directory")
}

/// Create `inst` with the agents alice, bob and carol registered.
pub fn create_team(inst: &aw::instance::Instance) {
    inst.create().expect("create instance");
    for name in ["alice", "bob", "carol"] {
        let agent = aw::registry::Agent {
            name: name.into(),
            backend: "external".into(),
            created: aw::time::now(),
            ..Default::default()
        };
        aw::registry::register(inst, agent, false).expect("register agent");
    }
}

/// Summary of a sample of durations.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub n: usize,
    pub min: Duration,
    pub median: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Stats {
    pub fn of(sample: &[Duration]) -> Stats {
        assert!(!sample.is_empty(), "empty sample");
        let mut s = sample.to_vec();
        s.sort_unstable();
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2
        };
        // Nearest-rank percentile.
        let rank = ((n as f64) * 0.99).ceil() as usize;
        Stats {
            n,
            min: s[0],
            median,
            p99: s[rank.clamp(1, n) - 1],
            max: s[n - 1],
        }
    }
}

/// Time one call.
pub fn time<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

/// A duration for people: µs below 1 ms, ms below 1 s, else s.
pub fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// `a / b` as a ratio.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// A Markdown table printed with aligned columns.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A row for a sample: label, n, median, p99, then the extra cells.
    pub fn stats(&mut self, label: &str, s: &Stats, extra: Vec<String>) {
        let mut cells = vec![
            label.to_string(),
            s.n.to_string(),
            fmt(s.median),
            fmt(s.p99),
        ];
        cells.extend(extra);
        self.row(cells);
    }

    pub fn print(&self) {
        let cols = self.head.len();
        let mut w = vec![0usize; cols];
        for r in std::iter::once(&self.head).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &[String]| {
            let mut s = String::from("|");
            for (i, width) in w.iter().enumerate() {
                let c = r.get(i).map_or("", String::as_str);
                let pad = width - c.chars().count();
                s.push(' ');
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
                s.push_str(" |");
            }
            s
        };
        println!("{}", line(&self.head));
        let mut sep = String::from("|");
        for width in &w {
            sep.push_str(&"-".repeat(width + 2));
            sep.push('|');
        }
        println!("{sep}");
        for r in &self.rows {
            println!("{}", line(r));
        }
        println!();
    }
}

/// One line describing the machine: cores, CPU model, kernel, load, file system of the data.
pub fn machine() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into());
    let mut s = format!(
        "machine: nproc {nproc}, CPU {cpu}, kernel {kernel}, load average {load}, data on {}",
        fs_type(&data_dir())
    );
    if aw_send() != Path::new(BUILT_SEND) {
        s.push_str(&format!(
            "\nbinaries from AW_BENCH_BIN_DIR: {}",
            aw_send().parent().unwrap_or(Path::new(".")).display()
        ));
    }
    s
}

/// The file system type holding `path`, from /proc/self/mounts (longest mount prefix).
pub fn fs_type(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() < 3 {
            continue;
        }
        let mp = f[1].replace("\\040", " ");
        if path.starts_with(&mp) && best.as_ref().is_none_or(|(n, _)| mp.len() > *n) {
            best = Some((mp.len(), f[2].to_string()));
        }
    }
    best.map_or_else(|| "unknown".into(), |(_, t)| t)
}

/// Print the heading of a benchmark program.
pub fn heading(title: &str, opts: &Opts) {
    println!("## {title}{}", if opts.quick { " (--quick)" } else { "" });
    println!();
    println!("{}", machine());
    println!();
}

/// xorshift64*: enough to jitter the gaps between rounds.
pub struct Rng(u64);

impl Rng {
    pub fn new() -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[0, max)`.
    pub fn below(&mut self, max: Duration) -> Duration {
        let ns = max.as_nanos() as u64;
        if ns == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.next() % ns)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine.
pub fn mono_ns() -> u64 {
    let mut ts = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
