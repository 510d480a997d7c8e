//! Workflow file tests: the spec's examples, every error kind at its line and column, warnings,
//! and golden cases (a file and the exact lines a check prints).

use std::fs;

use super::*;
use crate::tools::files::FileTool;

/// The variables a check sees: `HOME` in the environment, and `--var ticket=...`.
fn vars() -> Vars {
    let mut v = Vars::new();
    v.set_env([("HOME".to_string(), "/home/u".to_string())]);
    v.define("ticket=42").unwrap();
    v
}

/// The rendered problems of `text` read as `w.yaml` (none when it loads).
fn problems(text: &str) -> Vec<String> {
    match parse(text, Path::new("w.yaml"), &vars()) {
        Ok((_, warnings)) => warnings.iter().map(Diagnostic::render).collect(),
        Err(list) => list.iter().map(Diagnostic::render).collect(),
    }
}

/// `text` must load; the workflow and its rendered warnings.
fn loads(text: &str) -> (Workflow, Vec<String>) {
    match parse(text, Path::new("w.yaml"), &vars()) {
        Ok((w, warnings)) => (w, warnings.iter().map(Diagnostic::render).collect()),
        Err(list) => panic!("refused: {list:#?}"),
    }
}

/// The single problem of `text`.
fn problem(text: &str) -> String {
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    p.into_iter().next().unwrap()
}

const AGENT: &str = "agents:\n  alice: {}\n";

#[test]
fn spec_review_example() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("prompts")).unwrap();
    fs::write(
        dir.path().join("prompts/reviewer.md"),
        "You review. Workflow ${{ workflow.name }}.\n",
    )
    .unwrap();
    fs::write(dir.path().join("prompts/coder.md"), "You fix.\n").unwrap();
    let file = dir.path().join("review.yaml");
    fs::write(
        &file,
        "# review.yaml
name: code-review

# Context is enabled by default - no config needed

agents:
  reviewer:
    model: anthropic/claude-sonnet-4-5
    system_prompt: prompts/reviewer.md

  coder:
    model: anthropic/claude-sonnet-4-5
    system_prompt: prompts/coder.md

# Optional: shell commands for setup
setup:
  - shell: gh pr diff
    as: diff

# Kickoff message - triggers workflow via @mention
kickoff: |
  PR diff:
  ${{ diff }}

  @reviewer please review these changes.
  When issues found, @coder to fix them.
",
    )
    .unwrap();
    let (w, warnings) = load(&file, &vars()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(w.name.value, "code-review");
    assert_eq!(w.dir, dir.path());
    assert_eq!(w.agent_names().collect::<Vec<_>>(), ["reviewer", "coder"]);
    let reviewer = w.agent("reviewer").unwrap();
    assert_eq!(reviewer.backend.value, BackendKind::Anthropic);
    assert_eq!(reviewer.backend.pos, Pos::new(8, 12));
    assert_eq!(reviewer.model_name(), Some("claude-sonnet-4-5"));
    let prompt = reviewer.system_prompt.as_ref().unwrap();
    assert_eq!(
        prompt.file.as_deref(),
        Some(dir.path().join("prompts/reviewer.md").as_path())
    );
    let mut v = vars();
    v.set("workflow.name", "code-review");
    assert_eq!(
        prompt.template.render(&v).unwrap(),
        "You review. Workflow code-review.\n"
    );
    assert_eq!(w.context, Context::default());
    assert_eq!(w.setup.len(), 1);
    assert_eq!(w.setup[0].output.as_ref().unwrap().value, "diff");
    v.set("diff", "+ a line");
    let kickoff = w.kickoff.as_ref().unwrap().render(&v).unwrap();
    assert!(
        kickoff.starts_with("PR diff:\n+ a line\n\n@reviewer please"),
        "{kickoff}"
    );
}

#[test]
fn v2_agent_fields() {
    let (w, _) = loads(
        "name: review
agents:
  reviewer:
    model: anthropic/claude-sonnet-4-5
    tools:
      - read_file
      - search
    max_tokens: 4096
    max_steps: 10
  generator:
    backend: openai
    model: meta-llama/Llama-3-8B
    system_prompt: |
      You generate changesets in the standard format.
      Be concise and accurate.
    timeout: 5m
    max_runs: 3
    cwd: work
    env: {PORT: 8080, TOKEN: '${{ env.HOME }}/t'}
    reply_fallback: false
",
    );
    let r = &w.agents[0];
    assert_eq!(
        r.tools.iter().map(|t| t.value.as_str()).collect::<Vec<_>>(),
        ["read_file", "search"]
    );
    assert_eq!(r.max_tokens.as_ref().unwrap().value, 4096);
    assert_eq!(r.max_steps.as_ref().unwrap().value, 10);
    assert!(r.reply_fallback);
    let g = &w.agents[1];
    assert_eq!(g.backend.value, BackendKind::Openai);
    assert_eq!(g.model_name(), Some("meta-llama/Llama-3-8B"));
    let prompt = g.system_prompt.as_ref().unwrap();
    assert!(prompt.file.is_none());
    assert_eq!(
        prompt.template.text(),
        "You generate changesets in the standard format.\nBe concise and accurate.\n"
    );
    assert_eq!(g.timeout.as_ref().unwrap().value, Duration::from_secs(300));
    assert_eq!(g.max_runs.as_ref().unwrap().value, 3);
    assert_eq!(g.cwd.as_ref().unwrap().value, Path::new("./work"));
    let env: Vec<(&str, &str)> = g
        .env
        .iter()
        .map(|(k, v)| (k.value.as_str(), v.text()))
        .collect();
    assert_eq!(env, [("PORT", "8080"), ("TOKEN", "${{ env.HOME }}/t")]);
    assert!(!g.reply_fallback);
}

#[test]
fn defaults() {
    let (w, warnings) = loads("agents:\n  alice:\n");
    assert!(warnings.is_empty());
    assert_eq!(w.name.value, "w");
    assert_eq!(w.dir, Path::new("."));
    let a = &w.agents[0];
    assert_eq!(a.backend, Spanned::new(BackendKind::Claude, Pos::new(2, 3)));
    assert!(a.model.is_none() && a.system_prompt.is_none() && a.command.is_none());
    assert!(a.reply_fallback);
    assert!(w.context.has_files());
    assert!(w.setup.is_empty() && w.kickoff.is_none());
}

#[test]
fn backend_choice() {
    let backend = |def: &str| {
        let (w, _) = loads(&format!("agents:\n  a: {def}\n"));
        let a = &w.agents[0];
        (a.backend.value, a.model_name().map(str::to_string))
    };
    let some = |s: &str| Some(s.to_string());
    assert_eq!(backend("{}"), (BackendKind::Claude, None));
    assert_eq!(
        backend("{model: sonnet}"),
        (BackendKind::Claude, some("sonnet"))
    );
    assert_eq!(
        backend("{model: anthropic/x}"),
        (BackendKind::Anthropic, some("x"))
    );
    assert_eq!(
        backend("{model: openai/gpt-5}"),
        (BackendKind::Openai, some("gpt-5"))
    );
    assert_eq!(
        backend("{backend: claude, model: anthropic/x}"),
        (BackendKind::Claude, some("x"))
    );
    assert_eq!(
        backend("{backend: codex, model: openai/o3}"),
        (BackendKind::Codex, some("o3"))
    );
    assert_eq!(
        backend("{backend: codex, model: anthropic/x}"),
        (BackendKind::Codex, some("anthropic/x"))
    );
    assert_eq!(
        backend("{mock: {replies: [hi]}}"),
        (BackendKind::Mock, None)
    );
    assert_eq!(backend("{mock: }"), (BackendKind::Mock, None));
    assert_eq!(backend("{command: [./bot]}"), (BackendKind::Exec, None));
    assert_eq!(
        backend("{command: [./bot], model: anthropic/x}"),
        (BackendKind::Exec, some("anthropic/x"))
    );
    for b in BackendKind::IN_WORKFLOWS {
        let name = b.name();
        assert_eq!(BackendKind::from_name(name).unwrap().name(), name);
    }
}

