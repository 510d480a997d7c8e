//! The `openai` backend: any OpenAI-compatible Chat Completions endpoint
//! (`POST {OPENAI_BASE_URL}/chat/completions`, `Authorization: Bearer`): OpenAI, vLLM,
//! llama.cpp's server, Ollama. The tool loop is [`super::api`]'s.
//!
//! `max_tokens` is sent as `max_completion_tokens` to OpenAI's own endpoint (its newer
//! models take only that) and as `max_tokens` to any other.

use serde_json::{Value, json};

use super::api::{
    Api, Call, DEFAULT_MAX_STEPS, Dialect, Finish, Settings, ToolDef, ToolResult, Turn, base_url,
    count, lookup, system_prompt,
};
use super::http::Client;
use crate::usage::Usage;

/// The base URL when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The endpoint under a base URL.
pub fn endpoint(base: &str) -> String {
    format!("{}/chat/completions", base.trim_end_matches('/'))
}

/// The endpoint and the key, from the agent's `env` or aw-run's environment
/// (`OPENAI_BASE_URL`, `OPENAI_API_KEY`); what is missing otherwise. A server of one's own
/// (`OPENAI_BASE_URL` set) may take no key.
pub fn credentials(env: &[(String, String)]) -> Result<(String, Option<String>), String> {
    let own = lookup(env, "OPENAI_BASE_URL").is_some();
    let url = base_url(env, "OPENAI_BASE_URL", DEFAULT_BASE_URL)?;
    let key = lookup(env, "OPENAI_API_KEY");
    if key.is_none() && !own {
        return Err("the openai backend needs OPENAI_API_KEY, or OPENAI_BASE_URL for a server that takes no key".into());
    }
    Ok((endpoint(&url), key))
}

/// The backend of one agent; `Err` names what is missing.
pub fn backend(s: Settings) -> Result<Api<OpenAi>, String> {
    let (url, key) = credentials(s.env)?;
    let files = s.sandbox()?;
    let official = url.starts_with(DEFAULT_BASE_URL);
    let headers = key
        .map(|k| vec![("authorization".to_string(), format!("Bearer {k}"))])
        .unwrap_or_default();
    Ok(Api {
        dialect: OpenAi {
            model: s.model,
            system: system_prompt(s.system.as_deref()),
            max_tokens: s.max_tokens,
            official,
        },
        client: Client::new("openai", url, headers, s.read_timeout),
        max_steps: s.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
        files,
        toolset: s.toolset,
        approve: s.approve,
    })
}

pub struct OpenAi {
    pub model: String,
    pub system: String,
    pub max_tokens: Option<u64>,
    /// Is the endpoint OpenAI's own?
    pub official: bool,
}

/// The fields of a Chat Completions answer that are read: the first choice's message (text,
/// refusal, tool calls) and finish reason, and the usage. The rest is skipped unread.
mod answer {
    use super::super::api::loose::{First, Loose};
    use serde::{Deserialize, Serialize};

    #[derive(Deserialize, Serialize)]
    pub struct Answer {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        choices: Loose<First<Loose<Choice>>>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        usage: Loose<Usage>,
    }

    #[derive(Deserialize, Serialize)]
    struct Choice {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        message: Loose<Message>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        finish_reason: Loose<String>,
    }

    #[derive(Deserialize, Serialize)]
    struct Message {
        /// Sent back as it came: null when it is not text.
        #[serde(default)]
        content: Loose<String>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        refusal: Loose<String>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        tool_calls: Loose<Vec<ToolCall>>,
    }

    #[derive(Deserialize, Serialize)]
    struct ToolCall {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        id: Loose<String>,
        #[serde(rename = "type", default, skip_serializing_if = "Loose::is_none")]
        kind: Loose<String>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        function: Loose<Function>,
    }

    #[derive(Deserialize, Serialize)]
    struct Function {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        name: Loose<String>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        arguments: Loose<String>,
    }

    #[derive(Deserialize, Serialize)]
    struct Usage {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        prompt_tokens: Loose<u64>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        completion_tokens: Loose<u64>,
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        prompt_tokens_details: Loose<Details>,
    }

