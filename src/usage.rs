//! What agents spend and may spend: the tokens and cost of a run ([`Usage`]), summed over
//! its model calls and checked against [`Budget`]s, the limits of a workflow or of one agent.

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

/// A cost in US dollars, as money: `$0.1500`.
pub fn money(usd: f64) -> String {
    format!("${usd:.4}")
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
    /// No limit at all: nothing is ever over it.
    pub fn is_unlimited(&self) -> bool {
        self.usd.is_none() && self.tokens.is_none()
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_reads_well() {
        assert_eq!(money(0.15000000000000002), "$0.1500");
    }

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
    }
}
