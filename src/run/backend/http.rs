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
//!   Every request also has a deadline in all, [`REQUEST_TIMEOUT`] (or the idle timeout when
//!   longer), never past the run's timeout: a service that trickles its answer a byte at a
//!   time fails the same way.
//! - The request runs on a thread of its own so that a stop (SIGTERM, a budget) is seen at
//!   once; a request given up (a stop, the run's timeout) has its connection shut down and
//!   its thread joined before the call returns: nothing of it outlives the attempt.
//! - A 2xx answer must be UTF-8 (JSON is); one that is not fails the call at once, as a bad
//!   answer, not retried. Answers larger than [`MAX_BODY`] fail the same way. Of an error
//!   answer, only the first [`MAX_ERROR_BODY`] bytes are read, for its message.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::Stop;

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
/// Most of an error answer (not 2xx) read for its message, in bytes.
pub const MAX_ERROR_BODY: u64 = 64 << 10;
/// Longest a request may take in all, from its connection to the last byte of its answer,
/// unless the agent's idle timeout is longer (then that).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

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
    config: ureq::config::Config,
    /// The connections kept for the next requests. An attempt given up shuts it down (its
    /// connection with it) and puts a new one from `config` in its place.
    agent: std::sync::Mutex<ureq::Agent>,
    /// The deadline of a request in all.
    request_timeout: Duration,
    pub url: String,
    headers: Vec<(String, String)>,
    /// How the service is named in messages (`anthropic`, `openai`).
    pub service: &'static str,
}

/// One attempt's result: the status, its `retry-after` wait, and the body (at most
/// [`MAX_BODY`] bytes of a 2xx answer, [`MAX_ERROR_BODY`] of another).
struct Answer {
    status: u16,
    retry_after: Option<Duration>,
    body: Vec<u8>,
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
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_per_read(Some(read_timeout))
            .timeout_per_write(Some(read_timeout))
            .user_agent(format!("aw/{}", crate::VERSION))
            .build();
        Client {
            agent: std::sync::Mutex::new(config.new_agent()),
            config,
            request_timeout: REQUEST_TIMEOUT.max(read_timeout),
            url,
            headers,
            service,
        }
    }

    /// POST `body`, retrying as the module says; the answer's body, UTF-8 (its JSON is
    /// read by the caller, keeping only what it uses). Past `deadline` (the run's timeout)
    /// the call ends as a timeout. `retries` counts the retries made.
    pub fn post(
        &self,
        body: &Value,
        stop: &Stop,
        deadline: Option<Instant>,
        retries: &mut u32,
    ) -> Result<Vec<u8>, CallError> {
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
                    return match std::str::from_utf8(&a.body) {
                        Ok(_) => Ok(a.body),
                        Err(e) => Err(CallError::Failed(format!(
                            "{}: answer is not UTF-8 (at byte {})",
                            self.service,
                            e.valid_up_to()
                        ))),
                    };
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
            if deadline.is_some_and(|d| crate::time::deadline(wait) >= d) {
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
    fn status_message(&self, status: u16, body: &[u8]) -> String {
        let msg = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| error_message(&v))
            .unwrap_or_else(|| first_line(&String::from_utf8_lossy(body)));
        format!("{}: HTTP {status}: {msg}", self.service)
    }

    /// One request on its own thread, waited for while watching `stop`. A request given
    /// up has its connection shut down and its thread joined before this returns.
    fn attempt(
        &self,
        body: &str,
        stop: &Stop,
        deadline: Option<Instant>,
    ) -> Result<Answer, Attempt> {
        let (tx, rx) = mpsc::channel();
        let agent = self.agent.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // The request's deadline in all, never past the run's.
        let mut limit = self.request_timeout;
        if let Some(d) = deadline {
            limit = limit.min(d.saturating_duration_since(Instant::now()));
        }
        let worker = {
            let agent = agent.clone();
            let url = self.url.clone();
            let headers = self.headers.clone();
            let body = body.to_string();
            std::thread::spawn(move || {
                let _ = tx.send(send(&agent, &url, &headers, &body, limit));
            })
        };
        let give_up = |why: Attempt, worker: std::thread::JoinHandle<()>| {
            agent.shutdown();
            let _ = worker.join();
            *self.agent.lock().unwrap_or_else(|e| e.into_inner()) = self.config.new_agent();
            Err(why)
        };
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(answer) => {
                    let _ = worker.join();
                    return match answer {
                        Err(Attempt::Timeout(_))
                            if deadline.is_some_and(|d| Instant::now() >= d) =>
                        {
                            Err(Attempt::Deadline)
                        }
                        other => other,
                    };
                }
                Err(mpsc::RecvTimeoutError::Timeout) if stop.interrupts_calls() => {
                    return give_up(Attempt::Stopped, worker);
                }
                Err(mpsc::RecvTimeoutError::Timeout)
                    if deadline.is_some_and(|d| Instant::now() >= d) =>
                {
                    return give_up(Attempt::Deadline, worker);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return give_up(Attempt::Transport("the request thread died".into()), worker);
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
    limit: Duration,
) -> Result<Answer, Attempt> {
    use std::io::Read;
    let mut req = agent.post(url).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req.config().timeout_global(Some(limit)).build();
    let mut resp = req.send(body).map_err(transport)?;
    let status = resp.status().as_u16();
    let retry_after = retry_after(resp.headers(), std::time::SystemTime::now());
    let ok = (200..300).contains(&status);
    let max = if ok { MAX_BODY } else { MAX_ERROR_BODY };
    // Room for the whole answer at once when its length is told: no copy while it grows.
    let told = resp.body().content_length().unwrap_or(0).min(max);
    let mut body = Vec::with_capacity(told as usize);
    let reader = resp.body_mut().with_config().limit(max).reader();
    let read = if ok {
        reader.take(max + 1).read_to_end(&mut body)
    } else {
        // An error answer is cut, not refused: only its message is wanted.
        reader.take(max).read_to_end(&mut body)
    };
    match read {
        Ok(_) => {}
        // An error answer longer than what is read of it.
        Err(_) if !ok && body.len() as u64 >= max => {}
        Err(e) => return Err(transport(ureq::Error::from(e))),
    }
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

fn transport(e: ureq::Error) -> Attempt {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Global) => {
            Attempt::Timeout("the request took longer than allowed in all".into())
        }
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
