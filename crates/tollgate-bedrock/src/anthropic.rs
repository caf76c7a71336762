//! `anthropic-bedrock` chat: Claude over InvokeModel and InvokeModelWithResponseStream,
//! with the Anthropic Messages body from `tollgate_anthropic::codec` (`anthropic_version:
//! bedrock-2023-05-31`, no `model`: Bedrock names the model in the URL), decoded by the
//! same codec, stream chunks included. The codec's host is [`Host::Bedrock`]: a setting it
//! refuses is refused for `bedrock` and the model's Bedrock id, and thinking in an answer
//! is marked as signed by `bedrock`. Claude takes back thinking signed by `anthropic` or
//! `bedrock` (Anthropic documents its signatures as valid on every platform); thinking
//! signed by any other provider is left out.

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::ResponseStream as BedrockEvents;
use aws_sdk_bedrockruntime::types::error::ResponseStreamError;
use futures::StreamExt;
use tollgate::provider::{
    AccountingRule, CacheReadAccounting, ChatTransport, OutputAccounting, Signals, decode_events,
    redacted_stream,
};
use tollgate::provider::{Error, LlmRequest, LlmResponse, ResponseStream, Result};
use tollgate_anthropic::codec::{self, Chunks, EncodeOptions, Host, StreamDecoder, ToolChoice};

use crate::client::{BedrockClient, events, redacted, send_once, stream_failure, without_secrets};

/// The `anthropic_version` Bedrock's Claude models take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The chat transport of one `anthropic-bedrock` model. Holds the credential's id, never
/// the record: the record is read from the store for each request.
#[derive(Debug)]
pub struct AnthropicBedrockChat {
    aws: BedrockClient,
}

impl AnthropicBedrockChat {
    pub(crate) fn new(aws: BedrockClient) -> Self {
        AnthropicBedrockChat { aws }
    }

    fn body(&self, request: &LlmRequest) -> Result<Blob> {
        let model = self.aws.model();
        let mut body = codec::encode_request(
            request,
            &EncodeOptions {
                // Named in refusals; Bedrock names the model in the URL, not the body.
                model: Some(model.name.clone()),
                max_tokens: model
                    .output_limit(None)
                    .unwrap_or(codec::DEFAULT_MAX_TOKENS),
                stream: false,
                top_k: None,
                tool_choice: ToolChoice::Auto,
                host: Host::Bedrock,
                // Bedrock does not take mid-conversation system messages.
                mid_conversation_system: false,
            },
        )?;
        if let Some(map) = body.as_object_mut() {
            map.remove("stream");
            map.insert(
                "anthropic_version".into(),
                serde_json::Value::from(BEDROCK_ANTHROPIC_VERSION),
            );
        }
        let bytes = serde_json::to_vec(&body).map_err(|e| {
            Error::invalid_request("request", format!("the body could not be written: {e}"))
        })?;
        Ok(Blob::new(bytes))
    }
}

/// The modeled name of an InvokeModelWithResponseStream exception.
fn exception_name(error: &ResponseStreamError) -> Option<&'static str> {
    Some(match error {
        ResponseStreamError::ThrottlingException(_) => "ThrottlingException",
        ResponseStreamError::ServiceUnavailableException(_) => "ServiceUnavailableException",
        ResponseStreamError::InternalServerException(_) => "InternalServerException",
        ResponseStreamError::ModelStreamErrorException(_) => "ModelStreamErrorException",
        ResponseStreamError::ModelTimeoutException(_) => "ModelTimeoutException",
        ResponseStreamError::ValidationException(_) => "ValidationException",
        _ => return None,
    })
}

#[tollgate::provider::async_trait]
impl ChatTransport for AnthropicBedrockChat {
    async fn send(&self, request: &LlmRequest, _signals: &Signals) -> Result<LlmResponse> {
        let body = self.body(request)?;
        tracing::debug!(model = %self.aws.model().name, "anthropic-bedrock: invoking");
        let (output, secrets) = send_once!(self.aws, |client| client
            .invoke_model()
            .model_id(&self.aws.model().name)
            .content_type("application/json")
            .accept("application/json")
            .body(body));
        let body = without_secrets(output.body().as_ref(), &secrets);
        redacted(codec::decode_response_from(&body, Host::Bedrock), &secrets)
    }

    async fn send_stream(
        &self,
        request: &LlmRequest,
        _signals: &Signals,
    ) -> Result<ResponseStream> {
        let body = self.body(request)?;
        tracing::debug!(model = %self.aws.model().name, "anthropic-bedrock: invoking, streamed");
        let (output, secrets) = send_once!(self.aws, |client| client
            .invoke_model_with_response_stream()
            .model_id(&self.aws.model().name)
            .content_type("application/json")
            .accept("application/json")
            .body(body));
        let (failure_secrets, chunk_secrets) = (secrets.clone(), secrets.clone());
        let chunks = events(output.body, move |e| {
            stream_failure(e, &failure_secrets, exception_name)
        })
        .filter_map(move |event| {
            futures::future::ready(match event {
                // The decoder never sees a secret, so nothing it builds or logs holds one.
                Ok(BedrockEvents::Chunk(part)) => Some(Ok(part
                    .bytes()
                    .map(|b| {
                        let b = without_secrets(b.as_ref(), &chunk_secrets);
                        String::from_utf8_lossy(&b).into_owned()
                    })
                    .unwrap_or_default())),
                // An event kind this SDK does not know: skipped.
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
        });
        Ok(redacted_stream(
            decode_events(
                chunks,
                StreamDecoder::with(Chunks::from_host(Host::Bedrock)),
            ),
            secrets,
        ))
    }

    /// As Anthropic direct: output actually produced counts against output TPM, cache
    /// reads do not count against input TPM.
    fn accounting(&self) -> AccountingRule {
        AccountingRule {
            output: OutputAccounting::Actual,
            cache_reads: CacheReadAccounting::NotCounted,
        }
    }
}
