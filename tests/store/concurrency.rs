//! Concurrent appends: 16 writers, each a loop of 500 `aw-send` processes, on one instance.
//! Every message arrives once, intact, with a unique id; ids are dense; the log and its index
//! agree.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Root, header_lines};

const WRITERS: usize = 16;
const PER_WRITER: usize = 500;

#[test]
fn sixteen_writers_five_hundred_sends_each() {
    let root = Root::new();
    let inst = "conc";
    // The instance does not exist yet: the first sends also race to create it.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let path = root.path().to_path_buf();
            std::thread::spawn(move || {
                let mut printed = Vec::with_capacity(PER_WRITER);
                for n in 0..PER_WRITER {
                    let text = format!("w{w} n{n}");
                    let out = common::tool("aw-send")
                        .arg("--root")
                        .arg(&path)
                        .args(["-i", inst, "-q", "-f", &format!("w{w}"), "--", &text])
                        .output()
                        .expect("spawn aw-send");
                    assert_eq!(
                        out.status.code(),
                        Some(0),
                        "aw-send {text:?}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    assert!(
                        out.stderr.is_empty(),
                        "aw-send {text:?} warned: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let id = common::parse_id(&String::from_utf8(out.stdout).unwrap());
                    printed.push((id, text));
                }
                printed
            })
        })
        .collect();
    // A reader runs meanwhile, without a lock: every read succeeds and returns a prefix of
    // the log, ids 1..=k, each a whole message of some writer.
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let path = root.path().to_path_buf();
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut reads = 0;
            let mut newest = 0;
            while !done.load(Ordering::Relaxed) {
                let out = common::tool("aw-peek")
                    .arg("--root")
                    .arg(&path)
                    .args(["-i", inst, "--json", "-n", "0"])
                    .output()
                    .expect("spawn aw-peek");
                let stderr = String::from_utf8_lossy(&out.stderr);
                match out.status.code() {
                    Some(0) => {}
                    // Before the first send, the instance may not exist yet.
                    Some(66) if newest == 0 => continue,
                    c => panic!("aw-peek during the writes: {c:?}: {stderr}"),
                }
                // A read that races with an append may see its first part only, and report
                // it as a torn final entry (aw-workflow(5), CAVEATS).
                for l in stderr.lines() {
                    assert!(l.starts_with("aw-peek: warning: "), "aw-peek: {l}");
                }
                let entries = common::parse_entries(&out.stdout);
                for (k, e) in entries.iter().enumerate() {
                    assert_eq!(e.id, k as u64 + 1, "a read during the writes: ids");
                    let (w, n) = e
                        .message
                        .strip_prefix('w')
                        .and_then(|s| s.split_once(" n"))
                        .unwrap_or_else(|| panic!("a read returned {:?}", e.message));
                    assert!(
                        w.parse::<usize>().is_ok_and(|w| w < WRITERS)
                            && n.parse::<usize>().is_ok_and(|n| n < PER_WRITER),
                        "a read returned {:?}",
                        e.message
                    );
                }
                assert!(entries.len() >= newest, "a later read returned less");
                newest = entries.len();
                reads += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            reads
        })
    };
    // id -> text, as printed by the writers.
    let mut printed: BTreeMap<u64, String> = BTreeMap::new();
    for (w, h) in writers.into_iter().enumerate() {
        let mine = h.join().expect("writer thread");
        // One writer's sends are sequential, so its ids increase.
        assert!(
            mine.windows(2).all(|p| p[0].0 < p[1].0),
            "ids of writer {w} do not increase"
        );
        for (id, text) in mine {
            if let Some(other) = printed.insert(id, text.clone()) {
                panic!("id {id} printed twice: for {other:?} and {text:?}");
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader thread");
    eprintln!("{reads} reads during the writes");
    let total = WRITERS * PER_WRITER;
    assert_eq!(printed.len(), total);

    let entries = root.entries(inst);
    assert_eq!(entries.len(), total, "entries in the channel");
    let ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
    let dense: Vec<u64> = (1..=total as u64).collect();
    assert_eq!(
        ids, dense,
        "ids 1..={total}, in order, no gap, no duplicate"
    );

    let mut texts = BTreeSet::new();
    for e in &entries {
        assert_eq!(
            printed.get(&e.id),
            Some(&e.message),
            "entry {} is not what aw-send printed that id for",
            e.id
        );
        let w = e
            .message
            .strip_prefix('w')
            .and_then(|s| s.split_once(' '))
            .map(|(w, _)| w)
            .unwrap_or_else(|| panic!("unexpected text {:?}", e.message));
        assert_eq!(e.from, format!("w{w}"), "sender of {:?}", e.message);
        assert!(e.mentions.is_empty());
        texts.insert(e.message.clone());
    }
    let expected: BTreeSet<String> = (0..WRITERS)
        .flat_map(|w| (0..PER_WRITER).map(move |n| format!("w{w} n{n}")))
        .collect();
    assert_eq!(texts, expected, "every text exactly once");

    let log = std::fs::read(root.channel(inst)).unwrap();
    assert_eq!(header_lines(&log), total, "lines beginning with '### '");

    // The index (aw-workflow(5)): one 24-byte record per entry, in log order, each pointing
    // at the header of its entry.
    let idx = std::fs::read(root.inst_dir(inst).join("_state/channel.idx")).unwrap();
    assert_eq!(idx.len(), total * 24, "index records");
    let mut end = 0u64;
    for (k, rec) in idx.chunks(24).enumerate() {
        let u = |i: usize| u64::from_le_bytes(rec[i..i + 8].try_into().unwrap());
        let (id, off, len) = (u(0), u(8), u(16));
        assert_eq!(id, k as u64 + 1, "index record {k}");
        assert_eq!(off, end, "entry {id} starts where the previous one ends");
        let head = &log[off as usize..];
        assert!(
            head.starts_with(b"### ")
                && head[..len as usize]
                    .windows(format!("] #{id} <").len())
                    .any(|w| w == format!("] #{id} <").as_bytes()),
            "index record of entry {id} does not point at its header"
        );
        end = off + len;
    }
    assert_eq!(end, log.len() as u64, "the index covers the whole log");
}
