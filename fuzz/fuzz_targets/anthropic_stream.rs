//! The libFuzzer binary of the `anthropic_stream` target. Its check is `run` in
//! `fuzz/harness/anthropic_stream.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/anthropic_stream/`.
#![no_main]

#[path = "../harness/common.rs"]
mod common;
#[path = "../harness/anthropic_stream.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
