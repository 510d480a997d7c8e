//! `aw-ctl` commands about the agents aw-run serves and their runs: ps, stop, runs.
//!
//! They only read what aw-run keeps under `_state/serve/` (who serves which agent),
//! `_state/runs/<agent>/<n>.json` (one transcript per attempt) and
//! `_state/iterations/<agent>.jsonl` (which run was which iteration of `aw-run --iter`);
//! `stop` also writes stop requests there (see [`serve::request_stop`]).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Call, agent_instance};
use crate::cli::{Common, Out};
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::names::{self, Target};
use crate::registry::Registry;
use crate::serve::{self, Served};
use crate::transcript::transcript_dir;

/// The options of ps, stop and runs.
struct Opts<'a> {
    common: &'a Common,
    json: bool,
    all: bool,
    all_roots: bool,
    /// (stop) seconds to wait.
    timeout: Option<u64>,
    /// (runs) follow the agent's attempts as they run.
    follow: bool,
}

impl<'a> Opts<'a> {
    fn parse(c: &'a Call) -> Result<Opts<'a>> {
        Ok(Opts {
            common: &c.common,
            json: c.has("json"),
            all: c.has("all"),
            all_roots: c.has("all-roots"),
            timeout: c.number("timeout")?,
            follow: c.has("follow"),
        })
    }
}

/// How long `stop` waits for the servers to finish, unless `--timeout` says.
pub const STOP_WAIT: Duration = Duration::from_secs(10);

/// The instances `ps` and `stop --all` look at: every instance of the root, or only the one
/// named with `-i` (not `AW_INSTANCE`, as for `ls`).
fn instances(a: &Opts) -> Result<Vec<Instance>> {
    let root = a.common.root()?;
    if let Some(only) = a.common.named_instance()? {
        let inst = root.instance(only)?;
        return Ok(if inst.exists() {
            vec![inst]
        } else {
            Vec::new()
        });
    }
    root.instances()?
        .iter()
        .map(|name| root.instance(name))
        .collect()
}

/// The instances of every root where the user's servers run (the user's registry of
/// servers), and those of the current root.
fn all_roots(a: &Opts) -> Result<Vec<Instance>> {
    let mut all = serve::user_instances()?;
    for i in instances(a)? {
        if !all.iter().any(|o| o.dir() == i.dir()) {
            all.push(i);
        }
    }
    Ok(all)
}

/// Every served agent of `instances`, with its instance.
fn served(instances: Vec<Instance>) -> Vec<(Instance, Served)> {
    instances
        .into_iter()
        .flat_map(|inst| {
            serve::list(&inst)
                .into_iter()
                .map(move |s| (inst.clone(), s))
        })
        .collect()
}

/// Print rows as aligned columns, two spaces apart; the last column is not padded.
fn table(out: &mut Out, rows: &[Vec<String>]) -> Result<()> {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == cols {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.line(line.trim_end())?;
    }
    Ok(())
}

/// The served agents whose `agent@instance` matches `pattern` (`worker-*@team`; an agent
/// pattern alone looks in the instance of `-i`, `AW_INSTANCE` or `default`).
fn matching(a: &Opts, pattern: &str) -> Result<Vec<(Instance, Served)>> {
    let (agent, inst) = match pattern.split_once('@') {
        Some((ag, i)) => (ag, Some(i)),
        None => (pattern, None),
    };
    let agent = crate::cli::pattern(agent)?;
    let insts = match inst {
        Some(i) if i.contains(['*', '?', '[']) => {
            let ip = crate::cli::pattern(i)?;
            let root = a.common.root()?;
            root.instances()?
                .iter()
                .filter(|n| ip.matches_with(n, crate::cli::MATCH))
                .map(|n| root.instance(n))
                .collect::<Result<Vec<_>>>()?
        }
        Some(i) => vec![a.common.root()?.instance(i)?],
        None => vec![a.common.instance()?],
    };
    Ok(served(insts)
        .into_iter()
        .filter(|(_, s)| agent.matches_with(&s.agent, crate::cli::MATCH))
        .collect())
}

/// Is `target` a pattern rather than a name?
fn is_pattern(target: &str) -> bool {
    target.contains(['*', '?', '['])
}

/// The host of a server's record, for people: `-` when the record names none.
fn host_of(s: &Served) -> String {
    s.host.clone().unwrap_or_else(|| "-".to_string())
}

/// The server of a record, for people: `aw-run pid N on HOST`.
fn server_of(s: &Served) -> String {
    match &s.host {
        Some(h) => format!("aw-run pid {} on {h}", s.pid),
        None => format!("aw-run pid {}", s.pid),
    }
}

/// `aw-ctl ps [PATTERN | --all-roots] [--json]`: a header row on a terminal only.
pub(super) fn ps(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    let a = &Opts::parse(c)?;
    let pattern = args.first().copied();
    use std::io::IsTerminal;
    let all = match pattern {
        Some(_) if a.all_roots => {
            return Err(Error::Usage(
                "ps takes a PATTERN or --all-roots, not both".into(),
            ));
        }
        Some(p) => matching(a, p)?,
        None if a.all_roots => served(all_roots(a)?),
        None => served(instances(a)?),
    };
    if all.is_empty() {
        super::say_empty(a.common, "no served agents");
    }
    if a.json {
        for (inst, s) in &all {
            let mut row = json!({
                "instance": s.instance,
                "agent": s.agent,
                "host": s.host,
                "pid": s.pid,
                "state": s.state.name(),
                "runs": s.runs,
                "workflow": s.workflow,
            });
            if a.all_roots {
                row["dir"] = json!(inst.dir());
            }
            out.line(&row.to_string())?;
        }
        return Ok(0);
    }
    let first = if a.all_roots { "DIR" } else { "INSTANCE" };
    let header = std::io::stdout().is_terminal().then(|| {
        [first, "AGENT", "HOST", "PID", "STATE", "RUNS", "WORKFLOW"]
            .map(String::from)
            .to_vec()
    });
    let rows: Vec<Vec<String>> = header
        .into_iter()
        .chain(all.iter().map(|(inst, s)| {
            vec![
                if a.all_roots {
                    inst.dir().display().to_string()
                } else {
                    s.instance.clone()
                },
                s.agent.clone(),
                host_of(s),
                s.pid.to_string(),
                s.state.name().to_string(),
                s.runs.to_string(),
                s.workflow.clone().unwrap_or_else(|| "-".to_string()),
            ]
        }))
        .collect();
    table(out, &rows)?;
    Ok(0)
}

/// `aw-ctl stop AGENT[@INSTANCE] | @INSTANCE | --all | --all-roots`: a stop request to each
/// process that serves them, wherever it runs, then wait (`--timeout`, else [`STOP_WAIT`])
/// until nothing serves the agents those processes served. `--all` is the root's agents
/// (the instance's with `-i`), `--all-roots` those of every root, each line then naming
/// the root.
pub(super) fn stop(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    let a = &Opts::parse(c)?;
    let target = args.first().copied();
    let every = a.all || a.all_roots;
    let chosen: Vec<(Instance, Served)> = match (target, every) {
        (Some(_), true) => {
            return Err(Error::Usage(
                "stop takes a target, --all or --all-roots, not two of them".into(),
            ));
        }
        (None, false) => {
            return Err(Error::Usage(
                "stop needs AGENT, AGENT@INSTANCE, @INSTANCE, --all or --all-roots".into(),
            )
            .hint("see aw-ctl --help"));
        }
        (None, true) => {
            let all = served(if a.all_roots {
                all_roots(a)?
            } else {
                instances(a)?
            });
            if all.is_empty() {
                super::say_empty(a.common, "nothing to stop: no served agents");
            }
            all
        }
        (Some(t), false) if is_pattern(t) => {
            let list = matching(a, t)?;
            if list.is_empty() {
                return Err(Error::No(format!(
                    "{}: no served agent matches",
                    names::sanitize(t)
                )));
            }
            list
        }
        (Some(t), false) => match Target::parse(t)? {
            Target::Instance(name) => {
                let inst = a.common.root()?.instance(&name)?;
                inst.require()?;
                let list = served(vec![inst]);
                if list.is_empty() {
                    return Err(Error::No(format!(
                        "@{name}: not served (no aw-run serves an agent of instance '{name}')"
                    )));
                }
                list
            }
            Target::Agent { name, instance } => {
                let inst = match instance {
                    Some(i) => a.common.root()?.instance(&i)?,
                    None => a.common.instance()?,
                };
                inst.require()?;
                let list = served(vec![inst.clone()]);
                let Some(server) = list
                    .iter()
                    .find(|(_, s)| s.agent == name)
                    .map(|s| key(&s.1))
                else {
                    return Err(Error::No(format!(
                        "{name}@{}: not served (no aw-run serves it)",
                        inst.name()
                    )));
                };
                // The process stops every agent it serves, so all of them are waited for.
                list.into_iter().filter(|(_, s)| key(s) == server).collect()
            }
        },
    };
    let chosen = with_other_instances(chosen);
    // One request to each server (a server stops every agent it serves); a server whose
    // record is another user's is not asked, and its agents not waited for.
    let mut asked: Vec<(&Instance, &Served)> = Vec::new();
    let mut refused: Vec<(&Instance, &Served, String)> = Vec::new();
    for (inst, s) in &chosen {
        let same = |i: &Instance, t: &Served| i.dir() == inst.dir() && key(t) == key(s);
        if asked.iter().any(|(i, t)| same(i, t)) || refused.iter().any(|(i, t, _)| same(i, t)) {
            continue;
        }
        match serve::request_stop(inst, s)? {
            serve::Asked::Yes => asked.push((inst, s)),
            serve::Asked::NotMine(why) => refused.push((inst, s, why)),
        }
    }
    let wait = a.timeout.map_or(STOP_WAIT, Duration::from_secs);
    let end = crate::time::deadline(wait);
    let mut still = Vec::new();
    let in_root = |inst: &Instance| match (a.all_roots, inst.dir().parent()) {
        (true, Some(root)) => format!(" in {}", root.display()),
        _ => String::new(),
    };
    for (inst, s) in &chosen {
        if refused
            .iter()
            .any(|(i, t, _)| i.dir() == inst.dir() && key(t) == key(s))
        {
            continue;
        }
        let left = end.saturating_duration_since(Instant::now());
        if serve::wait_unserved(inst, &s.agent, left) {
            out.line(&format!(
                "stopped {}@{} (aw-run pid {}){}",
                s.agent,
                s.instance,
                s.pid,
                in_root(inst)
            ))?;
        } else {
            still.push(format!(
                "{}@{} ({}){}",
                s.agent,
                s.instance,
                server_of(s),
                in_root(inst)
            ));
        }
    }
    // A request whose server finished is no longer needed; one still served stays for its
    // server to see.
    for (inst, s) in asked {
        if chosen
            .iter()
            .filter(|(i, t)| i.dir() == inst.dir() && key(t) == key(s))
            .all(|(i, t)| !serve::is_served(i, &t.agent))
        {
            serve::clear_stop(inst, s);
        }
    }
    if !still.is_empty() {
        return Err(Error::Busy(format!(
            "still served after {} s: {}",
            wait.as_secs(),
            still.join(", ")
        )));
    }
    if !refused.is_empty() {
        let what: Vec<String> = refused
            .iter()
            .map(|(_, s, why)| format!("{}@{} ({why})", s.agent, s.instance))
            .collect();
        return Err(Error::Denied(format!("not stopped: {}", what.join(", "))));
    }
    Ok(0)
}

/// `chosen`, and the agents of other instances served by the same processes (a server of
/// several instances, `aw-run --serve a@one b@two`, stops all of them): found through the
/// user's registry of servers, so that they are waited for too.
fn with_other_instances(mut chosen: Vec<(Instance, Served)>) -> Vec<(Instance, Served)> {
    let servers: Vec<_> = chosen.iter().map(|(_, s)| key(s)).collect();
    // A registry that is refused adds nothing (`ps --all-roots` says why).
    for (inst, s) in served(serve::user_instances().unwrap_or_default()) {
        let known = chosen
            .iter()
            .any(|(i, t)| i.dir() == inst.dir() && t.agent == s.agent);
        if servers.contains(&key(&s)) && !known {
            chosen.push((inst, s));
        }
    }
    chosen
}

/// Which server a record names: pid and host id (no host id: this host's pid).
fn key(s: &Served) -> (u32, Option<String>) {
    (s.pid, s.host_id.clone())
}

/// The keys of a transcript that `runs` reads; others are kept as they are.
#[derive(Debug, Deserialize)]
struct Transcript {
    agent: String,
    run: u64,
    attempt: u64,
    status: String,
    reason: Option<String>,
    exit_code: Option<i64>,
    started: String,
    duration_ms: u64,
    inbox: Vec<u64>,
    reply: Vec<u64>,
    command: Vec<String>,
    stdout: String,
    stdout_cut: u64,
    stderr: String,
    stderr_cut: u64,
    prompt: String,
}

/// One transcript file: its number, its JSON object, and the keys read from it.
struct Loaded {
    n: u64,
    doc: Map<String, Value>,
    t: Transcript,
    /// The iteration of `aw-run --iter` the run was, if it was one.
    iteration: Option<u64>,
}

/// Read transcript `n` at `path`; a file that is no transcript is damaged (exit 65).
fn load(path: &Path, n: u64) -> Result<Loaded> {
    let damaged = |why: String| Error::Corrupt {
        path: path.to_path_buf(),
        why: format!("damaged transcript: {why}"),
    };
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(damaged("not a regular file".into()));
    }
    let bytes = crate::fs::owned::read(path).map_err(|e| Error::io(path, e))?;
    let doc: Map<String, Value> =
        serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
    let t: Transcript =
        serde_json::from_value(Value::Object(doc.clone())).map_err(|e| damaged(e.to_string()))?;
    Ok(Loaded {
        n,
        doc,
        t,
        iteration: None,
    })
}

