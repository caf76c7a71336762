//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`, off by default): the
//! crate's private decoders, reachable without an SDK client. Not part of the API.

use aws_credential_types::Credentials;
use aws_sdk_bedrockruntime::types::{
    ConverseStreamOutput, Message as WireMessage, StopReason as WireStop, TokenUsage,
};
use tollgate::provider::{LlmResponse, Result, StreamEvent};

use crate::codec::{ConverseStreamDecoder, decode};

/// The ConverseStream decoder `bedrock-converse` runs over the SDK's events.
#[derive(Debug)]
pub struct ConverseStream(ConverseStreamDecoder);

impl ConverseStream {
    /// A decoder for an answer from `model`.
    pub fn new(model: &str) -> Self {
        ConverseStream(ConverseStreamDecoder::new(model))
    }

    /// Whether the last event (`metadata`) was seen.
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }

    /// Decodes one event.
    pub fn event(&mut self, event: &ConverseStreamOutput) -> Result<Vec<StreamEvent>> {
        self.0.event(event)
    }
}

/// Decodes a Converse answer, as `bedrock-converse` does.
pub fn decode_converse(
    model: &str,
    message: Option<&WireMessage>,
    stop: &WireStop,
    usage: Option<&TokenUsage>,
) -> Result<LlmResponse> {
    decode(model, message, stop, usage)
}

/// Parses a stored AWS credential record (JSON), as the Bedrock providers do.
pub fn parse_aws_record(id: &str, text: &str) -> Result<Credentials> {
    crate::client::parse_record(id, text)
}
