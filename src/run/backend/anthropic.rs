//! The `anthropic` backend: the Messages API (`POST {ANTHROPIC_BASE_URL}/v1/messages`,
//! `x-api-key`, `anthropic-version`), with the tool loop of [`super::api`].
//!
//! The system prompt and the tool list are marked for prompt caching (they are the same on
//! every step of a run and on every run), so later steps read them from the cache.

use serde_json::{Map, Value, json};

use super::api::{
    Api, Call, DEFAULT_MAX_STEPS, Dialect, Finish, Settings, ToolDef, ToolResult, Turn, base_url,
    count, lookup, system_prompt,
};
use super::http::Client;
use crate::usage::Usage;

/// The API version sent in `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// The base URL when `ANTHROPIC_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// `max_tokens` of an answer when the agent sets none (the API needs one).
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// The endpoint under a base URL.
pub fn endpoint(base: &str) -> String {
    format!("{}/v1/messages", base.trim_end_matches('/'))
}

/// The endpoint and the key, from the agent's `env` or aw-run's environment
/// (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`); what is missing otherwise.
pub fn credentials(env: &[(String, String)]) -> Result<(String, String), String> {
    let url = base_url(env, "ANTHROPIC_BASE_URL", DEFAULT_BASE_URL)?;
    let key = lookup(env, "ANTHROPIC_API_KEY").ok_or(
        "the anthropic backend needs ANTHROPIC_API_KEY (in the environment or the agent's env)",
    )?;
    Ok((endpoint(&url), key))
}

/// The backend of one agent; `Err` names what is missing.
pub fn backend(s: Settings) -> Result<Api<Anthropic>, String> {
    let (url, key) = credentials(s.env)?;
    let files = s.sandbox()?;
    let headers = vec![
        ("x-api-key".to_string(), key),
        ("anthropic-version".to_string(), API_VERSION.to_string()),
    ];
    Ok(Api {
        dialect: Anthropic {
            model: s.model,
            system: system_prompt(s.system.as_deref()),
            max_tokens: s.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        },
        client: Client::new("anthropic", url, headers, s.read_timeout),
        max_steps: s.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
        files,
        toolset: s.toolset,
        approve: s.approve,
    })
}

pub struct Anthropic {
    pub model: String,
    pub system: String,
    pub max_tokens: u64,
}

/// The fields of a Messages answer that are read: the content (kept whole: it is sent back
/// as the assistant's turn), the stop reason and the usage. The rest is skipped unread.
mod answer {
    use super::super::api::loose::Loose;
    use serde::{Deserialize, Serialize};

    #[derive(Deserialize, Serialize)]
    pub struct Answer {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        content: Loose<Vec<serde_json::Value>>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        stop_reason: Loose<String>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        usage: Loose<Usage>,
    }

    #[derive(Deserialize, Serialize)]
    struct Usage {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        input_tokens: Loose<u64>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        output_tokens: Loose<u64>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        cache_read_input_tokens: Loose<u64>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        cache_creation_input_tokens: Loose<u64>,
    }

    crate::loose_struct!(Usage);
}

