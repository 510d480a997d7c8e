//! The agent tools: the one definition of every tool an agent has, whichever front end
//! carries the call. `aw-mcp` serves them over stdio; the API backends of `aw-run` call them
//! in process. Neither front end knows the other; both go through [`call`].
//!
//! - [`catalogue`]: the tool names, descriptions and input schemas, the collab and delegate
//!   subsets ([`Toolset`]) and the [`INSTRUCTIONS`] for the model;
//! - [`args`]: reading a call's arguments;
//! - the handlers, by area: `messages` (channel and inbox), `team` (status, members),
//!   `documents` (documents and resources), `proposals`, `workers` (the collab tools);
//! - [`files`]: the built-in file tools of API agents, confined to one folder;
//! - [`client_config`]: how a client (Claude Code, Codex) starts `aw-mcp` for one agent.
//!
//! The tools work on the domain (channel, inbox, document, proposal, registry, collab);
//! every failure is an [`Error`] that the front end gives the model as a tool error.

pub mod args;
mod caller;
pub mod catalogue;
pub mod client_config;
mod documents;
pub mod files;
mod messages;
mod proposals;
mod team;
mod workers;

pub use caller::{Caller, Reply};
pub use catalogue::{INSTRUCTIONS, Tool, Toolset};

use crate::error::{Error, Result};
use args::Args;

/// Run one tool call as `s`: the tool named `name`, with the arguments `a`.
pub fn call(s: &Caller, name: &str, a: &Args) -> Result<Reply> {
    let tool: Tool = name.parse()?;
    if !s.tools.has(tool) {
        return Err(Error::not_found(format!(
            "tool '{name}' is not given to {}{}",
            s.agent,
            if tool.is_collab() {
                " (the collab tools need aw-mcp --collab)"
            } else {
                " (it only coordinates: delegate mode)"
            }
        )));
    }
    check_arguments(tool, a)?;
    match tool {
        Tool::ChannelSend => messages::channel_send(s, a),
        Tool::ChannelRead => messages::channel_read(s, a),
        Tool::MyInbox => messages::my_inbox(s, a),
        Tool::MyInboxAck => messages::my_inbox_ack(s, a),
        Tool::MyStatusSet => team::my_status_set(s, a),
        Tool::TeamMembers => team::team_members(s, a),
        Tool::TeamDocRead => documents::doc_read(s, a),
        Tool::TeamDocWrite => documents::doc_write(s, a, false),
        Tool::TeamDocAppend => documents::doc_write(s, a, true),
        Tool::TeamDocList => documents::doc_list(s),
        Tool::TeamDocCreate => documents::doc_create(s, a),
        Tool::DocumentSuggest => documents::document_suggest(s, a),
        Tool::TeamProposalCreate => proposals::proposal_create(s, a),
        Tool::TeamVote => proposals::vote(s, a),
        Tool::TeamProposalStatus => proposals::proposal_status(s, a),
        Tool::TeamProposalCancel => proposals::proposal_cancel(s, a),
        Tool::ResourceCreate => documents::resource_create(s, a),
        Tool::ResourceRead => documents::resource_read(s, a),
        Tool::SpawnAgent => workers::spawn_agent(s, a),
        Tool::SendInput => workers::send_input(s, a),
        Tool::Wait => workers::wait(s, a),
        Tool::CloseAgent => workers::close_agent(s, a),
    }
}

/// Refuse an argument that `tool`'s schema does not name (it forbids others), with the
/// near one the model may have meant, so that a misspelt option is never ignored.
fn check_arguments(tool: Tool, a: &Args) -> Result<()> {
    let known = catalogue::arguments(tool);
    let Some(unknown) = a.keys().find(|k| !known.contains(k)) else {
        return Ok(());
    };
    let near = crate::suggest::suggestion(unknown, known.iter().map(String::as_str));
    Err(Error::invalid(format!(
        "{}: unknown argument '{}'{near} (arguments: {}); nothing was done",
        tool.name(),
        crate::names::sanitize(unknown),
        match known.is_empty() {
            true => "none".to_string(),
            false => known.join(", "),
        }
    )))
}