#[test]
fn agent_parts() {
    let (w, _) = loads(
        "agents:
  bot:
    command: [./bot.sh, '${{ workflow.instance }}', two words]
  m:
    mock: {replies: [one, two], fail: 2, delay: 1.5}
",
    );
    let args: Vec<&str> = w.agents[0]
        .command
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| t.text())
        .collect();
    assert_eq!(args, ["./bot.sh", "${{ workflow.instance }}", "two words"]);
    let mock = w.agents[1].mock.as_ref().unwrap();
    assert_eq!(
        mock.replies
            .iter()
            .map(|r| r.value.as_str())
            .collect::<Vec<_>>(),
        ["one", "two"]
    );
    assert_eq!(mock.fail, 2);
    assert_eq!(mock.delay, Some(Duration::from_millis(1500)));
}

#[test]
fn yaml_syntax_errors_carry_the_parsers_position() {
    // A bracket never closed is blamed where it opens, not where the parser gave up.
    let p = problem("agents:\n  alice: [1, 2\nkickoff: x\n");
    assert!(p.starts_with("w.yaml:2:10: "), "{p}");
    assert!(
        p.contains(": invalid YAML: this '[' is never closed (at 3:"),
        "{p}"
    );
    assert_eq!(
        problem("a: 1\n---\nb: 2\n"),
        "w.yaml:2:1: more than one YAML document"
    );
    assert_eq!(problem(""), "w.yaml:1:1: empty workflow file: no agents");
    assert_eq!(
        problem("- a\n"),
        "w.yaml:1:1: expected a mapping, found a list"
    );
}

#[test]
fn unknown_keys_suggest_the_near_ones() {
    assert_eq!(
        problems("agent:\n  alice: {}\n"),
        [
            "w.yaml:1:1: unknown key 'agent' (did you mean 'agents'?)",
            "w.yaml:1:1: no agents: define at least one under 'agents:'",
        ]
    );
    assert_eq!(
        problem("agents:\n  a:\n    system-prompt: hi\n"),
        "w.yaml:3:5: agents.a: unknown key 'system-prompt' (did you mean 'system_prompt'?)"
    );
    assert_eq!(
        problem("agents:\n  a:\n    colour: red\n"),
        "w.yaml:3:5: agents.a: unknown key 'colour'"
    );
    assert_eq!(
        problem(&format!("{AGENT}setup:\n  - shell: x\n    ass: y\n")),
        "w.yaml:5:5: setup[0]: unknown key 'ass' (did you mean 'as'?)"
    );
}

#[test]
fn merge_keys_are_refused_plainly() {
    assert_eq!(
        problem("agents:\n  a: &base {model: x}\n  b: {<<: *base, max_runs: 2}\n"),
        "w.yaml:3:7: agents.b: merge keys ('<<') are not supported: write the keys out"
    );
}

#[test]
fn builtins_for_a_run() {
    let (w, _) = loads(&format!(
        "name: demo\n{AGENT}kickoff: ${{{{ workflow.name }}}}@${{{{ workflow.instance }}}} ${{{{ context.channel }}}}\n"
    ));
    let mut v = Vars::new();
    w.set_builtins(
        &mut v,
        "pr-1",
        Some((
            Path::new("/r/pr-1/channel.md"),
            Path::new("/r/pr-1/documents/notes.md"),
        )),
    );
    assert_eq!(
        v.get("context.document"),
        Some("/r/pr-1/documents/notes.md")
    );
    let kickoff = w.kickoff.as_ref().unwrap().render(&v).unwrap();
    assert_eq!(kickoff, "demo@pr-1 /r/pr-1/channel.md");
}

#[test]
fn wrong_types_name_both_types() {
    assert_eq!(
        problem("agents:\n  alice:\n    max_runs: three\n"),
        "w.yaml:3:15: agents.alice.max_runs: expected a whole number, found a string"
    );
    assert_eq!(
        problem("agents:\n  alice:\n    model: 4\n"),
        "w.yaml:3:12: agents.alice.model: expected a string, found a whole number (quote it to make it one)"
    );
    assert_eq!(
        problem("agents:\n  alice:\n    tools: read\n"),
        "w.yaml:3:12: agents.alice.tools: expected a list, found a string"
    );
    assert_eq!(
        problem("agents:\n  alice:\n    reply_fallback: 'no'\n"),
        "w.yaml:3:21: agents.alice.reply_fallback: expected true or false, found a string"
    );
    assert_eq!(
        problem("agents:\n  alice:\n    max_steps: 0\n"),
        "w.yaml:3:16: agents.alice.max_steps: must be at least 1"
    );
    assert_eq!(
        problem("name: ''\nagents: {a: }\n"),
        "w.yaml:1:7: name: must not be empty"
    );
    assert_eq!(
        problem("agents: [alice]\n"),
        "w.yaml:1:9: agents: expected a mapping, found a list"
    );
}

#[test]
fn timeouts() {
    let timeout = |v: &str| problems(&format!("agents:\n  a:\n    timeout: {v}\n"));
    assert!(timeout("90").is_empty());
    assert!(timeout("'90s'").is_empty());
    assert!(timeout("1h").is_empty());
    assert_eq!(
        timeout("0"),
        ["w.yaml:3:14: agents.a.timeout: must be more than zero"]
    );
    assert_eq!(
        timeout("soon"),
        [
            "w.yaml:3:14: agents.a.timeout: invalid duration 'soon': expected seconds, or a number with s, m or h (90s, 5m, 1h)"
        ]
    );
    assert_eq!(
        timeout("[1]"),
        [
            "w.yaml:3:14: agents.a.timeout: expected a duration (90, \"90s\", \"5m\", \"1h\"), found a list"
        ]
    );
}

