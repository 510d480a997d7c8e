//! aw: small Unix tools that let several LLM agents work together through a shared
//! directory, `.workflow/<instance>/`. See `aw(7)` and `aw-workflow(5)`.

pub mod channel;
pub mod cli;
pub mod collab;
pub mod document;
pub mod error;
pub mod fs;
pub mod host;
pub mod inbox;
pub mod instance;
pub mod keyword;
pub mod mcp;
pub mod mention;
pub mod mention_index;
pub mod names;
pub mod post;
pub mod proposal;
pub mod registry;
pub mod resource;
pub mod run;
pub mod state;
pub mod status;
pub mod time;

pub use error::{Error, Result};

/// The version every tool prints with `--version`, and `aw-mcp` reports to its client.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
