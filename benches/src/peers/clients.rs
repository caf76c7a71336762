//! The clients of benchmark 9, each driving a list of [`Job`]s through a fixed number of
//! callers against llmock:
//!
//! - tollgate: `Models` over a catalog naming llmock as the provider's `base_url`
//!   ([`catalog_toml`]), with the retry budget of `tollgate run` (8);
//! - the cookbook: [`crate::clients::cookbook::CookbookPacer`] in front of raw requests,
//!   driven the way the cookbook's script drives it ([`run_cookbook`]);
//! - naive: raw requests, and after a 429 a sleep of `retry-after-ms` (else
//!   `retry-after`), up to [`NAIVE_MAX_ATTEMPTS`] sends.
//!
//! Each returns how many of its jobs failed as the client saw it; what llmock saw comes
//! from its journal.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{
    DefaultEstimator, MESSAGE_OVERHEAD_TOKENS, PipelineConfig, REQUEST_OVERHEAD_TOKENS,
    RetryPolicy, TokenEstimator,
};
use tollgate::{Catalog, Conversation, Models, SamplingParams};
use tollgate_redis::RedisLimiters;
use tollgate_sim::{SimLimits, SimRequest};

use super::oracle::BucketLimits;
use super::wire::{Dialect, Job, RawAnswer, Target, send};
use crate::clients::cookbook::CookbookPacer;

// The provider crates tollgate's catalogs name (linked, so their keys are known).
use tollgate_anthropic as _;
use tollgate_gemini as _;
use tollgate_openai as _;

/// The naive client's sends per request, at most.
pub const NAIVE_MAX_ATTEMPTS: u32 = 100;
/// The cookbook script's `max_attempts`.
pub const COOKBOOK_ATTEMPTS: u32 = 5;
/// tollgate's retries per call: `tollgate run`'s default.
pub const TOLLGATE_RETRIES: u32 = 8;
/// The wait after a failure that is not a 429 (naive, cookbook).
const FAILURE_WAIT: Duration = Duration::from_secs(1);

/// The jobs left, taken in file order by every caller.
type Queue = Arc<Mutex<VecDeque<Job>>>;

fn queue(jobs: Vec<Job>) -> Queue {
    Arc::new(Mutex::new(jobs.into()))
}

fn next(queue: &Queue) -> Option<Job> {
    queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
}

/// Runs `callers` copies of `work` to the end; the failures they count.
async fn callers<F, Fut>(callers: usize, work: F) -> usize
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = usize> + Send + 'static,
{
    let tasks: Vec<_> = (0..callers.max(1)).map(|_| tokio::spawn(work())).collect();
    let mut failed = 0;
    for t in tasks {
        failed += t.await.unwrap_or(0);
    }
    failed
}

/// The naive client: `concurrency` callers, each sending the next job until accepted.
pub async fn run_naive(target: &Target, jobs: Vec<Job>, concurrency: usize) -> usize {
    let (http, queue) = (super::wire::http_client(), queue(jobs));
    callers(concurrency, || {
        let (http, queue, target) = (http.clone(), queue.clone(), target.clone());
        async move {
            let mut failed = 0;
            while let Some(job) = next(&queue) {
                let mut accepted = false;
                for _ in 0..NAIVE_MAX_ATTEMPTS {
                    match send(&http, &target, &job).await {
                        RawAnswer::Ok => {
                            accepted = true;
                            break;
                        }
                        RawAnswer::RateLimited(wait) => {
                            tokio::time::sleep(wait.unwrap_or(FAILURE_WAIT)).await;
                        }
                        RawAnswer::Failed(_) => tokio::time::sleep(FAILURE_WAIT).await,
                    }
                }
                failed += usize::from(!accepted);
            }
            failed
        }
    })
    .await
}

/// The tokens the cookbook's script counts for a job: its prompt (tollgate's estimator
/// standing in for tiktoken, with the same per-request and per-message overheads) plus
/// `max_tokens`.
pub fn cookbook_tokens(job: &Job) -> u64 {
    REQUEST_OVERHEAD_TOKENS
        + MESSAGE_OVERHEAD_TOKENS
        + DefaultEstimator.estimate_text(&job.prompt)
        + job.max_tokens
}

