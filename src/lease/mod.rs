//! Leases on files of the work tree: who is editing which paths, until when, and why.
//!
//! A lease is one small JSON file, `<instance>/leases/L<n>.json`, readable without aw. It is
//! taken, renewed, released and swept under the flock of `leases/.lock`, so that of two
//! takers whose paths overlap ([`glob::overlap`]) and one of which is exclusive, exactly one
//! holds. Ids come from the counter `leases/.next` and are never reused. A lease is held
//! like a claim on a card ([`Holder`]): it lapses when its time runs out without renewal, or
//! when the server that held it for its agent serves it no more (gone, even killed -9, on
//! whatever host); a lapsed lease is ignored at once and its file removed by the next
//! taker. Every release rewrites `leases/.released`, which a taker that waits watches.

pub mod glob;
pub mod hook;
pub mod tree;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::fs::watch::FileWaiter;
use crate::fs::{Lock, atomic_write, owned};
use crate::holder::Holder;
use crate::instance::Instance;
use crate::{Error, Result};

use glob::{Glob, overlap};

/// The longest reason a lease may give, in bytes.
pub const MAX_REASON: usize = 1000;

/// A lease's time to live when none is given.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);

/// The longest a waiting taker goes without looking again: a lease in its way may lapse
/// without any release (its holder's server killed), which no watch sees.
const RECHECK: Duration = Duration::from_secs(1);

/// One lease, as stored in `leases/<id>.json`: its id, its holder's fields (agent, pid,
/// host, host_id, served, since, until, ttl), its paths, mode and reason, and the card it
/// goes with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    /// `L` and a number, never reused in the instance.
    pub id: String,
    /// Who holds it (the agent, or a person, or a script), and until when.
    #[serde(flatten)]
    pub holder: Holder,
    /// The paths and globs leased, relative to the work tree.
    pub paths: Vec<String>,
    /// `exclusive` or `shared`.
    pub mode: String,
    /// Why it was taken (may be empty).
    pub reason: String,
    /// The card of the board its holder works on: the lease is released when the card is
    /// done or dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<u64>,
}

impl Lease {
    /// Whether only shared leases may overlap it.
    pub fn is_shared(&self) -> bool {
        self.mode == "shared"
    }

    /// The agent that holds it.
    pub fn agent(&self) -> &str {
        &self.holder.agent
    }

    /// When it lapses unless renewed, UTC.
    pub fn until(&self) -> &str {
        &self.holder.until
    }

    /// Why it lapsed, if it did: its time ran out, or its holder's server is gone.
    pub fn lapsed(&self, inst: &Instance) -> Option<String> {
        self.holder.lapsed(inst)
    }

    /// The first of its paths that overlaps one of `globs`.
    fn overlapping(&self, globs: &[Glob]) -> Option<(String, String)> {
        for mine in &self.paths {
            let Ok(g) = Glob::parse(mine) else { continue };
            if let Some(other) = globs.iter().find(|o| overlap(&g, o)) {
                return Some((mine.clone(), other.as_str().to_string()));
            }
        }
        None
    }

    /// One line for people: `L3 bob exclusive src/** until … (card 4): why`.
    pub fn line(&self) -> String {
        let reason = match self.reason.is_empty() {
            true => String::new(),
            false => format!(": {}", self.reason),
        };
        let card = self.card.map_or(String::new(), |c| format!(" (card {c})"));
        format!(
            "{} {} {} {} until {}{card}{reason}",
            self.id,
            self.agent(),
            self.mode,
            self.paths.join(" "),
            self.until()
        )
    }

    /// One line of `aw-ctl lease ls --json`.
    pub fn to_json_line(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "agent": self.agent(),
            "paths": self.paths,
            "mode": self.mode,
            "reason": self.reason,
            "card": self.card,
            "since": self.holder.since,
            "until": self.until(),
            "host": self.holder.host,
            "pid": self.holder.pid,
            "served": self.holder.served,
        })
    }
}

/// What a taker asks for.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The agent (or person, or script) that takes it.
    pub holder: String,
    /// Paths and globs relative to the work tree (see [`tree`]).
    pub paths: Vec<String>,
    pub shared: bool,
    pub ttl: Duration,
    pub reason: String,
    /// The card the taker works on, if any: the lease is released when it is done.
    pub card: Option<u64>,
}

/// The folder of an instance's leases.
pub fn dir(inst: &Instance) -> PathBuf {
    inst.dir().join("leases")
}

