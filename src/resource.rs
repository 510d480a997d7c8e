//! Resources: long content stored once under `resources/` and referenced by id.
//!
//! `resources/` is opened without following a symlink, and each resource is opened from its
//! descriptor with `O_NOFOLLOW` (created with `O_EXCL` as well): a symlink there is refused,
//! never followed. Only regular files are resources; no read takes more than
//! [`MAX_RESOURCE`] + 1 bytes.

use std::io::Write;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::error::{Error, IoContext, Result};
use crate::fs::beneath::{Kind, instance_folder, is_symlink_error, read_capped};
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
    let dir = instance_folder(inst.dir(), "resources", true)?
        .ok_or_else(|| Error::not_found("resources/ is missing"))?;
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
    loop {
        let id = new_id();
        let name = format!("{id}.{ext}");
        let path = dir.path().join(&name);
        match dir.open_file(&name, flags, Mode::from_bits_truncate(0o666)) {
            Ok(mut f) => {
                f.write_all(content.as_bytes()).at(&path)?;
                f.sync_all().at(&path)?;
                dir.sync().at(dir.path())?;
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
    let missing = || Error::not_found(format!("no such resource '{id}'"));
    let dir = instance_folder(inst.dir(), "resources", false)?.ok_or_else(missing)?;
    for (kind, ext) in TYPES {
        let name = format!("{id}.{ext}");
        let path = dir.path().join(&name);
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK;
        let mut f = match dir.open_file(&name, flags, Mode::empty()) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if is_symlink_error(&e) => {
                return Err(Error::denied(format!(
                    "resource '{id}' is a symbolic link, which is never followed"
                )));
            }
            Err(e) => return Err(Error::io(path, e)),
        };
        if Kind::of_file(&f).at(&path)? != Kind::File {
            return Err(Error::invalid(format!(
                "resource '{id}' is not a regular file"
            )));
        }
        let Some(bytes) = read_capped(&mut f, MAX_RESOURCE).at(&path)? else {
            return Err(Error::invalid(format!(
                "resource '{id}' is over the limit of {MAX_RESOURCE} bytes"
            )));
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(format!("resource '{id}' is not valid UTF-8")))?;
        return Ok((text, kind));
    }
    Err(missing())
}
