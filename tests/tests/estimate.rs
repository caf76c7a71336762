//! Token estimates before sending: the conservative default and the real tokenizer.

use tollgate::pipeline::{DefaultEstimator, TiktokenEncoding, TiktokenEstimator, TokenEstimator};
use tollgate::{Conversation, SamplingParams};

#[test]
fn tiktoken_counts_exactly_offline() {
    let cl100k = TiktokenEstimator::new(TiktokenEncoding::Cl100k);
    assert_eq!(cl100k.estimate_text("hello world"), 2);
    assert_eq!(cl100k.estimate_text(""), 0);
    let o200k = TiktokenEstimator::for_model("gpt-4o-mini");
    assert_eq!(o200k.estimate_text("hello world"), 2);
    // Special-token text is counted as ordinary text, never as a control token.
    assert!(cl100k.estimate_text("<|endoftext|>") > 1);
}

#[test]
fn default_estimate_is_never_below_the_real_count_for_prose_and_code() {
    let real = TiktokenEstimator::new(TiktokenEncoding::Cl100k);
    let samples = [
        "The quick brown fox jumps over the lazy dog, again and again, until the sun goes down.",
        "fn main() { let x: Vec<u32> = (0..10).map(|i| i * i).collect(); println!(\"{x:?}\"); }",
        "Rate limits are respected before a request is sent; waiting holds nothing.",
        "日本語のテキストも数えます。",
        "Привет, мир! Это проверка оценки токенов.",
        "{\"id\": 42, \"tags\": [\"a\", \"b\"], \"nested\": {\"k\": null}}",
        "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0 0x7fffffff 3.14159265358979",
        "    if (x != nil) {\n        return x->next;\n    }\n",
    ];
    for text in samples {
        let (guess, exact) = (
            DefaultEstimator.estimate_text(text),
            real.estimate_text(text),
        );
        assert!(guess >= exact, "{text}: estimated {guess}, real {exact}");
        // Conservative, not wasteful: at most 2.5x the real count.
        assert!(
            guess * 2 <= exact * 5,
            "{text}: estimated {guess}, real {exact}"
        );
    }
    let request = Conversation::new()
        .with_system("Be brief.")
        .user(samples[0])
        .request("m", SamplingParams::new())
        .unwrap();
    assert!(DefaultEstimator.estimate_request(&request) >= real.estimate_request(&request));
}
