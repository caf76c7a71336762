//! The provider contract kit (`tollgate-testkit`) against both Bedrock wire formats:
//! `anthropic-bedrock` (InvokeModel with the Anthropic body) and `bedrock-converse`
//! (Converse), through the AWS SDK pointed at the kit's server on 127.0.0.1.

mod common;

use serde_json::{Value, json};
use tollgate::{ModelEntry, ModelsBuilder};
use tollgate_bedrock::{AnthropicBedrockProvider, BedrockConverseProvider};
use tollgate_testkit::provider::{Recorded, Reply, StreamScript, WireScript, WireUsage};

use common::{event_frame, exception_frame};

/// The access key id the kit's secret stands for: derived from it, so that a rotated
/// record shows in the signature.
fn access_key_id(secret: &str) -> String {
    let alnum: String = secret
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    format!("AKID{}", &alnum[alnum.len().saturating_sub(12)..])
}

/// An error answer the way Bedrock sends one (restJson1): the exception's name in
/// `x-amzn-errortype`, the message in the body.
fn exception(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(status, &json!({ "message": message })).header(
        "x-amzn-errortype",
        format!("{kind}:http://internal.amazon.com/coral/"),
    )
}

fn exception_name(status: u16) -> &'static str {
    match status {
        400 => "ValidationException",
        401 => "UnrecognizedClientException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        413 => "RequestEntityTooLargeException",
        429 => "ThrottlingException",
        500 => "InternalServerException",
        503 | 529 => "ServiceUnavailableException",
        _ => "BadGatewayException",
    }
}

fn event_stream(frames: Vec<Vec<u8>>, first_event: usize) -> StreamScript {
    StreamScript {
        content_type: "application/vnd.amazon.eventstream".into(),
        frames,
        first_event,
    }
}

/// What both Bedrock keys share: credentials, signatures, exceptions.
trait Bedrock: Send + Sync + 'static {
    const KEY: &'static str;
    /// The `:event-type` of its stream's text events.
    const EVENT: &'static str;
}

/// The first bytes of a `kind` event `len` bytes long in all, whose JSON payload is one
/// string of spaces: its prelude (giving the whole length) and headers, and the payload
/// up to the string; the spaces, the string's end and the message's CRC are left out.
fn oversized_frame(kind: &str, len: usize) -> Vec<u8> {
    let overhead = event_frame(kind, &json!({"filler": ""})).len();
    let whole = event_frame(kind, &json!({"filler": " ".repeat(len - overhead)}));
    assert_eq!(whole.len(), len);
    // Without `"}` and the 4-byte CRC: what is left ends where the spaces begin.
    whole[..overhead - 6].to_vec()
}

/// Implements the shared parts of [`WireScript`] for a Bedrock key.
macro_rules! bedrock_common {
    () => {
        fn provider(&self) -> &'static str {
            <Self as Bedrock>::KEY
        }

        fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
            ModelEntry::new(model_id, <Self as Bedrock>::KEY, "vendor.model-test")
                .with_credential(credential)
                .with_option("region", "us-east-1")
                .with_option("endpoint_url", base_url)
        }

        fn credential(&self, secret: &str) -> String {
            json!({"access_key_id": access_key_id(secret), "secret_access_key": secret,
                   "session_token": format!("session-{secret}")})
            .to_string()
        }

        fn sent_identity(&self, request: &Recorded) -> Option<String> {
            let auth = request.header("authorization")?;
            let credential = auth.split("Credential=").nth(1)?;
            credential.split('/').next().map(str::to_owned)
        }

        fn identity(&self, secret: &str) -> String {
            access_key_id(secret)
        }

        fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
            Some(exception_frame("internalServerException", message))
        }

        fn error(&self, status: u16, message: &str) -> Reply {
            exception(status, exception_name(status), message)
        }

        fn quota_exhausted(&self, message: &str) -> Reply {
            exception(400, "ServiceQuotaExceededException", message)
        }

        fn rate_limit_headers(&self, _: u64, _: u64) -> Vec<(String, String)> {
            Vec::new()
        }

        /// An event-stream message `len` bytes long, up to its JSON payload's filler.
        fn oversized_event(&self, len: usize) -> Vec<u8> {
            oversized_frame(<Self as Bedrock>::EVENT, len)
        }

        /// The SDK's orchestrator logs a failed call's error message, as the server
        /// sent it, at DEBUG, and its event-stream receiver logs every stream message
        /// whole (an exception's message too) at TRACE; tollgate cannot redact either
        /// (AWS never echoes credentials).
        fn foreign_log_targets(&self) -> &[&'static str] {
            &[
                "aws_smithy_runtime::client::orchestrator",
                "aws_smithy_http::event_stream::receiver",
            ]
        }
    };
}

/// `anthropic-bedrock`: the Anthropic Messages body over InvokeModel.
struct AnthropicOnBedrock;

impl Bedrock for AnthropicOnBedrock {
    const KEY: &'static str = "anthropic-bedrock";
    const EVENT: &'static str = "chunk";
}

