//! A shared limiter backend that cannot be asked (Redis down, say) fails closed with a
//! typed `TryReserveError::Unavailable`: a fallback chain moves on to its next model, and
//! a model with no other way out fails with `LimiterUnavailable`, nothing sent. Fake
//! provider, tokio's paused clock.

use std::sync::Arc;

use tollgate::catalog::{Limits, ModelEntry};
use tollgate::limit::{
    Cost, Feedback, LimiterBackend, LimiterConfig, LimiterFactory, LimiterSnapshot, Priority,
    Reservation, TryReserveError,
};
use tollgate::pipeline::FallbackOptions;
use tollgate::{Catalog, Conversation, Error, Models, SamplingParams};
use tollgate_fake::{FakeProvider, FakeReply};

/// A backend whose store never answers.
#[derive(Debug)]
struct Down(String);

impl Down {
    fn error(&self) -> Error {
        Error::LimiterUnavailable {
            backend: "test-store".into(),
            model_id: self.0.clone(),
            source: "connection refused".into(),
        }
    }
}

#[tollgate::async_trait]
impl LimiterBackend for Down {
    fn model_id(&self) -> &str {
        &self.0
    }
    async fn reserve(&self, _: Cost, _: Priority) -> tollgate::Result<Reservation> {
        Err(self.error())
    }
    async fn try_reserve(&self, _: Cost, _: Priority) -> Result<Reservation, TryReserveError> {
        Err(TryReserveError::Unavailable(self.error()))
    }
    fn feedback(&self, _: Feedback) {}
    async fn snapshot(&self) -> tollgate::Result<LimiterSnapshot> {
        Err(self.error())
    }
}

#[derive(Debug)]
struct DownFactory;

impl LimiterFactory for DownFactory {
    fn build(&self, config: &LimiterConfig) -> tollgate::Result<Arc<dyn LimiterBackend>> {
        Ok(Arc::new(Down(config.model_id.clone())))
    }
}

fn entry(id: &str) -> ModelEntry {
    ModelEntry::new(id, "fake", format!("fake-{id}"))
        .with_output_tokens(100, 50)
        .with_limits(Limits {
            rpm: 600,
            ..Limits::default()
        })
}

fn models(fake: &FakeProvider) -> Models {
    let catalog = Catalog::builder()
        .model(entry("primary").with_fallbacks(["backup"]))
        .model(entry("backup"))
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .limiter_backend_for(["primary"], DownFactory)
        .build()
        .unwrap()
}

fn ask(model: &str) -> tollgate::LlmRequest {
    Conversation::new()
        .user("hi")
        .request(model, SamplingParams::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_chain_moves_past_a_model_whose_limiter_is_unavailable() {
    let fake = FakeProvider::new();
    fake.reply("backup", FakeReply::text("from the backup"));
    let models = models(&fake);
    let chat = models
        .chat_with_fallbacks("primary", FallbackOptions::default())
        .await
        .unwrap();
    let answer = chat.single_response(&ask("primary")).await.unwrap();
    assert_eq!(answer.text(), "from the backup");
}

#[tokio::test(start_paused = true)]
async fn a_model_whose_limiter_is_unavailable_fails_closed_naming_it() {
    let fake = FakeProvider::new();
    fake.reply_any(FakeReply::text("never sent"));
    let models = models(&fake);
    let err = models
        .chat("primary")
        .await
        .unwrap()
        .single_response(&ask("primary"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::LimiterUnavailable { model_id, .. } if model_id == "primary"),
        "{err:?}"
    );
    assert_eq!(fake.calls("primary"), 0, "nothing was sent unreserved");
}
