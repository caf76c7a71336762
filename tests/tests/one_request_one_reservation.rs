//! One HTTP request, one reservation (DESIGN §2): the pipeline splits embeddings batches
//! and decision questions into the requests the transport declares (`max_batch`),
//! reserves, retries and settles each, on tokio's paused clock against the fake provider.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tollgate::clock;

use tollgate::catalog::{EmbeddingCapabilities, Limits, ModelEntry, ModelKind, Price};
use tollgate::pipeline::{
    DefaultEstimator, MemoryRecorder, Outcome, PipelineConfig, RetryPolicy, TokenEstimator,
};
use tollgate::{
    Catalog, DecisionRequest, EmbeddingPurpose, Error, JobContext, Models, Question, SpendCap,
};
use tollgate_fake::{FakeProvider, Fault};

fn embed_entry(rpm: u64, max_batch: i64) -> ModelEntry {
    ModelEntry::new("e", "fake", "fake-embed")
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(8),
            ..Default::default()
        })
        .with_limits(Limits {
            rpm,
            ..Limits::default()
        })
        .with_price(Price {
            input: 1.0,
            output: 0.0,
            cache_read: 1.0,
            cache_write: 1.0,
            cache_write_1h: None,
        })
        .with_option("max_batch", max_batch)
}

struct Setup {
    fake: FakeProvider,
    models: Models,
    recorder: Arc<MemoryRecorder>,
}

fn setup(entry: ModelEntry) -> Setup {
    let fake = FakeProvider::new();
    let recorder = Arc::new(MemoryRecorder::new());
    // Timings here are the bucket's arithmetic alone: no arrival allowance.
    let catalog = Catalog::builder()
        .embedding_width(8)
        .model(entry.with_arrival_allowance_ms(0))
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                jitter_seed: Some(7),
                ..RetryPolicy::default()
            },
            recorder: recorder.clone(),
            ..PipelineConfig::default()
        })
        .build()
        .unwrap();
    Setup {
        fake,
        models,
        recorder,
    }
}

/// Texts whose batches of 96 differ in length, so each batch has its own token count.
fn texts(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("text {i} {}", "word ".repeat(i / 96 + 1)))
        .collect()
}

fn tokens(texts: &[String]) -> u64 {
    texts
        .iter()
        .map(|t| DefaultEstimator.estimate_text(t))
        .sum()
}

