//! JSON over HTTPS for the API backends: one POST, retried while the service says to wait.
//!
//! - 429, 529 and 5xx answers and failed connections are retried with exponential backoff
//!   ([`FIRST_BACKOFF`], doubling, at most [`MAX_BACKOFF`]), waiting what a `retry-after`
//!   (seconds or an HTTP date) or `retry-after-ms` header asks instead when there is one; at
//!   most [`MAX_RETRIES`] retries and [`MAX_TOTAL_WAIT`] of waiting per call. A wait longer
//!   than what is left fails at once.
//! - Any other 4xx fails at once with the service's own message.
//! - Every read has a timeout (the agent's idle timeout): a service that stops sending fails
//!   the call as a timeout, which is not retried here (the controller's run retries decide).
//! - The request runs on a thread of its own so that a stop (SIGTERM, a budget) is seen at
//!   once; an abandoned request ends with its timeout or with the process.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Stop;

/// First wait before a retry without `retry-after`.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Longest wait between two attempts without `retry-after`.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Most retries of one call.
pub const MAX_RETRIES: u32 = 6;
/// Most waiting between the attempts of one call.
pub const MAX_TOTAL_WAIT: Duration = Duration::from_secs(120);
/// Time to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read, in bytes.
pub const MAX_BODY: u64 = 32 << 20;

/// Why a call gave no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The service stopped sending for the read timeout.
    Timeout(String),
    /// The stop flag was set while waiting.
    Stopped,
    /// Anything else, in a few words (the service's message for a 4xx).
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout(m) | CallError::Failed(m) => f.write_str(m),
            CallError::Stopped => f.write_str("stopped"),
        }
    }
}

/// One JSON POST endpoint.
pub struct Client {
    agent: ureq::Agent,
    pub url: String,
    headers: Vec<(String, String)>,
    /// How the service is named in messages (`anthropic`, `openai`).
    pub service: &'static str,
}

/// One attempt's result: the status, its `retry-after` wait, and the body.
struct Answer {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

impl Client {
    /// `headers` go with every request (besides the content type); `read_timeout` bounds
    /// every read.
    pub fn new(
        service: &'static str,
        url: String,
        headers: Vec<(String, String)>,
        read_timeout: Duration,
    ) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_per_read(Some(read_timeout))
            .timeout_per_write(Some(read_timeout))
            .user_agent(format!("aw/{}", crate::VERSION))
            .build()
            .new_agent();
        Client {
            agent,
            url,
            headers,
            service,
        }
    }

    /// POST `body`, retrying as the module says; the answer's JSON. Past `deadline` (the
    /// run's timeout) the call ends as a timeout. `retries` counts the retries made.
    pub fn post(
        &self,
        body: &Value,
        stop: &Stop,
        deadline: Option<Instant>,
        retries: &mut u32,
    ) -> Result<Value, CallError> {
        let text = body.to_string();
        let mut backoff = FIRST_BACKOFF;
        let mut waited = Duration::ZERO;
        loop {
            let attempt = self.attempt(&text, stop, deadline);
            let (why, asked) = match attempt {
                Err(Attempt::Stopped) => return Err(CallError::Stopped),
                Err(Attempt::Deadline) => return Err(past_deadline()),
                Err(Attempt::Timeout(e)) => {
                    return Err(CallError::Timeout(format!(
                        "{}: no answer within the read timeout ({e})",
                        self.service
                    )));
                }
                Err(Attempt::Transport(e)) => (format!("{}: {e}", self.service), None),
                Err(Attempt::Fatal(e)) => {
                    return Err(CallError::Failed(format!("{}: {e}", self.service)));
                }
                Ok(a) if (200..300).contains(&a.status) => {
                    return serde_json::from_str(&a.body).map_err(|e| {
                        CallError::Failed(format!("{}: answer is not JSON: {e}", self.service))
                    });
                }
                Ok(a) if retryable(a.status) => {
                    (self.status_message(a.status, &a.body), a.retry_after)
                }
                Ok(a) => return Err(CallError::Failed(self.status_message(a.status, &a.body))),
            };
            let wait = asked.unwrap_or(backoff);
            if *retries >= MAX_RETRIES {
                return Err(CallError::Failed(format!(
                    "{why} (gave up after {MAX_RETRIES} retries)"
                )));
            }
            if waited + wait > MAX_TOTAL_WAIT {
                return Err(CallError::Failed(format!(
                    "{why} (a wait of {:.1}s would pass the {}s allowed)",
                    wait.as_secs_f64(),
                    MAX_TOTAL_WAIT.as_secs()
                )));
            }
            if deadline.is_some_and(|d| Instant::now() + wait >= d) {
                return Err(past_deadline());
            }
            if !stop.sleep(wait) {
                return Err(CallError::Stopped);
            }
            waited += wait;
            *retries += 1;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// "anthropic: 400: messages: field required" from an error answer.
    fn status_message(&self, status: u16, body: &str) -> String {
        let msg = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| error_message(&v))
            .unwrap_or_else(|| first_line(body));
        format!("{}: HTTP {status}: {msg}", self.service)
    }

    /// One request on its own thread, waited for while watching `stop`.
    fn attempt(
        &self,
        body: &str,
        stop: &Stop,
        deadline: Option<Instant>,
    ) -> Result<Answer, Attempt> {
        let (tx, rx) = mpsc::channel();
        let agent = self.agent.clone();
        let url = self.url.clone();
        let headers = self.headers.clone();
        let body = body.to_string();
        std::thread::spawn(move || {
            let _ = tx.send(send(&agent, &url, &headers, &body));
        });
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(answer) => return answer,
                // A budget's stop lets the answer come, to be counted.
                Err(mpsc::RecvTimeoutError::Timeout) if stop.interrupts_calls() => {
                    return Err(Attempt::Stopped);
                }
                Err(mpsc::RecvTimeoutError::Timeout)
                    if deadline.is_some_and(|d| Instant::now() >= d) =>
                {
                    return Err(Attempt::Deadline);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Attempt::Transport("the request thread died".into()));
                }
            }
        }
    }
}

