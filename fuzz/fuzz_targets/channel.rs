//! The channel reader: a fuzzed log (`channel.md`) with a fuzzed index (`_state/channel.idx`)
//! read every way the tools read it, then appended to.
//!
//! Input: one byte of flags, `after`, `n`, a record count k (at most 16), k index records of
//! 6 bytes (id, offset, length: little-endian u16 each, written out as the 24-byte records),
//! then the log. Checked: no panic; ids strictly increase; whatever the index says, a read
//! from it gives what a read of the whole log gives (`read_since`, `tail`, `last_id`); an
//! append keeps every entry and gives the next id, and the log reads back with it.
//!
//! A log that holds an id twice or out of order (which aw never writes) with an index that
//! names the later copy is checked for order and bounds only: the index is trusted for
//! where to start (and for the last id an append follows), and finding the earlier copy
//! would take a read of the whole log.
#![no_main]

use std::sync::OnceLock;

use aw::channel::{Channel, Damage, Entry};
use aw::instance::{Instance, Root};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fn instance() -> &'static Instance {
    static INST: OnceLock<Instance> = OnceLock::new();
    INST.get_or_init(|| {
        let root = Root::new(common::scratch("channel"));
        let inst = root.instance("fuzz").expect("instance name");
        inst.create().expect("instance directory");
        inst
    })
}

fn ids(entries: &[Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.id).collect()
}

/// Ids strictly increasing, all over `after`.
fn in_order(entries: &[Entry], after: u64) {
    let ids = ids(entries);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in order: {ids:?}");
    assert!(
        ids.iter().all(|&id| id > after),
        "ids over {after}: {ids:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (flags, after, n, k) = (
        data[0],
        data[1] as u64,
        data[2] as usize,
        data[3] as usize % 17,
    );
    let rest = &data[4..];
    let Some(records) = rest.get(..6 * k) else {
        return;
    };
    let log = &rest[6 * k..];
    let mut index = Vec::with_capacity(24 * k);
    for r in records.chunks(6) {
        for f in r.chunks(2) {
            index.extend_from_slice(&(u16::from_le_bytes([f[0], f[1]]) as u64).to_le_bytes());
        }
    }
    // A torn record at the end, sometimes.
    if flags & 1 != 0 && !index.is_empty() {
        index.pop();
    }

    let inst = instance();
    std::fs::write(inst.channel_path(), log).unwrap();
    std::fs::write(inst.state_file("channel.idx"), &index).unwrap();
    let _ = std::fs::remove_file(inst.state_file("channel.idx.stale"));
    let ch = Channel::new(inst);

    // The whole log, without the index.
    std::fs::remove_file(inst.state_file("channel.idx")).unwrap();
    let whole = ch.read_all().expect("read_all");
    let exact = !whole
        .damage
        .iter()
        .any(|d| matches!(d, Damage::OutOfOrder { .. }));
    let all = whole.entries;
    let all_ids = ids(&all);
    assert!(
        all_ids.windows(2).all(|w| w[0] < w[1]),
        "ids in order: {all_ids:?}"
    );
    std::fs::write(inst.state_file("channel.idx"), &index).unwrap();

    // Through the index.
    let since = ch.read_since(after).expect("read_since").entries;
    let tail = ch.tail(n).expect("tail").entries;
    let last = ch.last_id().expect("last_id");
    if exact {
        let want: Vec<&Entry> = all.iter().filter(|e| e.id > after).collect();
        assert_eq!(
            since.iter().collect::<Vec<_>>(),
            want,
            "read_since({after})"
        );
        assert_eq!(tail, all[all.len().saturating_sub(n)..], "tail({n})");
        assert_eq!(last, all.last().map_or(0, |e| e.id), "last_id");
    } else {
        in_order(&since, after);
        in_order(&tail, 0);
        assert!(tail.len() <= n);
    }

    // An append: every entry kept, the next id, and the log reads back with it.
    if flags & 2 != 0 {
        let mentions = if flags & 4 != 0 {
            vec!["b".to_string()]
        } else {
            Vec::new()
        };
        let (e, _damage) = ch
            .append("a", "###\n\\fuzz\n", mentions, false)
            .expect("append");
        assert!(e.id > last, "appended #{} after #{last}", e.id);
        assert_eq!(e.message, "###\n\\fuzz\n");
        let again = ch.read_all().expect("read_all after append").entries;
        if exact {
            assert_eq!(
                again.last(),
                Some(&e),
                "the appended entry is read back last"
            );
        }
        // An append only adds: every entry read before is still read.
        for old in &all {
            assert!(
                again.contains(old),
                "entry #{} kept after an append",
                old.id
            );
        }
        let since = ch
            .read_since(after)
            .expect("read_since after append")
            .entries;
        if exact {
            let want: Vec<&Entry> = again.iter().filter(|x| x.id > after).collect();
            assert_eq!(
                since.iter().collect::<Vec<_>>(),
                want,
                "read_since({after}) after append"
            );
        } else {
            in_order(&since, after);
        }
    }
});
