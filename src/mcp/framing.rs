//! The MCP stdio wire: one JSON-RPC message per line, in and out.
//!
//! Every line read is judged before the protocol layer sees it, so that no request goes
//! unanswered:
//!
//! - a line that is not JSON (bad syntax, nesting deeper than 128, a number out of range,
//!   invalid UTF-8) gets -32700 Parse error;
//! - JSON that is not one JSON-RPC 2.0 message (an array, a number, an object without a
//!   string `method`, a bad `id` or `jsonrpc`) gets -32600 Invalid Request;
//! - a request for a known method whose `params` do not fit it gets -32602 Invalid params;
//! - a line longer than the limit is skipped without being kept in memory, and gets -32600;
//! - a notification (no `id`) that does not fit is only logged, as JSON-RPC wants.
//!
//! An error answer carries the request's `id` when it can be found (for a line that does not
//! parse, by a lenient scan for a top-level `"id"` holding an integer or a string), else
//! `"id": null`. Each refusal is also logged on stderr as one line.
//!
//! Everything written goes through one writer task, a whole line at a time, so answers never
//! interleave and standard output carries nothing but JSON-RPC.

use std::borrow::Cow;
use std::io;

use rmcp::RoleServer;
#[allow(deprecated)] // a few request types are deprecated, but clients may still send them
use rmcp::model::{
    CallToolRequest, CancelTaskRequest, ClientJsonRpcMessage, ClientRequest, CompleteRequest,
    ConstString, DiscoverRequest, ErrorCode, ErrorData, GetPromptRequest, GetSkillRequest,
    GetTaskRequest, InitializeRequest, JsonRpcMessage, JsonRpcRequest, ListPromptsRequest,
    ListResourceTemplatesRequest, ListResourcesRequest, ListSkillsRequest, ListToolsRequest,
    PingRequest, ReadResourceDirectoryRequest, ReadResourceRequest, Request, RequestNoParam,
    RequestOptionalParam, SetLevelRequest, SubscribeRequest, SubscriptionsListenRequest,
    UnsubscribeRequest, UpdateTaskRequest,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// How much of an over-long line is kept to find its `id`.
const KEPT_PREFIX: usize = 64 << 10;

/// How long an error detail taken from the parser may be (it may quote the input).
const MAX_DETAIL: usize = 200;

/// Lines waiting for the writer; a client that stops reading slows the reader down.
const QUEUE: usize = 64;

/// The server side of the wire: lines from `R`, lines to the writer task.
pub struct LineTransport<R> {
    lines: Lines<R>,
    out: Option<mpsc::Sender<Vec<u8>>>,
    /// An error answer that is still to be queued (kept here so that a cancelled `receive`
    /// does not lose it).
    pending: Option<Vec<u8>>,
}

/// A transport reading `read` and the task that must run to write its lines to `write`. The
/// task ends when the transport is gone and every line is written, or when a write fails.
pub fn new<R, W>(
    read: R,
    write: W,
    max_line: usize,
) -> (LineTransport<R>, impl Future<Output = io::Result<()>>)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let (tx, rx) = mpsc::channel(QUEUE);
    let transport = LineTransport {
        lines: Lines::new(read, max_line),
        out: Some(tx),
        pending: None,
    };
    (transport, write_lines(rx, write))
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut w: W,
) -> io::Result<()> {
    while let Some(line) = rx.recv().await {
        w.write_all(&line).await?;
        if rx.is_empty() {
            w.flush().await?;
        }
    }
    w.flush().await
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "standard output is closed")
}

impl<R: AsyncRead + Unpin + Send> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let out = self.out.clone();
        let line = serde_json::to_vec(&item).map(|mut v| {
            v.push(b'\n');
            v
        });
        async move {
            let line = line?;
            out.ok_or_else(closed)?
                .send(line)
                .await
                .map_err(|_| closed())
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let out = self.out.as_ref()?;
            if self.pending.is_some() {
                let permit = out.reserve().await.ok()?;
                permit.send(self.pending.take().expect("an answer is pending"));
            }
            // Stop serving once nobody can read the answers.
            let read = tokio::select! {
                r = self.lines.next() => r,
                _ = out.closed() => return None,
            };
            match read {
                Ok(Read::Line) => {}
                Ok(Read::TooLong) => {
                    let id = scan_id(&self.lines.buf);
                    let why = format!("request line over {} bytes", self.lines.max);
                    self.pending = Some(refuse(id, ErrorData::invalid_request(why, None)));
                    continue;
                }
                Ok(Read::End) => return None,
                Err(e) => {
                    eprintln!("aw-mcp: standard input: {e}");
                    return None;
                }
            }
            match judge(&self.lines.buf) {
                Verdict::Pass(m) => return Some(*m),
                Verdict::Skip => {}
                Verdict::Answer(line) => self.pending = Some(line),
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.out = None;
        Ok(())
    }
}

