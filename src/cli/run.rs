//! `aw-run`: run a workflow file.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{self, Common, Out};
use crate::error::{Error, Result};
use crate::run::controller::Retry;
use crate::run::runner::{self, Options};
use crate::run::{LoadError, Vars, parse_duration, workflow};

pub const HELP: &str = "\
aw-run - run a workflow file: its agents, setup and kickoff

Usage: aw-run [OPTIONS] FILE
       aw-run --check FILE

Registers the workflow's agents, runs its setup, posts its kickoff, then runs each agent
when it is mentioned, until every agent is idle with nothing unread.

Options:
      --root DIR       root directory (default: $AW_ROOT or ./.workflow)
  -i, --instance NAME  instance (default: $AW_INSTANCE or the workflow's name)
      --check          check the file and exit (errors as FILE:LINE:COL: what)
      --var NAME=VALUE define a variable (repeatable)
      --debounce DUR   quiet time before the work counts as done (default 0.05s)
      --poll SECS      poll the channel every SECS seconds instead of watching it
      --max-runs N     most runs per agent (default 50; an agent's max_runs wins)
      --timeout DUR    bound on the whole workflow
      --retries N      attempts per run (default 3)
      --backoff DUR    wait before the second attempt, doubled after (default 1s)
  -q, --quiet          print no run events and no summary
      --json           print run events and the summary as JSON Lines on stdout
  -h, --help           print this help
  -V, --version        print the version

Exit status: 0 done, 1 an agent failed for good, the loop guard or the timeout stopped
the run, or a setup task failed, 64 usage, 65 bad workflow file, 66 no such file,
69 backend unavailable, 73 cannot create, 74 I/O error, 75 agent already served,
77 permission denied, 130 interrupted.
";

#[derive(Debug)]
struct Args {
    common: Common,
    check: bool,
    file: Option<PathBuf>,
    vars: Vec<String>,
    opts: Options,
}

fn duration(p: &mut lexopt::Parser, name: &str) -> Result<Duration> {
    let v = cli::string(p, name)?;
    parse_duration(&v).map_err(|why| Error::Usage(format!("{name} '{v}': {why}")))
}

pub fn run(out: &mut Out) -> Result<u8> {
    use lexopt::prelude::*;
    let mut a = Args {
        common: Common::default(),
        check: false,
        file: None,
        vars: Vec::new(),
        opts: Options {
            debounce: Duration::from_millis(50),
            poll: None,
            max_runs: 50,
            timeout: None,
            retry: Retry {
                attempts: 3,
                backoff: Duration::from_secs(1),
            },
            quiet: false,
            json: false,
        },
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(cli::lex_err)? {
        if let Some(k) = Common::key(&arg) {
            a.common.set(k, &mut p)?;
            continue;
        }
        match arg {
            Long("check") => a.check = true,
            Long("var") => a.vars.push(cli::string(&mut p, "--var")?),
            Long("debounce") => a.opts.debounce = duration(&mut p, "--debounce")?,
            Long("poll") => {
                let secs: f64 = cli::number(&mut p, "--poll")?;
                if !(secs > 0.0 && secs <= 3600.0) {
                    return Err(Error::Usage("--poll: expected seconds in (0, 3600]".into()));
                }
                a.opts.poll = Some(Duration::from_secs_f64(secs));
            }
            Long("max-runs") => {
                a.opts.max_runs = cli::number(&mut p, "--max-runs")?;
                if a.opts.max_runs == 0 {
                    return Err(Error::Usage("--max-runs: must be at least 1".into()));
                }
            }
            Long("timeout") => a.opts.timeout = Some(duration(&mut p, "--timeout")?),
            Long("retries") => {
                a.opts.retry.attempts = cli::number(&mut p, "--retries")?;
                if a.opts.retry.attempts == 0 {
                    return Err(Error::Usage("--retries: must be at least 1".into()));
                }
            }
            Long("backoff") => a.opts.retry.backoff = duration(&mut p, "--backoff")?,
            Short('q') | Long("quiet") => a.opts.quiet = true,
            Long("json") => a.opts.json = true,
            Short('h') | Long("help") => return cli::print_help(out, HELP),
            Short('V') | Long("version") => return cli::print_version(out, "aw-run"),
            Value(v) if a.file.is_none() => a.file = Some(PathBuf::from(v)),
            _ => return Err(cli::unexpected(arg)),
        }
    }
    let file = a
        .file
        .clone()
        .ok_or_else(|| Error::Usage("no workflow FILE given".into()))?;
    let mut vars = Vars::from_process_env();
    for def in &a.vars {
        vars.define(def)?;
    }
    let (wf, warnings) = match workflow::load(&file, &vars) {
        Ok(w) => w,
        Err(LoadError::Read(e)) => return Err(e),
        Err(e @ LoadError::Invalid(_)) => {
            eprintln!("{e}");
            return Ok(e.exit_code());
        }
    };
    for w in &warnings {
        eprintln!("{}", w.render());
    }
    if a.check {
        return Ok(0);
    }
    let name = match &a.common.instance {
        Some(i) => i.clone(),
        None => match std::env::var("AW_INSTANCE") {
            Ok(v) if !v.is_empty() => v,
            _ => wf.name.value.clone(),
        },
    };
    let root = a.common.root();
    let inst = root.instance(&name)?;
    out.flush()?;
    runner::run(&wf, &inst, root.path(), vars, &a.opts)
}
