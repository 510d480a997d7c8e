//! A fake model API on loopback, scripted per request: each request gets the next reply of
//! the script (past its end, a 500 that says so). Every request is recorded: path, headers,
//! JSON body, and when it came. Each connection carries one request and is closed after the
//! answer; every connection has its own thread, so a hanging reply stalls only its own.
//! The connections open at a moment are counted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One scripted reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Status, extra headers, JSON body.
    Json(u16, Vec<(&'static str, String)>, Value),
    /// Read the request, then answer nothing for a long time.
    Hang,
    /// Read the request, then close the connection without an answer.
    Close,
    /// Status and a body sent as they are: any bytes (not UTF-8, huge), `content-length`
    /// told.
    Raw(u16, Arc<Vec<u8>>),
    /// Read the request, then a 200 with a long `content-length` whose body comes one byte
    /// per interval, until the client leaves.
    Trickle(Duration),
}

impl Reply {
    pub fn ok(body: Value) -> Reply {
        Reply::Json(200, Vec::new(), body)
    }

    pub fn status(status: u16, body: Value) -> Reply {
        Reply::Json(status, Vec::new(), body)
    }

    /// An OpenAI chat completion that answers `message`, finished for `finish`.
    pub fn chat(message: Value, finish: &str) -> Reply {
        Reply::ok(serde_json::json!({
            "id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}
        }))
    }

    /// The script of an OpenAI model that makes the tool `calls`, then says it is done.
    pub fn calls_then_done(calls: Vec<Value>) -> Vec<Reply> {
        let content =
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": calls});
        let done = serde_json::json!({"role": "assistant", "content": "@user done"});
        vec![
            Reply::chat(content, "tool_calls"),
            Reply::chat(done, "stop"),
        ]
    }
}

/// A recorded request.
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    next: usize,
    requests: Vec<Request>,
}

pub struct FakeApi {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    state: Arc<Mutex<State>>,
    open: Arc<AtomicUsize>,
}

impl FakeApi {
    pub fn start(script: Vec<Reply>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let open = Arc::new(AtomicUsize::new(0));
        let (shared, counter) = (state.clone(), open.clone());
        let script = Arc::new(script);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (state, script, counter) = (shared.clone(), script.clone(), counter.clone());
                counter.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    serve(stream, &state, &script);
                    counter.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        FakeApi { url, state, open }
    }

    /// Connections accepted and not yet done with.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>, script: &[Reply]) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let reply = {
        let mut st = state.lock().unwrap();
        st.requests.push(Request {
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            at: Instant::now(),
        });
        st.next += 1;
        script.get(st.next - 1).cloned()
    };
    let mut stream = stream;
    match reply {
        Some(Reply::Hang) => std::thread::sleep(Duration::from_secs(60)),
        Some(Reply::Close) => {}
        Some(Reply::Raw(status, body)) => {
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
            let _ = stream.flush();
        }
        Some(Reply::Trickle(every)) => {
            let head = "HTTP/1.1 200 X\r\ncontent-type: application/json\r\ncontent-length: 100000\r\nconnection: close\r\n\r\n";
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            for _ in 0..100_000 {
                if stream.write_all(b" ").and_then(|_| stream.flush()).is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        }
        Some(Reply::Json(status, extra, body)) => answer(&mut stream, status, &extra, &body),
        None => answer(
            &mut stream,
            500,
            &[],
            &serde_json::json!({"error": {"message": "the fake's script has ended"}}),
        ),
    }
}

fn answer(stream: &mut TcpStream, status: u16, extra: &[(&str, String)], body: &Value) {
    let body = body.to_string();
    let mut head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}
