//! What `aw-run` shows of a run while it happens, on a terminal only: a status line at the
//! bottom of stderr (agents running, elapsed time, tokens and cost so far), kept below the
//! lines printed meanwhile, and the end-of-run summary as an aligned table. When stderr is
//! not a terminal none of this is printed: pipes and log files get plain lines.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::controller::Shared;
use crate::time::clock;
use crate::usage::{Usage, money};

/// How often the status line is redrawn while nothing else happens: its elapsed clock.
pub const TICK: Duration = Duration::from_secs(1);

/// The widest status line: it must fit an 80-column terminal, or `\r` cannot erase it.
pub const MAX_WIDTH: usize = 79;

/// Erase the current line of a terminal.
const ERASE: &str = "\r\x1b[K";

/// The status line of one run.
pub struct Live {
    /// Shown at all: stderr is a terminal and the run is not quiet.
    on: bool,
    t0: Instant,
    state: Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    /// The status line is on the screen.
    shown: bool,
    /// The run has ended: nothing is drawn any more.
    done: bool,
    /// The agents whose attempt is under way.
    running: BTreeSet<String>,
}

/// Set when one process runs several serving loops (one per instance): they share stderr,
/// so none draws a status line (their lines and summaries are plain).
static SEVERAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The runs of this process share stderr with others of it: no status line from now on.
pub fn several_runs() {
    SEVERAL.store(true, std::sync::atomic::Ordering::Relaxed);
}

impl Live {
    /// A status line, shown when stderr is a terminal, `quiet` is off and the run is the
    /// only one of the process ([`several_runs`]).
    pub fn new(quiet: bool) -> Arc<Live> {
        let alone = !SEVERAL.load(std::sync::atomic::Ordering::Relaxed);
        Arc::new(Live {
            on: !quiet && alone && std::io::stderr().is_terminal(),
            t0: Instant::now(),
            state: Mutex::new(LiveState::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the status line is shown (stderr is a terminal).
    pub fn on(&self) -> bool {
        self.on
    }

    /// An attempt of `agent` started (`true`) or ended.
    pub fn attempt(&self, agent: &str, start: bool) {
        let mut st = self.lock();
        if start {
            st.running.insert(agent.to_string());
        } else {
            st.running.remove(agent);
        }
    }

    /// Run `print` (which writes whole lines) with the status line out of the way, then
    /// draw it again below what was printed.
    pub fn around(&self, shared: &Shared, print: impl FnOnce()) {
        if !self.on {
            return print();
        }
        let mut st = self.lock();
        if st.shown {
            let _ = write!(std::io::stderr().lock(), "{ERASE}");
            st.shown = false;
        }
        print();
        self.draw(&mut st, shared);
    }

    /// Draw the status line again (its clock moves).
    pub fn refresh(&self, shared: &Shared) {
        if self.on {
            let mut st = self.lock();
            self.draw(&mut st, shared);
        }
    }

    /// Erase the status line for good: the run has ended.
    pub fn finish(&self) {
        let mut st = self.lock();
        if st.shown {
            let _ = write!(std::io::stderr().lock(), "{ERASE}");
        }
        st.shown = false;
        st.done = true;
    }

    fn draw(&self, st: &mut LiveState, shared: &Shared) {
        if st.done {
            return;
        }
        let (agents, spent) = {
            let s = shared.lock();
            let mut spent = Usage::default();
            for a in s.agents.values() {
                spent.add(&a.usage);
                spent.add(&a.running);
            }
            (s.agents.values().filter(|a| !a.closed).count(), spent)
        };
        let mut line = format!(
            "aw-run: {} of {agents} agent(s) running, {}, {} tokens",
            st.running.len(),
            clock(self.t0.elapsed()),
            spent.tokens()
        );
        if let Some(c) = spent.cost_usd {
            line.push_str(&format!(", {}", money(c)));
        }
        let line: String = line.chars().take(MAX_WIDTH).collect();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{ERASE}{line}");
        let _ = err.flush();
        st.shown = true;
    }
}

/// Redraw `live`'s status line every [`TICK`] until the run stops: the thread that does,
/// when the line is shown at all.
pub fn ticker(live: &Arc<Live>, shared: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    if !live.on {
        return None;
    }
    let (live, shared) = (live.clone(), shared.clone());
    Some(std::thread::spawn(move || {
        loop {
            {
                let st = shared.lock();
                if st.stopping {
                    return;
                }
                let (st, _) = shared
                    .cv
                    .wait_timeout_while(st, TICK, |s| !s.stopping)
                    .unwrap_or_else(|e| e.into_inner());
                if st.stopping {
                    return;
                }
            }
            live.refresh(&shared);
        }
    }))
}

/// One row of the end-of-run summary.
pub struct Row<'a> {
    pub agent: &'a str,
    pub runs: u64,
    pub failures: u64,
    pub busy: Duration,
    pub usage: &'a Usage,
}

/// The end-of-run summary as an aligned table: a header, one row per agent and a total row.
pub fn summary_table(rows: &[Row<'_>]) -> String {
    let mut total = Usage::default();
    let (mut runs, mut failures, mut busy) = (0, 0, Duration::ZERO);
    for r in rows {
        total.add(r.usage);
        runs += r.runs;
        failures += r.failures;
        busy += r.busy;
    }
    let cells = |agent: &str, runs: u64, failures: u64, busy: Duration, u: &Usage| {
        [
            agent.to_string(),
            runs.to_string(),
            failures.to_string(),
            format!("{:.2}s", busy.as_secs_f64()),
            u.tokens().to_string(),
            u.cost_usd.map_or_else(|| "-".to_string(), money),
        ]
    };
    let mut table =
        vec![["agent", "runs", "failures", "time", "tokens", "cost"].map(str::to_string)];
    for r in rows {
        table.push(cells(r.agent, r.runs, r.failures, r.busy, r.usage));
    }
    table.push(cells("total", runs, failures, busy, &total));
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &table {
        let mut line = format!("{:<w$}", r[0], w = widths[0]);
        for (i, cell) in r.iter().enumerate().skip(1) {
            line.push_str(&format!("  {cell:>w$}", w = widths[i]));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_table_is_aligned_with_a_total_row() {
        let u = Usage {
            input_tokens: 100,
            output_tokens: 20,
            cost_usd: Some(0.05),
            ..Usage::default()
        };
        let t = summary_table(&[
            Row {
                agent: "alice",
                runs: 2,
                failures: 0,
                busy: Duration::from_millis(1500),
                usage: &u,
            },
            Row {
                agent: "b",
                runs: 10,
                failures: 1,
                busy: Duration::from_millis(250),
                usage: &u,
            },
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "agent  runs  failures   time  tokens     cost");
        assert_eq!(lines[1], "alice     2         0  1.50s     120  $0.0500");
        assert_eq!(lines[3], "total    12         1  1.75s     240  $0.1000");
    }
}
