//! One test per fuzz target: every committed seed of `fuzz/corpus/<target>/` through the
//! target's check (`fuzz/harness/<target>.rs`), on the stable toolchain, in seconds. A
//! seed that panics, or a corpus that is missing or empty, fails the target's test; a
//! fuzz target with no test here fails `every_fuzz_target_is_replayed`.

use std::collections::BTreeSet;

use tollgate_fuzz_replay::{corpus, fuzz_dir, replay};

macro_rules! replays {
    ($($target:ident => $test:ident,)*) => {
        $(
            #[test]
            fn $test() {
                let dir = corpus(stringify!($target));
                match replay(&dir, tollgate_fuzz_replay::$target::run) {
                    Ok(seeds) => println!("{}: {seeds} seeds, no panic", dir.display()),
                    Err(why) => panic!("{why}"),
                }
            }
        )*

        /// The targets replayed above.
        const REPLAYED: &[&str] = &[$(stringify!($target)),*];
    };
}

replays! {
    sse => sse_corpus_replays_without_a_panic,
    anthropic_response => anthropic_response_corpus_replays_without_a_panic,
    anthropic_stream => anthropic_stream_corpus_replays_without_a_panic,
    openai_response => openai_response_corpus_replays_without_a_panic,
    openai_stream => openai_stream_corpus_replays_without_a_panic,
    bedrock_eventstream => bedrock_eventstream_corpus_replays_without_a_panic,
    bedrock_converse => bedrock_converse_corpus_replays_without_a_panic,
    gemini_response => gemini_response_corpus_replays_without_a_panic,
    gemini_stream => gemini_stream_corpus_replays_without_a_panic,
    catalog => catalog_corpus_replays_without_a_panic,
    credentials => credentials_corpus_replays_without_a_panic,
}

#[test]
fn every_fuzz_target_is_replayed() {
    let binaries: BTreeSet<String> = std::fs::read_dir(fuzz_dir().join("fuzz_targets"))
        .expect("fuzz/fuzz_targets")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".rs"))
                .map(str::to_owned)
        })
        .collect();
    let replayed: BTreeSet<String> = REPLAYED.iter().map(|t| (*t).to_owned()).collect();
    assert!(binaries.len() >= 11, "{binaries:?}");
    assert_eq!(
        binaries, replayed,
        "fuzz/fuzz_targets/*.rs and the targets replayed here differ"
    );
}
