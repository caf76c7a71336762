//! The provider contract kit (`tollgate-testkit`) against both Bedrock wire formats:
//! `anthropic-bedrock` (InvokeModel with the Anthropic body) and `bedrock-converse`
//! (Converse), through the AWS SDK pointed at the kit's server on 127.0.0.1.

mod common;
// A test target's root resolves `mod x;` next to itself, where `x.rs` would be a test
// target of its own: its submodules live in `contract/`.
#[path = "contract/embeddings.rs"]
mod embeddings;

use serde_json::{Value, json};
use tollgate::{ModelEntry, ModelsBuilder};
use tollgate_bedrock::{AnthropicBedrockProvider, BedrockConverseProvider};
use tollgate_testkit::provider::{
    EmbeddingsWire, Recorded, Reply, StreamScript, WireScript, WireToolCall, WireUsage,
};

use common::{event_frame, exception_frame};
use embeddings::{Cohere, Titan};

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

/// A tool call's input as JSON text, in two pieces (split at a character), the way both
/// Bedrock streams spread it over several events.
fn input_pieces(call: &WireToolCall) -> [String; 2] {
    let input = call.input.to_string();
    let middle = input
        .char_indices()
        .nth(input.chars().count() / 2)
        .map_or(input.len(), |(at, _)| at);
    let (head, tail) = input.split_at(middle);
    [head.to_owned(), tail.to_owned()]
}

/// `entry` naming `credential`, in `us-east-1`, its endpoint the kit's server.
fn aws_entry(entry: ModelEntry, base_url: &str, credential: &str) -> ModelEntry {
    entry
        .with_credential(credential)
        .with_option("region", "us-east-1")
        .with_option("endpoint_url", base_url)
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
            aws_entry(
                ModelEntry::new(model_id, <Self as Bedrock>::KEY, "vendor.model-test"),
                base_url,
                credential,
            )
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

/// An Anthropic message holding `content` (its blocks), ended by `stop`.
fn message_of(content: Value, stop: &str, usage: WireUsage) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
           "content": content, "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": usage.input, "output_tokens": usage.output}})
}

fn message(text: &str, stop: &str, usage: WireUsage) -> Value {
    message_of(json!([{"type": "text", "text": text}]), stop, usage)
}

