//! Changing a card that is not closed: its title, body, the cards it waits for, whom it is
//! for, its labels.

use super::card::Card;
use super::files::{not_found, read, read_after};
use super::index::Txn;
use super::store::{check_body, check_for, check_labels, check_title, cycle};
use crate::error::{Error, Result};
use crate::instance::Instance;

/// What to change of a card; `None` leaves it as it is.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    pub title: Option<String>,
    pub body: Option<String>,
    /// The cards it waits for, all of them (an empty list: none).
    pub after: Option<Vec<u64>>,
    /// The agents it is for, all of them (an empty list: no one).
    pub assignee: Option<Vec<String>>,
    /// Its labels, all of them (an empty list: none).
    pub labels: Option<Vec<String>>,
}

/// Change card `id` as `by`: refused (65) when it is done or dropped or when it would wait
/// for itself (the cycle named), 66 when it or a card it would wait for does not exist.
/// Only the cards reached from the cards it would wait for are read.
pub fn edit(inst: &Instance, id: u64, by: &str, e: Edit) -> Result<Card> {
    let title = e.title.as_deref().map(check_title).transpose()?;
    if let Some(b) = &e.body {
        check_body(b)?;
    }
    let assignee = e.assignee.as_deref().map(check_for).transpose()?;
    let labels = e.labels.as_deref().map(check_labels).transpose()?;
    let mut t = Txn::begin(inst)?;
    let r = edit_in(&mut t, id, by, title, &e, assignee, labels);
    t.commit()?;
    r
}

/// [`edit`] within the change `t`.
fn edit_in(
    t: &mut Txn,
    id: u64,
    by: &str,
    title: Option<&str>,
    e: &Edit,
    assignee: Option<Vec<String>>,
    labels: Option<Vec<String>>,
) -> Result<Card> {
    let inst = t.inst;
    let c = read(inst, id)?.ok_or_else(|| not_found(inst, id))?;
    let old = t.lapse(c)?;
    if old.state.is_closed() {
        return Err(Error::invalid(format!(
            "card {id} is {}: it cannot be edited",
            old.state.as_str()
        )));
    }
    let mut c = old.clone();
    let mut changed = Vec::new();
    if let Some(t) = title.filter(|t| *t != c.title) {
        c.title = t.to_string();
        changed.push("title");
    }
    if let Some(b) = e.body.as_ref().filter(|b| **b != c.body) {
        c.body.clone_from(b);
        changed.push("body");
    }
    if let Some(a) = assignee.filter(|a| *a != c.assignee) {
        c.assignee = a;
        changed.push("for");
    }
    if let Some(l) = labels.filter(|l| *l != c.labels) {
        c.labels = l;
        changed.push("labels");
    }
    let mut deps = Vec::new();
    if let Some(after) = &e.after {
        if after.contains(&id) {
            return Err(Error::invalid(format!(
                "card {id} would wait for itself: {id} -> {id}"
            )));
        }
        deps = read_after(inst, after)?;
        let ids: Vec<u64> = deps.iter().map(|d| d.id).collect();
        let after_of = |n: u64| Ok(read(inst, n)?.map(|c| c.after).unwrap_or_default());
        if let Some(path) = cycle(after_of, id, &ids)? {
            let p: Vec<String> = path.iter().map(u64::to_string).collect();
            return Err(Error::invalid(format!(
                "card {id} would wait for itself: {}",
                p.join(" -> ")
            )));
        }
        if ids != c.after {
            c.after = ids;
            changed.push("after");
        }
    }
    if changed.is_empty() {
        return Ok(old);
    }
    c.event(by, "edited", Some(&changed.join(", ")));
    t.put(Some(&old), &c)?;
    // The cards it waits for no more, and those it waits for now, know it.
    for gone in old.after.iter().filter(|a| !c.after.contains(a)) {
        if let Some(d) = read(inst, *gone)? {
            let mut w = d.clone();
            w.blocks.retain(|b| *b != id);
            t.put(Some(&d), &w)?;
        }
    }
    for d in deps.into_iter().filter(|d| !old.after.contains(&d.id)) {
        let mut w = d.clone();
        if !w.blocks.contains(&id) {
            w.blocks.push(id);
        }
        t.put(Some(&d), &w)?;
    }
    Ok(c)
}
