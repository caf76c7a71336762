//! The estimate an `openai` model's first calls make before the tiktoken table is loaded
//! ([`ByteBoundEstimator`]: one token per UTF-8 byte) is never below tiktoken's count, for
//! any text, so a reservation made on it can only be settled back, never run into debt.

use proptest::prelude::*;
use tollgate::provider::{ByteBoundEstimator, TiktokenEncoding, TiktokenEstimator, TokenEstimator};
use tollgate::{LlmRequest, Message, SamplingParams};

fn never_below(text: &str) -> Result<(), TestCaseError> {
    let bound = ByteBoundEstimator.estimate_text(text);
    for encoding in [TiktokenEncoding::O200k, TiktokenEncoding::Cl100k] {
        let exact = TiktokenEstimator::new(encoding).estimate_text(text);
        prop_assert!(
            bound >= exact,
            "{encoding:?}: {bound} < {exact} for {text:?}"
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn byte_bound_is_never_below_tiktoken_for_any_string(text in any::<String>()) {
        never_below(&text)?;
    }

    #[test]
    fn byte_bound_is_never_below_tiktoken_for_printable_unicode(text in "\\PC{0,400}") {
        never_below(&text)?;
    }

    #[test]
    fn byte_bound_is_never_below_tiktoken_for_prose_code_and_spaces(
        text in "([a-zA-Z]{1,12}|[0-9]{1,8}|[ \\t\\n]{1,6}|[.,;:!?'\"(){}<>|_-]{1,3}|<\\|endoftext\\|>|[é日🙂ß])*"
    ) {
        never_below(&text)?;
    }

    #[test]
    fn byte_bound_request_estimate_is_never_below_tiktoken(
        system in "\\PC{0,80}",
        user in any::<String>(),
    ) {
        let request = LlmRequest::new(
            "gpt",
            vec![Message::system(system), Message::user(user)],
            vec![],
            SamplingParams::new(),
        );
        // A request the core refuses (e.g. an empty message) is never estimated.
        let Ok(request) = request else { return Ok(()) };
        let bound = ByteBoundEstimator.estimate_request(&request);
        let exact = TiktokenEstimator::new(TiktokenEncoding::O200k).estimate_request(&request);
        prop_assert!(bound >= exact, "{bound} < {exact}");
    }
}

#[test]
fn byte_bound_holds_on_texts_that_tokenize_densely() {
    // Rare bytes and scripts split into many tokens per character: still one per byte at most.
    for text in [
        "\u{0}\u{1}\u{7f}",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 👩‍👩‍👧‍👦",
        "ꙮꙮꙮ",
        "\u{fffd}\u{feff}",
        "    \n\n\t\t  ",
        "<|endoftext|><|im_start|>",
    ] {
        never_below(text).unwrap();
    }
}
