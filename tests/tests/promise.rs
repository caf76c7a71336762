//! The limiter's promise through `Models`: one backend seam (a factory per model),
//! fallbacks that use the reservation they picked with, admission carried by jobs,
//! deployments with their own buckets and cooldowns, and repeatable retries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tollgate::catalog::{Deployment, Limits, ModelEntry};
use tollgate::clock;
use tollgate::limit::{
    Admission, Cost, InProcessLimiters, LimiterBackend, LimiterConfig, LimiterFactory, Priority,
    SemaphoreResource,
};
use tollgate::pipeline::{
    AttemptRecord, FallbackOptions, MemoryRecorder, PipelineConfig, RetryPolicy,
};
use tollgate::{Catalog, Conversation, Error, JobContext, LlmRequest, Models, SamplingParams};
use tollgate_fake::{FakeProvider, FakeReply, Fault};

fn rpm(n: u64) -> Limits {
    Limits {
        rpm: n,
        ..Limits::default()
    }
}

/// Timings here are the bucket's arithmetic alone: no arrival allowance.
fn model(id: &str, limits: Limits) -> ModelEntry {
    ModelEntry::new(id, "fake", format!("fake-{id}"))
        .with_output_tokens(100, 10)
        .with_limits(limits)
        .with_arrival_allowance_ms(0)
}

fn ask(model_id: &str, text: &str) -> LlmRequest {
    Conversation::new()
        .user(text)
        .request(model_id, SamplingParams::new())
        .unwrap()
}

fn config(recorder: Arc<MemoryRecorder>) -> PipelineConfig {
    PipelineConfig {
        retry: RetryPolicy {
            jitter_seed: Some(7),
            ..RetryPolicy::default()
        },
        recorder,
        ..PipelineConfig::default()
    }
}

struct Setup {
    fake: FakeProvider,
    models: Models,
    recorder: Arc<MemoryRecorder>,
}

fn setup(entries: Vec<ModelEntry>) -> Setup {
    let fake = FakeProvider::new();
    fake.on(|_| true, FakeReply::text("ok"));
    let recorder = Arc::new(MemoryRecorder::new());
    let catalog = entries
        .into_iter()
        .fold(Catalog::builder(), |b, e| b.model(e))
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .pipeline(config(recorder.clone()))
        .build()
        .unwrap();
    Setup {
        fake,
        models,
        recorder,
    }
}

/// A factory that builds in-process limiters and remembers what it was asked for.
#[derive(Debug, Default, Clone)]
struct Counting {
    built: Arc<Mutex<Vec<String>>>,
}

impl LimiterFactory for Counting {
    fn build(&self, config: &LimiterConfig) -> tollgate::Result<Arc<dyn LimiterBackend>> {
        self.built.lock().unwrap().push(config.model_id.clone());
        InProcessLimiters.build(config)
    }
}

#[tokio::test(start_paused = true)]
async fn models_build_every_limiter_through_the_chosen_factory() {
    let catalog = Catalog::builder()
        .model(model("a", rpm(60)))
        .model(model("b", rpm(60)))
        .model(
            model("c", rpm(3))
                .with_deployment(Deployment::new("k1", "key-1"))
                .with_deployment(Deployment::new("k2", "key-2")),
        )
        .build()
        .unwrap();
    let default = Counting::default();
    let special = Counting::default();
    let models = Models::builder()
        .catalog(catalog)
        .limiter_backend(default.clone())
        .limiter_backend_for(["b"], special.clone())
        .build()
        .unwrap();
    let mut built = default.built.lock().unwrap().clone();
    built.sort();
    assert_eq!(built, ["a", "c/k1", "c/k2"]);
    assert_eq!(*special.built.lock().unwrap(), ["b"]);
    // What Models hands out is the trait object the factory built.
    assert_eq!(models.limiter("b").unwrap().model_id(), "b");
    let ids: Vec<&str> = models
        .limiters("c")
        .unwrap()
        .iter()
        .map(|l| l.model_id())
        .collect();
    assert_eq!(ids, ["c/k1", "c/k2"]);
    let snapshot = models.limiter("a").unwrap().snapshot().await.unwrap();
    assert_eq!(snapshot.levels[0].2, 60);
}

#[test]
fn limiter_backend_for_an_unknown_model_fails_naming_it() {
    let catalog = Catalog::builder()
        .model(model("a", rpm(60)))
        .build()
        .unwrap();
    let err = Models::builder()
        .catalog(catalog)
        .limiter_backend_for(["typo"], InProcessLimiters)
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownModel { model_id, .. } if model_id == "typo"),
        "{err}"
    );
}

