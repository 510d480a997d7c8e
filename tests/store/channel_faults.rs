//! The channel tells the truth about what is stored: a send whose entry reached the log
//! succeeds even when its index record could not be written, no id is ever given twice or
//! wrapped past the largest one, and a wrong index record or an out-of-order entry never makes
//! a reader skip entries in silence.

use crate::common;

use std::path::{Path, PathBuf};

use aw::channel::{Entry as AwEntry, render};
use common::{Entry, Root, assert_error, parse_entries, parse_id};

const INST: &str = "default";
const DATAERR: i32 = 65;

/// One index record: id, byte offset, length.
type Record = (u64, u64, u64);

fn index_path(root: &Root) -> PathBuf {
    root.inst_dir(INST).join("_state/channel.idx")
}

fn read_index(path: &Path) -> Vec<Record> {
    let b = std::fs::read(path).expect("read the index");
    assert_eq!(b.len() % 24, 0, "index of whole records");
    let u = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap());
    b.chunks(24)
        .map(|r| (u(&r[0..8]), u(&r[8..16]), u(&r[16..24])))
        .collect()
}

fn write_index(path: &Path, recs: &[Record]) {
    let mut b = Vec::with_capacity(recs.len() * 24);
    for &(id, off, len) in recs {
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
    }
    std::fs::write(path, b).expect("write the index");
}

/// Run aw-peek with `args` (plus `-i default --json`); its entries and its stderr.
fn peek(root: &Root, args: &[&str]) -> (Vec<Entry>, String) {
    let mut all = vec!["-i", INST, "--json"];
    all.extend_from_slice(args);
    let out = root.run("aw-peek", &all, None);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "aw-peek {args:?}: {stderr}");
    (parse_entries(&out.stdout), stderr)
}

fn ids(entries: &[Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.id).collect()
}

/// An entry as the renderer of the library stores it.
fn rendered(id: u64, msg: &str) -> Vec<u8> {
    render(&AwEntry {
        id,
        timestamp: "2026-11-22T10:00:05.123Z".into(),
        from: "forger".into(),
        message: msg.into(),
        mentions: Vec::new(),
    })
}

/// A root whose instance holds `n` entries sent by aw-send, of varied lengths.
fn channel_of(n: u64) -> Root {
    let root = Root::new();
    for i in 1..=n {
        let text = format!("message {i}\n{}", "body line\n".repeat(i as usize % 4));
        assert_eq!(root.send(INST, &[], &text), i);
    }
    root
}

/// The index that a clean log of entries `recs` holds: ids, offsets and lengths follow each
/// other without gaps, starting at byte 0.
fn assert_dense(recs: &[Record], log_len: u64) {
    let mut at = 0;
    for (k, &(id, off, len)) in recs.iter().enumerate() {
        assert_eq!((id, off), (k as u64 + 1, at), "record {k} of {recs:?}");
        at = off + len;
    }
    assert_eq!(at, log_len, "the index covers the log");
}

// ---- an index record that cannot be written ----

#[test]
fn entry_stored_but_index_unwritable_is_sent() {
    let root = channel_of(1);
    let idx = index_path(&root);
    std::fs::remove_file(&idx).unwrap();
    // The index can no longer be opened for writing (EISDIR). (A link to a device is
    // refused before anything is written: see tests/store/state_files.rs.)
    std::fs::create_dir(&idx).unwrap();
    for (id, text) in [(2, "two"), (3, "three")] {
        let out = root.run("aw-send", &["-i", INST, text], None);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "aw-send {text}: {stderr}");
        assert_eq!(parse_id(&String::from_utf8(out.stdout).unwrap()), id);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one warning: {stderr:?}");
        assert!(
            lines[0].starts_with("aw-send: warning: channel.idx: ")
                && lines[0].contains("Is a directory"),
            "warning {stderr:?}"
        );
        let (entries, stderr) = peek(&root, &["-n", "0"]);
        assert_eq!(stderr, "");
        assert_eq!(ids(&entries), (1..=id).collect::<Vec<_>>());
        assert_eq!(entries.last().unwrap().message, text);
    }
    // With an index that works again, reads and the next append are right: ids go on, no
    // entry is doubled, and the index covers the whole log.
    std::fs::remove_dir(&idx).unwrap();
    for k in 0..=3 {
        let (entries, stderr) = peek(&root, &["--since", &k.to_string()]);
        assert_eq!(stderr, "");
        assert_eq!(ids(&entries), (k + 1..=3).collect::<Vec<_>>());
    }
    assert_eq!(root.send(INST, &[], "four"), 4);
    let entries = root.entries(INST);
    assert_eq!(ids(&entries), vec![1, 2, 3, 4]);
    let log_len = std::fs::metadata(root.channel(INST)).unwrap().len();
    assert_dense(&read_index(&idx), log_len);
}

