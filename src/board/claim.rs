//! Claims on cards: exact (made under the board lock, so a card goes to one claimer
//! whatever the number of processes or hosts), and leases that lapse when their time runs
//! out without renewal.

use std::time::Duration;

use super::card::{Card, State, lapse};
use super::store::{list, lock, not_found, read, store};
use crate::error::{Error, Result};
use crate::holder::Holder;
use crate::instance::Instance;

/// Refuse (75) when `c` is held by someone other than `who`.
fn check_not_held(c: &Card, who: &str) -> Result<()> {
    match &c.holder {
        Some(h) if h.agent != who => Err(Error::Busy(format!(
            "card {} is held by {} until {}",
            c.id, h.agent, h.until
        ))),
        _ => Ok(()),
    }
}

/// Refuse (65) when `c` is done or dropped.
fn check_not_closed(c: &Card, what: &str) -> Result<()> {
    match c.state.is_closed() {
        true => Err(Error::invalid(format!(
            "card {} is {}: it cannot be {what}",
            c.id,
            c.state.as_str()
        ))),
        false => Ok(()),
    }
}

/// Change card `id` under the board lock with `f`, its lapse first; the card after.
fn change(inst: &Instance, id: u64, f: impl FnOnce(&mut Card) -> Result<()>) -> Result<Card> {
    let _lock = lock(inst)?;
    let mut c = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    let lapsed = lapse(inst, &mut c);
    let before = c.clone();
    let r = f(&mut c);
    if r.is_err() {
        c = before;
    }
    if r.is_ok() || lapsed {
        store(inst, &c)?;
    }
    r.map(|()| c)
}

/// Claim card `id` as `who` for `ttl`: refused with 75 when another holds it, 1 when it
/// waits for a card not done, 65 when it is done or dropped. Claiming a card one holds
/// again renews it.
pub fn claim(inst: &Instance, id: u64, who: &str, ttl: Duration) -> Result<Card> {
    change(inst, id, |c| {
        check_not_closed(c, "claimed")?;
        check_not_held(c, who)?;
        if c.state == State::Open {
            // Only the cards it waits for are read, whatever the size of the board.
            let mut waits = Vec::new();
            for a in &c.after {
                if !read(inst, *a)?.is_some_and(|d| d.state == State::Done) {
                    waits.push(a.to_string());
                }
            }
            if !waits.is_empty() {
                return Err(Error::No(format!(
                    "card {id} is not ready: it waits for card {}",
                    waits.join(", ")
                )));
            }
        }
        let event = match c.state {
            State::Claimed => "renewed",
            _ => "claimed",
        };
        c.state = State::Claimed;
        c.holder = Some(Holder::new(inst, who, ttl));
        c.event(who, event, None);
        Ok(())
    })
}

/// Claim the next ready card as `who` for `ttl`: the lowest id of the ready cards meant
/// for `who`, else of those meant for no one. `None`: no card is ready.
pub fn claim_next(inst: &Instance, who: &str, ttl: Duration) -> Result<Option<Card>> {
    let _lock = lock(inst)?;
    let mut cards = list(inst)?;
    let pick = |mine: bool| {
        cards
            .values()
            .filter(|c| c.is_ready(&cards))
            .find(|c| match mine {
                true => c.assignee.as_deref() == Some(who),
                false => c.assignee.is_none(),
            })
            .map(|c| c.id)
    };
    let Some(id) = pick(true).or_else(|| pick(false)) else {
        return Ok(None);
    };
    let c = cards.get_mut(&id).expect("picked from the cards");
    c.state = State::Claimed;
    c.holder = Some(Holder::new(inst, who, ttl));
    c.event(who, "claimed", None);
    store(inst, c)?;
    Ok(Some(c.clone()))
}

/// Extend `who`'s claim on `id` by its time to live from now.
pub fn renew(inst: &Instance, id: u64, who: &str) -> Result<Card> {
    change(inst, id, |c| {
        check_not_held(c, who)?;
        let Some(h) = c.holder.as_mut() else {
            return Err(Error::invalid(format!(
                "card {id} is {}, not claimed by {who}",
                c.state.as_str()
            ))
            .hint(format!("aw-ctl board claim {id} takes it")));
        };
        h.renew();
        c.event(who, "renewed", None);
        Ok(())
    })
}

/// Give up `who`'s claim on `id`: the card is open again.
pub fn release(inst: &Instance, id: u64, who: &str) -> Result<Card> {
    change(inst, id, |c| {
        check_not_held(c, who)?;
        if c.holder.is_none() {
            return Err(Error::invalid(format!(
                "card {id} is {}, not claimed by {who}",
                c.state.as_str()
            )));
        }
        c.state = State::Open;
        c.holder = None;
        c.event(who, "released", None);
        Ok(())
    })
}

/// Close `id` as `state` (done or dropped) with `note`: refused when another holds it.
fn close(inst: &Instance, id: u64, who: &str, state: State, note: Option<&str>) -> Result<Card> {
    change(inst, id, |c| {
        check_not_closed(c, state.as_str())?;
        check_not_held(c, who)?;
        c.state = state;
        c.holder = None;
        c.note = note.map(str::to_string);
        c.event(who, state.as_str(), note);
        Ok(())
    })
}

/// Finish `id` as `who`, with a closing note; the leases taken for it are released.
pub fn done(inst: &Instance, id: u64, who: &str, note: Option<&str>) -> Result<Card> {
    let c = close(inst, id, who, State::Done, note)?;
    crate::lease::release_card(inst, id).map(|_| c)
}

/// Drop `id` as `who`: it will not be done; the leases taken for it are released.
pub fn drop_card(inst: &Instance, id: u64, who: &str, note: Option<&str>) -> Result<Card> {
    let c = close(inst, id, who, State::Dropped, note)?;
    crate::lease::release_card(inst, id).map(|_| c)
}

#[cfg(test)]
mod tests {
    use super::super::store::{NewCard, add};
    use super::*;

    #[test]
    fn a_card_waits_for_its_dependencies_and_a_lapsed_claim_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(dir.path())
            .instance("t")
            .unwrap();
        let new = |t: &str, after: Vec<u64>| NewCard {
            title: t.into(),
            after,
            ..NewCard::default()
        };
        add(&inst, "lead", new("a", vec![])).unwrap();
        add(&inst, "lead", new("b", vec![1])).unwrap();
        let hour = Duration::from_secs(3600);
        assert_eq!(claim(&inst, 2, "w", hour).unwrap_err().exit_code(), 1);
        assert_eq!(claim_next(&inst, "w", hour).unwrap().unwrap().id, 1);
        assert!(claim_next(&inst, "v", hour).unwrap().is_none());
        assert_eq!(claim(&inst, 1, "v", hour).unwrap_err().exit_code(), 75);
        assert_eq!(done(&inst, 1, "v", None).unwrap_err().exit_code(), 75);
        done(&inst, 1, "w", Some("ok")).unwrap();
        // A claim of no time lapses at once: the card is ready again.
        assert_eq!(
            claim_next(&inst, "v", Duration::ZERO).unwrap().unwrap().id,
            2
        );
        std::thread::sleep(Duration::from_millis(5));
        let c = claim_next(&inst, "w", hour).unwrap().unwrap();
        assert_eq!((c.id, c.holder.unwrap().agent.as_str()), (2, "w"));
        let events: Vec<&str> = c.history.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(events, ["added", "claimed", "lapsed", "claimed"]);
    }
}
