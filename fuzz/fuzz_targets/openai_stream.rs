//! The libFuzzer binary of the `openai_stream` target. Its check is `run` in
//! `fuzz/harness/openai_stream.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/openai_stream/`.
#![no_main]

#[path = "../harness/common.rs"]
mod common;
#[path = "../harness/openai_stream.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