#[test]
fn lagging_index_is_caught_up_by_readers_and_the_next_append() {
    let root = channel_of(5);
    let idx = index_path(&root);
    let full = read_index(&idx);
    // The last two records were never written, and a third only in part.
    for cut in [2 * 24, 2 * 24 + 10] {
        let bytes = std::fs::read(&idx).unwrap();
        std::fs::write(&idx, &bytes[..full.len() * 24 - cut]).unwrap();
        for k in 0..=5 {
            let (entries, stderr) = peek(&root, &["--since", &k.to_string()]);
            assert_eq!(stderr, "");
            assert_eq!(ids(&entries), (k + 1..=5).collect::<Vec<_>>(), "cut {cut}");
        }
        let (entries, _) = peek(&root, &["-n", "3"]);
        assert_eq!(ids(&entries), vec![3, 4, 5]);
        write_index(&idx, &full);
    }
    std::fs::write(&idx, &std::fs::read(&idx).unwrap()[..2 * 24 + 7]).unwrap();
    assert_eq!(root.send(INST, &[], "six"), 6);
    let log_len = std::fs::metadata(root.channel(INST)).unwrap().len();
    assert_dense(&read_index(&idx), log_len);
    assert_eq!(ids(&root.entries(INST)), (1..=6).collect::<Vec<_>>());
}

// ---- the largest id ----

#[test]
fn nothing_is_appended_after_the_largest_id() {
    let root = Root::new();
    assert_eq!(root.send(INST, &[], "first"), 1);
    let log = root.channel(INST);
    let mut data = std::fs::read(&log).unwrap();
    data.extend_from_slice(&rendered(u64::MAX - 1, "almost the last"));
    data.extend_from_slice(&rendered(u64::MAX, "the last"));
    std::fs::write(&log, &data).unwrap();
    let (entries, stderr) = peek(&root, &["-n", "0"]);
    assert_eq!(stderr, "");
    assert_eq!(ids(&entries), vec![1, u64::MAX - 1, u64::MAX]);
    for _ in 0..2 {
        let out = root.run("aw-send", &["-i", INST, "one too many"], None);
        let line = assert_error(&out, "aw-send", DATAERR, "append after the largest id");
        assert!(line.contains("#18446744073709551615"), "{line}");
        assert_eq!(std::fs::read(&log).unwrap(), data, "the log is unchanged");
    }
    let max = u64::MAX.to_string();
    let below = (u64::MAX - 1).to_string();
    for (since, want) in [
        (max.as_str(), vec![]),
        (below.as_str(), vec![u64::MAX]),
        ("1", vec![u64::MAX - 1, u64::MAX]),
        ("0", vec![1, u64::MAX - 1, u64::MAX]),
    ] {
        let (entries, stderr) = peek(&root, &["--since", since]);
        assert_eq!(stderr, "");
        assert_eq!(ids(&entries), want, "--since {since}");
    }
    let (entries, _) = peek(&root, &["-n", "1"]);
    assert_eq!(ids(&entries), vec![u64::MAX]);
}

#[test]
fn header_whose_len_reaches_the_end_of_memory_is_damage() {
    let root = channel_of(1);
    let log = root.channel(INST);
    let line = |len: u64| {
        format!(
            "### 10:00:05 [forger] #2 <!-- at=2026-11-22T10:00:05.123Z len={len} sum=0000000000000000 -->"
        )
    };
    // The body would end two bytes before the largest address, so its terminator would too.
    let probe = line(u64::MAX).len() as u64;
    let header = line(u64::MAX - 1 - (probe + 1));
    assert_eq!(header.len() as u64, probe);
    let mut data = std::fs::read(&log).unwrap();
    data.extend_from_slice(header.as_bytes());
    data.extend_from_slice(b"\nbody\n\n");
    std::fs::write(&log, &data).unwrap();
    let (entries, stderr) = root.read_all(INST);
    assert_eq!(ids(&entries), vec![1]);
    assert!(stderr.contains("torn final entry"), "{stderr}");
    assert_eq!(root.send(INST, &[], "two"), 2);
    let (entries, stderr) = root.read_all(INST);
    assert_eq!(ids(&entries), vec![1, 2]);
    assert!(stderr.contains("damaged entry"), "{stderr}");
}

