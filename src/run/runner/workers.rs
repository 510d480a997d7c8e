//! Serving workers (`spawn_agent`): taking them as they are registered (each checked against
//! its spawner, see `trust`), stopping those closed, and letting go of a worker whose
//! spawner another server served once that one ends.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::serving::Serving;
use super::trust::{Trusted, check_worker};
use crate::error::{Error, Result};
use crate::registry::{self, Agent};
use crate::run::controller::{Mail, Mailbox, Shared};
use crate::serve;

/// Takes the workers (`spawn_agent`) this server should serve as they are registered, and
/// stops the controllers of those closed. A worker is taken when its spawner is served here,
/// or by no process at all; its serving lock settles a race with another server.
pub(super) struct Adopter {
    pub(super) serving: Arc<Serving>,
    pub(super) shared: Arc<Shared>,
    /// Where taken workers are sent to the dispatcher.
    pub(super) mailbox: Arc<Mailbox>,
    /// The registry file as last read: length, modification and change times, inode (an
    /// edit in place that keeps the size and puts the modification time back still changes
    /// the change time).
    pub(super) seen: Option<(u64, i64, i64, i64, i64, u64)>,
    /// The agents served, with their controllers' own stop flags.
    pub(super) workers: BTreeMap<String, crate::process::Stop>,
    /// The agents served, as a trusted source defines them: those served from the start,
    /// and the workers taken since.
    pub(super) trusted: BTreeMap<String, Trusted>,
    /// Workers refused (and said so once).
    pub(super) refused: std::collections::BTreeSet<String>,
}

impl Adopter {
    /// Look at the registry (with `force`, even when it seems unchanged); whether a worker
    /// was taken.
    pub(super) fn look(&mut self, force: bool) -> bool {
        use std::os::unix::fs::MetadataExt;
        let serving = self.serving.clone();
        let inst = &serving.inst;
        let key = std::fs::metadata(inst.state_file("agents.json"))
            .ok()
            .map(|m| {
                (
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                    m.ino(),
                )
            });
        if key.is_none() || (!force && key == self.seen) {
            return false;
        }
        self.seen = key;
        let Ok(reg) = registry::Registry::load(inst) else {
            return false;
        };
        let ours: Vec<String> = {
            let st = self.shared.lock();
            if st.stopping {
                return false;
            }
            st.agents
                .iter()
                .filter(|(_, a)| !a.closed)
                .map(|(n, _)| n.clone())
                .collect()
        };
        let mut taken = false;
        for a in &reg.agents {
            let Some(spawner) = &a.spawned_by else {
                continue;
            };
            if a.closed {
                if let Some(stop) = self.workers.get(&a.name) {
                    stop.set();
                    self.shared.lock().pending.insert(a.name.clone());
                    self.shared.cv.notify_all();
                }
                continue;
            }
            let mine = ours.contains(spawner) || !serve::is_served(inst, spawner);
            if !mine
                || ours.contains(&a.name)
                || self.refused.contains(&a.name)
                || serve::is_served(inst, &a.name)
            {
                continue;
            }
            let checked = match check_worker(a, self.trusted.get(spawner), true) {
                Ok(t) => t,
                Err(e) => {
                    crate::warn::warn("aw-run", format!("{}: not served: {e}", a.name));
                    self.refused.insert(a.name.clone());
                    continue;
                }
            };
            match self.take(a, checked) {
                Ok(()) => taken = true,
                // Another server took it first.
                Err(Error::Busy(_)) => {}
                Err(e) => crate::warn::warn("aw-run", format!("{}: not served: {e}", a.name)),
            }
        }
        taken
    }

    /// Serve the worker `a` from now on.
    fn take(&mut self, a: &Agent, trusted: Trusted) -> Result<()> {
        let inst = &self.serving.inst;
        let lock = serve::take(inst, &[a.name.as_str()])?.pop();
        let a = &Agent {
            collab: trusted.collab,
            ..a.clone()
        };
        // A worker of an agent in a worktree works in one of its own.
        let worktree = match trusted.isolated {
            true => Some(super::serving::worktree_of(inst, &a.name)?),
            false => None,
        };
        let mut c = self.serving.registered(a, worktree)?;
        self.trusted.insert(a.name.clone(), trusted);
        c.serving_lock = lock;
        c.stop = self.shared.stop.child();
        self.shared.lock().agents.entry(a.name.clone()).or_default();
        if !self.serving.opts.quiet {
            let _ = writeln!(
                std::io::stderr().lock(),
                "aw-run: serving {} ({}), spawned by {}",
                a.name,
                a.backend,
                a.spawned_by.as_deref().unwrap_or("?")
            );
        }
        self.workers.insert(a.name.clone(), c.stop.clone());
        self.mailbox.send(&self.shared, Mail::Add(Box::new(c)));
        Ok(())
    }
}

/// How often a server of tethered workers looks whether their spawners are still served.
const TETHER_LOOK: Duration = Duration::from_millis(200);

/// Stop serving each tethered worker (see [`Serving::tethers`]) once its spawner is no
/// longer served: the thread that watches, when there are any.
pub(super) fn tether(
    serving: &Arc<Serving>,
    shared: &Arc<Shared>,
    adopter: &Arc<Mutex<Adopter>>,
) -> Option<std::thread::JoinHandle<()>> {
    if serving.tethers.is_empty() {
        return None;
    }
    let (serving, shared, adopter) = (serving.clone(), shared.clone(), adopter.clone());
    Some(std::thread::spawn(move || {
        let mut left = serving.tethers.clone();
        while !left.is_empty() {
            {
                let st = shared.lock();
                if st.stopping {
                    return;
                }
                let _ = shared.cv.wait_timeout(st, TETHER_LOOK);
            }
            left.retain(|(worker, spawner)| {
                if serve::is_served(&serving.inst, spawner) {
                    return true;
                }
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "aw-run: {worker}: {spawner}, its spawner, is no longer served; so \
                     neither is {worker}"
                );
                let ad = adopter.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(stop) = ad.workers.get(worker) {
                    stop.set();
                    shared.lock().pending.insert(worker.clone());
                }
                shared.cv.notify_all();
                false
            });
        }
    }))
}
