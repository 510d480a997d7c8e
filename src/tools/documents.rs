//! The document and resource tools: `team_doc_*`, `document_suggest`, `resource_create` and
//! `resource_read`.

use serde_json::json;

use super::args::{Args, req_str, str_arg};
use super::caller::{Caller, Reply};
use crate::document::{self, DEFAULT_DOCUMENT};
use crate::error::Result;
use crate::post::{self, PostOptions};
use crate::registry::Config;
use crate::resource;

fn file_arg(a: &Args) -> Result<String> {
    Ok(str_arg(a, "file")?.unwrap_or(DEFAULT_DOCUMENT).to_string())
}

pub(super) fn doc_read(s: &Caller, a: &Args) -> Result<Reply> {
    let file = file_arg(a)?;
    let text = document::read(&s.inst, &file)?;
    Ok(Reply::text(text))
}

pub(super) fn doc_write(s: &Caller, a: &Args, append: bool) -> Result<Reply> {
    let file = file_arg(a)?;
    let content = req_str(a, "content")?;
    if append {
        document::append(&s.inst, &file, content, &s.agent)?;
        Ok(Reply::text(format!(
            "Appended {} bytes to {file}.",
            content.len()
        )))
    } else {
        document::write(&s.inst, &file, content, &s.agent)?;
        Ok(Reply::text(format!(
            "Wrote {file} ({} bytes).",
            content.len()
        )))
    }
}

pub(super) fn doc_list(s: &Caller) -> Result<Reply> {
    let docs = if s.inst.exists() {
        document::list(&s.inst)?
    } else {
        Vec::new()
    };
    let text = if docs.is_empty() {
        "No documents.".to_string()
    } else {
        docs.join("\n")
    };
    Ok(Reply::with(text, json!({ "files": docs })))
}

pub(super) fn doc_create(s: &Caller, a: &Args) -> Result<Reply> {
    let file = req_str(a, "file")?;
    let content = req_str(a, "content")?;
    document::create(&s.inst, file, content, &s.agent)?;
    Ok(Reply::text(format!("Created {file}.")))
}

pub(super) fn document_suggest(s: &Caller, a: &Args) -> Result<Reply> {
    let suggestion = req_str(a, "suggestion")?;
    let file = str_arg(a, "file")?;
    if let Some(f) = file {
        document::resolve(&s.inst, f)?;
    }
    let reason = str_arg(a, "reason")?;
    let owner = Config::load(&s.inst)?.document_owner;
    let mut text = match &owner {
        Some(o) => format!("@{o} [DOC_SUGGEST]"),
        None => "[DOC_SUGGEST]".to_string(),
    };
    if let Some(f) = file {
        text.push_str(&format!(" in {f}"));
    }
    text.push('\n');
    text.push_str(suggestion);
    if let Some(r) = reason.filter(|r| !r.trim().is_empty()) {
        text.push_str("\nReason: ");
        text.push_str(r);
    }
    let posted = post::post(&s.inst, &s.agent, &text, &PostOptions::default())?;
    let reply = match &owner {
        Some(o) => format!("Suggestion sent to @{o} as #{}.", posted.entry.id),
        None => format!(
            "Suggestion posted as #{} (no document owner is set: you may also write documents directly).",
            posted.entry.id
        ),
    };
    Ok(Reply::with(
        reply,
        json!({"id": posted.entry.id, "owner": owner}),
    ))
}

pub(super) fn resource_create(s: &Caller, a: &Args) -> Result<Reply> {
    let content = req_str(a, "content")?;
    let kind = str_arg(a, "type")?;
    let id = resource::create(&s.inst, content, kind)?;
    let kind = kind.unwrap_or("markdown");
    Ok(Reply::with(
        format!(
            "Created resource {id} ({kind}, {} bytes); refer to it by its id.",
            content.len()
        ),
        json!({"id": id, "type": kind, "bytes": content.len()}),
    ))
}

pub(super) fn resource_read(s: &Caller, a: &Args) -> Result<Reply> {
    let (content, _kind) = resource::read(&s.inst, req_str(a, "id")?)?;
    Ok(Reply::text(content))
}
