//! The attempts of an instance, read from their transcripts, and the runs they make up: the
//! attempts of one `aw-run` process (one host and pid), numbered in the order they began.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use serde::Deserialize;

use super::data::{Attempt, LAST_LINES, Run, millis, rfc3339};
use crate::error::Result;
use crate::instance::Instance;
use crate::usage::Usage;

/// The keys of a transcript a report reads.
#[derive(Debug, Deserialize)]
struct Stored {
    run: u64,
    attempt: u64,
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    exit_code: Option<i64>,
    started: String,
    duration_ms: u64,
    #[serde(default)]
    inbox: Vec<u64>,
    #[serde(default)]
    reply: Vec<u64>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stdout_cut: u64,
    #[serde(default)]
    stderr: String,
    #[serde(default)]
    stderr_cut: u64,
    #[serde(default)]
    server: Option<Server>,
}

/// The `aw-run` process that wrote a transcript.
#[derive(Debug, Deserialize)]
struct Server {
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    host_id: Option<String>,
    pid: u32,
}

/// Every attempt of every agent of `inst` that has transcripts, in the order they started,
/// each with the number of its run. A transcript that does not read is a problem, left out.
pub(super) fn attempts(inst: &Instance, problems: &mut Vec<String>) -> Result<Vec<Attempt>> {
    let dir = inst.state_dir().join("runs");
    let mut agents: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                crate::names::is_agent_name(&name).then_some(name)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    agents.sort();
    let mut all = Vec::new();
    for agent in &agents {
        for (n, path) in crate::transcript::numbered(inst, agent)? {
            let read = crate::fs::owned::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Stored>(&b).map_err(|e| e.to_string()));
            let t = match read {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!("{}: transcript left out: {e}", path.display()));
                    continue;
                }
            };
            let Some(start_ms) = millis(&t.started) else {
                problems.push(format!("{}: transcript left out: no start", path.display()));
                continue;
            };
            let last_lines = (t.status != "ok").then(|| last_lines(inst, agent, n, &t));
            let host = t.server.as_ref().and_then(|s| s.host.clone());
            let server = t
                .server
                .map(|s| (s.host_id.or(s.host).unwrap_or_default(), s.pid));
            all.push(Attempt {
                agent: agent.clone(),
                n,
                agent_run: t.run,
                attempt: t.attempt,
                server_run: 0,
                status: t.status,
                reason: t.reason,
                exit_code: t.exit_code,
                ended: rfc3339(start_ms + t.duration_ms as i64),
                started: t.started,
                duration_ms: t.duration_ms,
                inbox: t.inbox,
                reply: t.reply,
                usage: t.usage,
                last_lines,
                start_ms,
                server,
                host,
            });
        }
    }
    all.sort_by(|a, b| (a.start_ms, &a.agent, a.n).cmp(&(b.start_ms, &b.agent, b.n)));
    // Runs are numbered in the order of their first attempt (attempts are in that order).
    let mut number: BTreeMap<Option<(String, u32)>, u64> = BTreeMap::new();
    for a in &mut all {
        let next = number.len() as u64 + 1;
        a.server_run = *number.entry(a.server.clone()).or_insert(next);
    }
    Ok(all)
}

/// The runs that `attempts` (as [`attempts`] gives them) make up, by number.
pub(super) fn runs(attempts: &[Attempt]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let mut end: Vec<i64> = Vec::new();
    for a in attempts {
        let i = a.server_run as usize - 1;
        if i == out.len() {
            out.push(Run {
                n: a.server_run,
                host: a.host.clone(),
                pid: a.server.as_ref().map(|s| s.1),
                start: a.started.clone(),
                end: String::new(),
                attempts: 0,
                failed: 0,
                agents: Vec::new(),
            });
            end.push(a.start_ms);
        }
        let r = &mut out[i];
        r.attempts += 1;
        r.failed += u64::from(a.status != "ok");
        if !r.agents.contains(&a.agent) {
            r.agents.push(a.agent.clone());
        }
        end[i] = end[i].max(a.start_ms + a.duration_ms as i64);
    }
    for (r, e) in out.iter_mut().zip(end) {
        r.end = rfc3339(e);
        r.agents.sort();
    }
    out
}

/// Bytes read from the end of an attempt's log for its last lines.
const TAIL_BYTES: u64 = 64 * 1024;

/// The last [`LAST_LINES`] lines of a failed attempt's output, and its reason: from its
/// transcript when it kept the whole output (stderr, else stdout), else from the end of
/// its log `<n>.log`, which goes on where the transcript was cut.
fn last_lines(inst: &Instance, agent: &str, n: u64, t: &Stored) -> String {
    let whole = t.stdout_cut == 0 && t.stderr_cut == 0;
    let text = match (whole, t.stderr.trim().is_empty()) {
        (true, false) => t.stderr.clone(),
        (true, true) => t.stdout.clone(),
        (false, _) => {
            let dir = crate::transcript::transcript_dir(inst, agent);
            log_tail(&crate::transcript::log_path(&dir, n)).unwrap_or_else(|| {
                if t.stderr.trim().is_empty() {
                    t.stdout.clone()
                } else {
                    t.stderr.clone()
                }
            })
        }
    };
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(LAST_LINES)..].join("\n")
}

/// The last [`TAIL_BYTES`] of the file at `path`, from its first whole line.
fn log_tail(path: &std::path::Path) -> Option<String> {
    let mut f = crate::fs::owned::open_read(path).ok()?;
    let len = f.seek(SeekFrom::End(0)).ok()?;
    let from = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Some(match (from > 0, text.find('\n')) {
        (true, Some(k)) => text[k + 1..].to_string(),
        _ => text,
    })
}
