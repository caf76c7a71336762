//! The libFuzzer binary of the `catalog` target. Its check is `run` in
//! `fuzz/harness/catalog.rs`, which `tests/fuzz-replay` also runs over every committed
//! seed of `fuzz/corpus/catalog/`.
#![no_main]

#[path = "../harness/catalog.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::run(data));
