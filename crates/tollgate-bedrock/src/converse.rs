//! `bedrock-converse`: Converse and ConverseStream through the SDK.

use std::collections::VecDeque;
use std::sync::Arc;

use aws_sdk_bedrockruntime::types::ConverseStreamOutput;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_smithy_types::event_stream::RawMessage;
use tollgate::pipeline::{ChatTransport, EmbeddingsTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{
    Error, LlmRequest, LlmResponse, ModelEntry, ProviderError, ResponseStream, Result, StreamEvent,
};

use crate::aws::{BedrockClient, call_config, classify, redact, sdk_error, secrets_of};
use crate::converse_codec::{self, ConverseStreamDecoder};
use crate::embeddings::BedrockEmbeddings;

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
            aws: BedrockClient::new(
                model,
                KEY,
                self.context.credential_ref(model),
                self.context.connect_timeout(),
            )?,
        }))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        Ok(Arc::new(BedrockEmbeddings::new(BedrockClient::new(
            model,
            KEY,
            self.context.credential_ref(model),
            self.context.connect_timeout(),
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
        return sdk_error(KEY, error, std::time::Duration::ZERO, None, secrets);
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
    classify(KEY, Some(code), message.as_deref(), None)
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
        let (client, credentials) = self.aws.client().await?;
        let secrets = secrets_of(credentials.as_ref());
        tracing::debug!(model = %self.aws.model().name, "bedrock-converse: sending");
        let mut call = client
            .converse()
            .model_id(&self.aws.model().name)
            .set_messages(Some(encoded.messages))
            .set_system((!encoded.system.is_empty()).then_some(encoded.system))
            .set_tool_config(encoded.tools)
            .set_inference_config(encoded.inference)
            .set_output_config(encoded.output)
            .customize();
        if let Some(config) = call_config(credentials) {
            call = call.config_override(config);
        }
        let output = call.send().await.map_err(|e| {
            let status = e.raw_response().map(|r| r.status().as_u16());
            sdk_error(KEY, &e, self.aws.connect_timeout(), status, &secrets)
        })?;
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
        let (client, credentials) = self.aws.client().await?;
        let secrets = secrets_of(credentials.as_ref());
        tracing::debug!(model = %self.aws.model().name, "bedrock-converse: streaming");
        let mut call = client
            .converse_stream()
            .model_id(&self.aws.model().name)
            .set_messages(Some(encoded.messages))
            .set_system((!encoded.system.is_empty()).then_some(encoded.system))
            .set_tool_config(encoded.tools)
            .set_inference_config(encoded.inference)
            .set_output_config(encoded.output)
            .customize();
        if let Some(config) = call_config(credentials) {
            call = call.config_override(config);
        }
        let output = call.send().await.map_err(|e| {
            let status = e.raw_response().map(|r| r.status().as_u16());
            sdk_error(KEY, &e, self.aws.connect_timeout(), status, &secrets)
        })?;
        let state = StreamState {
            events: output.stream,
            decoder: ConverseStreamDecoder::new(&self.aws.model().name),
            ready: VecDeque::new(),
            done: false,
        };
        let stream = futures::stream::unfold(state, move |mut s| {
            let secrets = secrets.clone();
            async move {
                loop {
                    if let Some(event) = s.ready.pop_front() {
                        return Some((Ok(event), s));
                    }
                    if s.done {
                        return None;
                    }
                    let failure = match s.events.recv().await {
                        Ok(Some(event)) => match s.decoder.event(&event) {
                            Ok(events) => {
                                s.ready.extend(events);
                                if s.decoder.is_finished() {
                                    s.done = true;
                                }
                                continue;
                            }
                            Err(e) => e,
                        },
                        Err(e) => stream_error(&e, &secrets),
                        // Cut before `metadata`: no answer, as a bad gateway (retried
                        // when nothing reached the reader yet).
                        Ok(None) => ProviderError::server(502).into(),
                    };
                    s.done = true;
                    return Some((Err(failure), s));
                }
            }
        });
        Ok(ResponseStream::new(stream))
    }
}

struct StreamState {
    events: aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver<
        ConverseStreamOutput,
        ConverseStreamOutputError,
    >,
    decoder: ConverseStreamDecoder,
    ready: VecDeque<StreamEvent>,
    done: bool,
}
