//! Leases on files of the work tree: who is editing which paths, until when, and why.
//!
//! A lease is one small JSON file, `<instance>/leases/<id>.json`, readable without aw. It is
//! taken, released and swept under the flock of `leases/.lock`, so that of two takers whose
//! paths overlap ([`glob::overlap`]) and one of which is exclusive, exactly one holds. Ids
//! come from the counter `leases/.next` and are never reused. A lease lapses when its time
//! runs out; a lapsed lease is ignored at once and its file removed by the next taker.

pub mod glob;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::fs::{Lock, atomic_write, owned};
use crate::instance::Instance;
use crate::{Error, Result};

use glob::{Glob, overlap};

/// A lease's time to live when none is given.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);

/// One lease, as stored in `leases/<id>.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// `L` and a number, never reused in the instance.
    pub id: String,
    /// The agent (or person, or script) that holds it.
    pub holder: String,
    /// The paths and globs leased, relative to the work tree.
    pub paths: Vec<String>,
    /// `exclusive` or `shared`.
    pub mode: String,
    /// Why it was taken (may be empty).
    pub reason: String,
    /// When it was taken, UTC.
    pub taken: String,
    /// When it lapses, UTC.
    pub until: String,
    /// When it lapses, milliseconds since the epoch.
    pub until_ms: i64,
    /// The host it was taken on.
    pub host: String,
}

impl Lease {
    /// Whether only shared leases may overlap it.
    pub fn is_shared(&self) -> bool {
        self.mode == "shared"
    }

    /// Whether its time has run out at `now_ms`.
    pub fn lapsed(&self, now_ms: i64) -> bool {
        self.until_ms <= now_ms
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

    /// One line for people: `L3 bob exclusive src/** until … (why)`.
    pub fn line(&self) -> String {
        let reason = if self.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", self.reason)
        };
        format!(
            "{} {} {} {} until {}{reason}",
            self.id,
            self.holder,
            self.mode,
            self.paths.join(" "),
            self.until
        )
    }
}

/// What a taker asks for.
#[derive(Clone, Debug)]
pub struct Request {
    pub holder: String,
    pub paths: Vec<String>,
    pub shared: bool,
    pub ttl: Duration,
    pub reason: String,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn stamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
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
    let now = now_ms();
    Ok(stored(inst)?
        .into_iter()
        .map(|(_, l)| l)
        .filter(|l| !l.lapsed(now))
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
    let _lock = lock(inst)?;
    let now = now_ms();
    for (path, held) in stored(inst)? {
        if held.lapsed(now) {
            let _ = owned::remove(&path);
            continue;
        }
        if held.holder == req.holder || (held.is_shared() && req.shared) {
            continue;
        }
        if let Some((theirs, ours)) = held.overlapping(&globs) {
            return Err(conflict(&held, &theirs, &ours));
        }
    }
    let id = format!("L{}", next_id(inst)?);
    let until_ms = now.saturating_add(i64::try_from(req.ttl.as_millis()).unwrap_or(i64::MAX));
    let lease = Lease {
        id,
        holder: req.holder.clone(),
        paths: req.paths.clone(),
        mode: if req.shared { "shared" } else { "exclusive" }.into(),
        reason: req.reason.clone(),
        taken: stamp(now),
        until: stamp(until_ms),
        until_ms,
        host: crate::host::this().name.clone(),
    };
    write(inst, &lease)?;
    Ok(lease)
}

fn conflict(held: &Lease, theirs: &str, ours: &str) -> Error {
    let why = if held.reason.is_empty() {
        String::new()
    } else {
        format!(": {}", held.reason)
    };
    let what = if theirs == ours {
        ours.to_string()
    } else {
        format!("{ours} (overlaps {theirs})")
    };
    Error::Busy(format!(
        "{what} is leased by {} ({}, {}) until {}{why}",
        held.holder, held.mode, held.id, held.until
    ))
}

/// [`take`], waiting up to `wait` for the leases in the way to be released or to lapse.
pub fn take_waiting(inst: &Instance, req: &Request, wait: Duration) -> Result<Lease> {
    let deadline = crate::time::deadline(wait);
    loop {
        match take(inst, req) {
            Err(Error::Busy(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn write(inst: &Instance, lease: &Lease) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(lease).expect("a lease serializes");
    bytes.push(b'\n');
    atomic_write(&dir(inst).join(format!("{}.json", lease.id)), &bytes)
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

/// Release the lease `id`; only its holder may. Returns it.
pub fn release(inst: &Instance, id: &str, holder: &str) -> Result<Lease> {
    let _lock = lock(inst)?;
    let now = now_ms();
    let Some((path, lease)) = stored(inst)?
        .into_iter()
        .find(|(_, l)| l.id == id && !l.lapsed(now))
    else {
        return Err(Error::NotFound(format!("no lease {id}")));
    };
    if lease.holder != holder {
        return Err(Error::Denied(format!(
            "lease {id} is held by {}, not {holder}",
            lease.holder
        )));
    }
    owned::remove(&path).map_err(|e| Error::io(&path, e))?;
    Ok(lease)
}

/// Release every lease of `holder`, or with `paths`, those that name one of them. Returns the
/// leases released.
pub fn release_holder(inst: &Instance, holder: &str, paths: &[String]) -> Result<Vec<Lease>> {
    let _lock = lock(inst)?;
    let mut out = Vec::new();
    for (path, lease) in stored(inst)? {
        if lease.holder != holder
            || (!paths.is_empty() && !lease.paths.iter().any(|p| paths.contains(p)))
        {
            continue;
        }
        owned::remove(&path).map_err(|e| Error::io(&path, e))?;
        out.push(lease);
    }
    Ok(out)
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
            if Some(l.holder.as_str()) != agent && l.overlapping(std::slice::from_ref(g)).is_some()
            {
                out.push((g.as_str().to_string(), l.clone()));
            }
        }
    }
    Ok(out)
}