// ---- wrong index records, out-of-order entries ----

/// Ways to spoil record `k` of a clean index `good` of the log `log`.
fn spoiled(good: &[Record], log: &[u8], k: usize) -> Vec<(String, Record)> {
    let (id, off, len) = good[k];
    let header_len = log[off as usize..]
        .iter()
        .position(|&b| b == b'\n')
        .unwrap() as u64;
    let other = good[(k + 2) % good.len()];
    let before = good[k.saturating_sub(1)];
    vec![
        ("id far too big".into(), (999, off, len)),
        ("id one too big".into(), (id + 1, off, len)),
        ("id too small".into(), (id.saturating_sub(2), off, len)),
        ("offset of another header".into(), (id, other.1, len)),
        ("copy of another record".into(), other),
        ("offset inside the header".into(), (id, off + 7, len)),
        (
            "offset inside the body".into(),
            (id, off + header_len + 3, len),
        ),
        (
            "offset inside the entry before".into(),
            (id, before.1 + 5, len),
        ),
        ("length too long".into(), (id, off, len + 9)),
        ("length too short".into(), (id, off, len - 3)),
        ("zeroed".into(), (0, 0, 0)),
        ("offset past the end".into(), (id, u64::MAX - 3, len)),
    ]
}

#[test]
fn wrong_index_record_never_hides_entries() {
    const N: u64 = 10;
    let root = channel_of(N);
    let log = root.channel(INST);
    let idx = index_path(&root);
    let stale = root.inst_dir(INST).join("_state/channel.idx.stale");
    let data = std::fs::read(&log).unwrap();
    let good = read_index(&idx);
    assert_dense(&good, data.len() as u64);
    let all = root.entries(INST);
    assert_eq!(ids(&all), (1..=N).collect::<Vec<_>>());
    for k in [0, 4, 8, 9] {
        for (what, bad) in spoiled(&good, &data, k) {
            let what = format!("record {k}: {what}");
            std::fs::write(&log, &data).unwrap();
            let mut recs = good.clone();
            recs[k] = bad;
            write_index(&idx, &recs);
            for since in 0..=N {
                let (entries, stderr) = peek(&root, &["--since", &since.to_string()]);
                assert_eq!(stderr, "", "{what}, --since {since}");
                assert_eq!(
                    entries,
                    all[since as usize..],
                    "{what}: --since {since} differs from a full scan"
                );
            }
            for n in [1, 3, 7] {
                let (entries, stderr) = peek(&root, &["-n", &n.to_string()]);
                assert_eq!(stderr, "", "{what}, -n {n}");
                assert_eq!(entries, all[(N - n) as usize..], "{what}: -n {n}");
            }
            // The next append repairs the index.
            assert_eq!(root.send(INST, &[], "one more"), N + 1, "{what}");
            let grown = std::fs::metadata(&log).unwrap().len();
            assert_dense(&read_index(&idx), grown);
            assert!(!stale.exists(), "{what}: the mark of a stale index is left");
            let (entries, stderr) = peek(&root, &["--since", &(N - 1).to_string()]);
            assert_eq!(stderr, "");
            assert_eq!(ids(&entries), vec![N, N + 1], "{what}");
        }
    }
}

