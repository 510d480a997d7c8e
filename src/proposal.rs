//! Proposals and votes (`_state/proposals.json`): elections, decisions, approvals and
//! assignments, resolved by plurality, majority or unanimity once a quorum has voted or when
//! they time out. Every change happens under the state lock; announcements are posted to the
//! channel while it is held, so each proposal is announced, resolved and closed exactly once
//! however many processes race. A proposal past its timeout is resolved or expired by the
//! next reader of proposals (the functions here), not by other tool calls.
//!
//! A binding election whose id starts with `doc-owner` chooses the document owner. So that no
//! agent can take ownership on its own, it offers only registered agents, needs a quorum of
//! at least a majority of them, only registered agents vote in it, and it installs an owner
//! only when one option leads once the quorum has voted: a tie or a timeout changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::names::{self, sanitize};
use crate::post::{self, PostOptions};
use crate::registry::{self, Registry};
use crate::state;

const FILE: &str = "proposals.json";

crate::keyword_enum! {
    /// A proposal's type (stored as `type`).
    pub enum Kind {
        Election = "election",
        Decision = "decision",
        Approval = "approval",
        Assignment = "assignment",
    }
}

crate::keyword_enum! {
    /// Where a proposal stands.
    pub enum Status {
        Active = "active",
        Resolved = "resolved",
        Expired = "expired",
        Cancelled = "cancelled",
    }
}

crate::keyword_enum! {
    /// How the votes decide (stored as `resolution.type`).
    #[derive(Default)]
    pub enum Rule {
        /// The option with the most votes wins.
        #[default]
        Plurality = "plurality",
        /// An option needs more than half of the votes.
        Majority = "majority",
        /// Every vote for one option.
        Unanimous = "unanimous",
    }
}

crate::keyword_enum! {
    /// How a plurality tie is broken (stored as `resolution.tieBreaker`).
    #[derive(Default)]
    pub enum TieBreaker {
        /// The first tied option, in option order.
        #[default]
        First = "first",
        /// A tied option picked by a hash of the proposal, the same in every process.
        Random = "random",
        /// The tied option the creator voted for, else the first.
        CreatorDecides = "creator-decides",
    }
}

/// The error for a name that is none of `valid`, calling it `what`.
fn unknown(what: &str, name: &str, valid: String) -> Error {
    Error::invalid(format!(
        "unknown {what} '{}' (valid: {valid})",
        sanitize(name)
    ))
}

impl FromStr for Kind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Kind> {
        Kind::from_name(s).ok_or_else(|| unknown("proposal type", s, Kind::names()))
    }
}

impl FromStr for Rule {
    type Err = Error;
    fn from_str(s: &str) -> Result<Rule> {
        Rule::from_name(s).ok_or_else(|| unknown("resolution type", s, Rule::names()))
    }
}

impl FromStr for TieBreaker {
    type Err = Error;
    fn from_str(s: &str) -> Result<TieBreaker> {
        TieBreaker::from_name(s).ok_or_else(|| unknown("tieBreaker", s, TieBreaker::names()))
    }
}

/// Longest timeout accepted, in seconds (one week).
pub const MAX_TIMEOUT: u64 = 7 * 24 * 3600;
/// Most options a proposal offers.
pub const MAX_OPTIONS: usize = 20;
/// Longest option id, in bytes.
pub const MAX_OPTION_ID: usize = 64;
/// Longest option label, in bytes.
pub const MAX_LABEL: usize = 200;
/// Longest title, in bytes.
pub const MAX_TITLE: usize = 200;
/// Longest description, in bytes.
pub const MAX_DESCRIPTION: usize = 4096;
/// Longest reason given with a vote, in bytes.
pub const MAX_REASON: usize = 1000;
/// Most proposals active at once in an instance.
pub const MAX_ACTIVE: usize = 50;
/// Ids of binding elections that choose the document owner start with this.
pub const OWNER_PREFIX: &str = "doc-owner";
const OWNER_STAYS: &str = "Document ownership stays as it was.";

/// Does a proposal of `kind` with this `id` choose the document owner when it is binding?
fn chooses_owner(kind: Kind, binding: bool, id: &str) -> bool {
    binding && kind == Kind::Election && id.starts_with(OWNER_PREFIX)
}