/// An Anthropic stream as Bedrock chunks: `message_start`, a text block 0 of `pieces`,
/// the events of the blocks after it (`more`), the `stop` and the usage.
fn anthropic_stream(
    pieces: &[&str],
    more: Vec<Value>,
    stop: &str,
    usage: WireUsage,
) -> StreamScript {
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
    events.extend(more);
    events.push(json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": usage.output}}));
    events.push(json!({"type": "message_stop"}));
    event_stream(events.iter().map(chunk).collect(), first_event)
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
        anthropic_stream(pieces, Vec::new(), "end_turn", usage)
    }

    /// The Anthropic message InvokeModel answers: a text block, then a `tool_use` block,
    /// stopped by `tool_use`.
    fn tool_call(&self, text: &str, call: &WireToolCall, usage: WireUsage) -> Option<Reply> {
        let content = json!([{"type": "text", "text": text},
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]);
        Some(Reply::json(200, &message_of(content, "tool_use", usage)))
    }

    /// Block 1 opens as a `tool_use` with its id and name and an empty input; its
    /// `input_json_delta`s carry the input's JSON text in pieces.
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        usage: WireUsage,
    ) -> Option<StreamScript> {
        let mut blocks = vec![json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": call.id, "name": call.name,
                              "input": {}}})];
        for piece in input_pieces(call) {
            blocks.push(json!({"type": "content_block_delta", "index": 1,
                               "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        blocks.push(json!({"type": "content_block_stop", "index": 1}));
        Some(anthropic_stream(&[text], blocks, "tool_use", usage))
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

/// `bedrock-converse`: the Converse API; its embeddings models are InvokeModel's, with
/// the family's own body (`embeddings`: Titan's or Cohere's).
struct Converse {
    embeddings: &'static (dyn EmbeddingsWire + 'static),
}

/// Converse, its embeddings model Titan Text Embeddings v2.
const CONVERSE_TITAN: Converse = Converse { embeddings: &Titan };

/// Converse, its embeddings model Cohere Embed.
const CONVERSE_COHERE: Converse = Converse {
    embeddings: &Cohere,
};

impl Bedrock for Converse {
    const KEY: &'static str = "bedrock-converse";
    const EVENT: &'static str = "contentBlockDelta";
}

fn converse_answer(text: &str, stop: &str, usage: WireUsage) -> Value {
    converse_answer_of(json!([{ "text": text }]), stop, usage)
}

/// A Converse answer whose message holds `content` (its blocks), ended by `stop`.
fn converse_answer_of(content: Value, stop: &str, usage: WireUsage) -> Value {
    json!({"output": {"message": {"role": "assistant", "content": content}},
           "stopReason": stop,
           "usage": {"inputTokens": usage.input, "outputTokens": usage.output,
                     "totalTokens": usage.input + usage.output},
           "metrics": {"latencyMs": 5}})
}

/// A ConverseStream answer: `messageStart`, a text block 0 of `pieces`, the frames of
/// the blocks after it (`more`), `messageStop` with `stop`, and `metadata` with the usage.
fn converse_stream(
    pieces: &[&str],
    more: Vec<Vec<u8>>,
    stop: &str,
    usage: WireUsage,
) -> StreamScript {
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
    frames.extend(more);
    frames.push(event_frame("messageStop", &json!({ "stopReason": stop })));
    frames.push(event_frame(
        "metadata",
        &json!({"usage": {"inputTokens": usage.input, "outputTokens": usage.output,
                          "totalTokens": usage.input + usage.output},
                "metrics": {"latencyMs": 42}}),
    ));
    event_stream(frames, first_event)
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
        converse_stream(pieces, Vec::new(), "end_turn", usage)
    }

    /// A text block, then a `toolUse` block, stopped by `tool_use`.
    fn tool_call(&self, text: &str, call: &WireToolCall, usage: WireUsage) -> Option<Reply> {
        let content = json!([{ "text": text },
            {"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.input}}]);
        Some(Reply::json(
            200,
            &converse_answer_of(content, "tool_use", usage),
        ))
    }

    /// Block 1 opens with a `contentBlockStart` carrying the `toolUse` id and name; its
    /// `contentBlockDelta`s carry the input's JSON text in pieces.
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        usage: WireUsage,
    ) -> Option<StreamScript> {
        let mut blocks = vec![event_frame(
            "contentBlockStart",
            &json!({"contentBlockIndex": 1,
                    "start": {"toolUse": {"toolUseId": call.id, "name": call.name}}}),
        )];
        for piece in input_pieces(call) {
            blocks.push(event_frame(
                "contentBlockDelta",
                &json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": piece}}}),
            ));
        }
        blocks.push(event_frame(
            "contentBlockStop",
            &json!({"contentBlockIndex": 1}),
        ));
        Some(converse_stream(&[text], blocks, "tool_use", usage))
    }

    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        Some(self.embeddings)
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

/// Every shared behaviour. `anthropic-bedrock` serves no embeddings (its transports are
/// chat only: Bedrock's embeddings models are served by `bedrock-converse`), so its
/// embeddings checks are declared skipped.
mod anthropic_bedrock {
    tollgate_testkit::provider_contract_tests!(super::AnthropicOnBedrock;
        skip {
            rate_limit_headers_set_the_limiter_buckets: "Bedrock sends no rate-limit headers",
            x_should_retry_false_vetoes_the_retry: "Bedrock sends no x-should-retry",
            embeddings_are_sent_in_batches_of_max_batch_one_reservation_each: "anthropic-bedrock serves no embeddings",
            a_failed_embeddings_request_is_resent_alone: "anthropic-bedrock serves no embeddings",
            an_embeddings_request_carries_the_purpose_and_the_width: "anthropic-bedrock serves no embeddings",
            the_secret_never_shows_in_embeddings_errors: "anthropic-bedrock serves no embeddings",
        }
    );
}

/// Every shared behaviour, the embeddings ones on Titan (one text a request, the width
/// asked with `dimensions`, no purpose on the wire).
mod bedrock_converse {
    tollgate_testkit::provider_contract_tests!(super::CONVERSE_TITAN;
        skip {
            rate_limit_headers_set_the_limiter_buckets: "Bedrock sends no rate-limit headers",
            x_should_retry_false_vetoes_the_retry: "Bedrock sends no x-should-retry",
        }
        partly {
            an_embeddings_request_carries_the_purpose_and_the_width:
                "the purpose (Titan's request has no field for it); the width is checked",
        }
    );
}

/// The embeddings behaviours again on Cohere Embed (up to 96 texts a request, the purpose
/// as `input_type`, the width as `output_dimension`, no token count in the answer).
mod bedrock_converse_cohere {
    /// One paused-clock test per named kit check, as the kit's macro writes them.
    macro_rules! checks {
        ($($name:ident),+ $(,)?) => {
            $(
                #[tokio::test(start_paused = true)]
                async fn $name() {
                    tollgate_testkit::provider::checks::$name(&super::CONVERSE_COHERE)
                        .await
                        .expect(
                            stringify!($name),
                            tollgate_testkit::provider::Declared::Whole,
                        );
                    tollgate_testkit::provider::assert_no_task_left().await;
                }
            )+
        };
    }

    checks!(
        embeddings_are_sent_in_batches_of_max_batch_one_reservation_each,
        a_failed_embeddings_request_is_resent_alone,
        an_embeddings_request_carries_the_purpose_and_the_width,
        the_secret_never_shows_in_embeddings_errors,
    );
}
