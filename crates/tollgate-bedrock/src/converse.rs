//! `bedrock-converse`: Converse and ConverseStream through the SDK.

use std::sync::Arc;

use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_smithy_types::event_stream::RawMessage;
use tollgate::pipeline::{ChatTransport, EmbeddingsTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::wire::{decode_events, keep_raw, redact};
use tollgate::{Error, LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::aws::{BedrockClient, events, sdk_error, send_once};
use crate::converse_codec::{self, ConverseStreamDecoder};
use crate::embeddings::BedrockEmbeddings;
use crate::exceptions::classify;

const KEY: &str = crate::BEDROCK_CONVERSE;

/// The output limit sent when neither the request nor the catalog sets one.
const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The `bedrock-converse` provider. Registered through `inventory`.
#[derive(Debug, Default, Clone, Copy)]
pub struct BedrockConverseProvider;

#[tollgate::async_trait]
impl Provider for BedrockConverseProvider {
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
        Ok(Arc::new(ConverseChat {
            aws: BedrockClient::new(model, &self.context)?,
        }))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        Ok(Arc::new(BedrockEmbeddings::new(BedrockClient::new(
            model,
            &self.context,
        )?)?))
    }
}

/// The chat transport of one `bedrock-converse` model. Holds the credential's id, never
/// the record.
#[derive(Debug)]
pub struct ConverseChat {
    aws: BedrockClient,
}

/// A mid-stream exception, classified by its modeled name like an HTTP one.
fn stream_error(
    error: &aws_sdk_bedrockruntime::error::SdkError<ConverseStreamOutputError, RawMessage>,
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
        ConverseStreamOutputError::ThrottlingException(_) => "ThrottlingException",
        ConverseStreamOutputError::ServiceUnavailableException(_) => "ServiceUnavailableException",
        ConverseStreamOutputError::InternalServerException(_) => "InternalServerException",
        ConverseStreamOutputError::ModelStreamErrorException(_) => "ModelStreamErrorException",
        ConverseStreamOutputError::ValidationException(_) => "ValidationException",
        _ => service.code().unwrap_or(""),
    };
    let message = service.message().map(|m| redact(m, secrets));
    classify(Some(code), message.as_deref(), None)
}

impl ConverseChat {
    fn max_tokens(&self) -> u64 {
        self.aws
            .model()
            .output_limit(None)
            .unwrap_or(DEFAULT_MAX_TOKENS)
    }
}

#[tollgate::async_trait]
impl ChatTransport for ConverseChat {
    async fn send(&self, request: &LlmRequest, _signals: &Signals) -> Result<LlmResponse> {
        let encoded = converse_codec::encode(request, self.max_tokens())?;
        tracing::debug!(model = %self.aws.model().name, "bedrock-converse: sending");
        let (output, _) = send_once!(self.aws, |client| client
            .converse()
            .model_id(&self.aws.model().name)
            .set_messages(Some(encoded.messages))
            .set_system((!encoded.system.is_empty()).then_some(encoded.system))
            .set_tool_config(encoded.tools)
            .set_inference_config(encoded.inference)
            .set_output_config(encoded.output));
        let message = output.output().and_then(|o| o.as_message().ok());
        converse_codec::decode(
            &self.aws.model().name,
            message,
            output.stop_reason(),
            output.usage(),
        )
    }

    async fn send_stream(
        &self,
        request: &LlmRequest,
        _signals: &Signals,
    ) -> Result<ResponseStream> {
        let encoded = converse_codec::encode(request, self.max_tokens())?;
        tracing::debug!(model = %self.aws.model().name, "bedrock-converse: streaming");
        let (output, secrets) = send_once!(self.aws, |client| client
            .converse_stream()
            .model_id(&self.aws.model().name)
            .set_messages(Some(encoded.messages))
            .set_system((!encoded.system.is_empty()).then_some(encoded.system))
            .set_tool_config(encoded.tools)
            .set_inference_config(encoded.inference)
            .set_output_config(encoded.output));
        let stream = events(output.stream, move |e| stream_error(e, &secrets));
        Ok(decode_events(
            stream,
            ConverseStreamDecoder::new(&self.aws.model().name),
        ))
    }
}
