//! What a run prints: its controllers' events (lines on stderr, or JSON Lines), the
//! channel's new entries as they arrive, and the summary of runs and spending at the end.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use serde_json::json;

use super::options::Options;
use crate::channel::Channel;
use crate::instance::Instance;
use crate::run::controller::{Event, Report, Shared};

/// Print controller events: lines on stderr, or JSON Lines on stdout.
/// With tasks, stdout is their result: the events go to stderr as lines.
/// `-q` silences the lines, not the JSON Lines: those are the run's result.
pub(super) fn reporter(
    opts: &Options,
    has_tasks: bool,
    live: Arc<crate::run::live::Live>,
    shared: Arc<Shared>,
) -> Arc<Report> {
    let json = opts.json && !has_tasks;
    let quiet = opts.quiet && !json;
    // Iterations have lines of their own: only what went wrong is told.
    let only_failures = opts.iter.is_some();
    let label = opts.label.is_some();
    Arc::new(move |ev: &Event| {
        live.attempt(&ev.agent, ev.start);
        if quiet || (only_failures && (ev.start || ev.status == crate::run::backend::Status::Ok)) {
            return live.refresh(&shared);
        }
        if json {
            let mut v = if ev.start {
                json!({
                    "event": "start",
                    "agent": ev.agent,
                    "run": ev.run,
                    "attempt": ev.attempt,
                    "transcript": ev.transcript,
                    "woken_by": ev.woken_by.iter().map(|(id, from)| json!({"id": id, "from": from}))
                        .collect::<Vec<_>>(),
                    "card": ev.card,
                })
            } else {
                json!({
                    "event": "run",
                    "agent": ev.agent,
                    "run": ev.run,
                    "attempt": ev.attempt,
                    "status": ev.status.name(),
                    "duration_ms": ev.duration.as_millis() as u64,
                    "reason": ev.reason,
                    "gave_up": ev.gave_up,
                    "transcript": ev.transcript,
                    "stderr_tail": ev.stderr_tail,
                })
            };
            if label {
                v["instance"] = json!(ev.instance);
            }
            live.around(&shared, || {
                let _ = writeln!(std::io::stdout().lock(), "{v}");
            });
        } else {
            let line = event_line(ev, label);
            // A reason and a stderr tail come from the agent: shown, never acted on.
            let line = if std::io::stderr().is_terminal() {
                crate::term::visible(&line).into_owned()
            } else {
                line
            };
            live.around(&shared, || {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            });
        }
    })
}

/// Most senders named in an attempt's start line; the rest are counted.
const WOKEN_BY_SHOWN: usize = 3;

/// An event as a line for people; with `label`, the agent is named with its instance.
fn event_line(ev: &Event, label: bool) -> String {
    let agent = if label {
        format!("{}@{}", ev.agent, ev.instance)
    } else {
        ev.agent.clone()
    };
    if ev.start {
        let mut line = format!("aw-run: {agent}: run {}", ev.run);
        if ev.attempt > 1 {
            line.push_str(&format!(" attempt {}", ev.attempt));
        }
        line.push_str(" started");
        if let Some(id) = ev.card {
            line.push_str(&format!(" on card {id}"));
        }
        if !ev.woken_by.is_empty() {
            let shown: Vec<String> = ev
                .woken_by
                .iter()
                .take(WOKEN_BY_SHOWN)
                .map(|(id, from)| format!("#{id} from {from}"))
                .collect();
            line.push_str(&format!(" (woken by {}", shown.join(", ")));
            if ev.woken_by.len() > WOKEN_BY_SHOWN {
                line.push_str(&format!(" and {} more", ev.woken_by.len() - WOKEN_BY_SHOWN));
            }
            line.push(')');
        }
        return line;
    }
    let mut line = format!(
        "aw-run: {agent}: run {} {} {:.2} s",
        ev.run,
        ev.status.name(),
        ev.duration.as_secs_f64()
    );
    if ev.attempt > 1 {
        line.push_str(&format!(" (attempt {})", ev.attempt));
    }
    if let Some(r) = &ev.reason {
        line.push_str(&format!(": {r}"));
    }
    if let Some(t) = &ev.stderr_tail {
        line.push_str(&format!("; stderr: {t}"));
    }
    if ev.gave_up {
        line.push_str("; messages left unread");
    }
    if ev.status != crate::run::backend::Status::Ok && ev.transcript > 0 {
        line.push_str(&format!(
            "; see aw-ctl -i {} runs {} {}",
            ev.instance, ev.agent, ev.transcript
        ));
    }
    line
}

/// Prints the channel's new entries: lines on stdout, or JSON Lines with `--json`.
pub(super) struct Printer {
    pub(super) channel: Option<Channel>,
    pub(super) json: bool,
    pub(super) after: u64,
    /// Print on stderr, as human lines (stdout is the tasks' result).
    pub(super) stderr: bool,
    /// What is never echoed (an agent may post a secret itself).
    pub(super) secrets: Vec<String>,
    /// The status line kept below what is printed.
    pub(super) live: Option<(Arc<crate::run::live::Live>, Arc<Shared>)>,
    /// The instance, said on every entry when the process serves several.
    label: Option<String>,
}

