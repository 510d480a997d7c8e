//! Claims on cards: exact (made under the board lock, so a card goes to one claimer
//! whatever the number of processes or hosts), and leases that lapse when their time runs
//! out without renewal.

use std::time::Duration;

use super::card::{Card, State};
use super::files::{not_found, read};
use super::index::{self, Class, Txn};
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
    let mut t = Txn::begin(inst)?;
    let r = change_in(&mut t, id, f);
    t.commit()?;
    r
}

/// [`change`] within the change `t`.
fn change_in(t: &mut Txn, id: u64, f: impl FnOnce(&mut Card) -> Result<()>) -> Result<Card> {
    let c = read(t.inst, id)?.ok_or_else(|| not_found(t.inst, id))?;
    let mut c = t.lapse(c)?;
    let before = c.clone();
    f(&mut c)?;
    t.put(Some(&before), &c)?;
    Ok(c)
}

/// Refuse (1) when `c` waits for a card not done (reading only those cards).
fn check_ready(inst: &Instance, c: &Card) -> Result<()> {
    let mut waits = Vec::new();
    for a in &c.after {
        if !read(inst, *a)?.is_some_and(|d| d.state == State::Done) {
            waits.push(a.to_string());
        }
    }
    match waits.is_empty() {
        true => Ok(()),
        false => Err(Error::No(format!(
            "card {} is not ready: it waits for card {}",
            c.id,
            waits.join(", ")
        ))),
    }
}

/// Claim card `id` as `who` for `ttl`: refused with 75 when another holds it, 1 when it
/// waits for a card not done, 65 when it is done or dropped. Claiming a card one holds
/// again renews it.
pub fn claim(inst: &Instance, id: u64, who: &str, ttl: Duration) -> Result<Card> {
    change(inst, id, |c| {
        check_not_closed(c, "claimed")?;
        check_not_held(c, who)?;
        if c.state == State::Open {
            check_ready(inst, c)?;
        }
        take(inst, c, who, ttl);
        Ok(())
    })
}

/// Make `who` the holder of `c` for `ttl`.
fn take(inst: &Instance, c: &mut Card, who: &str, ttl: Duration) {
    let event = match c.state {
        State::Claimed => "renewed",
        _ => "claimed",
    };
    c.state = State::Claimed;
    c.holder = Some(Holder::new(inst, who, ttl));
    c.event(who, event, None);
}

/// Claim the next ready card as `who` for `ttl`: the lowest id of the ready cards meant
/// for `who` (alone or in a pool), else of those meant for no one. `None`: no card is
/// ready. Only the index and the cards it names are read; a card the index names that its
/// file says is not ready makes the index be rebuilt.
pub fn claim_next(inst: &Instance, who: &str, ttl: Duration) -> Result<Option<Card>> {
    let mut t = Txn::begin(inst)?;
    let r = pick(&mut t, who, ttl);
    t.commit()?;
    r
}

/// [`claim_next`] within the change `t`.
fn pick(t: &mut Txn, who: &str, ttl: Duration) -> Result<Option<Card>> {
    for round in 0..2 {
        for id in t.idx.candidates(who) {
            let Some(c) = read(t.inst, id)? else {
                continue;
            };
            let meant = c.assignee.is_empty() || c.is_for(who);
            if c.state == State::Open && meant && check_ready(t.inst, &c).is_ok() {
                let mut got = c.clone();
                take(t.inst, &mut got, who, ttl);
                t.put(Some(&c), &got)?;
                return Ok(Some(got));
            }
        }
        if round == 0 && !t.idx.candidates(who).is_empty() {
            // Every card the index had was stale: it is rebuilt, and looked at again.
            t.rebuild()?;
            continue;
        }
        break;
    }
    Ok(None)
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
/// The cards that wait for a card done and are ready now are announced.
fn close(inst: &Instance, id: u64, who: &str, state: State, note: Option<&str>) -> Result<Card> {
    let mut t = Txn::begin(inst)?;
    let r = change_in(&mut t, id, |c| {
        check_not_closed(c, state.as_str())?;
        check_not_held(c, who)?;
        c.state = state;
        c.holder = None;
        c.note = note.map(str::to_string);
        c.event(who, state.as_str(), note);
        Ok(())
    });
    if let Ok(c) = &r
        && c.state == State::Done
    {
        unblock(&mut t, c)?;
    }
    t.commit()?;
    r
}

/// The cards waiting for `done` that are ready now: counted ready, and announced.
fn unblock(t: &mut Txn, done: &Card) -> Result<()> {
    for b in &done.blocks {
        let Some(c) = read(t.inst, *b)? else {
            continue;
        };
        if c.state != State::Open || t.idx.class_of(&c) != Class::Waiting {
            continue;
        }
        if index::class(t.inst, &c)? == Class::Ready {
            t.reclass(Some(&c), &c, Class::Ready);
            t.announce(format!(
                "card {} \"{}\" is ready{}",
                c.id,
                c.title,
                c.mentions()
            ));
        }
    }
    Ok(())
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

/// Open `id` again, done, and give it back to `who` for `ttl` (a hook said it is not done
/// yet): it is claimed by `who` as if taken anew, and the cards that wait for it and that
/// its end made ready wait again. Refused (65) when it is not done.
pub fn reopen(inst: &Instance, id: u64, who: &str, ttl: Duration, note: &str) -> Result<Card> {
    let mut t = Txn::begin(inst)?;
    let r = change_in(&mut t, id, |c| {
        if c.state != State::Done {
            return Err(Error::invalid(format!(
                "card {id} is {}: only a card done is opened again",
                c.state.as_str()
            )));
        }
        c.note = None;
        c.event("aw", "reopened", Some(note));
        take(inst, c, who, ttl);
        Ok(())
    });
    if let Ok(c) = &r {
        for b in &c.blocks {
            let Some(w) = read(inst, *b)? else {
                continue;
            };
            if w.state == State::Open && t.idx.class_of(&w) == Class::Ready {
                let class = index::class(inst, &w)?;
                t.reclass(Some(&w), &w, class);
            }
        }
    }
    t.commit()?;
    r
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
