//! `anthropic-bedrock`: Claude over InvokeModel and InvokeModelWithResponseStream, with
//! the Anthropic Messages body from `tollgate_anthropic::codec` (`anthropic_version:
//! bedrock-2023-05-31`, no `model`: Bedrock names the model in the URL), decoded by the
//! same codec, stream chunks included.

use std::sync::Arc;

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::ResponseStream as BedrockEvents;
use aws_sdk_bedrockruntime::types::error::ResponseStreamError;
use aws_smithy_types::event_stream::RawMessage;
use futures::StreamExt;
use tollgate::limit::{AccountingRule, CacheReadAccounting, OutputAccounting};
use tollgate::pipeline::{ChatTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::wire::{decode_events, keep_raw, redact};
use tollgate::{Error, LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};
use tollgate_anthropic::codec::{self, EncodeOptions, StreamDecoder, ToolChoice};

use crate::aws::{BedrockClient, events, sdk_error, send_once};
use crate::exceptions::classify;

/// The `anthropic_version` Bedrock's Claude models take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

const KEY: &str = crate::ANTHROPIC_BEDROCK;

/// The `anthropic-bedrock` provider. Registered through `inventory`.
#[derive(Debug, Default, Clone, Copy)]
pub struct AnthropicBedrockProvider;

#[tollgate::async_trait]
impl Provider for AnthropicBedrockProvider {
    fn key(&self) -> &'static str {
        KEY
    }

    fn conventions_name(&self) -> &'static str {
        "aws.bedrock"
    }

    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        crate::aws::BedrockOptions::from_model(model)
            .ok()
            .and_then(|o| o.base_url())
    }

    /// A model without a `credential` uses the AWS default credential chain.
    fn requires_credential(&self) -> bool {
        false
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Clients {
            context: context.clone(),
        }))
    }
}

#[derive(Debug)]
struct Clients {
    context: ProviderContext,
}

impl ProviderTransports for Clients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(AnthropicBedrockChat {
            aws: BedrockClient::new(model, &self.context)?,
        }))
    }
}

/// The chat transport of one `anthropic-bedrock` model. Holds the credential's id, never
/// the record: the record is read from the store for each request.
#[derive(Debug)]
pub struct AnthropicBedrockChat {
    aws: BedrockClient,
}

impl AnthropicBedrockChat {
    fn body(&self, request: &LlmRequest) -> Result<Blob> {
        let model = self.aws.model();
        let mut body = codec::encode_request(
            request,
            &EncodeOptions {
                model: None,
                max_tokens: model
                    .output_limit(None)
                    .unwrap_or(codec::DEFAULT_MAX_TOKENS),
                stream: false,
                top_k: None,
                tool_choice: ToolChoice::Auto,
            },
        )?;
        if let Some(map) = body.as_object_mut() {
            map.remove("stream");
            map.insert(
                "anthropic_version".into(),
                serde_json::Value::from(BEDROCK_ANTHROPIC_VERSION),
            );
        }
        let bytes = serde_json::to_vec(&body).map_err(|e| Error::InvalidRequest {
            field: "request".into(),
            reason: format!("the body could not be written: {e}"),
        })?;
        Ok(Blob::new(bytes))
    }
}

/// A mid-stream exception, classified by its modeled name like an HTTP one.
fn stream_error(
    error: &aws_sdk_bedrockruntime::error::SdkError<ResponseStreamError, RawMessage>,
    secrets: &[String],
) -> Error {
    use aws_sdk_bedrockruntime::error::ProvideErrorMetadata;
    let Some(service) = error.as_service_error() else {
        // A frame that does not decode keeps its bytes, when the SDK kept them.
        let raw = match error.raw_response() {
            Some(RawMessage::Invalid(Some(bytes))) => bytes.as_ref(),
            _ => &[],
        };
        let failure = keep_raw(
            sdk_error(error, std::time::Duration::ZERO, None, None, secrets),
            raw,
        );
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        return failure.redacted(&secrets);
    };
    let code = match service {
        ResponseStreamError::ThrottlingException(_) => "ThrottlingException",
        ResponseStreamError::ServiceUnavailableException(_) => "ServiceUnavailableException",
        ResponseStreamError::InternalServerException(_) => "InternalServerException",
        ResponseStreamError::ModelStreamErrorException(_) => "ModelStreamErrorException",
        ResponseStreamError::ModelTimeoutException(_) => "ModelTimeoutException",
        ResponseStreamError::ValidationException(_) => "ValidationException",
        _ => service.code().unwrap_or(""),
    };
    let message = service.message().map(|m| redact(m, secrets));
    classify(Some(code), message.as_deref(), None)
}

#[tollgate::async_trait]
impl ChatTransport for AnthropicBedrockChat {
    async fn send(&self, request: &LlmRequest, _signals: &Signals) -> Result<LlmResponse> {
        let body = self.body(request)?;
        tracing::debug!(model = %self.aws.model().name, "anthropic-bedrock: invoking");
        let (output, _) = send_once!(self.aws, |client| client
            .invoke_model()
            .model_id(&self.aws.model().name)
            .content_type("application/json")
            .accept("application/json")
            .body(body));
        codec::decode_response(output.body().as_ref())
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
        let chunks = events(output.body, move |e| stream_error(e, &secrets)).filter_map(|event| {
            futures::future::ready(match event {
                Ok(BedrockEvents::Chunk(part)) => Some(Ok(part
                    .bytes()
                    .map(|b| String::from_utf8_lossy(b.as_ref()).into_owned())
                    .unwrap_or_default())),
                // An event kind this SDK does not know: skipped.
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
        });
        Ok(decode_events(chunks, StreamDecoder::new()))
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