impl Dialect for Anthropic {
    fn provider(&self) -> &'static str {
        "anthropic"
    }

    fn parse(&self, body: &[u8]) -> Result<Value, String> {
        super::api::parse_answer::<answer::Answer>("anthropic", body)
    }

    fn start(&self, prompt: &str) -> Vec<Value> {
        vec![json!({"role": "user", "content": prompt})]
    }

    fn body(&self, messages: &[Value], tools: &[ToolDef]) -> Value {
        let mut tools: Vec<Value> = tools
            .iter()
            .map(
                |t| json!({"name": t.name, "description": t.description, "input_schema": t.schema}),
            )
            .collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [{"type": "text", "text": self.system, "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
            "tools": tools,
        })
    }

    fn read(&self, answer: &Value) -> Result<Turn, String> {
        let Some(content) = answer["content"].as_array() else {
            return Err("anthropic: answer without content".into());
        };
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in content {
            match block["type"].as_str() {
                Some("text") => text.push_str(block["text"].as_str().unwrap_or("")),
                Some("tool_use") => calls.push(Call {
                    id: block["id"].as_str().unwrap_or("").to_string(),
                    name: block["name"].as_str().unwrap_or("").to_string(),
                    input: match &block["input"] {
                        Value::Object(m) => Ok(m.clone()),
                        Value::Null => Ok(Map::new()),
                        _ => Err("the tool input is not an object".to_string()),
                    },
                }),
                _ => {}
            }
        }
        let finish = match answer["stop_reason"].as_str() {
            Some("end_turn") | Some("stop_sequence") => Finish::EndTurn,
            Some("tool_use") => Finish::ToolUse,
            Some("max_tokens") => Finish::MaxTokens,
            Some("pause_turn") => Finish::PauseTurn,
            Some("refusal") => Finish::Refusal,
            Some(other) => Finish::Other(other.to_string()),
            None => Finish::Other("none".into()),
        };
        let u = &answer["usage"];
        Ok(Turn {
            message: json!({"role": "assistant", "content": content}),
            text,
            calls,
            finish,
            usage: Usage {
                input_tokens: count(&u["input_tokens"]),
                output_tokens: count(&u["output_tokens"]),
                cache_read_tokens: count(&u["cache_read_input_tokens"]),
                cache_write_tokens: count(&u["cache_creation_input_tokens"]),
                cost_usd: None,
            },
        })
    }

    fn results(&self, results: Vec<ToolResult>) -> Vec<Value> {
        let content: Vec<Value> = results
            .into_iter()
            .map(|r| {
                json!({"type": "tool_result", "tool_use_id": r.id, "content": r.text, "is_error": r.is_error})
            })
            .collect();
        vec![json!({"role": "user", "content": content})]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialect() -> Anthropic {
        Anthropic {
            model: "claude-x".into(),
            system: "be brief".into(),
            max_tokens: 100,
        }
    }

    #[test]
    fn an_answer_with_text_and_tool_calls_is_read() {
        let answer = json!({
            "content": [
                {"type": "text", "text": "Posting."},
                {"type": "tool_use", "id": "tu_1", "name": "channel_send", "input": {"message": "@bob hi"}},
                {"type": "tool_use", "id": "tu_2", "name": "team_members", "input": "oops"}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3}
        });
        let t = dialect().read(&answer).unwrap();
        assert_eq!(t.text, "Posting.");
        assert_eq!(t.finish, Finish::ToolUse);
        assert_eq!(t.calls.len(), 2);
        assert_eq!(t.calls[0].input.as_ref().unwrap()["message"], "@bob hi");
        assert!(t.calls[1].input.is_err());
        assert_eq!(
            (
                t.usage.input_tokens,
                t.usage.output_tokens,
                t.usage.cache_read_tokens,
                t.usage.cache_write_tokens
            ),
            (10, 5, 7, 3)
        );
        assert_eq!(t.message["role"], "assistant");
        assert_eq!(t.message["content"][1]["id"], "tu_1");
    }

    #[test]
    fn an_answer_keeps_its_content_whole_and_skips_the_rest() {
        let d = dialect();
        let content = json!([{"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "tool_use", "id": "t", "name": "n", "input": {"a": [1, true, null, 1.5]}}]);
        let full = json!({"id": "m", "content": content, "stop_reason": "tool_use",
            "extra": {"big": [1, 2, 3]}, "usage": {"input_tokens": 3, "service_tier": "x"}});
        let v = d.parse(full.to_string().as_bytes()).unwrap();
        assert_eq!(
            v,
            json!({"content": content, "stop_reason": "tool_use", "usage": {"input_tokens": 3}})
        );
        let t = d.read(&v).unwrap();
        assert_eq!(t.message["content"], content);
        assert_eq!(t.calls[0].input.as_ref().unwrap()["a"][3], 1.5);
    }

    #[test]
    fn every_stop_reason_is_named() {
        for (reason, finish) in [
            ("end_turn", Finish::EndTurn),
            ("stop_sequence", Finish::EndTurn),
            ("max_tokens", Finish::MaxTokens),
            ("pause_turn", Finish::PauseTurn),
            ("refusal", Finish::Refusal),
            (
                "model_context_window_exceeded",
                Finish::Other("model_context_window_exceeded".into()),
            ),
        ] {
            let t = dialect()
                .read(&json!({"content": [], "stop_reason": reason}))
                .unwrap();
            assert_eq!(t.finish, finish, "{reason}");
        }
        assert!(dialect().read(&json!({"type": "message"})).is_err());
    }

    #[test]
    fn the_request_caches_the_system_prompt_and_the_tools() {
        let tools = vec![
            ToolDef {
                name: "a".into(),
                description: "A".into(),
                schema: json!({"type": "object"}),
            },
            ToolDef {
                name: "b".into(),
                description: "B".into(),
                schema: json!({"type": "object"}),
            },
        ];
        let d = dialect();
        let b = d.body(&d.start("hello"), &tools);
        assert_eq!(b["model"], "claude-x");
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["system"][0]["text"], "be brief");
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(b["tools"][0].get("cache_control"), None);
        assert_eq!(b["tools"][1]["cache_control"]["type"], "ephemeral");
        assert_eq!(b["tools"][1]["input_schema"]["type"], "object");
        assert_eq!(
            b["messages"][0],
            json!({"role": "user", "content": "hello"})
        );
        let r = d.results(vec![ToolResult {
            id: "tu_1".into(),
            text: "ok".into(),
            is_error: false,
        }]);
        assert_eq!(r[0]["content"][0]["tool_use_id"], "tu_1");
        assert_eq!(r[0]["content"][0]["type"], "tool_result");
    }
}
