//! A merge request, as its file holds it; queueing, listing, showing and cancelling.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::config::{Config, How, Needs};
use crate::error::{Error, Result as AwResult};
use crate::fs::records::{self, Record};
use crate::fs::{Lock, atomic_write};
use crate::holder::Holder;
use crate::instance::Instance;

/// The folder of the requests, under the instance.
pub const DIR: &str = "merges";

/// The counter of ids, in the folder of the requests.
const COUNTER: &str = ".counter.json";

crate::keyword_enum! {
    /// Where a request is in its life.
    pub enum State {
        /// Waiting for its turn.
        Queued = "queued",
        /// Being served.
        Running = "running",
        /// On the target branch.
        Merged = "merged",
        /// The branch does not apply on the target: the paths are in its result.
        Conflict = "conflict",
        /// The verify command failed, or the target could not be moved.
        Failed = "failed",
        /// Cancelled before it was served, or not merged because its approval ran out
        /// with `then: skip`.
        Cancelled = "cancelled",
        /// Verified, and rejected by an approver: the target is unchanged.
        Rejected = "rejected",
    }
}

impl State {
    /// Merged, conflict, failed, cancelled or rejected: nothing more happens to the request.
    pub fn is_final(self) -> bool {
        !matches!(self, State::Queued | State::Running)
    }
}

/// What serving a request gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Result {
    /// The target's commit before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// The target's new commit, when merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The paths in conflict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// The last lines of the verify command's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// What happened, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A merge request, as its file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    /// The agent whose branch it is (mentioned in the channel about it).
    pub agent: String,
    pub branch: String,
    pub into: String,
    pub how: How,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<String>,
    /// The verify command's time limit, in seconds.
    pub timeout: u64,
    /// The repository (its common git directory).
    pub repo: PathBuf,
    pub state: State,
    /// Who asked.
    pub asked_by: String,
    pub asked: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// How many attempts were started; attempt N's output is `<id>.<N>.log`.
    #[serde(default)]
    pub attempts: u32,
    /// The process serving it, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// The scratch work tree of the attempt, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch: Option<PathBuf>,
    /// The approval its verified result waits for before the target moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<Needs>,
    /// The approval request asked for it, once asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<u64>,
    #[serde(default)]
    pub result: Result,
}

impl Request {
    /// The file of attempt `n`'s output.
    pub fn log(&self, inst: &Instance, n: u32) -> PathBuf {
        dir(inst).join(format!("{}.{n}.log", self.id))
    }

    /// One line: id, agent, branch, into, state, asked, result.
    pub fn summary(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            self.id,
            self.agent,
            self.branch,
            self.into,
            self.state,
            self.asked,
            self.outcome()
        )
    }

    /// The result in a few words: the new commit, the paths in conflict, or the note.
    pub fn outcome(&self) -> String {
        let r = &self.result;
        match self.state {
            State::Merged => r
                .commit
                .as_deref()
                .map_or_else(String::new, |c| short(c).to_string()),
            State::Conflict => r.conflicts.join(" "),
            _ => r.note.clone().unwrap_or_default(),
        }
    }

    /// The request as one JSON object (a line of `aw-ctl merge ls --json`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a request serializes")
    }
}

/// The first 12 digits of a commit.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// The branch of `agent` in `inst` when it works in a worktree of its own.
pub fn branch_of(inst: &Instance, agent: &str) -> String {
    format!("aw/{}/{agent}", inst.name())
}

/// The folder of the requests of `inst`.
pub fn dir(inst: &Instance) -> PathBuf {
    inst.dir().join(DIR)
}

fn path(inst: &Instance, id: u64) -> PathBuf {
    records::path(&dir(inst), id)
}

impl Record for Request {
    const NOUN: &'static str = "merge request";
    const VALID: &'static str = "merge request";
    const EXAMPLE: u64 = 7;

    fn id(&self) -> u64 {
        self.id
    }
}

/// Read an id as a user gives it (`7`, or `#7`).
pub fn parse_id(text: &str) -> AwResult<u64> {
    records::parse_id::<Request>(text)
}

/// Take the lock under which requests are written (creating their folder if needed).
pub(super) fn lock(inst: &Instance) -> AwResult<Lock> {
    inst.create()?;
    let d = dir(inst);
    crate::fs::owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    Lock::exclusive(&d.join(".queue.lock"))
}

/// The request `id` of `inst`, as stored.
pub(super) fn read(inst: &Instance, id: u64) -> AwResult<Option<Request>> {
    records::read(&dir(inst), id)
}

/// The user id that owns the file of request `id`, if it is there.
pub(super) fn owner(inst: &Instance, id: u64) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path(inst, id))
        .ok()
        .map(|m| m.uid())
}

/// Write a request (the caller holds the lock of [`lock`]).
pub(super) fn store(inst: &Instance, r: &Request) -> AwResult<()> {
    let mut bytes = serde_json::to_vec_pretty(r).expect("a request serializes");
    bytes.push(b'\n');
    atomic_write(&path(inst, r.id), &bytes)
}

/// Change the request `id` with `f` under the lock; the request after.
pub(super) fn update(
    inst: &Instance,
    id: u64,
    f: impl FnOnce(&mut Request) -> AwResult<()>,
) -> AwResult<Request> {
    let _lock = lock(inst)?;
    let mut r = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    f(&mut r)?;
    store(inst, &r)?;
    Ok(r)
}

