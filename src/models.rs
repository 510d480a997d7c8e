//! Known models, in one table ([`MODELS`]): each model's full id, its aliases, its provider,
//! and its price.
//!
//! Prices are list prices in USD per million tokens, for input, output, cache reads and
//! cache writes; `None` where unknown. A workflow's `pricing:` key overrides them for that
//! workflow ([`Pricing`]). They price a run whose backend reports tokens but no cost (a
//! CLI's own figure is kept as it is).
//!
//! | model | provider | aliases | input | output | cache read | cache write |
//! |---|---|---|--:|--:|--:|--:|
//! | `claude-sonnet-4-5` | anthropic | `sonnet`, `claude-sonnet-4-5-20250929` | 3 | 15 | 0.30 | 3.75 |
//! | `claude-opus-4-5` | anthropic | `opus`, `claude-opus-4-5-20251101` | 5 | 25 | 0.50 | 6.25 |
//! | `claude-opus-4-1` | anthropic | `claude-opus-4-1-20250805` | 15 | 75 | 1.50 | 18.75 |
//! | `claude-haiku-4-5` | anthropic | `haiku`, `claude-haiku-4-5-20251001` | 1 | 5 | 0.10 | 1.25 |
//! | `gpt-5` | openai | `gpt-5-2025-08-07` | 1.25 | 10 | 0.125 | 0 |
//! | `gpt-5-codex` | openai | | 1.25 | 10 | 0.125 | 0 |
//! | `gpt-5-mini` | openai | `gpt-5-mini-2025-08-07` | 0.25 | 2 | 0.025 | 0 |
//! | `gpt-4o` | openai | `gpt-4o-2024-08-06` | 2.50 | 10 | 1.25 | 0 |
//! | `gpt-4o-mini` | openai | `gpt-4o-mini-2024-07-18` | 0.15 | 0.60 | 0.075 | 0 |
//! | `o3` | openai | `o3-2025-04-16` | 2 | 8 | 0.50 | 0 |
//!
//! Anthropic's cache reads cost a tenth of its input price and its (five-minute) cache writes
//! 1.25 times; OpenAI does not charge for writing its cache.
//!
//! A model string is `[PROVIDER/]NAME`: a known provider's prefix (`anthropic/`, `openai/`)
//! is kept apart, and a NAME that is an id or an alias in the table becomes that model's id,
//! unless the prefix names another provider ([`resolve`]). Any other text is a model id as
//! it is (`meta-llama/Llama-3-8B`).

use crate::usage::Usage;

/// The providers whose `PROVIDER/` prefix a model string may carry.
pub const PROVIDERS: [&str; 2] = ["anthropic", "openai"];

/// Prices in USD per million tokens; `None` where unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Price {
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

impl Price {
    /// What `usage` costs in USD: `None` when a price it needs (one whose token count is
    /// above 0) is unknown.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        let parts = [
            (usage.input_tokens, self.input),
            (usage.output_tokens, self.output),
            (usage.cache_read_tokens, self.cache_read),
            (usage.cache_write_tokens, self.cache_write),
        ];
        let mut total = 0.0;
        for (tokens, price) in parts {
            if tokens > 0 {
                total += tokens as f64 * price? / 1_000_000.0;
            }
        }
        Some(total)
    }

    /// These prices, with each one that `over` knows replaced.
    pub fn with(self, over: &Price) -> Price {
        Price {
            input: over.input.or(self.input),
            output: over.output.or(self.output),
            cache_read: over.cache_read.or(self.cache_read),
            cache_write: over.cache_write.or(self.cache_write),
        }
    }
}

/// One known model.
#[derive(Debug)]
pub struct Model {
    /// The full id, as the provider's API takes it.
    pub id: &'static str,
    pub provider: &'static str,
    /// Other names of the same model: short names and dated snapshots.
    pub aliases: &'static [&'static str],
    pub price: Price,
}

const fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
    Price {
        input: Some(input),
        output: Some(output),
        cache_read: Some(cache_read),
        cache_write: Some(cache_write),
    }
}

const fn model(
    id: &'static str,
    provider: &'static str,
    aliases: &'static [&'static str],
    price: Price,
) -> Model {
    Model {
        id,
        provider,
        aliases,
        price,
    }
}

