//! A client that hangs up mid-stream cancels the upstream call: the provider's stream is
//! dropped (its connection closed), the call is concluded as cancelled after delivery
//! (never retried, recorded with the usage reported so far), and the limiter holds
//! nothing for it. Over a real 127.0.0.1 socket, against a provider whose stream sends
//! its first events and then stalls.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::stalling::{self, Dropped, Stalling};
use futures::StreamExt;
use tollgate::Models;
use tollgate::pipeline::{MemoryRecorder, Outcome};
use tollgate_gateway::Gateway;

#[tokio::test(start_paused = true)]
async fn a_client_that_hangs_up_mid_stream_cancels_the_upstream_call_and_holds_nothing() {
    let dropped = Dropped::default();
    let catalog = stalling::catalog();
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
