//! `aw-ctl`: register agents, list instances, acknowledge inboxes, manage documents.

use crate::cli::{self, Common, Out, ctl_team};
use crate::document::{self, DEFAULT_DOCUMENT};
use crate::error::{Error, Result};
use crate::inbox;
use crate::instance::Instance;
use crate::names;
use crate::registry::{self, Agent, Config, Registry};

pub const HELP: &str = "\
aw-ctl - manage aw instances, agents, inboxes and documents

Usage: aw-ctl [--root DIR] [-i NAME] <COMMAND> [ARGS]

Commands:
  new NAME [-m MODEL] [--backend B] [--prompt TEXT | --prompt-file F] [--replace]
                         register an agent (NAME or NAME@INSTANCE); starts nothing
  rm NAME                unregister an agent
  ls [--json]            instances, their agents, entry counts and unread counts
  ack AGENT [--until ID] acknowledge AGENT's inbox up to ID (default: the newest entry)
  doc read [FILE]        print a document (default notes.md)
  doc write [FILE]       replace a document with stdin
  doc append [FILE]      append stdin to a document
  doc create FILE        create a new document from stdin (fails if it exists)
  doc list               list documents
  doc rm FILE            delete a document
  doc owner [NAME | --clear]
                         show, set or clear the document owner
  status [NAME] [--json] agents' state, task and unread counts; active proposals
  proposals [--all] [--json]
                         active proposals (--all: every proposal)
  propose TYPE TITLE [--option ID[=LABEL]]... [--rule R] [--quorum N]
          [--tie-breaker T] [--binding] [--timeout SECS] [--description TEXT] [--id ID]
                         create a proposal (election, decision, approval, assignment)
  vote PROPOSAL CHOICE [--reason R]
                         vote (votes are final)
  cancel PROPOSAL        cancel a proposal you created
  mcp-config NAME@INSTANCE [--codex | --codex-toml]
                         print the MCP configuration for Claude Code (JSON) or
                         Codex (command-line overrides, or config.toml)
  (doc, propose, vote and cancel take --as AGENT: who acts, default $AW_AGENT or 'user')

Options:
      --root DIR       root directory (default: $AW_ROOT or ./.workflow)
  -i, --instance NAME  instance (default: $AW_INSTANCE or 'default')
  -m, --model MODEL    (new) the agent's model, e.g. anthropic/claude-sonnet-4-5
      --backend B      (new) claude, codex, anthropic, openai, exec, mock or external
      --prompt TEXT    (new) the agent's system prompt
      --prompt-file F  (new) read the system prompt from file F
      --replace        (new) replace an agent that is already registered
      --until ID       (ack) acknowledge up to entry ID
      --as AGENT       (doc, propose, vote, cancel) act as AGENT
      --clear          (doc owner) remove the document owner
      --all            (proposals) list closed proposals too
      --option ID[=LABEL]
                       (propose) an option; repeat for each
      --rule R         (propose) plurality (default), majority or unanimous
      --quorum N       (propose) votes needed (default: number of agents)
      --tie-breaker T  (propose) first (default), random or creator-decides
      --binding        (propose) enforce the result (doc-owner elections set the owner)
      --timeout SECS   (propose) resolve or expire after SECS seconds
      --description TEXT
                       (propose) longer text for the announcement
      --id ID          (propose) proposal id (default prop-N)
      --reason R       (vote) why
      --codex          (mcp-config) print Codex command-line overrides
      --codex-toml     (mcp-config) print a Codex config.toml fragment
      --json           JSON Lines output
  -h, --help           print this help
  -V, --version        print the version

Exit status: 0 ok, 1 no document owner set (doc owner), 64 usage, 65 bad name or
data, 66 no such instance, agent or document, 73 cannot create (exists), 74 I/O
error, 75 lock timeout, 77 not the document owner or permission denied,
130 interrupted.
";

/// Backends an agent may name.
pub const BACKENDS: [&str; 7] = [
    "claude",
    "codex",
    "anthropic",
    "openai",
    "exec",
    "mock",
    "external",
];

#[derive(Debug, Default)]
pub(crate) struct Args {
    pub(crate) common: Common,
    words: Vec<String>,
    model: Option<String>,
    backend: Option<String>,
    prompt: Option<String>,
    prompt_file: Option<std::path::PathBuf>,
    replace: bool,
    until: Option<u64>,
    as_agent: Option<String>,
    clear: bool,
    pub(crate) json: bool,
    pub(crate) all: bool,
    pub(crate) options: Vec<String>,
    pub(crate) rule: Option<String>,
    pub(crate) quorum: Option<u32>,
    pub(crate) tie_breaker: Option<String>,
    pub(crate) binding: bool,
    pub(crate) timeout: Option<u64>,
    pub(crate) description: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) codex: bool,
    pub(crate) codex_toml: bool,
}