/// The known models (see the table above).
pub const MODELS: [Model; 10] = [
    model(
        "claude-sonnet-4-5",
        "anthropic",
        &["sonnet", "claude-sonnet-4-5-20250929"],
        price(3.0, 15.0, 0.30, 3.75),
    ),
    model(
        "claude-opus-4-5",
        "anthropic",
        &["opus", "claude-opus-4-5-20251101"],
        price(5.0, 25.0, 0.50, 6.25),
    ),
    model(
        "claude-opus-4-1",
        "anthropic",
        &["claude-opus-4-1-20250805"],
        price(15.0, 75.0, 1.50, 18.75),
    ),
    model(
        "claude-haiku-4-5",
        "anthropic",
        &["haiku", "claude-haiku-4-5-20251001"],
        price(1.0, 5.0, 0.10, 1.25),
    ),
    model(
        "gpt-5",
        "openai",
        &["gpt-5-2025-08-07"],
        price(1.25, 10.0, 0.125, 0.0),
    ),
    model("gpt-5-codex", "openai", &[], price(1.25, 10.0, 0.125, 0.0)),
    model(
        "gpt-5-mini",
        "openai",
        &["gpt-5-mini-2025-08-07"],
        price(0.25, 2.0, 0.025, 0.0),
    ),
    model(
        "gpt-4o",
        "openai",
        &["gpt-4o-2024-08-06"],
        price(2.50, 10.0, 1.25, 0.0),
    ),
    model(
        "gpt-4o-mini",
        "openai",
        &["gpt-4o-mini-2024-07-18"],
        price(0.15, 0.60, 0.075, 0.0),
    ),
    model(
        "o3",
        "openai",
        &["o3-2025-04-16"],
        price(2.0, 8.0, 0.50, 0.0),
    ),
];

/// The model whose id or alias is `name` (exactly; no provider prefix).
pub fn find(name: &str) -> Option<&'static Model> {
    MODELS
        .iter()
        .find(|m| m.id == name || m.aliases.contains(&name))
}

/// The known model `name` names for `provider` (any provider when `None`).
pub fn find_for(name: &str, provider: Option<&str>) -> Option<&'static Model> {
    find(name).filter(|m| provider.is_none_or(|p| p == m.provider))
}

/// A known provider's prefix, kept apart from the rest of `model`.
pub fn split_provider(model: &str) -> (Option<&'static str>, &str) {
    PROVIDERS
        .iter()
        .find_map(|&p| Some((Some(p), model.strip_prefix(p)?.strip_prefix('/')?)))
        .unwrap_or((None, model))
}

/// A model string read: its provider (the prefix, else the table's) and its full id.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub provider: Option<&'static str>,
    pub id: String,
}

/// Read a model string: `anthropic/sonnet` and `sonnet` give provider `anthropic`, id
/// `claude-sonnet-4-5`; `openai/my-model` gives `openai`, `my-model`; `x/y` gives no
/// provider and `x/y`.
pub fn resolve(model: &str) -> Resolved {
    let (prefix, name) = split_provider(model);
    match find_for(name, prefix) {
        Some(m) => Resolved {
            provider: Some(m.provider),
            id: m.id.to_string(),
        },
        None => Resolved {
            provider: prefix,
            id: name.to_string(),
        },
    }
}

/// The prices of a workflow: the table's, with the workflow's overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pricing {
    /// By model id (aliases resolved), in file order.
    overrides: Vec<(String, Price)>,
}

impl Pricing {
    /// Override the prices of `model` (an id or an alias) that `price` knows, replacing an
    /// earlier override of the same model; the other prices of a known model stay the
    /// table's.
    pub fn set(&mut self, model: &str, price: Price) {
        let id = resolve(model).id;
        self.overrides.retain(|(k, _)| *k != id);
        self.overrides.push((id, price));
    }

