//! Every tool's arguments as a typed struct: what the handler reads (through
//! [`args::parse`](super::args::parse), which refuses an argument a struct does not name) and
//! what the input schema shown to the model is made from (doc comments are the descriptions).

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_json::Value;

use super::args::{EntryId, Flag, Uint, must, uint};
use crate::proposal::{
    Choice, Kind, MAX_DESCRIPTION, MAX_LABEL, MAX_OPTION_ID, MAX_OPTIONS, MAX_REASON, MAX_TITLE,
    Rule, TieBreaker,
};
use crate::status::State;

/// Longest `my_inbox` wait, in seconds.
pub const MAX_WAIT_SECONDS: u64 = 120;

/// How long `channel_send` with `wait_for` waits for the reply unless told, in seconds.
pub const DEFAULT_REPLY_WAIT: u64 = 120;

/// Longest `channel_send` wait for a reply, in seconds: well under the 10 minutes a CLI agent
/// may stay silent before aw-run stops it.
pub const MAX_REPLY_WAIT: u64 = 300;

/// Longest `wait` for workers, in seconds (as for a reply to `channel_send`).
pub const MAX_COLLAB_WAIT: u64 = MAX_REPLY_WAIT;

/// How long `wait` waits unless told, in seconds.
pub const DEFAULT_COLLAB_WAIT: u64 = DEFAULT_REPLY_WAIT;

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelSend {
    /// Message text (Markdown); mention agents with @name
    pub message: String,
    /// An agent to ask: it is mentioned if the message does not already, and the call waits
    /// until it has handled the message and returns its reply. The agent must be served by a
    /// running aw-run.
    pub wait_for: Option<String>,
    /// With wait_for: give up after this many seconds (default 120, at most 300); the message
    /// stays sent
    #[schemars(range(min = 1, max = MAX_REPLY_WAIT))]
    pub wait_seconds: Option<Uint>,
}

/// Where `channel_read` starts: after an entry id, or after a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    Id(u64),
    /// An ISO 8601 timestamp, as given (to be checked).
    Time(String),
}

