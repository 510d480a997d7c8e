//! Shared documents under `documents/`: validated relative paths, atomic writes, ownership.

use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fs::{Lock, atomic_write};
use crate::instance::Instance;
use crate::names::sanitize;
use crate::registry::Config;

/// The document read and written when none is named.
pub const DEFAULT_DOCUMENT: &str = "notes.md";

/// Largest document accepted, in bytes (16 MiB).
pub const MAX_DOCUMENT: usize = 16 << 20;

const MAX_PATH: usize = 1024;

/// Check a document name and return its path inside `documents/`. Refuses empty names,
/// absolute paths, `.`/`..` components, hidden (dot) components, NUL and control characters,
/// and any symlink on the way that leads outside the instance directory.
pub fn resolve(inst: &Instance, file: &str) -> Result<PathBuf> {
    let bad = |why: &str| {
        Err(Error::invalid(format!(
            "invalid document name '{}': {why}",
            sanitize(file)
        )))
    };
    if file.is_empty() {
        return bad("empty");
    }
    if file.len() > MAX_PATH {
        return bad("too long");
    }
    if file.contains('\0') {
        return bad("contains a NUL byte");
    }
    if file.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    if file.starts_with('/') {
        return bad("absolute paths are not allowed");
    }
    // `Path::components` drops a `.` inside a path, so look at the text for those.
    if file.split('/').any(|c| c == ".") {
        return bad("'.' components are not allowed");
    }
    for comp in Path::new(file).components() {
        match comp {
            Component::Normal(c) => {
                let c = c.to_string_lossy();
                if c.starts_with('.') {
                    return bad("hidden names (starting with '.') are private");
                }
                if c.len() > 255 {
                    return bad("a path component is over 255 bytes");
                }
            }
            Component::ParentDir => return bad("'..' is not allowed"),
            Component::CurDir => return bad("'.' components are not allowed"),
            _ => return bad("absolute paths are not allowed"),
        }
    }
    if file.ends_with('/') {
        return bad("names a directory");
    }
    let path = inst.documents_dir().join(file);
    check_inside(inst, &path, file)?;
    Ok(path)
}

/// Refuse when the existing part of `path` goes through a symlink that leads outside the
/// instance directory.
fn check_inside(inst: &Instance, path: &Path, shown: &str) -> Result<()> {
    let Ok(base) = fs::canonicalize(inst.dir()) else {
        return Ok(()); // instance not created yet: nothing on disk to follow
    };
    // The deepest existing ancestor (or the path itself).
    let mut probe = path.to_path_buf();
    loop {
        if fs::symlink_metadata(&probe).is_ok() {
            break;
        }
        if !probe.pop() {
            return Ok(());
        }
    }
    match fs::canonicalize(&probe) {
        Ok(real) if real.starts_with(&base) => Ok(()),
        Ok(_) => Err(Error::denied(format!(
            "document '{}': a symlink leads outside the instance directory",
            sanitize(shown)
        ))),
        // A dangling symlink: refuse, we cannot tell where a write would land.
        Err(_) => Err(Error::denied(format!(
            "document '{}': a dangling symlink is in the way",
            sanitize(shown)
        ))),
    }
}

/// Refuse a write by `who` unless it may write documents: the owner (when one is set), and
/// nobody while a document-owner election is active.
pub fn check_write(inst: &Instance, who: &str) -> Result<()> {
    if let Some(p) = crate::proposal::active_doc_owner_election(inst)? {
        return Err(Error::denied(format!(
            "document owner election in progress ({p}): vote, and write after it resolves"
        )));
    }
    let cfg = Config::load(inst)?;
    match cfg.document_owner {
        Some(owner) if owner != who => Err(Error::denied(format!(
            "only @{owner} may write documents (you are @{who}); use document_suggest to propose a change"
        ))),
        _ => Ok(()),
    }
}

