//! [`provider_contract_tests!`](crate::provider_contract_tests): one test per shared
//! behaviour in the provider crate's own test binary, each held to what the crate
//! declares its script cannot show.

/// Writes one `#[tokio::test]` per shared provider behaviour (on tokio's paused clock),
/// named after it, each running that check against `$script` (an expression giving a
/// [`WireScript`](crate::provider::WireScript)).
///
/// A check that does not apply to the script (it gives no wire form for the behaviour)
/// is declared, with why, so that it is an ignored test, which `cargo test` and nextest
/// count and show as skipped instead of `ok`:
///
/// ```ignore
/// tollgate_testkit::provider_contract_tests!(MyWire;
///     skip {
///         a_refusal_is_a_provider_refusal_costed_at_its_usage: "no refusal answer",
///     }
///     partly {
///         a_reported_overflow_moves_to_a_larger_window_when_opted_in: "no full-window stop",
///     }
/// );
/// ```
///
/// - undeclared: the check must pass whole; a skip or a partial pass fails the test,
///   saying which list to add it to ([`Checked::against`](crate::provider::Checked::against));
/// - `skip { check: "why" }`: the test is `#[ignore = "why"]`, and a test
///   `the_declared_skips_still_apply` runs every declared one and fails if it checked
///   anything, so a declaration stays true when the script grows;
/// - `partly { check: "what is not checked" }`: the test runs and must pass in part
///   (not whole, not skipped), and `not_checked_in_full::check`, ignored with that
///   reason, shows the part left out as a skipped test.
///
/// A declared name that is not a kit check does not compile.
#[macro_export]
macro_rules! provider_contract_tests {
    ($script:expr) => {
        $crate::provider_contract_tests!(@define ($) $script; [] []);
    };
    ($script:expr; skip { $($s:ident : $sw:literal),* $(,)? } $(,)?) => {
        $crate::provider_contract_tests!(@define ($) $script; [$($s : $sw),*] []);
    };
    ($script:expr; partly { $($p:ident : $pw:literal),* $(,)? } $(,)?) => {
        $crate::provider_contract_tests!(@define ($) $script; [] [$($p : $pw),*]);
    };
    ($script:expr;
        skip { $($s:ident : $sw:literal),* $(,)? }
        partly { $($p:ident : $pw:literal),* $(,)? } $(,)?
    ) => {
        $crate::provider_contract_tests!(@define ($) $script; [$($s : $sw),*] [$($p : $pw),*]);
    };
    (@define ($d:tt) $script:expr;
        [$($s:ident : $sw:literal),*] [$($p:ident : $pw:literal),*]
    ) => {
        /// The script every test runs against.
        fn contract_script() -> impl $crate::provider::WireScript {
            $script
        }

        /// One test: ignored if declared skipped, held to its declaration.
        macro_rules! __tollgate_contract_test {
            $(
                ($s) => {
                    #[tokio::test(start_paused = true)]
                    #[ignore = $sw]
                    async fn $s() {
                        $crate::provider::checks::$s(&contract_script())
                            .await
                            .expect(stringify!($s), $crate::provider::Declared::Skipped);
                        $crate::provider::assert_no_task_left().await;
                    }
                };
            )*
            $(
                ($p) => {
                    #[tokio::test(start_paused = true)]
                    async fn $p() {
                        $crate::provider::checks::$p(&contract_script())
                            .await
                            .expect(stringify!($p), $crate::provider::Declared::Partly);
                        $crate::provider::assert_no_task_left().await;
                    }
                };
            )*
            ($d name:ident) => {
                #[tokio::test(start_paused = true)]
                async fn $d name() {
                    $crate::provider::checks::$d name(&contract_script())
                        .await
                        .expect(stringify!($d name), $crate::provider::Declared::Whole);
                    $crate::provider::assert_no_task_left().await;
                }
            };
        }

        __tollgate_contract_test!(a_good_answer_is_decoded_recorded_and_costed);
        __tollgate_contract_test!(the_credential_is_read_from_the_store_on_every_call);
        __tollgate_contract_test!(rate_limit_headers_set_the_limiter_buckets);
        __tollgate_contract_test!(request_errors_keep_their_status_and_are_sent_once);
        __tollgate_contract_test!(status_408_is_a_timeout_retried_then_answered);
        __tollgate_contract_test!(server_errors_keep_their_status_and_are_retried_then_answered);
        __tollgate_contract_test!(status_529_is_overloaded_and_retried);
        __tollgate_contract_test!(status_429_is_rate_limited_with_its_retry_after);
        __tollgate_contract_test!(retry_after_on_a_503_is_kept);
        __tollgate_contract_test!(x_should_retry_false_vetoes_the_retry);
        __tollgate_contract_test!(quota_exhausted_is_final_and_names_the_provider);
        __tollgate_contract_test!(a_refusal_is_a_provider_refusal_costed_at_its_usage);
        __tollgate_contract_test!(a_context_overflow_is_typed_and_names_the_model);
        __tollgate_contract_test!(a_context_window_stop_is_typed_and_names_the_model);
        __tollgate_contract_test!(a_reported_overflow_moves_to_a_larger_window_when_opted_in);
        __tollgate_contract_test!(a_connection_closed_before_the_answer_is_retried);
        __tollgate_contract_test!(a_refused_connection_is_retryable);
        __tollgate_contract_test!(a_good_stream_reaches_the_reader_and_completes);
        __tollgate_contract_test!(a_stream_dropped_before_its_first_event_is_retried);
        __tollgate_contract_test!(a_stream_ended_before_its_first_event_is_retried);
        __tollgate_contract_test!(a_stream_dropped_after_its_first_event_is_interrupted_not_resent);
        __tollgate_contract_test!(a_stream_ended_early_after_its_first_event_is_interrupted);
        __tollgate_contract_test!(an_error_event_before_the_first_event_is_retried);
        __tollgate_contract_test!(an_error_event_after_the_first_event_interrupts_the_stream);
        __tollgate_contract_test!(a_stream_answered_with_an_error_status_is_that_typed_error);
        __tollgate_contract_test!(the_secret_never_shows_in_errors_logs_debug_or_records);
        __tollgate_contract_test!(the_secret_never_shows_in_embeddings_errors);
        __tollgate_contract_test!(an_empty_stored_key_redacts_nothing);
        __tollgate_contract_test!(a_malformed_answer_is_retried_then_answered);
        __tollgate_contract_test!(a_malformed_stream_event_is_retried_before_the_first_event_only);
        __tollgate_contract_test!(an_answer_larger_than_the_models_cap_fails_typed);
        __tollgate_contract_test!(a_stream_event_larger_than_the_models_cap_fails_typed);
        __tollgate_contract_test!(a_429_storm_is_waited_out_then_answered);
        __tollgate_contract_test!(a_429_storm_longer_than_the_budget_ends_rate_limited);
        __tollgate_contract_test!(a_burst_of_server_errors_is_retried_then_answered);
        __tollgate_contract_test!(a_slow_drip_is_cut_by_the_idle_timeout);
        __tollgate_contract_test!(a_tool_call_is_decoded_whole_with_its_id_name_and_input);
        __tollgate_contract_test!(a_streamed_tool_call_arrives_in_deltas_indexed_by_its_block);
        __tollgate_contract_test!(embeddings_are_sent_in_batches_of_max_batch_one_reservation_each);
        __tollgate_contract_test!(a_failed_embeddings_request_is_resent_alone);
        __tollgate_contract_test!(an_embeddings_request_carries_the_purpose_and_the_width);
        __tollgate_contract_test!(a_stalled_stream_times_out_retried_before_the_first_event_only);
        __tollgate_contract_test!(every_request_setting_is_written_or_refused_by_type);

        $crate::provider_contract_tests!(@skips_hold [$($s),*]);
        $crate::provider_contract_tests!(@not_checked [$($p : $pw),*]);
    };
    (@skips_hold []) => {};
    (@skips_hold [$($s:ident),+]) => {
        /// Every check declared in `skip { … }` still checks nothing: a script that
        /// now has the wire form fails here until its declaration goes.
        #[tokio::test(start_paused = true)]
        async fn the_declared_skips_still_apply() {
            $(
                $crate::provider::checks::$s(&contract_script())
                    .await
                    .expect(stringify!($s), $crate::provider::Declared::Skipped);
            )+
            $crate::provider::assert_no_task_left().await;
        }
    };
    (@not_checked []) => {};
    (@not_checked [$($p:ident : $pw:literal),+]) => {
        /// The parts of the checks declared in `partly { … }` that nothing checks, one
        /// ignored test each (counted as skipped); run (`--ignored`), each is its check
        /// held to the declaration again.
        mod not_checked_in_full {
            $(
                #[tokio::test(start_paused = true)]
                #[ignore = $pw]
                async fn $p() {
                    $crate::provider::checks::$p(&super::contract_script())
                        .await
                        .expect(stringify!($p), $crate::provider::Declared::Partly);
                    $crate::provider::assert_no_task_left().await;
                }
            )+
        }
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