#[test]
fn idle_timeouts() {
    let (w, _) = loads(
        "agents:
  a: {idle_timeout: 90}
  b: {backend: codex, idle_timeout: 5m}
  c: {command: [./bot], idle_timeout: '1.5s'}
  d: {}
",
    );
    let idle = |i: usize| w.agents[i].idle_timeout.as_ref().map(|t| (t.value, t.pos));
    assert_eq!(idle(0), Some((Duration::from_secs(90), Pos::new(2, 21))));
    assert_eq!(idle(1).unwrap().0, Duration::from_secs(300));
    assert_eq!(idle(2).unwrap().0, Duration::from_millis(1500));
    assert_eq!(idle(3), None);
    let one = |v: &str| problems(&format!("agents:\n  a:\n    idle_timeout: {v}\n"));
    assert_eq!(
        one("0"),
        ["w.yaml:3:19: agents.a.idle_timeout: must be more than zero"]
    );
    assert_eq!(
        one("later"),
        [
            "w.yaml:3:19: agents.a.idle_timeout: invalid duration 'later': expected seconds, or a number with s, m or h (90s, 5m, 1h)"
        ]
    );
    assert_eq!(
        one("{m: 1}"),
        [
            "w.yaml:3:19: agents.a.idle_timeout: expected a duration (90, \"90s\", \"5m\", \"1h\"), found a mapping"
        ]
    );
    assert_eq!(
        problem("agents:\n  a:\n    mock: {}\n    idle_timeout: 1m\n"),
        "w.yaml:4:5: agents.a.idle_timeout: only for backends that wait on a program or a service (this agent's is mock)"
    );
}

#[test]
fn permission_modes() {
    // Every mode the error message below lists is taken.
    for mode in crate::registry::PERMISSION_MODES {
        let (w, _) = loads(&format!("agents:\n  a:\n    permission_mode: {mode}\n"));
        let m = w.agents[0].permission_mode.as_ref().unwrap();
        assert_eq!((m.value.as_str(), m.pos), (mode, Pos::new(3, 22)));
    }
    let (w, _) = loads(AGENT);
    assert_eq!(w.agents[0].permission_mode, None, "none unless written");
    let expected = "expected one of: default, acceptEdits, plan, bypassPermissions, dontAsk, auto";
    assert_eq!(
        problem("agents:\n  a:\n    permission_mode: acceptedits\n"),
        format!(
            "w.yaml:3:22: agents.a.permission_mode: unknown permission mode 'acceptedits' \
             (did you mean 'acceptEdits'?); {expected}"
        )
    );
    assert_eq!(
        problem("agents:\n  a:\n    permission_mode: yolo\n"),
        format!(
            "w.yaml:3:22: agents.a.permission_mode: unknown permission mode 'yolo'; {expected}"
        )
    );
    assert_eq!(
        problem("agents:\n  a:\n    permission_mode: [plan]\n"),
        "w.yaml:3:22: agents.a.permission_mode: expected a string, found a list"
    );
    assert_eq!(
        problem("agents:\n  a:\n    backend: codex\n    permission_mode: plan\n"),
        "w.yaml:4:5: agents.a.permission_mode: only for backend claude (this agent's is codex)"
    );
    assert_eq!(
        problem("agents:\n  a:\n    command: [./bot]\n    permission_mode: plan\n"),
        "w.yaml:4:5: agents.a.permission_mode: only for backend claude (this agent's is exec)"
    );
    assert_eq!(
        problem("agents:\n  a:\n    permision_mode: plan\n"),
        "w.yaml:3:5: agents.a: unknown key 'permision_mode' (did you mean 'permission_mode'?)"
    );
}

#[test]
fn backend_errors() {
    assert_eq!(
        problem("agents:\n  a:\n    backend: claud\n"),
        "w.yaml:3:14: agents.a.backend: unknown backend 'claud' (did you mean 'claude'?); \
         expected one of: claude, codex, anthropic, openai, exec, mock"
    );
    assert_eq!(
        problem("agents:\n  a:\n    model: google/gemini\n"),
        "w.yaml:3:12: agents.a.model: unknown model provider 'google' (known: anthropic, openai); \
         name the backend to use this model"
    );
    assert_eq!(
        problem("agents:\n  a:\n    backend: exec\n"),
        "w.yaml:2:3: agents.a: backend exec needs a command (an argument list)"
    );
    assert_eq!(
        problem("agents:\n  a:\n    backend: anthropic\n"),
        "w.yaml:2:3: agents.a: backend anthropic needs a model"
    );
    assert_eq!(
        problem("agents:\n  a:\n    backend: claude\n    command: [x]\n"),
        "w.yaml:4:5: agents.a.command: only for backend exec (this agent's is claude)"
    );
    assert_eq!(
        problem("agents:\n  a:\n    command: [x]\n    mock: {}\n"),
        "w.yaml:2:3: agents.a: both mock and command given: name the backend"
    );
    assert_eq!(
        problem("agents:\n  a:\n    command: ./bot --fast\n"),
        "w.yaml:3:14: agents.a.command: expected a list of arguments, found a string \
         (no shell is implied); write [\"sh\", \"-c\", \"...\"] to run one"
    );
    assert_eq!(
        problem("agents:\n  a:\n    command: []\n"),
        "w.yaml:3:14: agents.a.command: must name a program"
    );
    assert_eq!(
        problem("agents:\n  a:\n    mock: {replies: [x], fails: 1}\n"),
        "w.yaml:3:26: agents.a.mock: unknown key 'fails' (did you mean 'fail'?)"
    );
}

#[test]
fn tools_by_backend() {
    let (w, warnings) = loads(
        "agents:
  api:
    model: openai/gpt-5
    tools: [read_file, list_files, search, write_file]
  cc:
    tools: [Read, 'Bash(git diff:*)', Read]
  none:
    model: anthropic/x
    tools: []
",
    );
    assert!(warnings.is_empty());
    let names = |a: &AgentDef| a.tools.iter().map(|t| t.value.clone()).collect::<Vec<_>>();
    assert_eq!(names(&w.agents[0]), FileTool::NAMES);
    assert_eq!(names(&w.agents[1]), ["Read", "Bash(git diff:*)", "Read"]);
    assert!(w.agents[2].tools.is_empty());
    assert_eq!(
        problems(
            "agents:\n  a:\n    model: anthropic/x\n    tools: [read_file, serch, read_file, Read]\n"
        ),
        [
            "w.yaml:4:24: agents.a.tools[1]: unknown tool 'serch' (did you mean 'search'?); \
             the anthropic backend offers: read_file, list_files, search, write_file",
            "w.yaml:4:31: agents.a.tools[2]: duplicate tool 'read_file' (first at line 4)",
            "w.yaml:4:42: agents.a.tools[3]: unknown tool 'Read'; \
             the anthropic backend offers: read_file, list_files, search, write_file",
        ]
    );
    assert_eq!(
        problem("agents:\n  a:\n    model: openai/o3\n    tools:\n      - ReadFile\n"),
        "w.yaml:5:9: agents.a.tools[0]: unknown tool 'ReadFile' (did you mean 'read_file'?); \
         the openai backend offers: read_file, list_files, search, write_file"
    );
    for (def, backend) in [
        ("backend: codex", "codex"),
        ("command: [./bot]", "exec"),
        ("mock: {replies: [hi]}", "mock"),
    ] {
        assert_eq!(
            problem(&format!("agents:\n  a:\n    {def}\n    tools: []\n")),
            format!(
                "w.yaml:4:5: agents.a.tools: only for the claude, anthropic and openai backends \
                 (this agent's is {backend})"
            )
        );
    }
}

