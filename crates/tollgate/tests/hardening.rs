//! Hardening of the pipeline (issue 16): stalled streams and the call deadline,
//! malformed answers, refusals that are costed and settled. A scripted in-process
//! transport plays each attempt; tokio's clock is paused, so every wait is exact.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tollgate::catalog::{Catalog, KnownProviders, Price};
use tollgate::pipeline::{
    ChatTransport, MemoryRecorder, PipelineConfig, RetryPolicy, Signals, SpendCap,
};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{
    Block, Conversation, Error, JobContext, LlmRequest, LlmResponse, ModelEntry, Models,
    ProviderError, ResponseBody, ResponseStream, Result, SamplingParams, StopReason, StreamEvent,
    Usage, clock,
};

const MODEL: &str = "scripted-1";

const PRICE: Price = Price {
    input: 3.0,
    output: 15.0,
    cache_read: 0.0,
    cache_write: 0.0,
    cache_write_1h: None,
};

/// One step of a scripted stream.
#[derive(Debug)]
enum Step {
    Event(StreamEvent),
    /// Waits this long, then goes on.
    Wait(Duration),
    /// Never yields again.
    Stall,
    Fail(Error),
}

/// What one attempt does.
#[derive(Debug)]
enum Attempt {
    Stream(Vec<Step>),
    Reply(std::result::Result<LlmResponse, Error>),
}

#[derive(Debug, Clone, Default)]
struct Script(Arc<Mutex<VecDeque<Attempt>>>);

impl Script {
    fn new(attempts: impl IntoIterator<Item = Attempt>) -> Self {
        Script(Arc::new(Mutex::new(attempts.into_iter().collect())))
    }

    fn next(&self) -> Attempt {
        self.0
            .lock()
            .unwrap()
            .pop_front()
            .expect("the script has no attempt left")
    }
}

#[derive(Debug)]
struct Scripted(Script);

#[tollgate::async_trait]
impl Provider for Scripted {
    fn key(&self) -> &'static str {
        "scripted"
    }

    async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Transports(self.0.clone())))
    }
}

#[derive(Debug)]
struct Transports(Script);

impl ProviderTransports for Transports {
    fn chat(&self, _: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(Chat(self.0.clone())))
    }
}

#[derive(Debug)]
struct Chat(Script);

#[tollgate::async_trait]
impl ChatTransport for Chat {
    async fn send(&self, _: &LlmRequest, _: &Signals) -> Result<LlmResponse> {
        match self.0.next() {
            Attempt::Reply(reply) => reply,
            Attempt::Stream(_) => panic!("a stream scripted for a single response"),
        }
    }

    async fn send_stream(&self, _: &LlmRequest, _: &Signals) -> Result<ResponseStream> {
        let Attempt::Stream(steps) = self.0.next() else {
            panic!("a reply scripted for a stream")
        };
        let steps: VecDeque<Step> = steps.into();
        Ok(ResponseStream::new(futures::stream::unfold(
            steps,
            |mut steps| async move {
                loop {
                    match steps.pop_front()? {
                        Step::Event(e) => return Some((Ok(e), steps)),
                        Step::Fail(e) => return Some((Err(e), steps)),
                        Step::Wait(d) => tokio::time::sleep(d).await,
                        Step::Stall => futures::future::pending::<()>().await,
                    }
                }
            },
        )))
    }
}

struct Setup {
    models: Models,
    recorder: Arc<MemoryRecorder>,
}

fn setup(
    script: &Script,
    entry: impl FnOnce(ModelEntry) -> ModelEntry,
    deadline: Option<Duration>,
) -> Setup {
    let model = entry(
        ModelEntry::new(MODEL, "scripted", "scripted-model")
            .with_output_tokens(100, 100)
            .with_price(PRICE),
    );
    let catalog = Catalog::builder()
        .known_providers(KnownProviders::empty().with("scripted", "tollgate-tests", false))
        .model(model)
        .build()
        .unwrap();
    let recorder = Arc::new(MemoryRecorder::new());
    let config = PipelineConfig {
        retry: RetryPolicy {
            default_retries: 2,
            jitter_seed: Some(7),
            ..RetryPolicy::default()
        },
        call_deadline: deadline,
        recorder: recorder.clone(),
        ..PipelineConfig::default()
    };
    let models = Models::builder()
        .catalog(catalog)
        .provider(Scripted(script.clone()))
        .pipeline(config)
        .build()
        .unwrap();
    Setup { models, recorder }
}