impl<'de> Deserialize<'de> for Since {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Since, D::Error> {
        match Value::deserialize(d)? {
            Value::String(t) if t.contains('T') || t.contains(':') => Ok(Since::Time(t)),
            v => uint(&v, "a non-negative integer (an entry id)").map(Since::Id),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelRead {
    /// Only entries after this entry id (or after this ISO 8601 timestamp)
    #[schemars(with = "Option<EntryId>")]
    pub since: Option<Since>,
    /// At most this many entries (default 50): the newest, or the first ones after `since`
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<Uint>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MyInbox {
    /// When the inbox is empty, wait up to this many seconds for a new mention (default 0, at
    /// most 120)
    #[schemars(range(min = 0, max = MAX_WAIT_SECONDS))]
    pub wait_seconds: Option<Uint>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MyInboxAck {
    /// Entry id of the newest message you handled
    pub until: EntryId,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MyStatusSet {
    /// What you are working on (empty clears it)
    pub task: Option<String>,
    #[schemars(extend("enum" = State::NAMES))]
    pub state: Option<String>,
    /// Free-form JSON object
    #[schemars(extend("type" = "object"))]
    pub metadata: Option<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TeamMembers {
    /// Include state, task and unread count
    #[serde(rename = "includeStatus")]
    pub include_status: Option<Flag>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocRead {
    /// Document path relative to the documents folder, e.g. notes.md or findings/auth.md
    /// (default: notes.md)
    pub file: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocWrite {
    pub content: String,
    /// Document path relative to the documents folder, e.g. notes.md or findings/auth.md
    /// (default: notes.md)
    pub file: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocCreate {
    /// Path relative to the documents folder, e.g. findings/auth.md
    pub file: String,
    pub content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentSuggest {
    /// The change to make
    pub suggestion: String,
    /// Document path relative to the documents folder, e.g. notes.md or findings/auth.md
    /// (default: notes.md)
    pub file: Option<String>,
    /// Why the change is needed
    pub reason: Option<String>,
}

/// The options of a proposal: each `{id, label}` or a bare id, its own label.
#[derive(Debug, Default)]
pub struct Choices(pub Vec<Choice>);

impl<'de> Deserialize<'de> for Choices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Choices, D::Error> {
        const FIELDS: &[&str] = &["id", "label"];
        let v = Value::deserialize(d)?;
        let Value::Array(items) = &v else {
            return Err(must(&v, "an array of {id, label}"));
        };
        let choice = |it: &Value| match it {
            Value::String(id) => Ok(Choice {
                id: id.clone(),
                label: id.clone(),
            }),
            Value::Object(o) => {
                if let Some(k) = o.keys().find(|k| !FIELDS.contains(&k.as_str())) {
                    return Err(de::Error::unknown_field(k, FIELDS));
                }
                let Some(Value::String(id)) = o.get("id") else {
                    return Err(message("every option needs a string 'id'"));
                };
                // A label that is not a string is the id, as a missing one.
                let label = match o.get("label") {
                    Some(Value::String(l)) => l.clone(),
                    _ => id.clone(),
                };
                Ok(Choice {
                    id: id.clone(),
                    label,
                })
            }
            _ => Err(message("options must be {id, label} objects")),
        };
        items
            .iter()
            .map(choice)
            .collect::<Result<_, _>>()
            .map(Choices)
    }
}

/// An error said as it is, wherever the argument is.
fn message<E: de::Error>(m: &'static str) -> E {
    E::custom(m)
}

// The schema of one option.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ChoiceSchema {
    #[schemars(length(max = MAX_OPTION_ID))]
    id: String,
    #[schemars(length(max = MAX_LABEL))]
    label: Option<String>,
}

// The schema of the options.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ChoicesSchema(#[schemars(length(max = MAX_OPTIONS))] Vec<ChoiceSchema>);

/// How a proposal resolves.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(
    deny_unknown_fields,
    expecting = "an object {type, quorum, tieBreaker}"
)]
pub struct Resolution {
    #[serde(rename = "type")]
    #[schemars(extend("enum" = Rule::NAMES))]
    pub rule: Option<String>,
    /// Votes needed to resolve (default: number of agents; a doc-owner election needs at
    /// least a majority of the agents)
    #[schemars(range(min = 1))]
    pub quorum: Option<Uint>,
    #[serde(rename = "tieBreaker")]
    #[schemars(extend("enum" = TieBreaker::NAMES))]
    pub tie_breaker: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalCreate {
    #[serde(rename = "type")]
    #[schemars(extend("enum" = Kind::NAMES))]
    pub kind: String,
    /// One line, at most 200 bytes
    #[schemars(length(max = MAX_TITLE))]
    pub title: String,
    /// Context for voters, at most 4096 bytes
    #[schemars(length(max = MAX_DESCRIPTION))]
    pub description: Option<String>,
    /// Choices as {id, label}: 2 to 20; ids of letters, digits, - _ . @ (at most 64 bytes),
    /// labels of at most 200 bytes
    #[schemars(with = "Option<ChoicesSchema>")]
    pub options: Option<Choices>,
    pub resolution: Option<Resolution>,
    /// Enforced by the system (an election with an id starting doc-owner sets the document
    /// owner)
    pub binding: Option<Flag>,
    /// Resolve with the votes so far (or expire without votes) after this many seconds
    #[serde(rename = "timeoutSeconds")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<Uint>,
    /// Optional proposal id (default prop-N)
    pub id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Vote {
    /// Proposal id
    pub proposal: String,
    /// Option id
    pub choice: String,
    /// Why, at most 1000 bytes
    #[schemars(length(max = MAX_REASON))]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalStatus {
    /// Proposal id (default: all active)
    pub proposal: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalCancel {
    pub proposal: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceCreate {
    pub content: String,
    /// Default markdown
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["markdown", "json", "text", "diff"]))]
    pub kind: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceRead {
    /// Resource id, e.g. res-0123456789abcdef
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnAgent {
    /// The worker's task, sent to it as your message
    pub prompt: String,
    /// Its agent name (default worker-N)
    pub name: Option<String>,
    /// How it runs (default: your own backend)
    #[schemars(extend("enum" = ["claude", "codex", "anthropic", "openai", "mock"]))]
    pub backend: Option<String>,
    /// Its model (default: yours, when the backend is yours)
    pub model: Option<String>,
    /// Its system prompt
    pub system_prompt: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendInput {
    /// The agent's name
    pub agent: String,
    /// Message text
    pub message: String,
}

/// Agent names: an array, or one name alone.
#[derive(Debug)]
pub struct Names(pub Vec<String>);

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Names, D::Error> {
        const WHAT: &str = "an array of agent names";
        let v = Value::deserialize(d)?;
        match &v {
            Value::String(n) => Ok(Names(vec![n.clone()])),
            Value::Array(items) => items
                .iter()
                .map(|x| match x {
                    Value::String(n) => Ok(n.clone()),
                    _ => Err(must(&v, WHAT)),
                })
                .collect::<Result<_, _>>()
                .map(Names),
            _ => Err(must(&v, WHAT)),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    /// Agent names
    #[schemars(with = "Vec<String>", length(min = 1))]
    pub agents: Names,
    /// Give up after this many seconds (default 120, at most 300) and return the states as
    /// they are
    #[schemars(range(min = 1, max = MAX_COLLAB_WAIT))]
    pub timeout_seconds: Option<Uint>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseAgent {
    /// The worker's name
    pub agent: String,
}

/// An out-of-range number for `what`, which must fit in a `u32`.
pub fn small(n: Option<Uint>, what: &str) -> crate::error::Result<Option<u32>> {
    n.map(|n| {
        u32::try_from(n.0)
            .map_err(|_| crate::error::Error::invalid(format!("'{what}' is out of range")))
    })
    .transpose()
}

/// Longest `lease_take` wait for the leases in the way, in seconds (as for a reply to
/// `channel_send`).
pub const MAX_LEASE_WAIT: u64 = MAX_REPLY_WAIT;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoardAdd {
    /// One line, at most 200 bytes
    #[schemars(length(max = crate::board::MAX_TITLE))]
    pub title: String,
    /// What is to be done, how to tell it is done (Markdown)
    pub body: Option<String>,
    /// Ids of the cards this one waits for: it is ready once they are all done
    #[schemars(with = "Option<Vec<Uint>>")]
    pub after: Option<Vec<Uint>>,
    /// The agent it is meant for, or a pool of agents (default: whoever claims it)
    #[serde(rename = "for")]
    #[schemars(with = "Option<Vec<String>>")]
    pub assignee: Option<Names>,
    /// Words that sort the cards (letters, digits, - _ . / :)
    #[schemars(with = "Option<Vec<String>>")]
    pub labels: Option<Names>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoardClaim {
    /// The card to claim; without it, the next ready card (meant for you, else for anyone)
    pub id: Option<Uint>,
    /// Claim the next ready card (the default when no id is given)
    pub next: Option<Flag>,
    /// How long the claim lasts without renewal, in seconds (default 1800); claiming a card
    /// you hold again renews it
    #[schemars(range(min = 1))]
    pub ttl_seconds: Option<Uint>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoardDone {
    /// The card you finished
    pub id: Uint,
    /// What was done, for whoever reads the card next
    pub note: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoardList {
    /// Only the cards ready to be claimed
    pub ready: Option<Flag>,
    /// Only the cards you hold or that are meant for you
    pub mine: Option<Flag>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseTake {
    /// Paths or globs of the work tree (`src/a.rs`, `src/**`), relative to its top
    #[schemars(with = "Vec<String>", length(min = 1))]
    pub paths: Names,
    /// A shared lease: others may take shared leases on the same paths, not exclusive ones
    pub shared: Option<Flag>,
    /// How long the lease lasts, in seconds (default 1800)
    #[schemars(range(min = 1))]
    pub ttl_seconds: Option<Uint>,
    /// Why you lease them, shown to whoever they are in the way of
    pub reason: Option<String>,
    /// When another holds them, wait up to this many seconds for them (default 0: fail at
    /// once, at most 300)
    #[schemars(range(min = 0, max = MAX_LEASE_WAIT))]
    pub wait_seconds: Option<Uint>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRelease {
    /// The lease to release (L and a number)
    pub id: Option<String>,
    /// Release your leases that name one of these paths
    #[schemars(with = "Option<Vec<String>>")]
    pub paths: Option<Names>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Decide {
    /// The approval request's id, as in [APPROVAL #id]
    #[schemars(range(min = 1))]
    pub id: Uint,
    /// Why, at most 1000 bytes
    #[schemars(length(max = crate::approval::MAX_REASON))]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeRequest {
    /// The branch to merge (default: yours, aw/<instance>/<you>)
    pub branch: Option<String>,
    /// Wait until the request is served and return the outcome (default true, false when
    /// the team's aw-run serves the queue); false only queues it
    pub wait: Option<Flag>,
}
