//! What a provider crate tells the kit: how its wire format looks for each case the
//! shared behaviours need (a good answer, a stream, each error status, quota, refusal,
//! context overflow, rate-limit headers) and how its credential travels.

use tollgate::{EmbeddingPurpose, ModelEntry, ModelsBuilder};

use super::server::{Recorded, Reply};

/// Token counts a scripted answer reports; the codec must decode them as
/// `input_tokens` and `output_tokens` with nothing cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireUsage {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
}

/// A streamed answer as it goes over the wire, one frame per event.
#[derive(Debug, Clone)]
pub struct StreamScript {
    /// The stream's `content-type`.
    pub content_type: String,
    /// The frames, in order (an SSE event with its blank line, an event-stream message).
    pub frames: Vec<Vec<u8>>,
    /// The index of the first frame that gives the reader an event (the first text):
    /// the frames before it give nothing.
    pub first_event: usize,
}

/// A tool call as the kit asks a script to put it on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct WireToolCall {
    /// The call's id (a provider whose wire carries none makes one up: the kit then
    /// checks only that the answer has one).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub input: serde_json::Value,
}

/// A provider's embeddings, scripted for the contract kit: its model, how a request
/// carries texts, purpose and width, and how an answer carries vectors.
pub trait EmbeddingsWire: Send + Sync {
    /// An embeddings model `model_id` served at `base_url`, naming the credential
    /// `credential`, with the capabilities that reach the kit's width
    /// ([`EMBEDDING_WIDTH`](crate::provider::EMBEDDING_WIDTH)): `dimensions_param`, or a
    /// `native_width` of that width. The kit sets limits and prices itself.
    fn model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry;

    /// The most texts the transport puts in one request (its `max_batch`, as the model
    /// above configures it); `None` when one request takes any number.
    fn max_batch(&self) -> Option<usize>;

    /// The texts a request carried, in order.
    fn texts(&self, request: &Recorded) -> Vec<String>;

    /// The purpose the request said (a task or input type); `None` when the wire has no
    /// such field (OpenAI), and the purpose part of the check is skipped.
    fn purpose(&self, request: &Recorded) -> Option<EmbeddingPurpose>;

    /// The width the request asked for (a dimensions parameter), if it asked one.
    fn dimensions(&self, request: &Recorded) -> Option<u64>;

    /// The provider's answer carrying `vectors` (one per text, in order) and reporting
    /// `input_tokens` (where its wire reports usage).
    fn answer(&self, vectors: &[Vec<f32>], input_tokens: u64) -> Reply;

    /// Whether the answer reports the tokens used; when not (Gemini's
    /// `batchEmbedContents`), the kit checks only that the call has an estimated usage.
    fn reports_usage(&self) -> bool {
        true
    }
}

