//! Reading `context:`: the shared context's provider, its document owner and where its
//! channel and document live.

use crate::names::sanitize;
use crate::run::diagnostic::Spanned;
use crate::run::reader::{Reader, Use};
use crate::run::workflow::{Context, DEFAULT_CHANNEL, DocumentOwner, ELECTION, FileConfig};
use crate::run::yaml::{Kind, Node};
use crate::suggest::suggestion;

const CONTEXT_KEYS: [&str; 3] = ["provider", "documentOwner", "config"];
const CONFIG_KEYS: [&str; 3] = ["dir", "channel", "document"];

pub(super) fn read_context(r: &mut Reader, node: Option<&Node>, agents: &[&str]) -> Context {
    let Some(node) = node.filter(|n| !n.is_null()) else {
        return Context::default();
    };
    match node.boolean() {
        Ok(false) => return Context::Disabled,
        Ok(true) => {
            let msg = "expected false or a mapping, found true (leave context out for the default)";
            r.error(node.pos, "context", msg);
            return Context::default();
        }
        Err(_) => {}
    }
    if !matches!(node.kind, Kind::Map(_)) {
        let msg = format!("expected false or a mapping, found {}", node.type_name());
        r.error(node.pos, "context", &msg);
        return Context::default();
    }
    let Some(f) = r.fields(node, "context", &CONTEXT_KEYS) else {
        return Context::default();
    };
    let document_owner = f
        .get("documentOwner")
        .and_then(|n| read_owner(r, n, agents));
    let provider = f
        .get("provider")
        .and_then(|n| r.string(n, "context.provider"));
    match provider.as_ref().map(|p| p.value.as_str()) {
        None | Some("file") => Context::File {
            document_owner,
            config: f
                .get("config")
                .map(|n| read_config(r, n))
                .unwrap_or_default(),
        },
        Some("memory") => {
            if let Some((key, _)) = f.entry("config") {
                r.error(key.pos, "context.config", "only for provider file");
            }
            Context::Memory { document_owner }
        }
        Some(other) => {
            let msg = format!(
                "unknown provider '{}'{}; expected file or memory",
                sanitize(other),
                suggestion(other, ["file", "memory"])
            );
            r.error(
                provider.as_ref().map_or(node.pos, |p| p.pos),
                "context.provider",
                &msg,
            );
            Context::default()
        }
    }
}

fn read_owner(r: &mut Reader, node: &Node, agents: &[&str]) -> Option<Spanned<DocumentOwner>> {
    let path = "context.documentOwner";
    let name = r.name(node, path)?;
    if name.value == ELECTION {
        return Some(Spanned::new(DocumentOwner::Election, name.pos));
    }
    if !agents.contains(&name.value.as_str()) {
        let msg = format!(
            "'{}' is not an agent of this workflow{} (or write {ELECTION})",
            sanitize(&name),
            suggestion(&name, agents.iter().copied())
        );
        r.error(name.pos, path, &msg);
        return None;
    }
    Some(Spanned::new(DocumentOwner::Agent(name.value), name.pos))
}

fn read_config(r: &mut Reader, node: &Node) -> FileConfig {
    let path = "context.config";
    let Some(f) = r.fields(node, path, &CONFIG_KEYS) else {
        return FileConfig::default();
    };
    // The directory is needed before setup runs, so it sees no setup output.
    let before_setup = Use {
        before_task: Some(0),
        shell: false,
    };
    FileConfig {
        dir: f
            .get("dir")
            .and_then(|n| r.template(n, "context.config.dir", before_setup)),
        channel: f.get("channel").and_then(|n| {
            let path = "context.config.channel";
            let name = relative_name(r, n, path, false)?;
            if name.value != DEFAULT_CHANNEL {
                let why = format!(
                    "aw keeps the channel in {DEFAULT_CHANNEL}; no other name is supported"
                );
                r.error(name.pos, path, &why);
                return None;
            }
            Some(name)
        }),
        document: f
            .get("document")
            .and_then(|n| relative_name(r, n, "context.config.document", true)),
    }
}

/// A relative file name: no absolute path, no `.` or `..`, and no `/` unless `nested`.
fn relative_name(r: &mut Reader, node: &Node, path: &str, nested: bool) -> Option<Spanned<String>> {
    let name = r.name(node, path)?;
    let why = if name.starts_with('/') {
        "must be relative"
    } else if name
        .split('/')
        .any(|c| c == ".." || c == "." || c.is_empty())
    {
        "must not have empty, '.' or '..' components"
    } else if !nested && name.contains('/') {
        "must be a file name, without '/'"
    } else {
        return Some(name);
    };
    r.error(node.pos, path, why);
    None
}