#[test]
fn api_backends_get_full_model_ids_and_clis_the_name_as_written() {
    let name = |def: &str| {
        let (w, _) = loads(&format!("agents:\n  a: {def}\n"));
        w.agents[0].model_name().map(str::to_string)
    };
    let some = |s: &str| Some(s.to_string());
    // The APIs need the full id: aliases resolve.
    assert_eq!(name("{model: anthropic/sonnet}"), some("claude-sonnet-4-5"));
    assert_eq!(
        name("{backend: anthropic, model: haiku}"),
        some("claude-haiku-4-5")
    );
    assert_eq!(name("{model: anthropic/opus}"), some("claude-opus-4-5"));
    assert_eq!(
        name("{model: anthropic/claude-opus-4-1-20250805}"),
        some("claude-opus-4-1")
    );
    assert_eq!(name("{model: openai/gpt-4o}"), some("gpt-4o"));
    assert_eq!(name("{model: openai/my-model}"), some("my-model"));
    // An alias of another provider's model, or another prefix, stays as written.
    assert_eq!(name("{backend: openai, model: sonnet}"), some("sonnet"));
    assert_eq!(
        name("{backend: anthropic, model: openai/gpt-4o}"),
        some("openai/gpt-4o")
    );
    // Claude Code knows its aliases; Codex gets the name as written.
    assert_eq!(name("{model: sonnet}"), some("sonnet"));
    assert_eq!(
        name("{backend: claude, model: anthropic/opus}"),
        some("opus")
    );
    assert_eq!(name("{backend: codex, model: gpt-5}"), some("gpt-5"));
    assert_eq!(
        name("{backend: codex, model: openai/gpt-5-codex}"),
        some("gpt-5-codex")
    );
}

#[test]
fn budgets_pricing_and_mock_usage() {
    let (w, warnings) = loads(
        "agents:
  reviewer:
    model: sonnet
    budget: {usd: 0.5, tokens: 20000}
  coder:
    mock:
      usage: {input_tokens: 100, output_tokens: 20, cache_read_tokens: 5, cost_usd: 0.25}
budget: {usd: 2}
pricing:
  sonnet: {input: 6, cache_write: 0}
  meta-llama/Llama-3-8B: {input: 0.1, output: 0.2}
",
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        w.budget,
        Budget {
            usd: Some(2.0),
            tokens: None
        }
    );
    let reviewer = &w.agents[0];
    assert_eq!(
        reviewer.budget,
        Budget {
            usd: Some(0.5),
            tokens: Some(20000)
        }
    );
    assert_eq!(
        reviewer.price(&w.pricing),
        Some(Price {
            input: Some(6.0),
            output: Some(15.0),
            cache_read: Some(0.3),
            cache_write: Some(0.0),
        })
    );
    let coder = &w.agents[1];
    assert_eq!(coder.budget, Budget::default());
    assert_eq!(coder.price(&w.pricing), None);
    assert_eq!(
        coder.mock.as_ref().unwrap().usage,
        Some(Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 5,
            cache_write_tokens: 0,
            cost_usd: Some(0.25),
        })
    );
    let llama = w.pricing.price("meta-llama/Llama-3-8B").unwrap();
    assert_eq!(
        (llama.input, llama.output, llama.cache_read),
        (Some(0.1), Some(0.2), None)
    );
    // Without the keys: no budget, the table's prices.
    let (w, _) = loads("agents:\n  a: {model: openai/gpt-4o}\n");
    assert_eq!(w.budget, Budget::default());
    assert_eq!(w.agents[0].budget, Budget::default());
    assert_eq!(
        w.agents[0].price(&w.pricing),
        Some(models::find("gpt-4o").unwrap().price)
    );
    assert_eq!(
        w.agents[0].price(&Pricing::default()).unwrap().input,
        Some(2.5)
    );
}

#[test]
fn budget_and_pricing_errors() {
    assert_eq!(
        problem(&format!("{AGENT}budget: {{usd: 0}}\n")),
        "w.yaml:3:15: budget.usd: must be more than 0"
    );
    assert_eq!(
        problem(&format!("{AGENT}budget: {{usd: '1'}}\n")),
        "w.yaml:3:15: budget.usd: expected a number, found a string"
    );
    assert_eq!(
        problem(&format!("{AGENT}budget: {{usd: .inf}}\n")),
        "w.yaml:3:15: budget.usd: must be a finite number"
    );
    assert_eq!(
        problem(&format!("{AGENT}budget: {{tokens: 0}}\n")),
        "w.yaml:3:18: budget.tokens: must be at least 1"
    );
    assert_eq!(
        problem(&format!("{AGENT}budget: {{dollars: 1}}\n")),
        "w.yaml:3:10: budget: unknown key 'dollars'"
    );
    assert_eq!(
        problem(&format!("{AGENT}budget: 5\n")),
        "w.yaml:3:9: budget: expected a mapping, found a whole number"
    );
    assert_eq!(
        problem(&format!("{AGENT}budgets: {{usd: 1}}\n")),
        "w.yaml:3:1: unknown key 'budgets' (did you mean 'budget'?)"
    );
    assert_eq!(
        problem("agents:\n  a:\n    budget: {usd: -1}\n"),
        "w.yaml:3:19: agents.a.budget.usd: must be more than 0"
    );
    assert_eq!(
        problem("agents:\n  a:\n    budget: {token: 5}\n"),
        "w.yaml:3:14: agents.a.budget: unknown key 'token' (did you mean 'tokens'?)"
    );
    assert_eq!(
        problem(&format!("{AGENT}pricing:\n  sonnet: {{input: -1}}\n")),
        "w.yaml:4:19: pricing.sonnet.input: must be at least 0"
    );
    assert_eq!(
        problem(&format!("{AGENT}pricing:\n  sonnet: {{inptu: 1}}\n")),
        "w.yaml:4:12: pricing.sonnet: unknown key 'inptu' (did you mean 'input'?)"
    );
    assert_eq!(
        problem(&format!("{AGENT}pricing:\n  sonnet: {{}}\n")),
        "w.yaml:4:11: pricing.sonnet: no price given; expected input, output, cache_read, cache_write"
    );
    assert_eq!(
        problem(&format!("{AGENT}pricing:\n  sonnet: 3\n")),
        "w.yaml:4:11: pricing.sonnet: expected a mapping, found a whole number"
    );
    assert_eq!(
        problem(&format!("{AGENT}pricing: [sonnet]\n")),
        "w.yaml:3:10: pricing: expected a mapping, found a list"
    );
    assert_eq!(
        problem(&format!(
            "{AGENT}pricing:\n  claude-sonnet-4-5: {{input: 1}}\n  anthropic/sonnet: {{input: 2}}\n"
        )),
        "w.yaml:5:3: pricing: 'anthropic/sonnet' is the same model as 'claude-sonnet-4-5' \
         (line 4): give its prices once"
    );
    assert_eq!(
        problem("agents:\n  a:\n    mock: {usage: {input_tokens: -1}}\n"),
        "w.yaml:3:34: agents.a.mock.usage.input_tokens: must be at least 0"
    );
    assert_eq!(
        problem("agents:\n  a:\n    mock: {usage: {cost_uds: 1}}\n"),
        "w.yaml:3:20: agents.a.mock.usage: unknown key 'cost_uds' (did you mean 'cost_usd'?)"
    );
}

#[test]
fn a_bad_backend_does_not_hide_other_problems() {
    assert_eq!(
        problems("agents:\n  a:\n    backend: gpt\n    max_runs: x\n    mock: {}\n"),
        [
            "w.yaml:3:14: agents.a.backend: unknown backend 'gpt'; expected one of: claude, codex, anthropic, openai, exec, mock",
            "w.yaml:4:15: agents.a.max_runs: expected a whole number, found a string",
        ]
    );
}