/// A provider's wire format, scripted for the contract kit.
///
/// Implement it in the provider crate's tests and run every shared behaviour with
/// [`provider_contract_tests!`](crate::provider_contract_tests).
pub trait WireScript: Send + Sync + 'static {
    /// The provider key under test (e.g. `anthropic-direct`).
    fn provider(&self) -> &'static str;

    /// Adds the provider under test to `models` (e.g. `models.provider(MyProvider)`).
    fn register(&self, models: ModelsBuilder) -> ModelsBuilder;

    /// A chat model `model_id` served at `base_url`, naming the credential `credential`.
    /// The kit sets limits, output tokens and prices itself.
    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry;

    /// What the credential store holds for an account whose secret is `secret` (the
    /// key itself for most providers; a JSON record for AWS).
    fn credential(&self, secret: &str) -> String {
        secret.to_owned()
    }

    /// What identifies the credential in a request the provider sent (the key for a
    /// key-auth provider, the access key id of a signature), if it sent one.
    fn sent_identity(&self, request: &Recorded) -> Option<String>;

    /// What [`sent_identity`](Self::sent_identity) gives for `credential(secret)`.
    fn identity(&self, secret: &str) -> String {
        secret.to_owned()
    }

    /// A complete answer whose text is `text`, reporting `usage`, ending normally.
    fn answer(&self, text: &str, usage: WireUsage) -> Reply;

    /// A streamed answer whose text deltas are `pieces`, reporting `usage`, ending
    /// normally.
    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript;

    /// A frame the provider sends mid-stream to say it is overloaded (or failed on its
    /// side); `None` when its streams carry no error events. By default
    /// [`stream_error_saying`](Self::stream_error_saying) a fixed message.
    fn stream_error(&self) -> Option<Vec<u8>> {
        self.stream_error_saying("the server failed, try again")
    }

    /// The same frame carrying `message` as the provider's message (the secret check
    /// echoes the key in it); `None` when its streams carry no error events. A script
    /// that only overrides [`stream_error`](Self::stream_error) has this `None`, and the
    /// secret check says that part was not checked.
    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        let _ = message;
        None
    }

    /// A stream frame in the provider's framing whose content does not decode. By default
    /// an SSE event whose data is not JSON.
    fn malformed_frame(&self) -> Vec<u8> {
        b"data: {not json\n\n".to_vec()
    }

    /// The first bytes of one stream event `len` bytes long, in the provider's framing;
    /// the kit sends filler for the rest. By default the opening of an SSE event's `data`
    /// (a JSON string that never ends), which is also one unending NDJSON line.
    fn oversized_event(&self, len: usize) -> Vec<u8> {
        let _ = len;
        b"data: {\"filler\": \"".to_vec()
    }

    /// The provider's error answer for `status`, carrying `message`, as it sends it for
    /// an ordinary failure of that status (not quota, not overflow).
    fn error(&self, status: u16, message: &str) -> Reply;

    /// The provider's "slow down" answer (a 429 for most), without `retry-after` (the
    /// kit adds the header).
    fn rate_limited(&self, message: &str) -> Reply {
        self.error(429, message)
    }

    /// The provider's "out of quota or credit" answer.
    fn quota_exhausted(&self, message: &str) -> Reply;

    /// The provider's error answer for an input that does not fit the model's context
    /// window, as it sends it (OpenAI's `context_length_exceeded`, Anthropic's "prompt is
    /// too long", Bedrock's `ValidationException`, Gemini's `INVALID_ARGUMENT`); `None`
    /// when the provider never answers so (it truncates silently, or only stops).
    fn context_overflow(&self) -> Option<Reply>;

    /// A whole answer whose stop reason says the context window filled (Anthropic's and
    /// Bedrock's `model_context_window_exceeded`); `None` when the provider has no such
    /// stop reason.
    fn context_window_stop(&self) -> Option<Reply>;

    /// An answer the model refused for safety reasons (a refusal stop or a content
    /// filter); `None` when the provider has no such answer.
    fn refusal(&self, usage: WireUsage) -> Option<Reply>;

    /// Headers saying the provider allows `limit` requests a minute and `remaining`
    /// are left; empty when the provider sends no rate-limit headers.
    fn rate_limit_headers(&self, limit: u64, remaining: u64) -> Vec<(String, String)>;

    /// A whole answer holding the text `text`, then `call`, ended by the provider's
    /// tool-use stop, reporting `usage`; `None` when the provider's codec has no tool
    /// calls (the tool checks are skipped, saying so).
    fn tool_call(&self, text: &str, call: &WireToolCall, usage: WireUsage) -> Option<Reply> {
        let _ = (text, call, usage);
        None
    }

    /// The same answer streamed, the arguments split over several events where the
    /// provider's wire splits them; `None` when the provider's codec has no tool calls.
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        usage: WireUsage,
    ) -> Option<StreamScript> {
        let _ = (text, call, usage);
        None
    }

    /// The provider's embeddings, scripted; `None` when it serves none (the embeddings
    /// checks are skipped, saying so). A script that implements [`EmbeddingsWire`] too
    /// returns `Some(self)`.
    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        None
    }

    /// Log targets of third-party code the provider calls and cannot redact (e.g. an
    /// SDK that logs a server's error message at DEBUG): the secret check skips their
    /// lines when the server echoes the secret back. Each entry is a target prefix.
    fn foreign_log_targets(&self) -> &[&'static str] {
        &[]
    }

    /// Whether the provider's `x-should-retry: false` vetoes a retry.
    fn honours_should_retry(&self) -> bool {
        false
    }
}