fn lock(inst: &Instance) -> Result<Lock> {
    inst.create()?;
    let d = dir(inst);
    owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    Lock::exclusive(&d.join(".lock"))
}

fn read(path: &Path) -> Result<Lease> {
    let bytes = owned::read_fresh(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        why: format!("not a lease: {e}"),
    })
}

/// Every lease stored, lapsed ones included, in the order of their ids.
fn stored(inst: &Instance) -> Result<Vec<(PathBuf, Lease)>> {
    let d = dir(inst);
    let names = match owned::files(&d) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&d, e)),
    };
    let mut out = Vec::new();
    for name in names {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let path = d.join(name);
        match read(&path) {
            Ok(l) => out.push((path, l)),
            // Released between the listing and the read.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    out.sort_by_key(|(_, l)| number(&l.id));
    Ok(out)
}

fn number(id: &str) -> u64 {
    id.trim_start_matches('L').parse().unwrap_or(u64::MAX)
}

/// The leases that have not lapsed, in the order of their ids.
pub fn list(inst: &Instance) -> Result<Vec<Lease>> {
    Ok(stored(inst)?
        .into_iter()
        .map(|(_, l)| l)
        .filter(|l| l.lapsed(inst).is_none())
        .collect())
}

fn parse_all(paths: &[String]) -> Result<Vec<Glob>> {
    if paths.is_empty() {
        return Err(Error::Usage(
            "a lease needs at least one path or glob".into(),
        ));
    }
    paths.iter().map(|p| Glob::parse(p)).collect()
}

/// Take a lease, or fail at once (exit 75) naming the lease in the way: its holder, until
/// when, and why. Leases of the same holder never stand in each other's way.
pub fn take(inst: &Instance, req: &Request) -> Result<Lease> {
    let globs = parse_all(&req.paths)?;
    crate::names::check_agent(&req.holder)?;
    if req.reason.len() > MAX_REASON {
        return Err(Error::invalid(format!(
            "the reason of a lease is {} bytes, over {MAX_REASON}",
            req.reason.len()
        )));
    }
    let _lock = lock(inst)?;
    let mut swept = false;
    for (path, held) in stored(inst)? {
        if held.lapsed(inst).is_some() {
            swept |= owned::remove(&path).is_ok();
            continue;
        }
        if held.agent() == req.holder || (held.is_shared() && req.shared) {
            continue;
        }
        if let Some((theirs, ours)) = held.overlapping(&globs) {
            if swept {
                released(inst)?;
            }
            return Err(conflict(&held, &theirs, &ours));
        }
    }
    if swept {
        released(inst)?;
    }
    let lease = Lease {
        id: format!("L{}", next_id(inst)?),
        holder: Holder::new(inst, &req.holder, req.ttl),
        paths: req.paths.clone(),
        mode: if req.shared { "shared" } else { "exclusive" }.into(),
        reason: req.reason.clone(),
        card: req.card,
    };
    write(inst, &lease)?;
    Ok(lease)
}

fn conflict(held: &Lease, theirs: &str, ours: &str) -> Error {
    let why = match held.reason.is_empty() {
        true => String::new(),
        false => format!(": {}", held.reason),
    };
    let what = match theirs == ours {
        true => ours.to_string(),
        false => format!("{ours} (overlaps {theirs})"),
    };
    Error::Busy(format!(
        "{what} is leased by {} ({}, {}) until {}{why}",
        held.agent(),
        held.mode,
        held.id,
        held.until()
    ))
}

/// [`take`], waiting up to `wait` for the leases in the way to be released or to lapse.
/// It wakes on a release (a watch on `leases/.released`, which also polls on a network
/// file system, where another host's writes raise no inotify event), and looks again at
/// least every second for a lease whose holder's server is gone.
pub fn take_waiting(inst: &Instance, req: &Request, wait: Duration) -> Result<Lease> {
    let deadline = crate::time::deadline(wait);
    let mut waiter: Option<FileWaiter> = None;
    loop {
        let err = match take(inst, req) {
            Err(Error::Busy(m)) => Error::Busy(m),
            other => return other,
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(err);
        }
        // Made after the first refusal (which made the folder), before the next look: a
        // release in between wakes the wait below at once.
        let w = match &mut waiter {
            Some(w) => w,
            None => waiter.insert(FileWaiter::new(&released_path(inst), None)?),
        };
        w.wait(Some(left.min(RECHECK)));
    }
}

fn write(inst: &Instance, lease: &Lease) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(lease).expect("a lease serializes");
    bytes.push(b'\n');
    atomic_write(&dir(inst).join(format!("{}.json", lease.id)), &bytes)
}

