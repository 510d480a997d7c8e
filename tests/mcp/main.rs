//! aw-mcp through real MCP clients: the tools, the wire, the collab tools, proposals and documents under attack.
//!
//! One test binary per concept, each file below a module of it: the crate is linked
//! once per runner rather than once per file (see BENCHMARKS.md, "Test binaries").
//! `cargo test --test mcp NAME::` runs one file's tests.

#[path = "../common/mod.rs"]
mod common;
#[path = "../mcp_common/mod.rs"]
mod mcp_common;

mod approval;
mod board;
mod channel;
mod collab;
mod collab_names;
mod doc_safety;
mod mcp;
mod mcp_framing;
mod merge;
mod names;
mod proposal_rules;
