//! The channel tells the truth about what is stored: a send whose entry reached the log
//! succeeds even when its index record could not be written, no id is ever given twice or
//! wrapped past the largest one, and a wrong index record or an out-of-order entry never makes
//! a reader skip entries in silence.

mod common;

use aw::channel::{Entry as AwEntry, render};
use common::{Entry, Root, assert_error, parse_entries};

const INST: &str = "default";
const DATAERR: i32 = 65;

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
