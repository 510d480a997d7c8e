//! Backends: what runs an agent once. A controller builds the prompt, calls
//! [`Backend::run`], and reads the [`RunOutcome`]. Each backend is in its own module.
//!
//! | module | backend |
//! |--------|---------|
//! | `exec` | any executable: prompt on stdin, final text on stdout |
//! | `claude` | Claude Code in print mode, through `exec`, its JSON result read |
//! | `codex` | `codex exec --json`, through `exec`, its event stream read |
//! | `mock` | in-process scripted replies, for tests and dry runs |
//! | `anthropic` | the Messages API, the tool loop in process (`api`, `http`) |
//! | `openai` | any OpenAI-compatible Chat Completions endpoint, the same loop |

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::instance::Instance;

pub mod anthropic;
pub mod api;
pub mod claude;
pub mod codex;
pub mod exec;
pub mod http;
pub mod mock;
pub mod openai;

/// Longest output kept from a backend's stdout or stderr, in bytes.
pub const MAX_CAPTURE: usize = 64 * 1024;

/// A flag that asks every running backend to stop. A [`child`](Stop::child) is set when
/// its parent is, and can be set alone (one controller of many).
///
/// A stop [after the calls](Stop::set_after_calls) (a budget's) stops everything but a
/// model call already waiting for its answer: that answer is read and counted first, for
/// at most [`CALL_GRACE`].
#[derive(Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    parent: Option<Arc<AtomicBool>>,
    /// When a stop after the calls was asked; shared by a stop and its children.
    after_calls: Arc<std::sync::OnceLock<std::time::Instant>>,
}

/// How long a stop [after the calls](Stop::set_after_calls) waits for the answer of a
/// model call under way before abandoning it.
pub const CALL_GRACE: Duration = Duration::from_secs(60);

impl Stop {
    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Stop, letting the model calls under way end first (set on a root stop, it applies
    /// to its children).
    pub fn set_after_calls(&self) {
        let _ = self.after_calls.set(std::time::Instant::now());
    }

    pub fn is_set(&self) -> bool {
        self.after_calls.get().is_some() || self.interrupts_calls()
    }

    /// Is a model call under way to be abandoned: a stop that is not one
    /// [after the calls](Stop::set_after_calls), or one asked [`CALL_GRACE`] ago?
    pub fn interrupts_calls(&self) -> bool {
        self.after_calls
            .get()
            .is_some_and(|t| t.elapsed() >= CALL_GRACE)
            || self.flag.load(Ordering::SeqCst)
            || self
                .parent
                .as_ref()
                .is_some_and(|p| p.load(Ordering::SeqCst))
    }

    /// A flag of its own that is also set whenever this one is.
    pub fn child(&self) -> Stop {
        Stop {
            flag: Arc::default(),
            parent: Some(self.flag.clone()),
            after_calls: self.after_calls.clone(),
        }
    }

    /// Sleep for `d`, waking early (and returning `false`) when the flag is set.
    pub fn sleep(&self, d: Duration) -> bool {
        let step = Duration::from_millis(20);
        let end = crate::time::deadline(d);
        loop {
            if self.is_set() {
                return false;
            }
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(step));
        }
    }
}

/// Everything a backend needs for one run.
pub struct RunContext<'a> {
    pub inst: &'a Instance,
    pub agent: &'a str,
    /// 1-based number of this run of the agent (attempts of one run share it).
    pub run: u64,
    /// 1-based attempt of this run.
    pub attempt: u32,
    pub prompt: &'a str,
    /// How many inbox messages the prompt shows.
    pub prompt_messages: usize,
    /// The aw root, absolute.
    pub root: &'a std::path::Path,
    /// The MCP configuration file written for this agent.
    pub mcp_config: &'a std::path::Path,
    pub timeout: Option<Duration>,
    pub stop: &'a Stop,
    /// What this run has spent so far (tokens; a cost when the backend knows one) checked
    /// against every budget that applies: the reason when one is exceeded. A backend that
    /// calls a model several times asks after every call and stops at its next step.
    pub over_budget: &'a dyn Fn(&Usage) -> Option<String>,
    /// What the budgets leave for this run in USD, when a USD budget applies (for a CLI's
    /// own spending cap).
    pub remaining_usd: Option<f64>,
    /// Where a program's output goes as it comes, for `aw-ctl runs -f` (see
    /// [`crate::run::attempt_log`]); `None` for none.
    pub log: Option<std::sync::Arc<crate::run::attempt_log::AttemptLog>>,
}

crate::keyword_enum! {
    /// How a run ended.
    pub enum Status {
        Ok = "ok",
        Failed = "failed",
        Timeout = "timeout",
        Killed = "killed",
    }
}

/// What a run gave.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub status: Status,
    /// The agent's final reply (exec: stdout), trimmed.
    pub final_text: String,
    pub exit_code: Option<i32>,
    /// Why it failed, in a few words.
    pub reason: Option<String>,
    pub stdout: Capture,
    pub stderr: Capture,
    /// The argument vector run, if any.
    pub command: Vec<String>,
    /// Tokens and cost, when the backend reports them.
    pub usage: Option<Usage>,
    /// A failure another attempt cannot mend (the program cannot start: no such file, not
    /// executable): the run is not retried.
    pub permanent: bool,
}

