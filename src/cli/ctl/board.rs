//! `aw-ctl board`: add cards, claim them (one by id, or the next ready one), renew,
//! release, finish or drop them, show and list them.

use std::time::Duration;

use super::{Call, who};
use crate::board::{self, Card, Edit, NewCard};
use crate::cli::{self, Out};
use crate::error::{Error, Result};
use crate::names;

/// How long a claim lasts without renewal, unless `--ttl` says.
pub(super) const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);

/// `aw-ctl board add TITLE [--body TEXT | --body -] [--after ID[,ID...]] [--for AGENT]
/// [--label L]... [--as AGENT]`: prints the new id.
pub(super) fn add(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let new = NewCard {
        title: args[0].to_string(),
        body: body(a)?.unwrap_or_default(),
        assignee: listed(a, "for"),
        labels: a.strings("label"),
        after: after(a)?,
    };
    let c = board::add(&inst, &who, new)?;
    print_id(out, &c)
}

/// `--body TEXT` or `--body -` (read from stdin), when given.
fn body(a: &Call) -> Result<Option<String>> {
    Ok(match a.string("body").as_deref() {
        Some("-") => Some(cli::read_stdin("card body", board::MAX_BODY, None)?),
        Some(b) => Some(b.to_string()),
        None => None,
    })
}