fn released_path(inst: &Instance) -> PathBuf {
    dir(inst).join(".released")
}

/// Tell the takers that wait that leases were released (the caller holds the lock).
fn released(inst: &Instance) -> Result<()> {
    atomic_write(&released_path(inst), crate::time::now().as_bytes())
}

/// The next id, from `leases/.next` (the caller holds the lock).
fn next_id(inst: &Instance) -> Result<u64> {
    let path = dir(inst).join(".next");
    let n = match owned::read_fresh(&path) {
        Ok(b) => String::from_utf8_lossy(&b)
            .trim()
            .parse::<u64>()
            .map_err(|e| Error::Corrupt {
                path: path.clone(),
                why: format!("not a number: {e}"),
            })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1,
        Err(e) => return Err(Error::io(&path, e)),
    };
    atomic_write(&path, format!("{}\n", n + 1).as_bytes())?;
    Ok(n)
}

/// The live lease `id`, held by `agent` (refused with 77 otherwise), and its file; the
/// caller holds the lock.
fn held_by(inst: &Instance, id: &str, agent: &str) -> Result<(PathBuf, Lease)> {
    let Some((path, lease)) = stored(inst)?
        .into_iter()
        .find(|(_, l)| l.id == id && l.lapsed(inst).is_none())
    else {
        return Err(
            Error::NotFound(format!("no lease {id}")).hint("aw-ctl lease ls lists the leases held")
        );
    };
    if lease.agent() != agent {
        return Err(Error::Denied(format!(
            "lease {id} is held by {}, not {agent}",
            lease.agent()
        )));
    }
    Ok((path, lease))
}

/// Release the lease `id`; only its holder may. Returns it.
pub fn release(inst: &Instance, id: &str, holder: &str) -> Result<Lease> {
    let _lock = lock(inst)?;
    let (path, lease) = held_by(inst, id, holder)?;
    owned::remove(&path).map_err(|e| Error::io(&path, e))?;
    released(inst)?;
    Ok(lease)
}

/// Extend `holder`'s lease `id` by its time to live from now. Returns it.
pub fn renew(inst: &Instance, id: &str, holder: &str) -> Result<Lease> {
    let _lock = lock(inst)?;
    let (_, mut lease) = held_by(inst, id, holder)?;
    lease.holder.renew();
    write(inst, &lease)?;
    Ok(lease)
}

/// Remove, under the lock, the leases `pick` chooses; returns them.
fn release_where(inst: &Instance, pick: impl Fn(&Lease) -> bool) -> Result<Vec<Lease>> {
    let _lock = lock(inst)?;
    let mut out = Vec::new();
    for (path, lease) in stored(inst)? {
        if pick(&lease) {
            owned::remove(&path).map_err(|e| Error::io(&path, e))?;
            out.push(lease);
        }
    }
    if !out.is_empty() {
        released(inst)?;
    }
    Ok(out)
}

/// Release every lease of `holder`, or with `paths`, those that name one of them. Returns the
/// leases released.
pub fn release_holder(inst: &Instance, holder: &str, paths: &[String]) -> Result<Vec<Lease>> {
    release_where(inst, |l| {
        l.agent() == holder && (paths.is_empty() || l.paths.iter().any(|p| paths.contains(p)))
    })
}

/// Release every lease taken for the card `card` (when it is done or dropped). Returns the
/// leases released.
pub fn release_card(inst: &Instance, card: u64) -> Result<Vec<Lease>> {
    if !dir(inst).is_dir() {
        return Ok(Vec::new());
    }
    release_where(inst, |l| l.card == Some(card))
}

/// For each of `paths` (paths or globs), the live leases of someone other than `agent` on
/// it: `(path, lease)` pairs, in the order of `paths`.
pub fn check(
    inst: &Instance,
    paths: &[String],
    agent: Option<&str>,
) -> Result<Vec<(String, Lease)>> {
    let globs = parse_all(paths)?;
    let leases = list(inst)?;
    let mut out = Vec::new();
    for g in &globs {
        for l in &leases {
            if Some(l.agent()) != agent && l.overlapping(std::slice::from_ref(g)).is_some() {
                out.push((g.as_str().to_string(), l.clone()));
            }
        }
    }
    Ok(out)
}