#[test]
fn agent_names() {
    assert_eq!(
        problem("agents:\n  alice: {}\n  b.c: {}\n"),
        "w.yaml:3:3: agents: invalid agent name 'b.c': expected [A-Za-z][A-Za-z0-9_-]*, at most 64 characters"
    );
    assert_eq!(
        problem("agents:\n  user: {}\n"),
        "w.yaml:2:3: agents: 'user' is reserved for a sender that is not an agent"
    );
    assert_eq!(
        problem("agents:\n  system:\n"),
        "w.yaml:2:3: agents: 'system' is reserved for a sender that is not an agent"
    );
    assert_eq!(
        problem("agents:\n  a: {}\n  a: {}\n"),
        "w.yaml:3:3: agents: duplicate key 'a' (first at line 2)"
    );
}

#[test]
fn no_agents() {
    assert_eq!(
        problem("name: x\n"),
        "w.yaml:1:1: no agents: define at least one under 'agents:'"
    );
    assert_eq!(
        problem("agents: {}\n"),
        "w.yaml:1:1: agents: no agents: define at least one"
    );
    assert_eq!(
        problem("name: x\nagents:\n"),
        "w.yaml:2:1: agents: no agents: define at least one"
    );
}

#[test]
fn undefined_variables() {
    assert_eq!(
        problem(&format!("{AGENT}kickoff: 'Review ${{{{ dif }}}}'\n")),
        "w.yaml:3:18: kickoff: undefined variable 'dif'"
    );
    assert_eq!(
        problem(&format!(
            "{AGENT}setup:\n  - shell: x\n    as: diff\nkickoff: |\n  see\n  ${{{{ dif }}}}\n"
        )),
        "w.yaml:8:3: kickoff: undefined variable 'dif' (did you mean 'diff'?)"
    );
    assert_eq!(
        problem(&format!("{AGENT}kickoff: ${{{{ env.NOPE }}}}\n")),
        "w.yaml:3:10: kickoff: undefined variable 'env.NOPE': NOPE is not set in the environment"
    );
    assert_eq!(
        problem(&format!("{AGENT}kickoff: \"${{{{ workflow.nam }}}}\"\n")),
        "w.yaml:3:11: kickoff: undefined variable 'workflow.nam' (did you mean 'workflow.name'?)"
    );
    assert_eq!(
        problem(&format!(
            "{AGENT}context: false\nkickoff: ${{{{ context.channel }}}}\n"
        )),
        "w.yaml:4:10: kickoff: undefined variable 'context.channel': the workflow has no file context"
    );
    assert_eq!(
        problem(&format!("{AGENT}kickoff: '${{{{ diff'\n")),
        "w.yaml:3:11: kickoff: '${{' without a closing '}}'"
    );
}

#[test]
fn variables_that_are_defined() {
    let (w, _) = loads(&format!(
        "{AGENT}setup:
  - shell: git diff
    as: diff
  - shell: echo \"${{{{ diff }}}}\" | wc -l
    as: lines
kickoff: '${{{{ diff }}}} ${{{{ lines }}}} ${{{{ ticket }}}} ${{{{ env.HOME }}}} ${{{{ workflow.name }}}}
  ${{{{ workflow.instance }}}} ${{{{ context.channel }}}} ${{{{ context.document }}}}'
"
    ));
    assert_eq!(w.setup.len(), 2);
    assert_eq!(w.kickoff.unwrap().vars().count(), 8);
}

#[test]
fn setup_outputs_are_defined_only_after_their_task() {
    let text = format!(
        "{AGENT}setup:
  - shell: echo ${{{{ later }}}} ${{{{ itself }}}}
    as: itself
  - shell: echo
    as: later
"
    );
    assert_eq!(
        problems(&text),
        [
            "w.yaml:4:17: setup[0].shell: undefined variable 'later': the setup task at line 7 sets it later",
            "w.yaml:4:30: setup[0].shell: undefined variable 'itself': the setup task at line 5 sets it later",
        ]
    );
}

#[test]
fn setup_errors() {
    assert_eq!(
        problem(&format!("{AGENT}setup:\n  - shell: x\n    as: workflow\n")),
        "w.yaml:5:9: setup[0].as: 'workflow' is reserved (it names the workflow.* variables)"
    );
    assert_eq!(
        problem(&format!("{AGENT}setup:\n  - shell: x\n    as: my.out\n")),
        "w.yaml:5:9: setup[0].as: invalid variable name 'my.out': expected [A-Za-z_][A-Za-z0-9_-]*"
    );
    assert_eq!(
        problem(&format!("{AGENT}setup:\n  - gh pr diff\n")),
        "w.yaml:4:5: setup[0]: expected a mapping like {shell: COMMAND, as: NAME}, found a string"
    );
    assert_eq!(
        problem(&format!("{AGENT}setup:\n  - as: x\n")),
        "w.yaml:4:5: setup[0]: missing 'shell:'"
    );
    assert_eq!(
        problem(&format!(
            "{AGENT}setup:\n  - shell: echo \\${{{{ ticket }}}}\n"
        )),
        "w.yaml:4:18: setup[0].shell: '${{ ticket }}' follows a backslash that would escape its \
         expansion; remove the backslash"
    );
}

