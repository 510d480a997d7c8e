//! Budgets and prices with real aw-run processes and mock agents that report usage: an
//! agent's own budget, the workflow's `budget:` key and the flags over it, the `pricing:`
//! key, and a model with no known price.

use crate::common;

use common::runner::*;
use serde_json::Value;

/// aw-run (quiet, one attempt per run) on `wf` with `args`.
fn run(s: &Setup, wf: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["-q", "--retries", "1"];
    all.extend_from_slice(args);
    s.run(wf, &all)
}

fn count(s: &Setup, from: &str) -> usize {
    s.entries().iter().filter(|(f, _)| f == from).count()
}

/// The system entries of the channel after the kickoff.
fn system(s: &Setup) -> Vec<String> {
    s.entries()
        .into_iter()
        .skip(1)
        .filter(|(f, _)| f == "system")
        .map(|(_, m)| m)
        .collect()
}

/// The usage of every run, from `aw-ctl runs --json`.
fn runs_usage(s: &Setup) -> Vec<Value> {
    let mut c = s.tool_cmd("aw-ctl");
    c.args(["-i", INST, "runs", "--json"]);
    let out = run_hang_guarded(c);
    assert_code(&out, 0);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["usage"].clone())
        .collect()
}

/// Alice and bob mention each other forever; each of alice's runs reports 100 + 50 tokens
/// and $0.02 (bob's report nothing). Only a budget ends it. `extra` is added at the top
/// level.
fn ping_pong(extra: &str) -> String {
    format!(
        "agents:
  alice:
    mock:
      replies: ['@bob again']
      usage: {{input_tokens: 100, output_tokens: 50, cost_usd: 0.02}}
  bob:
    mock: {{replies: ['@alice again']}}
kickoff: '@alice go'
{extra}"
    )
}

#[test]
fn an_agent_budget_counts_its_own_runs_and_stops_every_agent() {
    // Both spend $0.02 a run; alice may spend $0.03. Bob's runs are not hers: she stops
    // after her second run, not after bob's first. Bob takes a while, so that the message
    // alice's last run sent him is still unhandled when everyone stops.
    let s = Setup::new();
    let wf = "agents:
  alice:
    budget: {usd: 0.03}
    mock:
      replies: ['@bob again']
      usage: {input_tokens: 100, output_tokens: 50, cost_usd: 0.02}
  bob:
    mock:
      replies: ['@alice again']
      delay: 0.5s
      usage: {input_tokens: 100, output_tokens: 50, cost_usd: 0.02}
kickoff: '@alice go'
";
    let out = run(&s, wf, &[]);
    assert_code(&out, 1);
    let why = "budget: agent alice spent $0.0400, over its $0.03 budget";
    let err = stderr(&out);
    assert!(err.contains(&format!("aw-run: {why}")), "{err}");
    assert_eq!(
        system(&s),
        [format!("{why}; aw-run stops every agent.")],
        "{:?}",
        s.entries()
    );
    assert_eq!((count(&s, "alice"), count(&s, "bob")), (2, 1));
    assert_eq!(s.unread("bob"), 1, "{:?}", s.entries());
    assert_eq!(s.unread("alice"), 0);
    // A token budget the same way: 300 tokens are over 200.
    let s = Setup::new();
    let out = run(&s, &wf.replace("usd: 0.03", "tokens: 200"), &[]);
    assert_code(&out, 1);
    let why = "budget: agent alice used 300 tokens, over its 200 token budget";
    assert!(stderr(&out).contains(why), "{}", stderr(&out));
    assert_eq!(count(&s, "alice"), 2);
}

#[test]
fn the_workflow_budget_key_stops_the_run() {
    let s = Setup::new();
    let out = run(&s, &ping_pong("budget: {usd: 0.05}\n"), &[]);
    assert_code(&out, 1);
    let why = "budget: $0.0600 spent, over the $0.05 budget";
    assert!(
        stderr(&out).contains(&format!("aw-run: {why}")),
        "{}",
        stderr(&out)
    );
    assert_eq!(system(&s), [format!("{why}; aw-run stops every agent.")]);
    assert_eq!(count(&s, "alice"), 3);
    let s = Setup::new();
    let out = run(&s, &ping_pong("budget: {tokens: 200}\n"), &[]);
    assert_code(&out, 1);
    let why = "budget: 300 tokens used, over the 200 token budget";
    assert!(stderr(&out).contains(why), "{}", stderr(&out));
    assert_eq!(count(&s, "alice"), 2);
}