#[test]
fn entry_with_a_non_increasing_id_is_reported_and_skipped() {
    let root = channel_of(3);
    let log = root.channel(INST);
    let at = std::fs::metadata(&log).unwrap().len();
    let mut data = std::fs::read(&log).unwrap();
    data.extend_from_slice(&rendered(2, "a second #2"));
    std::fs::write(&log, &data).unwrap();
    let warning = |tool: &str| {
        format!(
            "{tool}: warning: channel.md: entry #2 at byte {at} skipped: id not greater than #3\n"
        )
    };
    for (args, want) in [
        (vec!["-n", "0"], vec![1, 2, 3]),
        (vec!["--since", "1"], vec![2, 3]),
        (vec!["--since", "3"], vec![]),
        (vec!["-n", "1"], vec![3]),
    ] {
        let (entries, stderr) = peek(&root, &args);
        assert_eq!(ids(&entries), want, "{args:?}");
        assert_eq!(stderr, warning("aw-peek"), "{args:?}");
    }
    // The next append skips it too, says so, and takes the next id.
    let out = root.run("aw-send", &["-i", INST, "four"], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "4\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), warning("aw-send"));
    for (args, want, warns) in [
        (vec!["-n", "0"], vec![1, 2, 3, 4], true),
        (vec!["--since", "2"], vec![3, 4], true),
        (vec!["--since", "3"], vec![4], false),
        (vec!["-n", "2"], vec![3, 4], true),
    ] {
        let (entries, stderr) = peek(&root, &args);
        assert_eq!(ids(&entries), want, "{args:?}");
        let want_err = if warns {
            warning("aw-peek")
        } else {
            String::new()
        };
        assert_eq!(stderr, want_err, "{args:?}");
    }
    // The same id as the last entry, at the end.
    let at = std::fs::metadata(&log).unwrap().len();
    let mut data = std::fs::read(&log).unwrap();
    data.extend_from_slice(&rendered(4, "a second #4"));
    std::fs::write(&log, &data).unwrap();
    let (entries, stderr) = peek(&root, &["--since", "4"]);
    assert_eq!(entries, vec![]);
    assert_eq!(
        stderr,
        format!(
            "aw-peek: warning: channel.md: entry #4 at byte {at} skipped: id not greater than #4\n"
        )
    );
    assert_eq!(root.send(INST, &[], "five"), 5);
}

/// Found by fuzzing (the `channel` target): after a torn entry whose tail is zeros, a whole
/// entry that does not start a line is not a header to a read of the log, but an index
/// record pointing at it made `aw-peek -n 1` and `--since` show it while `--all` did not.
#[test]
fn an_entry_that_does_not_start_a_line_is_not_read_through_the_index() {
    let root = channel_of(1);
    let log = root.channel(INST);
    let mut data = std::fs::read(&log).unwrap();
    let torn = rendered(2, "torn");
    data.extend_from_slice(&torn[..torn.len() - 6]);
    data.extend_from_slice(&[0; 7]);
    let hidden_at = data.len() as u64;
    let hidden = rendered(3, "after the zeros");
    data.extend_from_slice(&hidden);
    std::fs::write(&log, &data).unwrap();
    let first = read_index(&index_path(&root))[0];
    write_index(
        &index_path(&root),
        &[first, (3, hidden_at, hidden.len() as u64)],
    );
    let (all, _) = peek(&root, &["--since", "0"]);
    assert_eq!(ids(&all), [1]);
    assert_eq!(ids(&peek(&root, &["-n", "1"]).0), [1]);
    assert_eq!(ids(&peek(&root, &["--since", "1"]).0), Vec::<u64>::new());
    // The next append writes after a separator; its entry and the first are read.
    assert_eq!(root.send(INST, &[], "next"), 2);
    assert_eq!(ids(&peek(&root, &["--since", "0"]).0), [1, 2]);
}

/// Found by fuzzing (the `channel` target): an index record naming, at the next id, a header
/// whose body is damaged made `--since` start there and show nothing, though a whole entry of
/// that id comes earlier in the log.
#[test]
fn a_record_naming_a_damaged_entry_hides_nothing() {
    let root = channel_of(2);
    let log = root.channel(INST);
    let mut data = std::fs::read(&log).unwrap();
    let mut recs = read_index(&index_path(&root));
    let copy = rendered(2, "a damaged copy");
    let at = data.len() as u64;
    data.extend_from_slice(&copy);
    let body = data.len() - 4;
    data[body] ^= 1;
    std::fs::write(&log, &data).unwrap();
    recs[1] = (2, at, copy.len() as u64);
    write_index(&index_path(&root), &recs);
    let (all, _) = peek(&root, &["--since", "0"]);
    assert_eq!(ids(&all), [1, 2]);
    let (since, _) = peek(&root, &["--since", "1"]);
    assert_eq!(since, all[1..], "--since 1 differs from a full read");
}