/// The smallest quorum of a document-owner election among `agents` registered agents: a
/// majority of them, so that no agent elects anyone on its own while others exist.
pub fn owner_quorum(agents: usize) -> u32 {
    (agents / 2 + 1) as u32
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub id: String,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Resolution {
    #[serde(rename = "type", default)]
    pub rule: Rule,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    #[serde(rename = "tieBreaker", default)]
    pub tie_breaker: TieBreaker,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    pub voter: String,
    pub choice: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: String,
}

/// One proposal as stored (and as returned by status calls, plus `counts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub options: Vec<Choice>,
    pub resolution: Resolution,
    /// Votes needed before the proposal resolves.
    pub quorum: u32,
    pub binding: bool,
    pub creator: String,
    pub created: String,
    /// Milliseconds since the epoch after which the proposal expires.
    #[serde(rename = "expiresAt", default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    pub status: Status,
    pub votes: Vec<Vote>,
    #[serde(default)]
    pub winner: Option<String>,
    /// How it ended: `quorum`, `timeout`, `tie-breaker:<rule>`, `tie` (a document-owner
    /// election), `no-majority`, `not-unanimous`, `no-votes`, `no-quorum` (a document-owner
    /// election that timed out), `cancelled`.
    #[serde(rename = "resolvedBy", default)]
    pub resolved_by: Option<String>,
}

impl Proposal {
    pub fn is_active(&self) -> bool {
        self.status == Status::Active
    }

    /// A binding election whose id starts with `doc-owner`: its winner becomes the document
    /// owner, and document writes wait while it is active.
    pub fn chooses_owner(&self) -> bool {
        chooses_owner(self.kind, self.binding, &self.id)
    }

    /// Votes per option id, every option present.
    pub fn counts(&self) -> BTreeMap<String, u32> {
        let mut c: BTreeMap<String, u32> = self.options.iter().map(|o| (o.id.clone(), 0)).collect();
        for v in &self.votes {
            *c.entry(v.choice.clone()).or_insert(0) += 1;
        }
        c
    }

    /// The structured form: the stored fields plus `counts`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("proposal serializes");
        v["counts"] = serde_json::to_value(self.counts()).expect("counts serialize");
        v
    }

    /// One line for humans.
    pub fn summary(&self) -> String {
        let counts = self.counts();
        let opts: Vec<String> = self
            .options
            .iter()
            .map(|o| format!("{}={}", o.id, counts.get(&o.id).copied().unwrap_or(0)))
            .collect();
        let mut s = format!(
            "{} [{}] {} \"{}\" by @{}: {} ({}/{} votes)",
            self.id,
            self.status,
            self.kind,
            self.title,
            self.creator,
            opts.join(" "),
            self.votes.len(),
            self.quorum
        );
        if let Some(w) = &self.winner {
            s.push_str(&format!(", winner {w}"));
        }
        if let Some(r) = &self.resolved_by {
            s.push_str(&format!(" ({r})"));
        }
        s
    }
}

/// The proposals file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Proposals {
    /// Number of the next generated id (`prop-N`).
    #[serde(default)]
    pub next: u64,
    pub proposals: Vec<Proposal>,
}

impl Proposals {
    pub fn load(inst: &Instance) -> Result<Proposals> {
        state::load(&inst.state_file(FILE))
    }

    pub fn get(&self, id: &str) -> Option<&Proposal> {
        self.proposals.iter().find(|p| p.id == id)
    }

    pub fn active(&self) -> impl Iterator<Item = &Proposal> {
        self.proposals.iter().filter(|p| p.is_active())
    }

    fn unknown(&self, id: &str) -> Error {
        let active: Vec<&str> = self.active().map(|p| p.id.as_str()).collect();
        Error::not_found(format!(
            "no proposal '{}' (active: {})",
            sanitize(id),
            if active.is_empty() {
                "none".to_string()
            } else {
                active.join(", ")
            }
        ))
    }
}