pub fn run(out: &mut Out) -> Result<u8> {
    use lexopt::prelude::*;
    let mut a = Args::default();
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(cli::lex_err)? {
        if let Some(k) = Common::key(&arg) {
            a.common.set(k, &mut p)?;
            continue;
        }
        match arg {
            Short('m') | Long("model") => a.model = Some(cli::string(&mut p, "--model")?),
            Long("backend") => a.backend = Some(cli::string(&mut p, "--backend")?),
            Long("prompt") => a.prompt = Some(cli::string(&mut p, "--prompt")?),
            Long("prompt-file") => {
                a.prompt_file = Some(cli::value(&mut p, "--prompt-file")?.into())
            }
            Long("replace") => a.replace = true,
            Long("until") => a.until = Some(cli::number(&mut p, "--until")?),
            Long("as") => a.as_agent = Some(cli::string(&mut p, "--as")?),
            Long("clear") => a.clear = true,
            Long("json") => a.json = true,
            Long("all") => a.all = true,
            Long("option") => a.options.push(cli::string(&mut p, "--option")?),
            Long("rule") => a.rule = Some(cli::string(&mut p, "--rule")?),
            Long("quorum") => a.quorum = Some(cli::number(&mut p, "--quorum")?),
            Long("tie-breaker") => a.tie_breaker = Some(cli::string(&mut p, "--tie-breaker")?),
            Long("binding") => a.binding = true,
            Long("timeout") => a.timeout = Some(cli::number(&mut p, "--timeout")?),
            Long("description") => a.description = Some(cli::string(&mut p, "--description")?),
            Long("id") => a.id = Some(cli::string(&mut p, "--id")?),
            Long("reason") => a.reason = Some(cli::string(&mut p, "--reason")?),
            Long("codex") => a.codex = true,
            Long("codex-toml") => a.codex_toml = true,
            Short('h') | Long("help") => return cli::print_help(out, HELP),
            Short('V') | Long("version") => return cli::print_version(out, "aw-ctl"),
            Value(v) => a.words.push(
                v.into_string()
                    .map_err(|_| Error::invalid("argument is not valid UTF-8"))?,
            ),
            _ => return Err(cli::unexpected(arg)),
        }
    }
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["new", name] => new(out, &a, name),
        ["rm", name] => rm(out, &a, name),
        ["ls"] => ls(out, &a),
        ["ack", agent] => ack(out, &a, agent),
        ["doc", rest @ ..] => doc(out, &a, rest),
        ["status"] => ctl_team::status(out, &a, None),
        ["status", name] => ctl_team::status(out, &a, Some(name)),
        ["proposals"] => ctl_team::proposals(out, &a),
        ["propose", kind, title] => ctl_team::propose(out, &a, kind, title),
        ["vote", id, choice] => ctl_team::vote(out, &a, id, choice),
        ["cancel", id] => ctl_team::cancel(out, &a, id),
        ["mcp-config", addr] => ctl_team::mcp_config(out, &a, addr),
        [] => Err(Error::Usage("no command".into()).hint("see aw-ctl --help")),
        [cmd, ..]
            if [
                "new",
                "rm",
                "ls",
                "ack",
                "status",
                "proposals",
                "propose",
                "vote",
                "cancel",
                "mcp-config",
            ]
            .contains(cmd) =>
        {
            Err(
                Error::Usage(format!("wrong number of arguments for '{cmd}'"))
                    .hint("see aw-ctl --help"),
            )
        }
        [cmd, ..] => Err(
            Error::Usage(format!("unknown command '{}'", names::sanitize(cmd)))
                .hint("see aw-ctl --help"),
        ),
    }
}

/// The instance for an `agent[@instance]` argument: its own instance, or the common one.
pub(crate) fn agent_instance(a: &Args, addr: &str) -> Result<(String, Instance)> {
    let (name, inst) = names::parse_agent_address(addr)?;
    let instance = match inst {
        Some(i) => a.common.root().instance(&i)?,
        None => a.common.instance()?,
    };
    Ok((name, instance))
}

fn new(out: &mut Out, a: &Args, addr: &str) -> Result<u8> {
    let (name, inst) = agent_instance(a, addr)?;
    let backend = match &a.backend {
        Some(b) if BACKENDS.contains(&b.as_str()) => b.clone(),
        Some(b) => {
            return Err(Error::invalid(format!(
                "unknown backend '{}' (valid: {})",
                names::sanitize(b),
                BACKENDS.join(", ")
            )));
        }
        None => backend_for_model(a.model.as_deref()).to_string(),
    };
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
        created: crate::channel::now(),
        ..Agent::default()
    };
    let added = registry::register(&inst, agent, a.replace)?;
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

