//! Context window (DESIGN §6): a call whose input estimate plus output limit exceeds the
//! catalog's `context_window` fails before sending; a provider's own overflow is the same
//! error and is never re-run as a truncation; a fallback chain moves it to a model with a
//! larger window only when asked to. Fake provider, tokio's paused clock.

use std::sync::Arc;

use tollgate::catalog::{Limits, ModelEntry};
use tollgate::pipeline::{FallbackOptions, MemoryRecorder, Outcome, PipelineConfig};
use tollgate::{
    Catalog, Conversation, Error, LlmRequest, Models, SamplingParams, StopReason, Usage,
};
use tollgate_fake::{FakeProvider, FakeReply, Fault};

fn entry(id: &str, window: Option<u64>) -> ModelEntry {
    let e = ModelEntry::new(id, "fake", format!("fake-{id}"))
        .with_output_tokens(4000, 1000)
        .with_limits(Limits {
            rpm: 600,
            ..Limits::default()
        });
    match window {
        Some(w) => e.with_context_window(w),
        None => e,
    }
}

struct Setup {
    fake: FakeProvider,
    models: Models,
    recorder: Arc<MemoryRecorder>,
}

fn setup(entries: Vec<ModelEntry>) -> Setup {
    let fake = FakeProvider::new();
    let recorder = Arc::new(MemoryRecorder::new());
    let catalog = entries
        .into_iter()
        .fold(Catalog::builder(), |b, e| b.model(e))
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .pipeline(PipelineConfig {
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

/// About 500 input tokens (the default estimate is conservative: at least a quarter of
/// the characters).
fn long_ask(model: &str) -> LlmRequest {
    Conversation::new()
        .user("word ".repeat(400))
        .request(model, SamplingParams::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn context_window_exceeded_fails_before_sending() {
    // 1000 output tokens (the catalog default) plus the input do not fit 1200.
    let s = setup(vec![entry("m", Some(1200))]);
    s.fake.reply_any(FakeReply::text("never sent"));
    let chat = s.models.chat("m").await.unwrap();
    let err = chat.single_response(&long_ask("m")).await.unwrap_err();
    match &err {
        Error::ContextWindowExceeded {
            model_id,
            needed,
            window,
        } => {
            assert_eq!(model_id, "m");
            assert_eq!(*window, Some(1200));
            assert!(*needed > 1200, "{needed}");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("`m`"), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(s.fake.calls("m"), 0);
    let call = s.recorder.calls().pop().unwrap();
    assert_eq!(call.attempts, 0);
    assert!(
        matches!(call.outcome, Outcome::Failed { ref error, .. } if error == "context_window_exceeded")
    );
    // The stream form is checked the same way.
    assert!(matches!(
        chat.stream_response(&long_ask("m")).await.err(),
        Some(Error::ContextWindowExceeded { .. })
    ));
    assert_eq!(s.fake.calls("m"), 0);
    // A smaller output limit fits.
    let short = Conversation::new()
        .user("word ".repeat(400))
        .request(
            "m",
            SamplingParams::new().with_max_output_tokens(100).unwrap(),
        )
        .unwrap();
    assert_eq!(
        chat.single_response(&short).await.unwrap().text(),
        "never sent"
    );
}

#[tokio::test(start_paused = true)]
async fn context_window_stop_is_overflow_not_truncation() {
    let s = setup(vec![entry("m", None)]);
    s.fake.reply(
        "m",
        FakeReply::text("cut")
            .with_stop(StopReason::ContextWindowExceeded)
            .with_usage(Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            }),
    );
    let err = s
        .models
        .chat("m")
        .await
        .unwrap()
        .single_response(&long_ask("m"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ContextWindowExceeded { model_id, window: None, .. } if model_id == "m"),
        "{err:?}"
    );
    // Sent once (a truncation would have been re-run at the ceiling); its usage counted.
    assert_eq!(s.fake.calls("m"), 1);
    assert_eq!(s.recorder.calls().pop().unwrap().usage.output_tokens, 5);
}

fn chain() -> Setup {
    setup(vec![
        entry("m", Some(1200)).with_fallbacks(["small", "big"]),
        entry("small", Some(1000)),
        entry("big", Some(200_000)),
    ])
}

#[tokio::test(start_paused = true)]
async fn fallback_moves_overflow_to_larger_window_when_opted_in() {
    let s = chain();
    s.fake
        .reply("small", FakeReply::text("small answers"))
        .reply("big", FakeReply::text("big answers"));
    let options = FallbackOptions {
        on_context_overflow: true,
        ..FallbackOptions::default()
    };
    let chat = s.models.chat_with_fallbacks("m", options).await.unwrap();
    // Found before sending on `m`; `small`'s window is smaller, so it is skipped.
    assert_eq!(
        chat.single_response(&long_ask("m")).await.unwrap().text(),
        "big answers"
    );
    assert_eq!(
        (
            s.fake.calls("m"),
            s.fake.calls("small"),
            s.fake.calls("big")
        ),
        (0, 0, 1)
    );
    // Reported by the provider: moved the same way.
    s.fake
        .fail("m", Fault::ContextOverflow)
        .reply("big", FakeReply::text("big again"));
    let fits = Conversation::new()
        .user("short")
        .request("m", SamplingParams::new())
        .unwrap();
    assert_eq!(
        chat.single_response(&fits).await.unwrap().text(),
        "big again"
    );
    assert_eq!(
        (
            s.fake.calls("m"),
            s.fake.calls("small"),
            s.fake.calls("big")
        ),
        (1, 0, 2)
    );
    // No larger window left: the overflow is returned.
    s.fake.fail("big", Fault::ContextOverflow);
    let only_big = s
        .models
        .chat_with_fallbacks("big", options)
        .await
        .unwrap()
        .single_response(&long_ask("big"))
        .await;
    assert!(matches!(only_big, Err(Error::ContextWindowExceeded { .. })));
}

#[tokio::test(start_paused = true)]
async fn fallback_keeps_overflow_when_not_opted_in() {
    let s = chain();
    s.fake.reply("big", FakeReply::text("big answers"));
    let chat = s
        .models
        .chat_with_fallbacks("m", FallbackOptions::default())
        .await
        .unwrap();
    let err = chat.single_response(&long_ask("m")).await.unwrap_err();
    assert!(
        matches!(&err, Error::ContextWindowExceeded { model_id, .. } if model_id == "m"),
        "{err:?}"
    );
    s.fake.fail("m", Fault::ContextOverflow);
    let fits = Conversation::new()
        .user("short")
        .request("m", SamplingParams::new())
        .unwrap();
    assert!(matches!(
        chat.single_response(&fits).await,
        Err(Error::ContextWindowExceeded { .. })
    ));
    assert_eq!((s.fake.calls("m"), s.fake.calls("big")), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn streamed_context_window_stop_ends_the_stream_with_context_window_exceeded() {
    use futures::StreamExt;
    let s = setup(vec![entry("m", None)]);
    s.fake.reply(
        "m",
        FakeReply::text("cut short").with_stop(StopReason::ContextWindowExceeded),
    );
    let mut stream = s
        .models
        .chat("m")
        .await
        .unwrap()
        .stream_response(&long_ask("m"))
        .await
        .unwrap();
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item);
    }
    assert!(
        matches!(last, Some(Err(Error::ContextWindowExceeded { ref model_id, .. })) if model_id == "m"),
        "{last:?}"
    );
    assert_eq!(s.fake.calls("m"), 1);
}

#[tokio::test(start_paused = true)]
async fn truncated_answer_rerun_asks_no_more_than_the_window_leaves() {
    // 1000 (default) + ~500 input fits 3000; the re-run at the ceiling (4000) would not,
    // so it asks for what the window leaves after the input estimate.
    let s = setup(vec![entry("m", Some(3000))]);
    s.fake
        .fail("m", Fault::Truncated)
        .reply("m", FakeReply::text("whole"));
    let answer = s
        .models
        .chat("m")
        .await
        .unwrap()
        .single_response(&long_ask("m"))
        .await
        .unwrap();
    assert_eq!(answer.text(), "whole");
    let limits: Vec<_> = s
        .fake
        .requests()
        .iter()
        .map(|r| r.sampling_params().max_output_tokens())
        .collect();
    assert_eq!(limits[0], Some(1000));
    let rerun = limits[1].unwrap();
    assert!(rerun > 1000 && rerun < 3000 - 400, "{limits:?}");
}
