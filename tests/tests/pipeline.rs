//! The call pipeline: every row of the failure table (DESIGN §4–5) as a test against the
//! fake provider's failure injection, on tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tollgate::catalog::{Limits, ModelEntry, Price, RateWindow};
use tollgate::clock;
use tollgate::pipeline::{
    BreakerConfig, CallRecord, JsonLinesRecorder, MemoryRecorder, Outcome, PipelineConfig,
    RetryPolicy,
};
use tollgate::{
    Catalog, Conversation, Dimension, Error, JobContext, LlmRequest, Models, ProviderError,
    ResponseShape, SamplingParams, SpendCap, StopReason, StreamEvent, Usage,
};
use tollgate_fake::{FakeProvider, FakeReply, Fault};

const SEED: u64 = 0x5eed;

fn entry(id: &str) -> ModelEntry {
    ModelEntry::new(id, "fake", format!("fake-{id}"))
        .with_output_tokens(4000, 1000)
        .with_limits(Limits {
            rpm: 600,
            tpm: 1_000_000,
            ..Limits::default()
        })
        .with_price(Price {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
            cache_write_1h: Some(6.0),
        })
}

struct Setup {
    fake: FakeProvider,
    models: Models,
    recorder: Arc<MemoryRecorder>,
}

impl Setup {
    /// One chat call through the pipeline.
    async fn send(&self, request: &LlmRequest) -> tollgate::Result<tollgate::LlmResponse> {
        self.models
            .chat(request.model_id())
            .await?
            .single_response(request)
            .await
    }
}

fn setup_with(entries: Vec<ModelEntry>, config: PipelineConfig) -> Setup {
    let fake = FakeProvider::new();
    let recorder = Arc::new(MemoryRecorder::new());
    // Timings here are the bucket's arithmetic alone: no arrival allowance.
    let catalog = entries
        .into_iter()
        .fold(Catalog::builder(), |b, e| {
            b.model(e.with_arrival_allowance_ms(0))
        })
        .build()
        .unwrap();
    let config = PipelineConfig {
        recorder: recorder.clone(),
        ..config
    };
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .pipeline(config)
        .build()
        .unwrap();
    Setup {
        fake,
        models,
        recorder,
    }
}

fn config() -> PipelineConfig {
    PipelineConfig {
        retry: RetryPolicy {
            jitter_seed: Some(SEED),
            ..RetryPolicy::default()
        },
        ..PipelineConfig::default()
    }
}

fn setup() -> Setup {
    setup_with(vec![entry("m")], config())
}

fn ask(text: &str) -> LlmRequest {
    Conversation::new()
        .user(text)
        .request("m", SamplingParams::new())
        .unwrap()
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

fn outcomes(records: &[tollgate::pipeline::AttemptRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Success => "ok".to_string(),
            Outcome::Failed { error, .. } => error.clone(),
        })
        .collect()
}

fn last_call(s: &Setup) -> CallRecord {
    s.recorder.calls().last().cloned().expect("a call record")
}

#[tokio::test(start_paused = true)]
async fn rate_limited_twice_then_success_returns_the_success_with_spaced_retries() {
    let s = setup();
    let one_second = Some(Duration::from_secs(1));
    s.fake.fail(
        "m",
        Fault::RateLimited {
            retry_after: one_second,
        },
    );
    s.fake.fail(
        "m",
        Fault::RateLimited {
            retry_after: one_second,
        },
    );
    s.fake
        .reply("m", FakeReply::text("finally").with_usage(usage(10, 2)));
    let start = clock::now();
    let answer = s.send(&ask("hi")).await.unwrap();
    assert_eq!(answer.text(), "finally");
    let attempts = s.recorder.attempts();
    assert_eq!(outcomes(&attempts), ["rate_limited", "rate_limited", "ok"]);
    // Each retry waited at least the provider's retry-after.
    assert!(
        attempts[..2]
            .iter()
            .all(|a| a.retry_in.is_some_and(|w| w >= Duration::from_secs(1)))
    );
    assert!(start.elapsed() >= Duration::from_secs(2));
    let call = last_call(&s);
    assert_eq!((call.attempts, call.outcome.clone()), (3, Outcome::Success));
}

/// A 429's `retry-after` is the wait: at rpm 30 (one request every 2 s) with the
/// throttle on, three 429s that each say "2 s" cost 6.0 s, not 2 s plus a throttled
/// refill each (2.5 s at the throttle's 0.8, 7.5 s in all).
#[tokio::test(start_paused = true)]
async fn a_429s_retry_after_is_the_wait_even_three_times_in_a_row() {
    let s = setup_with(
        vec![entry("m").with_limits(Limits {
            rpm: 30,
            tpm: 1_000_000,
            ..Limits::default()
        })],
        config(),
    );
    let two_seconds = Some(Duration::from_secs(2));
    for _ in 0..3 {
        s.fake.fail(
            "m",
            Fault::RateLimited {
                retry_after: two_seconds,
            },
        );
    }
    s.fake
        .reply("m", FakeReply::text("ok").with_usage(usage(10, 2)));
    let start = clock::now();
    s.send(&ask("hi")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(6));
    let attempts = s.recorder.attempts();
    assert_eq!(
        outcomes(&attempts),
        ["rate_limited", "rate_limited", "rate_limited", "ok"]
    );
    assert!(attempts[..3].iter().all(|a| a.retry_in == two_seconds));
    // The throttle did slow the model (one signal for the call's three 429s): the
    // retry-after overrode only the retry's own wait.
    let factor = s.models.limiter("m").unwrap().throttle_factor().unwrap();
    assert!(factor < 1.0, "{factor}");
}

