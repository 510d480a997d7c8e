//! Crashes: writers killed with SIGKILL at random instants, and a log cut short inside its
//! last entry (a power loss). The log always reads, nothing whose id was printed is lost,
//! damage is reported and never returned, and the next append is clean.

use crate::common;

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use common::{Entry, Rng, Root, header_lines};

/// Kill trials; the trials of one instance share its log, so damage accumulates.
const TRIALS: usize = 240;
const TRIALS_PER_INSTANCE: usize = 12;
const WRITERS_PER_TRIAL: usize = 3;

/// Every stderr line is a warning of `tool`.
fn only_warnings(stderr: &str, tool: &str) {
    for l in stderr.lines() {
        assert!(
            l.starts_with(&format!("{tool}: warning: ")),
            "{tool}: unexpected stderr line {l:?}"
        );
    }
}

/// A pool of text to cut messages from: lines that need escaping, Unicode, CRLF.
fn filler(rng: &mut Rng, size: usize) -> String {
    let lines = [
        "### looks like a header",
        "\\ starts with a backslash",
        "",
        "plain words and more words",
        "trailing   ",
        "crlf\r",
        "日本語 🦀 café",
        "<!-- not a comment -->",
    ];
    let mut s = String::with_capacity(size + 64);
    while s.len() < size {
        s.push_str(rng.pick(&lines));
        s.push('\n');
    }
    s
}

/// A message of `size` bytes or so, unique by its first line.
fn message(tag: &str, pool: &str, rng: &mut Rng, size: usize) -> String {
    let mut start = rng.below(pool.len() as u64 / 2) as usize;
    while !pool.is_char_boundary(start) {
        start += 1;
    }
    let mut end = (start + size).min(pool.len());
    while !pool.is_char_boundary(end) {
        end -= 1;
    }
    format!("{tag}\n{}", &pool[start..end])
}

struct Writer {
    child: Child,
    text: String,
    kill_at: Option<Duration>,
}

