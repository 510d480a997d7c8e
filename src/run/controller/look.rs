//! A look at an agent's inbox: whether a run is due (the loop guard, the run cap and a failed
//! run's cooldown may say to wait), and what a run's end changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::attempt::{Controller, Due};
use super::event::Report;
use super::loop_guard::{announce_pause, from_agents, keep_guard, rate_guard, served_here};
use super::shared::Shared;
use crate::channel::Channel;
use crate::channel::cursors::Cursors;
use crate::instance::Instance;
use crate::registry::{Indexed, Registry};
use crate::run::backend::Status;
use crate::run::prompt;
use crate::serve::ControllerState;

/// What a look at an agent's inbox decided.
pub(super) enum Look {
    /// Nothing to run now: it waits for a new mention (or the end of its cooldown).
    Wait,
    /// Run on these messages.
    Run(Due),
}

/// What a controller keeps between looks, besides its [`Controller`].
#[derive(Default)]
pub(super) struct Waiting {
    /// A failed run's messages are not retried before a newer message arrives or the
    /// cooldown ends: the newest of them.
    pub failed_upto: u64,
    pub cooldown_end: Option<Instant>,
    /// The loop guard paused it (its messages wait for one from outside).
    pub paused: bool,
}

/// What a round of looks at several inboxes reads once per instance: its channel's newest
/// id and the ack cursors (an agent whose cursor has the newest entry already has nothing
/// unread, and its inbox is not read), and its registry. Exact: the newest id is read after
/// the round's mentions were taken, so an entry it does not count starts a round of its own.
#[derive(Default)]
pub(super) struct Round {
    read: Vec<Read>,
}

/// What a [`Round`] read of one instance.
struct Read {
    dir: std::path::PathBuf,
    /// The channel's newest id and the ack cursors.
    newest: Option<(u64, Arc<Cursors>)>,
    /// Read when first asked for (keep mode's loop guard alone needs it).
    registry: std::cell::OnceCell<Option<Arc<Indexed>>>,
}

impl Round {
    /// Has `agent` of `inst` surely nothing unread? (`false` when it cannot be told.)
    pub(super) fn nothing_unread(&mut self, inst: &Instance, agent: &str) -> bool {
        self.of(inst)
            .newest
            .as_ref()
            .is_some_and(|(newest, cursors)| cursors.get(agent).copied().unwrap_or(0) >= *newest)
    }

    /// `inst`'s registry, read once a round.
    pub(super) fn registry(&mut self, inst: &Instance) -> Option<Arc<Indexed>> {
        self.of(inst)
            .registry
            .get_or_init(|| Registry::load_shared(inst).ok())
            .clone()
    }

    fn of(&mut self, inst: &Instance) -> &Read {
        let i = match self.read.iter().position(|r| r.dir == inst.dir()) {
            Some(i) => i,
            None => {
                let newest = Channel::new(inst).last_id().ok();
                let cursors = crate::channel::cursors::all(inst).ok();
                self.read.push(Read {
                    dir: inst.dir().to_path_buf(),
                    newest: newest.zip(cursors),
                    registry: Default::default(),
                });
                self.read.len() - 1
            }
        };
        &self.read[i]
    }
}

impl Waiting {
    /// The state `aw-ctl ps` shows while it waits.
    pub(super) fn state(&self) -> ControllerState {
        if self.paused {
            ControllerState::Paused
        } else if self.failed_upto > 0 {
            ControllerState::Cooldown
        } else {
            ControllerState::Idle
        }
    }

