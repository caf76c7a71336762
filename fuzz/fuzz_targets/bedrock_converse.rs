//! The libFuzzer binary of the `bedrock_converse` target. Its check is `run` in
//! `fuzz/harness/bedrock_converse.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/bedrock_converse/`.
#![no_main]

#[path = "../harness/bedrock_converse.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
