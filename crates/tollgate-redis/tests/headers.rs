//! Rate-limit headers through the whole stack, on Redis: several "processes" (each its
//! own `Models`, `RedisLimiters` and connection) call one simulated provider over HTTP
//! through the `openai-compatible` provider. The catalog says twice what the provider
//! serves; the provider's `x-ratelimit-*` headers say its real limit, which one process
//! learns and all of them pace at (it is kept in the shared hash), so the 429s of the
//! opening burst stop.
//!
//! Real time: the processes share Redis `TIME` and the simulated provider runs on the
//! tokio clock, both real. Nothing asserts how long anything took.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{fresh_prefix, redis_url};
use tollgate::{Catalog, Conversation, Dimension, Models, SamplingParams};
use tollgate_openai as _; // links the `openai-compatible` provider
use tollgate_redis::{RedisConfig, RedisLimiters};
use tollgate_sim::http::serve;
use tollgate_sim::{
    SimCapacity, SimConfig, SimHeaderStyle, SimLatency, SimLimits, SimOutcome, SimProvider,
};

const PROCESSES: usize = 4;
/// 20 callers in all, released together: the opening burst takes the catalog's whole
/// bucket of 20, and the provider, which holds 10, refuses the rest. (More callers would
/// book slots ahead at the catalog's rate before any answer came back; a booked slot is
/// kept, whatever is learned after it, so they would meet 429s too.)
const CALLERS_PER_PROCESS: usize = 5;
/// What the provider serves: 600 a minute, enforced as 10 a second.
const SERVED_RPM: u64 = 600;
/// What the catalog says: twice as much, with a bucket of 20.
const CATALOG_RPM: u64 = 2 * SERVED_RPM;
const RUN: Duration = Duration::from_secs(4);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_learn_the_providers_limit_from_its_headers_and_the_429s_stop() {
    let Some(url) = redis_url() else { return };
    let sim = SimProvider::new(
        SimConfig::new(SimLimits {
            rpm: SERVED_RPM,
            ..SimLimits::default()
        })
        .with_capacity(SimCapacity::PerSecond)
        .with_headers(SimHeaderStyle::OpenAi)
        .with_latency(SimLatency {
            base: Duration::from_millis(100),
            per_output_token: Duration::ZERO,
            refusal: Duration::ZERO,
        }),
    );
    let server = serve(sim, 3).await.unwrap();
    let catalog = format!(
        r#"
        [models.m]
        provider = "openai-compatible"
        name = "sim"
        rpm = {CATALOG_RPM}
        burst_seconds = 1
        max_output_tokens = 16
        [models.m.options]
        base_url = "{}"
        "#,
        server.base_url()
    );
    let prefix = fresh_prefix();
    let processes: Vec<Models> = (0..PROCESSES)
        .map(|_| {
            let redis =
                RedisLimiters::new(RedisConfig::new(url.clone()).with_key_prefix(prefix.clone()))
                    .unwrap();
            Models::builder()
                .catalog(Catalog::from_toml_str(&catalog).unwrap())
                .limiter_backend(redis)
                .build()
                .unwrap()
        })
        .collect();
    let request = Conversation::new()
        .user("Hello")
        .request("m", SamplingParams::new())
        .unwrap();
    let answered: Vec<Arc<AtomicU64>> = (0..PROCESSES).map(|_| Arc::default()).collect();
    let go = Arc::new(tokio::sync::Barrier::new(PROCESSES * CALLERS_PER_PROCESS));
    let mut callers = Vec::new();
    for (models, answered) in processes.iter().zip(&answered) {
        for _ in 0..CALLERS_PER_PROCESS {
            let chat = models.chat("m").await.unwrap();
            let (request, answered, go) = (request.clone(), answered.clone(), go.clone());
            callers.push(tokio::spawn(async move {
                go.wait().await;
                let start = tollgate::clock::now();
                while start.elapsed() < RUN {
                    // A call the pipeline gave up on (retries spent) is still a call.
                    if chat.single_response(&request).await.is_ok() {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    for caller in callers {
        caller.await.unwrap();
    }

    let journal = server.sim().journal();
    let first_call = journal.first().map_or(Duration::ZERO, |c| c.at);
    let refused: Vec<Duration> = journal
        .iter()
        .filter(|c| matches!(c.outcome, SimOutcome::RateLimited { .. }))
        .map(|c| c.at)
        .collect();
    let answered: Vec<u64> = answered.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    eprintln!(
        "{} calls, {} refused at {refused:?}; answered per process {answered:?}",
        journal.len(),
        refused.len()
    );
    // Every process learned the provider's limit from Redis: a bucket of 10, not 20.
    for models in &processes {
        let snap = models.limiter("m").unwrap().snapshot().await.unwrap();
        let (_, _, capacity) = snap.levels[0];
        assert_eq!((snap.levels[0].0, capacity), (Dimension::Requests, 10));
    }
    // Only the opening burst, before the first answer said the limit, met 429s: at most
    // what the catalog's bucket holds beyond the provider's, and none in the second half.
    let catalog_extra = (CATALOG_RPM - SERVED_RPM) / 60;
    assert!(
        refused.len() as u64 <= catalog_extra,
        "{} 429s: {refused:?}",
        refused.len()
    );
    assert!(!refused.is_empty(), "the opening burst did not overshoot");
    let late: Vec<_> = refused
        .iter()
        .filter(|at| **at >= first_call + RUN / 2)
        .collect();
    assert!(late.is_empty(), "429s after convergence: {late:?}");
    assert!(
        answered.iter().all(|n| *n > 0),
        "every process was served: {answered:?}"
    );
}