    /// Look at the inbox of `ctl`'s agent: start a run on its unread messages, unless the
    /// loop guard, the run cap or a failed run's cooldown says to wait. `registered`: the
    /// instance's registry (keep mode), for the guard to tell agents from outsiders.
    /// `unread`: `false` when the inbox is known to be empty ([`Round`]), which is then
    /// not read.
    pub(super) fn look(
        &mut self,
        ctl: &mut Controller,
        shared: &Shared,
        report: &Report,
        registered: Option<&Indexed>,
        unread: bool,
    ) -> Look {
        if self.cooldown_end.is_some_and(|end| end <= Instant::now()) {
            // The cooldown is over: try the failed messages again.
            self.failed_upto = 0;
            self.cooldown_end = None;
        }
        // The newest unread in full, the older summarised (acked with them on success).
        let inbox = match unread {
            true => prompt::Inbox::unread(&ctl.inst, &ctl.agent),
            false => Ok(prompt::Inbox::default()),
        };
        let (msgs, older) = match inbox {
            Ok(m) => (m.shown, m.older),
            Err(e) => {
                // Counted as a failure, so that run mode does not wait for it.
                let mut st = shared.lock();
                st.agents.entry(ctl.agent.clone()).or_default().failed = true;
                st.unread.insert(ctl.agent.clone());
                drop(st);
                let mut ev = ctl.event(0, 1, Status::Failed, Duration::ZERO, Some(e.to_string()));
                ev.gave_up = true;
                report(&ev);
                return Look::Wait;
            }
        };
        let last = msgs.last().map_or(0, |m| m.entry.id);
        match msgs.last().map(|m| m.entry.id) {
            None => {
                shared.lock().unread.remove(&ctl.agent);
                // An agent that works the board may run on a card alone, once a failed
                // run's cooldown is over.
                if !ctl.board || self.cooldown_end.is_some() || self.paused {
                    return Look::Wait;
                }
            }
            Some(last) => {
                shared.lock().unread.insert(ctl.agent.clone());
                if last <= self.failed_upto {
                    return Look::Wait;
                }
            }
        }
        let mut st = shared.lock();
        // Agents served elsewhere count as agents too (a worker on a server of its own), and
        // so do those this process serves in its other instances.
        let agents_only = match registered {
            Some(r) => msgs.iter().all(|m| {
                m.entry.from != ctl.agent
                    && (r.get(&m.entry.from).is_some() || served_here(&m.entry.from))
            }),
            None => from_agents(&st, &ctl.agent, &msgs),
        };
        let guarded = if !shared.keep || msgs.is_empty() {
            None
        } else if let Some(why) = keep_guard(
            &mut st,
            shared,
            &ctl.agent,
            ctl.max_runs,
            &msgs,
            agents_only,
        ) {
            Some(why)
        } else if let Some(rate) = shared.rate {
            rate_guard(&mut st, rate, &ctl.agent, &msgs)
        } else {
            None
        };
        if let Some(why) = guarded {
            drop(st);
            // Its messages wait for a message from outside.
            self.failed_upto = last;
            self.cooldown_end = None;
            self.paused = true;
            ctl.publish(ControllerState::Paused);
            if let Some(why) = why {
                announce_pause(&ctl.inst, &why);
            }
            return Look::Wait;
        }
        let a = st.agents.entry(ctl.agent.clone()).or_default();
        if a.runs >= ctl.max_runs {
            a.capped = !msgs.is_empty();
            return Look::Wait;
        }
        let card = match ctl.board {
            true => {
                drop(st);
                let card = super::cards::take(&ctl.inst, &ctl.agent).map(Box::new);
                st = shared.lock();
                card
            }
            false => None,
        };
        if card.is_none() && older.is_none() && msgs.iter().all(|m| crate::board::is_news(&m.entry))
        {
            // Nothing to do: no card for it, and the board's news alone (a card it already
            // took, say) is read and not run on.
            if let Some(m) = msgs.last()
                && let Err(e) = crate::inbox::ack(&ctl.inst, &ctl.agent, Some(m.entry.id))
            {
                crate::warn::warn("aw-run", format!("{}: {e}", ctl.agent));
            }
            st.unread.remove(&ctl.agent);
            return Look::Wait;
        }
        let a = st.agents.entry(ctl.agent.clone()).or_default();
        a.capped = false;
        self.paused = false;
        a.runs += 1;
        a.total += 1;
        let run = a.total;
        st.ran.insert(ctl.agent.clone());
        drop(st);
        ctl.runs = run;
        // Its record says running once the run's thread is off (see `dispatch`).
        Look::Run(Due {
            msgs,
            older,
            run,
            card,
        })
    }

    /// Note how a run of `ctl` on messages up to `last` ended, `busy` long.
    pub(super) fn finished(
        &mut self,
        ctl: &Controller,
        shared: &Shared,
        ok: bool,
        last: u64,
        busy: Duration,
    ) {
        let mut a = shared.agent(&ctl.agent);
        a.failed = !ok;
        a.busy += busy;
        drop(a);
        if ok {
            self.failed_upto = 0;
            self.cooldown_end = None;
        } else {
            self.failed_upto = last;
            self.cooldown_end = Some(crate::time::deadline(ctl.cooldown));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_skips_only_the_inboxes_with_nothing_past_their_cursor() {
        let (_dir, inst) = crate::instance::scratch();
        let ch = Channel::new(&inst);
        assert!(Round::default().nothing_unread(&inst, "bob"));
        let (e, _) = ch
            .append("amy", "@bob hi", vec!["bob".into()], false)
            .unwrap();
        crate::inbox::ack(&inst, "amy", Some(e.id)).unwrap();
        let mut round = Round::default();
        assert!(round.nothing_unread(&inst, "amy"));
        assert!(!round.nothing_unread(&inst, "bob"));
        // What a round read stays: an entry appended since is for the next round.
        ch.append("bob", "@amy back", vec!["amy".into()], false)
            .unwrap();
        assert!(round.nothing_unread(&inst, "amy"));
        assert!(!Round::default().nothing_unread(&inst, "amy"));
    }
}
