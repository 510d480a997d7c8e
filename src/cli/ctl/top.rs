//! `aw-ctl top`: a full-screen live view of one instance: its agents (state, the attempt
//! under way and its elapsed time, unread messages, tokens and cost), its board (when it
//! has cards: the counts, the claimed cards with holder and until, the ready ones, the
//! last done), its merge queue (when it has requests: the counts, the running and queued
//! requests, the last results), the pending approvals (id, kind, what, approvers, expiry)
//! and the last channel entries. It is drawn again when the channel, the registry, the
//! spending, the board, the merge queue, the approvals or a controller's state changes (the
//! file watcher of [`crate::fs::watch`]; the controller
//! states of agents registered later, workers among them, are watched from when they
//! appear), and every [`CLOCK`] for the clocks (`AW_TOP_CLOCK` seconds, 0 for none); `q`
//! (or Esc, or Ctrl-C) quits and gives the terminal back as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::time::{Duration, SystemTime};

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

use super::Call;
use crate::channel::Channel;
use crate::cli::Out;
use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::registry::Registry;
use crate::serve;
use crate::transcript::transcript_dir;

/// How often the view is drawn again when nothing changes: its clocks.
pub const CLOCK: Duration = Duration::from_secs(1);

/// Most channel entries the view reads (it shows those that fit).
const ENTRIES: usize = 50;

/// Most lines of the board pane, its border aside.
const BOARD_LINES: usize = 8;

/// How many of the cards done last the board pane shows.
const RECENTLY_DONE: usize = 3;

/// Most lines of the merge pane, and of the approvals pane, their borders aside.
const MERGE_LINES: usize = 6;
const APPROVAL_LINES: usize = 6;

/// How many of the requests served last the merge pane shows.
const RECENTLY_SERVED: usize = 3;

/// What wakes the view.
enum Wake {
    Key(Event),
    Change,
    Clock,
}

/// One agent as the view shows it.
struct AgentRow {
    name: String,
    state: String,
    /// The transcript number of the attempt under way, and when it started.
    attempt: Option<(u64, Option<SystemTime>)>,
    unread: usize,
    tokens: u64,
    cost: Option<f64>,
}

/// Everything the view shows, as read from the instance.
struct Snapshot {
    agents: Vec<AgentRow>,
    /// The board pane's lines; none when the board has no card.
    board: Vec<String>,
    /// The merge pane's lines; none when the queue has no request.
    merges: Vec<String>,
    /// The approvals pane's lines; none when no approval is pending.
    approvals: Vec<String>,
    entries: Vec<String>,
}

/// Puts the terminal back (main screen, cooked mode, cursor) however the view ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = disable_raw_mode();
        let _ = execute!(
            std::io::stdout(),
            LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    }
}

/// `aw-ctl top [-i INSTANCE]`.
pub(super) fn top(_out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "top needs a terminal (for a snapshot: aw-ctl status, aw-ctl ps)".into(),
        ));
    }
    let (tx, rx) = mpsc::channel();
    let mut watched = BTreeSet::new();
    watch(&inst, &tx, &mut watched);
    let clock = clock()?;
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            while let Ok(ev) = event::read() {
                if tx.send(Wake::Key(ev)).is_err() {
                    return;
                }
            }
        });
    }
    if let Some(clock) = clock {
        let tx = tx.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(clock);
                if tx.send(Wake::Clock).is_err() {
                    return;
                }
            }
        });
    }
    let io = |e: std::io::Error| Error::io("<terminal>", e);
    enable_raw_mode().map_err(io)?;
    let restore = Restore;
    execute!(std::io::stdout(), EnterAlternateScreen).map_err(io)?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout())).map_err(io)?;
    term.clear().map_err(io)?;
    let mut snap = snapshot(&inst);
    loop {
        term.draw(|f| draw(f, &inst, &snap)).map_err(io)?;
        let Ok(wake) = rx.recv() else { break };
        match wake {
            Wake::Key(Event::Key(k)) if k.kind == KeyEventKind::Press => {
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                    break;
                }
            }
            Wake::Key(_) => {}
            Wake::Change => {
                // A burst of changes is read once.
                while let Ok(Wake::Change) = rx.try_recv() {}
                watch(&inst, &tx, &mut watched);
                snap = snapshot(&inst);
            }
            Wake::Clock => {
                watch(&inst, &tx, &mut watched);
                snap = snapshot(&inst);
            }
        }
    }
    drop(term);
    drop(restore);
    Ok(0)
}