impl Printer {
    pub(super) fn new(inst: &Instance, opts: &Options, after: u64, stderr: bool) -> Printer {
        Printer {
            channel: (!opts.quiet).then(|| Channel::new(inst)),
            json: opts.json && !stderr,
            after,
            stderr,
            secrets: Vec::new(),
            live: None,
            label: opts.label.clone(),
        }
    }

    pub(super) fn print(&mut self) {
        let Some(ch) = &self.channel else { return };
        let Ok(batch) = ch.read_since(self.after) else {
            return;
        };
        if batch.entries.is_empty() {
            return;
        }
        match self.live.clone() {
            Some((live, shared)) => live.around(&shared, || self.write(batch.entries)),
            None => self.write(batch.entries),
        }
    }

    fn write(&mut self, entries: Vec<crate::channel::Entry>) {
        let (mut out, tty): (Box<dyn Write>, bool) = if self.stderr {
            let err = std::io::stderr();
            let tty = err.is_terminal();
            (Box::new(err.lock()), tty)
        } else {
            let out = std::io::stdout();
            let tty = out.is_terminal();
            (Box::new(out.lock()), tty)
        };
        // On a terminal, an entry's controls are shown as escapes; JSON and pipes get it
        // exactly.
        let visible = tty && !self.json;
        for e in &entries {
            let e = &crate::channel::Entry {
                message: crate::run::redact::redact(&e.message, &self.secrets),
                ..e.clone()
            };
            let line = if self.json {
                let mut v: serde_json::Value =
                    serde_json::from_str(&e.to_json()).unwrap_or_default();
                if let Some(m) = v.as_object_mut() {
                    m.insert("event".into(), json!("entry"));
                    if let Some(i) = &self.label {
                        m.insert("instance".into(), json!(i));
                    }
                }
                v.to_string()
            } else {
                match &self.label {
                    Some(i) => format!("[{i}] {}", crate::channel::human_entry(e, None)),
                    None => crate::channel::human_entry(e, None),
                }
            };
            let line = if visible {
                crate::term::visible(&line)
            } else {
                line.into()
            };
            let _ = writeln!(out, "{line}");
            self.after = e.id;
        }
        let _ = out.flush();
    }
}

/// Print runs and failures per agent: a line on stderr (not with `-q`), an aligned table
/// when stderr is a terminal (`table`), or with `--json` an object on stdout (with `-q`
/// too: it is the run's result).
pub(super) fn summary(shared: &Shared, opts: &Options, has_tasks: bool, table: bool) {
    let st = shared.lock();
    let json = opts.json && !has_tasks;
    if opts.quiet && !json {
        return;
    }
    // `summary of INSTANCE` when the process serves several.
    let of = opts
        .label
        .as_ref()
        .map(|i| format!(" of {i}"))
        .unwrap_or_default();
    let mut total = crate::usage::Usage::default();
    for a in st.agents.values() {
        total.add(&a.usage);
    }
    if json {
        let agents: serde_json::Map<String, serde_json::Value> = st
            .agents
            .iter()
            .map(|(n, a)| {
                let ms = a.busy.as_millis() as u64;
                let v = json!({"runs": a.total, "failures": a.failures, "duration_ms": ms,
                    "usage": a.usage});
                (n.clone(), v)
            })
            .collect();
        let mut v = json!({"event": "summary", "agents": agents, "usage": total});
        if let Some(i) = &opts.label {
            v["instance"] = json!(i);
        }
        let _ = writeln!(std::io::stdout().lock(), "{v}");
    } else if table {
        let rows: Vec<crate::run::live::Row<'_>> = st
            .agents
            .iter()
            .map(|(n, a)| crate::run::live::Row {
                agent: n,
                runs: a.total,
                failures: a.failures,
                busy: a.busy,
                usage: &a.usage,
            })
            .collect();
        let _ = write!(
            std::io::stderr().lock(),
            "aw-run: summary{of}:\n{}",
            crate::run::live::summary_table(&rows)
        );
    } else {
        let parts: Vec<String> = st
            .agents
            .iter()
            .map(|(n, a)| {
                let mut line = format!(
                    "{n} {} run(s) {} failure(s) {:.2} s",
                    a.total,
                    a.failures,
                    a.busy.as_secs_f64()
                );
                if a.usage.tokens() > 0 {
                    line.push_str(&format!(" {} tokens", a.usage.tokens()));
                }
                if let Some(c) = a.usage.cost_usd {
                    line.push_str(&format!(" {}", crate::usage::money(c)));
                }
                line
            })
            .collect();
        let mut all = String::new();
        if total.tokens() > 0 || total.cost_usd.is_some() {
            all = format!("; total {} tokens", total.tokens());
            if let Some(c) = total.cost_usd {
                all.push_str(&format!(" {}", crate::usage::money(c)));
            }
        }
        let _ = writeln!(
            std::io::stderr().lock(),
            "aw-run: summary{of}: {}{all}",
            parts.join(", ")
        );
    }
}
