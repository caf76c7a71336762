//! The provider contract kit (`tollgate-testkit`) against Azure OpenAI's wire format:
//! OpenAI's shapes (`tollgate_openai::testkit::OpenAiWire`) at Azure's deployment URLs,
//! with the `api-key` header, Azure's content-filter refusal and its rate-limit headers.

use serde_json::json;
use tollgate::{EmbeddingPurpose, ModelEntry, ModelsBuilder};
use tollgate_azure::AzureProvider;
use tollgate_openai::OpenAiProvider;
use tollgate_openai::testkit::OpenAiWire;
use tollgate_testkit::provider::{
    EmbeddingsWire, Recorded, Reply, StreamScript, WireScript, WireToolCall, WireUsage,
    embeddings_entry,
};

/// OpenAI's wire, as Azure's deployments write it.
#[derive(Debug, Clone, Copy)]
struct AzureWire {
    openai: OpenAiWire,
}

impl AzureWire {
    fn new() -> Self {
        AzureWire {
            openai: OpenAiWire::new(OpenAiProvider::new(tollgate_azure::PRESET)),
        }
    }
}

/// A model served at `base_url` (the resource's `endpoint`), by its deployment.
fn azure_entry(mut entry: ModelEntry, base_url: &str) -> ModelEntry {
    entry.options.remove("base_url");
    entry
        .with_option("endpoint", base_url)
        .with_option("deployment", "dep-1")
}

impl WireScript for AzureWire {
    fn provider(&self) -> &'static str {
        tollgate_azure::KEY
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(AzureProvider::new())
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        azure_entry(
            self.openai.chat_model(model_id, base_url, credential),
            base_url,
        )
    }

    /// The `api-key` header.
    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request.header("api-key").map(str::to_owned)
    }

    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        WireScript::answer(&self.openai, text, usage)
    }

    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        self.openai.stream(pieces, usage)
    }

    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        self.openai.stream_error_saying(message)
    }

    fn error(&self, status: u16, message: &str) -> Reply {
        self.openai.error(status, message)
    }

    fn quota_exhausted(&self, message: &str) -> Reply {
        self.openai.quota_exhausted(message)
    }

    fn context_overflow(&self) -> Option<Reply> {
        self.openai.context_overflow()
    }

    fn context_window_stop(&self) -> Option<Reply> {
        None
    }

    /// Azure's filter: a `content_filter` finish with the filtered categories.
    fn refusal(&self, usage: WireUsage) -> Option<Reply> {
        let results = json!({"hate": {"filtered": false, "severity": "safe"},
                             "violence": {"filtered": true, "severity": "high"}});
        Some(Reply::json(
            200,
            &json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                "model": "gpt-4o-2024-08-06",
                "choices": [{"index": 0, "finish_reason": "content_filter",
                             "message": {"role": "assistant", "content": null},
                             "content_filter_results": results}],
                "usage": {"prompt_tokens": usage.input, "completion_tokens": usage.output,
                          "total_tokens": usage.input + usage.output}}),
        ))
    }

    /// Azure's request headers count a window shorter than a minute and are not read.
    fn rate_limit_headers(&self, _: u64, _: u64) -> Vec<(String, String)> {
        Vec::new()
    }

    fn tool_call(&self, text: &str, call: &WireToolCall, usage: WireUsage) -> Option<Reply> {
        self.openai.tool_call(text, call, usage)
    }

    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        usage: WireUsage,
    ) -> Option<StreamScript> {
        self.openai.tool_call_stream(text, call, usage)
    }

    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        Some(self)
    }

    fn honours_should_retry(&self) -> bool {
        true
    }
}

impl EmbeddingsWire for AzureWire {
    fn model(&self, model_id: &str, base_url: &str, _: &str) -> ModelEntry {
        azure_entry(
            embeddings_entry(
                model_id,
                tollgate_azure::KEY,
                "text-embedding-test",
                base_url,
            ),
            base_url,
        )
    }

    fn max_batch(&self) -> Option<usize> {
        Some(2)
    }

    fn texts(&self, request: &Recorded) -> Vec<String> {
        self.openai.texts(request)
    }

    fn purpose(&self, request: &Recorded) -> Option<EmbeddingPurpose> {
        self.openai.purpose(request)
    }

    fn dimensions(&self, request: &Recorded) -> Option<u64> {
        self.openai.dimensions(request)
    }

    fn answer(&self, vectors: &[Vec<f32>], input_tokens: u64) -> Reply {
        EmbeddingsWire::answer(&self.openai, vectors, input_tokens)
    }
}

tollgate_testkit::provider_contract_tests!(AzureWire::new();
    skip {
        a_context_window_stop_is_typed_and_names_the_model:
            "Azure OpenAI has no full-window stop reason",
        rate_limit_headers_set_the_limiter_buckets:
            "Azure's x-ratelimit-*-requests count a window shorter than a minute and are not \
             read; its token headers are checked in tests/http.rs",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (Azure has none); the overflow error is checked",
        an_embeddings_request_carries_the_purpose_and_the_width:
            "the purpose (the wire has no field for it); the width is checked",
    }
);
