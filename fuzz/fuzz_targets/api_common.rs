//! What the targets of the API answer readers share.

use aw::run::backend::api::{Dialect, ToolResult};
use serde_json::Value;

/// Read `body` as an answer of `dialect`, as the tool loop does, and check the turn.
pub fn check(dialect: &dyn Dialect, body: &[u8]) {
    // The HTTP client hands over bodies that parse as JSON; others fail before any reader.
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let Ok(turn) = dialect.read(&answer) else {
        return;
    };
    assert_eq!(turn.message["role"], "assistant", "{}", turn.message);
    let mut usage = aw::usage::Usage::default();
    usage.add(&turn.usage);
    usage.add(&turn.usage);
    let _ = usage.tokens();
    let results: Vec<ToolResult> = turn
        .calls
        .iter()
        .map(|c| {
            if let Err(why) = &c.input {
                assert!(!why.is_empty());
            }
            ToolResult {
                id: c.id.clone(),
                text: c.name.clone(),
                is_error: c.input.is_err(),
            }
        })
        .collect();
    let mut messages = dialect.start("prompt");
    messages.push(turn.message);
    messages.extend(dialect.results(results));
    let next = dialect.body(&messages, &[]);
    serde_json::to_vec(&next).expect("the next request serializes");
}
