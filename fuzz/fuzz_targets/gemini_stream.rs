//! The libFuzzer binary of the `gemini_stream` target. Its check is `run` in
//! `fuzz/harness/gemini_stream.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/gemini_stream/`.
#![no_main]

#[path = "../harness/common.rs"]
mod common;
#[path = "../harness/gemini_stream.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