/// The agents that have a transcript folder, by name.
fn agents_with_runs(inst: &Instance) -> Result<Vec<String>> {
    let dir = inst.state_dir().join("runs");
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let dir = e.file_type().ok()?.is_dir();
            (dir && names::is_agent_name(&name)).then_some(name)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Refuse an agent that has no transcripts and is not registered either (exit 66).
fn require_agent(inst: &Instance, agent: &str) -> Result<()> {
    let reg = Registry::load(inst)?;
    if transcript_dir(inst, agent).is_dir() || reg.contains(agent) {
        return Ok(());
    }
    Err(reg.no_agent(inst, agent))
}

/// `aw-ctl runs [AGENT [N]] [--json]`.
pub(super) fn runs(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    let a = &Opts::parse(c)?;
    if a.follow {
        return match args {
            [agent] if !a.json => follow(out, a, agent),
            _ => Err(Error::Usage(
                "-f/--follow goes with runs AGENT alone (no N, no --json)".into(),
            )),
        };
    }
    let (agent, n) = (args.first().copied(), args.get(1).copied());
    let (inst, agents) = match agent {
        Some(addr) => {
            let (name, inst) = agent_instance(a.common, addr)?;
            inst.require()?;
            require_agent(&inst, &name)?;
            (inst, vec![name])
        }
        None => {
            let inst = a.common.instance()?;
            inst.require()?;
            let names = agents_with_runs(&inst)?;
            (inst, names)
        }
    };
    if let Some(n) = n {
        return show(out, a, &inst, &agents[0], n);
    }
    let mut rows = Vec::new();
    for agent in &agents {
        let iterations = crate::iterations::records(&inst, agent, "aw-ctl")?;
        for (n, path) in crate::transcript::numbered(&inst, agent)? {
            match load(&path, n) {
                Ok(mut l) => {
                    l.iteration = iterations
                        .iter()
                        .find(|r| l.t.inbox.contains(&r.entry))
                        .map(|r| r.iteration);
                    rows.push(l)
                }
                Err(e) => crate::warn::warn("aw-ctl", e),
            }
        }
    }
    if a.json {
        for mut l in rows {
            for k in ["stdout", "stderr", "prompt"] {
                l.doc.remove(k);
            }
            l.doc.insert("n".into(), l.n.into());
            if let Some(i) = l.iteration {
                l.doc.insert("iteration".into(), i.into());
            }
            out.line(&Value::Object(l.doc).to_string())?;
        }
        return Ok(0);
    }
    // The runs of iterations get one more column: the iteration.
    let iterated = rows.iter().any(|l| l.iteration.is_some());
    let mut header: Vec<String> = RUNS_HEADER.iter().map(|h| h.to_string()).collect();
    if iterated {
        header.push("iteration".into());
    }
    let body = rows
        .iter()
        .map(|l| {
            let t = &l.t;
            let mut row = vec![
                names::sanitize(&t.agent),
                l.n.to_string(),
                t.run.to_string(),
                t.attempt.to_string(),
                names::sanitize(&t.status),
                t.exit_code.map_or("-".into(), |c| c.to_string()),
                duration(t.duration_ms),
                names::sanitize(&t.started),
                ids(&t.inbox),
                ids(&t.reply),
            ];
            if iterated {
                row.push(l.iteration.map_or("-".into(), |i| format!("iter {i}")));
            }
            row
        })
        .collect::<Vec<Vec<String>>>();
    // A header row for people at a terminal; pipes get the rows alone.
    use std::io::IsTerminal;
    let rows: Vec<Vec<String>> = if !body.is_empty() && std::io::stdout().is_terminal() {
        std::iter::once(header).chain(body).collect()
    } else {
        body
    };
    table(out, &rows)?;
    Ok(0)
}

/// The columns of `aw-ctl runs`, as its header row (on a terminal) names them.
const RUNS_HEADER: [&str; 10] = [
    "agent", "n", "run", "att", "status", "exit", "time", "started", "inbox", "reply",
];

/// How long `runs -f` waits for more output before it looks whether the attempt ended, a
/// new one started or the server stopped.
const FOLLOW_LOOK: Duration = Duration::from_millis(250);

/// `aw-ctl runs -f AGENT`: print the output of the agent's latest attempt, then what it
/// writes as it comes; follow each attempt that starts after it; end (0) once no aw-run
/// serves the agent and its last attempt has ended.
fn follow(out: &mut Out, a: &Opts, addr: &str) -> Result<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let (agent, inst) = agent_instance(a.common, addr)?;
    inst.require()?;
    require_agent(&inst, &agent)?;
    let dir = transcript_dir(&inst, &agent);
    let mut current: Option<u64> = crate::transcript::log_numbers(&dir).last().copied();
    let mut offset = 0u64;
    let mut ended = false;
    if let Some(n) = current {
        out.line(&format!("--- {agent}: attempt {n} ---"))?;
    }
    loop {
        // Looked at before reading: once nobody serves the agent, what is read next is all
        // there will be.
        let served = serve::is_served(&inst, &agent);
        if let Some(n) = current {
            let path = crate::transcript::log_path(&dir, n);
            // Whether it ended is read first: what it wrote before is all there then.
            let done = std::fs::symlink_metadata(dir.join(format!("{n}.json"))).is_ok();
            if let Ok(mut f) = crate::fs::owned::open_read(&path) {
                f.seek(SeekFrom::Start(offset))
                    .map_err(|e| Error::io(&path, e))?;
                let mut buf = Vec::new();
                f.read_to_end(&mut buf).map_err(|e| Error::io(&path, e))?;
                offset += buf.len() as u64;
                out.raw(&buf)?;
            }
            if done && !ended {
                ended = true;
                let status = load(&dir.join(format!("{n}.json")), n)
                    .map_or_else(|_| "?".to_string(), |l| names::sanitize(&l.t.status));
                out.line(&format!("--- {agent}: attempt {n} ended: {status} ---"))?;
            }
            out.flush()?;
        }
        let next = crate::transcript::log_numbers(&dir)
            .into_iter()
            .find(|&m| current.is_none_or(|c| m > c));
        if let Some(m) = next {
            current = Some(m);
            offset = 0;
            ended = false;
            out.line(&format!("--- {agent}: attempt {m} ---"))?;
            continue;
        }
        if !served {
            return Ok(0);
        }
        // More output, a new attempt or the end: watched, and looked for at least every
        // FOLLOW_LOOK (the end of an attempt and of a server touch other files).
        let watched = match current {
            Some(c) if !ended => crate::transcript::log_path(&dir, c),
            Some(c) => crate::transcript::log_path(&dir, c + 1),
            None => crate::transcript::log_path(&dir, 1),
        };
        match crate::fs::watch::FileWaiter::new(&watched, None) {
            Ok(mut w) => {
                w.wait(Some(FOLLOW_LOOK));
            }
            Err(_) => std::thread::sleep(FOLLOW_LOOK),
        }
    }
}