/// Watch what the view shows: the channel, the registry, the spending, the inbox cursors,
/// the agents' own states and the controller states; each change sends [`Wake::Change`].
/// Files in `watched` are watched already; those added now join it (called again at every
/// change and tick, so that a file or folder made later is watched too).
fn watch(inst: &Instance, tx: &Sender<Wake>, watched: &mut BTreeSet<PathBuf>) {
    let files: Vec<PathBuf> = vec![
        inst.channel_path(),
        inst.state_file("agents.json"),
        inst.state_file(crate::ledger::FILE),
        inst.state_file(crate::inbox::CURSORS),
        inst.state_file(crate::status::FILE),
    ];
    // The controllers' records: a server shows all its agents with one file there.
    let folders = [
        crate::serve::dir(inst),
        crate::board::dir(inst),
        inst.dir().join(crate::merge::DIR),
        crate::approval::dir(inst),
    ];
    for f in files.into_iter().chain(folders.iter().cloned()) {
        if watched.contains(&f) {
            continue;
        }
        let w = match folders.contains(&f) {
            true => crate::fs::watch::FileWaiter::folder(&f, None),
            false => crate::fs::watch::FileWaiter::new(&f, None),
        };
        let Ok(mut w) = w else {
            // Its folder does not exist yet: the clock redraws the view.
            continue;
        };
        watched.insert(f);
        let tx = tx.clone();
        std::thread::spawn(move || {
            loop {
                w.wait(None);
                if tx.send(Wake::Change).is_err() {
                    return;
                }
            }
        });
    }
}

/// How often the clocks are drawn: [`CLOCK`], or `AW_TOP_CLOCK` seconds (0: never, the view
/// is then drawn on changes only).
fn clock() -> Result<Option<Duration>> {
    match std::env::var("AW_TOP_CLOCK") {
        Err(_) => Ok(Some(CLOCK)),
        Ok(v) => match v.parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(Duration::from_secs(n))),
            Err(_) => Err(Error::Usage(format!(
                "AW_TOP_CLOCK: '{v}' is not a number of seconds"
            ))),
        },
    }
}

/// Read what the view shows; what cannot be read is shown empty.
fn snapshot(inst: &Instance) -> Snapshot {
    let reg = Registry::load(inst).unwrap_or_default();
    let served: BTreeMap<String, serve::Served> = serve::list(inst)
        .into_iter()
        .map(|s| (s.agent.clone(), s))
        .collect();
    let ledger = crate::ledger::load(inst).unwrap_or_default();
    let members = crate::status::members(inst, &reg, None).unwrap_or_default();
    let agents = members
        .iter()
        .filter(|m| !m.agent.closed || served.contains_key(&m.agent.name))
        .map(|m| {
            let name = m.agent.name.clone();
            let controller = served.get(&name).map(|s| s.state.name());
            let state = super::agents::shown_state(m.state.name(), controller, &m.agent.backend)
                .to_string();
            let attempt = (controller == Some("running"))
                .then(|| current_attempt(inst, &name))
                .flatten();
            let spent = ledger.of(&name);
            AgentRow {
                name,
                state,
                attempt,
                unread: m.unread,
                tokens: spent.tokens(),
                cost: spent.cost_usd,
            }
        })
        .collect();
    let entries = Channel::new(inst)
        .tail(ENTRIES)
        .map(|b| {
            b.entries
                .iter()
                .map(|e| {
                    // One line each: newlines and tabs as spaces, other controls shown.
                    let line = crate::channel::human_entry(e, None);
                    crate::term::visible(&line).replace(['\n', '\t'], " ")
                })
                .collect()
        })
        .unwrap_or_default();
    Snapshot {
        agents,
        board: board_lines(inst),
        merges: merge_lines(inst),
        approvals: approval_lines(inst),
        entries,
    }
}