/// Tokens and cost of one run, summed over its model calls.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Input tokens neither read from nor written to a prompt cache (those are counted
    /// apart, each at its own price).
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// `None` when unknown. Written rounded to [`COST_DIGITS`] decimals, so that JSON
    /// shows `0.15`, never the float noise of a sum (`0.15000000000000002`).
    #[serde(serialize_with = "cost_rounded")]
    pub cost_usd: Option<f64>,
}

/// Decimals of US dollars a cost is written with in JSON.
pub const COST_DIGITS: i32 = 10;

/// A cost rounded to [`COST_DIGITS`] decimals.
pub fn round_cost(usd: f64) -> f64 {
    let scale = 10f64.powi(COST_DIGITS);
    let r = (usd * scale).round() / scale;
    // Too large to round (the product is not finite): as it is.
    if r.is_finite() { r } else { usd }
}

fn cost_rounded<S: serde::Serializer>(c: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(usd) => s.serialize_some(&round_cost(*usd)),
        None => s.serialize_none(),
    }
}

/// Most tokens of one kind (input, output, cache reads, cache writes) one answer may report:
/// a model call's answer, or a CLI run's report of its calls. A higher count (or a count that
/// is not a whole number, such as a negative one) is not believed: the answer fails, and the
/// count is taken as this ceiling, so that a budget trips rather than overflows.
pub const MAX_ANSWER_TOKENS: u64 = 1_000_000_000;

impl Usage {
    /// Add `other`, saturating at `u64::MAX`; a cost stays known when either side knows
    /// one (a cost that is not a finite number of at least 0 adds nothing).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        let sane = |c: Option<f64>| c.filter(|c| c.is_finite() && *c >= 0.0).unwrap_or(0.0);
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(sane(a) + sane(b)),
        };
    }

    /// The tokens a token budget counts: input and output (cache reads and writes are
    /// priced apart and left out), saturating.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Why this usage, as one answer reported it, cannot be believed: a count above
    /// [`MAX_ANSWER_TOKENS`], or a cost that is negative, not a number or infinite.
    pub fn implausible(&self) -> Option<String> {
        let counts = [
            ("input", self.input_tokens),
            ("output", self.output_tokens),
            ("cache read", self.cache_read_tokens),
            ("cache write", self.cache_write_tokens),
        ];
        if let Some((kind, n)) = counts.iter().find(|(_, n)| *n > MAX_ANSWER_TOKENS) {
            return Some(format!(
                "implausible usage: {n} {kind} tokens reported (at most {MAX_ANSWER_TOKENS} \
                 are believed of one answer)"
            ));
        }
        match self.cost_usd {
            Some(c) if !c.is_finite() || c < 0.0 => Some(format!(
                "implausible usage: a cost of {c} USD reported (a cost is a finite number of at \
                 least 0)"
            )),
            _ => None,
        }
    }

    /// This less `other`, never below nothing (a cost stays unknown when this one is).
    pub fn minus(&self, other: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_sub(other.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(other.output_tokens),
            cache_read_tokens: self
                .cache_read_tokens
                .saturating_sub(other.cache_read_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_sub(other.cache_write_tokens),
            cost_usd: self
                .cost_usd
                .map(|c| (c - other.cost_usd.unwrap_or(0.0)).max(0.0)),
        }
    }

    /// What is counted of an implausible report: each count at most [`MAX_ANSWER_TOKENS`],
    /// and a cost that is not a finite number of at least 0 unknown.
    pub fn believed(&self) -> Usage {
        let cap = |n: u64| n.min(MAX_ANSWER_TOKENS);
        Usage {
            input_tokens: cap(self.input_tokens),
            output_tokens: cap(self.output_tokens),
            cache_read_tokens: cap(self.cache_read_tokens),
            cache_write_tokens: cap(self.cache_write_tokens),
            cost_usd: self.cost_usd.filter(|c| c.is_finite() && *c >= 0.0),
        }
    }
}

/// Limits on what a whole workflow, or one agent, may spend.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    pub usd: Option<f64>,
    pub tokens: Option<u64>,
}

/// What a budget is over: (spent, limit) in USD or tokens.
enum Over {
    Usd(f64, f64),
    Tokens(u64, u64),
}

impl Budget {
    fn over(&self, spent: &Usage) -> Option<Over> {
        if let (Some(max), Some(cost)) = (self.usd, spent.cost_usd)
            && cost > max
        {
            return Some(Over::Usd(cost, max));
        }
        self.tokens
            .filter(|&max| spent.tokens() > max)
            .map(|max| Over::Tokens(spent.tokens(), max))
    }