fn ask() -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request(MODEL, SamplingParams::new())
        .unwrap()
}

fn delta(text: &str) -> Step {
    Step::Event(StreamEvent::TextDelta {
        index: 0,
        text: text.into(),
    })
}

fn answer(text: &str, stop: StopReason, usage: Usage) -> LlmResponse {
    LlmResponse::new(ResponseBody {
        model: "scripted-model".into(),
        content: vec![Block::text(text)],
        stop_reason: stop,
        usage,
        refusal: None,
    })
    .unwrap()
}

fn completed(text: &str) -> Step {
    Step::Event(StreamEvent::Completed(answer(
        text,
        StopReason::EndTurn,
        usage(10, 5),
    )))
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

/// Reads the whole stream: the events, then the error that ended it (if any).
async fn read(models: &Models, job: Option<JobContext>) -> (Vec<StreamEvent>, Option<Error>) {
    let client = match job {
        Some(job) => models.for_job(job).chat(MODEL).await.unwrap(),
        None => models.chat(MODEL).await.unwrap(),
    };
    let mut stream = match client.stream_response(&ask()).await {
        Ok(s) => s,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(e) => events.push(e),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

fn outcomes(recorder: &MemoryRecorder) -> Vec<String> {
    recorder
        .attempts()
        .iter()
        .map(|a| match &a.outcome {
            tollgate::pipeline::Outcome::Success => "success".to_owned(),
            tollgate::pipeline::Outcome::Failed { error, .. } => error.clone(),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_stream_stalled_before_its_first_event_is_retried_after_the_idle_timeout() {
    let script = Script::new([
        Attempt::Stream(vec![Step::Stall]),
        Attempt::Stream(vec![delta("hi"), completed("hi")]),
    ]);
    let s = setup(&script, |m| m.with_stream_idle_timeout_secs(5), None);
    let start = clock::now();
    let (events, error) = read(&s.models, None).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events.len(), 2);
    assert_eq!(outcomes(&s.recorder), ["timeout", "success"]);
    // Five seconds of silence, then a back-off of at most the policy's first step.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited <= Duration::from_millis(5500),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_stalled_after_its_first_event_is_interrupted_by_the_idle_timeout() {
    let script = Script::new([Attempt::Stream(vec![delta("Hel"), Step::Stall])]);
    let s = setup(&script, |m| m.with_stream_idle_timeout_secs(5), None);
    let start = clock::now();
    let (events, error) = read(&s.models, None).await;
    assert_eq!(events.len(), 1);
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { delivered_events: 1, cause, .. })
            if matches!(**cause, Error::Provider(ProviderError::Timeout { after: Some(d) }) if d == Duration::from_secs(5))),
        "{error:?}"
    );
    // Never re-sent: the reader has part of the answer.
    assert_eq!(outcomes(&s.recorder), ["timeout"]);
}

#[tokio::test(start_paused = true)]
async fn events_closer_than_the_idle_timeout_keep_a_stream_alive() {
    let script = Script::new([Attempt::Stream(vec![
        delta("a"),
        Step::Wait(Duration::from_secs(4)),
        delta("b"),
        Step::Wait(Duration::from_secs(4)),
        delta("c"),
        Step::Wait(Duration::from_secs(4)),
        completed("abc"),
    ])]);
    let s = setup(&script, |m| m.with_stream_idle_timeout_secs(5), None);
    let (events, error) = read(&s.models, None).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn the_call_deadline_bounds_a_stream_that_keeps_trickling() {
    let mut steps = vec![delta("a")];
    for _ in 0..100 {
        steps.push(Step::Wait(Duration::from_secs(3)));
        steps.push(delta("."));
    }
    let script = Script::new([Attempt::Stream(steps)]);
    let s = setup(&script, |m| m, Some(Duration::from_secs(10)));
    let start = clock::now();
    let (events, error) = read(&s.models, None).await;
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert_eq!(events.len(), 4, "at 0, 3, 6 and 9 seconds");
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { cause, .. })
            if matches!(**cause, Error::Provider(ProviderError::Timeout { after: Some(d) }) if d == Duration::from_secs(10))),
        "{error:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_malformed_event_before_the_first_event_is_retried() {
    let script = Script::new([
        Attempt::Stream(vec![Step::Fail(tollgate::wire::malformed(
            "expected value",
            b"data: {oops",
        ))]),
        Attempt::Stream(vec![delta("hi"), completed("hi")]),
    ]);
    let s = setup(&script, |m| m, None);
    let (events, error) = read(&s.models, None).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events.len(), 2);
    assert_eq!(outcomes(&s.recorder), ["malformed", "success"]);
}

