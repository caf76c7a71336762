//! The libFuzzer binary of the `gemini_response` target. Its check is `run` in
//! `fuzz/harness/gemini_response.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/gemini_response/`.
#![no_main]

#[path = "../harness/gemini_response.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
