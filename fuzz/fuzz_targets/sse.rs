//! The libFuzzer binary of the `sse` target. Its check is `run` in
//! `fuzz/harness/sse.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/sse/`.
#![no_main]

#[path = "../harness/common.rs"]
mod common;
#[path = "../harness/sse.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
