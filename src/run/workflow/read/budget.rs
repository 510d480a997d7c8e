//! Reading money and tokens: usage figures (a mock's), budgets (the workflow's and an
//! agent's) and the `pricing:` table of models.

use crate::names::sanitize;
use crate::run::diagnostic::Spanned;
use crate::run::reader::{Reader, join};
use crate::run::workflow::{Budget, Price, Pricing, Usage, models};
use crate::run::yaml::{Kind, Node};

const USAGE_KEYS: [&str; 5] = [
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
];
const BUDGET_KEYS: [&str; 2] = ["usd", "tokens"];
const PRICE_KEYS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];

/// What each run of a mock reports: token counts (whole numbers, default 0) and a cost.
pub(super) fn read_usage(r: &mut Reader, node: &Node, path: &str) -> Option<Usage> {
    let f = r.fields(node, path, &USAGE_KEYS)?;
    let mut tokens = |key: &str| {
        f.get(key)
            .and_then(|n| r.whole(n, &join(path, key), 0))
            .map_or(0, |t| t.value)
    };
    let usage = Usage {
        input_tokens: tokens("input_tokens"),
        output_tokens: tokens("output_tokens"),
        cache_read_tokens: tokens("cache_read_tokens"),
        cache_write_tokens: tokens("cache_write_tokens"),
        cost_usd: None,
    };
    Some(Usage {
        cost_usd: f
            .get("cost_usd")
            .and_then(|n| amount(r, n, &join(path, "cost_usd"), false)),
        ..usage
    })
}

/// A number, whole or decimal: at least 0, or more than 0 when `positive`.
fn amount(r: &mut Reader, node: &Node, path: &str, positive: bool) -> Option<f64> {
    let Some(x) = node.number() else {
        let msg = format!("expected a number, found {}", node.type_name());
        r.error(node.pos, path, &msg);
        return None;
    };
    let why = if !x.is_finite() {
        "must be a finite number"
    } else if positive && x <= 0.0 {
        "must be more than 0"
    } else if x < 0.0 {
        "must be at least 0"
    } else {
        return Some(x);
    };
    r.error(node.pos, path, why);
    None
}

/// `{usd: X, tokens: N}`.
pub(super) fn read_budget(r: &mut Reader, node: &Node, path: &str) -> Budget {
    let Some(f) = r.fields(node, path, &BUDGET_KEYS) else {
        return Budget::default();
    };
    Budget {
        usd: f
            .get("usd")
            .and_then(|n| amount(r, n, &join(path, "usd"), true)),
        tokens: f
            .get("tokens")
            .and_then(|n| r.whole(n, &join(path, "tokens"), 1))
            .map(|t| t.value),
    }
}

/// `{MODEL: {input: X, output: X, cache_read: X, cache_write: X}}`; two names of one model
/// are an error.
pub(super) fn read_pricing(r: &mut Reader, node: &Node) -> Pricing {
    let mut pricing = Pricing::default();
    let Some(entries) = r.entries(node, "pricing") else {
        return pricing;
    };
    let mut seen: Vec<(String, Spanned<&str>)> = Vec::new();
    for (key, value) in entries.iter() {
        let path = join("pricing", key.value);
        if key.value.trim().is_empty() {
            r.error(key.pos, "pricing", "a model name must not be empty");
            continue;
        }
        let id = models::resolve(key.value).id;
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            let msg = format!(
                "'{}' is the same model as '{}' (line {}): give its prices once",
                sanitize(key.value),
                sanitize(first.value),
                first.pos.line
            );
            r.error(key.pos, "pricing", &msg);
            continue;
        }
        seen.push((id, key.clone()));
        if matches!(&value.kind, Kind::Map(e) if e.is_empty()) {
            let msg = format!("no price given; expected {}", PRICE_KEYS.join(", "));
            r.error(value.pos, &path, &msg);
            continue;
        }
        let Some(f) = r.fields(value, &path, &PRICE_KEYS) else {
            continue;
        };
        let mut get = |k: &str| f.get(k).and_then(|n| amount(r, n, &join(&path, k), false));
        let price = Price {
            input: get("input"),
            output: get("output"),
            cache_read: get("cache_read"),
            cache_write: get("cache_write"),
        };
        pricing.set(key.value, price);
    }
    pricing
}