/// The spend cap is held when the reservation is granted, not while waiting: ten callers
/// queued on a slow limiter (2 a minute) under a cap that fits three worst cases all
/// finish, since each holds its worst case only while in flight and settles far below
/// it. Held while waiting, seven of them failed `SpendCapExceeded` at once.
#[tokio::test(start_paused = true)]
async fn queued_calls_hold_nothing_on_the_spend_cap_so_no_sibling_fails_for_them() {
    let s = setup_with(
        vec![entry("m").with_limits(Limits {
            rpm: 2,
            tpm: 1_000_000,
            ..Limits::default()
        })],
        config(),
    );
    for _ in 0..10 {
        s.fake
            .reply("m", FakeReply::text("ok").with_usage(usage(10, 2)));
    }
    // One call's worst case, as the pipeline holds it, read while a probe call is in
    // flight (the provider answers after a second).
    s.fake.with_latency(Duration::from_secs(1));
    let probe = SpendCap::new("probe", 1.0);
    let job = s
        .models
        .for_job(JobContext::new("probe", 0).with_spend_cap(probe.clone()));
    s.fake
        .reply("m", FakeReply::text("ok").with_usage(usage(10, 2)));
    let chat = job.chat("m").await.unwrap();
    let question = ask("hi");
    let mut call = std::pin::pin!(chat.single_response(&question));
    let _ = futures::poll!(call.as_mut());
    let worst = probe.held_usd();
    assert!(worst > 0.0);
    call.await.unwrap();
    s.fake.with_latency(Duration::ZERO);

    let cap = SpendCap::new("three", 3.0 * worst);
    let job = s
        .models
        .for_job(JobContext::new("ten", 0).with_spend_cap(cap.clone()));
    let calls = (0..10).map(|_| {
        let job = job.clone();
        async move { job.chat("m").await?.single_response(&ask("hi")).await }
    });
    let start = clock::now();
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    // The limiter, not the cap, spaced them: 2 a minute after the first two.
    assert!(start.elapsed() >= Duration::from_secs(4 * 60 - 30));
    assert_eq!(cap.held_usd(), 0.0);
    assert!(cap.spent_usd() < 3.0 * worst);
}

