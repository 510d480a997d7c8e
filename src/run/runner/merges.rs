//! Serving the merge queue of an instance whose workflow has a `merge:` key: a thread of
//! its own, so that no controller waits while a verify command runs or a merge waits for
//! an approval. It serves whatever is queued, then sleeps on a watch of the queue's folder
//! (a request queued by an agent's tool, `aw-ctl merge request` or a script wakes it), and
//! looks again every [`MERGES_LOOK`] (the queue's lock freed by another server that died
//! leaves no write). Whoever holds the queue's lock serves: when another process does,
//! this one waits for the change it writes.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::options::Options;
use crate::error::{Error, Result};
use crate::fs::watch::{FileWaiter, Waker};
use crate::instance::Instance;
use crate::run::controller::Shared;

/// How often the queue is looked at although its folder did not change.
const MERGES_LOOK: Duration = Duration::from_secs(5);

/// Start the thread that serves the queue of `inst`; its waker and handle. It ends once the
/// server is stopping (a verify command under way is killed, a wait for an approval ends:
/// the request is served again by the next server).
pub(super) fn serve_merges(
    inst: &Instance,
    opts: &Options,
    shared: &Arc<Shared>,
) -> Result<(Waker, JoinHandle<()>)> {
    let dir = inst.dir().join(crate::merge::DIR);
    crate::fs::owned::folder(&dir, true).map_err(|e| Error::create(&dir, e))?;
    let mut waiter = FileWaiter::folder(&dir, opts.poll)?;
    let waker = waiter.waker();
    let (shared, inst) = (shared.clone(), inst.clone());
    let stop = shared.stop.child();
    let thread = std::thread::spawn(move || {
        loop {
            let how = crate::run::controller::hooks::spawning(Some(&stop));
            match crate::merge::serve_until(&inst, &how) {
                Ok(_) => {}
                Err(Error::Interrupted) => return,
                Err(e) => crate::warn::warn("aw-run", format!("the merge queue: {e}")),
            }
            // The decision that the work is done looks at the queue again.
            {
                let mut st = shared.lock();
                if st.stopping {
                    return;
                }
                if st.in_flight == 0 {
                    // No run is under way (none starts while this lock is held): the
                    // worktrees whose work was merged go.
                    tidy_worktrees(&inst);
                }
                st.generation += 1;
            }
            shared.cv.notify_all();
            waiter.wait(Some(MERGES_LOOK));
        }
    });
    Ok((waker, thread))
}

/// Whether a request of `inst` that a server of this user serves is still queued or
/// running: the work of a run that serves the queue is not done then.
pub(super) fn merging(inst: &Instance) -> bool {
    crate::merge::pending(inst).is_ok_and(|p| !p.is_empty())
}

/// Remove the worktrees of `inst` whose work is merged ([`crate::worktree::tidy_merged`]),
/// while no run is under way; a failure is a warning.
pub(super) fn tidy_worktrees(inst: &Instance) {
    if let Err(e) = crate::worktree::tidy_merged(inst) {
        crate::warn::warn("aw-run", format!("the agents' worktrees: {e}"));
    }
}