fn check_content(content: &str) -> Result<()> {
    if content.contains('\0') {
        return Err(Error::invalid("document content contains a NUL byte"));
    }
    if content.len() > MAX_DOCUMENT {
        return Err(Error::invalid(format!(
            "document content is {} bytes, over the limit of {MAX_DOCUMENT} bytes",
            content.len()
        )));
    }
    Ok(())
}

fn docs_lock(inst: &Instance) -> Result<Lock> {
    inst.create()?;
    Lock::exclusive(&inst.state_file("documents.lock"))
}

fn make_parents(inst: &Instance, path: &Path) -> Result<()> {
    let parent = path.parent().unwrap_or(path);
    fs::create_dir_all(parent).map_err(|e| Error::create(parent, e))?;
    // Re-check now that the directories exist (a symlinked parent could have been created).
    check_inside(inst, path, &path.to_string_lossy())
}

/// Read a document.
pub fn read(inst: &Instance, file: &str) -> Result<String> {
    inst.require()?;
    let path = resolve(inst, file)?;
    match fs::read(&path) {
        Ok(b) => String::from_utf8(b)
            .map_err(|_| Error::invalid(format!("document '{file}' is not valid UTF-8"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::not_found(format!(
            "no such document '{}'",
            sanitize(file)
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => Err(Error::invalid(format!(
            "document '{}' is a directory",
            sanitize(file)
        ))),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Replace a document's content (creating it), as `who`.
pub fn write(inst: &Instance, file: &str, content: &str, who: &str) -> Result<()> {
    check_content(content)?;
    let path = resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    make_parents(inst, &path)?;
    atomic_write(&path, content.as_bytes())
}

/// Append to a document (creating it), as `who`.
pub fn append(inst: &Instance, file: &str, content: &str, who: &str) -> Result<()> {
    check_content(content)?;
    let path = resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    make_parents(inst, &path)?;
    let mut old = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(&path, e)),
    };
    if old.len() + content.len() > MAX_DOCUMENT {
        return Err(Error::invalid(format!(
            "document '{file}' would grow over the limit of {MAX_DOCUMENT} bytes"
        )));
    }
    old.extend_from_slice(content.as_bytes());
    atomic_write(&path, &old)
}

/// Create a new document; refuses (73) when it exists.
pub fn create(inst: &Instance, file: &str, content: &str, who: &str) -> Result<()> {
    check_content(content)?;
    let path = resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    if fs::symlink_metadata(&path).is_ok() {
        return Err(Error::Exists(format!(
            "document '{}' already exists",
            sanitize(file)
        )));
    }
    make_parents(inst, &path)?;
    atomic_write(&path, content.as_bytes())
}

/// Delete a document, as `who`.
pub fn remove(inst: &Instance, file: &str, who: &str) -> Result<()> {
    inst.require()?;
    let path = resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::not_found(format!(
            "no such document '{}'",
            sanitize(file)
        ))),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Does the symlink `p` lead to a regular file inside `base` (the instance directory)? Only
/// those are listed: a document that cannot be read is not one.
fn links_inside(p: &Path, base: &Path) -> bool {
    fs::canonicalize(p).is_ok_and(|real| real.starts_with(base) && real.is_file())
}

/// All documents, as sorted relative paths. Hidden files and symlinked directories are skipped;
/// a symlinked file is listed only when it leads to a file inside the instance.
pub fn list(inst: &Instance) -> Result<Vec<String>> {
    inst.require()?;
    let root = inst.documents_dir();
    let base = fs::canonicalize(inst.dir()).at(inst.dir())?;
    if let Ok(real) = fs::canonicalize(&root)
        && !real.starts_with(&base)
    {
        return Err(Error::denied(
            "documents: a symlink leads outside the instance directory",
        ));
    }
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&dir, e)),
        };
        for de in rd {
            let de = de.at(&dir)?;
            if de.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let ft = de.file_type().at(de.path())?;
            let p = de.path();
            if ft.is_dir() {
                stack.push(p);
            } else if (ft.is_file() || (ft.is_symlink() && links_inside(&p, &base)))
                && let Ok(rel) = p.strip_prefix(&root)
            {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}
