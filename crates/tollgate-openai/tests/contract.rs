//! The provider contract kit (`tollgate-testkit`) against the OpenAI Chat Completions
//! wire format, for both keys: `openai` and `openai-compatible` (the script is the
//! crate's `testkit` module, which OpenAI-like provider crates run too).

/// Both keys: the same wire, the same declarations of what it cannot show.
macro_rules! openai_contract {
    ($provider:expr) => {
        tollgate_testkit::provider_contract_tests!(tollgate_openai::testkit::OpenAiWire::new($provider);
            skip {
                a_context_window_stop_is_typed_and_names_the_model:
                    "OpenAI has no full-window stop reason",
            }
            partly {
                a_reported_overflow_moves_to_a_larger_window_when_opted_in:
                    "the full-window stop (OpenAI has none); the overflow error is checked",
                an_embeddings_request_carries_the_purpose_and_the_width:
                    "the purpose (OpenAI's wire has no field for it); the width is checked",
            }
        );
    };
}

mod openai {
    openai_contract!(tollgate_openai::OpenAiProvider::OPENAI);
}

mod openai_compatible {
    openai_contract!(tollgate_openai::OpenAiProvider::COMPATIBLE);
}
