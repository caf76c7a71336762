//! A model called by an alias or a pattern is the same model: the same runtime, so one
//! limiter and one bucket whatever name reaches it, the catalog's upstream name sent, and
//! a request carrying the client's name accepted by the model's client.

use tollgate::catalog::Limits;
use tollgate::{Catalog, Conversation, LlmRequest, ModelEntry, Models, SamplingParams};
use tollgate_fake::{FakeProvider, FakeReply};

fn models(fake: &FakeProvider) -> Models {
    let entry = ModelEntry::new("demo", "fake", "fake-demo")
        .with_output_tokens(16, 16)
        .with_limits(Limits {
            rpm: 60,
            ..Limits::default()
        })
        .with_aliases(["claude-opus-5-5"])
        .with_patterns(["gpt-*"]);
    let other = ModelEntry::new("other", "fake", "fake-other").with_output_tokens(16, 16);
    over(fake, vec![entry, other], None)
}

/// `Models` over `entries` (and the embedding `width`), on `fake`.
fn over(fake: &FakeProvider, entries: Vec<ModelEntry>, width: Option<u64>) -> Models {
    let mut catalog = entries
        .into_iter()
        .fold(Catalog::builder(), |b, e| b.model(e));
    if let Some(width) = width {
        catalog = catalog.embedding_width(width);
    }
    Models::builder()
        .catalog(catalog.build().unwrap())
        .provider(fake.clone())
        .build()
        .unwrap()
}

fn ask(name: &str) -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request(name, SamplingParams::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_chat_by_alias_or_pattern_is_served_by_the_resolved_model() {
    let fake = FakeProvider::new();
    let models = models(&fake);
    for name in ["claude-opus-5-5", "gpt-5.6-luna", "demo"] {
        fake.reply("demo", FakeReply::text("hi"));
        let chat = models.chat(name).await.unwrap();
        let answer = chat.single_response(&ask(name)).await.unwrap();
        assert_eq!(answer.text(), "hi", "{name}");
    }
    assert_eq!(fake.calls("demo"), 3);
    assert_eq!(fake.calls("other"), 0);
    // The pipeline goes on under the catalog id, so records and caches see one model.
    assert!(fake.requests().iter().all(|r| r.model_id() == "demo"));
}

#[tokio::test(start_paused = true)]
async fn a_model_has_one_limiter_whatever_name_is_used() {
    let fake = FakeProvider::new();
    let models = models(&fake);
    let by_id = models.limiter("demo").unwrap();
    for name in ["claude-opus-5-5", "gpt-4o"] {
        let by_name = models.limiter(name).unwrap();
        assert!(std::sync::Arc::ptr_eq(by_id, by_name), "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_naming_another_model_is_still_refused_by_a_model_s_client() {
    let fake = FakeProvider::new();
    let models = models(&fake);
    let chat = models.chat("claude-opus-5-5").await.unwrap();
    let err = chat.single_response(&ask("other")).await.unwrap_err();
    assert!(
        matches!(&err, tollgate::Error::InvalidRequest { field, .. } if field == "model_id"),
        "{err:?}"
    );
    assert_eq!(fake.calls("demo") + fake.calls("other"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_chain_asked_for_by_alias_serves_the_model_then_its_fallbacks() {
    let fake = FakeProvider::new();
    let entry = ModelEntry::new("demo", "fake", "fake-demo")
        .with_output_tokens(16, 16)
        .with_aliases(["claude-opus-5-5"])
        .with_fallbacks(["backup"]);
    let backup = ModelEntry::new("backup", "fake", "fake-backup").with_output_tokens(16, 16);
    let models = over(&fake, vec![entry, backup], None);
    fake.reply("demo", FakeReply::text("from demo"));
    let chain = models
        .chat_with_fallbacks("claude-opus-5-5", Default::default())
        .await
        .unwrap();
    let answer = chain
        .single_response(&ask("claude-opus-5-5"))
        .await
        .unwrap();
    assert_eq!(answer.text(), "from demo");
    assert_eq!(fake.calls("demo"), 1);
}

#[tokio::test(start_paused = true)]
async fn embeddings_and_decisions_by_alias_are_served_by_the_resolved_model() {
    use tollgate::catalog::{EmbeddingCapabilities, ModelKind};
    use tollgate::{DecisionRequest, EmbeddingPurpose, Question};
    let fake = FakeProvider::new();
    let embed = ModelEntry::new("embed", "fake", "fake-embed")
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(4),
            ..EmbeddingCapabilities::default()
        })
        .with_aliases(["text-embedding-3-small"]);
    let judge = ModelEntry::new("judge", "fake", "fake-judge")
        .with_kind(ModelKind::Decision)
        .with_patterns(["judge-*"]);
    let models = over(&fake, vec![embed, judge], Some(4));
    let vectors = models
        .embeddings("text-embedding-3-small")
        .await
        .unwrap()
        .embed_batch(&["hello".to_owned()], EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors[0].as_slice().len(), 4);
    fake.decide(
        "judge",
        [(
            "ok".to_owned(),
            [("yes".to_owned(), 0.9), ("no".to_owned(), 0.1)].into(),
        )]
        .into(),
    );
    let question = Question::Noul {
        name: "ok".into(),
        prompt: "Is it?".into(),
    };
    let request = DecisionRequest::new("judge-v2", "a state", vec![question]).unwrap();
    let decision = models
        .decision("judge-v2")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap();
    assert_eq!(decision.probability("ok", "yes"), Some(0.9));
}
