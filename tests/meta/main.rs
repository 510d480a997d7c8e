//! The project itself: benchmark scripts, documentation, source size, layers and fuzz regressions.
//!
//! One test binary per concept, each file below a module of it: the crate is linked
//! once per runner rather than once per file (see BENCHMARKS.md, "Test binaries").
//! `cargo test --test meta NAME::` runs one file's tests.

#[path = "../common/mod.rs"]
mod common;

mod bench_scripts;
mod docs;
mod file_size;
mod fuzz_regressions;
mod layers;
