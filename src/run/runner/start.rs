//! What happens once the controllers run and before the work is waited for: the binding
//! document-owner election, if the workflow asks for one, then the kickoff; and before them
//! the cards that seed the board.

use std::time::Duration;

use crate::error::Result;
use crate::instance::Instance;
use crate::post::{self, PostOptions};
use crate::run::controller::Shared;
use crate::run::interpolate::Vars;
use crate::run::workflow::{CardDef, seeding_order};

/// How long the agents have to elect a document owner.
pub const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Add the cards of the workflow's `board:` to the board of `inst` when it holds no card
/// (a new instance: a rerun finds the cards and adds none), each after the cards it waits
/// for, made by `system`. How many were added.
pub(super) fn seed_board(inst: &Instance, cards: &[CardDef]) -> Result<usize> {
    if cards.is_empty() || !crate::board::list(inst)?.is_empty() {
        return Ok(0);
    }
    let mut ids = vec![0u64; cards.len()];
    for i in seeding_order(cards) {
        let c = &cards[i];
        let new = crate::board::NewCard {
            title: c.title.value.clone(),
            body: c.body.clone(),
            assignee: c.assignee.iter().map(|a| a.value.clone()).collect(),
            labels: c.labels.iter().map(|l| l.value.clone()).collect(),
            after: c.after.iter().map(|&j| ids[j]).collect(),
        };
        ids[i] = crate::board::add(inst, "system", new)?.id;
    }
    Ok(cards.len())
}

/// Start the binding document-owner election among `agents` (announced with a mention of
/// each); its id.
pub(super) fn start_election(inst: &Instance, agents: &[&str]) -> Result<String> {
    let id = format!(
        "{}-{}",
        crate::proposal::OWNER_PREFIX,
        chrono::Utc::now().timestamp_millis()
    );
    let new = crate::proposal::NewProposal {
        id: Some(id.clone()),
        kind: "election".to_string(),
        title: "Document owner election".to_string(),
        description: Some(
            "Elect the agent that maintains the workflow's documents: the winner alone may \
             write them. Vote with the vote tool."
                .to_string(),
        ),
        options: agents
            .iter()
            .map(|a| crate::proposal::Choice {
                id: a.to_string(),
                label: format!("@{a}"),
            })
            .collect(),
        rule: None,
        quorum: None,
        tie_breaker: None,
        binding: true,
        timeout_seconds: Some(ELECTION_TIMEOUT.as_secs()),
    };
    crate::proposal::create(inst, "system", new)?;
    Ok(id)
}

/// What happens once the controllers run: the document-owner election is waited for, then
/// the kickoff is posted.
#[derive(Default)]
pub(super) struct Start {
    pub(super) election: Option<String>,
    pub(super) kickoff: Option<String>,
    /// The tasks and the variables they start from.
    pub(super) tasks: Option<(Vec<crate::run::workflow::Task>, Vars)>,
    /// The iterations (`--iter`) and their task, instead of the kickoff.
    pub(super) iter: Option<(crate::run::iter::Plan, String)>,
}

impl Start {
    pub(super) fn begin(&self, inst: &Instance, shared: &Shared) -> Result<()> {
        if let Some(id) = &self.election {
            wait_election(inst, shared, id);
        }
        if let Some(text) = &self.kickoff {
            post::post(inst, "system", text, &PostOptions::default())?;
        }
        Ok(())
    }
}

/// Wait until the election `id` is over (or the run stops).
fn wait_election(inst: &Instance, shared: &Shared, id: &str) {
    loop {
        let active = crate::proposal::status(inst, id).is_ok_and(|p| p.is_active());
        let st = shared.lock();
        if !active || st.stopping {
            return;
        }
        let generation = st.generation;
        // A vote changes the channel; the expiry is checked at least once a second.
        let _ = shared
            .cv
            .wait_timeout_while(st, Duration::from_secs(1), |s| {
                s.generation == generation && !s.stopping
            });
    }
}
