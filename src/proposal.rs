//! Proposals and votes (`_state/proposals.json`).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::instance::Instance;
use crate::state;

/// The stored form of a proposal (only what other modules read so far).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Proposal {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
}

/// The proposals file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Proposals {
    pub proposals: Vec<Proposal>,
}

/// The id of an active document-owner election (binding `election` whose id starts with
/// `doc-owner`), if any: while it runs, document writes are refused.
pub fn active_doc_owner_election(inst: &Instance) -> Result<Option<String>> {
    let all: Proposals = state::load(&inst.state_file("proposals.json"))?;
    Ok(all
        .proposals
        .into_iter()
        .find(|p| p.kind == "election" && p.id.starts_with("doc-owner") && p.status == "active")
        .map(|p| p.id))
}