    #[derive(Deserialize, Serialize)]
    struct Details {
        #[serde(default, skip_serializing_if = "Loose::is_none")]
        cached_tokens: Loose<u64>,
    }

    crate::loose_struct!(Choice);
    crate::loose_struct!(Message);
    crate::loose_struct!(ToolCall);
    crate::loose_struct!(Function);
    crate::loose_struct!(Usage);
    crate::loose_struct!(Details);
}

impl Dialect for OpenAi {
    fn provider(&self) -> &'static str {
        "openai"
    }

    fn parse(&self, body: &[u8]) -> Result<Value, String> {
        super::api::parse_answer::<answer::Answer>("openai", body)
    }

    fn start(&self, prompt: &str) -> Vec<Value> {
        vec![
            json!({"role": "system", "content": self.system}),
            json!({"role": "user", "content": prompt}),
        ]
    }

    fn body(&self, messages: &[Value], tools: &[ToolDef]) -> Value {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.schema}})
            })
            .collect();
        let mut body = json!({"model": self.model, "messages": messages, "tools": tools});
        if let Some(n) = self.max_tokens {
            let key = if self.official {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[key] = json!(n);
        }
        body
    }

    fn read(&self, answer: &Value) -> Result<Turn, String> {
        let choice = &answer["choices"][0];
        let message = &choice["message"];
        if !message.is_object() {
            return Err("openai: answer without a message".into());
        }
        let text = message["content"].as_str().unwrap_or("").to_string();
        let calls: Vec<Call> = message["tool_calls"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|c| {
                let f = &c["function"];
                let args = f["arguments"].as_str().unwrap_or("");
                Call {
                    id: c["id"].as_str().unwrap_or("").to_string(),
                    name: f["name"].as_str().unwrap_or("").to_string(),
                    input: if args.trim().is_empty() {
                        Ok(Default::default())
                    } else {
                        match serde_json::from_str::<Value>(args) {
                            Ok(Value::Object(m)) => Ok(m),
                            _ => Err("the tool arguments are not a JSON object".to_string()),
                        }
                    },
                }
            })
            .collect();
        let refused = message["refusal"].as_str().is_some_and(|r| !r.is_empty());
        let finish = match choice["finish_reason"].as_str() {
            _ if refused => Finish::Refusal,
            Some("length") => Finish::MaxTokens,
            Some("content_filter") => Finish::Refusal,
            // Some servers end a tool call with "stop" or no reason at all.
            _ if !calls.is_empty() => Finish::ToolUse,
            Some("stop") | None => Finish::EndTurn,
            Some("tool_calls") | Some("function_call") => Finish::ToolUse,
            Some(other) => Finish::Other(other.to_string()),
        };
        let u = &answer["usage"];
        let cached = count(&u["prompt_tokens_details"]["cached_tokens"]);
        let mut assistant = json!({"role": "assistant", "content": message["content"]});
        if !calls.is_empty() {
            assistant["tool_calls"] = message["tool_calls"].clone();
        }
        Ok(Turn {
            message: assistant,
            text,
            calls,
            finish,
            usage: Usage {
                input_tokens: count(&u["prompt_tokens"]).saturating_sub(cached),
                output_tokens: count(&u["completion_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
                cost_usd: None,
            },
        })
    }

    fn results(&self, results: Vec<ToolResult>) -> Vec<Value> {
        results
            .into_iter()
            .map(|r| json!({"role": "tool", "tool_call_id": r.id, "content": r.text}))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialect(official: bool) -> OpenAi {
        OpenAi {
            model: "gpt-x".into(),
            system: "be brief".into(),
            max_tokens: Some(50),
            official,
        }
    }

    #[test]
    fn tool_calls_and_usage_are_read() {
        let answer = json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "channel_send", "arguments": "{\"message\":\"hi\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "team_members", "arguments": ""}},
                {"id": "c3", "type": "function", "function": {"name": "x", "arguments": "[1]"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 60}}
        });
        let t = dialect(true).read(&answer).unwrap();
        assert_eq!(t.finish, Finish::ToolUse);
        assert_eq!(t.calls.len(), 3);
        assert_eq!(t.calls[0].input.as_ref().unwrap()["message"], "hi");
        assert!(t.calls[1].input.as_ref().unwrap().is_empty());
        assert!(t.calls[2].input.is_err());
        assert_eq!(
            (
                t.usage.input_tokens,
                t.usage.cache_read_tokens,
                t.usage.output_tokens
            ),
            (40, 60, 20)
        );
        assert_eq!(t.message["tool_calls"][0]["id"], "c1");
    }

    #[test]
    fn finish_reasons_are_named() {
        let read = |reason: Value, extra: Value| {
            let mut m = json!({"role": "assistant", "content": "x"});
            if let Value::Object(e) = extra {
                m.as_object_mut().unwrap().extend(e);
            }
            dialect(false)
                .read(&json!({"choices": [{"message": m, "finish_reason": reason}]}))
                .unwrap()
                .finish
        };
        assert_eq!(read(json!("stop"), json!({})), Finish::EndTurn);
        assert_eq!(read(json!("length"), json!({})), Finish::MaxTokens);
        assert_eq!(read(json!("content_filter"), json!({})), Finish::Refusal);
        assert_eq!(
            read(json!("stop"), json!({"refusal": "no"})),
            Finish::Refusal
        );
        assert_eq!(read(Value::Null, json!({})), Finish::EndTurn);
        let call =
            json!({"tool_calls": [{"id": "c", "function": {"name": "n", "arguments": "{}"}}]});
        assert_eq!(read(json!("stop"), call), Finish::ToolUse);
        assert!(dialect(false).read(&json!({"choices": []})).is_err());
    }

    #[test]
    fn an_answer_is_parsed_to_the_fields_read_and_no_more() {
        let d = dialect(false);
        let full = json!({
            "id": "x", "extra": [1, 2, {"deep": [3]}],
            "choices": [
                {"message": {"role": "assistant", "content": "hi", "audio": {"data": "..."},
                    "tool_calls": [{"id": "c1", "type": "function", "index": 0,
                        "function": {"name": "n", "arguments": "{}", "more": 1}}, 7]},
                 "finish_reason": "tool_calls", "logprobs": {"content": []}},
                {"message": {"content": "second"}}
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": -1, "total_tokens": 8}
        });
        let v = d.parse(full.to_string().as_bytes()).unwrap();
        assert_eq!(
            v,
            json!({
                "choices": [{"message": {"content": "hi", "tool_calls": [{"id": "c1",
                    "type": "function", "function": {"name": "n", "arguments": "{}"}}]},
                    "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 9}
            })
        );
        let t = d.read(&v).unwrap();
        assert_eq!((t.text.as_str(), t.calls.len()), ("hi", 1));
        assert_eq!(t.usage.output_tokens, 0);
        // Fields of an unexpected kind read as absent, as before.
        let odd = json!({"choices": [{"message": {"content": 5, "tool_calls": "no"},
            "finish_reason": ["stop"]}], "usage": "none"});
        let t = d
            .read(&d.parse(odd.to_string().as_bytes()).unwrap())
            .unwrap();
        assert_eq!((t.text.as_str(), t.calls.len()), ("", 0));
        assert_eq!(t.finish, Finish::EndTurn);
        assert!(d.read(&d.parse(b"{\"choices\": []}").unwrap()).is_err());
        assert!(
            d.parse(b"[1")
                .unwrap_err()
                .starts_with("openai: answer is not JSON")
        );
    }

    #[test]
    fn max_tokens_is_named_for_the_endpoint() {
        let b = dialect(true).body(&[], &[]);
        assert_eq!(b["max_completion_tokens"], 50);
        assert_eq!(b.get("max_tokens"), None);
        let b = dialect(false).body(&[], &[]);
        assert_eq!(b["max_tokens"], 50);
        let d = dialect(false);
        let m = d.start("hi");
        assert_eq!(m[0]["role"], "system");
        assert_eq!(m[1]["content"], "hi");
        let r = d.results(vec![ToolResult {
            id: "c1".into(),
            text: "ok".into(),
            is_error: false,
        }]);
        assert_eq!(
            r[0],
            json!({"role": "tool", "tool_call_id": "c1", "content": "ok"})
        );
    }
}
