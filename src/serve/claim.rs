//! An agent's claim, `<agent>.lock`: it names the server file of the process that serves
//! the agent, and is live while that file is locked.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::paths::{dir, lock_name, lock_path};
use super::server::{Dead, Server, alive, is_server_name, server, server_live};
use crate::error::{Error, Result};
use crate::fs::{Lock, owned};
use crate::instance::Instance;

/// How long a claim locked by someone else is tried again while it names no live server
/// nor live process: a reader ([`is_served`]) or a server taking or letting it go holds
/// it for an instant.
const TAKE_RETRY: Duration = Duration::from_millis(100);

/// At most this much of a claim is read (it is four short lines).
const CLAIM_MAX: u64 = 4096;

/// An agent this process serves: its claim in `_state/serve/<agent>.lock`, naming this
/// process's server file; let go (emptied) when dropped.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    server: Arc<Server>,
    network: bool,
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Best effort: a claim left behind names a server that is about to be gone.
        let end = crate::time::deadline(TAKE_RETRY);
        loop {
            match Lock::try_exclusive(&self.path) {
                Ok(Some(lock)) => {
                    let old = read_claim(lock.file(), &self.path, self.network);
                    if let Ok(t) = old
                        && parse(&t).server.as_deref() == Some(&self.server.name)
                    {
                        let _ = write_claim(lock.file(), b"", t.len(), self.network);
                    }
                    return;
                }
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
                _ => return,
            }
        }
    }
}

/// Read a claim from its open file, as the server of a network file system has it.
fn read_claim(f: &std::fs::File, path: &Path, network: bool) -> std::io::Result<Vec<u8>> {
    if network {
        return crate::fs::netfs::Fresh::new(f.try_clone()?, path).read_range(0, CLAIM_MAX);
    }
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; CLAIM_MAX as usize];
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok(buf)
}

/// Write a claim in place through its locked file, over `old` bytes (cut where they were
/// more); flushed to the server of a network file system before the lock is let go.
fn write_claim(f: &std::fs::File, text: &[u8], old: usize, network: bool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    if !text.is_empty() {
        f.write_all_at(text, 0)?;
    }
    if old > text.len() {
        f.set_len(text.len() as u64)?;
    }
    if network {
        f.sync_data()?;
    }
    Ok(())
}