fn outcomes(s: &Setup) -> Vec<String> {
    s.recorder
        .attempts()
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Success => "ok".to_string(),
            Outcome::Failed { error, .. } => error.clone(),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn embeddings_1000_texts_at_max_batch_96_reserve_11_requests() {
    // A bucket of exactly 11 requests: 11 reservations empty it without waiting; a 12th
    // would have waited for the refill.
    let s = setup(embed_entry(11, 96));
    let client = s.models.embeddings("e").await.unwrap();
    let start = clock::now();
    let vectors = client
        .embed_batch(&texts(1000), EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 1000);
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(s.fake.calls("e"), 11);
    assert_eq!(s.recorder.attempts().len(), 11);
    let calls = s.recorder.calls();
    assert_eq!(calls.len(), 1, "one call record for the batch");
    assert_eq!(calls[0].attempts, 11);
    // The bucket is empty: the next request waits one request's refill (60 s / 11).
    client.embed("x", EmbeddingPurpose::Query).await.unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(5_400) && waited <= Duration::from_millis(5_500),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn one_text_per_request_model_is_paced_at_its_rpm() {
    // Titan-like: one text per request, 6 requests per minute. 12 texts: 6 go at once
    // (the bucket's burst), the other 6 one every 10 s.
    let s = setup(embed_entry(6, 1));
    let client = s.models.embeddings("e").await.unwrap();
    let start = clock::now();
    let vectors = client
        .embed_batch(&texts(12), EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 12);
    assert_eq!(s.fake.calls("e"), 12);
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_secs(60) && elapsed < Duration::from_millis(60_100),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn failure_in_batch_7_resends_batch_7_only() {
    let s = setup(embed_entry(600, 96));
    s.fake.inject("e", 7, Fault::Server { status: 500 });
    let client = s.models.embeddings("e").await.unwrap();
    let all = texts(1000);
    let vectors = client
        .embed_batch(&all, EmbeddingPurpose::Document)
        .await
        .unwrap();
    // 11 requests and one retry.
    assert_eq!(s.fake.calls("e"), 12);
    let mut expected = vec!["ok"; 6];
    expected.push("server_error");
    expected.extend(["ok"; 5]);
    assert_eq!(outcomes(&s), expected);
    // The retry carried batch 7's texts (576..672), and only those.
    let attempts = s.recorder.attempts();
    let batch7 = tokens(&all[576..672]);
    assert_eq!(attempts[7].usage.input_tokens, batch7);
    assert_ne!(attempts[7].usage.input_tokens, tokens(&all[480..576]));
    assert_ne!(attempts[7].usage.input_tokens, tokens(&all[672..768]));
    // In order, as if nothing had failed.
    let again = client
        .embed_batch(&all, EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors, again);
}

#[tokio::test(start_paused = true)]
async fn every_embeddings_request_is_recorded_costed_and_capped() {
    let s = setup(embed_entry(600, 96));
    let all = texts(1000);
    let total = tokens(&all);
    let cap = SpendCap::new("workflow", 1.0);
    let job = s
        .models
        .for_job(JobContext::new("j", 3).with_spend_cap(cap.clone()));
    job.embeddings("e")
        .await
        .unwrap()
        .embed_batch(&all, EmbeddingPurpose::Document)
        .await
        .unwrap();
    let attempts = s.recorder.attempts();
    let per_request: u64 = attempts.iter().map(|a| a.usage.input_tokens).sum();
    assert_eq!(per_request, total);
    let call = s.recorder.calls().pop().unwrap();
    assert_eq!(call.usage.input_tokens, total);
    let cost = total as f64 / 1e6;
    assert!((call.cost_usd.unwrap() - cost).abs() < 1e-12);
    assert!(
        (cap.spent_usd() - cost).abs() < 1e-12,
        "{}",
        cap.spent_usd()
    );
    assert_eq!(cap.held_usd(), 0.0);

    // A cap that holds the first three requests only: the fourth is never sent.
    let first_three = tokens(&all[..288]) as f64 / 1e6;
    let fourth = tokens(&all[288..384]) as f64 / 1e6;
    let small = SpendCap::new("small", first_three + fourth / 2.0);
    let job = s
        .models
        .for_job(JobContext::new("k", 3).with_spend_cap(small.clone()));
    let before = s.fake.calls("e");
    let err = job
        .embeddings("e")
        .await
        .unwrap()
        .embed_batch(&all, EmbeddingPurpose::Document)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SpendCapExceeded { .. }), "{err}");
    assert_eq!(s.fake.calls("e") - before, 3);
    assert!((small.spent_usd() - first_three).abs() < 1e-12);
    let call = s.recorder.calls().pop().unwrap();
    assert_eq!(call.attempts, 3);
    assert!((call.cost_usd.unwrap() - first_three).abs() < 1e-12);
}

#[tokio::test(start_paused = true)]
async fn decision_questions_each_reserve_a_request() {
    // One question per request, 2 requests per minute: the third question waits 30 s.
    let s = setup(
        ModelEntry::new("d", "fake", "fake-decide")
            .with_kind(ModelKind::Decision)
            .with_limits(Limits {
                rpm: 2,
                ..Limits::default()
            })
            .with_option("max_batch", 1),
    );
    let names = ["a", "b", "c"];
    let questions = names
        .iter()
        .map(|n| Question::Noul {
            name: (*n).into(),
            prompt: format!("{n}?"),
        })
        .collect();
    let request = DecisionRequest::new("d", "state", questions).unwrap();
    for (i, n) in names.iter().enumerate() {
        let weights: BTreeMap<String, BTreeMap<String, f64>> = [(
            (*n).to_string(),
            [("yes".to_string(), (i + 1) as f64), ("no".to_string(), 1.0)].into(),
        )]
        .into();
        s.fake.decide("d", weights);
    }
    let start = clock::now();
    let decision = s
        .models
        .decision("d")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap();
    assert_eq!(s.fake.calls("d"), 3);
    assert_eq!(s.recorder.attempts().len(), 3);
    assert_eq!(s.recorder.calls()[0].attempts, 3);
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_secs(30) && elapsed < Duration::from_millis(30_100),
        "{elapsed:?}"
    );
    assert_eq!(decision.probability("a", "yes"), Some(0.5));
    assert_eq!(decision.probability("b", "yes"), Some(2.0 / 3.0));
    assert_eq!(decision.probability("c", "yes"), Some(0.75));
}

#[tokio::test(start_paused = true)]
async fn embeddings_provider_overflow_names_the_model_and_is_not_retried() {
    let s = setup(embed_entry(600, 96));
    s.fake.inject("e", 2, Fault::ContextOverflow);
    let err = s
        .models
        .embeddings("e")
        .await
        .unwrap()
        .embed_batch(&texts(200), EmbeddingPurpose::Document)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ContextWindowExceeded { model_id, needed, window: None }
            if model_id == "e" && *needed > 0),
        "{err:?}"
    );
    // The second request failed for good; the third was never sent.
    assert_eq!(s.fake.calls("e"), 2);
}
