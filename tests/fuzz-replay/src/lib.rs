//! The fuzz targets of `fuzz/` as ordinary tests. Each target's check is a plain
//! `run(&[u8])` in `fuzz/harness/<target>.rs`, which the libFuzzer binary
//! (`fuzz/fuzz_targets/<target>.rs`) calls and which is compiled here too, on the stable
//! toolchain and without libFuzzer; [`replay`] runs it over every committed seed of
//! `fuzz/corpus/<target>/`. `tests/fuzz_replay.rs` holds one test per target;
//! coverage-guided fuzzing stays in `cargo xtask fuzz` (docs/reliability.md).

use std::path::{Path, PathBuf};

/// What several harnesses share; they name it `crate::common`.
#[path = "../../../fuzz/harness/common.rs"]
mod common;

#[path = "../../../fuzz/harness/sse.rs"]
pub mod sse;

#[path = "../../../fuzz/harness/anthropic_response.rs"]
pub mod anthropic_response;

#[path = "../../../fuzz/harness/anthropic_stream.rs"]
pub mod anthropic_stream;

#[path = "../../../fuzz/harness/openai_response.rs"]
pub mod openai_response;

#[path = "../../../fuzz/harness/openai_stream.rs"]
pub mod openai_stream;

#[path = "../../../fuzz/harness/bedrock_eventstream.rs"]
pub mod bedrock_eventstream;

#[path = "../../../fuzz/harness/bedrock_converse.rs"]
pub mod bedrock_converse;

#[path = "../../../fuzz/harness/gemini_response.rs"]
pub mod gemini_response;

#[path = "../../../fuzz/harness/gemini_stream.rs"]
pub mod gemini_stream;

#[path = "../../../fuzz/harness/catalog.rs"]
pub mod catalog;

#[path = "../../../fuzz/harness/credentials.rs"]
pub mod credentials;

/// The checkout's `fuzz/` directory.
pub fn fuzz_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors().nth(2).unwrap_or(here).join("fuzz")
}

/// The committed seeds of `target`: `fuzz/corpus/<target>/`.
pub fn corpus(target: &str) -> PathBuf {
    fuzz_dir().join("corpus").join(target)
}

/// Runs `check` on every file of `dir`, in name order. The number of files run, or why
/// the replay failed: `dir` is missing or holds no file (a target with nothing to replay
/// would pass without checking anything), or some files made `check` panic (each named,
/// with its panic message; every file is run either way).
pub fn replay(dir: &Path, check: fn(&[u8])) -> Result<usize, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot read the corpus: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!(
            "{}: the corpus holds no file; commit at least one seed",
            dir.display()
        ));
    }
    let mut panics = Vec::new();
    for file in &files {
        let data = std::fs::read(file)
            .map_err(|e| format!("{}: cannot read the seed: {e}", file.display()))?;
        if let Err(payload) = std::panic::catch_unwind(|| check(&data)) {
            panics.push(format!("{}: {}", file.display(), panic_message(&*payload)));
        }
    }
    if panics.is_empty() {
        Ok(files.len())
    } else {
        Err(format!(
            "{} of {} seeds panicked (rerun one with `cargo fuzz run <target> <file>` in fuzz/):\n{}",
            panics.len(),
            files.len(),
            panics.join("\n")
        ))
    }
}

/// The text a panic was raised with.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

#[cfg(test)]
mod tests {
    use super::replay;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn never_panics(_: &[u8]) {}

    fn panics_on_boom(data: &[u8]) {
        assert_ne!(data, b"boom", "the input was boom");
    }

    #[test]
    fn a_missing_corpus_fails() {
        let dir = tempfile::tempdir().unwrap();
        let err = replay(&dir.path().join("nothing"), never_panics).unwrap_err();
        assert!(err.contains("cannot read the corpus"), "{err}");
    }

    #[test]
    fn an_empty_corpus_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let err = replay(dir.path(), never_panics).unwrap_err();
        assert!(err.contains("holds no file"), "{err}");
    }

    #[test]
    fn every_seed_is_run() {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        fn count(_: &[u8]) {
            RUNS.fetch_add(1, Ordering::SeqCst);
        }
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        assert_eq!(replay(dir.path(), count), Ok(3));
        assert_eq!(RUNS.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_seed_that_panics_is_named_with_its_message() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fine"), "fine").unwrap();
        std::fs::write(dir.path().join("crash-1"), "boom").unwrap();
        let err = replay(dir.path(), panics_on_boom).unwrap_err();
        assert!(err.starts_with("1 of 2 seeds panicked"), "{err}");
        assert!(err.contains("crash-1: assertion"), "{err}");
        assert!(err.contains("the input was boom"), "{err}");
        assert!(!err.contains("fine:"), "{err}");
    }
}
