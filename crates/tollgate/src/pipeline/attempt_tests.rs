//! The attempt loop's bounds: `max_wait` on the model's limiter and on the job's own
//! buckets ([`JobContext::with_limiter`]).

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::Limits;
use crate::limit::{Burst, LimiterConfig, TokenBucketRateLimiter};
use crate::pipeline::{ChatTransport, JobContext, Signals};
use crate::provider::{Provider, ProviderContext, ProviderTransports};
use crate::{
    Catalog, Error, LlmRequest, LlmResponse, Message, ModelEntry, Models, ResponseBody,
    ResponseStream, Result, SamplingParams, StopReason, Usage,
};

/// A provider whose one chat model answers "ok" at once.
#[derive(Debug)]
struct Echo;

#[async_trait::async_trait]
impl Provider for Echo {
    fn key(&self) -> &'static str {
        "echo"
    }
    async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Echo))
    }
}

impl ProviderTransports for Echo {
    fn chat(&self, _: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(Echo))
    }
}

#[async_trait::async_trait]
impl ChatTransport for Echo {
    async fn send(&self, _: &LlmRequest, _: &Signals) -> Result<LlmResponse> {
        LlmResponse::new(ResponseBody {
            model: "echo-1".into(),
            content: vec![crate::Block::text("ok")],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            refusal: None,
        })
    }
    async fn send_stream(&self, _: &LlmRequest, _: &Signals) -> Result<ResponseStream> {
        Err(Error::Cancelled)
    }
}

/// One request a second, so a second call right after the first would wait ~1 s.
fn models() -> Models {
    models_at(60)
}

/// Model `m` at `rpm` requests a minute, enforced per second.
fn models_at(rpm: u64) -> Models {
    let known = crate::catalog::KnownProviders::empty().with("echo", "tests", false);
    let catalog = Catalog::from_toml_str_with(
        &format!(
            r#"
        [models.m]
        provider = "echo"
        name = "echo-1"
        rpm = {rpm}
        burst_seconds = 1
        arrival_allowance_ms = 0
        max_output_tokens = 16
        "#
        ),
        &known,
    )
    .unwrap();
    Models::builder()
        .catalog(catalog)
        .provider(Echo)
        .build()
        .unwrap()
}

fn request() -> LlmRequest {
    LlmRequest::new(
        "m",
        vec![Message::user("hi")],
        vec![],
        SamplingParams::new(),
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn max_wait_fails_with_the_limiters_estimate_when_the_wait_is_longer() {
    let models = models();
    let chat = models.chat("m").await.unwrap();
    chat.single_response(&request()).await.unwrap();
    let bounded = models.for_job(JobContext::new("j", 0).with_max_wait(Duration::from_millis(100)));
    let err = bounded
        .chat("m")
        .await
        .unwrap()
        .single_response(&request())
        .await;
    match err {
        Err(Error::WouldWait { ready_in }) => {
            assert!(ready_in > Duration::from_millis(900), "{ready_in:?}");
            assert!(ready_in <= Duration::from_secs(1), "{ready_in:?}");
        }
        other => panic!("expected the limiter's WouldWait, got {other:?}"),
    }
    // Nothing was reserved or queued for the refused call.
    let snapshot = models.limiter("m").unwrap().snapshot().await.unwrap();
    assert_eq!((snapshot.grants, snapshot.queued, snapshot.held), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn max_wait_waits_when_the_limiters_estimate_is_within_it() {
    let models = models();
    let chat = models.chat("m").await.unwrap();
    chat.single_response(&request()).await.unwrap();
    let started = crate::clock::now();
    let bounded = models.for_job(JobContext::new("j", 0).with_max_wait(Duration::from_secs(2)));
    let answer = bounded
        .chat("m")
        .await
        .unwrap()
        .single_response(&request())
        .await;
    assert_eq!(answer.unwrap().text(), "ok");
    // It queued for the refill (paused clock: exact virtual time), then was sent.
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(
        models
            .limiter("m")
            .unwrap()
            .snapshot()
            .await
            .unwrap()
            .grants,
        2
    );
}

/// The job's own buckets: one request a second (a gateway key's `rpm = 60`).
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

#[tokio::test(start_paused = true)]
async fn job_limiter_paces_the_jobs_calls_on_its_own_buckets_below_the_models() {
    // The model allows 6,000 a minute; the job's own buckets one a second.
    let models = models_at(6000);
    let own = own_buckets();
    let job = JobContext::new("key:k", 0).with_limiter(own.clone());
    let chat = models.for_job(job).chat("m").await.unwrap();
    let started = crate::clock::now();
    chat.single_response(&request()).await.unwrap();
    chat.single_response(&request()).await.unwrap();
    // The second waited for the job's refill (paused clock: exact virtual time).
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(own.snapshot().grants, 2);
    // Settled on both: nothing is held once the calls are answered.
    assert_eq!(own.snapshot().held, 0);
    let model = models.limiter("m").unwrap().snapshot().await.unwrap();
    assert_eq!((model.grants, model.held), (2, 0));
    // A call without the job's buckets is not slowed by them.
    let free = crate::clock::now();
    models
        .chat("m")
        .await
        .unwrap()
        .single_response(&request())
        .await
        .unwrap();
    assert_eq!(free.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn job_limiter_past_max_wait_fails_with_its_estimate_holding_nothing_on_the_model() {
    let models = models_at(6000);
    let own = own_buckets();
    let job = JobContext::new("key:k", 0)
        .with_limiter(own.clone())
        .with_max_wait(Duration::from_millis(100));
    let chat = models.for_job(job).chat("m").await.unwrap();
    chat.single_response(&request()).await.unwrap();
    match chat.single_response(&request()).await {
        Err(Error::WouldWait { ready_in }) => {
            assert!(ready_in > Duration::from_millis(900), "{ready_in:?}");
            assert!(ready_in <= Duration::from_secs(1), "{ready_in:?}");
        }
        other => panic!("expected the job limiter's WouldWait, got {other:?}"),
    }
    // The refused call reserved nothing, on either limiter.
    assert_eq!((own.snapshot().grants, own.snapshot().queued), (1, 0));
    let model = models.limiter("m").unwrap().snapshot().await.unwrap();
    assert_eq!((model.grants, model.queued, model.held), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn queue_closed_ends_a_queued_wait_with_queue_closed_and_refuses_later_attempts() {
    let models = models();
    let chat = models.chat("m").await.unwrap();
    chat.single_response(&request()).await.unwrap();
    let (close, closed) = tokio::sync::watch::channel(false);
    let job = JobContext::new("j", 0).with_queue_closed(closed);
    let queued = models.for_job(job.clone()).chat("m").await.unwrap();
    let waiting = tokio::spawn(async move { queued.single_response(&request()).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        models
            .limiter("m")
            .unwrap()
            .snapshot()
            .await
            .unwrap()
            .queued,
        1
    );
    close.send_replace(true);
    assert!(matches!(waiting.await.unwrap(), Err(Error::QueueClosed)));
    let snapshot = models.limiter("m").unwrap().snapshot().await.unwrap();
    assert_eq!((snapshot.grants, snapshot.queued, snapshot.held), (1, 0, 0));
    // Once closed, a new attempt of the job fails at once, even with room.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = models.for_job(job).chat("m").await.unwrap();
    assert!(matches!(
        later.single_response(&request()).await,
        Err(Error::QueueClosed)
    ));
}
