//! `aw-ctl doc ...`: read, write, append, create, list and remove documents; the owner.

use super::{Call, who};
use crate::cli::{self, Out};
use crate::document::{self, DEFAULT_DOCUMENT};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::registry::{self, Config};

/// Document content from stdin; a terminal is refused rather than waited on.
fn doc_stdin() -> Result<String> {
    if cli::stdin_is_tty() {
        return Err(Error::Usage("document content is read from stdin".into())
            .hint("pipe it in, or redirect a file with <"));
    }
    cli::read_stdin("document content", document::MAX_DOCUMENT, None)
}

/// The document an optional argument names: notes.md unless given.
fn file(args: &[&str]) -> String {
    args.first()
        .map_or(DEFAULT_DOCUMENT.to_string(), |s| s.to_string())
}

/// The instance of a command that may make it (write, append, create).
fn making(a: &Call) -> Result<Instance> {
    let inst = a.common.instance()?;
    inst.check_new(a.has("create"))?;
    Ok(inst)
}

/// `aw-ctl doc read [FILE]`.
pub(super) fn read(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let text = document::read(&inst, &file(args))?;
    out.raw(text.as_bytes())?;
    Ok(0)
}

/// What a command that writes stdin to a document does with it.
type Put = fn(&Instance, &str, &str, &str) -> Result<()>;

/// Write stdin to the document that `file` names, as [`who`] acts, with `put`.
fn put(a: &Call, file: &str, put: Put) -> Result<u8> {
    let inst = making(a)?;
    let who = who(a)?;
    document::resolve(&inst, file)?;
    let content = doc_stdin()?;
    put(&inst, file, &content, &who)?;
    Ok(0)
}

/// `aw-ctl doc write [FILE]`.
pub(super) fn write(_: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    put(a, &file(args), document::write)
}

/// `aw-ctl doc append [FILE]`.
pub(super) fn append(_: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    put(a, &file(args), document::append)
}

/// `aw-ctl doc create FILE`.
pub(super) fn create(_: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    put(a, args[0], document::create)
}

/// `aw-ctl doc list [PATTERN]`.
pub(super) fn list(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let json = a.has("json");
    let pattern = args.first().map(|p| crate::cli::pattern(p)).transpose()?;
    for d in document::list(&inst)? {
        if pattern
            .as_ref()
            .is_some_and(|p| !p.matches_with(&d, crate::cli::MATCH))
        {
            continue;
        }
        if json {
            out.line(&serde_json::json!({ "file": d }).to_string())?;
        } else {
            out.line(&d)?;
        }
    }
    Ok(0)
}

/// `aw-ctl doc rm FILE`.
pub(super) fn rm(_: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    document::remove(&inst, args[0], &who(a)?)?;
    Ok(0)
}

/// `aw-ctl doc owner [NAME | --clear]`: 1 when no owner is set.
pub(super) fn owner(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    match (args.first(), a.has("clear")) {
        (Some(name), _) => registry::set_document_owner(&inst, Some(name))?,
        (None, true) => registry::set_document_owner(&inst, None)?,
        (None, false) => match Config::load(&inst)?.document_owner {
            Some(o) => out.line(&o)?,
            None => return Ok(1),
        },
    }
    Ok(0)
}