fn not_found(inst: &Instance, id: u64) -> Error {
    Error::not_found(format!("no merge request {id} in instance {}", inst.name()))
}

/// The request `id` of `inst`.
pub fn show(inst: &Instance, id: u64) -> AwResult<Request> {
    read(inst, id)?.ok_or_else(|| not_found(inst, id))
}

/// Every request of `inst`, by id.
pub fn list(inst: &Instance) -> AwResult<Vec<Request>> {
    Ok(records::read_all(&dir(inst))?.into_values().collect())
}

/// A request to make.
#[derive(Debug, Clone)]
pub struct NewRequest {
    /// The agent whose branch it is.
    pub agent: String,
    /// The branch; that of the agent's worktree (`aw/<instance>/<agent>`) when `None`.
    pub branch: Option<String>,
    /// Who asks.
    pub by: String,
    /// A folder of the repository (its work tree, or one of its linked work trees).
    pub repo: PathBuf,
    pub config: Config,
}

/// The counter of ids.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Counter {
    /// The last id given.
    last: u64,
}

/// Queue a request; the request as stored. The branch and the target must be branches of
/// the repository (66 otherwise).
pub fn request(inst: &Instance, new: NewRequest) -> AwResult<Request> {
    crate::names::check_agent(&new.agent)?;
    let branch = new
        .branch
        .clone()
        .unwrap_or_else(|| branch_of(inst, &new.agent));
    let c = &new.config;
    if let Some(v) = &c.verify
        && v.trim().is_empty()
    {
        return Err(Error::invalid("verify command: empty"));
    }
    if c.timeout == 0 {
        return Err(Error::invalid("verify timeout: expected at least 1 second"));
    }
    let repo = super::repo::common_dir(&new.repo)?;
    super::repo::check_branches(&repo, &[("branch", &branch), ("target branch", &c.into)])?;
    if branch == c.into {
        return Err(Error::invalid(format!(
            "branch {branch}: it is the target branch itself"
        )));
    }
    let _lock = lock(inst)?;
    let counter = dir(inst).join(COUNTER);
    let mut n: Counter = crate::state::load(&counter)?;
    // Past every request there is too, should the counter have been lost.
    let past = list(inst)?.last().map_or(0, |r| r.id);
    n.last = n.last.max(past) + 1;
    crate::state::store(&counter, &n)?;
    let r = Request {
        id: n.last,
        agent: new.agent,
        branch,
        into: c.into.clone(),
        how: c.how,
        verify: c.verify.clone(),
        timeout: c.timeout,
        repo,
        state: State::Queued,
        asked_by: new.by,
        asked: crate::time::now(),
        started: None,
        finished: None,
        attempts: 0,
        holder: None,
        scratch: None,
        needs: c.needs.clone(),
        approval: None,
        result: Result::default(),
    };
    store(inst, &r)?;
    Ok(r)
}

/// Cancel the request `id`, which must still be queued (1 otherwise).
pub fn cancel(inst: &Instance, id: u64, by: &str) -> AwResult<Request> {
    update(inst, id, |r| {
        if r.state != State::Queued {
            return Err(Error::No(format!(
                "merge request {id} is {}: only a queued request can be cancelled",
                r.state
            )));
        }
        r.state = State::Cancelled;
        r.finished = Some(crate::time::now());
        r.result.note = Some(format!("cancelled by {by}"));
        Ok(())
    })
}

/// Is `p` a path inside the folder of the requests? For the scratch work trees.
pub(super) fn is_scratch(inst: &Instance, p: &Path) -> bool {
    p.starts_with(dir(inst).join("work"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_numbers_and_states_as_their_names() {
        crate::keyword::assert_round_trips(State::ALL, |s| s.name(), State::from_name);
        assert_eq!(parse_id("#7").unwrap(), 7);
        for bad in ["0", "x", "-1", "7a", ""] {
            assert_eq!(parse_id(bad).unwrap_err().exit_code(), 65, "{bad}");
        }
        let finals: Vec<&str> = State::ALL
            .iter()
            .filter(|s| s.is_final())
            .map(|s| s.name())
            .collect();
        assert_eq!(
            finals,
            ["merged", "conflict", "failed", "cancelled", "rejected"]
        );
    }

    #[test]
    fn a_request_is_shown_in_one_line_with_its_result() {
        let mut r = Request {
            id: 3,
            agent: "coder".into(),
            branch: "aw/t/coder".into(),
            into: "main".into(),
            how: How::Rebase,
            verify: None,
            timeout: 60,
            repo: "/r/.git".into(),
            state: State::Conflict,
            asked_by: "user".into(),
            asked: "2026-01-01T00:00:00.000Z".into(),
            started: None,
            finished: None,
            attempts: 1,
            holder: None,
            scratch: None,
            needs: None,
            approval: None,
            result: Result {
                conflicts: vec!["a.rs".into(), "b.rs".into()],
                ..Result::default()
            },
        };
        assert_eq!(
            r.summary(),
            "3\tcoder\taw/t/coder\tmain\tconflict\t2026-01-01T00:00:00.000Z\ta.rs b.rs"
        );
        r.state = State::Merged;
        r.result.commit = Some("0123456789abcdef0123".into());
        assert_eq!(r.outcome(), "0123456789ab");
        let back: Request = serde_json::from_value(r.to_json()).unwrap();
        assert_eq!(back, r);
    }
}