/// Claim each agent for this process, or say which process serves one (exit 75); the
/// claims in the order of `agents`. ([`super::take`] also lists the process in the user's
/// registry.)
///
/// They are taken in one order, by name, whatever the order given: two servers that name
/// the same agents in different orders meet at the first claim, and one of them gets all,
/// instead of each getting one and both giving up. What was taken before a refusal is let
/// go. No descriptor stays open per agent: the claims hold this process's one server lock.
pub fn take(inst: &Instance, agents: &[&str]) -> Result<Vec<Claim>> {
    let d = dir(inst);
    let folder = owned::folder(&d, true).map_err(|e| Error::create(&d, e))?;
    let network = crate::fs::netfs::is_network_fs(&d);
    let server = server(&d)?;
    let host = crate::host::this();
    let text = format!(
        "{}\n{}\n{}\n{}\n",
        std::process::id(),
        host.name,
        host.id,
        server.name
    );
    let mut dead = Dead::new();
    let mut order: Vec<usize> = (0..agents.len()).collect();
    order.sort_by_key(|&i| agents[i]);
    let mut held: Vec<Option<Claim>> = agents.iter().map(|_| None).collect();
    for i in order {
        let a = agents[i];
        let name = lock_name(a);
        let path = d.join(&name);
        let end = crate::time::deadline(TAKE_RETRY);
        loop {
            if let Some(lock) = Lock::try_exclusive_in(&folder, &name)? {
                let old =
                    read_claim(lock.file(), &path, network).map_err(|e| Error::io(&path, e))?;
                let who = parse(&old);
                if let Some(s) = &who.server
                    && server_live(&d, s, network, &mut dead)?
                {
                    return Err(busy(inst, a, who));
                }
                write_claim(lock.file(), text.as_bytes(), old.len(), network)
                    .map_err(|e| Error::io(&path, e))?;
                held[i] = Some(Claim {
                    path,
                    server: server.clone(),
                    network,
                });
                break;
            }
            // Locked: by a server of an earlier version for its life, or for an instant.
            let who = holder(&path, network).unwrap_or(Holder::NOBODY);
            let live = match &who.server {
                Some(s) => server_live(&d, s, network, &mut dead)?,
                None => crate::host::is_this(who.host_id.as_deref()) && who.pid.is_some_and(alive),
            };
            if live || Instant::now() >= end {
                return Err(busy(inst, a, who));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(held.into_iter().flatten().collect())
}

/// The refusal of `agent`, naming who serves it.
fn busy(inst: &Instance, agent: &str, who: Holder) -> Error {
    let pid = who.pid.map_or("?".to_string(), |p| p.to_string());
    let on = who.host.map(|h| format!(" on {h}")).unwrap_or_default();
    Error::Busy(format!(
        "{agent}@{}: already served by aw-run pid {pid}{on}",
        inst.name()
    ))
}

/// Who an agent's claim names: pid, host name, host id and server file, one a line (an
/// older version wrote three lines, or the pid only, and named no server file).
struct Holder {
    pid: Option<u32>,
    host: Option<String>,
    host_id: Option<String>,
    server: Option<String>,
}

impl Holder {
    const NOBODY: Holder = Holder {
        pid: None,
        host: None,
        host_id: None,
        server: None,
    };
}

fn parse(text: &[u8]) -> Holder {
    let s = String::from_utf8_lossy(text);
    let mut lines = s.lines().map(str::trim);
    let pid = lines.next().and_then(|l| l.parse().ok());
    let host = lines.next().filter(|l| !l.is_empty()).map(str::to_string);
    let host_id = lines
        .next()
        .filter(|l| crate::host::valid_id(l))
        .map(str::to_string);
    let server = lines
        .next()
        .filter(|l| is_server_name(l))
        .map(str::to_string);
    Holder {
        pid,
        host,
        host_id,
        server,
    }
}

/// What is written in an agent's claim, read without its lock.
fn holder(path: &Path, network: bool) -> Option<Holder> {
    let f = owned::open_read(path).ok()?;
    read_claim(&f, path, network).ok().map(|t| parse(&t))
}

/// Is `agent` served by a running process?
pub fn is_served(inst: &Instance, agent: &str) -> bool {
    served(inst, agent, &mut Dead::new())
}

/// [`is_served`], with the servers already found dead.
pub(super) fn served(inst: &Instance, agent: &str, dead: &mut Dead) -> bool {
    served_by(inst, agent, dead).is_some()
}

/// Who serves `agent`: `None` when nobody does; the name of the live server file its claim
/// names, or `Some(None)` when served by a server that cannot be told (of an earlier
/// version, or taking or letting go the agent this instant).
pub(super) fn served_by(inst: &Instance, agent: &str, dead: &mut Dead) -> Option<Option<String>> {
    let path = lock_path(inst, agent);
    if !path.exists() {
        return None;
    }
    let d = dir(inst);
    let network = crate::fs::netfs::is_network_fs(&d);
    // Locked exclusively: by a server of an earlier version for its life, or by a server
    // taking or letting go the agent this instant. Can't tell: served.
    let Ok(Some(lock)) = Lock::try_shared(&path) else {
        return Some(None);
    };
    let Ok(text) = read_claim(lock.file(), &path, network) else {
        return Some(None);
    };
    match parse(&text).server {
        Some(s) => match server_live(&d, &s, network, dead) {
            Ok(true) => Some(Some(s)),
            Ok(false) => None,
            Err(_) => Some(None),
        },
        // Empty, or of an earlier version whose lock nobody holds.
        None => None,
    }
}

/// Wait until nothing serves `agent` any more, at most `timeout`; `true` when so.
pub fn wait_unserved(inst: &Instance, agent: &str, timeout: Duration) -> bool {
    let end = crate::time::deadline(timeout);
    loop {
        if !is_served(inst, agent) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::Served;
    use super::super::record::list;
    use super::super::server::SERVER_SUFFIX;
    use super::*;

    /// A new instance "t" in a temporary root (removed when the folder is dropped).
    fn instance() -> (tempfile::TempDir, Instance) {
        let tmp = tempfile::tempdir().unwrap();
        let inst = crate::instance::Root::new(tmp.path())
            .instance("t")
            .unwrap();
        inst.create().unwrap();
        (tmp, inst)
    }

    #[test]
    fn a_held_lock_is_served_and_refuses_a_second_server() {
        let (_tmp, inst) = instance();
        assert!(!is_served(&inst, "alice"));
        let held = take(&inst, &["alice"]).unwrap();
        assert!(is_served(&inst, "alice"));
        let e = take(&inst, &["alice"]).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(held);
        assert!(!is_served(&inst, "alice"));
        assert!(list(&inst).is_empty());
    }

    /// The record a test server gives its agents.
    fn test_record() -> Served {
        Served {
            instance: "t".into(),
            agent: String::new(),
            pid: std::process::id(),
            host: Some(crate::host::this().name.clone()),
            host_id: Some(crate::host::this().id.clone()),
            state: super::super::ControllerState::Idle,
            runs: 0,
            workflow: Some("/w.yaml".into()),
            started: "2026-11-29T10:00:00.000Z".into(),
            caps: None,
            server: None,
        }
    }

    #[test]
    fn an_agent_has_its_servers_record_until_it_writes_its_own_and_a_stale_one_is_not_shown() {
        use super::super::ControllerState::{Idle, Running};
        use super::super::record::{record, show_served, write};
        let (_tmp, inst) = instance();
        // Left by a server that died: another pid, running, seven runs.
        let stale = Served {
            pid: 1,
            state: Running,
            runs: 7,
            agent: "a".into(),
            server: Some("0000000000000000.1.1.server".into()),
            ..test_record()
        };
        std::fs::create_dir_all(dir(&inst)).unwrap();
        let stale_text = serde_json::to_string(&stale).unwrap();
        std::fs::write(dir(&inst).join("a.json"), &stale_text).unwrap();
        let claims = take(&inst, &["a", "b"]).unwrap();
        // Served, but not shown until their server says they are all registered.
        assert!(is_served(&inst, "a") && list(&inst).is_empty() && record(&inst, "a").is_none());
        show_served(&inst, &test_record()).unwrap();
        let mine = server_files(&inst).pop().unwrap();
        let served = list(&inst);
        assert_eq!(served.len(), 2, "{served:?}");
        for (s, name) in served.iter().zip(["a", "b"]) {
            let want = Served {
                agent: name.into(),
                server: Some(mine.clone()),
                ..test_record()
            };
            assert_eq!(s, &want);
            assert_eq!(record(&inst, name).as_ref(), Some(&want));
        }
        // No record of their own was written; the stale one is as it was.
        assert!(!dir(&inst).join("b.json").exists());
        assert_eq!(
            std::fs::read_to_string(dir(&inst).join("a.json")).unwrap(),
            stale_text
        );
        // One that runs writes its own, naming this server, and is shown by it.
        let running = Served {
            agent: "b".into(),
            state: Running,
            runs: 1,
            ..test_record()
        };
        write(&inst, &running).unwrap();
        let b = record(&inst, "b").unwrap();
        assert_eq!((b.state, b.runs), (Running, 1));
        assert_eq!(b.server.as_deref(), Some(mine.as_str()));
        assert_eq!(list(&inst)[0].state, Idle);
        assert_eq!(list(&inst)[1], b);
        drop(claims);
        assert!(list(&inst).is_empty() && record(&inst, "a").is_none());
        // The server's files are gone with it.
        let left: Vec<String> = std::fs::read_dir(dir(&inst))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".server"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    fn server_files(inst: &Instance) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir(inst))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(SERVER_SUFFIX))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn claims_share_one_server_lock_and_a_dead_server_s_claims_are_taken() {
        let (_tmp, inst) = instance();
        let first = take(&inst, &["a", "b"]).unwrap();
        let worker = take(&inst, &["c"]).unwrap();
        let mine = server_files(&inst);
        assert_eq!(mine.len(), 1, "{mine:?}");
        let claim = std::fs::read_to_string(lock_path(&inst, "c")).unwrap();
        assert_eq!(claim.lines().nth(3), Some(mine[0].as_str()), "{claim}");
        // One claim let go: that agent alone is free, and emptied.
        drop(worker);
        assert!(!is_served(&inst, "c") && is_served(&inst, "a"));
        assert_eq!(std::fs::read(lock_path(&inst, "c")).unwrap(), b"");
        drop(first);
        assert!(server_files(&inst).is_empty());
        // Claims naming a server whose file nobody holds: free, and taken; that file is
        // swept when the next server starts.
        let dead = "0000000000000000.1.1.server";
        std::fs::write(dir(&inst).join(dead), "1\n").unwrap();
        for a in ["a", "b"] {
            std::fs::write(
                lock_path(&inst, a),
                format!("1\nelsewhere\n0000000000000000\n{dead}\n"),
            )
            .unwrap();
        }
        assert!(!is_served(&inst, "a"));
        let again = take(&inst, &["b", "a"]).unwrap();
        assert!(is_served(&inst, "a") && is_served(&inst, "b"));
        let now = server_files(&inst);
        assert_eq!(now.len(), 1, "{now:?}");
        assert_ne!(now[0], dead);
        drop(again);
    }
}
