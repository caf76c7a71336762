//! The libFuzzer binary of the `anthropic_response` target. Its check is `run` in
//! `fuzz/harness/anthropic_response.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/anthropic_response/`.
#![no_main]

#[path = "../harness/anthropic_response.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
