//! One attempt at a request: a scratch work tree at the target's tip, the branch brought
//! onto it, the verify command run there, and the target moved by compare-and-swap. Every
//! git command goes through [`crate::git`]'s safe commands.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use super::approve::{self, Verdict};
use super::config::How;
use super::repo::{checked_out, no_git, plain, remove_scratch, tips};
use super::request::{Request, short};
use super::verify;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::process::Spawning;

/// How many times an attempt starts again when the target moved under it.
const TRIES: usize = 5;

/// What an attempt gave.
#[derive(Debug)]
pub(super) enum Outcome {
    /// The target moved from `old` to `new` (the same when the branch was in it already).
    Merged {
        old: String,
        new: String,
        note: String,
    },
    Conflict {
        old: String,
        paths: Vec<String>,
    },
    /// The verify command failed: the last lines of its output, and why.
    Verify {
        old: String,
        tail: String,
        why: String,
    },
    /// Verified, and rejected by an approver: why, in a sentence.
    Rejected {
        old: String,
        note: String,
    },
    /// Verified, and its approval ran out with `then: skip`: not merged.
    Skipped {
        old: String,
        note: String,
    },
    /// Something else kept the target where it was.
    Failed {
        old: Option<String>,
        note: String,
    },
}

/// Where one request's attempts run.
pub(super) struct Attempt<'a> {
    pub inst: &'a Instance,
    pub r: &'a Request,
    /// Ends a verify command or a wait for an approval (the request is served again later).
    pub how: &'a Spawning<'a>,
    /// The scratch work tree.
    pub scratch: PathBuf,
    /// The attempt's output.
    pub log: File,
    /// Set the committer in the environment (the repository names none).
    pub ident: bool,
    /// The repository's filter drivers, asked once (see [`crate::git::with_drivers`]).
    pub drivers: Vec<Vec<u8>>,
}

