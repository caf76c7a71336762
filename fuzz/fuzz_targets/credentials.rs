//! The libFuzzer binary of the `credentials` target. Its check is `run` in
//! `fuzz/harness/credentials.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/credentials/`.
#![no_main]

#[path = "../harness/credentials.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
