//! The ack cursors: `_state/cursors.json`, one entry id per agent, the newest it
//! acknowledged.
//!
//! A server reads an agent's cursor before each prompt and moves it after each run, so the
//! file is read at every turn of every agent, and it holds a line per agent that ever
//! acknowledged. It is parsed again only when it changed ([`crate::fs::kept`]), and the
//! process that moves a cursor keeps what it wrote: a chain of a thousand agents does not
//! pay, at every hop, for every agent before it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::Result;
use crate::fs::kept::Kept;
use crate::instance::Instance;
use crate::state;

/// Ack cursors: agent → id of the newest acknowledged entry.
pub type Cursors = BTreeMap<String, u64>;

/// The file of the ack cursors under `_state/`.
pub const CURSORS: &str = "cursors.json";

/// The cursors of the instances this process read last.
static KEPT: Kept<Cursors, 8> = Kept::new();

/// All cursors.
pub fn all(inst: &Instance) -> Result<Arc<Cursors>> {
    KEPT.load(&inst.state_file(CURSORS))
}

/// `agent`'s cursor (0 when it never acknowledged).
pub fn of(inst: &Instance, agent: &str) -> Result<u64> {
    Ok(all(inst)?.get(agent).copied().unwrap_or(0))
}

/// Move `agent`'s cursor forward to what `target` answers, read under the state lock; it
/// never moves back. Returns the cursor after the move. The file is flushed to stable
/// storage only when `durable`.
pub fn advance(
    inst: &Instance,
    agent: &str,
    durable: bool,
    target: impl FnOnce() -> Result<u64>,
) -> Result<u64> {
    let _lock = state::lock(inst)?;
    let path = inst.state_file(CURSORS);
    let now = KEPT.load(&path)?;
    let target = target()?;
    let cur = now.get(agent).copied().unwrap_or(0);
    if target <= cur {
        return Ok(cur);
    }
    let mut next = Cursors::clone(&now);
    next.insert(agent.to_string(), target);
    state::store_with(&path, &next, durable)?;
    KEPT.remember(&path, Arc::new(next));
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_reads_the_cursors_the_ack_wrote_without_parsing_them_again() {
        let (_dir, inst) = crate::instance::scratch();
        assert_eq!(of(&inst, "bob").unwrap(), 0);
        assert_eq!(advance(&inst, "bob", false, || Ok(2)).unwrap(), 2);
        let first = all(&inst).unwrap();
        assert_eq!(first.get("bob"), Some(&2));
        // Unchanged: the value written is the one given, again and again.
        assert!(Arc::ptr_eq(&first, &all(&inst).unwrap()));
        // Never back.
        assert_eq!(advance(&inst, "bob", false, || Ok(1)).unwrap(), 2);
        assert!(Arc::ptr_eq(&first, &all(&inst).unwrap()));
        // A change by another writer (here, by hand) is seen at once.
        let path = inst.state_file(CURSORS);
        crate::fs::atomic_write(&path, b"{\"bob\": 3, \"carol\": 1}\n").unwrap();
        assert_eq!(of(&inst, "bob").unwrap(), 3);
        assert_eq!(of(&inst, "carol").unwrap(), 1);
        assert_eq!(advance(&inst, "carol", true, || Ok(3)).unwrap(), 3);
        let on_disk: Cursors = state::load(&path).unwrap();
        assert_eq!(
            on_disk,
            Cursors::from([("bob".into(), 3), ("carol".into(), 3)])
        );
        assert_eq!(*all(&inst).unwrap(), on_disk);
    }
}