/// The cookbook's parallel processor: one dispatcher takes the next job (retries first),
/// waits until the pacer's capacities (told `limits`) cover it, and starts it; at most
/// `concurrency` in flight. A 429 pauses everyone 15 s and puts the job back, up to
/// [`COOKBOOK_ATTEMPTS`] sends.
pub async fn run_cookbook(
    target: &Target,
    jobs: Vec<Job>,
    concurrency: usize,
    limits: BucketLimits,
) -> usize {
    let http = super::wire::http_client();
    let pacer = Arc::new(CookbookPacer::new(SimLimits {
        rpm: limits.rpm.unwrap_or(0),
        input_tpm: limits.tpm.unwrap_or(0),
        output_tpm: 0,
    }));
    let slots = Arc::new(Semaphore::new(concurrency.max(1)));
    let retries: Arc<Mutex<VecDeque<(Job, u32)>>> = Arc::default();
    let mut fresh: VecDeque<Job> = jobs.into();
    let mut tasks = Vec::new();
    loop {
        let permit = slots.clone().acquire_owned().await.expect("open");
        let retry = retries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        let (job, left) = match retry.or_else(|| fresh.pop_front().map(|j| (j, COOKBOOK_ATTEMPTS)))
        {
            Some(item) => item,
            None if slots.available_permits() + 1 >= concurrency.max(1) => break,
            None => {
                // Nothing to send until an answer comes back (a retry, or the end).
                drop(permit);
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        pacer
            .acquire(SimRequest::new(cookbook_tokens(&job), 0, 0))
            .await;
        let (http, target, pacer, retries) =
            (http.clone(), target.clone(), pacer.clone(), retries.clone());
        tasks.push(tokio::spawn(async move {
            // The permit is given back last, once a retry is queued: the dispatcher ends
            // when nothing is queued and every permit is back.
            let _permit = permit;
            let answer = send(&http, &target, &job).await;
            if answer == RawAnswer::Ok {
                return 0;
            }
            if matches!(answer, RawAnswer::RateLimited(_)) {
                pacer.on_rate_limited();
            }
            if left > 1 {
                retries
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back((job, left - 1));
                0
            } else {
                1
            }
        }));
    }
    let mut failed = 0;
    for t in tasks {
        failed += t.await.unwrap_or(0);
    }
    failed
}

/// The credential id of `model_id` in [`catalog_toml`] and the secret it stands for.
pub fn credential(model_id: &str, target: &Target) -> (String, String) {
    (format!("{model_id}-key"), target.api_key.clone())
}

/// A catalog with one chat model `model_id`: `target`'s provider at llmock, told
/// `limits` (its rpm and combined tpm), everything else at its default.
pub fn catalog_toml(model_id: &str, target: &Target, limits: BucketLimits) -> String {
    let mut toml = format!(
        "[models.{model_id}]\nprovider = \"{}\"\nname = \"{}\"\ncredential = \"{}\"\n\
         max_output_tokens = 4096\n",
        target.dialect.provider(),
        target.model,
        credential(model_id, target).0,
    );
    if let Some(rpm) = limits.rpm {
        toml += &format!("rpm = {rpm}\n");
    }
    if let Some(tpm) = limits.tpm {
        // Gemini's catalog limits count input only; no Gemini row limits tokens.
        let field = if target.dialect == Dialect::Gemini {
            "input_tpm"
        } else {
            "tpm"
        };
        toml += &format!("{field} = {tpm}\n");
    }
    toml += &format!(
        "[models.{model_id}.options]\nbase_url = \"{}\"\n",
        target.dialect.base_url(&target.llmock)
    );
    toml
}

/// `Models` for [`catalog_toml`], with `tollgate run`'s retry budget and, if given, a
/// shared limiter backend.
pub fn models(
    model_id: &str,
    target: &Target,
    limits: BucketLimits,
    backend: Option<RedisLimiters>,
) -> tollgate::Result<Models> {
    let (id, secret) = credential(model_id, target);
    let mut builder = Models::builder()
        .catalog(Catalog::from_toml_str(&catalog_toml(
            model_id, target, limits,
        ))?)
        .credentials(MemoryCredentialStore::new().with(id, secret))
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                default_retries: TOLLGATE_RETRIES,
                ..RetryPolicy::default()
            },
            ..PipelineConfig::default()
        });
    if let Some(backend) = backend {
        builder = builder.limiter_backend(backend);
    }
    builder.build()
}

/// tollgate: `concurrency` callers, each sending the next job through `models`.
pub async fn run_tollgate(
    models: &Models,
    model_id: &str,
    jobs: Vec<Job>,
    concurrency: usize,
) -> usize {
    let queue = queue(jobs);
    callers(concurrency, || {
        let (models, queue, id) = (models.clone(), queue.clone(), model_id.to_owned());
        async move {
            let mut failed = 0;
            let Ok(chat) = models.chat(&id).await else {
                return queue.lock().map_or(0, |q| q.len());
            };
            while let Some(job) = next(&queue) {
                let request = SamplingParams::new()
                    .with_max_output_tokens(job.max_tokens)
                    .and_then(|p| {
                        Conversation::new()
                            .user(job.prompt.as_str())
                            .request(&id, p)
                    });
                let ok = match request {
                    Ok(request) => chat.single_response(&request).await.is_ok(),
                    Err(_) => false,
                };
                failed += usize::from(!ok);
            }
            failed
        }
    })
    .await
}
