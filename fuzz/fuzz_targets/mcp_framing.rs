//! The MCP stdio wire of `aw-mcp`: lines of JSON-RPC judged before the protocol layer.
//!
//! Input: one byte choosing the line limit (small ones reach the over-long path), then the
//! bytes a client writes. Checked: no panic, the reader ends at the end of input, and what
//! the server writes is only whole lines, each one JSON-RPC 2.0 error answer (a known code,
//! an id that is null, an integer or a string), never more messages and answers than lines.
#![no_main]

use std::io::Cursor;
use std::sync::OnceLock;

use aw::mcp::framing;
use libfuzzer_sys::fuzz_target;
use rmcp::transport::Transport;
use serde_json::Value;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

const CODES: [i64; 4] = [-32700, -32600, -32601, -32602];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, input)) = data.split_first() else {
        return;
    };
    let max_line = match pick % 4 {
        0 => aw::mcp::MAX_REQUEST_LINE,
        1 => 64,
        2 => 1 + pick as usize,
        _ => 4096,
    };
    let mut out = Vec::new();
    let passed = runtime().block_on(async {
        let (mut transport, writer) = framing::new(input, Cursor::new(&mut out), max_line);
        let reader = async move {
            let mut n = 0usize;
            while let Some(_message) = transport.receive().await {
                n += 1;
            }
            n
        };
        let (n, written) = tokio::join!(reader, writer);
        written.expect("writing to memory");
        n
    });
    let lines = input.split(|&b| b == b'\n').count();
    if out.is_empty() {
        assert!(passed <= lines);
        return;
    }
    assert_eq!(out.last(), Some(&b'\n'), "only whole lines are written");
    let answers: Vec<&[u8]> = out[..out.len() - 1].split(|&b| b == b'\n').collect();
    assert!(
        passed + answers.len() <= lines,
        "{passed} + {} > {lines}",
        answers.len()
    );
    for a in answers {
        let v: Value = serde_json::from_slice(a).expect("an answer is JSON");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        let code = v["error"]["code"].as_i64().expect("an error code");
        assert!(CODES.contains(&code), "code {code}");
        let id = &v["id"];
        assert!(id.is_null() || id.is_i64() || id.is_string(), "id {id}");
    }
});