fn message(text: &str, stop: &str, usage: WireUsage) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": usage.input, "output_tokens": usage.output}})
}

/// One stream chunk: an Anthropic stream event, base64 in `{"bytes": …}`.
fn chunk(event: &Value) -> Vec<u8> {
    let bytes = aws_smithy_types::base64::encode(event.to_string());
    event_frame("chunk", &json!({ "bytes": bytes }))
}

impl WireScript for AnthropicOnBedrock {
    bedrock_common!();

    /// A chunk whose Anthropic event is not JSON.
    fn malformed_frame(&self) -> Vec<u8> {
        let bytes = aws_smithy_types::base64::encode("{not json");
        event_frame("chunk", &json!({ "bytes": bytes }))
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(AnthropicBedrockProvider)
    }

    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        Reply::json(200, &message(text, "end_turn", usage))
    }

    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        let mut events = vec![
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": usage.input, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ];
        let first_event = events.len();
        for piece in pieces {
            events.push(json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 0}));
        events.push(json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": usage.output}}));
        events.push(json!({"type": "message_stop"}));
        event_stream(events.iter().map(chunk).collect(), first_event)
    }

    /// Claude's own wording, passed through by Bedrock in a `ValidationException`.
    fn context_overflow(&self) -> Option<Reply> {
        Some(exception(
            400,
            "ValidationException",
            "The model returned the following errors: prompt is too long: 215000 tokens > \
             200000 maximum",
        ))
    }

    fn context_window_stop(&self) -> Option<Reply> {
        Some(Reply::json(
            200,
            &message(
                "cut",
                "model_context_window_exceeded",
                WireUsage {
                    input: 12,
                    output: 1,
                },
            ),
        ))
    }

    fn refusal(&self, usage: WireUsage) -> Option<Reply> {
        Some(Reply::json(200, &message("", "refusal", usage)))
    }
}

/// `bedrock-converse`: the Converse API.
struct Converse;

impl Bedrock for Converse {
    const KEY: &'static str = "bedrock-converse";
    const EVENT: &'static str = "contentBlockDelta";
}

fn converse_answer(text: &str, stop: &str, usage: WireUsage) -> Value {
    json!({"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
           "stopReason": stop,
           "usage": {"inputTokens": usage.input, "outputTokens": usage.output,
                     "totalTokens": usage.input + usage.output},
           "metrics": {"latencyMs": 5}})
}

impl WireScript for Converse {
    bedrock_common!();

    /// A `contentBlockDelta` event whose payload is not JSON.
    fn malformed_frame(&self) -> Vec<u8> {
        use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
        let header = |name: &str, value: &str| {
            Header::new(
                name.to_owned(),
                HeaderValue::String(value.to_owned().into()),
            )
        };
        let message = Message::new(b"{not json".to_vec())
            .add_header(header(":message-type", "event"))
            .add_header(header(":event-type", "contentBlockDelta"))
            .add_header(header(":content-type", "application/json"));
        let mut out = Vec::new();
        aws_smithy_eventstream::frame::write_message_to(&message, &mut out).expect("a frame");
        out
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(BedrockConverseProvider)
    }

    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        Reply::json(200, &converse_answer(text, "end_turn", usage))
    }

    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        let mut frames = vec![event_frame("messageStart", &json!({"role": "assistant"}))];
        let first_event = frames.len();
        for piece in pieces {
            frames.push(event_frame(
                "contentBlockDelta",
                &json!({"contentBlockIndex": 0, "delta": {"text": piece}}),
            ));
        }
        frames.push(event_frame(
            "contentBlockStop",
            &json!({"contentBlockIndex": 0}),
        ));
        frames.push(event_frame(
            "messageStop",
            &json!({"stopReason": "end_turn"}),
        ));
        frames.push(event_frame(
            "metadata",
            &json!({"usage": {"inputTokens": usage.input, "outputTokens": usage.output,
                              "totalTokens": usage.input + usage.output},
                    "metrics": {"latencyMs": 42}}),
        ));
        event_stream(frames, first_event)
    }

    fn context_overflow(&self) -> Option<Reply> {
        Some(exception(
            400,
            "ValidationException",
            "Input is too long for requested model.",
        ))
    }

    fn context_window_stop(&self) -> Option<Reply> {
        Some(Reply::json(
            200,
            &converse_answer(
                "cut",
                "model_context_window_exceeded",
                WireUsage {
                    input: 12,
                    output: 1,
                },
            ),
        ))
    }

    fn refusal(&self, usage: WireUsage) -> Option<Reply> {
        Some(Reply::json(
            200,
            &converse_answer("", "guardrail_intervened", usage),
        ))
    }
}

mod anthropic_bedrock {
    tollgate_testkit::provider_contract_tests!(super::AnthropicOnBedrock);
}

mod bedrock_converse {
    tollgate_testkit::provider_contract_tests!(super::Converse);
}
