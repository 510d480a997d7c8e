//! What an attempt leaves behind: its output as it comes (`_state/runs/<agent>/<n>.log`)
//! and its transcript (`<n>.json`), secrets redacted.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::error::Result;
use crate::fs::{atomic_write_private, atomic_write_private_unsynced};
use crate::inbox;
use crate::instance::Instance;
use crate::run::backend::RunOutcome;
use crate::run::redact::{redact, redact_cut};
use crate::transcript::transcript_dir;

/// Where one agent's attempts leave their logs and transcripts, and what they never show.
pub(super) struct Transcripts<'a> {
    pub inst: &'a Instance,
    pub agent: &'a str,
    /// Values that logs and transcripts never show.
    pub secrets: &'a [String],
}

/// One attempt, as its transcript tells it.
pub(super) struct Record<'a> {
    pub run: u64,
    pub attempt: u32,
    pub out: &'a RunOutcome,
    /// When it started.
    pub started: &'a str,
    pub duration: Duration,
    /// The inbox its prompt showed.
    pub msgs: &'a [inbox::InboxMessage],
    /// The entries the agent wrote during it.
    pub replies: &'a [u64],
    pub prompt: &'a str,
}

impl Transcripts<'_> {
    /// The log of the attempt under way (`_state/runs/<agent>/<n>.log`, `n` its
    /// transcript's number), when it can be created.
    pub(super) fn attempt_log(&self, n: u64) -> Option<Arc<crate::run::attempt_log::AttemptLog>> {
        let dir = transcript_dir(self.inst, self.agent);
        if let Err(e) = crate::fs::private_dir(&dir) {
            crate::warn::warn("aw-run", format!("{}: output not logged: {e}", self.agent));
            return None;
        }
        let path = crate::transcript::log_path(&dir, n);
        crate::run::attempt_log::AttemptLog::create(&path, self.secrets).map(Arc::new)
    }

    /// Write `_state/runs/<agent>/<n>.json` for the attempt `r`, with secrets redacted.
    pub(super) fn write(&self, n: u64, r: &Record) {
        let out = r.out;
        // Redacted before what was cut is told: no head of a secret is kept at a cut.
        let stdout = redact_cut(&out.stdout, self.secrets);
        let stderr = redact_cut(&out.stderr, self.secrets);
        let doc = json!({
            "agent": self.agent,
            "run": r.run,
            "attempt": r.attempt,
            "status": out.status.name(),
            "reason": out.reason,
            "exit_code": out.exit_code,
            "started": r.started,
            "duration_ms": r.duration.as_millis() as u64,
            "inbox": r.msgs.iter().map(|m| m.entry.id).collect::<Vec<_>>(),
            "reply": r.replies,
            "usage": out.usage,
            "command": out.command.iter().map(|a| redact(a, self.secrets)).collect::<Vec<_>>(),
            "stdout": stdout.text,
            "stdout_cut": stdout.cut,
            "stderr": stderr.text,
            "stderr_cut": stderr.cut,
            "prompt": redact(r.prompt, self.secrets),
            "server": {
                "host": crate::host::this().name,
                "host_id": crate::host::this().id,
                "pid": std::process::id(),
            },
        });
        let dir = transcript_dir(self.inst, self.agent);
        let path = dir.join(format!("{n}.json"));
        let write = || -> Result<()> {
            // Private from its first byte: a transcript holds prompts and outputs.
            crate::fs::private_dir(&dir)?;
            let text = serde_json::to_string_pretty(&doc).expect("json");
            // Flushed where the channel's appends are: elsewhere two flushes per attempt
            // (the file, its folder) would cost more than the attempt of a quick agent.
            if crate::channel::post::durable(self.inst) {
                atomic_write_private(&path, text.as_bytes())
            } else {
                atomic_write_private_unsynced(&path, text.as_bytes())
            }
        };
        if let Err(e) = write() {
            crate::warn::warn(
                "aw-run",
                format!("{}: transcript not written: {e}", self.agent),
            );
        }
    }
}
