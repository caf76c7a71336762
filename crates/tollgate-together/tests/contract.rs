//! The provider contract kit (`tollgate-testkit`) against Together's wire format:
//! OpenAI's Chat Completions shapes on the `together` preset.

tollgate_testkit::provider_contract_tests!(tollgate_openai::testkit::OpenAiWire::new(tollgate_together::PROVIDER);
    skip {
        a_context_window_stop_is_typed_and_names_the_model:
            "Together has no full-window stop reason",
        rate_limit_headers_set_the_limiter_buckets:
            "Together's rate-limit headers count per second, which no per-minute dimension \
             holds: the preset reads none (tests/together.rs checks they stay unread)",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (Together has none); the overflow error is checked",
        an_embeddings_request_carries_the_purpose_and_the_width:
            "the purpose (Together's embeddings take none); the width is checked",
    }
);
