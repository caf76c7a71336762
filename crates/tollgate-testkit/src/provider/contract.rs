//! [`provider_contract_tests!`](crate::provider_contract_tests): one test per shared
//! behaviour in the provider crate's own test binary.

/// Writes one `#[tokio::test]` per shared provider behaviour, named after it, each
/// running that check against `$script` (an expression giving a [`WireScript`](crate::provider::WireScript)).
/// A check that does not apply to the script (it gives no wire form for the behaviour)
/// passes as a test but says `SKIPPED` and why on stderr, which `cargo test` shows
/// ([`Checked::report`](crate::provider::Checked::report)).
#[macro_export]
macro_rules! provider_contract_tests {
    ($script:expr) => {
        $crate::provider_contract_tests!(@each $script;
            a_good_answer_is_decoded_recorded_and_costed,
            the_credential_is_read_from_the_store_on_every_call,
            rate_limit_headers_set_the_limiter_buckets,
            request_errors_keep_their_status_and_are_sent_once,
            status_408_is_a_timeout_retried_then_answered,
            server_errors_keep_their_status_and_are_retried_then_answered,
            status_529_is_overloaded_and_retried,
            status_429_is_rate_limited_with_its_retry_after,
            retry_after_on_a_503_is_kept,
            x_should_retry_false_vetoes_the_retry,
            quota_exhausted_is_final_and_names_the_provider,
            a_refusal_is_a_provider_refusal_costed_at_its_usage,
            a_context_overflow_is_typed_and_names_the_model,
            a_context_window_stop_is_typed_and_names_the_model,
            a_reported_overflow_moves_to_a_larger_window_when_opted_in,
            a_connection_closed_before_the_answer_is_retried,
            a_refused_connection_is_retryable,
            a_good_stream_reaches_the_reader_and_completes,
            a_stream_dropped_before_its_first_event_is_retried,
            a_stream_ended_before_its_first_event_is_retried,
            a_stream_dropped_after_its_first_event_is_interrupted_not_resent,
            a_stream_ended_early_after_its_first_event_is_interrupted,
            an_error_event_before_the_first_event_is_retried,
            an_error_event_after_the_first_event_interrupts_the_stream,
            a_stream_answered_with_an_error_status_is_that_typed_error,
            the_secret_never_shows_in_errors_logs_debug_or_records,
            the_secret_never_shows_in_embeddings_errors,
            an_empty_stored_key_redacts_nothing,
            a_malformed_answer_is_retried_then_answered,
            a_malformed_stream_event_is_retried_before_the_first_event_only,
            an_answer_larger_than_the_models_cap_fails_typed,
            a_stream_event_larger_than_the_models_cap_fails_typed,
            a_429_storm_is_waited_out_then_answered,
            a_429_storm_longer_than_the_budget_ends_rate_limited,
            a_burst_of_server_errors_is_retried_then_answered,
            a_slow_drip_is_cut_by_the_idle_timeout,
            a_tool_call_is_decoded_whole_with_its_id_name_and_input,
            a_streamed_tool_call_arrives_in_deltas_indexed_by_its_block,
            embeddings_are_sent_in_batches_of_max_batch_one_reservation_each,
            a_failed_embeddings_request_is_resent_alone,
            an_embeddings_request_carries_the_purpose_and_the_width,
        );
        $crate::provider_contract_tests!(@paused $script;
            a_stalled_stream_times_out_retried_before_the_first_event_only,
        );
    };
    (@paused $script:expr; $($name:ident),+ $(,)?) => {
        $(
            /// On tokio's paused clock: the kit's server stalls far longer than the
            /// model's idle timeout, and the clock jumps when both wait.
            #[tokio::test(start_paused = true)]
            async fn $name() {
                $crate::provider::checks::$name(&$script)
                    .await
                    .report(stringify!($name));
                $crate::provider::assert_no_task_left().await;
            }
        )+
    };
    (@each $script:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(start_paused = true)]
            async fn $name() {
                $crate::provider::checks::$name(&$script)
                    .await
                    .report(stringify!($name));
                $crate::provider::assert_no_task_left().await;
            }
        )+
    };
}

#[cfg(test)]
mod tests {
    /// The kit's own check can fail: a task left running is caught.
    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "outlived the check")]
    async fn a_task_left_running_after_a_check_is_caught() {
        tokio::spawn(std::future::pending::<()>());
        crate::provider::assert_no_task_left().await;
    }
}
