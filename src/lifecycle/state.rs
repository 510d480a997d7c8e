//! What the hooks of a server keep between events.

use std::collections::{BTreeMap, BTreeSet};

use super::event::Kind;
use super::notice::{Notice, notice};

/// What the hooks of a server keep between events, under the lock of its shared state.
#[derive(Debug, Default)]
pub struct HookState {
    /// Hooks running on threads of their own.
    pub running: usize,
    /// Whether [`HookState::notices`] are collected: the workflow names `on_merge` or
    /// `on_approval`.
    pub watch: bool,
    /// Channel entries that told of an approval asked or a merge ended, not yet fired.
    pub notices: Vec<Notice>,
    /// Those fired already.
    fired: BTreeSet<Notice>,
    /// "Not yet" in a row, per event and agent.
    not_yet: BTreeMap<(&'static str, String), u32>,
    /// The number of runs when `on_quiet` last fired: it fires again only after a run.
    pub quiet_at: Option<u64>,
}

impl HookState {
    /// Note what entry `e` tells of, when notices are collected.
    pub fn note(&mut self, e: &crate::channel::Entry) {
        if let Some(n) = self.watch.then(|| notice(e)).flatten()
            && !self.fired.contains(&n)
        {
            self.notices.push(n);
        }
    }

    /// The notices noted and not fired, from now counted as fired.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        let n = std::mem::take(&mut self.notices);
        self.fired.extend(n.iter().copied());
        n
    }

    /// One more "not yet" of the hook of `kind` for `agent` (`""` for none): how many in a
    /// row.
    pub fn not_yet(&mut self, kind: Kind, agent: &str) -> u32 {
        let n = self
            .not_yet
            .entry((kind.name(), agent.to_string()))
            .or_default();
        *n += 1;
        *n
    }

    /// The hook of `kind` for `agent` said something else: its "not yet" count again from 0.
    pub fn answered(&mut self, kind: Kind, agent: &str) {
        self.not_yet.remove(&(kind.name(), agent.to_string()));
    }
}