#[tokio::test(start_paused = true)]
async fn a_malformed_event_after_the_first_event_interrupts_the_stream_with_its_cause() {
    let script = Script::new([Attempt::Stream(vec![
        delta("Hel"),
        Step::Fail(tollgate::wire::malformed("expected value", b"{oops")),
    ])]);
    let s = setup(&script, |m| m, None);
    let (events, error) = read(&s.models, None).await;
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { delivered_events: 1, cause, .. })
            if matches!(&**cause, Error::Provider(ProviderError::Malformed { raw, .. }) if raw == "{oops")),
        "{error:?}"
    );
    assert_eq!(outcomes(&s.recorder), ["malformed"]);
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_before_its_first_event_is_malformed_and_retried() {
    let script = Script::new([
        Attempt::Stream(vec![]),
        Attempt::Stream(vec![delta("hi"), completed("hi")]),
    ]);
    let s = setup(&script, |m| m, None);
    let (_, error) = read(&s.models, None).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(outcomes(&s.recorder), ["malformed", "success"]);
}

#[tokio::test(start_paused = true)]
async fn malformed_answers_are_retried_within_the_budget_and_then_returned() {
    let bad = || Attempt::Reply(Err(tollgate::wire::malformed("eof", b"{\"choi")));
    let script = Script::new([bad(), bad(), bad()]);
    let s = setup(&script, |m| m, None);
    let error = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Provider(ProviderError::Malformed { raw, raw_len: 6, .. }) if raw == "{\"choi"),
        "{error:?}"
    );
    assert_eq!(outcomes(&s.recorder), ["malformed"; 3], "two retries");
}

#[tokio::test(start_paused = true)]
async fn a_refusal_mid_stream_is_a_refusal_with_what_was_delivered_noted_and_is_costed() {
    let billed = usage(40, 12);
    let script = Script::new([Attempt::Stream(vec![
        delta("I "),
        delta("can"),
        // A refusal ends a stream as its answer, never as an error of the stream.
        Step::Event(StreamEvent::Completed(
            LlmResponse::new(ResponseBody {
                model: "m".into(),
                content: vec![Block::text("I can")],
                stop_reason: StopReason::Refusal,
                usage: billed,
                refusal: Some(tollgate::Refusal::new("cyber").with_explanation("Not that.")),
            })
            .unwrap(),
        )),
    ])]);
    let s = setup(&script, |m| m, None);
    let cap = SpendCap::new("cap", 1.0);
    let (events, error) = read(
        &s.models,
        Some(JobContext::new("j", 0).with_spend_cap(cap.clone())),
    )
    .await;
    assert_eq!(events.len(), 2);
    assert!(
        matches!(&error, Some(Error::ProviderRefusal { category, delivered_events: 2, usage, .. })
            if category == "cyber" && *usage == billed),
        "{error:?}"
    );
    let cost = PRICE.cost_usd(&billed);
    // Settled at what was billed, not held at the worst case.
    assert!(
        (cap.spent_usd() - cost).abs() < 1e-12,
        "{}",
        cap.spent_usd()
    );
    let call = &s.recorder.calls()[0];
    assert_eq!(call.usage, billed);
    assert!((call.cost_usd.unwrap() - cost).abs() < 1e-12);
    assert_eq!(outcomes(&s.recorder), ["refusal"]);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_stop_at_the_end_of_a_stream_is_a_refusal_not_an_interruption() {
    let billed = usage(30, 3);
    let script = Script::new([Attempt::Stream(vec![
        delta("No"),
        Step::Event(StreamEvent::Completed(answer(
            "No",
            StopReason::Refusal,
            billed,
        ))),
    ])]);
    let s = setup(&script, |m| m, None);
    let (events, error) = read(&s.models, None).await;
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&error, Some(Error::ProviderRefusal { category, explanation, delivered_events: 1, usage })
            if category == "refusal" && explanation == "No" && *usage == billed),
        "{error:?}"
    );
    assert_eq!(s.recorder.calls()[0].usage, billed);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_before_the_first_event_is_settled_at_its_usage_and_not_retried() {
    let billed = usage(20, 0);
    let script = Script::new([Attempt::Stream(vec![Step::Fail(Error::refusal(
        "guardrail_intervened",
        "",
        billed,
    ))])]);
    let s = setup(&script, |m| m, None);
    let cap = SpendCap::new("cap", 1.0);
    let (events, error) = read(
        &s.models,
        Some(JobContext::new("j", 3).with_spend_cap(cap.clone())),
    )
    .await;
    assert!(events.is_empty());
    assert!(
        matches!(&error, Some(Error::ProviderRefusal { category, delivered_events: 0, .. }) if category == "guardrail_intervened"),
        "{error:?}"
    );
    assert!((cap.spent_usd() - PRICE.cost_usd(&billed)).abs() < 1e-12);
    assert_eq!(outcomes(&s.recorder), ["refusal"]);
    assert_eq!(s.recorder.attempts()[0].usage, billed);
}