    /// Why `spent` (everyone's) is over this workflow budget, if it is.
    pub fn exceeded(&self, spent: &Usage) -> Option<String> {
        self.over(spent).map(|o| match o {
            Over::Usd(cost, max) => format!("budget: ${cost:.4} spent, over the ${max} budget"),
            Over::Tokens(n, max) => format!("budget: {n} tokens used, over the {max} token budget"),
        })
    }

    /// Why `spent` (`agent`'s own) is over this budget of `agent`, if it is.
    pub fn exceeded_by(&self, agent: &str, spent: &Usage) -> Option<String> {
        self.over(spent).map(|o| match o {
            Over::Usd(cost, max) => {
                format!("budget: agent {agent} spent ${cost:.4}, over its ${max} budget")
            }
            Over::Tokens(n, max) => {
                format!("budget: agent {agent} used {n} tokens, over its {max} token budget")
            }
        })
    }

    /// Each limit of this budget, else `other`'s.
    pub fn or(self, other: Budget) -> Budget {
        Budget {
            usd: self.usd.or(other.usd),
            tokens: self.tokens.or(other.tokens),
        }
    }

    /// What this USD limit leaves after `spent`, if there is one (never below 0).
    pub fn usd_left(&self, spent: &Usage) -> Option<f64> {
        self.usd
            .map(|max| (max - spent.cost_usd.unwrap_or(0.0)).max(0.0))
    }
}

impl RunOutcome {
    pub fn new(status: Status) -> RunOutcome {
        RunOutcome {
            status,
            final_text: String::new(),
            exit_code: None,
            reason: None,
            stdout: Capture::default(),
            stderr: Capture::default(),
            command: Vec::new(),
            usage: None,
            permanent: false,
        }
    }

    pub fn failed(reason: impl Into<String>) -> RunOutcome {
        RunOutcome {
            reason: Some(reason.into()),
            ..RunOutcome::new(Status::Failed)
        }
    }
}

/// Output kept from a stream: at most [`MAX_CAPTURE`] bytes, and how many were cut.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    pub text: String,
    pub cut: u64,
}

impl Capture {
    pub fn of(bytes: &[u8]) -> Capture {
        let keep = bytes.len().min(MAX_CAPTURE);
        Capture {
            text: String::from_utf8_lossy(&bytes[..keep]).into_owned(),
            cut: (bytes.len() - keep) as u64,
        }
    }
}

/// One way of running an agent.
pub trait Backend: Send {
    fn run(&mut self, ctx: &RunContext) -> RunOutcome;

    /// Does the backend give the system prompt to the model itself (so the prompt leaves
    /// it out)?
    fn takes_system_prompt(&self) -> bool {
        false
    }
}

/// The path of a sibling binary of this process (`aw-send`, `aw-mcp`), or the bare name.
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }
    }

    #[test]
    fn sums_saturate_and_bad_costs_add_nothing() {
        let mut u = tokens(u64::MAX, 1);
        assert_eq!(u.tokens(), u64::MAX);
        u.add(&tokens(5, u64::MAX));
        assert_eq!((u.input_tokens, u.output_tokens), (u64::MAX, u64::MAX));
        let mut c = Usage {
            cost_usd: Some(1.5),
            ..Usage::default()
        };
        for bad in [-5.0, f64::NAN, f64::INFINITY] {
            c.add(&Usage {
                cost_usd: Some(bad),
                ..Usage::default()
            });
        }
        assert_eq!(c.cost_usd, Some(1.5));
        assert_eq!(
            tokens(10, 3).minus(&tokens(4, 5)),
            tokens(6, 0),
            "never below nothing"
        );
    }

    #[test]
    fn implausible_reports_are_named_and_believed_at_the_ceiling() {
        assert_eq!(tokens(MAX_ANSWER_TOKENS, 7).implausible(), None);
        let big = tokens(MAX_ANSWER_TOKENS + 1, 7);
        assert_eq!(
            big.implausible().as_deref(),
            Some(
                "implausible usage: 1000000001 input tokens reported (at most 1000000000 are \
                 believed of one answer)"
            )
        );
        assert_eq!(big.believed(), tokens(MAX_ANSWER_TOKENS, 7));
        let negative = Usage {
            cost_usd: Some(-5.0),
            ..tokens(1, 1)
        };
        assert!(negative.implausible().unwrap().contains("a cost of -5 USD"));
        assert_eq!(negative.believed(), tokens(1, 1));
        assert_eq!(super::api::count(&serde_json::json!(-1)), u64::MAX);
        assert_eq!(super::api::count(&serde_json::json!(2.5)), u64::MAX);
        assert_eq!(super::api::count(&serde_json::json!("12")), 0);
        assert_eq!(super::api::count(&serde_json::json!(12)), 12);
    }

    #[test]
    fn a_stop_after_the_calls_stops_all_but_a_call_under_way() {
        let root = Stop::default();
        let child = root.child();
        root.set_after_calls();
        assert!(child.is_set() && !child.interrupts_calls());
        child.set();
        assert!(child.interrupts_calls() && !root.interrupts_calls());
    }
}
