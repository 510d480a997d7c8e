//! The reader of Messages API answers (the `anthropic` backend): the body of a 200 answer
//! as the tool loop reads it.
//!
//! Input: the answer's body. Checked: no panic; a turn read from it holds together (an
//! assistant message to send back, each call's input an object or a reason, the usage), and
//! the next request built from it serializes.
#![no_main]

use aw::run::backend::anthropic::Anthropic;
use libfuzzer_sys::fuzz_target;

#[path = "api_common.rs"]
mod api_common;

fuzz_target!(|data: &[u8]| {
    let dialect = Anthropic {
        model: "m".into(),
        system: "s".into(),
        max_tokens: 100,
    };
    api_common::check(&dialect, data);
});
