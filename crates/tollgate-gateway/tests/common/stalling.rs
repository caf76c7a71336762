//! A provider that starts and never finishes: its stream says its input usage and one
//! word, then nothing until dropped; a whole answer never comes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use tollgate::catalog::KnownProviders;
use tollgate::pipeline::{ChatTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{
    Catalog, LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result, StreamEvent, Usage,
};

/// Set when the provider's stream is dropped.
#[derive(Debug, Default, Clone)]
pub struct Dropped(pub Arc<AtomicBool>);

struct Guard(Dropped);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.0.store(true, Ordering::SeqCst);
    }
}

/// A provider whose stream says its input usage and one word, then never goes on.
#[derive(Debug, Clone)]
pub struct Stalling(pub Dropped);

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
        std::future::pending().await
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

impl Dropped {
    /// Whether the provider's stream was dropped.
    pub fn seen(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A catalog of one `stalling` model, `talk`.
pub fn catalog() -> Catalog {
    let known = KnownProviders::empty().with("stalling", "tests", false);
    Catalog::from_toml_str_with(
        "[models.talk]\nprovider = \"stalling\"\nname = \"s-1\"\nrpm = 600\n\
         max_output_tokens = 64\narrival_allowance_ms = 0\nstream_idle_timeout_secs = 600\n",
        &known,
    )
    .unwrap()
}
