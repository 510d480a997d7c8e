//! Shared documents under `documents/`: validated relative paths, atomic writes, ownership.
//!
//! Documents are reached only through a descriptor of `documents/` (see
//! [`crate::fs::beneath`]): no symbolic link is ever followed, neither `documents/` itself nor
//! a folder or a file inside it, so no document operation can be led outside the instance,
//! not even by a folder swapped for a symlink while it runs. Only regular files are
//! documents: a FIFO, socket or device under a document name is refused without being read
//! (it is opened with `O_NONBLOCK` and checked with `fstat`), and left out of the list. No
//! read takes more than [`MAX_DOCUMENT`] + 1 bytes.

use std::path::{Component, Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::error::{Error, IoContext, Result};
use crate::fs::beneath::{Kind, instance_folder, is_symlink_error, read_capped};
use crate::fs::{Dir, Lock, atomic_write_at};
use crate::instance::Instance;
use crate::names::sanitize;
use crate::registry::Config;

/// The document read and written when none is named.
pub const DEFAULT_DOCUMENT: &str = "notes.md";

/// Largest document accepted, in bytes (16 MiB).
pub const MAX_DOCUMENT: usize = 16 << 20;

const MAX_PATH: usize = 1024;

/// Check a document name against the naming rules and return its path inside
/// `documents/` (for messages). Refuses empty names, absolute paths, `.`/`..` components,
/// hidden (dot) components, NUL and control characters; and, when the instance exists, a
/// symbolic link met on the way (the operation itself checks again, safely).
pub fn resolve(inst: &Instance, file: &str) -> Result<PathBuf> {
    check_name(file)?;
    if inst.exists()
        && let Some(docs) = open_documents(inst, false)?
        && let Some(place) = Place::open(docs, file, false)?
        && place.kind()? == Some(Kind::Symlink)
    {
        return Err(symlink_in_the_way(file));
    }
    Ok(inst.documents_dir().join(file))
}

fn check_name(file: &str) -> Result<()> {
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
    Ok(())
}

fn symlink_in_the_way(file: &str) -> Error {
    Error::denied(format!(
        "document '{}': a symbolic link is in the way (documents are never reached through one)",
        sanitize(file)
    ))
}

fn no_such(file: &str) -> Error {
    Error::not_found(format!("no such document '{}'", sanitize(file)))
}

/// Open `documents/` of `inst` without following a symlink; `None` when it is missing and
/// `create` is false.
fn open_documents(inst: &Instance, create: bool) -> Result<Option<Dir>> {
    instance_folder(inst.dir(), "documents", create)
}

/// Where a document lives: its open folder and its file name in it.
struct Place<'a> {
    dir: Dir,
    name: &'a str,
    file: &'a str,
}

impl<'a> Place<'a> {
    /// Open the folder of `file` beneath `docs` (creating it with `create`); `None` when
    /// it is missing and `create` is false.
    fn open(docs: Dir, file: &'a str, create: bool) -> Result<Option<Place<'a>>> {
        let (folder, name) = match file.rsplit_once('/') {
            Some((folder, name)) => (Some(folder), name),
            None => (None, file),
        };
        let dir = match folder {
            None => docs,
            Some(f) => {
                let opened = if create {
                    docs.dir_create(f)
                } else {
                    docs.dir(f)
                };
                match opened {
                    Ok(d) => d,
                    Err(e) if is_symlink_error(&e) => return Err(symlink_in_the_way(file)),
                    Err(e) if create => return Err(Error::create(docs.path().join(f), e)),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                        ) =>
                    {
                        return Ok(None);
                    }
                    Err(e) => return Err(Error::io(docs.path().join(f), e)),
                }
            }
        };
        Ok(Some(Place { dir, name, file }))
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join(self.name)
    }

    fn kind(&self) -> Result<Option<Kind>> {
        self.dir.kind(self.name.as_ref()).at(self.path())
    }

    /// Refuse anything but a regular file; `Ok(false)` when nothing is there.
    fn check_kind(&self, kind: Option<Kind>) -> Result<bool> {
        match kind {
            None => Ok(false),
            Some(Kind::File) => Ok(true),
            Some(Kind::Symlink) => Err(symlink_in_the_way(self.file)),
            Some(Kind::Dir) => Err(Error::invalid(format!(
                "document '{}' is a directory",
                sanitize(self.file)
            ))),
            Some(Kind::Other) => Err(Error::invalid(format!(
                "document '{}' is not a regular file",
                sanitize(self.file)
            ))),
        }
    }

    /// Does a document exist here? Refuses what is there but is not one.
    fn exists(&self) -> Result<bool> {
        self.check_kind(self.kind()?)
    }

