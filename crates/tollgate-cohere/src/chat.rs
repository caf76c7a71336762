//! The chat transport: encode, send once, decode. Everything else is the kit's
//! ([`tollgate::provider::http`]).

use tollgate::provider::http::{Endpoint, Framing};
use tollgate::provider::{ChatTransport, Signals};
use tollgate::provider::{LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::codec::{self, EncodeOptions, Events, StreamDecoder};
use crate::options::CohereOptions;

/// Where chat requests are posted.
pub(crate) const CHAT_PATH: &str = "/v2/chat";

/// The chat transport of one `cohere` model. Holds the credential's id, never the key.
#[derive(Debug)]
pub struct CohereChat {
    endpoint: Endpoint,
    model: ModelEntry,
    options: CohereOptions,
}

impl CohereChat {
    pub(crate) fn new(endpoint: Endpoint, model: &ModelEntry, options: CohereOptions) -> Self {
        CohereChat {
            endpoint,
            model: model.clone(),
            options,
        }
    }

    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<serde_json::Value> {
        codec::encode_request(
            request,
            &EncodeOptions {
                model: self.model.name.clone(),
                max_tokens: self.model.output_limit(None),
                stream,
                tool_choice: self.options.tool_choice.clone(),
            },
        )
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for CohereChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.encode(request, false)?;
        let model = &self.model.name;
        self.endpoint
            .post_decoded(CHAT_PATH, &body, signals, |bytes| {
                codec::decode_response(bytes, model)
            })
            .await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.encode(request, true)?;
        let events = Events::for_model(&self.model.name);
        self.endpoint
            .stream(
                CHAT_PATH,
                &body,
                signals,
                Framing::Sse,
                StreamDecoder::with(events),
            )
            .await
    }
}
