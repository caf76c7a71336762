//! The libFuzzer binary of the `openai_response` target. Its check is `run` in
//! `fuzz/harness/openai_response.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/openai_response/`.
#![no_main]

#[path = "../harness/openai_response.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
