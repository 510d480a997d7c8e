//! Making a worktree (or taking the one there), removing it once its work is merged, and
//! removing it when the user asks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::record::{DIR, LOCK, Record, Records, STATE, get, path_of, records};
use super::repo::{self, all_in, current_branch, dirty, git, is_worktree, run, tip, top_of};
use crate::error::{Error, Result};
use crate::fs::Lock;
use crate::instance::Instance;

/// How long making or removing a worktree may wait for another process doing so.
const LOCK_WAIT: Duration = Duration::from_secs(300);

/// The worktree of one agent of an instance, in one repository.
#[derive(Debug, Clone)]
pub struct Spec {
    pub inst: Instance,
    pub agent: String,
    /// The top of the main work tree.
    pub top: PathBuf,
    /// The worktree: `<top>/.aw-worktrees/<instance>/<agent>`.
    pub path: PathBuf,
    /// `aw/<instance>/<agent>`.
    pub branch: String,
}

impl Spec {
    /// The worktree of `agent` of `inst` in the repository `dir` lies in (66 when it lies
    /// in none, 69 without git).
    pub fn new(inst: &Instance, dir: &Path, agent: &str) -> Result<Spec> {
        crate::names::check_agent(agent)?;
        let top = top_of(dir)?;
        let top = std::fs::canonicalize(&top).unwrap_or(top);
        Ok(Spec {
            inst: inst.clone(),
            agent: agent.to_string(),
            path: path_of(&top, inst, agent),
            branch: crate::merge::branch_of(inst, agent),
            top,
        })
    }

    /// The worktree, made when it is not there (on its branch when the branch is, with the
    /// same commits; else on a new branch at its target's tip) and made afresh when its work
    /// was merged and it has no change to a file.
    pub fn ensure(&self) -> Result<Record> {
        let _lock = lock(&self.inst)?;
        let here = is_worktree(&self.path);
        let known = get(&self.inst, &self.agent)?.filter(|r| r.path == self.path);
        if let Some(r) = known {
            if work_merged(&r) && !(here && dirty(&self.path)?) {
                discard(&self.inst, &r, here, true)?;
            } else if here {
                return Ok(r);
            } else if tip(&self.top, &r.branch).is_some() {
                self.add(Some(&r.branch), None)?;
                return Ok(r);
            }
            // Its branch deleted by hand too: made afresh below.
        }
        let record = match tip(&self.top, &self.branch) {
            // A branch left by an earlier worktree whose record is gone: its commits kept.
            Some(tip) => {
                if !here {
                    self.add(Some(&self.branch), None)?;
                }
                self.record(target_of(&self.inst, &self.top), tip)
            }
            None => {
                let target = target_of(&self.inst, &self.top);
                let start = match &target {
                    Some(t) => tip(&self.top, t),
                    None => repo::commit(&self.top, "HEAD"),
                }
                .ok_or_else(|| {
                    Error::not_found(format!(
                        "{}: the repository has no commit to start {} from",
                        self.top.display(),
                        self.branch
                    ))
                })?;
                self.add(None, Some(&start))?;
                self.record(target, start)
            }
        };
        crate::state::update(&self.inst, STATE, |m: &mut Records| {
            m.insert(self.agent.clone(), record.clone());
            Ok(())
        })?;
        Ok(record)
    }

    fn record(&self, target: Option<String>, base: String) -> Record {
        Record {
            agent: self.agent.clone(),
            path: self.path.clone(),
            branch: self.branch.clone(),
            target,
            base,
            repo: self.top.clone(),
            created: crate::time::now(),
        }
    }

    /// `git worktree add` at the path: on `branch`, or on a new branch at `start`. A
    /// registration left by a worktree removed by hand is pruned first.
    fn add(&self, branch: Option<&str>, start: Option<&str>) -> Result<()> {
        run("worktree prune", {
            let mut c = git(&self.top);
            c.args(["worktree", "prune"]);
            c
        })?;
        let dir = self.top.join(DIR);
        std::fs::create_dir_all(&dir).map_err(|e| Error::create(&dir, e))?;
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            crate::fs::atomic_write(&ignore, crate::instance::ROOT_GITIGNORE.as_bytes())?;
        }
        let mut c = crate::git::command(&self.top);
        c.args(["worktree", "add", "--quiet"]);
        match (branch, start) {
            (Some(b), _) => c.arg(&self.path).arg(b),
            (None, Some(s)) => c.args(["-b", &self.branch]).arg(&self.path).arg(s),
            (None, None) => unreachable!("a branch or a start"),
        };
        run("worktree add", c).map(drop)
    }

    /// Remove the worktree and its branch when its work was merged and it has no change to
    /// a file; whether it was removed.
    pub fn tidy(&self) -> Result<bool> {
        let _lock = lock(&self.inst)?;
        let Some(r) = get(&self.inst, &self.agent)?.filter(|r| r.path == self.path) else {
            return Ok(false);
        };
        let here = is_worktree(&self.path);
        if !work_merged(&r) || (here && dirty(&self.path)?) {
            return Ok(false);
        }
        discard(&self.inst, &r, here, true)?;
        Ok(true)
    }
}

