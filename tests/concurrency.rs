//! Concurrent appends: 16 writers, each a loop of 500 `aw-send` processes, on one instance.
//! Every message arrives once, intact, with a unique id; ids are dense; the log and its index
//! agree.

mod common;

use std::collections::{BTreeMap, BTreeSet};

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
                        .args(["-i", inst, "-f", &format!("w{w}"), "--", &text])
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