#[test]
fn writers_killed_at_random_instants_lose_nothing_printed() {
    let root = Root::new();
    let files = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(0xc0ffee);
    let pool = filler(&mut rng, 3 << 20);
    let mut killed = 0;
    let mut damaged_reads = 0;
    let mut inst = String::new();
    // id -> text of every entry whose id some aw-send printed, in the current instance.
    let mut printed: BTreeMap<u64, String> = BTreeMap::new();
    // Texts written (or attempted) to the current instance, by their first line.
    let mut attempted: BTreeMap<String, String> = BTreeMap::new();
    for trial in 0..TRIALS {
        if trial % TRIALS_PER_INSTANCE == 0 {
            inst = format!("crash{}", trial / TRIALS_PER_INSTANCE);
            printed.clear();
            attempted.clear();
        }
        // Start the writers: message on stdin from a file, so that a large one is read at
        // once and the kill can land in the middle of its write(2) to the log.
        let mut writers = Vec::new();
        for w in 0..WRITERS_PER_TRIAL {
            let tag = format!("trial {trial} writer {w}");
            let size = match rng.below(10) {
                0..=4 => rng.range(1, 200),
                5..=8 => rng.range(16 << 10, 512 << 10),
                _ => rng.range(1 << 20, 2 << 20),
            } as usize;
            let text = message(&tag, &pool, &mut rng, size);
            let path = files.path().join(format!("msg{w}"));
            std::fs::write(&path, &text).unwrap();
            let child = root
                .cmd("aw-send")
                .args(["-i", &inst, "-q"])
                .stdin(std::fs::File::open(&path).unwrap())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn aw-send");
            let kill_at = (!rng.chance(15)).then(|| Duration::from_micros(rng.below(4000)));
            attempted.insert(tag, text.clone());
            writers.push(Writer {
                child,
                text,
                kill_at,
            });
        }
        let start = Instant::now();
        let mut order: Vec<usize> = (0..writers.len())
            .filter(|&i| writers[i].kill_at.is_some())
            .collect();
        order.sort_by_key(|&i| writers[i].kill_at);
        for i in order {
            let at = writers[i].kill_at.unwrap();
            if let Some(d) = at.checked_sub(start.elapsed()) {
                std::thread::sleep(d);
            }
            // Not yet reaped, so the pid is still this child's, even if it has exited.
            kill(Pid::from_raw(writers[i].child.id() as i32), Signal::SIGKILL).unwrap();
        }
        for w in writers {
            let out = w.child.wait_with_output().unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            match out.status.code() {
                // A killed writer may have been stopped half way through a warning line.
                Some(0) => only_warnings(&String::from_utf8_lossy(&out.stderr), "aw-send"),
                Some(c) => panic!(
                    "aw-send failed ({c}): {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
                None => {
                    assert!(w.kill_at.is_some(), "a writer died that was not killed");
                    killed += 1;
                }
            }
            if stdout.is_empty() {
                assert!(
                    out.status.code().is_none(),
                    "aw-send exited 0 without an id"
                );
                continue;
            }
            let id = common::parse_id(&stdout);
            if let Some(old) = printed.insert(id, w.text.clone()) {
                panic!(
                    "id {id} printed twice, for {:?} and {:?}",
                    first(&old),
                    first(&w.text)
                );
            }
        }

        // The log reads, ids increase, every printed id is there with its text, and every
        // entry is a whole message that was sent.
        // Every writer of a new instance may have been killed before it made the instance:
        // then nothing was stored, and no half-made instance is left.
        let (entries, stderr) = if root.inst_dir(&inst).join("_state").is_dir() {
            root.read_all(&inst)
        } else {
            assert!(printed.is_empty(), "ids printed, but no instance {inst}");
            assert!(!root.channel(&inst).exists(), "a channel without _state/");
            (Vec::new(), String::new())
        };
        only_warnings(&stderr, "aw-peek");
        if !stderr.is_empty() {
            damaged_reads += 1;
        }
        check_entries(&entries, &printed, &attempted);

        // A later send works and reads back.
        let newest = entries.last().map_or(0, |e| e.id);
        let text = format!("after trial {trial}");
        let out = root.run("aw-send", &["-i", &inst, "-q", "--", &text], None);
        assert_eq!(out.status.code(), Some(0), "send after a kill");
        only_warnings(&String::from_utf8_lossy(&out.stderr), "aw-send");
        let id = common::parse_id(&String::from_utf8(out.stdout).unwrap());
        assert!(id > newest, "id {id} after the kills is not above {newest}");
        let since = root.ok(
            "aw-peek",
            &["-i", &inst, "--json", "--since", &(id - 1).to_string()],
            None,
        );
        let got = common::parse_entries(since.as_bytes());
        assert_eq!(got.len(), 1, "the entry after the kills");
        assert_eq!((got[0].id, got[0].message.as_str()), (id, text.as_str()));
        printed.insert(id, text.clone());
        attempted.insert(text.clone(), text);
    }
    eprintln!("{TRIALS} trials: {killed} writers killed, {damaged_reads} reads reported damage");
}

fn first(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn check_entries(
    entries: &[Entry],
    printed: &BTreeMap<u64, String>,
    attempted: &BTreeMap<String, String>,
) {
    assert!(
        entries.windows(2).all(|p| p[0].id < p[1].id),
        "ids do not increase"
    );
    let by_id: BTreeMap<u64, &Entry> = entries.iter().map(|e| (e.id, e)).collect();
    for (id, text) in printed {
        let e = by_id
            .get(id)
            .unwrap_or_else(|| panic!("entry {id} ({:?}) was printed, then lost", first(text)));
        assert!(e.message == *text, "entry {id} changed");
    }
    for e in entries {
        let sent = attempted
            .get(first(&e.message))
            .unwrap_or_else(|| panic!("entry {} was never sent: {:?}", e.id, first(&e.message)));
        assert!(
            *sent == e.message,
            "entry {} is not the whole message that was sent",
            e.id
        );
    }
}

/// What a read of instance `inst` returns after a power loss, with the stderr it printed.
fn read_damaged(root: &Root, inst: &str) -> (Vec<Entry>, String) {
    let (entries, stderr) = root.read_all(inst);
    only_warnings(&stderr, "aw-peek");
    (entries, stderr)
}

fn texts(entries: &[Entry]) -> Vec<(u64, &str)> {
    entries.iter().map(|e| (e.id, e.message.as_str())).collect()
}

/// The log cut short at every byte of its last entry: the torn entry is reported and not
/// returned; the next append takes its id (aw-workflow(5)), starts on a line of its own,
/// and both the old entries and the new ones read back.
#[test]
fn log_cut_inside_last_entry_reads_and_takes_a_clean_append() {
    let root = Root::new();
    let a = "first entry";
    let b = "second\n### with a heading line\n\\ and a backslash line\n";
    let c = "third entry\n\n### torn by a power loss\n\\end";
    for t in [a, b] {
        root.send("base", &[], t);
    }
    let before_last = std::fs::metadata(root.channel("base")).unwrap().len() as usize;
    root.send("base", &[], c);
    let log = std::fs::read(root.channel("base")).unwrap();
    let last_len = log.len() - before_last;
    let idx = std::fs::read(root.inst_dir("base").join("_state/channel.idx")).unwrap();

    for cut in 1..=last_len {
        let inst = format!("cut{cut}");
        let dir = root.inst_dir(&inst);
        std::fs::create_dir_all(dir.join("_state")).unwrap();
        let kept = log.len() - cut;
        std::fs::write(dir.join("channel.md"), &log[..kept]).unwrap();
        // The index survived the power loss (it points past the end of the log), or it did
        // not: both must work.
        if cut % 3 != 0 {
            std::fs::write(dir.join("_state/channel.idx"), &idx).unwrap();
        }
        let what = format!("log cut by {cut} bytes");

        let (entries, stderr) = read_damaged(&root, &inst);
        assert_eq!(texts(&entries), [(1, a), (2, b)], "{what}");
        if cut < last_len {
            assert!(
                stderr.contains("torn final entry") && stderr.lines().count() == 1,
                "{what}: torn entry not reported: {stderr:?}"
            );
        } else {
            assert_eq!(
                stderr, "",
                "{what}: the whole entry is gone, the log is clean"
            );
        }

        let out = root.run("aw-send", &["-i", &inst, "--", "after the cut"], None);
        assert_eq!(out.status.code(), Some(0), "{what}: send");
        let send_err = String::from_utf8_lossy(&out.stderr);
        only_warnings(&send_err, "aw-send");
        assert_eq!(
            send_err.contains("torn final entry"),
            cut < last_len,
            "{what}: aw-send warning {send_err:?}"
        );
        let id = common::parse_id(&String::from_utf8(out.stdout).unwrap());
        assert_eq!(id, 3, "{what}: the torn entry's id goes to the next entry");

        let (entries, stderr) = read_damaged(&root, &inst);
        assert_eq!(
            texts(&entries),
            [(1, a), (2, b), (3, "after the cut")],
            "{what}: after one append"
        );
        if cut < last_len {
            assert!(
                stderr.contains("damaged entry") && !stderr.contains("torn"),
                "{what}: the damage is no longer at the end: {stderr:?}"
            );
        }

        assert_eq!(root.send(&inst, &[], "and again"), 4, "{what}");
        let (entries, _) = read_damaged(&root, &inst);
        assert_eq!(
            texts(&entries),
            [(1, a), (2, b), (3, "after the cut"), (4, "and again")],
            "{what}: after two appends"
        );

        // The damage stays in place, untouched, and every '### ' line is a header or the
        // start of the torn one.
        let now = std::fs::read(dir.join("channel.md")).unwrap();
        assert_eq!(&now[..kept], &log[..kept], "{what}: the log was rewritten");
        let torn_header = (last_len - cut >= 4) as usize;
        assert_eq!(header_lines(&now), 4 + torn_header, "{what}: '### ' lines");
    }
}

/// Send `text` to `inst`, expecting the next dense id.
fn send_next(root: &Root, inst: &str, want: &mut Vec<String>, text: &str) {
    want.push(text.to_string());
    assert_eq!(
        root.send(inst, &[], text),
        want.len() as u64,
        "id of {text:?}"
    );
}

/// Every read of `inst` returns `want`, with ids 1, 2, ...
fn check_reads(root: &Root, inst: &str, want: &[String], what: &str) {
    let entries = root.entries(inst);
    let got: Vec<&str> = entries.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(got, want, "{what}");
    assert!(
        entries
            .iter()
            .enumerate()
            .all(|(k, e)| e.id == k as u64 + 1)
    );
    for since in [0, want.len() / 2, want.len() - 1] {
        let out = root.ok(
            "aw-peek",
            &["-i", inst, "--json", "--since", &since.to_string()],
            None,
        );
        assert_eq!(
            common::parse_entries(out.as_bytes()),
            entries[since..],
            "{what}: --since {since}"
        );
    }
    let out = root.ok("aw-peek", &["-i", inst, "--json", "-n", "2"], None);
    assert_eq!(
        common::parse_entries(out.as_bytes()),
        entries[entries.len() - 2..],
        "{what}: -n 2"
    );
}

/// The index is derived data (aw-workflow(5)): cut to a partial record, deleted, or left
/// ahead of a log restored from a copy, it is ignored by readers and rebuilt by the next
/// append.
#[test]
fn lost_or_stale_index_is_rebuilt() {
    let root = Root::new();
    let i = "idx";
    let idx = root.inst_dir(i).join("_state/channel.idx");
    let records = || std::fs::metadata(&idx).unwrap().len();
    let mut want = Vec::new();
    for n in 0..5 {
        send_next(&root, i, &mut want, &format!("message {n}"));
    }
    assert_eq!(records(), 5 * 24);

    // A partial final record (a writer killed while writing it).
    let full = std::fs::read(&idx).unwrap();
    std::fs::write(&idx, &full[..3 * 24 + 7]).unwrap();
    check_reads(&root, i, &want, "index cut to a partial record");
    send_next(&root, i, &mut want, "after the partial record");
    assert_eq!(records(), 6 * 24);
    check_reads(&root, i, &want, "after the partial record");

    // No index at all.
    std::fs::remove_file(&idx).unwrap();
    check_reads(&root, i, &want, "no index");
    send_next(&root, i, &mut want, "after the index was deleted");
    assert_eq!(records(), 7 * 24);
    check_reads(&root, i, &want, "index rebuilt");

    // The log restored from an older copy, the index left ahead of it.
    let log = root.channel(i);
    let old = std::fs::read(&log).unwrap();
    root.send(i, &[], "lost in the restore");
    root.send(i, &[], "lost too");
    std::fs::write(&log, &old).unwrap();
    check_reads(&root, i, &want, "log restored, index ahead of it");
    send_next(&root, i, &mut want, "after the restore");
    assert_eq!(records(), 8 * 24);
    check_reads(&root, i, &want, "after the restore");
}
