//! One deadline per call: a bounded job's `max_wait` covers every wait of a call together
//! (the job's own buckets and the model's, the queue, a grant pushed back while queued,
//! the sleeps before retries), and past it the call is answered `WouldWait` as soon as
//! that is known. On tokio's paused clock, with the fake provider.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tollgate::catalog::Limits;
use tollgate::clock;
use tollgate::limit::{Burst, Cost, Feedback, LimiterConfig, TokenBucketRateLimiter};
use tollgate::pipeline::{FallbackOptions, PipelineConfig, RetryPolicy};
use tollgate::{Catalog, Conversation, Error, JobContext, LlmRequest, ModelEntry, Models};
use tollgate::{ProviderError, SamplingParams, StreamEvent};
use tollgate_fake::{FakeProvider, FakeReply, Fault};

/// Model `m`: one request a second, no arrival allowance (the bucket's arithmetic alone).
fn models(fake: &FakeProvider, retry: RetryPolicy) -> Models {
    models_at(fake, 60, retry)
}

/// Model `m` at `rpm`, its bucket holding one second's worth.
fn models_at(fake: &FakeProvider, rpm: u64, retry: RetryPolicy) -> Models {
    build(fake, vec![entry("m", rpm)], retry)
}

/// Model `id` at `rpm`, no arrival allowance (the bucket's arithmetic alone), its
/// bucket holding one second's worth.
fn entry(id: &str, rpm: u64) -> ModelEntry {
    let mut entry = ModelEntry::new(id, "fake", format!("fake-{id}"))
        .with_output_tokens(16, 16)
        .with_limits(Limits {
            rpm,
            ..Limits::default()
        })
        .with_arrival_allowance_ms(0);
    entry.burst_seconds = Some(1);
    entry
}

fn build(fake: &FakeProvider, entries: Vec<ModelEntry>, retry: RetryPolicy) -> Models {
    let catalog = entries
        .into_iter()
        .fold(Catalog::builder(), |b, e| b.model(e))
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .pipeline(PipelineConfig {
            retry,
            ..PipelineConfig::default()
        })
        .build()
        .unwrap()
}

fn seeded() -> RetryPolicy {
    RetryPolicy {
        jitter_seed: Some(11),
        ..RetryPolicy::default()
    }
}

fn ask() -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request("m", SamplingParams::new())
        .unwrap()
}

/// A job's own buckets (a gateway key's `rpm = 60`): one request a second.
fn own_buckets() -> Arc<TokenBucketRateLimiter> {
    let limits = Limits {
        rpm: 60,
        ..Limits::default()
    };
    Arc::new(TokenBucketRateLimiter::new(
        LimiterConfig::new("key:k", limits)
            .with_burst(Burst::Seconds(1))
            .with_arrival_allowance(Duration::ZERO),
    ))
}

async fn answer(models: &Models, job: Option<JobContext>) -> tollgate::Result<String> {
    let models = match job {
        Some(job) => models.for_job(job),
        None => models.clone(),
    };
    let chat = models.chat("m").await?;
    Ok(chat.single_response(&ask()).await?.text())
}

/// A fake whose next answer on `m` is a 429 with `retry_after`, then "ok".
fn limited_once(retry_after: Duration) -> FakeProvider {
    let fake = FakeProvider::new();
    let retry_after = Some(retry_after);
    fake.fail("m", Fault::RateLimited { retry_after });
    fake.reply_any(FakeReply::text("ok"));
    fake
}