    /// The prices of `model` (an id, an alias, with or without a provider prefix): `None`
    /// when neither the table nor the overrides know it.
    pub fn price(&self, model: &str) -> Option<Price> {
        let (prefix, name) = split_provider(model);
        let known = find_for(name, prefix);
        let id = known.map_or(name, |m| m.id);
        let over = self.overrides.iter().find(|(k, _)| k == id).map(|(_, p)| p);
        match (known, over) {
            (None, None) => None,
            (k, o) => Some(
                k.map(|m| m.price)
                    .unwrap_or_default()
                    .with(o.unwrap_or(&Price::default())),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            cost_usd: None,
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn aliases_resolve_to_ids_and_prefixes_are_kept_apart() {
        let r = |m: &str| {
            let x = resolve(m);
            (x.provider, x.id)
        };
        let s = |p: &'static str, id: &str| (Some(p), id.to_string());
        assert_eq!(r("sonnet"), s("anthropic", "claude-sonnet-4-5"));
        assert_eq!(r("anthropic/sonnet"), s("anthropic", "claude-sonnet-4-5"));
        assert_eq!(r("opus"), s("anthropic", "claude-opus-4-5"));
        assert_eq!(r("haiku"), s("anthropic", "claude-haiku-4-5"));
        assert_eq!(
            r("claude-sonnet-4-5-20250929"),
            s("anthropic", "claude-sonnet-4-5")
        );
        assert_eq!(r("openai/gpt-4o"), s("openai", "gpt-4o"));
        assert_eq!(r("gpt-5"), s("openai", "gpt-5"));
        assert_eq!(r("openai/my-model"), s("openai", "my-model"));
        // An alias of another provider's model is not resolved under a prefix.
        assert_eq!(r("openai/sonnet"), s("openai", "sonnet"));
        assert_eq!(
            r("meta-llama/Llama-3-8B"),
            (None, "meta-llama/Llama-3-8B".into())
        );
        assert_eq!(r("mystery"), (None, "mystery".into()));
        assert_eq!(r("anthropic"), (None, "anthropic".into()));
    }

    #[test]
    fn the_table_is_consistent() {
        let mut names = std::collections::BTreeSet::new();
        for m in &MODELS {
            assert!(PROVIDERS.contains(&m.provider), "{}", m.id);
            for n in std::iter::once(&m.id).chain(m.aliases) {
                assert!(names.insert(*n), "{n} twice");
                assert!(!n.contains('/'), "{n}");
            }
            let p = m.price;
            assert!(p.input.is_some() && p.output.is_some(), "{}", m.id);
            if m.provider == "anthropic" {
                assert!(close(p.cache_read, p.input.unwrap() * 0.1), "{}", m.id);
                assert!(close(p.cache_write, p.input.unwrap() * 1.25), "{}", m.id);
            }
        }
    }

    #[test]
    fn registered_agents_get_the_backend_the_table_implies() {
        use crate::registry::{BackendKind, backend_for_model};
        let b = |m: &str| backend_for_model(Some(m));
        // Aliases: Claude Code knows them, as a workflow's default backend.
        for alias in ["sonnet", "opus", "haiku", "claude-haiku-4-5-20251001"] {
            assert_eq!(b(alias), BackendKind::Claude, "{alias}");
        }
        assert_eq!(b("gpt-5-codex"), BackendKind::Openai);
        assert_eq!(b("o3"), BackendKind::Openai);
        // Prefixes and families as before.
        assert_eq!(b("anthropic/sonnet"), BackendKind::Anthropic);
        assert_eq!(b("openai/anything"), BackendKind::Openai);
        assert_eq!(b("claude-3-haiku"), BackendKind::Claude);
        assert_eq!(b("gpt-4.1"), BackendKind::Openai);
        assert_eq!(b("llama3"), BackendKind::External);
        assert_eq!(backend_for_model(None), BackendKind::External);
    }

    #[test]
    fn cost_sums_every_kind_of_token() {
        let p = find("sonnet").unwrap().price;
        // 1M input $3, 0.5M output $7.5, 2M cache reads $0.6, 0.1M cache writes $0.375.
        let u = usage(1_000_000, 500_000, 2_000_000, 100_000);
        assert!(close(p.cost(&u), 11.475), "{:?}", p.cost(&u));
        assert!(close(
            find("gpt-4o-mini")
                .unwrap()
                .price
                .cost(&usage(1000, 1000, 0, 0)),
            0.00075
        ));
        assert_eq!(p.cost(&Usage::default()), Some(0.0));
    }

    #[test]
    fn an_unknown_price_gives_no_cost_only_when_it_is_needed() {
        let p = Price {
            input: Some(1.0),
            output: Some(2.0),
            ..Price::default()
        };
        assert!(close(p.cost(&usage(1_000_000, 1_000_000, 0, 0)), 3.0));
        assert_eq!(p.cost(&usage(1, 1, 1, 0)), None);
        assert_eq!(p.cost(&usage(1, 1, 0, 1)), None);
        assert_eq!(Price::default().cost(&usage(0, 1, 0, 0)), None);
    }

    #[test]
    fn overrides_replace_only_the_prices_they_give() {
        let mut pricing = Pricing::default();
        let over = Price {
            input: Some(10.0),
            ..Price::default()
        };
        pricing.set("sonnet", over);
        for name in ["sonnet", "claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"] {
            let p = pricing.price(name).unwrap();
            assert_eq!(p.input, Some(10.0), "{name}");
            assert_eq!(p.output, Some(15.0), "{name}");
        }
        // The same model under another name replaces the first override.
        pricing.set("claude-sonnet-4-5", Price::default());
        assert_eq!(pricing.price("sonnet").unwrap().input, Some(3.0));
        // A model the table does not know gets only the prices given.
        pricing.set("meta-llama/Llama-3-8B", over);
        let p = pricing.price("meta-llama/Llama-3-8B").unwrap();
        assert_eq!((p.input, p.output), (Some(10.0), None));
        assert_eq!(pricing.price("mystery"), None);
        assert_eq!(
            Pricing::default().price("gpt-5"),
            Some(find("gpt-5").unwrap().price)
        );
        // Under another provider's prefix an alias is not that model.
        assert_eq!(Pricing::default().price("openai/sonnet"), None);
    }
}
