//! What several targets share: a scratch directory of this process.

use std::path::PathBuf;

/// A directory of this process for files a target writes, in memory when `/dev/shm` is
/// there; emptied by the caller as it needs.
#[allow(dead_code)]
pub fn scratch(target: &str) -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("aw-fuzz-{target}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}
