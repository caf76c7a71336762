//! The fallback chat client's wait rule, from the catalog or [`FallbackOptions::wait`],
//! on a paused clock: every model paused, a different model answers, at a different time,
//! under each rule.

use std::sync::Arc;
use std::time::Duration;

use super::FallbackOptions;
use crate::catalog::{FallbackWait, KnownProviders};
use crate::clock;
use crate::limit::Feedback;
use crate::pipeline::{ChatTransport, Signals};
use crate::provider::{Provider, ProviderContext, ProviderTransports};
use crate::{
    Block, Catalog, LlmRequest, LlmResponse, Message, ModelEntry, Models, ResponseBody,
    ResponseStream, Result, SamplingParams, StopReason, Usage,
};

/// A provider whose models answer with their own catalog id, at once, whole or streamed;
/// its key is `named`, or the one given.
#[derive(Debug)]
struct Named(&'static str);

#[async_trait::async_trait]
impl Provider for Named {
    fn key(&self) -> &'static str {
        self.0
    }
    async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Named(self.0)))
    }
}

impl ProviderTransports for Named {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(Answers(model.id.clone())))
    }
}

#[derive(Debug)]
struct Answers(String);

#[async_trait::async_trait]
impl ChatTransport for Answers {
    async fn send(&self, _: &LlmRequest, _: &Signals) -> Result<LlmResponse> {
        LlmResponse::new(ResponseBody {
            model: self.0.clone(),
            content: vec![Block::text(self.0.clone())],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            refusal: None,
        })
    }
    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let answer = self.send(request, signals).await?;
        let events = [Ok(crate::StreamEvent::Completed(answer))];
        Ok(ResponseStream::new(futures::stream::iter(events)))
    }
}

/// `a` falling back to `b` then `c` (with `a`'s `extra` catalog lines), each paused by a
/// 429 for 4 s, 1 s and 9 s.
fn paused_chain(extra: &str) -> Models {
    let known = KnownProviders::empty().with("named", "tests", false);
    let model = |id: &str, more: &str| {
        format!("[models.{id}]\nprovider = \"named\"\nrpm = 600\nmax_output_tokens = 16\n{more}\n")
    };
    let text = [
        model("a", &format!("fallbacks = [\"b\", \"c\"]\n{extra}")),
        model("b", ""),
        model("c", ""),
    ]
    .concat();
    let catalog = Catalog::from_toml_str_with(&text, &known).unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .provider(Named("named"))
        .build()
        .unwrap();
    for (id, secs) in [("a", 4), ("b", 1), ("c", 9)] {
        models.limiter(id).unwrap().feedback(Feedback::RateLimited {
            retry_after: Some(Duration::from_secs(secs)),
        });
    }
    models
}

/// Which model answered one call through `a`'s chain, and after how long.
async fn answered(models: &Models, options: FallbackOptions) -> (String, Duration) {
    let chat = models.chat_with_fallbacks("a", options).await.unwrap();
    let request = LlmRequest::new(
        "a",
        vec![Message::user("hi")],
        vec![],
        SamplingParams::new(),
    )
    .unwrap();
    let start = clock::now();
    let text = chat.single_response(&request).await.unwrap().text();
    (text, start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn fallback_chat_by_default_waits_for_the_model_free_soonest() {
    let models = paused_chain("");
    let got = answered(&models, FallbackOptions::default()).await;
    assert_eq!(got, ("b".into(), Duration::from_secs(1)));
}

#[tokio::test(start_paused = true)]
async fn fallback_chat_catalog_fallback_wait_last_waits_only_for_the_last_model() {
    let models = paused_chain("fallback_wait = \"last\"");
    let got = answered(&models, FallbackOptions::default()).await;
    assert_eq!(got, ("c".into(), Duration::from_secs(9)));
}

#[tokio::test(start_paused = true)]
async fn fallback_chat_options_wait_overrides_the_catalog_rule() {
    for (catalog, wait, expected) in [
        ("fallback_wait = \"last\"", FallbackWait::Soonest, ("b", 1)),
        ("", FallbackWait::Last, ("c", 9)),
    ] {
        let options = FallbackOptions {
            wait: Some(wait),
            ..FallbackOptions::default()
        };
        let got = answered(&paused_chain(catalog), options).await;
        assert_eq!(
            got,
            (expected.0.into(), Duration::from_secs(expected.1)),
            "{wait:?} over `{catalog}`"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn fallback_chain_from_the_catalog_takes_the_model_s_fallback_wait() {
    let models = paused_chain("fallback_wait = \"last\"");
    let chain = models.fallback_chain("a").unwrap();
    assert_eq!(chain.wait(), FallbackWait::Last);
    let start = clock::now();
    let grant = chain.reserve(crate::limit::Cost::call(1, 0)).await.unwrap();
    assert_eq!(
        (grant.model_id.as_str(), start.elapsed()),
        ("c", Duration::from_secs(9))
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_after_a_fallback_says_the_provider_of_the_model_that_took_it() {
    let known = KnownProviders::empty()
        .with("named", "tests", false)
        .with("other", "tests", false);
    let text = "[models.a]\nprovider = \"named\"\nrpm = 600\nmax_output_tokens = 16\n\
        fallbacks = [\"b\"]\n[models.b]\nprovider = \"other\"\nrpm = 600\nmax_output_tokens = 16\n";
    let models = Models::builder()
        .catalog(Catalog::from_toml_str_with(text, &known).unwrap())
        .provider(Named("named"))
        .provider(Named("other"))
        .build()
        .unwrap();
    models
        .limiter("a")
        .unwrap()
        .feedback(Feedback::RateLimited {
            retry_after: Some(Duration::from_secs(4)),
        });
    let chat = models
        .chat_with_fallbacks("a", FallbackOptions::default())
        .await
        .unwrap();
    let request = LlmRequest::new(
        "a",
        vec![Message::user("hi")],
        vec![],
        SamplingParams::new(),
    )
    .unwrap();
    let stream = chat.stream_response(&request).await.unwrap();
    assert_eq!(stream.provider(), Some("other"), "b took the call, not a");
    assert_eq!(stream.into_response().await.unwrap().text(), "b");
    let direct = models.chat("a").await.unwrap();
    let own = direct.stream_response(&request).await.unwrap();
    assert_eq!(own.provider(), Some("named"));
}
