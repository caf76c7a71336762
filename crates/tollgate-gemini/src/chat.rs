//! The chat transport: encode, send once, decode. Everything else is the kit's
//! ([`tollgate::provider::http`]).

use tollgate::provider::http::{Endpoint, Framing};
use tollgate::provider::{
    AccountingRule, CacheReadAccounting, ChatTransport, OutputAccounting, Signals, StreamDecoder,
};
use tollgate::provider::{LlmRequest, LlmResponse, ResponseStream, Result};

use crate::codec;
use crate::options::GeminiModel;

/// The chat transport of one `gemini` or `vertex` model.
#[derive(Debug)]
pub struct GeminiChat {
    endpoint: Endpoint,
    model: GeminiModel,
}

impl GeminiChat {
    pub(crate) fn new(endpoint: Endpoint, model: GeminiModel) -> Self {
        GeminiChat { endpoint, model }
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for GeminiChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = codec::encode_request(request, &self.model.encode_options())?;
        let path = self.model.path("generateContent");
        self.endpoint
            .post_decoded(&path, &body, signals, codec::decode_response)
            .await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = codec::encode_request(request, &self.model.encode_options())?;
        let path = self.model.path("streamGenerateContent?alt=sse");
        self.endpoint
            .stream(
                &path,
                &body,
                signals,
                Framing::Sse,
                StreamDecoder::<codec::Chunks>::new(),
            )
            .await
    }

    /// Gemini's TPM counts input tokens only (the catalog sets `input_tpm`, never an
    /// output limit; see [`GeminiOptions::from_model`](crate::GeminiOptions::from_model));
    /// implicit cache hits count as input as far as is known.
    fn accounting(&self) -> AccountingRule {
        AccountingRule {
            output: OutputAccounting::Actual,
            cache_reads: CacheReadAccounting::CountAsInput,
        }
    }
}