enum Attempt {
    Stopped,
    Deadline,
    /// Not worth another attempt (an answer over [`MAX_BODY`]).
    Fatal(String),
    Timeout(String),
    Transport(String),
}

fn past_deadline() -> CallError {
    CallError::Timeout("the run's timeout passed".into())
}

fn send(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    body: &str,
) -> Result<Answer, Attempt> {
    let mut req = agent.post(url).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let mut resp = req.send(body).map_err(transport)?;
    let status = resp.status().as_u16();
    let retry_after = retry_after(resp.headers(), std::time::SystemTime::now());
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(transport)?;
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

fn transport(e: ureq::Error) -> Attempt {
    match e {
        ureq::Error::Timeout(t) => Attempt::Timeout(t.to_string()),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            Attempt::Timeout(io.to_string())
        }
        ureq::Error::BodyExceedsLimit(_) => {
            Attempt::Fatal(format!("answer larger than {} MiB", MAX_BODY >> 20))
        }
        other => Attempt::Transport(other.to_string()),
    }
}

/// Statuses worth another attempt: rate limits, overload, server errors.
pub fn retryable(status: u16) -> bool {
    status == 429 || status == 408 || status >= 500
}

/// The wait a `retry-after-ms` or `retry-after` header asks for.
fn retry_after(h: &ureq::http::HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return seconds(ms / 1000.0);
    }
    parse_retry_after(get("retry-after")?, now)
}

/// `retry-after`: seconds (whole or not) or an HTTP date.
pub fn parse_retry_after(v: &str, now: std::time::SystemTime) -> Option<Duration> {
    if let Ok(s) = v.parse::<f64>() {
        return seconds(s);
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let at = std::time::SystemTime::from(at);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(86_400.0)))
}

/// The message of an API error answer: `{"error": {"message": ...}}` (Anthropic, OpenAI),
/// `{"error": "..."}` (some compatible servers) or `{"message": ...}`.
pub fn error_message(v: &Value) -> Option<String> {
    let m = match &v["error"] {
        Value::String(s) => Some(s.clone()),
        e => e["message"].as_str().map(str::to_string),
    }
    .or_else(|| v["message"].as_str().map(str::to_string))?;
    Some(first_line(&m))
}

/// The first line of `s`, at most 300 characters.
fn first_line(s: &str) -> String {
    let line = s.trim().lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(300).collect();
    if out.is_empty() {
        out.push_str("(empty answer)");
    } else if line.chars().count() > 300 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after("0.25", now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        // 2023-11-14T22:13:20Z is `now`; ten seconds later:
        assert_eq!(
            parse_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now),
            Some(Duration::from_secs(10))
        );
        // A date in the past means now.
        assert_eq!(
            parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        let _ = SystemTime::now();
    }

    #[test]
    fn error_messages_are_read_from_the_usual_shapes() {
        let anthropic = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too big"}});
        assert_eq!(error_message(&anthropic).unwrap(), "max_tokens: too big");
        let plain = serde_json::json!({"error": "model not found"});
        assert_eq!(error_message(&plain).unwrap(), "model not found");
        assert_eq!(error_message(&serde_json::json!({"ok": 1})), None);
        assert_eq!(first_line("\n  bad gateway\nmore"), "bad gateway");
        assert_eq!(first_line(""), "(empty answer)");
    }

    #[test]
    fn retryable_statuses() {
        for s in [429, 500, 502, 503, 504, 529, 408] {
            assert!(retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!retryable(s), "{s}");
        }
    }
}
