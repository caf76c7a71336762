//! The libFuzzer binary of the `bedrock_eventstream` target. Its check is `run` in
//! `fuzz/harness/bedrock_eventstream.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/bedrock_eventstream/`.
#![no_main]

#[path = "../harness/common.rs"]
mod common;
#[path = "../harness/bedrock_eventstream.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
