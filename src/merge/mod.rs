//! The merge queue of an instance: requests to bring a branch onto a target branch, served
//! one at a time, in order, by whichever process holds the queue's lock.
//!
//! Each request is one JSON file, `merges/<id>.json` under the instance, readable without
//! aw (see aw-workflow(5)); each attempt's whole output is beside it, `merges/<id>.<n>.log`.
//! Ids come from a counter that only grows, so an id is never given twice. Requests are
//! written under a short lock (`merges/.queue.lock`); serving takes the queue's lock
//! (`merges/.lock`, an `flock`, released by the kernel when its holder dies, on whatever
//! host) for as long as it serves.
//!
//! Serving a request ([`serve`]): a scratch work tree is made, detached, at the tip of the
//! target; the branch is brought onto it (rebased, or merged with `--no-ff`); the verify
//! command runs there; and only when it passes is the target moved, by compare-and-swap
//! (`git update-ref NEW OLD`): the target is the old commit or the new one, never anything
//! else. When the target moved meanwhile, the attempt starts again from its new tip. A
//! target checked out in a work tree is moved only when that work tree has no change to a
//! tracked file, with `git merge --ff-only` there, so that its files follow. Every git
//! command goes through [`crate::git::command`]: none runs a hook, filter or signing program
//! of the repository.
//!
//! A process serves only its own user's requests (those whose files it owns): a verify
//! command never runs as another user than the one who asked.
//!
//! A server killed -9 leaves its request `running` with a holder; the next process that
//! takes the queue's lock knows its holder is gone (it could not hold the lock otherwise),
//! removes the scratch work tree left behind and serves the request again from scratch.

mod approve;
mod attempt;
mod config;
mod repo;
pub use repo::check_name as check_branch_name;
mod request;
mod serve;
mod verify;

pub use config::{CONFIG, Config, DEFAULT_TIMEOUT, How, Needs};
pub use request::{
    DIR, NewRequest, Request, Result as Outcome, State, branch_of, cancel, list, parse_id, request,
    show,
};
pub use serve::{Served, pending, serve, serve_until, serving, wait};
pub use verify::TAIL_LINES;