impl Attempt<'_> {
    /// git with `args` in `dir`, its output in the attempt's log.
    fn git(&mut self, dir: &Path, args: &[&str]) -> Result<Output> {
        let mut c = crate::git::with_drivers(dir, &self.drivers);
        c.args(args);
        if self.ident {
            for (k, v) in [
                ("GIT_COMMITTER_NAME", "aw"),
                ("GIT_COMMITTER_EMAIL", "aw@localhost"),
                ("GIT_AUTHOR_NAME", "aw"),
                ("GIT_AUTHOR_EMAIL", "aw@localhost"),
            ] {
                c.env(k, v);
            }
        }
        let out = c.output().map_err(no_git)?;
        let _ = writeln!(self.log, "$ git {}", args.join(" "));
        let _ = self.log.write_all(&out.stdout);
        let _ = self.log.write_all(&out.stderr);
        Ok(out)
    }

    /// [`Self::git`], which must succeed: its stdout, trimmed.
    fn git_ok(&mut self, dir: &Path, args: &[&str]) -> Result<String> {
        let out = self.git(dir, args)?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty());
            return Err(Error::Unavailable(format!(
                "git {}: {}",
                args.first().unwrap_or(&""),
                last.unwrap_or("failed")
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Serve the request: try until it merges, conflicts or fails, starting again from the
    /// target's new tip when it moved under the attempt. The scratch work tree is removed.
    pub(super) fn run(&mut self) -> Result<Outcome> {
        let repo = self.r.repo.clone();
        self.drivers = crate::git::filter_drivers(&repo);
        self.ident = !plain(&repo)
            .args(["var", "GIT_COMMITTER_IDENT"])
            .output()
            .map_err(no_git)?
            .status
            .success();
        for _ in 0..TRIES {
            let once = self.once(&repo);
            remove_scratch(&repo, &self.scratch);
            match once? {
                Some(o) => return Ok(o),
                None => continue,
            }
        }
        Ok(Outcome::Failed {
            old: None,
            note: format!(
                "{} moved under each of {TRIES} attempts; ask again",
                self.r.into
            ),
        })
    }

    /// One try; `None` when the target moved under it.
    fn once(&mut self, repo: &Path) -> Result<Option<Outcome>> {
        let r = self.r;
        let mut both = tips(repo, &[&r.into, &r.branch])?.into_iter();
        let (Some(Some(old)), Some(Some(tip))) = (both.next(), both.next()) else {
            return Ok(Some(Outcome::Failed {
                old: None,
                note: format!("{} or {} is no longer a branch", r.branch, r.into),
            }));
        };
        remove_scratch(repo, &self.scratch);
        let scratch = self.scratch.to_string_lossy().to_string();
        let start = match r.how {
            How::Rebase => &tip,
            How::Merge => &old,
        };
        self.git_ok(
            repo,
            // --force: a scratch work tree removed by hand may still be registered.
            &[
                "worktree", "add", "--force", "--detach", "--quiet", &scratch, start,
            ],
        )?;
        let dir = self.scratch.clone();
        let brought = match r.how {
            How::Rebase => self.git(
                &dir,
                &[
                    "rebase",
                    "--no-autosquash",
                    "--no-update-refs",
                    "--quiet",
                    &old,
                ],
            )?,
            How::Merge => {
                let msg = format!("Merge branch '{}' into {}", r.branch, r.into);
                self.git(&dir, &["merge", "--no-ff", "--no-edit", "-m", &msg, &tip])?
            }
        };
        if !brought.status.success() {
            let listed = self.git_ok(&dir, &["diff", "--name-only", "--diff-filter=U"])?;
            let paths: Vec<String> = listed.lines().map(str::to_string).collect();
            if paths.is_empty() {
                let err = String::from_utf8_lossy(&brought.stderr);
                let last = err.lines().rev().find(|l| !l.trim().is_empty());
                return Ok(Some(Outcome::Failed {
                    old: Some(old),
                    note: format!("git {}: {}", r.how, last.unwrap_or("failed")),
                }));
            }
            return Ok(Some(Outcome::Conflict { old, paths }));
        }
        let new = self.git_ok(&dir, &["rev-parse", "HEAD"])?;
        if new == old {
            return Ok(Some(Outcome::Merged {
                note: format!("{} was in {} already", r.branch, r.into),
                new,
                old,
            }));
        }
        if let Some(cmd) = r.verify.clone() {
            let v = verify::run(&cmd, &dir, r, &mut self.log, self.how)?;
            if let Some(why) = v.failed {
                return Ok(Some(Outcome::Verify {
                    old,
                    tail: v.tail,
                    why,
                }));
            }
        }
        if let Some(needs) = &r.needs {
            let _ = writeln!(self.log, "# waiting for an approval");
            match approve::approve(self.inst, r, needs, (&old, &new), self.how.stop)? {
                Verdict::Approved => {
                    let _ = writeln!(self.log, "# approved");
                }
                Verdict::Refused {
                    rejected: true,
                    note,
                } => return Ok(Some(Outcome::Rejected { old, note })),
                Verdict::Refused { note, .. } => {
                    return Ok(Some(Outcome::Failed {
                        old: Some(old),
                        note,
                    }));
                }
                Verdict::Skipped(note) => return Ok(Some(Outcome::Skipped { old, note })),
            }
        }
        self.advance(repo, old, new)
    }

    /// Is the target no longer at `old`?
    fn moved(&self, repo: &Path, old: &str) -> Result<bool> {
        let now = tips(repo, &[&self.r.into])?.pop().flatten();
        Ok(now.is_some_and(|now| now != old))
    }

    /// Move the target from `old` to `new`; `None` when it is no longer at `old`.
    fn advance(&mut self, repo: &Path, old: String, new: String) -> Result<Option<Outcome>> {
        let r = self.r;
        let target = format!("refs/heads/{}", r.into);
        let note = format!(
            "{} {} onto {}: {} -> {}",
            r.branch,
            match r.how {
                How::Rebase => "rebased",
                How::Merge => "merged",
            },
            r.into,
            short(&old),
            short(&new)
        );
        let Some(wt) = checked_out(repo, &r.into, &self.scratch)? else {
            let msg = format!("aw merge #{}: {}", r.id, r.branch);
            let moved = self.git(repo, &["update-ref", "-m", &msg, &target, &new, &old])?;
            if moved.status.success() {
                return Ok(Some(Outcome::Merged { old, new, note }));
            }
            return match self.moved(repo, &old)? {
                true => Ok(None),
                false => Err(Error::Unavailable(format!(
                    "git update-ref {target}: {}",
                    String::from_utf8_lossy(&moved.stderr).trim()
                ))),
            };
        };
        // Checked out: moved only when that work tree has no change to a tracked file, and
        // with its files.
        let changed = self.git_ok(&wt, &["status", "--porcelain", "--untracked-files=no"])?;
        if !changed.is_empty() {
            return Ok(Some(Outcome::Failed {
                old: Some(old),
                note: format!(
                    "{} is checked out in {} with changes to tracked files: it was left as it is \
                     (commit or stash them, then ask again)",
                    r.into,
                    wt.display()
                ),
            }));
        }
        if self.git_ok(&wt, &["rev-parse", "HEAD"])? != old {
            return Ok(None);
        }
        let ff = self.git(&wt, &["merge", "--ff-only", "--quiet", &new])?;
        if ff.status.success() {
            return Ok(Some(Outcome::Merged { old, new, note }));
        }
        match self.moved(repo, &old)? {
            true => Ok(None),
            false => Ok(Some(Outcome::Failed {
                old: Some(old),
                note: format!(
                    "{} is checked out in {} and git merge --ff-only refused: {}",
                    r.into,
                    wt.display(),
                    String::from_utf8_lossy(&ff.stderr)
                        .lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("failed")
                ),
            })),
        }
    }
}