/// `aw-ctl runs AGENT N`: one transcript, whole.
fn show(out: &mut Out, a: &Opts, inst: &Instance, agent: &str, n: &str) -> Result<u8> {
    let n: u64 = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
        Error::Usage(format!(
            "runs: '{}' is not a run number (1, 2, ...)",
            names::sanitize(n)
        ))
    })?;
    let path = transcript_dir(inst, agent).join(format!("{n}.json"));
    if std::fs::symlink_metadata(&path).is_err() {
        let have = crate::transcript::numbered(inst, agent)?;
        let known = match (have.first(), have.last()) {
            (Some(f), Some(l)) => format!("it has {} to {}", f.0, l.0),
            _ => "it has none".to_string(),
        };
        return Err(Error::not_found(format!(
            "no transcript {n} of {agent}@{} ({known})",
            inst.name()
        )));
    }
    let l = load(&path, n)?;
    if a.json {
        out.line(&Value::Object(l.doc).to_string())?;
        return Ok(0);
    }
    let t = &l.t;
    let fields = [
        ("agent", names::sanitize(&t.agent)),
        ("n", n.to_string()),
        ("run", t.run.to_string()),
        ("attempt", t.attempt.to_string()),
        ("status", names::sanitize(&t.status)),
        ("reason", t.reason.as_deref().map_or("-".into(), one_line)),
        ("exit", t.exit_code.map_or("-".into(), |c| c.to_string())),
        ("started", names::sanitize(&t.started)),
        ("duration", duration(t.duration_ms)),
        ("inbox", ids(&t.inbox)),
        ("reply", ids(&t.reply)),
        (
            "command",
            if t.command.is_empty() {
                "-".into()
            } else {
                one_line(
                    &t.command
                        .iter()
                        .map(|w| quote(w))
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            },
        ),
    ];
    for (k, v) in fields {
        out.line(&format!("{:<9} {v}", format!("{k}:")))?;
    }
    section(out, "stdout", &t.stdout, t.stdout_cut)?;
    section(out, "stderr", &t.stderr, t.stderr_cut)?;
    section(out, "prompt", &t.prompt, 0)?;
    Ok(0)
}

