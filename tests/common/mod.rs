//! Helpers shared by the integration tests: a temporary root, the real binaries, the JSON
//! records of `aw-peek --json`, snapshots of a directory tree, and a small PRNG.
//!
//! Each test file includes this module with `mod common;` and uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub mod agent_index;
pub mod fake_api;
pub mod gluster;
pub mod runner;
pub mod tmux;

/// Path of one of the crate's binaries, as built by cargo for the tests.
pub fn bin(name: &str) -> PathBuf {
    assert_cmd::cargo::cargo_bin(name)
}

/// Environment variables that would change what a tool does; tests start without them.
pub const AW_ENV: [&str; 7] = [
    "AW_ROOT",
    "AW_INSTANCE",
    "AW_AGENT",
    "AW_SYNC",
    "AW_OTEL",
    "TRACEPARENT",
    "TRACESTATE",
];

/// A command for tool `name` with none of the `AW_*` variables of the caller, and no trace
/// context.
pub fn tool(name: &str) -> Command {
    let mut c = Command::new(bin(name));
    for v in AW_ENV {
        c.env_remove(v);
    }
    c
}

/// Run `cmd` with `input` on stdin (empty when `None`) and collect its output.
pub fn run_with(mut cmd: Command, input: Option<&[u8]>) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn a tool");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let data = input.unwrap_or_default().to_vec();
    // Feed stdin from a thread so that a large input cannot dead-lock against stdout.
    let feeder = std::thread::spawn(move || {
        // The tool may exit without reading everything (a refused option): ignore EPIPE.
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for a tool");
    feeder.join().expect("stdin feeder");
    out
}

/// A temporary root directory for one test, removed when dropped.
pub struct Root {
    dir: tempfile::TempDir,
}

impl Default for Root {
    fn default() -> Self {
        Self::new()
    }
}

impl Root {
    pub fn new() -> Root {
        Root {
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The directory of instance `inst`.
    pub fn inst_dir(&self, inst: &str) -> PathBuf {
        self.path().join(inst)
    }

    /// `channel.md` of instance `inst`.
    pub fn channel(&self, inst: &str) -> PathBuf {
        self.inst_dir(inst).join("channel.md")
    }

    /// Tool `name` with `--root` set to this root.
    pub fn cmd(&self, name: &str) -> Command {
        let mut c = tool(name);
        c.arg("--root").arg(self.path());
        c
    }

    /// Run tool `name` with `args` and `input` on stdin.
    pub fn run(&self, name: &str, args: &[&str], input: Option<&[u8]>) -> Output {
        let mut c = self.cmd(name);
        c.args(args);
        run_with(c, input)
    }

    /// Run tool `name`, require exit status 0, and return its stdout.
    pub fn ok(&self, name: &str, args: &[&str], input: Option<&[u8]>) -> String {
        let out = self.run(name, args, input);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("stdout is UTF-8")
    }

    /// Send `text` as arguments (`-- TEXT`) to instance `inst` with extra options `opts`;
    /// return the printed id.
    pub fn send(&self, inst: &str, opts: &[&str], text: &str) -> u64 {
        let mut args = vec!["-i", inst];
        args.extend_from_slice(opts);
        args.push("--");
        args.push(text);
        parse_id(&self.ok("aw-send", &args, None))
    }

    /// Send `text` on stdin to instance `inst` with extra options `opts`; return the id.
    pub fn send_stdin(&self, inst: &str, opts: &[&str], text: &[u8]) -> u64 {
        let mut args = vec!["-i", inst];
        args.extend_from_slice(opts);
        parse_id(&self.ok("aw-send", &args, Some(text)))
    }

    /// Every entry of instance `inst`, through `aw-peek --json -n 0`, which must succeed.
    /// Returns the entries and what aw-peek printed on stderr.
    pub fn read_all(&self, inst: &str) -> (Vec<Entry>, String) {
        let out = self.run("aw-peek", &["-i", inst, "--json", "-n", "0"], None);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "aw-peek failed: {stderr}");
        (parse_entries(&out.stdout), stderr)
    }

    /// [`Root::read_all`], requiring that nothing was reported on stderr.
    pub fn entries(&self, inst: &str) -> Vec<Entry> {
        let (entries, stderr) = self.read_all(inst);
        assert_eq!(stderr, "", "aw-peek reported something on a clean log");
        entries
    }
}

/// The id printed by `aw-send`: one decimal number and a newline.
pub fn parse_id(stdout: &str) -> u64 {
    let line = stdout
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("aw-send output does not end in a newline: {stdout:?}"));
    line.parse()
        .unwrap_or_else(|_| panic!("aw-send printed {stdout:?}, not an id"))
}

/// A channel entry, as `--json` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: u64,
    pub timestamp: String,
    pub from: String,
    pub message: String,
    pub mentions: Vec<String>,
}

