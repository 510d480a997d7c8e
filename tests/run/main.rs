//! aw-run with real processes: backends, budgets, the dispatcher, hostile programs, interpolation, --iter, lifecycle hooks, live views, modes, OpenTelemetry traces, limits, security, secrets, serving, kept CLI sessions, speed, tasks and the wake of an exec agent.
//!
//! One test binary per concept, each file below a module of it: the crate is linked
//! once per runner rather than once per file (see BENCHMARKS.md, "Test binaries").
//! `cargo test --test run NAME::` runs one file's tests.

#[path = "../common/mod.rs"]
mod common;

mod backend_api;
mod backend_cli;
mod board;
mod budget;
mod budget_limits;
mod dispatch;
mod hostile_run;
mod inotify_limit;
mod interpolation;
mod iter;
mod lifecycle;
mod live;
mod merge_serve;
mod otel;
mod quiescence;
mod run;
mod run_limits;
mod run_modes;
mod run_security;
mod secrets;
mod serve_locks;
mod serve_scale;
mod serve_several;
mod session;
mod speed;
mod tasks;
mod wake;
mod worktree;