/// What to create, as the user gave it: [`create`] checks every field, the names of the type,
/// rule and tie-breaker included.
#[derive(Debug, Clone, Default)]
pub struct NewProposal {
    /// Wanted id (letters, digits, `-`, `_`); generated as `prop-N` when absent.
    pub id: Option<String>,
    /// A [`Kind`] name.
    pub kind: String,
    pub title: String,
    pub description: Option<String>,
    pub options: Vec<Choice>,
    /// A [`Rule`] name (default plurality).
    pub rule: Option<String>,
    /// Votes needed (default: the number of registered agents).
    pub quorum: Option<u32>,
    /// A [`TieBreaker`] name (default first).
    pub tie_breaker: Option<String>,
    pub binding: bool,
    pub timeout_seconds: Option<u64>,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn post_as(inst: &Instance, from: &str, text: &str) -> Result<()> {
    post::post(inst, from, text, &PostOptions::default()).map(|_| ())
}

fn valid_option_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// Refuse `text` when it is longer than `max` bytes, naming `what`.
fn check_len(what: &str, text: &str, max: usize) -> Result<()> {
    if text.len() > max {
        return Err(Error::invalid(format!(
            "{what} is {} bytes, over the limit of {max} bytes",
            text.len()
        )));
    }
    Ok(())
}

/// `kind` with its indefinite article.
fn a_kind(kind: Kind) -> String {
    let article = if kind.name().starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {kind}")
}

/// The options of `new`, or the defaults of its kind, checked and with clean labels.
fn options_of(new: &NewProposal, kind: Kind, reg: &Registry) -> Result<Vec<Choice>> {
    let agents_by_default =
        new.options.is_empty() && matches!(kind, Kind::Election | Kind::Assignment);
    let count = match new.options.len() {
        0 if agents_by_default => reg.agents.len(),
        0 if kind == Kind::Approval => 2,
        n => n,
    };
    if count < 2 {
        return Err(Error::invalid(format!(
            "{} needs at least two options{}",
            a_kind(kind),
            if agents_by_default {
                " (it defaults to the registered agents, and fewer than two are registered)"
            } else {
                ""
            }
        )));
    }
    if count > MAX_OPTIONS {
        return Err(Error::invalid(if agents_by_default {
            format!(
                "{} offers at most {MAX_OPTIONS} options, and it defaults to the {count} registered agents: name at most {MAX_OPTIONS} of them in options",
                a_kind(kind)
            )
        } else {
            format!(
                "{} offers at most {MAX_OPTIONS} options ({count} given)",
                a_kind(kind)
            )
        }));
    }
    let mut options = if agents_by_default {
        reg.agents
            .iter()
            .map(|a| Choice {
                id: a.name.clone(),
                label: format!("@{}", a.name),
            })
            .collect()
    } else if new.options.is_empty() {
        vec![
            Choice {
                id: "yes".into(),
                label: "Yes".into(),
            },
            Choice {
                id: "no".into(),
                label: "No".into(),
            },
        ]
    } else {
        new.options.clone()
    };
    let mut seen = BTreeSet::new();
    for o in options.iter_mut() {
        if !valid_option_id(&o.id) {
            return Err(Error::invalid(format!(
                "invalid option id '{}': use letters, digits, '-', '_', '.', '@'",
                sanitize(&o.id)
            )));
        }
        check_len(
            &format!("option id '{}'", sanitize(&o.id)),
            &o.id,
            MAX_OPTION_ID,
        )?;
        if !seen.insert(o.id.as_str()) {
            return Err(Error::invalid(format!("duplicate option id '{}'", o.id)));
        }
        check_len(
            &format!("the label of option '{}'", o.id),
            &o.label,
            MAX_LABEL,
        )?;
    }
    for o in options.iter_mut() {
        if o.label.trim().is_empty() {
            o.label = o.id.clone();
        }
        o.label = o.label.replace('\n', " ");
    }
    Ok(options)
}

/// A document-owner election offers only registered agents, and needs a quorum no single
/// agent meets on its own: at least a majority of the registered agents, at most all of them.
fn check_owner_election(reg: &Registry, options: &[Choice], quorum: u32) -> Result<()> {
    let agents = reg.names();
    if let Some(o) = options.iter().find(|o| !reg.contains(&o.id)) {
        return Err(Error::invalid(format!(
            "a document-owner election offers only registered agents, and '{}' is not one (agents: {})",
            sanitize(&o.id),
            agents.join(", ")
        )));
    }
    let n = agents.len();
    let min = owner_quorum(n);
    if quorum < min || quorum as usize > n {
        let range = if min as usize == n {
            format!("of {n}")
        } else {
            format!("between {min} and {n}")
        };
        return Err(Error::invalid(format!(
            "a document-owner election needs a quorum {range} (at least a majority of the {n} registered agents), not {quorum}"
        )));
    }
    Ok(())
}

/// Create a proposal as `creator` and announce it with `[PROPOSAL:id]`, mentioning every
/// registered agent.
pub fn create(inst: &Instance, creator: &str, new: NewProposal) -> Result<Proposal> {
    names::check_agent(creator)?;
    refresh(inst)?;
    let kind: Kind = new.kind.parse()?;
    let title = new.title.trim();
    if title.is_empty() || title.contains('\n') {
        return Err(Error::invalid("a proposal needs a one-line title"));
    }
    check_len("the title", title, MAX_TITLE)?;
    let description = new.description.as_deref().filter(|d| !d.trim().is_empty());
    if let Some(d) = description
        && d.len() > MAX_DESCRIPTION
    {
        return Err(Error::invalid(format!(
            "the description is {} bytes, over the limit of {MAX_DESCRIPTION} bytes",
            d.len()
        ))
        .hint("put longer text in a document or a resource and name it"));
    }
    let resolution = Resolution {
        rule: new
            .rule
            .as_deref()
            .map_or(Ok(Rule::default()), str::parse)?,
        quorum: new.quorum,
        tie_breaker: new
            .tie_breaker
            .as_deref()
            .map_or(Ok(TieBreaker::default()), str::parse)?,
    };
    if let Some(t) = new.timeout_seconds
        && (t == 0 || t > MAX_TIMEOUT)
    {
        return Err(Error::invalid(format!(
            "timeoutSeconds must be between 1 and {MAX_TIMEOUT}"
        )));
    }
    if let Some(id) = &new.id
        && (!names::is_instance_name(id) || id.starts_with('-'))
    {
        return Err(Error::invalid(format!(
            "invalid proposal id '{}': use letters, digits, '-' and '_'",
            sanitize(id)
        )));
    }
    let reg = Registry::load(inst)?;
    let options = options_of(&new, kind, &reg)?;
    let voters = reg.names();
    let quorum = match resolution.quorum {
        Some(0) => return Err(Error::invalid("quorum must be at least 1")),
        Some(q) => q,
        None => (voters.len() as u32).max(1),
    };
    if let Some(id) = &new.id
        && chooses_owner(kind, new.binding, id)
    {
        check_owner_election(&reg, &options, quorum)?;
    }
    state::update(inst, FILE, |all: &mut Proposals| {
        if all.active().count() >= MAX_ACTIVE {
            return Err(Error::denied(format!(
                "the instance has {MAX_ACTIVE} active proposals, the most it may have"
            ))
            .hint("vote on them, or cancel one you created"));
        }
        let id = match &new.id {
            Some(id) => {
                if all.get(id).is_some() {
                    return Err(Error::Exists(format!("proposal '{id}' already exists")));
                }
                id.clone()
            }
            None => loop {
                all.next += 1;
                let id = format!("prop-{}", all.next);
                if all.get(&id).is_none() {
                    break id;
                }
            },
        };
        let p = Proposal {
            id: id.clone(),
            kind,
            title: title.to_string(),
            description: description.map(str::to_string),
            options: options.clone(),
            resolution: resolution.clone(),
            quorum,
            binding: new.binding,
            creator: creator.to_string(),
            created: crate::time::now(),
            expires_at: new.timeout_seconds.map(|t| now_ms() + t as i64 * 1000),
            status: Status::Active,
            votes: Vec::new(),
            winner: None,
            resolved_by: None,
        };
        let mut text = format!("[PROPOSAL:{id}] {} ({})\n", p.title, p.kind);
        if !voters.is_empty() {
            text.push_str(
                &voters
                    .iter()
                    .map(|v| format!("@{v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            text.push('\n');
        }
        if let Some(d) = &p.description {
            text.push_str(d.trim_end());
            text.push('\n');
        }
        text.push_str("Options: ");
        text.push_str(
            &p.options
                .iter()
                .map(|o| {
                    if o.label == o.id {
                        o.id.clone()
                    } else {
                        format!("{} ({})", o.id, o.label)
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
        );
        text.push_str(&format!(
            "\nResolution: {}, quorum {}{}{}.\nVote with team_vote {{\"proposal\": \"{id}\", \"choice\": \"<option>\"}} or: aw-ctl vote {id} <option>",
            p.resolution.rule,
            p.quorum,
            if p.binding { ", binding" } else { "" },
            match new.timeout_seconds {
                Some(t) => format!(", closes in {t} s"),
                None => String::new(),
            }
        ));
        post_as(inst, creator, &text)?;
        all.proposals.push(p.clone());
        Ok(p)
    })
}

/// Record `voter`'s vote. Repeating the same vote is a no-op; changing it is refused.
/// Resolves the proposal when the quorum is reached.
pub fn vote(
    inst: &Instance,
    voter: &str,
    proposal: &str,
    choice: &str,
    reason: Option<&str>,
) -> Result<Proposal> {
    names::check_agent(voter)?;
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    if let Some(r) = reason {
        check_len("the reason", r, MAX_REASON)?;
    }
    inst.require()?;
    refresh(inst)?;
    state::update(inst, FILE, |all: &mut Proposals| {
        let unknown = all.unknown(proposal);
        let p = all
            .proposals
            .iter_mut()
            .find(|p| p.id == proposal)
            .ok_or(unknown)?;
        if !p.is_active() {
            return Err(Error::denied(format!(
                "proposal '{}' is {} and takes no more votes",
                p.id, p.status
            )));
        }
        if p.chooses_owner() && !Registry::load(inst)?.contains(voter) {
            return Err(Error::denied(format!(
                "only registered agents vote in {}, a document-owner election, and @{voter} is not one",
                p.id
            )));
        }
        let Some(opt) = p
            .options
            .iter()
            .find(|o| o.id == choice)
            .or_else(|| {
                p.options.iter().find(|o| {
                    o.id.eq_ignore_ascii_case(choice) || o.label.eq_ignore_ascii_case(choice)
                })
            })
            .map(|o| o.id.clone())
        else {
            return Err(Error::invalid(format!(
                "'{}' is not an option of {} (valid: {})",
                sanitize(choice),
                p.id,
                p.options
                    .iter()
                    .map(|o| o.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if let Some(v) = p.votes.iter().find(|v| v.voter == voter) {
            if v.choice == opt {
                return Ok(p.clone());
            }
            return Err(Error::denied(format!(
                "@{voter} already voted '{}' on {}; votes are final",
                v.choice, p.id
            )));
        }
        p.votes.push(Vote {
            voter: voter.to_string(),
            choice: opt.clone(),
            reason: reason.map(|r| r.replace('\n', " ")),
            at: crate::time::now(),
        });
        let mut text = format!("[VOTE:{}] {opt}", p.id);
        if let Some(r) = reason {
            text.push_str(" — ");
            text.push_str(&r.replace('\n', " "));
        }
        post_as(inst, voter, &text)?;
        if p.votes.len() as u32 >= p.quorum {
            close(inst, p, "quorum")?;
        }
        Ok(p.clone())
    })
}

/// Cancel a proposal; only its creator may.
pub fn cancel(inst: &Instance, who: &str, proposal: &str) -> Result<Proposal> {
    names::check_agent(who)?;
    inst.require()?;
    refresh(inst)?;
    state::update(inst, FILE, |all: &mut Proposals| {
        let unknown = all.unknown(proposal);
        let p = all
            .proposals
            .iter_mut()
            .find(|p| p.id == proposal)
            .ok_or(unknown)?;
        if p.creator != who {
            return Err(Error::denied(format!(
                "only the creator @{} may cancel {}",
                p.creator, p.id
            )));
        }
        if !p.is_active() {
            return Err(Error::denied(format!(
                "proposal '{}' is already {}",
                p.id, p.status
            )));
        }
        p.status = Status::Cancelled;
        p.resolved_by = Some("cancelled".into());
        post_as(inst, who, &format!("[CANCELLED:{}] {}", p.id, p.title))?;
        Ok(p.clone())
    })
}

/// Resolve or expire every active proposal whose timeout has passed. Every function here
/// that reads or changes proposals calls it first, so that a proposal past its timeout is
/// never seen as active; nothing else does. Cheap when nothing is due: the lock is taken
/// only when something is.
fn refresh(inst: &Instance) -> Result<()> {
    if !inst.exists() {
        return Ok(());
    }
    let now = now_ms();
    let due = |p: &Proposal| p.is_active() && p.expires_at.is_some_and(|e| e <= now);
    if !Proposals::load(inst)?.proposals.iter().any(due) {
        return Ok(());
    }
    state::update(inst, FILE, |all: &mut Proposals| {
        for p in all.proposals.iter_mut().filter(|p| due(p)) {
            if p.votes.is_empty() || p.chooses_owner() {
                // A document-owner election that times out is short of its quorum (reaching
                // it resolves at once): a lone vote never installs an owner.
                p.status = Status::Expired;
                let why = if p.votes.is_empty() {
                    p.resolved_by = Some("no-votes".into());
                    "no votes received".to_string()
                } else {
                    p.resolved_by = Some("no-quorum".into());
                    format!(
                        "quorum not reached ({} of {} votes)",
                        p.votes.len(),
                        p.quorum
                    )
                };
                let extra = if p.chooses_owner() {
                    format!(" {OWNER_STAYS}")
                } else {
                    String::new()
                };
                post_as(
                    inst,
                    "system",
                    &format!("[EXPIRED:{}] {}: {why}.{extra}", p.id, p.title),
                )?;
            } else {
                close(inst, p, "timeout")?;
            }
        }
        Ok(())
    })
}

/// Decide the outcome of `p` from its votes, mark it resolved, apply a binding result and
/// announce it. Called under the state lock.
fn close(inst: &Instance, p: &mut Proposal, trigger: &str) -> Result<()> {
    let (winner, how) = decide(p);
    p.status = Status::Resolved;
    p.winner = winner.clone();
    p.resolved_by = Some(match how {
        Some(h) => h,
        None => trigger.to_string(),
    });
    let counts = p.counts();
    let tally: Vec<String> = p
        .options
        .iter()
        .map(|o| format!("{} {}", o.id, counts.get(&o.id).copied().unwrap_or(0)))
        .collect();
    let mut text = format!("[RESOLVED:{}] {}: ", p.id, p.title);
    match &winner {
        Some(w) => text.push_str(&format!("{w} wins")),
        None => text.push_str("no winner"),
    }
    text.push_str(&format!(
        " ({}; {}).",
        tally.join(", "),
        p.resolved_by.as_deref().unwrap_or(trigger)
    ));
    if p.chooses_owner() {
        match &winner {
            Some(w) if Registry::load(inst)?.contains(w) => {
                registry::set_document_owner_locked(inst, w)?;
                text.push_str(&format!(" @{w} now owns the documents."));
            }
            Some(w) => text.push_str(&format!(
                " @{w} is not a registered agent any more. {OWNER_STAYS}"
            )),
            None => text.push_str(&format!(" {OWNER_STAYS}")),
        }
    }
    post_as(inst, "system", &text)
}

/// The winner (if any) and, when a rule other than the plain count decided, how.
fn decide(p: &Proposal) -> (Option<String>, Option<String>) {
    let counts = p.counts();
    let total = p.votes.len() as u32;
    if total == 0 {
        return (None, Some("no-votes".into()));
    }
    let top = counts.values().copied().max().unwrap_or(0);
    // Tied options in option order.
    let tied: Vec<&str> = p
        .options
        .iter()
        .filter(|o| counts.get(&o.id) == Some(&top))
        .map(|o| o.id.as_str())
        .collect();
    match p.resolution.rule {
        Rule::Majority => {
            if top * 2 > total {
                (tied.first().map(|s| s.to_string()), None)
            } else {
                (None, Some("no-majority".into()))
            }
        }
        Rule::Unanimous => {
            if top == total && tied.len() == 1 {
                (Some(tied[0].to_string()), None)
            } else {
                (None, Some("not-unanimous".into()))
            }
        }
        Rule::Plurality => {
            if tied.len() == 1 {
                return (Some(tied[0].to_string()), None);
            }
            if p.chooses_owner() {
                // Breaking the tie would let one agent's rule pick the owner.
                return (None, Some("tie".into()));
            }
            let rule = p.resolution.tie_breaker;
            let pick = match rule {
                TieBreaker::Random => {
                    // Seeded by the proposal and its votes: any process deciding the same
                    // tie picks the same option.
                    let h = crate::hash::fnv1a(format!("{}{}", p.id, p.created).as_bytes());
                    tied[(h % tied.len() as u64) as usize]
                }
                TieBreaker::CreatorDecides => p
                    .votes
                    .iter()
                    .find(|v| v.voter == p.creator && tied.contains(&v.choice.as_str()))
                    .map(|v| v.choice.as_str())
                    .unwrap_or(tied[0]),
                TieBreaker::First => tied[0],
            };
            (Some(pick.to_string()), Some(format!("tie-breaker:{rule}")))
        }
    }
}

/// The id of an active document-owner election (binding `election` whose id starts with
/// `doc-owner`), if any: while it runs, document writes are refused.
pub fn active_doc_owner_election(inst: &Instance) -> Result<Option<String>> {
    refresh(inst)?;
    let all = Proposals::load(inst)?;
    Ok(all
        .active()
        .find(|p| p.chooses_owner())
        .map(|p| p.id.clone()))
}

/// One proposal by id, after applying expiry.
pub fn status(inst: &Instance, id: &str) -> Result<Proposal> {
    refresh(inst)?;
    let all = Proposals::load(inst)?;
    all.get(id).cloned().ok_or_else(|| all.unknown(id))
}

/// All proposals (or only the active ones), after applying expiry.
pub fn list(inst: &Instance, active_only: bool) -> Result<Vec<Proposal>> {
    refresh(inst)?;
    let all = Proposals::load(inst)?;
    Ok(all
        .proposals
        .into_iter()
        .filter(|p| !active_only || p.is_active())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyword::assert_round_trips;

    #[test]
    fn keywords_round_trip_through_json() {
        assert_round_trips(Kind::ALL, |k| k.name(), Kind::from_name);
        assert_round_trips(Status::ALL, |s| s.name(), Status::from_name);
        assert_round_trips(Rule::ALL, |r| r.name(), Rule::from_name);
        assert_round_trips(TieBreaker::ALL, |t| t.name(), TieBreaker::from_name);
        assert_eq!(
            Kind::NAMES,
            ["election", "decision", "approval", "assignment"]
        );
        assert_eq!(
            Status::NAMES,
            ["active", "resolved", "expired", "cancelled"]
        );
        assert_eq!(Rule::NAMES, ["plurality", "majority", "unanimous"]);
        assert_eq!(TieBreaker::NAMES, ["first", "random", "creator-decides"]);
        assert_eq!(Rule::default(), Rule::Plurality);
        assert_eq!(TieBreaker::default(), TieBreaker::First);
    }

    #[test]
    fn unknown_names_are_refused_with_the_valid_ones() {
        let cases = [
            (
                "Election".parse::<Kind>().unwrap_err(),
                "unknown proposal type 'Election' (valid: election, decision, approval, assignment)",
            ),
            (
                "most\u{7}".parse::<Rule>().unwrap_err(),
                "unknown resolution type 'most?' (valid: plurality, majority, unanimous)",
            ),
            (
                "".parse::<TieBreaker>().unwrap_err(),
                "unknown tieBreaker '' (valid: first, random, creator-decides)",
            ),
        ];
        for (e, want) in cases {
            assert!(matches!(e, Error::Invalid(_)), "{e:?}");
            assert_eq!(e.to_string(), want);
        }
        assert_eq!(
            "creator-decides".parse::<TieBreaker>().unwrap(),
            TieBreaker::CreatorDecides
        );
    }

    #[test]
    fn a_stored_proposal_loads_and_saves_the_same() {
        let text = r#"{"next":1,"proposals":[{"id":"prop-1","type":"election","title":"t","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"resolution":{"type":"majority","quorum":2,"tieBreaker":"creator-decides"},"quorum":2,"binding":true,"creator":"alice","created":"c","expiresAt":5,"status":"resolved","votes":[{"voter":"alice","choice":"a","at":"c"}],"winner":"a","resolvedBy":"quorum"}]}"#;
        let all: Proposals = serde_json::from_str(text).unwrap();
        let p = &all.proposals[0];
        assert_eq!(
            (
                p.kind,
                p.status,
                p.resolution.rule,
                p.resolution.tie_breaker
            ),
            (
                Kind::Election,
                Status::Resolved,
                Rule::Majority,
                TieBreaker::CreatorDecides
            )
        );
        assert_eq!(serde_json::to_string(&all).unwrap(), text);
        // A resolution without a rule or a tie-breaker gets the defaults.
        let r: Resolution = serde_json::from_str("{}").unwrap();
        assert_eq!(r, Resolution::default());
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"type":"plurality","tieBreaker":"first"}"#
        );
    }
}