/// The values of option `name`, repeated or separated with commas.
fn listed(a: &Call, name: &str) -> Vec<String> {
    let all = a.strings(name);
    let each = all.iter().flat_map(|v| v.split(','));
    each.map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// The card ids of `--after`.
fn after(a: &Call) -> Result<Vec<u64>> {
    listed(a, "after")
        .iter()
        .map(|i| board::parse_id(i))
        .collect()
}

/// `aw-ctl board edit ID [--title T] [--body TEXT | --body -] [--after ID[,ID...]]
/// [--for AGENT[,AGENT...]] [--label L]... [--no-label] [--as AGENT]`: prints the id.
pub(super) fn edit(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let (inst, id, who) = target(a, args)?;
    let given = |n: &str| a.has(n);
    let e = Edit {
        title: a.string("title"),
        body: body(a)?,
        after: given("after").then(|| after(a)).transpose()?,
        assignee: given("for").then(|| listed(a, "for")),
        labels: (given("label") || a.has("no-label")).then(|| a.strings("label")),
    };
    if e.title.is_none()
        && e.body.is_none()
        && e.after.is_none()
        && e.assignee.is_none()
        && e.labels.is_none()
    {
        return Err(Error::Usage(
            "board edit: nothing to change; give --title, --body, --after, --for, --label \
             or --no-label"
                .into(),
        ));
    }
    let c = board::edit(&inst, id, &who, e)?;
    print_id(out, &c)
}

/// `aw-ctl board claim (ID | --next) [--as AGENT] [--ttl DURATION]`: prints the id; exit 1
/// when no card is ready, 75 when the card is held.
pub(super) fn claim(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let who = who(a)?;
    let ttl = match a.string("ttl") {
        Some(t) => cli::parse_duration(&t, "--ttl")?,
        None => DEFAULT_TTL,
    };
    let c = match (args.first(), a.has("next")) {
        (Some(id), false) => {
            inst.require()?;
            board::claim(&inst, board::parse_id(id)?, &who, ttl)?
        }
        (None, true) => {
            inst.require()?;
            board::claim_next(&inst, &who, ttl)?
                .ok_or_else(|| Error::No(format!("no card is ready for {who}")))?
        }
        _ => {
            return Err(
                Error::Usage("board claim takes ID or --next, one of the two".into())
                    .hint("aw-ctl board claim (ID | --next) --as AGENT"),
            );
        }
    };
    print_id(out, &c)
}

/// `aw-ctl board done ID [--note TEXT] [--as AGENT]`.
pub(super) fn done(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let (inst, id, who) = target(a, args)?;
    let c = board::done(&inst, id, &who, a.string("note").as_deref())?;
    print_id(out, &c)
}

/// `aw-ctl board drop ID [--note TEXT] [--as AGENT]`.
pub(super) fn drop(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let (inst, id, who) = target(a, args)?;
    let c = board::drop_card(&inst, id, &who, a.string("note").as_deref())?;
    print_id(out, &c)
}

/// `aw-ctl board release ID [--as AGENT]`.
pub(super) fn release(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let (inst, id, who) = target(a, args)?;
    let c = board::release(&inst, id, &who)?;
    print_id(out, &c)
}

/// `aw-ctl board renew ID [--as AGENT]`.
pub(super) fn renew(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let (inst, id, who) = target(a, args)?;
    let c = board::renew(&inst, id, &who)?;
    print_id(out, &c)
}

/// `aw-ctl board show ID [--json]`: the card, its body and its history.
pub(super) fn show(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    let c = board::show(&inst, board::parse_id(args[0])?)?;
    if a.has("json") {
        out.line(&serde_json::to_string(&c).expect("card serializes"))?;
        return Ok(0);
    }
    out.line(&format!("card {}: {}", c.id, c.title))?;
    out.line(&format!("state: {}", c.state.as_str()))?;
    out.line(&format!("by: {}", c.creator))?;
    if let Some(h) = &c.holder {
        out.line(&format!(
            "held by: {} (pid {} on {}) until {}",
            h.agent, h.pid, h.host, h.until
        ))?;
    }
    if !c.assignee.is_empty() {
        out.line(&format!("for: {}", c.assignee.join(", ")))?;
    }
    if !c.blocks.is_empty() {
        let ids: Vec<String> = c.blocks.iter().map(u64::to_string).collect();
        out.line(&format!("needed by: {}", ids.join(", ")))?;
    }
    if !c.after.is_empty() {
        let ids: Vec<String> = c.after.iter().map(u64::to_string).collect();
        out.line(&format!("after: {}", ids.join(", ")))?;
    }
    if !c.labels.is_empty() {
        out.line(&format!("labels: {}", c.labels.join(", ")))?;
    }
    if let Some(n) = &c.note {
        out.line(&format!("note: {n}"))?;
    }
    if !c.body.is_empty() {
        out.line("")?;
        out.line(c.body.trim_end())?;
    }
    out.line("")?;
    for e in &c.history {
        let note = e
            .note
            .as_deref()
            .map_or(String::new(), |n| format!(": {n}"));
        out.line(&format!("{} {} {}{note}", e.at, e.by, e.event))?;
    }
    Ok(0)
}

/// `aw-ctl board ls [--ready] [--mine AGENT] [--json]`.
pub(super) fn ls(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    let mine = a.string("mine");
    if let Some(m) = &mine {
        names::check_agent(m)?;
    }
    let cards = board::list(&inst)?;
    for c in cards.values() {
        if a.has("ready") && !c.is_ready(&cards) {
            continue;
        }
        if let Some(m) = &mine
            && c.holder.as_ref().is_none_or(|h| &h.agent != m)
            && !c.is_for(m)
        {
            continue;
        }
        if a.has("json") {
            out.line(&c.to_json_line().to_string())?;
        } else {
            out.line(&c.summary())?;
        }
    }
    Ok(0)
}

/// The instance, which must exist, the card id and who acts, of a command that changes
/// the card `args[0]`.
fn target(a: &Call, args: &[&str]) -> Result<(crate::instance::Instance, u64, String)> {
    let inst = a.common.instance()?;
    let id = board::parse_id(args[0])?;
    let who = who(a)?;
    inst.require()?;
    Ok((inst, id, who))
}

/// Print the id of the card.
fn print_id(out: &mut Out, c: &Card) -> Result<u8> {
    out.line(&c.id.to_string())?;
    Ok(0)
}
