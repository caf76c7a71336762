//! The provider contract kit (`tollgate-testkit`) against Perplexity's wire format:
//! OpenAI's Chat Completions shapes on the `perplexity` preset.

tollgate_testkit::provider_contract_tests!(tollgate_openai::testkit::OpenAiWire::new(tollgate_perplexity::PROVIDER);
    skip {
        a_context_window_stop_is_typed_and_names_the_model:
            "Perplexity has no full-window stop reason",
        rate_limit_headers_set_the_limiter_buckets:
            "Perplexity documents no rate-limit headers: the preset reads none",
        embeddings_are_sent_in_batches_of_max_batch_one_reservation_each:
            "the preset has no embeddings path",
        a_failed_embeddings_request_is_resent_alone: "the preset has no embeddings path",
        an_embeddings_request_carries_the_purpose_and_the_width:
            "the preset has no embeddings path",
        the_secret_never_shows_in_embeddings_errors: "the preset has no embeddings path",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (Perplexity has none); the overflow error is checked",
    }
);
