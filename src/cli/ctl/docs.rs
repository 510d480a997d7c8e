//! `aw-ctl doc ...`: read, write, append, create, list and remove documents; the owner.

use super::{Args, who};
use crate::cli::{self, Out};
use crate::document::{self, DEFAULT_DOCUMENT};
use crate::error::{Error, Result};
use crate::names;
use crate::registry::{self, Config};

/// Document content from stdin; a terminal is refused rather than waited on.
fn doc_stdin() -> Result<String> {
    if cli::stdin_is_tty() {
        return Err(Error::Usage("document content is read from stdin".into())
            .hint("pipe it in, or redirect a file with <"));
    }
    cli::read_stdin("document content", document::MAX_DOCUMENT, None)
}

pub(super) fn doc(out: &mut Out, a: &Args, rest: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    if matches!(rest.first(), Some(&("write" | "append" | "create"))) {
        inst.check_new(a.create)?;
    }
    let file = |f: Option<&&str>| f.map_or(DEFAULT_DOCUMENT.to_string(), |s| s.to_string());
    match rest {
        ["read"] | ["read", _] => {
            let text = document::read(&inst, &file(rest.get(1)))?;
            out.raw(text.as_bytes())?;
        }
        ["write"] | ["write", _] => {
            let who = who(a)?;
            let f = file(rest.get(1));
            document::resolve(&inst, &f)?;
            let content = doc_stdin()?;
            document::write(&inst, &f, &content, &who)?;
        }
        ["append"] | ["append", _] => {
            let who = who(a)?;
            let f = file(rest.get(1));
            document::resolve(&inst, &f)?;
            let content = doc_stdin()?;
            document::append(&inst, &f, &content, &who)?;
        }
        ["create", f] => {
            let who = who(a)?;
            document::resolve(&inst, f)?;
            let content = doc_stdin()?;
            document::create(&inst, f, &content, &who)?;
        }
        ["list"] | ["list", _] => {
            let pattern = rest.get(1).map(|p| crate::cli::pattern(p)).transpose()?;
            for d in document::list(&inst)? {
                if pattern
                    .as_ref()
                    .is_some_and(|p| !p.matches_with(&d, crate::cli::MATCH))
                {
                    continue;
                }
                if a.json {
                    out.line(&serde_json::json!({ "file": d }).to_string())?;
                } else {
                    out.line(&d)?;
                }
            }
        }
        ["rm", f] => document::remove(&inst, f, &who(a)?)?,
        ["owner"] if a.clear => {
            inst.require()?;
            registry::set_document_owner(&inst, None)?;
        }
        ["owner"] => {
            inst.require()?;
            match Config::load(&inst)?.document_owner {
                Some(o) => out.line(&o)?,
                None => return Ok(1),
            }
        }
        ["owner", name] => {
            inst.require()?;
            registry::set_document_owner(&inst, Some(name))?;
        }
        [] => {
            return Err(Error::Usage("doc: missing subcommand".into()).hint("see aw-ctl --help"));
        }
        [sub, ..] => {
            const SUBCOMMANDS: [&str; 7] =
                ["read", "write", "append", "create", "list", "rm", "owner"];
            return Err(Error::Usage(format!(
                "doc {}: unknown subcommand or wrong arguments{}",
                names::sanitize(sub),
                crate::suggest::suggestion(sub, SUBCOMMANDS)
            ))
            .hint("see aw-ctl --help"));
        }
    }
    Ok(0)
}
