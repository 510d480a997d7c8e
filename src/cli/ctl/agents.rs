//! `aw-ctl` commands about agents: register, unregister, list, acknowledge, status.

use std::collections::BTreeMap;

use serde_json::json;

use super::{Call, agent_instance};
use crate::cli::{Common, Out};
use crate::error::{Error, Result};
use crate::inbox;
use crate::names;
use crate::proposal;
use crate::registry::{self, Agent, BackendKind, Config, Registry};
use crate::serve::{self, Served};
use crate::status;
use crate::usage::Usage;

/// The options of the commands about agents.
struct Opts<'a> {
    common: &'a Common,
    model: Option<String>,
    backend: Option<String>,
    prompt: Option<String>,
    prompt_file: Option<std::path::PathBuf>,
    replace: bool,
    create: bool,
    /// The words after `new NAME ... --`: an exec agent's command.
    command: Option<&'a [String]>,
    until: Option<u64>,
    json: bool,
}

impl<'a> Opts<'a> {
    fn parse(c: &'a Call) -> Result<Opts<'a>> {
        Ok(Opts {
            common: &c.common,
            model: c.string("model"),
            backend: c.string("backend"),
            prompt: c.string("prompt"),
            prompt_file: c.string("prompt-file").map(Into::into),
            replace: c.has("replace"),
            create: c.has("create"),
            command: c.command.as_deref(),
            until: c.number("until")?,
            json: c.has("json"),
        })
    }
}

/// `aw-ctl new NAME [...] [-- PROGRAM [ARG...]]`.
pub(super) fn new(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    let a = Opts::parse(c)?;
    let (name, inst) = agent_instance(a.common, args[0])?;
    let backend = match &a.backend {
        Some(b) if BackendKind::from_name(b).is_some() => b.clone(),
        Some(b) => {
            return Err(Error::invalid(format!(
                "unknown backend '{}' (valid: {})",
                names::sanitize(b),
                BackendKind::names()
            )));
        }
        None if a.command.is_some() => BackendKind::Exec.name().to_string(),
        None => registry::backend_for_model(a.model.as_deref())
            .name()
            .to_string(),
    };
    let command = exec_command(&backend, a.command)?;
    let system_prompt = match (&a.prompt, &a.prompt_file) {
        (Some(_), Some(_)) => {
            return Err(Error::Usage(
                "give --prompt or --prompt-file, not both".into(),
            ));
        }
        (Some(p), None) => Some(p.clone()),
        (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::not_found(format!("--prompt-file {}: no such file", f.display()))
            }
            std::io::ErrorKind::InvalidData => {
                Error::invalid(format!("--prompt-file {}: not valid UTF-8", f.display()))
            }
            _ => Error::io(f, e),
        })?),
        (None, None) => None,
    };
    let agent = Agent {
        name: name.clone(),
        backend,
        model: a.model.clone(),
        system_prompt,
        command,
        created: crate::time::now(),
        ..Agent::default()
    };
    inst.check_new(a.create)?;
    let root = inst.dir().parent().unwrap_or(inst.dir()).to_path_buf();
    let added = crate::warn::noting_created("aw-ctl", &root, || {
        registry::register(&inst, agent, a.replace)
    })?;
    if !added && !a.replace {
        return Err(Error::Exists(format!(
            "agent '{name}' is already registered in instance '{}'",
            inst.name()
        ))
        .hint("use --replace"));
    }
    out.line(&format!("{name}@{}", inst.name()))?;
    Ok(0)
}

/// The argument vector of an exec agent, from the words after `--`: the program is made
/// absolute (against the current directory) when it is a path, that is when it holds a `/`.
/// Only an exec agent has one, and it must.
fn exec_command(backend: &str, command: Option<&[String]>) -> Result<Vec<String>> {
    let usage = "aw-ctl new NAME --backend exec -- PROGRAM [ARG...]";
    match (backend, command) {
        ("exec", Some([program, args @ ..])) if !program.is_empty() => {
            let program = if program.contains('/') {
                let abs = std::path::absolute(program).map_err(|e| Error::io(program, e))?;
                abs.into_os_string()
                    .into_string()
                    .map_err(|_| Error::invalid("the current directory is not valid UTF-8"))?
            } else {
                program.clone()
            };
            Ok(std::iter::once(program)
                .chain(args.iter().cloned())
                .collect())
        }
        ("exec", Some([_, ..])) => Err(Error::Usage("the program after -- is empty".into())),
        ("exec", _) => {
            Err(Error::Usage("an exec agent needs a command after --".into()).hint(usage))
        }
        (_, None) => Ok(Vec::new()),
        (other, Some(_)) => Err(Error::Usage(format!(
            "a command after -- is for the exec backend, not {other}"
        ))
        .hint(usage)),
    }
}