#[tokio::test(start_paused = true)]
async fn a_content_filter_stop_in_a_single_response_is_a_refusal_that_is_costed() {
    let billed = usage(50, 7);
    let script = Script::new([Attempt::Reply(Ok(answer(
        "partial",
        StopReason::ContentFilter,
        billed,
    )))]);
    let s = setup(&script, |m| m, None);
    let error = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::ProviderRefusal { category, usage, .. } if category == "content_filter" && *usage == billed),
        "{error:?}"
    );
    let call = &s.recorder.calls()[0];
    assert_eq!(call.usage, billed);
    assert!((call.cost_usd.unwrap() - PRICE.cost_usd(&billed)).abs() < 1e-12);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_error_from_a_codec_in_a_single_response_is_costed() {
    let billed = usage(9, 4);
    let script = Script::new([Attempt::Reply(Err(Error::refusal("cyber", "No.", billed)))]);
    let s = setup(&script, |m| m, None);
    let error = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask())
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::ProviderRefusal { .. }), "{error:?}");
    let call = &s.recorder.calls()[0];
    assert_eq!(call.usage, billed);
    assert!((call.cost_usd.unwrap() - PRICE.cost_usd(&billed)).abs() < 1e-12);
    assert_eq!(outcomes(&s.recorder), ["refusal"]);
}

#[tokio::test(start_paused = true)]
async fn connection_failures_are_retried() {
    let script = Script::new([
        Attempt::Reply(Err(ProviderError::closed_early("cut").into())),
        Attempt::Reply(Ok(answer("ok", StopReason::EndTurn, usage(1, 1)))),
    ]);
    let s = setup(&script, |m| m, None);
    let reply = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask())
        .await;
    assert!(reply.is_ok(), "{reply:?}");
    assert_eq!(outcomes(&s.recorder), ["connection", "success"]);
}

#[test]
fn the_catalog_reads_stream_idle_timeout_and_max_response_bytes() {
    let toml = r#"
        [models.a]
        provider = "scripted"
        max_output_tokens = 10
        stream_idle_timeout_secs = 5
        max_response_bytes = 1000

        [models.b]
        provider = "scripted"
        max_output_tokens = 10
    "#;
    let known = KnownProviders::empty().with("scripted", "tollgate-tests", false);
    let catalog = Catalog::from_toml_str_with(toml, &known).unwrap();
    let a = catalog.model("a").unwrap();
    assert_eq!(a.stream_idle_timeout(), Duration::from_secs(5));
    assert_eq!(a.response_byte_limit(), 1000);
    let b = catalog.model("b").unwrap();
    assert_eq!(b.stream_idle_timeout(), Duration::from_secs(60));
    assert_eq!(b.response_byte_limit(), 32 << 20);
    let zero = toml.replace("= 1000", "= 0");
    let error = Catalog::from_toml_str_with(&zero, &known).unwrap_err();
    assert!(error.to_string().contains("max_response_bytes"), "{error}");
}
