//! The command lines a user types: refusals and exit codes, limits, the first hour of a newcomer, following, round trips, aw-send modes, terminals, typos, checks and aw-ctl against real servers, and reports of a run.
//!
//! One test binary per concept, each file below a module of it: the crate is linked
//! once per runner rather than once per file (see BENCHMARKS.md, "Test binaries").
//! `cargo test --test cli NAME::` runs one file's tests.

#[path = "../common/mod.rs"]
mod common;

mod approval;
mod bad_input;
mod board;
mod check_all;
mod cli_limits;
mod ctl_run;
mod first_hour;
mod follow;
mod front_door;
mod lease;
mod merge;
mod report;
mod roundtrip;
mod send_lines;
mod send_wait;
mod terminal;
mod typos;
