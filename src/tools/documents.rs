//! The document and resource tools: `team_doc_*`, `document_suggest`, `resource_create` and
//! `resource_read`.

use serde_json::json;

use super::caller::{Caller, Reply};
use super::params;
use crate::document::{self, DEFAULT_DOCUMENT};
use crate::error::Result;
use crate::post::{self, PostOptions};
use crate::registry::Config;
use crate::resource;

pub(super) fn doc_read(s: &Caller, a: params::DocRead) -> Result<Reply> {
    let file = a.file.as_deref().unwrap_or(DEFAULT_DOCUMENT);
    let text = document::read(&s.inst, file)?;
    Ok(Reply::text(text))
}

pub(super) fn doc_write(s: &Caller, a: params::DocWrite, append: bool) -> Result<Reply> {
    let file = a.file.as_deref().unwrap_or(DEFAULT_DOCUMENT);
    let content = a.content.as_str();
    if append {
        document::append(&s.inst, file, content, &s.agent)?;
        Ok(Reply::text(format!(
            "Appended {} bytes to {file}.",
            content.len()
        )))
    } else {
        document::write(&s.inst, file, content, &s.agent)?;
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

pub(super) fn doc_create(s: &Caller, a: params::DocCreate) -> Result<Reply> {
    document::create(&s.inst, &a.file, &a.content, &s.agent)?;
    Ok(Reply::text(format!("Created {}.", a.file)))
}

pub(super) fn document_suggest(s: &Caller, a: params::DocumentSuggest) -> Result<Reply> {
    let suggestion = a.suggestion.as_str();
    let file = a.file.as_deref();
    if let Some(f) = file {
        document::resolve(&s.inst, f)?;
    }
    let reason = a.reason.as_deref();
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

pub(super) fn resource_create(s: &Caller, a: params::ResourceCreate) -> Result<Reply> {
    let content = a.content.as_str();
    let kind = a.kind.as_deref();
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

pub(super) fn resource_read(s: &Caller, a: params::ResourceRead) -> Result<Reply> {
    let (content, _kind) = resource::read(&s.inst, &a.id)?;
    Ok(Reply::text(content))
}