pub(super) fn rm(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    let (name, inst) = agent_instance(&c.common, args[0])?;
    registry::unregister(&inst, &name)?;
    out.line(&format!("{name}@{}", inst.name()))?;
    Ok(0)
}

pub(super) fn ls(out: &mut Out, c: &Call, _: &[&str]) -> Result<u8> {
    let a = Opts::parse(c)?;
    let root = a.common.root()?;
    let only = a.common.named_instance()?.map(str::to_string);
    if let Some(o) = &only {
        names::check_instance(o)?;
        // An instance named that does not exist is an error (66), with the near name.
        root.instance(o)?.require()?;
    }
    let mut listed = 0;
    for name in root.instances()? {
        if only.as_ref().is_some_and(|o| *o != name) {
            continue;
        }
        listed += 1;
        let inst = root.instance(&name)?;
        let entries = crate::channel::Channel::new(&inst).last_id()?;
        let reg = Registry::load(&inst)?;
        let mut agents = Vec::new();
        for ag in &reg.agents {
            agents.push((ag, inbox::unread_count(&inst, &ag.name)?));
        }
        if a.json {
            let list: Vec<_> = agents
                .iter()
                .map(|(ag, n)| {
                    serde_json::json!({"name": ag.name, "backend": ag.backend, "model": ag.model, "unread": n})
                })
                .collect();
            out.line(
                &serde_json::json!({"instance": name, "entries": entries, "agents": list})
                    .to_string(),
            )?;
        } else {
            let list: Vec<String> = agents
                .iter()
                .map(|(ag, n)| format!("{} ({} unread)", ag.name, n))
                .collect();
            out.line(&format!(
                "{name}\t{entries} entries\t{}",
                if list.is_empty() {
                    "no agents".to_string()
                } else {
                    list.join(", ")
                }
            ))?;
        }
    }
    if listed == 0 {
        super::say_empty(a.common, "no instances");
    }
    Ok(0)
}

pub(super) fn ack(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    let a = Opts::parse(c)?;
    let (name, inst) = agent_instance(a.common, args[0])?;
    inst.require()?;
    if !registry::is_agent(&inst, &name)? {
        return Err(Registry::load(&inst)?.no_agent(&inst, &name));
    }
    let cursor = inbox::ack(&inst, &name, a.until)?;
    out.line(&cursor.to_string())?;
    Ok(0)
}

