//! The reader of `claude`'s output (see `aw::run::backend::claude`): what a run makes of what the
//! program printed, line by line, and of how it ended.
//!
//! Input: one byte for how the run ended (ok, failed, timeout, killed), then the bytes printed
//! on stdout. Checked: no panic (absurd token counts included), and the outcome holds
//! together: a stopped run keeps its status, a failure says why on one line, a success has
//! a trimmed answer and its usage, a cost is a finite number.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "stream_common.rs"]
mod stream_common;

fuzz_target!(|data: &[u8]| {
    let Some((ended, printed)) = stream_common::split(data) else {
        return;
    };
    let out = aw::run::backend::claude::read_stream(printed, ended);
    stream_common::check(ended, &out);
});
