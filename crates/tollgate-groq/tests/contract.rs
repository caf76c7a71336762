//! The provider contract kit (`tollgate-testkit`) against Groq's wire format (OpenAI's,
//! with Groq's rate-limit headers), and the catalog-level behaviours checked through the
//! kit's server: which rate-limit headers set the limiter.

use tollgate::{Dimension, ModelEntry, ModelsBuilder};
use tollgate_openai::testkit::OpenAiWire;
use tollgate_testkit::provider::{
    EmbeddingsWire, Kit, MODEL, Recorded, Reply, StreamScript, USAGE, WireScript, WireToolCall,
    WireUsage,
};

/// OpenAI's wire script for the `groq` preset, except that Groq sends no per-minute
/// request headers (its `-requests` headers count requests per day), so the kit's
/// requests-bucket check has nothing to read.
#[derive(Debug, Clone, Copy)]
struct GroqWire(OpenAiWire);

fn groq() -> GroqWire {
    GroqWire(OpenAiWire::new(tollgate_groq::PROVIDER))
}

impl WireScript for GroqWire {
    fn provider(&self) -> &'static str {
        self.0.provider()
    }
    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        self.0.register(models)
    }
    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        self.0.chat_model(model_id, base_url, credential)
    }
    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        self.0.sent_identity(request)
    }
    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        WireScript::answer(&self.0, text, usage)
    }
    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        self.0.stream(pieces, usage)
    }
    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        self.0.stream_error_saying(message)
    }
    fn error(&self, status: u16, message: &str) -> Reply {
        self.0.error(status, message)
    }
    fn quota_exhausted(&self, message: &str) -> Reply {
        self.0.quota_exhausted(message)
    }
    fn context_overflow(&self) -> Option<Reply> {
        self.0.context_overflow()
    }
    fn context_window_stop(&self) -> Option<Reply> {
        self.0.context_window_stop()
    }
    fn refusal(&self, usage: WireUsage) -> Option<Reply> {
        self.0.refusal(usage)
    }
    /// None per minute for requests (see [`GroqWire`]).
    fn rate_limit_headers(&self, _: u64, _: u64) -> Vec<(String, String)> {
        Vec::new()
    }
    fn tool_call(&self, text: &str, call: &WireToolCall, usage: WireUsage) -> Option<Reply> {
        self.0.tool_call(text, call, usage)
    }
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        usage: WireUsage,
    ) -> Option<StreamScript> {
        self.0.tool_call_stream(text, call, usage)
    }
    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        self.0.embeddings()
    }
    fn honours_should_retry(&self) -> bool {
        self.0.honours_should_retry()
    }
}

tollgate_testkit::provider_contract_tests!(groq();
    skip {
        rate_limit_headers_set_the_limiter_buckets:
            "Groq's request headers count requests per day: only its token headers are read \
             (`groq_token_headers_set_the_tokens_bucket_and_daily_request_headers_are_not_read`)",
        a_context_window_stop_is_typed_and_names_the_model:
            "Groq has no full-window stop reason",
        embeddings_are_sent_in_batches_of_max_batch_one_reservation_each:
            "Groq has no embeddings models",
        a_failed_embeddings_request_is_resent_alone: "Groq has no embeddings models",
        an_embeddings_request_carries_the_purpose_and_the_width: "Groq has no embeddings models",
        the_secret_never_shows_in_embeddings_errors: "Groq has no embeddings models",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (Groq has none); the overflow error is checked",
    }
);

fn bucket(levels: &[(Dimension, f64, u64)], dimension: Dimension) -> (f64, u64) {
    levels
        .iter()
        .find(|(d, _, _)| *d == dimension)
        .map(|(_, level, capacity)| (*level, *capacity))
        .unwrap_or_else(|| panic!("no {dimension} bucket in {levels:?}"))
}

/// Groq's six headers on an answer: the per-minute token ones set the tokens bucket;
/// `x-ratelimit-limit-requests` (a daily count, here 1,000) leaves the per-minute
/// requests bucket at the catalog's `rpm` (6,000).
#[tokio::test(start_paused = true)]
async fn groq_token_headers_set_the_tokens_bucket_and_daily_request_headers_are_not_read() {
    let script = groq();
    let kit = Kit::from_toml(
        &script,
        r#"
        [models.kit-model]
        provider = "groq"
        name = "llama-3.1-8b-instant"
        credential = "kit-credential"
        max_output_tokens = 1000
        rpm = 6000
        tpm = 1000000
        options = { base_url = "$BASE_URL" }
        "#,
    )
    .await;
    let answer = WireScript::answer(&script, "ok", USAGE)
        .header("x-ratelimit-limit-requests", "1000".to_owned())
        .header("x-ratelimit-remaining-requests", "990".to_owned())
        .header("x-ratelimit-reset-requests", "2m59.56s".to_owned())
        .header("x-ratelimit-limit-tokens", "6000".to_owned())
        .header("x-ratelimit-remaining-tokens", "5900".to_owned())
        .header("x-ratelimit-reset-tokens", "7.66s".to_owned());
    kit.server.only(answer);
    kit.ask(&kit.models).await.expect("answer");
    let snapshot = kit
        .models
        .limiter(MODEL)
        .expect("the model has a limiter")
        .snapshot()
        .await
        .expect("the in-process limiter answers");
    let (tokens_level, tokens_capacity) = bucket(&snapshot.levels, Dimension::Tokens);
    assert_eq!(tokens_capacity, 6000, "Groq's per-minute token limit");
    assert!(tokens_level <= 5901.0, "5,900 left, not {tokens_level}");
    let (requests_level, requests_capacity) = bucket(&snapshot.levels, Dimension::Requests);
    assert!(
        requests_level > 5000.0,
        "not the daily 990 left: {requests_level}"
    );
    assert_eq!(
        requests_capacity, 6000,
        "the catalog's rpm, not the daily 1,000"
    );
}