    /// The content, or `None` when there is no such file. Opening never blocks (a FIFO) and
    /// reading stops after the size limit.
    fn read(&self) -> Result<Option<Vec<u8>>> {
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK;
        let mut f = match self.dir.open_file(self.name, flags, Mode::empty()) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if is_symlink_error(&e) => return Err(symlink_in_the_way(self.file)),
            Err(e) => return Err(Error::io(self.path(), e)),
        };
        self.check_kind(Some(Kind::of_file(&f).at(self.path())?))?;
        match read_capped(&mut f, MAX_DOCUMENT).at(self.path())? {
            Some(b) => Ok(Some(b)),
            None => Err(Error::invalid(format!(
                "document '{}' is over the limit of {MAX_DOCUMENT} bytes",
                sanitize(self.file)
            ))),
        }
    }

    fn replace(&self, data: &[u8]) -> Result<()> {
        atomic_write_at(&self.dir, self.name.as_ref(), data)
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

/// Open the place of `file` for a change, creating `documents/` and the folders on the way.
fn writable<'a>(inst: &Instance, file: &'a str) -> Result<Place<'a>> {
    // With `create`, both are always there; no panic if that ever changes.
    let docs = open_documents(inst, true)?.ok_or_else(|| no_such(file))?;
    Place::open(docs, file, true)?.ok_or_else(|| no_such(file))
}

/// Read a document.
pub fn read(inst: &Instance, file: &str) -> Result<String> {
    inst.require()?;
    check_name(file)?;
    let docs = open_documents(inst, false)?.ok_or_else(|| no_such(file))?;
    let place = Place::open(docs, file, false)?.ok_or_else(|| no_such(file))?;
    let bytes = place.read()?.ok_or_else(|| no_such(file))?;
    String::from_utf8(bytes)
        .map_err(|_| Error::invalid(format!("document '{}' is not valid UTF-8", sanitize(file))))
}

/// Replace a document's content (creating it), as `who`.
pub fn write(inst: &Instance, file: &str, content: &str, who: &str) -> Result<()> {
    check_content(content)?;
    resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    let place = writable(inst, file)?;
    place.exists()?;
    place.replace(content.as_bytes())
}

/// Append to a document (creating it), as `who`.
pub fn append(inst: &Instance, file: &str, content: &str, who: &str) -> Result<()> {
    check_content(content)?;
    resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    let place = writable(inst, file)?;
    let mut old = place.read()?.unwrap_or_default();
    if old.len() + content.len() > MAX_DOCUMENT {
        return Err(Error::invalid(format!(
            "document '{}' would grow over the limit of {MAX_DOCUMENT} bytes",
            sanitize(file)
        )));
    }
    old.extend_from_slice(content.as_bytes());
    place.replace(&old)
}

/// Create a new document; refuses (73) when it exists.
pub fn create(inst: &Instance, file: &str, content: &str, who: &str) -> Result<()> {
    check_content(content)?;
    resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    let place = writable(inst, file)?;
    if place.exists()? {
        return Err(Error::Exists(format!(
            "document '{}' already exists",
            sanitize(file)
        )));
    }
    place.replace(content.as_bytes())
}

/// Delete a document, as `who`.
pub fn remove(inst: &Instance, file: &str, who: &str) -> Result<()> {
    inst.require()?;
    resolve(inst, file)?;
    check_write(inst, who)?;
    let _l = docs_lock(inst)?;
    let docs = open_documents(inst, false)?.ok_or_else(|| no_such(file))?;
    let place = Place::open(docs, file, false)?.ok_or_else(|| no_such(file))?;
    if !place.exists()? {
        return Err(no_such(file));
    }
    place.dir.unlink(place.name.as_ref()).at(place.path())?;
    place.dir.sync().at(place.dir.path())
}

/// All documents, as sorted relative paths. Only regular files are listed, and only under
/// names the rules accept: hidden names, symlinks (to files or folders), special files and
/// anything below a symlinked folder are left out.
pub fn list(inst: &Instance) -> Result<Vec<String>> {
    inst.require()?;
    let mut out = Vec::new();
    if let Some(docs) = open_documents(inst, false)? {
        list_in(&docs, "", &mut out)?;
    }
    out.sort();
    Ok(out)
}

/// Add the documents in `dir` (whose path in `documents/` is `prefix`) to `out`.
fn list_in(dir: &Dir, prefix: &str, out: &mut Vec<String>) -> Result<()> {
    for (name, kind) in dir.entries().at(dir.path())? {
        let Some(name) = name.to_str() else { continue };
        let rel = format!("{prefix}{name}");
        if name.starts_with('.') || check_name(&rel).is_err() {
            continue;
        }
        match kind {
            Kind::File => out.push(rel),
            // A folder that vanished or was swapped for a symlink meanwhile is skipped.
            Kind::Dir => {
                if let Ok(sub) = dir.dir(name) {
                    list_in(&sub, &format!("{rel}/"), out)?;
                }
            }
            Kind::Symlink | Kind::Other => {}
        }
    }
    Ok(())
}
