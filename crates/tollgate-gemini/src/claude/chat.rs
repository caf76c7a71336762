//! The `anthropic-vertex` chat transport: Claude's Messages body from
//! `tollgate_anthropic::codec` (host [`Host::Vertex`]: no `model`, refusals name
//! `anthropic-vertex`, thinking in answers marked as signed there), plus
//! `anthropic_version`, POSTed once to `:rawPredict` or, streamed, `:streamRawPredict`.

use serde_json::Value;
use tollgate::provider::http::{Endpoint, Framing};
use tollgate::provider::{
    AccountingRule, CacheReadAccounting, ChatTransport, OutputAccounting, Signals,
};
use tollgate::provider::{LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};
use tollgate_anthropic::codec::{self, Chunks, EncodeOptions, Host, StreamDecoder};

use super::options::AnthropicVertexOptions;

/// The `anthropic_version` Vertex's Claude models take in the body (Anthropic's Vertex
/// client sends this value; there is no `anthropic-version` header on Vertex).
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The chat transport of one `anthropic-vertex` model. Holds the model's credential id
/// (through its endpoint's token source), never a token.
#[derive(Debug)]
pub struct AnthropicVertexChat {
    endpoint: Endpoint,
    entry: ModelEntry,
    name: String,
    options: AnthropicVertexOptions,
}

impl AnthropicVertexChat {
    pub(crate) fn new(
        endpoint: Endpoint,
        entry: &ModelEntry,
        name: String,
        options: AnthropicVertexOptions,
    ) -> Self {
        AnthropicVertexChat {
            endpoint,
            entry: entry.clone(),
            name,
            options,
        }
    }

    /// The Messages body for Vertex: no `model` (it is in the URL), `stream` when
    /// streamed (Vertex keeps it in the body), `anthropic_version` in the body.
    fn body(&self, request: &LlmRequest, stream: bool) -> Result<Value> {
        let mut body = codec::encode_request(
            request,
            &EncodeOptions {
                // Named in refusals only: the host leaves it out of the body.
                model: Some(self.name.clone()),
                max_tokens: self
                    .entry
                    .output_limit(None)
                    .unwrap_or(codec::DEFAULT_MAX_TOKENS),
                stream,
                top_k: self.options.top_k,
                tool_choice: self.options.tool_choice.clone(),
                host: Host::Vertex,
                // Not known to be taken on Vertex: folded into the user turn.
                mid_conversation_system: false,
            },
        )?;
        if let Some(map) = body.as_object_mut() {
            map.insert(
                "anthropic_version".into(),
                Value::from(VERTEX_ANTHROPIC_VERSION),
            );
        }
        Ok(body)
    }

    fn path(&self, method: &str) -> String {
        self.options
            .place
            .publisher_path("anthropic", &self.name, method)
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for AnthropicVertexChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.body(request, false)?;
        self.endpoint
            .post_decoded(&self.path("rawPredict"), &body, signals, |bytes| {
                codec::decode_response_from(bytes, Host::Vertex)
            })
            .await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.body(request, true)?;
        self.endpoint
            .stream(
                &self.path("streamRawPredict"),
                &body,
                signals,
                Framing::Sse,
                StreamDecoder::with(Chunks::from_host(Host::Vertex)),
            )
            .await
    }

    /// Output actually produced counts against the output-tokens quota. Vertex documents
    /// no exemption of cache reads from its input-tokens-per-minute quota (Anthropic's
    /// own API has one), so they are reserved as input: the cautious reading.
    fn accounting(&self) -> AccountingRule {
        AccountingRule {
            output: OutputAccounting::Actual,
            cache_reads: CacheReadAccounting::CountAsInput,
        }
    }
}