/// Remove each worktree of `inst` whose work was merged and that has no change to a file,
/// with its branch, as [`Spec::tidy`] does after a run: for the worktrees whose work was
/// merged while no run of their agent was under way (a request queued without waiting).
/// The caller makes sure that no run of these agents is under way. The agents whose
/// worktree was removed.
pub fn tidy_merged(inst: &Instance) -> Result<Vec<String>> {
    if !inst.state_file(STATE).exists() {
        return Ok(Vec::new());
    }
    let _lock = lock(inst)?;
    let mut gone = Vec::new();
    for r in records(inst)?.into_values() {
        let here = is_worktree(&r.path);
        if !work_merged(&r) || (here && dirty(&r.path)?) {
            continue;
        }
        discard(inst, &r, here, true)?;
        gone.push(r.agent);
    }
    Ok(gone)
}

/// What [`remove`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Removed {
    pub path: PathBuf,
    pub branch: String,
    /// Why the branch was kept, when it was.
    pub kept: Option<String>,
}

/// Remove the worktree of `agent` of `inst`: refused (exit 1) when it has changes to files
/// or its agent is served, unless `force`. Its branch is removed too when every commit of
/// it is in its target, else kept (and [`Removed::kept`] says why).
pub fn remove(inst: &Instance, agent: &str, force: bool) -> Result<Removed> {
    crate::names::check_agent(agent)?;
    let _lock = lock(inst)?;
    let r = get(inst, agent)?.ok_or_else(|| {
        Error::not_found(format!(
            "no worktree for agent '{agent}' in instance '{}'",
            inst.name()
        ))
        .hint("aw-ctl worktree ls")
    })?;
    let here = is_worktree(&r.path);
    if !force {
        let shown = r.path.display();
        if crate::serve::is_served(inst, agent) {
            return Err(Error::No(format!(
                "the worktree of {agent} ({shown}): {agent} is being served: not removed"
            ))
            .hint("stop it first (aw-ctl stop), or remove it anyway with --force"));
        }
        if here && dirty(&r.path)? {
            return Err(Error::No(format!(
                "the worktree of {agent} ({shown}) has changes to files: not removed"
            ))
            .hint("commit them, or remove it anyway with --force"));
        }
    }
    let merged = branch_in_target(&r);
    let kept = discard(inst, &r, here, merged)?;
    Ok(Removed {
        path: r.path,
        branch: r.branch,
        kept,
    })
}

/// Remove the worktree of `r` (with what it holds), its branch when `drop_branch`, and its
/// record. Why the branch was kept, when it was.
fn discard(inst: &Instance, r: &Record, here: bool, drop_branch: bool) -> Result<Option<String>> {
    if here {
        let mut c = git(&r.repo);
        c.args(["worktree", "remove", "--force", "--force"])
            .arg(&r.path);
        run("worktree remove", c)?;
    }
    let mut c = git(&r.repo);
    c.args(["worktree", "prune"]);
    run("worktree prune", c)?;
    if let Some(parent) = r.path.parent() {
        let _ = std::fs::remove_dir(parent);
    }
    let kept = match (tip(&r.repo, &r.branch), drop_branch) {
        (None, _) => None,
        (Some(t), true) => {
            let mut c = git(&r.repo);
            c.args(["update-ref", "-d", &format!("refs/heads/{}", r.branch), &t]);
            run("update-ref", c)?;
            None
        }
        (Some(_), false) => Some(match &r.target {
            Some(target) => format!("it has commits not in {target}"),
            None => "it has no target to be merged into".to_string(),
        }),
    };
    crate::state::update(inst, STATE, |m: &mut Records| {
        m.remove(&r.agent);
        Ok(())
    })?;
    Ok(kept)
}

/// Has the worktree of `r` done work (its branch moved from where it started) that is all
/// in its target?
fn work_merged(r: &Record) -> bool {
    tip(&r.repo, &r.branch).is_some_and(|t| t != r.base) && branch_in_target(r)
}

/// Is every commit of the branch of `r` in its target (true too when it has none of its
/// own)?
fn branch_in_target(r: &Record) -> bool {
    match (tip(&r.repo, &r.branch), &r.target) {
        (Some(t), Some(target)) => tip(&r.repo, target)
            .is_some_and(|_| all_in(&r.repo, &t, &format!("refs/heads/{target}"))),
        _ => false,
    }
}

/// The branch a new worktree's work goes to: the merge queue's target when the instance
/// has merge settings and the branch exists, else the branch checked out at `top`.
fn target_of(inst: &Instance, top: &Path) -> Option<String> {
    if inst.state_file(crate::merge::CONFIG).exists()
        && let Ok(c) = crate::merge::Config::load(inst)
        && tip(top, &c.into).is_some()
    {
        return Some(c.into);
    }
    current_branch(top)
}

/// The lock of making and removing the worktrees of `inst`.
fn lock(inst: &Instance) -> Result<Lock> {
    inst.create()?;
    Lock::exclusive_timeout(&inst.state_file(LOCK), LOCK_WAIT)
}