fn would_wait(result: tollgate::Result<impl std::fmt::Debug>) -> Duration {
    match result {
        Err(Error::WouldWait { ready_in }) => ready_in,
        other => panic!("expected WouldWait, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn max_wait_bounds_the_keys_bucket_and_the_models_together_answering_at_once() {
    let fake = FakeProvider::new();
    for _ in 0..3 {
        fake.reply_any(FakeReply::text("ok"));
    }
    let models = models(&fake, seeded());
    let own = own_buckets();
    let keyed = JobContext::new("key:k", 4).with_limiter(own.clone());
    // Both buckets spent at t = 0.
    answer(&models, Some(keyed.clone())).await.unwrap();
    // Another client queues on the model: it takes the model's refill at t = 1.
    let other = {
        let models = models.clone();
        tokio::spawn(async move { answer(&models, None).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Bound 1.5 s: the key's bucket alone is 0.9 s away, and at t = 1 the model's is
    // 1 s away; together 1.9 s, past the bound.
    let bound = Duration::from_millis(1500);
    let started = clock::now();
    let ready_in = would_wait(answer(&models, Some(keyed.with_max_wait(bound))).await);
    // Answered when the model's estimate was known (the key's wait done), not after it.
    assert_eq!(started.elapsed(), Duration::from_millis(900));
    assert!(
        ready_in > bound - Duration::from_millis(900),
        "{ready_in:?}"
    );
    assert!(ready_in <= Duration::from_secs(1), "{ready_in:?}");
    // Its grant on the key's bucket was given back: the key can go now.
    assert!(own.try_reserve(Cost::call(0, 0)).is_ok());
    assert_eq!(other.await.unwrap().unwrap(), "ok");
    assert_eq!(fake.calls("m"), 2, "nothing was sent for the refused call");
}

#[tokio::test(start_paused = true)]
async fn max_wait_ends_a_queued_wait_pushed_back_by_a_pause_at_the_deadline() {
    let fake = FakeProvider::new();
    for _ in 0..2 {
        fake.reply_any(FakeReply::text("ok"));
    }
    let models = models(&fake, seeded());
    answer(&models, None).await.unwrap();
    let bound = Duration::from_millis(1500);
    let started = clock::now();
    // 1 s away, within the bound: it queues.
    let queued = {
        let models = models.clone();
        let job = JobContext::new("j", 4).with_max_wait(bound);
        tokio::spawn(async move { answer(&models, Some(job)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let limiter = models.limiter("m").unwrap();
    assert_eq!(limiter.snapshot().await.unwrap().queued, 1);
    // Another call's 429 pauses the model for 30 s: the queued grant is pushed back.
    limiter.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(30)),
    });
    let ready_in = would_wait(queued.await.unwrap());
    assert_eq!(
        started.elapsed(),
        bound,
        "answered at the deadline, not later"
    );
    // The limiter's fresh estimate: the rest of the pause.
    assert!(ready_in >= Duration::from_millis(28_700), "{ready_in:?}");
    assert!(ready_in <= Duration::from_secs(30), "{ready_in:?}");
    // It left the queue, holding nothing; nothing was sent.
    let snapshot = limiter.snapshot().await.unwrap();
    assert_eq!((snapshot.queued, snapshot.held), (0, 0));
    assert_eq!(fake.calls("m"), 1);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_retry_after_past_the_bound_is_would_wait_at_once_after_one_send() {
    let fake = limited_once(Duration::from_secs(30));
    let models = models(&fake, seeded());
    let job = JobContext::new("j", 4).with_max_wait(Duration::from_secs(1));
    let started = clock::now();
    let ready_in = would_wait(answer(&models, Some(job.clone())).await);
    assert_eq!(
        ready_in,
        Duration::from_secs(30),
        "the provider's retry-after"
    );
    assert_eq!(started.elapsed(), Duration::ZERO, "no sleep first");
    assert_eq!(fake.calls("m"), 1, "one send only");
    assert_eq!(job.retries_left(), 4, "no retry was spent");
}

#[tokio::test(start_paused = true)]
async fn an_upstream_retry_after_within_the_bound_is_still_retried() {
    let fake = limited_once(Duration::from_millis(1200));
    let models = models(&fake, seeded());
    let job = JobContext::new("j", 4).with_max_wait(Duration::from_secs(2));
    let started = clock::now();
    assert_eq!(answer(&models, Some(job.clone())).await.unwrap(), "ok");
    assert_eq!(started.elapsed(), Duration::from_millis(1200));
    assert_eq!((fake.calls("m"), job.retries_left()), (2, 3));
}

#[tokio::test(start_paused = true)]
async fn backoff_retries_that_would_pass_the_bound_end_with_would_wait_before_sleeping() {
    let fake = FakeProvider::new();
    fake.fail_on(|_| true, Fault::Server { status: 500 });
    // Back-off draws up to 2 s, behind a 1 s bound: some retries fit, one cannot.
    let retry = RetryPolicy {
        base_delay: Duration::from_secs(2),
        max_delay: Duration::from_secs(2),
        ..seeded()
    };
    let bound = Duration::from_secs(1);
    // The model's bucket (1,000 a second) does not pace the retries: only the back-off.
    let models = models_at(&fake, 60_000, retry);
    let job = JobContext::new("j", 10).with_max_wait(bound);
    let started = clock::now();
    let ready_in = would_wait(answer(&models, Some(job.clone())).await);
    let waited = started.elapsed();
    assert!(waited <= bound, "never slept past the bound: {waited:?}");
    assert!(waited + ready_in > bound, "{waited:?} + {ready_in:?}");
    let retries = 10 - job.retries_left();
    assert_eq!(fake.calls("m"), u64::from(retries) + 1);
}

#[tokio::test(start_paused = true)]
async fn a_streams_retry_past_the_bound_is_would_wait_before_its_first_event() {
    let fake = FakeProvider::new();
    fake.fail(
        "m",
        Fault::Overloaded {
            retry_after: Some(Duration::from_secs(20)),
        },
    );
    fake.reply_any(FakeReply::text("ok"));
    let models = models(&fake, seeded());
    let job = JobContext::new("j", 4).with_max_wait(Duration::from_secs(1));
    let chat = models.for_job(job).chat("m").await.unwrap();
    let started = clock::now();
    let opened = chat.stream_response(&ask()).await.map(|_| ());
    assert_eq!(would_wait(opened), Duration::from_secs(20));
    assert_eq!(started.elapsed(), Duration::ZERO);
    // Unbounded, the same stream waits out the retry-after and answers.
    fake.fail(
        "m",
        Fault::Overloaded {
            retry_after: Some(Duration::from_secs(20)),
        },
    );
    fake.reply_any(FakeReply::text("ok"));
    let unbounded = models
        .for_job(JobContext::new("u", 4))
        .chat("m")
        .await
        .unwrap();
    let mut stream = unbounded.stream_response(&ask()).await.unwrap();
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        if let StreamEvent::TextDelta { text: t, .. } = event.unwrap() {
            text.push_str(&t);
        }
    }
    assert_eq!(text, "ok");
    assert!(started.elapsed() >= Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn an_unbounded_job_waits_out_a_long_retry_after_as_before() {
    let fake = limited_once(Duration::from_secs(30));
    let models = models(&fake, seeded());
    let started = clock::now();
    let job = JobContext::new("j", 4);
    assert_eq!(answer(&models, Some(job)).await.unwrap(), "ok");
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    // A 5xx without a bound ends with the provider's error, as before.
    fake.fail_on(|_| true, Fault::Server { status: 500 });
    let err = answer(&models, Some(JobContext::new("k", 1)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Server { .. })),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bounded_calls_time_with_the_provider_does_not_count_against_its_bound() {
    // Each answer takes 2 s, past the 1 s bound; the 429's 500 ms wait fits within it.
    let fake = limited_once(Duration::from_millis(500));
    fake.with_latency(Duration::from_secs(2));
    let models = models(&fake, seeded());
    let job = JobContext::new("j", 4).with_max_wait(Duration::from_secs(1));
    let started = clock::now();
    assert_eq!(answer(&models, Some(job)).await.unwrap(), "ok");
    assert_eq!(started.elapsed(), Duration::from_millis(4500));
    assert_eq!(fake.calls("m"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_fallback_chains_calls_share_one_deadline_from_its_start() {
    let fake = FakeProvider::new();
    fake.reply("m", FakeReply::text("ok"));
    fake.fail("m", Fault::RateLimited { retry_after: None });
    for _ in 0..3 {
        fake.reply_any(FakeReply::text("ok"));
    }
    let models = build(
        &fake,
        vec![entry("m", 60).with_fallbacks(["f"]), entry("f", 60)],
        seeded(),
    );
    let direct = |id: &'static str| {
        let models = models.clone();
        async move {
            let request = Conversation::new()
                .user("Hi")
                .request(id, SamplingParams::new());
            let chat = models.chat(id).await?;
            Ok::<_, Error>(chat.single_response(&request?).await?.text())
        }
    };
    // Both spent at t = 0; another client queues on `f` for its refill at t = 1.
    direct("m").await.unwrap();
    direct("f").await.unwrap();
    let other = tokio::spawn(direct("f"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Bound 1.5 s: `m` is 0.9 s away (sooner than `f`), answers 429 at t = 1, and the
    // chain moves on to a model 1 s away: past what is left of the one bound.
    let bound = Duration::from_millis(1500);
    let job = JobContext::new("j", 4).with_max_wait(bound);
    let chain = models
        .for_job(job)
        .chat_with_fallbacks("m", FallbackOptions::default())
        .await
        .unwrap();
    let started = clock::now();
    let ready_in = would_wait(chain.single_response(&ask()).await);
    assert_eq!(started.elapsed(), Duration::from_millis(900));
    assert!(
        ready_in > bound - Duration::from_millis(900),
        "{ready_in:?}"
    );
    assert_eq!(other.await.unwrap().unwrap(), "ok");
    assert_eq!((fake.calls("m"), fake.calls("f")), (2, 2));
}