/// Sends `n` calls at once and returns when each finished, in seconds from the start.
async fn burst(s: &Setup, model_id: &str, n: usize) -> Vec<u64> {
    let start = clock::now();
    let chat = s.models.chat(model_id).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..n {
        let chat = chat.clone();
        let request = ask(model_id, &format!("call {i}"));
        tasks.push(tokio::spawn(async move {
            chat.single_response(&request).await.unwrap();
            clock::now().duration_since(start).as_secs()
        }));
    }
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    done.sort_unstable();
    done
}

fn deployments_of(records: &[AttemptRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| r.deployment.clone().unwrap_or_default())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn deployments_two_keys_at_rpm_3_serve_6_at_once_then_2_every_20_s() {
    let s = setup(vec![
        model("m", rpm(3))
            .with_deployment(Deployment::new("a", "key-a"))
            .with_deployment(Deployment::new("b", "key-b")),
    ]);
    let done = burst(&s, "m", 12).await;
    assert_eq!(done, [0, 0, 0, 0, 0, 0, 20, 20, 40, 40, 60, 60]);
    let used = deployments_of(&s.recorder.attempts());
    assert_eq!(used.iter().filter(|d| *d == "a").count(), 6);
    assert_eq!(used.iter().filter(|d| *d == "b").count(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_model_without_deployments_is_paced_by_its_one_bucket() {
    let s = setup(vec![model("m", rpm(3))]);
    let done = burst(&s, "m", 6).await;
    assert_eq!(done, [0, 0, 0, 20, 40, 60]);
    assert!(s.recorder.attempts().iter().all(|r| r.deployment.is_none()));
}

#[tokio::test(start_paused = true)]
async fn a_429_cools_only_that_deployment_and_the_retry_goes_to_another_at_once() {
    let s = setup(vec![
        model("m", rpm(600))
            .with_deployment(Deployment::new("a", "key-a"))
            .with_deployment(Deployment::new("b", "key-b")),
    ]);
    s.fake.inject(
        "m",
        1,
        Fault::RateLimited {
            retry_after: Some(Duration::from_secs(30)),
        },
    );
    let chat = s.models.chat("m").await.unwrap();
    let start = clock::now();
    chat.single_response(&ask("m", "first")).await.unwrap();
    // The retry did not wait out key a's 30 s: key b was free.
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    for i in 0..5 {
        chat.single_response(&ask("m", &format!("next {i}")))
            .await
            .unwrap();
    }
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(
        deployments_of(&s.recorder.attempts()),
        ["a", "b", "b", "b", "b", "b", "b"]
    );
    // After the cooldown key a serves again (it is tried first).
    tokio::time::sleep(Duration::from_secs(31)).await;
    chat.single_response(&ask("m", "later")).await.unwrap();
    assert_eq!(deployments_of(&s.recorder.attempts()).last().unwrap(), "a");
}

#[tokio::test(start_paused = true)]
async fn a_deployment_takes_its_own_credential_and_options() {
    let catalog = Catalog::from_toml_str(
        r#"
        [models.m]
        provider = "fake"
        max_output_tokens = 100
        rpm = 3
        options = { region = "us-east-1" }
        [[models.m.deployments]]
        name = "east"
        credential = "key-east"
        [[models.m.deployments]]
        credential = "key-west"
        options = { region = "us-west-2" }
        "#,
    )
    .unwrap();
    let m = catalog.model("m").unwrap();
    let names: Vec<&str> = m.deployments.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["east", "key-west"]);
    let west = m.for_deployment(&m.deployments[1]);
    assert_eq!(west.credential.as_deref(), Some("key-west"));
    assert_eq!(west.options["region"].as_str(), Some("us-west-2"));
    let east = m.for_deployment(&m.deployments[0]);
    assert_eq!(east.options["region"].as_str(), Some("us-east-1"));
    assert!(east.deployments.is_empty());
}

#[test]
fn credentials_shorthand_makes_one_deployment_per_key() {
    let catalog = Catalog::from_toml_str(
        r#"
        [models.m]
        provider = "fake"
        max_output_tokens = 100
        credentials = ["key-a", "key-b"]
        "#,
    )
    .unwrap();
    let m = catalog.model("m").unwrap();
    let pairs: Vec<(&str, Option<&str>)> = m
        .deployments
        .iter()
        .map(|d| (d.name.as_str(), d.credential.as_deref()))
        .collect();
    assert_eq!(pairs, [("key-a", Some("key-a")), ("key-b", Some("key-b"))]);
}

#[test]
fn deployment_mistakes_name_the_model_and_field() {
    for (toml, field) in [
        (r#"credentials = ["k", "k"]"#, "deployments.name"),
        (r#"credentials = "k""#, "credentials"),
        (
            "[[models.m.deployments]]\ncredential = 3",
            "deployments.credential",
        ),
        (
            "[[models.m.deployments]]\nregion = \"x\"",
            "deployments.region",
        ),
    ] {
        let text = format!("[models.m]\nprovider = \"fake\"\nmax_output_tokens = 100\n{toml}\n");
        let err = Catalog::from_toml_str(&text).unwrap_err().to_string();
        assert!(err.contains("`m`") || err.contains(" m"), "{err}");
        assert!(err.contains(field), "{toml}: {err}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_carrying_an_admission_grant_uses_it_instead_of_reserving_twice() {
    let s = setup(vec![model("m", rpm(1))]);
    let semaphore = Arc::new(Semaphore::new(1));
    let admission = Admission::new(s.models.limiter("m").unwrap().clone())
        .with(SemaphoreResource::new(semaphore.clone(), 1));
    let grant = admission.admit(Cost::call(10, 10)).await.unwrap();
    assert_eq!(semaphore.available_permits(), 0);
    let job = JobContext::new("job", 2).with_admitted(grant);
    let start = clock::now();
    s.models
        .for_job(job)
        .chat("m")
        .await
        .unwrap()
        .single_response(&ask("m", "hello"))
        .await
        .unwrap();
    // At rpm 1 a second reservation would have waited a minute.
    assert_eq!(start.elapsed(), Duration::ZERO);
    let snapshot = s.models.limiter("m").unwrap().snapshot().await.unwrap();
    assert_eq!(snapshot.grants, 1);
    // The permit was held for the attempt and released with it.
    assert_eq!(semaphore.available_permits(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_re_admits_with_fresh_resources() {
    let s = setup(vec![model("m", rpm(600))]);
    s.fake.with_latency(Duration::from_secs(1));
    s.fake.inject("m", 1, Fault::Server { status: 500 });
    let semaphore = Arc::new(Semaphore::new(1));
    let admission = Admission::new(s.models.limiter("m").unwrap().clone())
        .with(SemaphoreResource::new(semaphore.clone(), 1));
    let job = JobContext::new("job", 2).with_admission(admission);
    let chat = s.models.for_job(job).chat("m").await.unwrap();
    let call = tokio::spawn(async move { chat.single_response(&ask("m", "hello")).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(semaphore.available_permits(), 0, "held during attempt 1");
    call.await.unwrap().unwrap();
    assert_eq!(s.fake.calls("m"), 2);
    assert_eq!(semaphore.available_permits(), 1);
    let snapshot = s.models.limiter("m").unwrap().snapshot().await.unwrap();
    assert_eq!(snapshot.grants, 2, "each attempt admitted afresh");
}

#[tokio::test(start_paused = true)]
async fn jobs_carry_a_priority_that_the_pipeline_reserves_at() {
    let s = setup(vec![model("m", rpm(1))]);
    let chat = s.models.chat("m").await.unwrap();
    chat.single_response(&ask("m", "drain")).await.unwrap();
    let job = JobContext::new("urgent", 0).with_priority(Priority::Interactive);
    assert_eq!(job.priority(), Priority::Interactive);
    assert_eq!(JobContext::new("j", 0).priority(), Priority::Default);
    let urgent = s.models.for_job(job).chat("m").await.unwrap();
    let start = clock::now();
    urgent.single_response(&ask("m", "now")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(60));
}

/// The class a job carries reaches the limiter: a `Batch` call queued first and an
/// `Interactive` call queued after it, on a drained model (one every 10 s, within the
/// 30 s aging), go interactive first. Were the class dropped (both `Default`, FIFO), the
/// batch call would go first.
#[tokio::test(start_paused = true)]
async fn a_jobs_class_orders_its_calls_in_the_limiters_queue() {
    let s = setup(vec![model("m", rpm(6))]);
    let chat = s.models.chat("m").await.unwrap();
    for _ in 0..6 {
        chat.single_response(&ask("m", "drain")).await.unwrap();
    }
    let start = clock::now();
    let class_call = |name: &'static str, priority: Priority| {
        let job = JobContext::new(name, 0).with_priority(priority);
        let models = s.models.for_job(job);
        tokio::spawn(async move {
            let chat = models.chat("m").await.unwrap();
            chat.single_response(&ask("m", name)).await.unwrap();
            clock::now()
        })
    };
    let batch = class_call("batch", Priority::Batch);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let interactive = class_call("interactive", Priority::Interactive);
    let (batch, interactive) = (batch.await.unwrap(), interactive.await.unwrap());
    assert_eq!(interactive - start, Duration::from_secs(10));
    assert_eq!(batch - start, Duration::from_secs(20));
}

/// One run: four distinct requests at once, each one's first send failing with a 500
/// (fewer than open the circuit);
/// returns each call's retry waits, sorted.
async fn retry_waits(seed: u64) -> Vec<Vec<Duration>> {
    let recorder = Arc::new(MemoryRecorder::new());
    let catalog = Catalog::builder()
        .model(model("m", rpm(6000)))
        .build()
        .unwrap();
    let fake = FakeProvider::new();
    fake.on(|_| true, FakeReply::text("ok"));
    for call in 1..=4 {
        fake.inject("m", call, Fault::Server { status: 500 });
    }
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                jitter_seed: Some(seed),
                ..RetryPolicy::default()
            },
            recorder: recorder.clone(),
            ..PipelineConfig::default()
        })
        .build()
        .unwrap();
    let chat = models.chat("m").await.unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let chat = chat.clone();
            tokio::spawn(async move { chat.single_response(&ask("m", &format!("q{i}"))).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mut by_call: HashMap<u64, Vec<Duration>> = HashMap::new();
    for a in recorder.attempts() {
        if let Some(wait) = a.retry_in {
            by_call.entry(a.call_id).or_default().push(wait);
        }
    }
    let mut waits: Vec<Vec<Duration>> = by_call.into_values().collect();
    waits.sort();
    waits
}

#[test]
fn jitter_seed_makes_retry_times_repeatable() {
    let run = |seed| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(retry_waits(seed))
    };
    let first = run(7);
    assert_eq!(first.len(), 4);
    assert_eq!(first, run(7), "the same seed gives the same retry times");
    assert!(
        first.windows(2).any(|w| w[0] != w[1]),
        "different requests draw different waits: {first:?}"
    );
    assert_ne!(first, run(8), "another seed draws other waits");
}

#[test]
fn fallback_without_a_race_no_call_queues_on_a_busy_candidate() {
    // On a multi-thread runtime, many calls at once on a chain whose primary can serve
    // only some of them: each call goes out on the reservation it was picked with, so
    // none ever waits in the primary's queue while the backup could serve it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    for trial in 0..200 {
        runtime.block_on(async {
            let s = setup(vec![
                model("primary", rpm(60)).with_fallbacks(["backup"]),
                model("backup", rpm(100_000)),
            ]);
            // Leave the primary a little room, so calls race for its last grants.
            let primary = s.models.limiter("primary").unwrap();
            for _ in 0..56 {
                primary
                    .try_reserve(Cost::call(0, 0), Priority::Default)
                    .await
                    .unwrap()
                    .mark_sent();
            }
            let chat = s
                .models
                .chat_with_fallbacks("primary", FallbackOptions::default())
                .await
                .unwrap();
            let tasks: Vec<_> = (0..16)
                .map(|i| {
                    let chat = chat.clone();
                    tokio::spawn(async move {
                        chat.single_response(&ask("primary", &format!("c{i}")))
                            .await
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap().unwrap();
            }
            let primary = primary.snapshot().await.unwrap();
            let backup = s
                .models
                .limiter("backup")
                .unwrap()
                .snapshot()
                .await
                .unwrap();
            assert_eq!(
                primary.waited, 0,
                "trial {trial}: a call queued on the busy primary"
            );
            assert_eq!(backup.waited, 0, "trial {trial}");
            assert_eq!(primary.grants + backup.grants, 56 + 16, "trial {trial}");
        });
    }
}

#[tokio::test(start_paused = true)]
async fn fallback_on_429_moves_on_and_counts_one_request_per_send() {
    let s = setup(vec![
        model("primary", rpm(60)).with_fallbacks(["backup"]),
        model("backup", rpm(60)),
    ]);
    s.fake.inject(
        "primary",
        1,
        Fault::RateLimited {
            retry_after: Some(Duration::from_secs(5)),
        },
    );
    let chat = s
        .models
        .chat_with_fallbacks("primary", FallbackOptions::default())
        .await
        .unwrap();
    chat.single_response(&ask("primary", "x")).await.unwrap();
    assert_eq!(s.fake.calls("primary"), 1);
    assert_eq!(s.fake.calls("backup"), 1);
}