/// Check that `v` is an entry object with the documented keys and types.
pub fn entry_from_json(v: &Value) -> Entry {
    let o = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"));
    let s = |k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("entry without string '{k}': {v}"))
            .to_string()
    };
    let e = Entry {
        id: o
            .get("id")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("entry without integer 'id': {v}")),
        timestamp: s("timestamp"),
        from: s("from"),
        message: s("message"),
        mentions: o
            .get("mentions")
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("entry without array 'mentions': {v}"))
            .iter()
            .map(|m| m.as_str().expect("a mention is a string").to_string())
            .collect(),
    };
    assert!(
        is_timestamp(&e.timestamp),
        "timestamp {:?} is not UTC with milliseconds",
        e.timestamp
    );
    e
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn is_timestamp(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

/// JSON Lines: one value per line, every line a complete record.
pub fn json_lines(stdout: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(stdout).expect("JSON output is UTF-8");
    if text.is_empty() {
        return Vec::new();
    }
    let text = text
        .strip_suffix('\n')
        .expect("JSON Lines output ends in a newline");
    text.split('\n')
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// The entries of `aw-peek --json` output.
pub fn parse_entries(stdout: &[u8]) -> Vec<Entry> {
    json_lines(stdout).iter().map(entry_from_json).collect()
}

/// Number of lines of `data` that begin with `### ` (what `grep -c '^### '` counts).
pub fn header_lines(data: &[u8]) -> usize {
    data.split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"### "))
        .count()
}

/// One node of a directory tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(Vec<u8>),
    Symlink(PathBuf),
}

/// Every path under `dir` (relative), with file contents and symlink targets. Symlinks are
/// recorded, not followed. A missing `dir` is an empty tree.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    if std::fs::symlink_metadata(dir).is_err() {
        return out;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for de in std::fs::read_dir(&d).expect("read_dir") {
            let p = de.expect("dir entry").path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            let meta = std::fs::symlink_metadata(&p).expect("lstat");
            let node = if meta.file_type().is_symlink() {
                Node::Symlink(std::fs::read_link(&p).expect("readlink"))
            } else if meta.is_dir() {
                stack.push(p.clone());
                Node::Dir
            } else {
                Node::File(std::fs::read(&p).expect("read file"))
            };
            out.insert(rel, node);
        }
    }
    out
}

/// Compare two snapshots, naming the first path that differs.
pub fn assert_same_tree(
    before: &BTreeMap<PathBuf, Node>,
    after: &BTreeMap<PathBuf, Node>,
    what: &str,
) {
    for (p, n) in after {
        match before.get(p) {
            None => panic!("{what}: created {}", p.display()),
            Some(b) if b != n => panic!("{what}: changed {}", p.display()),
            _ => {}
        }
    }
    for p in before.keys() {
        assert!(after.contains_key(p), "{what}: removed {}", p.display());
    }
}

/// Require that `out` failed with exit status `code`, printed nothing on stdout, and
/// reported one error line on stderr that begins with `tool: ` (optionally followed by one
/// `hint: ` line). Returns the error line.
pub fn assert_error(out: &Output, tool: &str, code: i32, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: exit status (stderr: {stderr:?})"
    );
    assert!(
        out.stdout.is_empty(),
        "{what}: printed on stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines: Vec<&str> = stderr
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("{what}: stderr {stderr:?} is not whole lines"))
        .split('\n')
        .collect();
    let prefix = format!("{tool}: ");
    assert!(
        lines[0].starts_with(&prefix) && !lines[0].starts_with(&format!("{tool}: warning:")),
        "{what}: error line {:?} does not begin with {prefix:?}",
        lines[0]
    );
    assert!(lines[0].len() > prefix.len(), "{what}: empty error message");
    match lines.len() {
        1 => {}
        2 => assert!(
            lines[1].starts_with("hint: "),
            "{what}: second stderr line {:?} is not a hint",
            lines[1]
        ),
        _ => panic!("{what}: more than one error line: {stderr:?}"),
    }
    lines[0].to_string()
}

/// Run `git` in `dir` as a committer named `t`, without the system's configuration; it
/// must succeed. Its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_EDITOR", "true")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git must be installed to run these tests");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A small deterministic PRNG (SplitMix64), so failures can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }

    /// Any Unicode scalar value except NUL.
    pub fn any_char(&mut self) -> char {
        loop {
            // Favour the planes that hold most text, but reach all of them.
            let cp = match self.below(4) {
                0 => self.range(1, 0x7f),
                1 => self.range(0x80, 0x7ff),
                2 => self.range(0x800, 0xffff),
                _ => self.range(0x10000, 0x10ffff),
            } as u32;
            if let Some(c) = char::from_u32(cp) {
                return c;
            }
        }
    }
}
