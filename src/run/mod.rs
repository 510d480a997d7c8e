//! The runner's library (`aw-run`): read a workflow file, check it, and run its agents.
pub mod diagnostic;
pub mod interpolate;
pub mod yaml;