/// A text of a transcript under a `--- name ---` line, with how much was cut after it.
fn section(out: &mut Out, name: &str, text: &str, cut: u64) -> Result<()> {
    out.line(&format!("--- {name} ---"))?;
    if !text.is_empty() {
        out.raw(text.as_bytes())?;
        if !text.ends_with('\n') {
            out.line("")?;
        }
    }
    if cut > 0 {
        out.line(&format!("--- {name}: {cut} more bytes were cut ---"))?;
    }
    Ok(())
}

/// A text on one line: control characters (newlines included) become `?`.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A word as a POSIX shell would need it: as it is when it holds only safe characters,
/// else in single quotes.
fn quote(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// Entry ids as `1,2,3`, or `-` for none.
fn ids(v: &[u64]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// A duration for people: `850ms`, `1.2s`, `95s`.
fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}s", ms / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ids_read_well() {
        assert_eq!(duration(0), "0ms");
        assert_eq!(duration(999), "999ms");
        assert_eq!(duration(1234), "1.2s");
        assert_eq!(duration(95_000), "95s");
        assert_eq!(ids(&[]), "-");
        assert_eq!(ids(&[3, 4]), "3,4");
    }

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(quote("/usr/bin/agent.sh"), "/usr/bin/agent.sh");
        assert_eq!(quote("--model=x"), "--model=x");
        assert_eq!(quote("two words"), "'two words'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("$HOME"), "'$HOME'");
    }
}