/// The board pane: the counts by state, then the claimed cards (holder and until), the
/// ready ones, and the last done, at most [`BOARD_LINES`] lines; none without cards.
fn board_lines(inst: &Instance) -> Vec<String> {
    use crate::board::State;
    let cards = crate::board::list(inst).unwrap_or_default();
    if cards.is_empty() {
        return Vec::new();
    }
    let count = |s: State| cards.values().filter(|c| c.state == s).count();
    let ready = cards.values().filter(|c| c.is_ready(&cards)).count();
    let mut lines = vec![format!(
        "{} open ({ready} ready), {} claimed, {} done, {} dropped",
        count(State::Open),
        count(State::Claimed),
        count(State::Done),
        count(State::Dropped)
    )];
    let line = |c: &crate::board::Card, what: String| {
        let title = crate::term::visible(&c.title).replace(['\n', '\t'], " ");
        format!("#{} {title}  {what}", c.id)
    };
    for c in cards.values() {
        if let Some(h) = &c.holder {
            lines.push(line(c, format!("held by {} until {}", h.agent, h.until)));
        }
    }
    for c in cards.values().filter(|c| c.is_ready(&cards)) {
        let to = match c.assignee.is_empty() {
            true => String::new(),
            false => format!(" for {}", c.assignee.join(",")),
        };
        lines.push(line(c, format!("ready{to}")));
    }
    let mut done: Vec<&crate::board::Card> =
        cards.values().filter(|c| c.state == State::Done).collect();
    done.sort_by(|a, b| b.updated.cmp(&a.updated));
    for c in done.into_iter().take(RECENTLY_DONE) {
        let by = c.history.last().map_or("?", |e| e.by.as_str());
        let note = c.note.as_ref().map_or(String::new(), |n| format!(": {n}"));
        lines.push(line(c, format!("done by {by}{note}")));
    }
    lines.truncate(BOARD_LINES);
    lines
}

/// The merge pane: the counts by state, then the running request (and the approval it
/// waits for), the queued ones, and the last served, at most [`MERGE_LINES`] lines; none
/// without requests.
fn merge_lines(inst: &Instance) -> Vec<String> {
    use crate::merge::State;
    let all = crate::merge::list(inst).unwrap_or_default();
    if all.is_empty() {
        return Vec::new();
    }
    let count = |s: State| all.iter().filter(|r| r.state == s).count();
    let mut lines = vec![
        State::ALL
            .iter()
            .map(|&s| format!("{} {}", count(s), s.name()))
            .collect::<Vec<_>>()
            .join(", "),
    ];
    let line = |r: &crate::merge::Request, what: String| {
        let branch = crate::term::visible(&r.branch);
        format!("#{} {} {branch} -> {}  {what}", r.id, r.agent, r.into)
    };
    for r in all.iter().filter(|r| r.state == State::Running) {
        let what = match r.approval {
            Some(a) => format!("running, waits for approval #{a}"),
            None => "running".to_string(),
        };
        lines.push(line(r, what));
    }
    for r in all.iter().filter(|r| r.state == State::Queued) {
        lines.push(line(r, format!("queued by {}", r.asked_by)));
    }
    let mut served: Vec<&crate::merge::Request> =
        all.iter().filter(|r| r.state.is_final()).collect();
    served.sort_by(|a, b| b.finished.cmp(&a.finished));
    for r in served.into_iter().take(RECENTLY_SERVED) {
        let outcome = crate::term::visible(&r.outcome()).replace(['\n', '\t'], " ");
        lines.push(line(r, format!("{}: {outcome}", r.state)));
    }
    lines.truncate(MERGE_LINES);
    lines
}