/// `aw-ctl status [NAME]`: agents' state, task and unread counts, active proposals, the
/// merge requests not served yet and the pending approvals.
pub(super) fn status(out: &mut Out, c: &Call, args: &[&str]) -> Result<u8> {
    let a = Opts::parse(c)?;
    let only = args.first().copied();
    let inst = a.common.instance()?;
    inst.require()?;
    let mut reg = Registry::load(&inst)?;
    let pattern = only.filter(|n| n.contains(['*', '?', '[']));
    if let Some(p) = pattern {
        let pat = crate::cli::pattern(p)?;
        reg.agents
            .retain(|ag| pat.matches_with(&ag.name, crate::cli::MATCH));
        if reg.agents.is_empty() {
            return Err(Error::not_found(format!(
                "no agent of instance '{}' matches '{}'",
                inst.name(),
                names::sanitize(p)
            )));
        }
    } else if let Some(n) = only {
        names::check_agent(n)?;
        if !reg.contains(n) {
            return Err(reg.no_agent(&inst, n));
        }
    }
    // A pattern has narrowed the registry already.
    let one = if pattern.is_some() { None } else { only };
    let owner = Config::load(&inst)?.document_owner;
    let active = proposal::list(&inst, true)?;
    // The board's claims that lapsed are lapsed (and announced) on the way.
    let board = crate::board::counts(&inst)?;
    let served: BTreeMap<String, Served> = serve::list(&inst)
        .into_iter()
        .map(|s| (s.agent.clone(), s))
        .collect();
    let agents: Vec<_> = status::members(&inst, &reg, one)?
        .into_iter()
        .map(|m| {
            json!({
                "name": m.agent.name,
                "backend": m.agent.backend,
                "model": m.agent.model,
                "state": m.state,
                "task": m.task,
                "metadata": m.metadata,
                "updated": m.updated,
                "unread": m.unread,
                "cursor": m.cursor,
                "controller": served.get(&m.agent.name).map(controller),
                "usage": crate::transcript::usage_of(&inst, &m.agent.name, |_| true),
            })
        })
        .collect();
    let mut total: Option<Usage> = None;
    for ag in &agents {
        if let Ok(u) = serde_json::from_value::<Usage>(ag["usage"].clone()) {
            total.get_or_insert_with(Usage::default).add(&u);
        }
    }
    // The requests of the merge queue not served yet, and the approvals still pending
    // (those whose time ran out expired on the way).
    let merges: Vec<crate::merge::Request> = crate::merge::list(&inst)?
        .into_iter()
        .filter(|r| !r.state.is_final())
        .collect();
    let approvals: Vec<crate::approval::Request> = crate::approval::list(&inst)?
        .into_values()
        .filter(|r| r.state == crate::approval::State::Pending)
        .collect();
    if a.json {
        let props: Vec<_> = active.iter().map(|p| p.to_json()).collect();
        let merges: Vec<_> = merges.iter().map(|r| r.to_json()).collect();
        let approvals: Vec<_> = approvals.iter().map(|r| r.to_json_line()).collect();
        out.line(
            &json!({"instance": inst.name(), "documentOwner": owner, "agents": agents,
                "proposals": props, "usage": total, "board": board, "merges": merges,
                "approvals": approvals})
            .to_string(),
        )?;
        return Ok(0);
    }
    out.line(&format!(
        "instance {}{}",
        inst.name(),
        owner
            .map(|o| format!(" (documents owned by @{o})"))
            .unwrap_or_default()
    ))?;
    for ag in &agents {
        let controller = ag["controller"].as_object();
        let mut line = format!(
            "  {:<16} {:<8} {:>4} unread",
            ag["name"].as_str().unwrap_or(""),
            shown_state(
                ag["state"].as_str().unwrap_or(""),
                controller.and_then(|c| c["state"].as_str()),
                ag["backend"].as_str().unwrap_or("")
            ),
            ag["unread"]
        );
        if let Some(c) = controller {
            line.push_str(&format!(
                "  [aw-run pid {}, {} run(s)]",
                c["pid"], c["runs"]
            ));
        }
        if let Ok(u) = serde_json::from_value::<Usage>(ag["usage"].clone()) {
            line.push_str(&format!("  {}", spent(&u)));
        }
        if let Some(t) = ag["task"].as_str() {
            line.push_str("  ");
            line.push_str(t);
        }
        out.line(&line)?;
    }
    if let Some(u) = &total {
        out.line(&format!("  total {}", spent(u)))?;
    }
    if let Some(b) = board.filter(|_| only.is_none()) {
        out.line(&format!("  board: {}", b.line()))?;
    }
    if only.is_none() {
        for p in &active {
            out.line(&format!("  proposal {}", p.summary()))?;
        }
        for r in &merges {
            let waits = r
                .approval
                .map_or(String::new(), |a| format!(" (waiting for approval #{a})"));
            out.line(&format!(
                "  merge #{} {}{waits}: {} {} into {}",
                r.id, r.state, r.agent, r.branch, r.into
            ))?;
        }
        for r in &approvals {
            let expires = r
                .expires
                .as_deref()
                .map_or(String::new(), |e| format!(", expires {e}"));
            out.line(&format!(
                "  approval #{} pending: {} ({}, by {}{expires})",
                r.id,
                r.what,
                r.kind.name(),
                r.by.join(",")
            ))?;
        }
    }
    Ok(0)
}

/// The one state `status` shows of an agent: what its aw-run's controller says when one
/// serves it (`running`, `cooldown`, `paused`, `stopped`; `idle` unless the agent said it is
/// `done`); for an agent that aw-run runs (any backend but `external`) and that no server
/// serves, `unserved` unless it said it is `done`, since nothing answers its mentions; else
/// what the agent said of itself (`aw-ctl`, MCP).
pub(super) fn shown_state<'a>(own: &'a str, controller: Option<&'a str>, backend: &str) -> &'a str {
    match controller {
        Some("idle") if own == "done" => own,
        Some(c) => c,
        None if backend != crate::registry::BackendKind::External.name() && own != "done" => {
            UNSERVED
        }
        None => own,
    }
}

/// The state shown of an agent that aw-run would run and that no server serves.
pub(super) const UNSERVED: &str = "unserved";

/// The controller of an agent that an aw-run serves, as `status --json` shows it.
fn controller(s: &Served) -> serde_json::Value {
    json!({"state": s.state.name(), "host": s.host, "pid": s.pid, "runs": s.runs})
}

/// `N tokens, $X` (the cost when known).
fn spent(u: &Usage) -> String {
    match u.cost_usd {
        Some(c) => format!("{} tokens, ${c:.4}", u.tokens()),
        None => format!("{} tokens", u.tokens()),
    }
}