#[test]
fn tasks_are_read() {
    let (w, warnings) = loads(
        "agents:\n  rev: {mock: {}}\n  gen: {mock: {}}\ntasks:\n  - shell: git diff\n    as: diff\n  \
         - send: \"Review ${{ diff }}\"\n    to: rev\n    as: review\n    timeout: 2m\n  \
         - if: review contains 'LGTM'\n    send: ok\n    to: gen\n  \
         - parallel:\n      - {send: a, to: rev, as: a}\n      - {shell: echo, as: b}\n  \
         - shell: echo ${{ a }}${{ b }}\n    as: review\n",
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(w.tasks.len(), 5);
    assert_eq!(w.tasks[0].describe(), "shell: git diff");
    assert!(
        matches!(&w.tasks[1].kind, TaskKind::Send { to, timeout, .. }
        if to.value == "rev" && *timeout == Some(Duration::from_secs(120)))
    );
    assert_eq!(
        w.tasks[2].when.as_ref().unwrap().text(),
        "review contains 'LGTM'"
    );
    let TaskKind::Parallel(group) = &w.tasks[3].kind else {
        panic!()
    };
    assert_eq!(group.len(), 2);
    let outs: Vec<&str> = w.tasks[3]
        .outputs()
        .iter()
        .map(|o| o.value.as_str())
        .collect();
    assert_eq!(outs, ["a", "b"]);
    // A later task may set a variable again.
    assert_eq!(w.tasks[4].output.as_ref().unwrap().value, "review");
}

#[test]
fn task_errors() {
    let tasks = |t: &str| problem(&format!("{AGENT}tasks:\n{t}"));
    assert_eq!(
        tasks("  - send: hi\n    to: alcie\n"),
        "w.yaml:5:9: tasks[0].to: 'alcie' is not an agent of this workflow (did you mean 'alice'?)"
    );
    assert_eq!(
        tasks("  - send: hi\n"),
        "w.yaml:4:5: tasks[0]: a send task needs 'to: AGENT'"
    );
    assert_eq!(
        tasks("  - if: x == 'a' &&\n    shell: echo\n"),
        "w.yaml:4:20: tasks[0].if: expected a value, found the end of the expression"
    );
    assert_eq!(
        tasks("  - if: \"x = 'é'\"\n    shell: echo\n"),
        "w.yaml:4:12: tasks[0].if: unexpected '=' (did you mean '=='?)"
    );
    assert_eq!(
        tasks("  - if: ok && ${{ ticket }}\n    shell: echo\n    as: ok\n"),
        "w.yaml:4:9: tasks[0].if: undefined variable 'ok': the task at line 6 sets it later"
    );
    assert_eq!(
        tasks("  - parallel:\n      - {shell: a, as: x}\n      - shell: echo ${{ x }}\n"),
        "w.yaml:6:21: tasks[0].parallel[1].shell: undefined variable 'x': the task at line 5 sets it later"
    );
    assert_eq!(
        tasks("  - parallel:\n      - {shell: a, as: x}\n      - {shell: b, as: x}\n"),
        "w.yaml:6:24: tasks[0].parallel: 'x' is also set by the task at line 5: tasks of one group \
         run at the same time, give each its own name"
    );
    assert!(
        tasks("  - parallel:\n      - parallel:\n          - shell: a\n")
            .contains("a parallel group inside a parallel group is not supported")
    );
    assert_eq!(
        tasks("  - shell: a\n    send: b\n"),
        "w.yaml:5:5: tasks[0]: one task does one thing; found shell and send"
    );
    assert_eq!(
        tasks("  - as: x\n"),
        "w.yaml:4:5: tasks[0]: expected one of 'shell:', 'send:' or 'parallel:'"
    );
    // The kickoff runs before the tasks: it does not see their outputs.
    assert_eq!(
        problem(&format!(
            "{AGENT}kickoff: ${{{{ x }}}}\ntasks:\n  - {{shell: a, as: x}}\n"
        )),
        "w.yaml:3:10: kickoff: undefined variable 'x': the task at line 5 sets it later"
    );
}

#[test]
fn system_prompts_inline_and_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.yaml");
    let check = |text: &str| -> Vec<String> {
        fs::write(&file, text).unwrap();
        match load(&file, &vars()) {
            Ok((_, w)) => w.iter().map(|d| d.render()).collect(),
            Err(LoadError::Invalid(list)) => list.iter().map(|d| d.render()).collect(),
            Err(e) => panic!("{e}"),
        }
    };
    let f = file.display().to_string();
    let p = dir.path().join("p.md").display().to_string();
    assert_eq!(
        check("agents:\n  a:\n    system_prompt: p.md\n"),
        [format!(
            "{f}:3:20: agents.a.system_prompt: cannot read the prompt file: {p}: no such file"
        )]
    );
    fs::write(dir.path().join("p.md"), "line one\nuse ${{ nope }} here\n").unwrap();
    assert_eq!(
        check("agents:\n  a:\n    system_prompt: p.md\n"),
        [format!(
            "{p}:2:5: agents.a.system_prompt: undefined variable 'nope'"
        )]
    );
    // Blanks inside, more than one line, or another ending: inline text.
    assert!(check("agents:\n  a:\n    system_prompt: read p.md\n").is_empty());
    assert!(check("agents:\n  a:\n    system_prompt: p.yaml\n").is_empty());
    assert!(check("agents:\n  a:\n    system_prompt: \"see\\np.md\"\n").is_empty());
    assert_eq!(
        check("agents:\n  a:\n    system_prompt: Be ${{ brief }}\n"),
        [format!(
            "{f}:3:23: agents.a.system_prompt: undefined variable 'brief'"
        )]
    );
    assert!(names_prompt_file(" prompts/r.txt "));
    assert!(!names_prompt_file("prompts/r.yaml"));
}

#[test]
fn context_variants() {
    let ctx = |c: &str| {
        loads(&format!("agents: {{alice: , bob: }}\ncontext: {c}\n"))
            .0
            .context
    };
    assert_eq!(ctx("~"), Context::default());
    assert_eq!(ctx("false"), Context::Disabled);
    assert_eq!(ctx("{provider: file}"), Context::default());
    assert_eq!(
        ctx("{provider: memory}"),
        Context::Memory {
            document_owner: None
        }
    );
    assert_eq!(
        ctx("{provider: memory, documentOwner: bob}"),
        Context::Memory {
            document_owner: Some(Spanned::new(
                DocumentOwner::Agent("bob".into()),
                Pos::new(2, 44)
            ))
        }
    );
    assert_eq!(
        ctx("{documentOwner: election}")
            .document_owner()
            .unwrap()
            .value,
        DocumentOwner::Election
    );
    let Context::File { config, .. } = ctx(
        "\n  provider: file\n  config:\n    dir: ./my-context/\n    channel: channel.md\n    document: ws/workspace.md",
    ) else {
        panic!()
    };
    assert_eq!(config.dir.unwrap().text(), "./my-context/");
    assert_eq!(config.channel.unwrap().value, "channel.md");
    assert_eq!(config.document.unwrap().value, "ws/workspace.md");
}

#[test]
fn context_errors() {
    let err = |c: &str| problems(&format!("agents: {{alice: }}\ncontext: {c}\n"));
    assert_eq!(
        err("true"),
        [
            "w.yaml:2:10: context: expected false or a mapping, found true (leave context out for the default)"
        ]
    );
    assert_eq!(
        err("file"),
        ["w.yaml:2:10: context: expected false or a mapping, found a string"]
    );
    assert_eq!(
        err("{provider: files}"),
        [
            "w.yaml:2:21: context.provider: unknown provider 'files' (did you mean 'file'?); expected file or memory"
        ]
    );
    assert_eq!(
        err("{documentOwner: alcie}"),
        [
            "w.yaml:2:26: context.documentOwner: 'alcie' is not an agent of this workflow (did you mean 'alice'?) (or write election)"
        ]
    );
    assert_eq!(
        err("{document_owner: alice}"),
        ["w.yaml:2:11: context: unknown key 'document_owner' (did you mean 'documentOwner'?)"]
    );
    assert_eq!(
        err("{provider: memory, config: {dir: x}}"),
        ["w.yaml:2:29: context.config: only for provider file"]
    );
    assert_eq!(
        err("{config: {dri: x}}"),
        ["w.yaml:2:20: context.config: unknown key 'dri' (did you mean 'dir'?)"]
    );
    assert_eq!(
        err("{config: {channel: a/b.md}}"),
        ["w.yaml:2:29: context.config.channel: must be a file name, without '/'"]
    );
    assert_eq!(
        err("{config: {channel: discussion.md}}"),
        [
            "w.yaml:2:29: context.config.channel: aw keeps the channel in channel.md; no other name is supported"
        ]
    );
    assert_eq!(
        err("{config: {document: ../x.md}}"),
        ["w.yaml:2:30: context.config.document: must not have empty, '.' or '..' components"]
    );
    // The directory is set before setup runs; the spec's `${{ instance }}` is not a variable.
    assert_eq!(
        err("{config: {dir: '.workflow/${{ instance }}/'}}"),
        ["w.yaml:2:36: context.config.dir: undefined variable 'instance'"]
    );
}