/// The approvals pane: how many are pending, then each (id, kind, what, approvers, expiry),
/// at most [`APPROVAL_LINES`] lines; none when none is pending.
fn approval_lines(inst: &Instance) -> Vec<String> {
    let all = crate::approval::list(inst).unwrap_or_default();
    let pending: Vec<&crate::approval::Request> = all
        .values()
        .filter(|r| r.state == crate::approval::State::Pending)
        .collect();
    if pending.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!("{} pending", pending.len())];
    for r in pending {
        let what = crate::term::visible(&r.what).replace(['\n', '\t'], " ");
        let expires = match &r.expires {
            Some(e) => format!("expires {e}, then {}", r.then.as_str()),
            None => "no time limit".to_string(),
        };
        lines.push(format!(
            "#{} {} {what}  by {}  {expires}",
            r.id,
            r.kind.name(),
            r.by.join(",")
        ));
    }
    lines.truncate(APPROVAL_LINES);
    lines
}

/// The attempt of `agent` under way: the newest log without its transcript, with when it
/// started (its log's birth, else its last change).
fn current_attempt(inst: &Instance, agent: &str) -> Option<(u64, Option<SystemTime>)> {
    let dir = transcript_dir(inst, agent);
    let n = *crate::transcript::log_numbers(&dir).last()?;
    if dir.join(format!("{n}.json")).exists() {
        return None;
    }
    let meta = std::fs::metadata(crate::transcript::log_path(&dir, n)).ok();
    let since = meta.and_then(|m| m.created().or_else(|_| m.modified()).ok());
    Some((n, since))
}

fn draw(f: &mut ratatui::Frame, inst: &Instance, snap: &Snapshot) {
    let area = f.area();
    let table_height = (snap.agents.len() as u16 + 3).min(area.height.saturating_sub(4).max(3));
    let height = |lines: &[String]| match lines.len() {
        0 => 0,
        n => n as u16 + 2,
    };
    let [title, agents, board, merges, approvals, entries] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_height),
        Constraint::Length(height(&snap.board)),
        Constraint::Length(height(&snap.merges)),
        Constraint::Length(height(&snap.approvals)),
        Constraint::Min(3),
    ])
    .areas(area);
    let now = chrono::Local::now().format("%H:%M:%S");
    f.render_widget(
        Paragraph::new(Line::from(format!(
            "aw-ctl top: instance {}  {now}  (q quits)",
            inst.name()
        ))),
        title,
    );
    let rows: Vec<Row> = snap
        .agents
        .iter()
        .map(|a| {
            let (attempt, elapsed) = match a.attempt {
                Some((n, since)) => (
                    format!("#{n}"),
                    since
                        .and_then(|s| s.elapsed().ok())
                        .map_or("-".to_string(), crate::time::clock),
                ),
                None => ("-".to_string(), "-".to_string()),
            };
            Row::new(vec![
                a.name.clone(),
                a.state.clone(),
                attempt,
                elapsed,
                a.unread.to_string(),
                a.tokens.to_string(),
                a.cost.map_or("-".to_string(), crate::usage::money),
            ])
        })
        .collect();
    let widths = [
        Constraint::Min(12),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(10),
    ];
    let header = Row::new(vec![
        "agent", "state", "attempt", "elapsed", "unread", "tokens", "cost",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    f.render_widget(
        Table::new(rows, widths)
            .header(header)
            .block(Block::default().borders(Borders::ALL).title(" agents ")),
        agents,
    );
    for (lines, at, name) in [
        (&snap.board, board, " board "),
        (&snap.merges, merges, " merges "),
        (&snap.approvals, approvals, " approvals "),
    ] {
        if lines.is_empty() {
            continue;
        }
        let lines: Vec<Line> = lines.iter().map(|l| Line::from(l.clone())).collect();
        f.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(name)),
            at,
        );
    }
    // The newest entries that fit, oldest first.
    let room = entries.height.saturating_sub(2) as usize;
    let shown: Vec<Line> = snap
        .entries
        .iter()
        .skip(snap.entries.len().saturating_sub(room))
        .map(|e| Line::from(e.clone()))
        .collect();
    f.render_widget(
        Paragraph::new(shown).block(Block::default().borders(Borders::ALL).title(" channel ")),
        entries,
    );
}