/// The backend a model's provider prefix implies (`anthropic/...`, `openai/...`).
pub fn backend_for_model(model: Option<&str>) -> &'static str {
    match model.and_then(|m| m.split_once('/')).map(|(p, _)| p) {
        Some("anthropic") => "anthropic",
        Some("openai") => "openai",
        _ => match model {
            Some(m) if m.starts_with("claude") => "claude",
            Some(m) if m.starts_with("gpt") || m.starts_with("o1") || m.starts_with("o3") => {
                "openai"
            }
            _ => "external",
        },
    }
}

fn rm(out: &mut Out, a: &Args, addr: &str) -> Result<u8> {
    let (name, inst) = agent_instance(a, addr)?;
    registry::unregister(&inst, &name)?;
    out.line(&format!("{name}@{}", inst.name()))?;
    Ok(0)
}

fn ls(out: &mut Out, a: &Args) -> Result<u8> {
    let root = a.common.root();
    let only = a.common.instance.clone();
    if let Some(o) = &only {
        names::check_instance(o)?;
    }
    for name in root.instances()? {
        if only.as_ref().is_some_and(|o| *o != name) {
            continue;
        }
        let inst = root.instance(&name)?;
        let entries = crate::channel::Channel::new(&inst).last_id()?;
        let reg = Registry::load(&inst)?;
        let mut agents = Vec::new();
        for ag in &reg.agents {
            let (unread, _) = inbox::unread(&inst, &ag.name)?;
            agents.push((ag, unread.len()));
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
    Ok(0)
}

fn ack(out: &mut Out, a: &Args, addr: &str) -> Result<u8> {
    let (name, inst) = agent_instance(a, addr)?;
    inst.require()?;
    if !Registry::load(&inst)?.contains(&name) {
        return Err(Error::not_found(format!(
            "no agent '{name}' in instance '{}'",
            inst.name()
        )));
    }
    let cursor = inbox::ack(&inst, &name, a.until)?;
    out.line(&cursor.to_string())?;
    Ok(0)
}

pub(crate) fn who(a: &Args) -> Result<String> {
    let w = a.as_agent.clone().unwrap_or_else(names::sender_from_env);
    names::check_agent(&w)?;
    Ok(w)
}

/// Document content from stdin; a terminal is refused rather than waited on.
fn doc_stdin() -> Result<String> {
    if cli::stdin_is_tty() {
        return Err(Error::Usage("document content is read from stdin".into())
            .hint("pipe it in, or redirect a file with <"));
    }
    cli::read_stdin("document content", document::MAX_DOCUMENT, None)
}

fn doc(out: &mut Out, a: &Args, rest: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    let file = |f: Option<&&str>| f.map_or(DEFAULT_DOCUMENT.to_string(), |s| s.to_string());
    match rest {
        ["read"] | ["read", _] => {
            let text = document::read(&inst, &file(rest.get(1)))?;
            out.raw(text.as_bytes())?;
        }
        ["write"] | ["write", _] => {
            let who = who(a)?;
            let f = file(rest.get(1));
            document::resolve(&inst, &f)?;
            let content = doc_stdin()?;
            document::write(&inst, &f, &content, &who)?;
        }
        ["append"] | ["append", _] => {
            let who = who(a)?;
            let f = file(rest.get(1));
            document::resolve(&inst, &f)?;
            let content = doc_stdin()?;
            document::append(&inst, &f, &content, &who)?;
        }
        ["create", f] => {
            let who = who(a)?;
            document::resolve(&inst, f)?;
            let content = doc_stdin()?;
            document::create(&inst, f, &content, &who)?;
        }
        ["list"] => {
            for d in document::list(&inst)? {
                if a.json {
                    out.line(&serde_json::json!({ "file": d }).to_string())?;
                } else {
                    out.line(&d)?;
                }
            }
        }
        ["rm", f] => document::remove(&inst, f, &who(a)?)?,
        ["owner"] if a.clear => {
            inst.require()?;
            registry::set_document_owner(&inst, None)?;
        }
        ["owner"] => {
            inst.require()?;
            match Config::load(&inst)?.document_owner {
                Some(o) => out.line(&o)?,
                None => return Ok(1),
            }
        }
        ["owner", name] => {
            inst.require()?;
            registry::set_document_owner(&inst, Some(name))?;
        }
        [] => {
            return Err(Error::Usage("doc: missing subcommand".into()).hint("see aw-ctl --help"));
        }
        [sub, ..] => {
            return Err(Error::Usage(format!(
                "doc {}: unknown subcommand or wrong arguments",
                names::sanitize(sub)
            ))
            .hint("see aw-ctl --help"));
        }
    }
    Ok(0)
}