#[test]
fn the_flags_override_the_budget_key_one_limit_at_a_time() {
    // The flag's USD limit replaces the file's; the file's token limit stays.
    let s = Setup::new();
    let wf = ping_pong("budget: {usd: 0.05, tokens: 100000}\n");
    let out = run(&s, &wf, &["--budget-usd", "0.03"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("budget: $0.0400 spent, over the $0.03 budget"),
        "{}",
        stderr(&out)
    );
    assert_eq!(count(&s, "alice"), 2);
    let s = Setup::new();
    let wf = ping_pong("budget: {usd: 100, tokens: 200}\n");
    let out = run(&s, &wf, &["--budget-tokens", "400"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("budget: 450 tokens used, over the 400 token budget"),
        "{}",
        stderr(&out)
    );
    assert_eq!(count(&s, "alice"), 3);
}

/// One run of alice on `model`, reporting `tokens` (YAML) and no cost.
fn one_run(model: &str, tokens: &str, extra: &str) -> String {
    format!(
        "agents:
  alice:
    model: {model}
    mock: {{replies: [done], usage: {tokens}}}
kickoff: '@alice go'
{extra}"
    )
}

#[test]
fn runs_without_a_cost_are_priced_by_the_model_and_the_pricing_key() {
    // One million input tokens and 100,000 output: $3 + $1.50 at the list price of sonnet.
    let tokens = "{input_tokens: 1000000, output_tokens: 100000}";
    let s = Setup::new();
    let out = run(&s, &one_run("sonnet", tokens, ""), &[]);
    assert_code(&out, 0);
    let usage = s.transcript("alice", 1)["usage"].clone();
    assert_eq!(usage["cost_usd"], 4.5, "{usage}");
    assert_eq!(runs_usage(&s), [usage]);
    // The workflow's price for input replaces the list price; output stays.
    let s = Setup::new();
    let pricing = "pricing:\n  claude-sonnet-4-5: {input: 6}\n";
    let out = run(&s, &one_run("anthropic/sonnet", tokens, pricing), &[]);
    assert_code(&out, 0);
    let usage = runs_usage(&s);
    assert_eq!(usage.len(), 1);
    assert_eq!(usage[0]["cost_usd"], 7.5, "{usage:?}");
    assert_eq!(usage[0]["input_tokens"], 1_000_000);
    // A cost the backend reports is kept as it is.
    let s = Setup::new();
    let reported = "{input_tokens: 1000000, cost_usd: 0.5}";
    let out = run(&s, &one_run("sonnet", reported, pricing), &[]);
    assert_code(&out, 0);
    assert_eq!(runs_usage(&s)[0]["cost_usd"], 0.5);
    // The priced cost counts against a USD budget.
    let s = Setup::new();
    let out = run(&s, &one_run("sonnet", tokens, ""), &["--budget-usd", "4"]);
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("budget: $4.5000 spent, over the $4 budget"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_model_with_no_known_price_has_no_cost_but_its_tokens_count() {
    let tokens = "{input_tokens: 100, output_tokens: 50}";
    let s = Setup::new();
    let out = run(
        &s,
        &one_run("mystery-model", tokens, ""),
        &["--budget-usd", "0.01"],
    );
    assert_code(&out, 0);
    let usage = runs_usage(&s);
    assert_eq!(
        usage,
        [serde_json::json!({"input_tokens": 100, "output_tokens": 50,
            "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": null})]
    );
    // A price for output only is not enough for a run that also used input.
    let s = Setup::new();
    let pricing = "pricing:\n  mystery-model: {output: 1}\n";
    let out = run(&s, &one_run("mystery-model", tokens, pricing), &[]);
    assert_code(&out, 0);
    assert_eq!(runs_usage(&s)[0]["cost_usd"], Value::Null);
    // The tokens still count against a token budget.
    let s = Setup::new();
    let out = run(
        &s,
        &one_run("mystery-model", tokens, ""),
        &["--budget-tokens", "100"],
    );
    assert_code(&out, 1);
    assert!(
        stderr(&out).contains("budget: 150 tokens used, over the 100 token budget"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_budget_flag_of_nothing_is_refused() {
    let s = Setup::new();
    for (flag, why) in [
        (
            "--budget-tokens",
            "--budget-tokens: expected a whole number of tokens above 0",
        ),
        ("--budget-usd", "--budget-usd: expected dollars above 0"),
    ] {
        let out = run(&s, &ping_pong(""), &[flag, "0"]);
        assert_code(&out, 64);
        assert_eq!(
            stderr(&out).lines().next().unwrap(),
            format!("aw-run: {why}")
        );
        assert!(!s.root.inst_dir(INST).exists());
    }
}

#[test]
fn the_summary_shows_what_each_agent_and_all_of_them_spent() {
    let wf = "agents:
  alice:
    mock:
      replies: ['@bob your turn']
      usage: {input_tokens: 100, output_tokens: 50, cost_usd: 0.02}
  bob:
    mock:
      replies: ['done']
      usage: {input_tokens: 10, output_tokens: 5, cost_usd: 0.001}
kickoff: '@alice go'
";
    let s = Setup::new();
    s.write("wf.yaml", wf);
    let out = run_hang_guarded(s.cmd(&[]));
    assert_code(&out, 0);
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.starts_with("aw-run: summary: "))
        .unwrap();
    assert!(line.contains("alice 1 run(s) 0 failure(s) "), "{line}");
    assert!(line.contains(" 150 tokens $0.0200"), "{line}");
    assert!(line.contains(" 15 tokens $0.0010"), "{line}");
    assert!(line.ends_with("; total 165 tokens $0.0210"), "{line}");

    let s = Setup::new();
    s.write("wf.yaml", wf);
    let out = run_hang_guarded(s.cmd(&["--json"]));
    assert_code(&out, 0);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["agents"]["bob"]["usage"]["input_tokens"], 10);
    assert_eq!(summary["usage"]["input_tokens"], 110);
    assert_eq!(summary["usage"]["output_tokens"], 55);
    assert!((summary["usage"]["cost_usd"].as_f64().unwrap() - 0.021).abs() < 1e-9);
}