#[test]
fn env_errors() {
    assert_eq!(
        problems("agents:\n  a:\n    env: {AW_AGENT: x, 1A: y, OK: [z], N: }\n"),
        [
            "w.yaml:3:11: agents.a.env: 'AW_AGENT' is reserved: aw sets the AW_* variables",
            "w.yaml:3:24: agents.a.env: invalid variable name '1A': expected [A-Za-z_][A-Za-z0-9_]*",
            "w.yaml:3:35: agents.a.env.OK: expected a string, found a list",
            "w.yaml:3:41: agents.a.env.N: expected a string, found nothing (null)",
        ]
    );
}

#[test]
fn kickoff_mentions_of_strangers_are_warnings() {
    let (_, warnings) = loads(
        "agents: {reviewer: , coder: }
kickoff: |
  @reviewer look; @revewer, @coder
  and @nobody, mail me@example.com, @user @system
",
    );
    assert_eq!(
        warnings,
        [
            "w.yaml:3:19: warning: kickoff: @revewer is not an agent of this workflow (did you mean 'reviewer'?)",
            "w.yaml:4:7: warning: kickoff: @nobody is not an agent of this workflow",
        ]
    );
}

#[test]
fn all_problems_at_once_in_order() {
    let text = "name: demo
agents:
  alice:
    modle: x
    max_runs: many
  user: {}
context: {documentOwner: carol}
setup:
  - shell: echo ${{ missing }}
    as: env
kickoff: hi @bob ${{ nope }}
extra: 1
";
    assert_eq!(
        problems(text),
        [
            "w.yaml:4:5: agents.alice: unknown key 'modle' (did you mean 'model'?)",
            "w.yaml:5:15: agents.alice.max_runs: expected a whole number, found a string",
            "w.yaml:6:3: agents: 'user' is reserved for a sender that is not an agent",
            "w.yaml:7:26: context.documentOwner: 'carol' is not an agent of this workflow (or write election)",
            "w.yaml:9:17: setup[0].shell: undefined variable 'missing'",
            "w.yaml:10:9: setup[0].as: 'env' is reserved (it names the env.* variables)",
            "w.yaml:11:13: warning: kickoff: @bob is not an agent of this workflow",
            "w.yaml:11:18: kickoff: undefined variable 'nope'",
            "w.yaml:12:1: unknown key 'extra'",
        ]
    );
}

#[test]
fn reading_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = load(&dir.path().join("none.yaml"), &vars()).unwrap_err();
    assert_eq!(missing.exit_code(), crate::error::exit::NOINPUT);
    assert!(
        missing.to_string().ends_with("none.yaml: no such file"),
        "{missing}"
    );
    let bad = dir.path().join("bad.yaml");
    fs::write(&bad, b"agents:\n  a: \xff\n").unwrap();
    let err = load(&bad, &vars()).unwrap_err();
    assert_eq!(err.exit_code(), crate::error::exit::DATAERR);
    assert_eq!(
        err.to_string(),
        format!("{}:2:6: not valid UTF-8", bad.display())
    );
    let big = dir.path().join("big.yaml");
    fs::write(&big, "#".repeat(MAX_FILE as usize + 1)).unwrap();
    let err = load(&big, &vars()).unwrap_err();
    assert_eq!(err.exit_code(), crate::error::exit::DATAERR);
    assert!(err.to_string().contains("larger than"), "{err}");
    let good = dir.path().join("good.yaml");
    fs::write(&good, AGENT).unwrap();
    assert!(check(&good, &vars()).unwrap().is_empty());
}

/// What checking a golden case gives: when it loads, each agent's backend and model, then
/// every diagnostic, one per line.
fn golden_output(text: &str, path: &Path) -> String {
    let (mut lines, list) = match parse(text, path, &vars()) {
        Ok((w, warnings)) => {
            let agents = w.agents.iter().map(|a| {
                let model = a.model_name().unwrap_or("-");
                format!("agent {}: {} {model}", a.name.value, a.backend.name())
            });
            (agents.collect::<Vec<_>>(), warnings)
        }
        Err(list) => (Vec::new(), list),
    };
    lines.extend(list.iter().map(Diagnostic::render));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Each `golden/NAME.yaml` gives what `golden/NAME.out` holds. `AW_BLESS=1` rewrites the
/// `.out` files from the current output instead.
#[test]
fn golden_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/run/workflow/golden");
    let mut cases: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 5,
        "golden cases missing in {}",
        dir.display()
    );
    let bless = std::env::var_os("AW_BLESS").is_some();
    for case in cases {
        let name = case.file_name().unwrap();
        let got = golden_output(&fs::read_to_string(&case).unwrap(), Path::new(name));
        let out = case.with_extension("out");
        if bless {
            fs::write(&out, &got).unwrap();
        } else {
            let want = fs::read_to_string(&out).unwrap_or_default();
            assert_eq!(got, want, "{} (AW_BLESS=1 rewrites it)", out.display());
        }
    }
}

#[test]
fn board_cards_wait_for_cards_named_or_by_position_and_are_seeded_after_them() {
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/run/workflow/golden/board-ok.yaml"),
    )
    .unwrap();
    let (w, warnings) = loads(&text);
    assert!(warnings.is_empty(), "{warnings:?}");
    let titles: Vec<&str> = w.board.iter().map(|c| c.title.value.as_str()).collect();
    assert_eq!(
        titles,
        ["Write the docs", "Write the code", "Plan the work"]
    );
    assert_eq!(w.board[0].after, [1, 2]);
    assert_eq!(w.board[1].body, "In src/.\n");
    assert_eq!(w.board[0].assignee[0].value, "worker");
    let pool: Vec<&str> = w.board[1]
        .assignee
        .iter()
        .map(|a| a.value.as_str())
        .collect();
    assert_eq!(pool, ["lead", "worker"], "a card for a pool");
    assert_eq!(w.board[0].labels[0].value, "docs");
    assert_eq!(seeding_order(&w.board), [1, 2, 0]);
    // A card that waits for itself is a cycle too.
    let p = problem(&format!("{AGENT}board:\n  - {{title: a, after: [0]}}\n"));
    assert_eq!(
        p,
        "w.yaml:4:5: board[0].after: the cards wait for each other: 0 -> 0"
    );
}