/// What became of one line.
enum Read {
    /// A whole line is in the buffer, without its newline.
    Line,
    /// The line was over the limit; the buffer holds its first bytes only.
    TooLong,
    /// End of input.
    End,
}

/// Lines of at most `max` bytes (the newline not counted), read in bounded memory.
struct Lines<R> {
    read: BufReader<R>,
    buf: Vec<u8>,
    max: usize,
    /// The rest of an over-long line is being skipped.
    skipping: bool,
    /// The buffer holds a line already handed out; clear it before reading on.
    done: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(read: R, max: usize) -> Self {
        Lines {
            read: BufReader::with_capacity(64 << 10, read),
            buf: Vec::new(),
            max,
            skipping: false,
            done: false,
        }
    }

    /// The next line. Safe to cancel: a partial line stays in the buffer and the next call
    /// goes on with it.
    async fn next(&mut self) -> io::Result<Read> {
        if self.done {
            self.done = false;
            self.buf.clear();
            // Give back the memory of a large line.
            if self.buf.capacity() > 1 << 20 {
                self.buf = Vec::new();
            }
        }
        loop {
            let chunk = self.read.fill_buf().await?;
            if chunk.is_empty() {
                // End of input: a last line without a newline still counts.
                if !self.skipping && self.buf.is_empty() {
                    return Ok(Read::End);
                }
                return Ok(self.finish());
            }
            let newline = chunk.iter().position(|&b| b == b'\n');
            let take = newline.unwrap_or(chunk.len());
            if !self.skipping && self.buf.len() + take > self.max {
                self.skipping = true;
                self.buf.truncate(KEPT_PREFIX);
            }
            if self.skipping {
                let room = KEPT_PREFIX.saturating_sub(self.buf.len());
                self.buf.extend_from_slice(&chunk[..take.min(room)]);
            } else {
                let want = self.buf.len() + take;
                if want > self.buf.capacity() {
                    // Grow as a Vec would, but never far past the limit.
                    let cap = (2 * self.buf.capacity()).clamp(want, self.max.max(want));
                    self.buf.reserve_exact(cap - self.buf.len());
                }
                self.buf.extend_from_slice(&chunk[..take]);
            }
            self.read.consume(take + usize::from(newline.is_some()));
            if newline.is_some() {
                return Ok(self.finish());
            }
        }
    }

    fn finish(&mut self) -> Read {
        self.done = true;
        if std::mem::take(&mut self.skipping) {
            Read::TooLong
        } else {
            Read::Line
        }
    }
}

/// What to do with one line.
enum Verdict {
    /// A message for the protocol layer.
    Pass(Box<ClientJsonRpcMessage>),
    /// Nothing to answer (a blank line, a notification that does not fit).
    Skip,
    /// An error answer, as a whole line.
    Answer(Vec<u8>),
}

/// The verdict on one line, its newline taken off.
fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let typed_err = match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(m) => return check_params(m),
        Err(e) => e,
    };
    // Valid JSON that is not a message rmcp takes, or no JSON at all.
    let v = match serde_json::from_slice::<Value>(line) {
        Ok(v) if typed_err.is_data() => v,
        Ok(_) => return parse_error(line, &typed_err),
        Err(e) => return parse_error(line, &e),
    };
    let Value::Object(obj) = &v else {
        let what = match v {
            Value::Array(_) => "a batch (array)",
            _ => "not an object",
        };
        let why = format!("{what}: expected one JSON-RPC 2.0 message");
        return Verdict::Answer(refuse(Value::Null, ErrorData::invalid_request(why, None)));
    };
    // A well-formed request or notification that rmcp's types still refuse: its params
    // are an array, where rmcp wants an object.
    let method = obj.get("method").and_then(Value::as_str);
    let well_formed = obj.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && method.is_some()
        && !obj.contains_key("result")
        && !obj.contains_key("error")
        && matches!(
            obj.get("params"),
            None | Some(Value::Object(_) | Value::Array(_))
        );
    let why = typed_err.to_string();
    let why = detail(&why);
    match (well_formed, method, obj.get("id")) {
        (true, Some(method), None) => {
            log(&format!("notification '{}' ignored: {why}", detail(method)));
            Verdict::Skip
        }
        (true, Some(method), Some(id)) if is_id(id) => {
            no_fit(id.clone(), method, obj.get("params")).unwrap_or_else(|| {
                let why = format!("method not found: {}", detail(method));
                let error = ErrorData::new(ErrorCode::METHOD_NOT_FOUND, why, None);
                Verdict::Answer(refuse(id.clone(), error))
            })
        }
        (_, _, id) => {
            let id = id.filter(|v| is_id(v)).cloned().unwrap_or(Value::Null);
            let why = format!("not a JSON-RPC 2.0 request: {why}");
            Verdict::Answer(refuse(id, ErrorData::invalid_request(why, None)))
        }
    }
}

