//! The registry's name index as a test sees it: whether `_state/agents/` and
//! `_state/agents.stamp` mirror `_state/agents.json` exactly, and whether a process opened
//! a file (inotify's `IN_OPEN`, which a `stat` never raises).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

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

/// The index of the instance at `inst` mirrors its `agents.json` exactly: one file per
/// agent holding its record and no other file, and a stamp naming this `agents.json`, the
/// folder as it is, and this boot.
pub fn assert_exact(inst: &Path) {
    let state = inst.join("_state");
    let want = registered(inst);
    let folder = state.join("agents");
    let mut have = BTreeMap::new();
    for e in std::fs::read_dir(&folder).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let record: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap())
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        have.insert(name, record);
    }
    let want_files: BTreeMap<String, Value> = want
        .iter()
        .map(|(n, a)| (format!("{n}.json"), a.clone()))
        .collect();
    assert_eq!(have, want_files, "the files of _state/agents/");
    let stamp: Value =
        serde_json::from_slice(&std::fs::read(state.join("agents.stamp")).unwrap()).unwrap();
    assert_eq!(stamp["version"], 1, "{stamp}");
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
