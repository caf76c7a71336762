//! A client that hangs up mid-stream cancels the upstream call: the provider's stream is
//! dropped (its connection closed), the call is concluded as cancelled after delivery
//! (never retried, recorded with the usage reported so far), and the limiter holds
//! nothing for it. Over a real 127.0.0.1 socket, against a provider whose stream sends
//! its first events and then stalls.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tollgate::catalog::KnownProviders;
use tollgate::pipeline::{ChatTransport, MemoryRecorder, Outcome, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{
    Catalog, LlmRequest, LlmResponse, ModelEntry, Models, ResponseStream, Result, StreamEvent,
    Usage,
};
use tollgate_gateway::Gateway;

/// Set when the provider's stream is dropped.
#[derive(Debug, Default, Clone)]
struct Dropped(Arc<AtomicBool>);

struct Guard(Dropped);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.0.store(true, Ordering::SeqCst);
    }
}

/// A provider whose stream says its input usage and one word, then never goes on.
#[derive(Debug, Clone)]
struct Stalling(Dropped);

#[tollgate::async_trait]
impl Provider for Stalling {
    fn key(&self) -> &'static str {
        "stalling"
    }
    async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(self.clone()))
    }
}

impl ProviderTransports for Stalling {
    fn chat(&self, _: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(self.clone()))
    }
}

#[tollgate::async_trait]
impl ChatTransport for Stalling {
    async fn send(&self, _: &LlmRequest, _: &Signals) -> Result<LlmResponse> {
        Err(tollgate::Error::Cancelled)
    }
    async fn send_stream(&self, _: &LlmRequest, _: &Signals) -> Result<ResponseStream> {
        let guard = Guard(self.0.clone());
        let first = futures::stream::iter([
            Ok(StreamEvent::Usage(Usage {
                input_tokens: 7,
                ..Usage::default()
            })),
            Ok(StreamEvent::TextDelta {
                index: 0,
                text: "Hello".into(),
            }),
        ]);
        // Then nothing, until dropped (the guard goes with the stream).
        let stalled = futures::stream::pending().map(move |e| {
            let _keep = &guard;
            e
        });
        Ok(ResponseStream::new(first.chain(stalled)))
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_that_hangs_up_mid_stream_cancels_the_upstream_call_and_holds_nothing() {
    let dropped = Dropped::default();
    let known = KnownProviders::empty().with("stalling", "tests", false);
    let catalog = Catalog::from_toml_str_with(
        "[models.talk]\nprovider = \"stalling\"\nname = \"s-1\"\nrpm = 600\n\
         max_output_tokens = 64\narrival_allowance_ms = 0\nstream_idle_timeout_secs = 600\n",
        &known,
    )
    .unwrap();
    let recorder = Arc::new(MemoryRecorder::new());
    let models = Models::builder()
        .catalog(catalog)
        .provider(Stalling(dropped.clone()))
        .recorder(recorder.clone())
        .build()
        .unwrap();
    let gateway = Gateway::new(models);
    let running = common::start(gateway.clone()).await;

    let response = common::client()
        .post(running.at("/v1/chat/completions"))
        .json(&serde_json::json!({
            "model": "talk", "stream": true,
            "messages": [{"role": "user", "content": "Hi"}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("data:"),
        "{first:?}"
    );
    assert!(
        !dropped.0.load(Ordering::SeqCst),
        "the upstream stream is open"
    );
    // The client hangs up.
    drop(body);

    // Bounded: a gateway that never noticed fails here instead of hanging.
    for _ in 0..600 {
        if dropped.0.load(Ordering::SeqCst) && !recorder.calls().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        dropped.0.load(Ordering::SeqCst),
        "the upstream stream was dropped"
    );
    let calls = recorder.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        matches!(&calls[0].outcome, Outcome::Failed { error, .. } if error == "cancelled"),
        "{:?}",
        calls[0].outcome
    );
    assert_eq!(calls[0].attempts, 1, "not retried");
    let attempts = recorder.attempts();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].usage.input_tokens, 7,
        "the usage reported so far"
    );
    let snapshot = common::snapshot(&gateway, "talk").await;
    assert_eq!((snapshot.held, snapshot.queued, snapshot.grants), (0, 0, 1));
    running.stop().await.unwrap();
}