#[test]
fn needs_approval_is_read_with_its_approvers_time_and_then() {
    use crate::approval::Then;
    let (w, warnings) = loads(&format!(
        "{AGENT}tasks:\n  - shell: ./deploy.sh\n    needs: approval\n  \
         - shell: ./release.sh\n    needs: {{approval: {{by: [user, lead], timeout: 1h, then: ops, replies: true}}}}\n  \
         - shell: ./tag.sh\n    needs: {{approval: {{by: lead}}}}\n"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    let gate = |i: usize| w.tasks[i].needs.as_ref().unwrap().value.clone();
    assert_eq!(gate(0), Gate::default());
    assert_eq!(gate(0).by, ["user"]);
    let g = gate(1);
    assert_eq!(g.by, ["user", "lead"]);
    assert_eq!(g.timeout, Some(std::time::Duration::from_secs(3600)));
    assert_eq!(g.then, Then::Escalate("ops".into()));
    assert!(g.replies);
    assert_eq!(gate(2).by, ["lead"]);

    let tasks = |t: &str| problem(&format!("{AGENT}tasks:\n{t}"));
    assert_eq!(
        tasks("  - shell: x\n    needs: approvals\n"),
        "w.yaml:5:12: tasks[0].needs: expected 'approval' or {approval: {by, timeout, then}}, \
         found 'approvals'"
    );
    assert_eq!(
        tasks("  - shell: x\n    needs: {approval: {then: skip}}\n"),
        "w.yaml:5:30: tasks[0].needs.approval.then: needs a timeout: it says what happens when \
         it runs out"
    );
    assert_eq!(
        tasks("  - shell: x\n    needs: {approval: {by: [9x]}}\n"),
        "w.yaml:5:29: tasks[0].needs.approval.by: invalid agent name '9x': expected \
         [A-Za-z][A-Za-z0-9_-]*, at most 64 characters"
    );
    assert_eq!(
        tasks("  - shell: x\n    needs: {approval: {who: me}}\n"),
        "w.yaml:5:24: tasks[0].needs.approval: unknown key 'who'"
    );
    assert_eq!(
        tasks("  - parallel:\n      - shell: x\n    needs: approval\n"),
        "w.yaml:6:5: tasks[0].needs: not on a parallel group: put it on its tasks"
    );
}

#[test]
fn merge_is_read_with_its_target_method_verify_and_approval() {
    use crate::approval::Then;
    use crate::merge::{Config, How, Needs};
    let (w, warnings) = loads(&format!(
        "{AGENT}merge: {{into: trunk, how: merge, verify: make test, timeout: 10m, \
         needs: {{approval: {{by: [lead], timeout: 1h, then: skip}}}}}}\n"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        w.merge.unwrap().value,
        Config {
            into: "trunk".into(),
            how: How::Merge,
            verify: Some("make test".into()),
            timeout: 600,
            needs: Some(Needs {
                by: vec!["lead".into()],
                timeout: Some(3600),
                then: Then::Skip,
                replies: false,
            }),
            wait: false,
        }
    );
    // Every key optional: the defaults, and aw-run posting the result (the tool then does
    // not wait unless told).
    let (w, _) = loads(&format!("{AGENT}merge: {{needs: approval, wait: true}}\n"));
    let c = w.merge.unwrap().value;
    assert_eq!(
        (c.into.as_str(), c.how, c.verify, c.wait),
        ("main", How::Rebase, None, true)
    );
    assert_eq!(c.needs.unwrap().by, ["user"]);
    assert!(loads(AGENT).0.merge.is_none());

    let merge = |m: &str| problem(&format!("{AGENT}merge: {m}\n"));
    assert_eq!(
        merge("{how: squash}"),
        "w.yaml:3:14: merge.how: expected rebase or merge, found 'squash'"
    );
    assert_eq!(
        merge("{into: 'a b'}"),
        "w.yaml:3:15: merge.into: target branch 'a b': not a branch name"
    );
    assert_eq!(
        merge("{verify: ''}"),
        "w.yaml:3:17: merge.verify: must not be empty"
    );
    assert_eq!(
        merge("{timeout: 5m}"),
        "w.yaml:3:9: merge.timeout: the time of the verify command: name it (verify: COMMAND)"
    );
    assert_eq!(
        merge("{verify: x, timeout: soon}"),
        "w.yaml:3:29: merge.timeout: invalid duration 'soon': expected seconds, or a number \
         with s, m or h (90s, 5m, 1h)"
    );
    assert_eq!(
        merge("{needs: approvals}"),
        "w.yaml:3:16: merge.needs: expected 'approval' or {approval: {by, timeout, then}}, \
         found 'approvals'"
    );
    assert_eq!(
        merge("{needs: {approval: {then: fail}}}"),
        "w.yaml:3:34: merge.needs.approval.then: needs a timeout: it says what happens when \
         it runs out"
    );
    assert_eq!(
        merge("{wait: maybe}"),
        "w.yaml:3:15: merge.wait: expected true or false, found a string"
    );
    assert_eq!(
        merge("{verfy: make}"),
        "w.yaml:3:9: merge: unknown key 'verfy' (did you mean 'verify'?)"
    );
    assert!(
        merge("make test").starts_with("w.yaml:3:8: merge: "),
        "{}",
        merge("make test")
    );
}

#[test]
fn approve_tools_names_the_writes_that_wait_and_who_approves() {
    use crate::approval::Then;
    const API: &str = "agents:\n  a:\n    model: anthropic/x\n    tools: [write_file]\n";
    let (w, warnings) = loads(&format!(
        "{API}    approve_tools: {{write_outside: ['src/**', docs/], by: [lead], timeout: 1h, \
         then: skip}}\n"
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    let g = w.agents[0].approve_tools.clone().unwrap().value;
    assert_eq!(
        g.writes,
        Writes::Outside(vec!["src/**".into(), "docs/".into()])
    );
    assert_eq!(g.gate.by, ["lead"]);
    assert_eq!(g.gate.timeout, Some(std::time::Duration::from_secs(3600)));
    assert_eq!(g.gate.then, Then::Skip);
    let (w, _) = loads(&format!("{API}    approve_tools: {{write_file: true}}\n"));
    let g = w.agents[0].approve_tools.clone().unwrap().value;
    assert_eq!((g.writes, g.gate), (Writes::All, Gate::default()));

    let gate = |t: &str| problem(&format!("{API}    approve_tools: {t}\n"));
    assert_eq!(
        gate("{by: lead}"),
        "w.yaml:5:20: agents.a.approve_tools: name the calls that wait: write_file: true, or \
         write_outside: GLOBS"
    );
    assert_eq!(
        gate("{write_file: true, write_outside: src/}"),
        "w.yaml:5:39: agents.a.approve_tools.write_outside: write_file: true asks for every \
         write already: give one of the two"
    );
    assert_eq!(
        gate("{write_file: false}"),
        "w.yaml:5:33: agents.a.approve_tools.write_file: expected true (leave the key out for \
         no approval)"
    );
    assert_eq!(
        gate("{write_outside: '[src'}"),
        "w.yaml:5:36: agents.a.approve_tools.write_outside: glob \"[src\": has a [ that is never closed"
    );
    assert_eq!(
        gate("{write_file: true, then: fail}"),
        "w.yaml:5:45: agents.a.approve_tools.then: needs a timeout: it says what happens when \
         it runs out"
    );
    assert_eq!(
        gate("{write_file: true, shell: true}"),
        "w.yaml:5:39: agents.a.approve_tools: unknown key 'shell'"
    );
    assert_eq!(
        problem("agents:\n  a:\n    model: anthropic/x\n    approve_tools: {write_file: true}\n"),
        "w.yaml:4:20: agents.a.approve_tools: the agent has no write_file tool to approve \
         (tools: [write_file])"
    );
    assert_eq!(
        problem("agents:\n  a:\n    tools: [Edit]\n    approve_tools: {write_file: true}\n"),
        "w.yaml:4:20: agents.a.approve_tools: only for backends anthropic and openai, whose \
         tool calls aw runs (this agent's is claude; Claude Code and Codex have their own \
         permissions: permission_mode, tools)"
    );
}