/// A call whose worst case cannot fit the cap even with nothing in flight fails at once,
/// without waiting for the limiter.
#[tokio::test(start_paused = true)]
async fn a_call_that_cannot_fit_the_spend_cap_fails_without_queueing() {
    let s = setup_with(
        vec![entry("m").with_limits(Limits {
            rpm: 1,
            tpm: 1_000_000,
            ..Limits::default()
        })],
        config(),
    );
    s.fake
        .reply("m", FakeReply::text("ok").with_usage(usage(10, 2)));
    let job = s.models.for_job(JobContext::new("j", 0));
    job.chat("m")
        .await
        .unwrap()
        .single_response(&ask("hi"))
        .await
        .unwrap();
    // The bucket is empty for a minute now; a call that cannot fit fails at once.
    let cap = SpendCap::new("tiny", 1e-9);
    let job = s
        .models
        .for_job(JobContext::new("tiny", 0).with_spend_cap(cap));
    let start = clock::now();
    let err = job
        .chat("m")
        .await
        .unwrap()
        .single_response(&ask("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SpendCapExceeded { .. }), "{err}");
    assert_eq!(start.elapsed(), Duration::ZERO);
}

/// A call's input is estimated once, however it goes: the estimate (a tokenizer's
/// count, milliseconds on a long prompt) feeds the window check, the cost and an
/// overflow's figures, and a stream is handed over without counting again after its
/// first event has arrived.
#[tokio::test(start_paused = true)]
async fn a_calls_input_is_estimated_once_for_a_single_answer_and_a_stream() {
    let s = setup_with(vec![entry("m").with_context_window(100_000)], config());
    s.fake.reply("m", FakeReply::text("one"));
    s.send(&ask("hi")).await.unwrap();
    assert_eq!(s.fake.estimates("m"), 1);
    s.fake.reply("m", FakeReply::text("two"));
    let chat = s.models.chat("m").await.unwrap();
    let mut stream = chat.stream_response(&ask("hi")).await.unwrap();
    while let Some(event) = stream.next().await {
        event.unwrap();
    }
    assert_eq!(s.fake.estimates("m"), 2);
}

#[tokio::test(start_paused = true)]
async fn overloaded_529_is_retried_and_slows_the_model_more_than_a_429() {
    let s = setup_with(vec![entry("m"), entry("n")], config());
    s.fake
        .fail("m", Fault::Overloaded { retry_after: None })
        .reply("m", FakeReply::text("ok"));
    s.fake
        .fail("n", Fault::RateLimited { retry_after: None })
        .reply("n", FakeReply::text("ok"));
    s.send(&ask("hi")).await.unwrap();
    let ask_n = Conversation::new()
        .user("hi")
        .request("n", SamplingParams::new())
        .unwrap();
    s.models
        .chat("n")
        .await
        .unwrap()
        .single_response(&ask_n)
        .await
        .unwrap();
    let m = s
        .models
        .limiter("m")
        .unwrap()
        .snapshot()
        .await
        .unwrap()
        .rate_factor;
    let n = s
        .models
        .limiter("n")
        .unwrap()
        .snapshot()
        .await
        .unwrap()
        .rate_factor;
    assert!(m < n && n < 1.0, "529 → {m}, 429 → {n}");
}

#[tokio::test(start_paused = true)]
async fn server_error_5xx_is_retried() {
    let s = setup();
    s.fake
        .fail("m", Fault::Server { status: 503 })
        .reply("m", FakeReply::text("ok"));
    assert!(s.send(&ask("hi")).await.is_ok());
    assert_eq!(outcomes(&s.recorder.attempts()), ["server_error", "ok"]);
}

#[tokio::test(start_paused = true)]
async fn timeout_is_retried() {
    let s = setup();
    s.fake
        .fail("m", Fault::Timeout)
        .reply("m", FakeReply::text("ok"));
    assert!(s.send(&ask("hi")).await.is_ok());
    assert_eq!(outcomes(&s.recorder.attempts()), ["timeout", "ok"]);
}

#[tokio::test(start_paused = true)]
async fn attempt_deadline_passing_is_a_timeout() {
    let config = PipelineConfig {
        attempt_timeout: Duration::from_secs(5),
        ..config()
    };
    let s = setup_with(vec![entry("m")], config);
    s.fake
        .reply_any(FakeReply::text("too late"))
        .with_latency(Duration::from_secs(30));
    let job = s.models.for_job(JobContext::new("j", 0));
    let start = clock::now();
    let err = job
        .chat("m")
        .await
        .unwrap()
        .single_response(&ask("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Timeout { after: Some(d) }) if d == Duration::from_secs(5)),
        "{err}"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn request_error_4xx_is_never_retried() {
    let s = setup();
    s.fake
        .fail(
            "m",
            Fault::RequestError {
                status: 400,
                message: "bad".into(),
            },
        )
        .reply("m", FakeReply::text("ok"));
    let err = s.send(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, Error::ProviderRequest(ref r) if r.status == 400),
        "{err}"
    );
    assert_eq!(s.fake.calls("m"), 1);
}

#[tokio::test(start_paused = true)]
async fn quota_exhausted_fails_at_once_and_is_never_retried() {
    let s = setup();
    s.fake
        .fail("m", Fault::QuotaExhausted)
        .reply("m", FakeReply::text("ok"));
    let start = clock::now();
    let err = s.send(&ask("hi")).await.unwrap_err();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
    assert_eq!((s.fake.calls("m"), start.elapsed()), (1, Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn refusal_is_never_retried_on_that_model() {
    let s = setup();
    s.fake.fail(
        "m",
        Fault::Refusal {
            category: "cyber".into(),
            explanation: "no".into(),
        },
    );
    s.fake.reply("m", FakeReply::text("ok"));
    let err = s.send(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, Error::ProviderRefusal { ref category, .. } if category == "cyber"),
        "{err}"
    );
    assert_eq!(s.fake.calls("m"), 1);
    // A refusal reported as a stop reason becomes the same error.
    let s = setup();
    s.fake.reply(
        "m",
        FakeReply::text("I can't help with that.").with_stop(StopReason::Refusal),
    );
    s.fake.reply("m", FakeReply::text("ok"));
    let err = s.send(&ask("again")).await.unwrap_err();
    assert!(matches!(err, Error::ProviderRefusal { .. }), "{err}");
}

#[tokio::test(start_paused = true)]
async fn truncated_answer_is_rerun_once_at_the_ceiling() {
    let s = setup();
    s.fake
        .fail("m", Fault::Truncated)
        .reply("m", FakeReply::text("complete"));
    let answer = s.send(&ask("essay")).await.unwrap();
    assert_eq!(answer.text(), "complete");
    let sent = s.fake.requests();
    assert_eq!(
        sent[0].sampling_params().max_output_tokens(),
        Some(1000),
        "the catalog default first"
    );
    assert_eq!(
        sent[1].sampling_params().max_output_tokens(),
        Some(4000),
        "then the ceiling"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_that_keeps_truncated_answers_gets_the_cut_off_answer_after_one_send() {
    let s = setup();
    s.fake.fail("m", Fault::Truncated);
    let request = Conversation::new()
        .user("essay")
        .request("m", SamplingParams::new().with_truncated_answers())
        .unwrap();
    let answer = s.send(&request).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::MaxTokens);
    assert_eq!(s.fake.calls("m"), 1, "sent once, not again at the ceiling");
    // At the ceiling too: the cut-off answer, not OutputTruncated.
    s.fake.fail("m", Fault::Truncated);
    let request = Conversation::new()
        .user("essay")
        .request(
            "m",
            SamplingParams::new()
                .with_max_output_tokens(4000)
                .unwrap()
                .with_truncated_answers(),
        )
        .unwrap();
    let answer = s.send(&request).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::MaxTokens);
}

#[tokio::test(start_paused = true)]
async fn answer_truncated_at_the_ceiling_fails_output_truncated() {
    let s = setup();
    s.fake
        .fail("m", Fault::Truncated)
        .fail("m", Fault::Truncated);
    let err = s.send(&ask("essay")).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutputTruncated {
                max_output_tokens: 4000,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(s.fake.calls("m"), 2, "re-run once, not more");
    // A request already at the ceiling is not re-run at all.
    s.fake.fail("m", Fault::Truncated);
    let at_ceiling = ask("essay").with_max_output_tokens(4000).unwrap();
    let err = s.send(&at_ceiling).await.unwrap_err();
    assert!(matches!(err, Error::OutputTruncated { .. }), "{err}");
    assert_eq!(s.fake.calls("m"), 3);
}

fn shaped() -> LlmRequest {
    let shape = ResponseShape {
        name: "count".into(),
        schema: json!({"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}})
            .into(),
        strict: Some(true),
    };
    Conversation::new()
        .user("count")
        .request("m", SamplingParams::new().with_response_shape(shape))
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn answer_failing_its_shape_is_sent_back_with_what_was_wrong() {
    let s = setup();
    s.fake
        .reply("m", FakeReply::text(r#"{"n": "three"}"#))
        .reply("m", FakeReply::text(r#"{"n": 3}"#));
    let answer = s.send(&shaped()).await.unwrap();
    assert_eq!(answer.text(), r#"{"n": 3}"#);
    let correction = &s.fake.requests()[1];
    let last = correction.turns().last().unwrap().text();
    assert!(last.contains("/n") && last.contains("count"), "{last}");
    assert_eq!(
        correction.turns()[1].text(),
        r#"{"n": "three"}"#,
        "the model sees its own answer"
    );
}

#[tokio::test(start_paused = true)]
async fn answer_still_failing_its_shape_after_max_corrections_fails_shape_invalid() {
    let s = setup();
    for _ in 0..3 {
        s.fake.reply("m", FakeReply::text("not json"));
    }
    let err = s.send(&shaped()).await.unwrap_err();
    assert!(
        matches!(err, Error::ShapeInvalid { ref errors } if errors[0].contains("not JSON")),
        "{err}"
    );
    assert_eq!(
        s.fake.calls("m"),
        1 + tollgate::pipeline::MAX_CORRECTIONS as u64
    );
}

#[tokio::test(start_paused = true)]
async fn call_too_large_for_the_bucket_fails_before_sending() {
    let small = entry("m").with_limits(Limits {
        tpm: 500,
        ..Limits::default()
    });
    let s = setup_with(vec![small], config());
    let err = s.send(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLargeForBucket {
                dimension: Dimension::Tokens,
                capacity: 500,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(s.fake.calls("m"), 0);
}

#[tokio::test(start_paused = true)]
async fn spend_cap_stops_the_call_before_sending() {
    let s = setup();
    s.fake.reply_any(FakeReply::text("ok"));
    // Worst case: ~5 input tokens at $6/M plus 1000 output at $15/M ≈ $0.015.
    let job = s
        .models
        .for_job(JobContext::new("cheap", 3).with_spend_cap(SpendCap::new("cheap", 0.01)));
    let err = job
        .chat("m")
        .await
        .unwrap()
        .single_response(&ask("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::SpendCapExceeded { ref cap, .. } if cap == "cheap"),
        "{err}"
    );
    assert_eq!(s.fake.calls("m"), 0);
}

#[tokio::test(start_paused = true)]
async fn spend_cap_is_settled_at_the_actual_cost() {
    let s = setup();
    s.fake
        .reply("m", FakeReply::text("ok").with_usage(usage(1000, 100)));
    let cap = SpendCap::new("workflow", 1.0);
    let job = s
        .models
        .for_job(JobContext::new("j", 3).with_spend_cap(cap.clone()));
    job.chat("m")
        .await
        .unwrap()
        .single_response(&ask("hi"))
        .await
        .unwrap();
    let actual = (1000.0 * 3.0 + 100.0 * 15.0) / 1e6;
    assert!(
        (cap.spent_usd() - actual).abs() < 1e-12,
        "{}",
        cap.spent_usd()
    );
    assert_eq!(cap.held_usd(), 0.0);
    assert!((last_call(&s).cost_usd.unwrap() - actual).abs() < 1e-12);
}

#[tokio::test(start_paused = true)]
async fn circuit_opens_after_repeated_failures_and_fails_fast() {
    let config = PipelineConfig {
        breaker: BreakerConfig {
            consecutive_failures: 3,
            ..BreakerConfig::default()
        },
        ..config()
    };
    let s = setup_with(vec![entry("m")], config);
    for _ in 0..10 {
        s.fake.fail("m", Fault::Server { status: 500 });
    }
    let job = s.models.for_job(JobContext::new("j", 10));
    let err = job
        .chat("m")
        .await
        .unwrap()
        .single_response(&ask("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CircuitOpen { .. }), "{err}");
    assert_eq!(s.fake.calls("m"), 3, "no send after the circuit opened");
    // After the cool-off one probe goes through; its success closes the circuit.
    tokio::time::sleep(Duration::from_secs(30)).await;
    // The queue still holds 7 server errors: the probe fails and re-opens the circuit.
    let probe = s
        .models
        .for_job(JobContext::new("k", 0))
        .chat("m")
        .await
        .unwrap();
    let err = probe.single_response(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Server { .. })),
        "{err}"
    );
    assert_eq!(s.fake.calls("m"), 4, "the probe was sent");
    assert!(s.models.breaker("m").unwrap().is_open());
    // After another cool-off, a successful probe closes it (a matching rule answers
    // before the queued errors).
    tokio::time::sleep(Duration::from_secs(30)).await;
    s.fake.on(|_| true, FakeReply::text("healthy again"));
    assert_eq!(
        probe.single_response(&ask("hi")).await.unwrap().text(),
        "healthy again"
    );
    assert!(!s.models.breaker("m").unwrap().is_open());
}

#[tokio::test(start_paused = true)]
async fn stream_failing_before_its_first_event_is_retried() {
    let s = setup();
    s.fake
        .fail("m", Fault::Overloaded { retry_after: None })
        .reply("m", FakeReply::text("a b c"));
    let stream = s
        .models
        .chat("m")
        .await
        .unwrap()
        .stream_response(&ask("hi"))
        .await
        .unwrap();
    let response = stream.into_response().await.unwrap();
    assert_eq!(response.text(), "a b c");
    assert_eq!(outcomes(&s.recorder.attempts()), ["overloaded", "ok"]);
}

#[tokio::test(start_paused = true)]
async fn stream_failing_after_its_first_delta_reports_stream_interrupted_without_repeating_text() {
    let s = setup();
    s.fake.reply(
        "m",
        FakeReply::text("one two three four").interrupted_after(2),
    );
    s.fake.reply("m", FakeReply::text("must never be sent"));
    let mut stream = s
        .models
        .chat("m")
        .await
        .unwrap()
        .stream_response(&ask("hi"))
        .await
        .unwrap();
    let mut text = String::new();
    let mut failure = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(StreamEvent::TextDelta { text: t, .. }) => text.push_str(&t),
            Ok(_) => {}
            Err(e) => failure = Some(e),
        }
    }
    assert_eq!(text, "one two ");
    match failure {
        Some(Error::StreamInterrupted {
            delivered_events: 3, // the opening usage event and two deltas
            cause,
            ..
        }) => {
            assert!(matches!(
                *cause,
                Error::Provider(ProviderError::Server { status: 502, .. })
            ));
        }
        other => panic!("expected StreamInterrupted, got {other:?}"),
    }
    assert_eq!(s.fake.calls("m"), 1, "not re-sent");
    assert!(
        matches!(last_call(&s).outcome, Outcome::Failed { ref error, .. } if error == "stream_interrupted")
    );
}

#[tokio::test(start_paused = true)]
async fn streamed_answer_settles_usage_and_time_to_first_token() {
    let s = setup();
    s.fake
        .reply("m", FakeReply::text("hello there").with_usage(usage(7, 2)))
        .with_latency(Duration::from_millis(250));
    let stream = s
        .models
        .chat("m")
        .await
        .unwrap()
        .stream_response(&ask("hi"))
        .await
        .unwrap();
    stream.into_response().await.unwrap();
    let call = last_call(&s);
    assert_eq!(
        (call.operation.as_str(), call.usage, call.outcome),
        ("chat_stream", usage(7, 2), Outcome::Success)
    );
    assert_eq!(call.time_to_first_token, Some(Duration::from_millis(250)));
}

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_the_cap_fails_with_the_wait() {
    let s = setup();
    s.fake.fail(
        "m",
        Fault::RateLimited {
            retry_after: Some(Duration::from_secs(120)),
        },
    );
    s.fake.reply("m", FakeReply::text("ok"));
    let start = clock::now();
    let err = s.send(&ask("hi")).await.unwrap_err();
    match err {
        Error::Provider(e @ ProviderError::RateLimited { .. }) => {
            assert_eq!(e.retry_after_ms(), Some(120_000))
        }
        other => panic!("expected the 429 with its wait, got {other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn x_should_retry_false_vetoes_a_retry() {
    let s = setup();
    s.fake
        .fail("m", Fault::Server { status: 500 })
        .reply("m", FakeReply::text("ok"));
    s.fake.should_retry_on("m", 1, false);
    let err = s.send(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Server { status: 500, .. })
        ),
        "{err}"
    );
    assert_eq!(s.fake.calls("m"), 1);
}

#[tokio::test(start_paused = true)]
async fn x_should_retry_true_retries_a_rejected_request() {
    let s = setup();
    s.fake
        .fail(
            "m",
            Fault::RequestError {
                status: 409,
                message: "conflict".into(),
            },
        )
        .reply("m", FakeReply::text("ok"));
    s.fake.should_retry_on("m", 1, true);
    assert!(s.send(&ask("hi")).await.is_ok());
    assert_eq!(s.fake.calls("m"), 2);
}

#[tokio::test(start_paused = true)]
async fn job_retry_budget_is_shared_by_every_call_of_the_job() {
    let s = setup();
    for _ in 0..3 {
        s.fake.fail("m", Fault::Server { status: 500 });
    }
    s.fake.reply_any(FakeReply::text("ok"));
    let job = JobContext::new("job", 2);
    let chat = s.models.for_job(job.clone()).chat("m").await.unwrap();
    // The first call spends both retries and still fails on the third error.
    assert!(chat.single_response(&ask("a")).await.is_err());
    assert_eq!(job.retries_left(), 0);
    // Another call of the same job: no retry left.
    s.fake.fail("m", Fault::Server { status: 500 });
    assert!(chat.single_response(&ask("b")).await.is_err());
    assert_eq!(s.fake.calls("m"), 4);
}

#[tokio::test(start_paused = true)]
async fn ten_jobs_refused_together_do_not_retry_together() {
    let s = setup();
    for _ in 0..10 {
        s.fake.fail("m", Fault::RateLimited { retry_after: None });
    }
    s.fake.reply_any(FakeReply::text("ok"));
    for _ in 0..10 {
        s.fake.reply_any(FakeReply::text("ok"));
    }
    let start = clock::now();
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let models = s.models.for_job(JobContext::new(format!("job-{i}"), 3));
            tokio::spawn(async move {
                models
                    .chat("m")
                    .await
                    .unwrap()
                    .single_response(&ask("hi"))
                    .await
                    .unwrap();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let mut waits: Vec<Duration> = s
        .recorder
        .attempts()
        .iter()
        .filter_map(|a| a.retry_in)
        .collect();
    assert_eq!(waits.len(), 10);
    waits.sort();
    waits.dedup();
    assert_eq!(
        waits.len(),
        10,
        "every job waits a different time: {waits:?}"
    );
    let spread = *waits.last().unwrap() - waits[0];
    assert!(
        spread >= Duration::from_millis(200),
        "retries spread over the back-off window: {waits:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn each_attempt_releases_its_reservation_and_reserves_afresh() {
    let s = setup_with(
        vec![entry("m").with_limits(Limits {
            rpm: 6,
            tpm: 1_000_000,
            ..Limits::default()
        })],
        config(),
    );
    s.fake.fail("m", Fault::RateLimited { retry_after: None });
    s.fake
        .reply("m", FakeReply::text("ok").with_usage(usage(10, 5)));
    s.send(&ask("hi")).await.unwrap();
    let snapshot = s.models.limiter("m").unwrap().snapshot().await.unwrap();
    let level = |d: Dimension| snapshot.levels.iter().find(|l| l.0 == d).unwrap().1;
    // The 429 said the provider has no request left: the requests bucket was emptied,
    // and the retry waited for one to refill (6 a minute: 10 s) and took it. Only the
    // answered send's tokens stay charged (the catalog default output limit, 1000,
    // counts as reserved, plus its input): the refused attempt's tokens came back before
    // the retry reserved afresh.
    let requests = level(Dimension::Requests);
    assert!((0.0..0.1).contains(&requests), "{snapshot:?}");
    assert_eq!(1_000_000.0 - level(Dimension::Tokens), 1010.0);
}

#[tokio::test(start_paused = true)]
async fn provider_remaining_header_lowers_the_models_bucket() {
    let s = setup();
    s.fake.report_remaining("m", Dimension::Tokens, 2_000);
    s.fake.reply("m", FakeReply::text("ok"));
    s.send(&ask("hi")).await.unwrap();
    let tokens = s
        .models
        .limiter("m")
        .unwrap()
        .snapshot()
        .await
        .unwrap()
        .levels[1]
        .1;
    assert!(tokens <= 2_000.0, "{tokens}");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_is_recorded_as_cancelled() {
    let s = setup();
    s.fake
        .reply("m", FakeReply::text("slow"))
        .with_latency(Duration::from_secs(60));
    let chat = s.models.chat("m").await.unwrap();
    let request = ask("hi");
    let call = chat.single_response(&request);
    let _ = tokio::time::timeout(Duration::from_secs(1), call).await;
    assert!(
        matches!(last_call(&s).outcome, Outcome::Failed { ref error, .. } if error == "cancelled")
    );
}

#[tokio::test(start_paused = true)]
async fn json_lines_recorder_writes_one_object_per_call_and_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let fake = FakeProvider::new();
    fake.fail("m", Fault::Server { status: 500 })
        .reply("m", FakeReply::text("ok").with_usage(usage(4, 1)));
    let recorder = Arc::new(JsonLinesRecorder::append_to(&path).unwrap());
    let catalog = Catalog::builder().model(entry("m")).build().unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake)
        .pipeline(PipelineConfig {
            recorder,
            ..config()
        })
        .build()
        .unwrap();
    models
        .chat("m")
        .await
        .unwrap()
        .single_response(&ask("hi"))
        .await
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["attempt", "attempt", "call"]);
    assert_eq!(lines[2]["attempts"], 2);
    assert_eq!(lines[2]["usage"]["input_tokens"], 4);
    assert_eq!(lines[0]["outcome"]["error"], "server_error");
}

mod fallback_chain {
    use super::*;
    use tollgate::pipeline::FallbackOptions;

    fn chain_setup() -> Setup {
        setup_with(vec![entry("m").with_fallbacks(["n"]), entry("n")], config())
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_moves_the_call_to_the_next_model_and_cools_the_first() {
        let s = chain_setup();
        s.fake.fail(
            "m",
            Fault::RateLimited {
                retry_after: Some(Duration::from_secs(20)),
            },
        );
        s.fake
            .reply("n", FakeReply::text("from n"))
            .reply("n", FakeReply::text("from n again"));
        let chat = s
            .models
            .chat_with_fallbacks("m", FallbackOptions::default())
            .await
            .unwrap();
        let start = clock::now();
        assert_eq!(
            chat.single_response(&ask("hi")).await.unwrap().text(),
            "from n"
        );
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "no waiting on the refused model"
        );
        // While m cools, calls go straight to n.
        assert_eq!(
            chat.single_response(&ask("hi")).await.unwrap().text(),
            "from n again"
        );
        assert_eq!((s.fake.calls("m"), s.fake.calls("n")), (1, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_model_whose_bucket_is_empty_is_skipped_at_once() {
        let s = chain_setup();
        s.fake.reply("n", FakeReply::text("from n"));
        let limiter = s.models.limiter("m").unwrap();
        limiter
            .try_reserve(
                tollgate::limit::Cost::call(0, 0),
                tollgate::limit::Priority::Default,
            )
            .await
            .unwrap()
            .mark_sent();
        for _ in 0..599 {
            limiter
                .try_reserve(
                    tollgate::limit::Cost::call(0, 0),
                    tollgate::limit::Priority::Default,
                )
                .await
                .unwrap()
                .mark_sent();
        }
        let chat = s
            .models
            .chat_with_fallbacks("m", FallbackOptions::default())
            .await
            .unwrap();
        let start = clock::now();
        assert_eq!(
            chat.single_response(&ask("hi")).await.unwrap().text(),
            "from n"
        );
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_model_whose_circuit_is_open_is_skipped() {
        let s = chain_setup();
        let breaker = s.models.breaker("m").unwrap();
        for _ in 0..5 {
            let e: Error = ProviderError::server(500).into();
            breaker.record(&Err(&e));
        }
        assert!(breaker.is_open());
        s.fake.reply("n", FakeReply::text("from n"));
        let chat = s
            .models
            .chat_with_fallbacks("m", FallbackOptions::default())
            .await
            .unwrap();
        assert_eq!(
            chat.single_response(&ask("hi")).await.unwrap().text(),
            "from n"
        );
        assert_eq!(s.fake.calls("m"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn refusal_moves_on_only_when_opted_in_and_never_back() {
        let s = chain_setup();
        let refusal = || Fault::Refusal {
            category: "policy".into(),
            explanation: "no".into(),
        };
        s.fake
            .fail("m", refusal())
            .reply("n", FakeReply::text("n answers"));
        let strict = s
            .models
            .chat_with_fallbacks("m", FallbackOptions::default())
            .await
            .unwrap();
        assert!(matches!(
            strict.single_response(&ask("hi")).await,
            Err(Error::ProviderRefusal { .. })
        ));
        assert_eq!(s.fake.calls("n"), 0);

        s.fake.fail("m", refusal());
        let lenient = s
            .models
            .chat_with_fallbacks(
                "m",
                FallbackOptions {
                    on_refusal: true,
                    ..FallbackOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            lenient.single_response(&ask("hi")).await.unwrap().text(),
            "n answers"
        );
        // When every model refuses, the refusal is returned; no model is asked twice.
        s.fake.fail("m", refusal()).fail("n", refusal());
        assert!(matches!(
            lenient.single_response(&ask("hi")).await,
            Err(Error::ProviderRefusal { .. })
        ));
        assert_eq!((s.fake.calls("m"), s.fake.calls("n")), (3, 2));
    }
}

#[tokio::test(start_paused = true)]
async fn call_deadline_bounds_the_whole_call_retries_included() {
    let deadline_10s = PipelineConfig {
        call_deadline: Some(Duration::from_secs(10)),
        ..config()
    };
    let s = setup_with(vec![entry("m")], deadline_10s);
    for _ in 0..10 {
        s.fake.fail(
            "m",
            Fault::RateLimited {
                retry_after: Some(Duration::from_secs(4)),
            },
        );
    }
    let start = clock::now();
    let err = s.send(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { .. })),
        "{err}"
    );
    // Attempts at 0 s, 4 s and 8 s; a fourth at 12 s would pass the 10 s deadline.
    assert_eq!(s.fake.calls("m"), 3);
    assert!(start.elapsed() < Duration::from_secs(10));
    // A slow answer is cut at what is left of the deadline.
    let s = setup_with(
        vec![entry("m")],
        PipelineConfig {
            call_deadline: Some(Duration::from_secs(3)),
            ..config()
        },
    );
    s.fake
        .reply_any(FakeReply::text("late"))
        .with_latency(Duration::from_secs(20));
    let start = clock::now();
    let err = s.send(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Timeout { .. })),
        "{err}"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn spend_cap_is_not_consumed_by_calls_that_were_never_sent() {
    let small = entry("m").with_limits(Limits {
        rpm: 1,
        tpm: 500,
        ..Limits::default()
    });
    let s = setup_with(vec![small], config());
    let cap = SpendCap::new("workflow", 1.0);
    let job = s
        .models
        .for_job(JobContext::new("j", 0).with_spend_cap(cap.clone()));
    // Too large for the bucket: refused before sending.
    assert!(matches!(
        job.send_err().await,
        Error::TooLargeForBucket { .. }
    ));
    // Cancelled while waiting in the limiter's queue.
    s.models
        .limiter("m")
        .unwrap()
        .try_reserve(
            tollgate::limit::Cost::call(0, 0),
            tollgate::limit::Priority::Default,
        )
        .await
        .unwrap()
        .mark_sent();
    let small_request = ask("hi").with_max_output_tokens(100).unwrap();
    let chat = job.chat("m").await.unwrap();
    let waiting = chat.single_response(&small_request);
    assert!(
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .is_err()
    );
    assert_eq!((cap.spent_usd(), cap.held_usd()), (0.0, 0.0));
    assert_eq!(s.fake.calls("m"), 0);
}

trait SendErr {
    async fn send_err(&self) -> Error;
}

impl SendErr for Models {
    async fn send_err(&self) -> Error {
        self.chat("m")
            .await
            .unwrap()
            .single_response(&ask("hi"))
            .await
            .unwrap_err()
    }
}

#[tokio::test(start_paused = true)]
async fn reset_headers_with_nothing_left_wait_one_refill_or_for_a_fixed_windows_reset() {
    // Continuous (the default): the reset is when the provider's bucket is full; the next
    // call goes when one request has refilled (600 rpm: 100 ms). A fixed window: at the
    // reset.
    for (window, expected) in [
        (RateWindow::Continuous, Duration::from_millis(100)),
        (RateWindow::Fixed, Duration::from_secs(12)),
    ] {
        let s = setup_with(vec![entry("m").with_window(window)], config());
        s.fake.report_remaining("m", Dimension::Requests, 0);
        s.fake
            .report_reset("m", Dimension::Requests, Duration::from_secs(12));
        s.fake
            .reply_any(FakeReply::text("one"))
            .reply_any(FakeReply::text("two"));
        s.send(&ask("hi")).await.unwrap();
        let start = clock::now();
        s.send(&ask("again")).await.unwrap();
        assert_eq!(start.elapsed(), expected, "{window:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn interrupted_stream_records_the_usage_it_reported_before_breaking() {
    let s = setup();
    s.fake.reply(
        "m",
        FakeReply::text("one two three")
            .with_usage(usage(40, 3))
            .interrupted_after(1),
    );
    let mut stream = s
        .models
        .chat("m")
        .await
        .unwrap()
        .stream_response(&ask("hi"))
        .await
        .unwrap();
    while stream.next().await.is_some() {}
    let call = last_call(&s);
    assert!(
        matches!(call.outcome, Outcome::Failed { ref error, .. } if error == "stream_interrupted")
    );
    // The input usage reported when the answer started is recorded and costed.
    assert_eq!(call.usage, usage(40, 0));
    assert!((call.cost_usd.unwrap() - 40.0 * 3.0 / 1e6).abs() < 1e-12);
}

#[tokio::test(start_paused = true)]
async fn retries_of_one_call_count_as_one_throttle_signal() {
    // One call refused three times in a row, each time after waiting the provider's
    // `retry-after` (longer than the throttle's hold-off): one refusal of our rate, one
    // cut (0.8), not three (0.51).
    let s = setup();
    let wait = Some(Duration::from_secs(3));
    for _ in 0..3 {
        s.fake.fail("m", Fault::RateLimited { retry_after: wait });
    }
    s.fake.reply("m", FakeReply::text("ok"));
    s.send(&ask("hi")).await.unwrap();
    assert_eq!(last_call(&s).attempts, 4);
    let factor = s
        .models
        .limiter("m")
        .unwrap()
        .snapshot()
        .await
        .unwrap()
        .rate_factor;
    let cut = tollgate::limit::throttle::RATE_LIMITED_BETA;
    assert!((cut..cut + 0.1).contains(&factor), "{factor}");
}

#[tokio::test(start_paused = true)]
async fn limit_headers_reach_the_limiter_through_the_pipeline() {
    // The fake reports the provider's limit (30 a minute) below the catalog's (600): the
    // bucket is capped to it, and nothing left with a reset in 60 s lets the next call go
    // after one request's refill at that rate (2 s), not at the reset.
    let s = setup();
    s.fake
        .report_limit("m", Dimension::Requests, 30)
        .report_remaining("m", Dimension::Requests, 0)
        .report_reset("m", Dimension::Requests, Duration::from_secs(60));
    s.fake
        .reply("m", FakeReply::text("a"))
        .reply("m", FakeReply::text("b"));
    s.send(&ask("hi")).await.unwrap();
    let snapshot = s.models.limiter("m").unwrap().snapshot().await.unwrap();
    let requests = snapshot
        .levels
        .iter()
        .find(|(d, _, _)| *d == Dimension::Requests)
        .unwrap();
    assert_eq!(requests.2, 30, "{snapshot:?}");
    let start = clock::now();
    s.send(&ask("hi")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}
