//! What an agent's backend may be: [`BackendKind`], the backend a model implies, and Claude
//! Code's [`PERMISSION_MODES`].

crate::keyword_enum! {
    /// How an agent is run: the one table of backend names.
    pub enum BackendKind {
        /// Claude Code CLI (`claude -p`).
        Claude = "claude",
        /// Codex CLI (`codex exec`).
        Codex = "codex",
        /// Anthropic Messages API.
        Anthropic = "anthropic",
        /// Any OpenAI-compatible Chat Completions endpoint.
        Openai = "openai",
        /// Any executable: prompt on stdin.
        Exec = "exec",
        /// Scripted replies, for tests and dry runs.
        Mock = "mock",
        /// Driven by a person or another program through aw-mcp or aw-send; never run by
        /// aw-run.
        External = "external",
    }
}

impl BackendKind {
    /// The backends a workflow file may name: all but `external`.
    pub const IN_WORKFLOWS: [BackendKind; 6] = [
        BackendKind::Claude,
        BackendKind::Codex,
        BackendKind::Anthropic,
        BackendKind::Openai,
        BackendKind::Exec,
        BackendKind::Mock,
    ];

    /// The model provider this backend serves, whose `PROVIDER/` prefix it takes off a
    /// model name.
    pub fn provider(self) -> Option<&'static str> {
        match self {
            BackendKind::Claude | BackendKind::Anthropic => Some("anthropic"),
            BackendKind::Codex | BackendKind::Openai => Some("openai"),
            BackendKind::Exec | BackendKind::Mock | BackendKind::External => None,
        }
    }

    /// The backend a model's `PROVIDER/` prefix chooses: the one named like the provider.
    pub fn for_provider(provider: &str) -> Option<BackendKind> {
        BackendKind::from_name(provider).filter(|b| b.provider() == Some(provider))
    }

    /// Does this backend need a `model`?
    pub fn needs_model(self) -> bool {
        matches!(self, BackendKind::Anthropic | BackendKind::Openai)
    }
}

/// Claude Code's permission modes (`--permission-mode`), which an agent of backend
/// `claude` may name in a workflow file. Without one, Claude Code's own default applies: in
/// print mode, a tool not allowed by name is denied.
pub const PERMISSION_MODES: [&str; 6] = [
    "default",
    "acceptEdits",
    "plan",
    "bypassPermissions",
    "dontAsk",
    "auto",
];

/// The backend a model implies, by how its name starts: a provider prefix
/// (`anthropic/...`, `openai/...`) or a model family. The first match wins; a model that
/// matches none (or no model) is `external`. A model of the table of known models comes
/// first (see [`backend_for_model`]).
const MODEL_BACKENDS: [(&str, BackendKind); 6] = [
    ("anthropic/", BackendKind::Anthropic),
    ("openai/", BackendKind::Openai),
    ("claude", BackendKind::Claude),
    ("gpt", BackendKind::Openai),
    ("o1", BackendKind::Openai),
    ("o3", BackendKind::Openai),
];

/// The backend a model implies: for a name or alias of the table of known models
/// ([`crate::models`]) without a prefix, `claude` for an Anthropic model (as in a
/// workflow file: Claude Code knows `sonnet`, `opus`, `haiku`) and `openai` for an OpenAI
/// one; else see [`MODEL_BACKENDS`].
pub fn backend_for_model(model: Option<&str>) -> BackendKind {
    let Some(m) = model else {
        return BackendKind::External;
    };
    if let Some(known) = crate::models::find(m) {
        return match known.provider {
            "anthropic" => BackendKind::Claude,
            _ => BackendKind::Openai,
        };
    }
    MODEL_BACKENDS
        .iter()
        .find(|(prefix, _)| m.starts_with(prefix))
        .map_or(BackendKind::External, |(_, backend)| *backend)
}