/// A message rmcp takes; a request for a known method whose params do not fit it reaches
/// rmcp as a custom request, which it would answer with "method not found".
fn check_params(m: ClientJsonRpcMessage) -> Verdict {
    if let JsonRpcMessage::Request(JsonRpcRequest {
        id,
        request: ClientRequest::CustomRequest(r),
        ..
    }) = &m
    {
        let id = serde_json::to_value(id).unwrap_or(Value::Null);
        if let Some(answer) = no_fit(id, &r.method, r.params.as_ref()) {
            return answer;
        }
    }
    Verdict::Pass(Box::new(m))
}

/// The Invalid params answer to request `id` when `method` is a known one that `params` do
/// not fit.
fn no_fit(id: Value, method: &str, params: Option<&Value>) -> Option<Verdict> {
    let why = KNOWN.iter().find_map(|f| f(method, params))?;
    let why = format!("invalid params for {method}: {}", detail(&why));
    Some(Verdict::Answer(refuse(
        id,
        ErrorData::invalid_params(why, None),
    )))
}

fn parse_error(line: &[u8], e: &serde_json::Error) -> Verdict {
    let why = format!("not JSON: {}", detail(&e.to_string()));
    Verdict::Answer(refuse(scan_id(line), ErrorData::parse_error(why, None)))
}

/// An id rmcp could have taken: an integer or a string.
fn is_id(v: &Value) -> bool {
    v.is_i64() || v.is_string()
}

/// At most `MAX_DETAIL` bytes of a parser message.
fn detail(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_DETAIL {
        return Cow::Borrowed(s);
    }
    let mut end = MAX_DETAIL;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}...", &s[..end]))
}

/// The error answer to request `id` as a line, logged on stderr as well.
fn refuse(id: Value, error: ErrorData) -> Vec<u8> {
    let who = if id.is_null() {
        "request without id".to_string()
    } else {
        format!("request {id}")
    };
    log(&format!("{who}: {}", error.message));
    #[derive(serde::Serialize)]
    struct Answer {
        jsonrpc: &'static str,
        id: Value,
        error: ErrorData,
    }
    let answer = Answer {
        jsonrpc: "2.0",
        id,
        error,
    };
    let mut line = serde_json::to_vec(&answer).expect("an error answer serializes");
    line.push(b'\n');
    line
}

/// One line on stderr, control characters (which the parser may quote) made harmless.
fn log(event: &str) {
    let event: String = event
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    eprintln!("aw-mcp: {event}");
}

