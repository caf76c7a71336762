//! `bedrock-converse` chat: Converse and ConverseStream through the SDK.

use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use tollgate::provider::{ChatTransport, Signals, decode_events, redacted_stream};
use tollgate::provider::{LlmRequest, LlmResponse, ResponseStream, Result};

use crate::client::{BedrockClient, events, redacted, send_once, stream_failure};
use crate::codec::{self, ConverseStreamDecoder};

/// The output limit sent when neither the request nor the catalog sets one.
const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The chat transport of one `bedrock-converse` model. Holds the credential's id, never
/// the record.
#[derive(Debug)]
pub struct ConverseChat {
    aws: BedrockClient,
}

/// The modeled name of a ConverseStream exception.
fn exception_name(error: &ConverseStreamOutputError) -> Option<&'static str> {
    Some(match error {
        ConverseStreamOutputError::ThrottlingException(_) => "ThrottlingException",
        ConverseStreamOutputError::ServiceUnavailableException(_) => "ServiceUnavailableException",
        ConverseStreamOutputError::InternalServerException(_) => "InternalServerException",
        ConverseStreamOutputError::ModelStreamErrorException(_) => "ModelStreamErrorException",
        ConverseStreamOutputError::ValidationException(_) => "ValidationException",
        _ => return None,
    })
}

impl ConverseChat {
    pub(crate) fn new(aws: BedrockClient) -> Self {
        ConverseChat { aws }
    }

    fn max_tokens(&self) -> u64 {
        self.aws
            .model()
            .output_limit(None)
            .unwrap_or(DEFAULT_MAX_TOKENS)
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for ConverseChat {
    async fn send(&self, request: &LlmRequest, _signals: &Signals) -> Result<LlmResponse> {
        // A setting Converse cannot write is refused by the codec, never dropped.
        let encoded = codec::encode(request, &self.aws.model().name, self.max_tokens())?;
        tracing::debug!(model = %self.aws.model().name, "bedrock-converse: sending");
        let (output, secrets) = send_once!(self.aws, |client| client
            .converse()
            .model_id(&self.aws.model().name)
            .set_messages(Some(encoded.messages))
            .set_system((!encoded.system.is_empty()).then_some(encoded.system))
            .set_tool_config(encoded.tools)
            .set_inference_config(encoded.inference)
            .set_output_config(encoded.output)
            .set_additional_model_request_fields(encoded.additional));
        let message = output.output().and_then(|o| o.as_message().ok());
        // The SDK decoded the answer: what the codec quotes from it (an unknown stop
        // reason) is cut of the secrets.
        let decoded = codec::decode(
            &self.aws.model().name,
            message,
            output.stop_reason(),
            output.usage(),
        );
        redacted(decoded, &secrets)
    }

    async fn send_stream(
        &self,
        request: &LlmRequest,
        _signals: &Signals,
    ) -> Result<ResponseStream> {
        // A setting Converse cannot write is refused by the codec, never dropped.
        let encoded = codec::encode(request, &self.aws.model().name, self.max_tokens())?;
        tracing::debug!(model = %self.aws.model().name, "bedrock-converse: streaming");
        let (output, secrets) = send_once!(self.aws, |client| client
            .converse_stream()
            .model_id(&self.aws.model().name)
            .set_messages(Some(encoded.messages))
            .set_system((!encoded.system.is_empty()).then_some(encoded.system))
            .set_tool_config(encoded.tools)
            .set_inference_config(encoded.inference)
            .set_output_config(encoded.output)
            .set_additional_model_request_fields(encoded.additional));
        let failure_secrets = secrets.clone();
        let stream = events(output.stream, move |e| {
            stream_failure(e, &failure_secrets, exception_name)
        });
        let decoder = ConverseStreamDecoder::new(&self.aws.model().name);
        Ok(redacted_stream(decode_events(stream, decoder), secrets))
    }
}
