//! The instance on disk: faults, concurrency, crashes, several hosts (namespaces and GlusterFS), inboxes, the mention index, the name index of the registry, state files and trust.
//!
//! One test binary per concept, each file below a module of it: the crate is linked
//! once per runner rather than once per file (see BENCHMARKS.md, "Test binaries").
//! `cargo test --test store NAME::` runs one file's tests.

#[path = "../common/mod.rs"]
mod common;

mod agent_index;
mod approval;
mod board;
mod channel_faults;
mod concurrency;
mod crash;
mod hosts;
mod inbox;
mod lease;
mod mention_index;
mod netfs;
mod netfs_approval;
mod netfs_work;
mod state_files;
mod trust;