/// The `id` of a line that may not parse and may be cut short: the value of the first
/// `"id"` key of the top-level object when it is an integer or a string, else null.
pub fn scan_id(s: &[u8]) -> Value {
    let s = s.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(s);
    let start = skip_ws(s, 0);
    if s.get(start) != Some(&b'{') {
        return Value::Null;
    }
    let mut depth = 0usize;
    let mut i = start;
    while i < s.len() {
        match s[i] {
            b'"' => {
                let Some(end) = string_end(s, i) else {
                    return Value::Null;
                };
                if depth == 1 && &s[i..end] == b"\"id\"" {
                    let colon = skip_ws(s, end);
                    if s.get(colon) == Some(&b':') {
                        return id_at(s, skip_ws(s, colon + 1));
                    }
                }
                i = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Value::Null;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Value::Null
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(|b| b" \t\r\n".contains(b)) {
        i += 1;
    }
    i
}

/// The index just past the string that opens at `s[open]`, if it closes.
fn string_end(s: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The id value that starts at `s[i]`: a whole string or a whole integer, else null.
fn id_at(s: &[u8], i: usize) -> Value {
    match s.get(i) {
        Some(b'"') => string_end(s, i)
            .and_then(|end| serde_json::from_slice::<String>(&s[i..end]).ok())
            .map_or(Value::Null, Value::String),
        Some(b'-' | b'0'..=b'9') => {
            let end = i + 1 + s[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
            // The number must end here, inside what was read: not cut short, no fraction.
            match s.get(end) {
                Some(b' ' | b'\t' | b'\r' | b'\n' | b',' | b'}') => std::str::from_utf8(&s[i..end])
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .map_or(Value::Null, Value::from),
                _ => Value::Null,
            }
        }
        _ => Value::Null,
    }
}

/// A request type known by its method name.
trait Known {
    const METHOD: &str;
}

impl<M: ConstString, P> Known for Request<M, P> {
    const METHOD: &str = M::VALUE;
}

impl<M: ConstString, P> Known for RequestOptionalParam<M, P> {
    const METHOD: &str = M::VALUE;
}

impl<M: ConstString> Known for RequestNoParam<M> {
    const METHOD: &str = M::VALUE;
}

/// Why `params` do not fit request type `T`, when `method` is its method.
fn misfit<T: Known + DeserializeOwned>(method: &str, params: Option<&Value>) -> Option<String> {
    if method != T::METHOD {
        return None;
    }
    let mut request = serde_json::json!({ "method": method });
    if let Some(p) = params {
        request["params"] = p.clone();
    }
    Some(match T::deserialize(&request) {
        Err(e) => e.to_string(),
        Ok(_) => "they do not fit the method".into(),
    })
}

/// For one request type: why `params` do not fit it, when `method` is its method.
type Misfit = fn(&str, Option<&Value>) -> Option<String>;

/// Every request type a client may send (rmcp's `ClientRequest`).
#[allow(deprecated)]
const KNOWN: &[Misfit] = &[
    misfit::<PingRequest>,
    misfit::<InitializeRequest>,
    misfit::<DiscoverRequest>,
    misfit::<CompleteRequest>,
    misfit::<SetLevelRequest>,
    misfit::<GetPromptRequest>,
    misfit::<ListPromptsRequest>,
    misfit::<ListResourcesRequest>,
    misfit::<ListResourceTemplatesRequest>,
    misfit::<ReadResourceRequest>,
    misfit::<SubscriptionsListenRequest>,
    misfit::<SubscribeRequest>,
    misfit::<UnsubscribeRequest>,
    misfit::<CallToolRequest>,
    misfit::<ListToolsRequest>,
    misfit::<GetTaskRequest>,
    misfit::<UpdateTaskRequest>,
    misfit::<CancelTaskRequest>,
    misfit::<ListSkillsRequest>,
    misfit::<GetSkillRequest>,
    misfit::<ReadResourceDirectoryRequest>,
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_id_is_found_in_lines_that_do_not_parse() {
        let cases: &[(&str, Value)] = &[
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":1e400}}"#,
                json!(7),
            ),
            (
                r#"{"params":[[[{"id":1}]]], "id" : "abc" , "method":"#,
                json!("abc"),
            ),
            (r#"{"method":"id","id":-3,"x":[1,}"#, json!(-3)),
            (r#"{"m":"say \"id\": 5","id":"a\"b"}"#, json!("a\"b")),
            (r#"{"id":1.5}"#, Value::Null),
            (r#"{"id":12"#, Value::Null),
            (r#"{"id":null}"#, Value::Null),
            (r#"{"params":{"id":4}}"#, Value::Null),
            (r#"[{"id":4}]"#, Value::Null),
            (r#"{"id":"unterminated"#, Value::Null),
            ("\u{feff}{\"id\":9}", json!(9)),
            ("", Value::Null),
        ];
        for (line, want) in cases {
            assert_eq!(&scan_id(line.as_bytes()), want, "{line}");
        }
    }

    #[test]
    fn details_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_DETAIL);
        let d = detail(&long);
        assert!(d.len() <= MAX_DETAIL + 3 && d.ends_with("..."), "{d}");
        assert_eq!(detail("short"), "short");
    }

    #[test]
    fn only_known_methods_have_params_that_misfit() {
        let misfits = |m: &str, p: Value| KNOWN.iter().find_map(|f| f(m, Some(&p)));
        let why = misfits("tools/call", json!({"name": "x", "arguments": "s"}));
        assert!(why.is_some_and(|w| w.contains("invalid type")));
        assert!(misfits("initialize", json!(5)).is_some());
        assert!(misfits("no/such/method", json!(5)).is_none());
    }
}
