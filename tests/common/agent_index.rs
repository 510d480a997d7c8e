//! The registry's name index as a test sees it: whether `_state/agents/` and
//! `_state/agents.stamp` mirror `_state/agents.json` exactly, and whether a process opened
//! a file (inotify's `IN_OPEN`, which a `stat` never raises).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use serde_json::{Value, json};

/// The identity the stamp gives a file: device, inode, size, modification and change times.
fn identity(path: &Path) -> Value {
    let m = std::fs::symlink_metadata(path).unwrap();
    json!([
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ])
}

/// The records of `agents.json` of the instance at `inst`, by name (the first of a name).
pub fn registered(inst: &Path) -> BTreeMap<String, Value> {
    let reg: Value =
        serde_json::from_slice(&std::fs::read(inst.join("_state/agents.json")).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    for a in reg["agents"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap().to_string();
        out.entry(name).or_insert_with(|| a.clone());
    }
    out
}

/// FNV-1a, 64 bits, of `bytes`: the hash aw-workflow(5) names for the index's buckets.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The number of buckets of a registry of `n` agents, as aw-workflow(5) gives it: the
/// smallest power of two at least n / 32.
fn buckets(n: usize) -> u64 {
    n.div_ceil(32).max(1).next_power_of_two() as u64
}

/// The file of the index that holds `name`'s record, as the stamp's number of buckets
/// places it.
pub fn bucket_file(inst: &Path, name: &str) -> PathBuf {
    let state = inst.join("_state");
    let stamp: Value =
        serde_json::from_slice(&std::fs::read(state.join("agents.stamp")).unwrap()).unwrap();
    let n = stamp["buckets"].as_u64().unwrap();
    let b = fnv1a(name.as_bytes()) % n;
    state.join("agents").join(format!("{b}.json"))
}

/// The record of `name` in the index's file of its bucket, if that file has one.
pub fn indexed(inst: &Path, name: &str) -> Option<Value> {
    let bytes = std::fs::read(bucket_file(inst, name)).ok()?;
    let bucket: Value = serde_json::from_slice(&bytes).unwrap();
    bucket.get(name).cloned()
}

/// The index of the instance at `inst` mirrors its `agents.json` exactly: the records of
/// the names of each bucket in one file, sorted by name, no file for an empty bucket and no
/// other file, and a stamp naming this `agents.json`, the folder as it is, this boot and
/// the number of buckets.
pub fn assert_exact(inst: &Path) {
    let state = inst.join("_state");
    let want = registered(inst);
    let listed = {
        let reg: Value =
            serde_json::from_slice(&std::fs::read(state.join("agents.json")).unwrap()).unwrap();
        reg["agents"].as_array().unwrap().len()
    };
    let n = buckets(listed);
    let folder = state.join("agents");
    let mut have = BTreeMap::new();
    for e in std::fs::read_dir(&folder).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let text = std::fs::read_to_string(e.path()).unwrap();
        let records: Value =
            serde_json::from_str(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
        // Sorted by name as written (a reader refuses another order).
        let names: Vec<&String> = records.as_object().unwrap().keys().collect();
        let at: Vec<usize> = names
            .iter()
            .map(|k| text.find(&format!("\"{k}\": {{")).unwrap())
            .collect();
        assert!(at.is_sorted(), "{name}: names out of order");
        have.insert(name, records);
    }
    let mut want_files: BTreeMap<String, Value> = BTreeMap::new();
    for (name, record) in &want {
        let file = format!("{}.json", fnv1a(name.as_bytes()) % n);
        let bucket = want_files.entry(file).or_insert_with(|| json!({}));
        bucket[name] = record.clone();
    }
    assert_eq!(have, want_files, "the files of _state/agents/");
    let stamp: Value =
        serde_json::from_slice(&std::fs::read(state.join("agents.stamp")).unwrap()).unwrap();
    assert_eq!(stamp["version"], 2, "{stamp}");
    assert_eq!(stamp["buckets"], n, "{stamp}");
    assert_eq!(
        stamp["registry"],
        identity(&state.join("agents.json")),
        "the stamp names agents.json as it is"
    );
    assert_eq!(
        stamp["folder"],
        identity(&folder),
        "the stamp names the folder as it is"
    );
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(stamp["boot"], boot.trim(), "the stamp names this boot");
}

/// Opens of one file, counted by inotify from the moment it is watched.
pub struct Opens {
    inotify: Inotify,
}

impl Opens {
    /// Watch the file at `path` (its inode: a file put in its place by rename is not
    /// watched).
    pub fn watch(path: &Path) -> Opens {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).unwrap();
        inotify.add_watch(path, AddWatchFlags::IN_OPEN).unwrap();
        Opens { inotify }
    }

    /// How many times the file was opened since the last call.
    pub fn count(&self) -> usize {
        let mut n = 0;
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            n += events
                .iter()
                .filter(|e| e.mask.contains(AddWatchFlags::IN_OPEN))
                .count();
        }
        n
    }
}
