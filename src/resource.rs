//! Resources: long content stored once under `resources/` and referenced by id.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use crate::error::{Error, IoContext, Result};
use crate::instance::Instance;
use crate::names::sanitize;

/// Largest resource accepted, in bytes (16 MiB).
pub const MAX_RESOURCE: usize = 16 << 20;

/// Resource types and the file extension each is stored with.
pub const TYPES: [(&str, &str); 4] = [
    ("markdown", "md"),
    ("json", "json"),
    ("text", "txt"),
    ("diff", "diff"),
];

fn ext_of(kind: &str) -> Result<&'static str> {
    TYPES
        .iter()
        .find(|(t, _)| *t == kind)
        .map(|(_, e)| *e)
        .ok_or_else(|| {
            Error::invalid(format!(
                "unknown resource type '{}' (valid: {})",
                sanitize(kind),
                TYPES.map(|(t, _)| t).join(", ")
            ))
        })
}

/// Is `id` a well-formed resource id (`res-` and 16 hex digits)? Nothing else is ever used
/// as a file name, so an id cannot traverse.
pub fn is_id(id: &str) -> bool {
    id.len() == 20
        && id.starts_with("res-")
        && id[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = t
        ^ ((std::process::id() as u64) << 40)
        ^ N.fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e3779b97f4a7c15);
    // splitmix64 finaliser, so ids do not look sequential
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^= x >> 31;
    format!("res-{x:016x}")
}

/// The resources folder; refused when a symlink leads it outside the instance directory.
fn folder(inst: &Instance) -> Result<PathBuf> {
    let dir = inst.resources_dir();
    if let (Ok(base), Ok(real)) = (fs::canonicalize(inst.dir()), fs::canonicalize(&dir))
        && !real.starts_with(&base)
    {
        return Err(Error::denied(
            "resources: a symlink leads outside the instance directory",
        ));
    }
    Ok(dir)
}

/// Store `content` as a resource of `kind` (default `markdown`); returns its id.
pub fn create(inst: &Instance, content: &str, kind: Option<&str>) -> Result<String> {
    let ext = ext_of(kind.unwrap_or("markdown"))?;
    if content.is_empty() {
        return Err(Error::invalid("empty resource content"));
    }
    if content.contains('\0') {
        return Err(Error::invalid("resource content contains a NUL byte"));
    }
    if content.len() > MAX_RESOURCE {
        return Err(Error::invalid(format!(
            "resource is {} bytes, over the limit of {MAX_RESOURCE} bytes",
            content.len()
        )));
    }
    if ext == "json" && serde_json::from_str::<serde_json::Value>(content).is_err() {
        return Err(Error::invalid("resource of type json is not valid JSON"));
    }
    inst.create()?;
    let dir = inst.resources_dir();
    fs::create_dir_all(&dir).map_err(|e| Error::create(&dir, e))?;
    let dir = folder(inst)?;
    loop {
        let id = new_id();
        let path = dir.join(format!("{id}.{ext}"));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                f.write_all(content.as_bytes()).at(&path)?;
                f.sync_all().at(&path)?;
                return Ok(id);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::create(path, e)),
        }
    }
}

/// Read a resource: its content and type.
pub fn read(inst: &Instance, id: &str) -> Result<(String, &'static str)> {
    if !is_id(id) {
        return Err(Error::invalid(format!(
            "invalid resource id '{}': expected res- and 16 hex digits",
            sanitize(id)
        )));
    }
    inst.require()?;
    let dir = folder(inst)?;
    for (kind, ext) in TYPES {
        let path = dir.join(format!("{id}.{ext}"));
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(_) => continue,
        };
        if !meta.is_file() {
            return Err(Error::denied(format!(
                "resource '{id}' is not a regular file"
            )));
        }
        let bytes = fs::read(&path).at(&path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(format!("resource '{id}' is not valid UTF-8")))?;
        return Ok((text, kind));
    }
    Err(Error::not_found(format!("no such resource '{id}'")))
}
