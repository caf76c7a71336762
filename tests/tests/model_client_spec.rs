//! The model-client specification's scenarios, one test each.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tollgate::{
    Block, Error, LlmClient, LlmRequest, LlmResponse, Message, Models, ProviderError,
    ProviderRequestError, ResponseBody, ResponseStream, SamplingParams, StopReason, Usage,
};
use tollgate_fake::{FakeProvider, FakeReply, Fault};
use tollgate_integration_tests::fake_catalog;

fn request() -> LlmRequest {
    LlmRequest::new(
        "m",
        vec![Message::system("Be brief."), Message::user("Hi")],
        vec![],
        SamplingParams::new(),
    )
    .unwrap()
}

fn response() -> LlmResponse {
    LlmResponse::new(ResponseBody {
        model: "fake-m".into(),
        content: vec![Block::text("Hello")],
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            input_tokens: 5,
            output_tokens: 1,
            ..Usage::default()
        },
        refusal: None,
    })
    .unwrap()
}

#[test]
fn request_carries_the_four_components_and_no_other_required_field() {
    let json = serde_json::to_value(request()).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["messages", "model_id", "sampling_params", "tools_schema"]
    );

    // The four components are enough to make a request...
    let back: LlmRequest = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, request());
    // ...and nothing else (credentials, transport state) is accepted in it.
    let mut extra = json;
    extra["api_key"] = "sk-123".into();
    assert!(serde_json::from_value::<LlmRequest>(extra).is_err());
}

#[test]
fn a_tool_whose_parameters_are_not_an_object_schema_is_refused_naming_the_tool() {
    let tool = |schema: serde_json::Value| tollgate::ToolDefinition {
        defer_loading: false,
        cache: None,
        name: "lookup".into(),
        description: String::new(),
        input_schema: tollgate::Json::new(schema),
        strict: None,
        native: None,
    };
    let build = |schema| {
        LlmRequest::new(
            "m",
            vec![Message::user("Hi")],
            vec![tool(schema)],
            SamplingParams::new(),
        )
    };
    for bad in [
        serde_json::json!("string"),
        serde_json::json!([1, 2]),
        serde_json::json!({"type": "string"}),
    ] {
        match build(bad.clone()) {
            Err(Error::InvalidRequest { field, reason }) => {
                assert_eq!(field, "tools_schema[0].input_schema", "{bad}");
                assert!(reason.contains("`lookup`"), "{reason}");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    // An object schema, or one that leaves out the type, is taken.
    assert!(build(serde_json::json!({"type": "object", "properties": {}})).is_ok());
    assert!(build(serde_json::json!({"properties": {}})).is_ok());
}

#[test]
fn request_is_immutable() {
    // Fields are private (a compile_fail doc test on `LlmRequest` proves assignment does
    // not compile); changes make a new request and leave the original as it was.
    let original = request();
    let copy = original.clone();
    let changed = original.with_max_output_tokens(50).unwrap();
    assert_eq!(original, copy);
    assert_eq!(original.sampling_params().max_output_tokens(), None);
    assert_eq!(changed.sampling_params().max_output_tokens(), Some(50));
    assert_ne!(original, changed);
}

#[test]
fn response_exposes_cacheable_bytes_and_their_sha256_digest() {
    let r = response();
    let expected: [u8; 32] = Sha256::digest(r.bytes()).into();
    assert_eq!(r.response_digest(), expected);
    assert_eq!(r.response_digest_hex(), hex::encode(expected));
    // The bytes are a self-contained document: they decode back to the same response.
    let restored = LlmResponse::from_bytes(r.bytes().to_vec()).unwrap();
    assert_eq!(restored, r);
    assert_eq!(restored.text(), "Hello");
    assert_eq!(restored.stop_reason(), StopReason::EndTurn);
    assert_eq!(restored.usage().input_tokens, 5);
}

#[test]
fn response_is_immutable() {
    // Only read accessors exist (a compile_fail doc test on `LlmResponse` proves the
    // body cannot be assigned); a clone shares the same bytes and digest.
    let r = response();
    let digest = r.response_digest();
    let bytes = r.bytes().to_vec();
    let clone = r.clone();
    drop(clone);
    assert_eq!(r.response_digest(), digest);
    assert_eq!(r.bytes(), &bytes[..]);
}

/// A client defined here, knowing nothing of tollgate's implementations.
#[derive(Debug)]
struct Echo;

#[tollgate::async_trait]
impl LlmClient for Echo {
    async fn single_response(&self, request: &LlmRequest) -> tollgate::Result<LlmResponse> {
        LlmResponse::new(ResponseBody {
            model: "echo".into(),
            content: request.turns().last().unwrap().content.clone(),
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            refusal: None,
        })
    }

    async fn stream_response(&self, request: &LlmRequest) -> tollgate::Result<ResponseStream> {
        let r = self.single_response(request).await?;
        Ok(ResponseStream::new(futures::stream::iter([Ok(
            tollgate::StreamEvent::Completed(r),
        )])))
    }
}

#[tokio::test]
async fn conforming_client_satisfies_the_protocol_without_explicit_subclassing() {
    let client: Arc<dyn LlmClient> = Arc::new(Echo);
    let answer = client.single_response(&request()).await.unwrap();
    assert_eq!(answer.text(), "Hi");
    let streamed = client
        .stream_response(&request())
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(streamed, answer);
}

#[tokio::test]
async fn single_response_returns_a_future_not_a_computed_value() {
    let fake = FakeProvider::new();
    fake.reply("m", FakeReply::text("later"));
    let models = Models::builder()
        .catalog(fake_catalog(&["m"]))
        .provider(fake.clone())
        .build()
        .unwrap();
    let chat = models.chat("m").await.unwrap();
    let request = request();
    let pending = chat.single_response(&request);
    assert_eq!(
        fake.calls("m"),
        0,
        "nothing is sent until the future is awaited"
    );
    assert_eq!(pending.await.unwrap().text(), "later");
    assert_eq!(fake.calls("m"), 1);
}

#[tokio::test]
async fn rate_limit_error_carries_429_semantics_and_retry_after_round_trips() {
    let direct = ProviderError::RateLimited {
        retry_after: Some(Duration::from_millis(1500)),
    };
    assert_eq!(direct.status(), Some(429));
    assert_eq!(direct.retry_after_ms(), Some(1500));

    // The same through a provider and the top-level error.
    let fake = FakeProvider::new();
    fake.fail(
        "m",
        Fault::RateLimited {
            retry_after: Some(Duration::from_millis(1500)),
        },
    );
    let models = Models::builder()
        .catalog(fake_catalog(&["m"]))
        .provider(fake)
        .build()
        .unwrap();
    // A job with no retries left gets the provider's error as it came.
    let job = models.for_job(tollgate::JobContext::new("no-retries", 0));
    let err = job
        .chat("m")
        .await
        .unwrap()
        .single_response(&request())
        .await
        .unwrap_err();
    match err {
        Error::Provider(e @ ProviderError::RateLimited { .. }) => {
            assert_eq!(e.status(), Some(429));
            assert_eq!(e.retry_after_ms(), Some(1500));
            assert_eq!(e.retry_after(), Some(Duration::from_millis(1500)));
        }
        other => panic!("expected a rate-limit error, got {other:?}"),
    }
}

#[test]
fn server_error_carries_its_status() {
    let e = ProviderError::server(503);
    assert_eq!(e.status(), Some(503));
    assert!(e.to_string().contains("503"));
    assert!(matches!(
        Error::from(e),
        Error::Provider(ProviderError::Server { status: 503, .. })
    ));
}

#[test]
fn timeout_is_its_own_type() {
    let e = Error::from(ProviderError::Timeout {
        after: Some(Duration::from_secs(30)),
    });
    assert!(matches!(e, Error::Provider(ProviderError::Timeout { .. })));
    assert!(!matches!(
        e,
        Error::Provider(ProviderError::Server { .. } | ProviderError::RateLimited { .. })
    ));
    assert_eq!(ProviderError::Timeout { after: None }.status(), None);
}

#[test]
#[allow(clippy::match_like_matches_macro)] // the single `match` arm is what is under test
fn one_match_arm_catches_all_retryable_errors() {
    let retryable = [
        Error::from(ProviderError::RateLimited { retry_after: None }),
        Error::from(ProviderError::overloaded(None)),
        Error::from(ProviderError::server(500)),
        Error::from(ProviderError::Timeout { after: None }),
    ];
    for e in retryable {
        let caught = match e {
            Error::Provider(_) => true,
            _ => false,
        };
        assert!(caught);
    }
}

#[test]
fn provider_request_error_400_is_not_caught_by_the_retryable_arm() {
    let e = Error::from(ProviderRequestError::new(400, "messages: field required"));
    assert!(!matches!(e, Error::Provider(_)));
    assert!(!e.is_retryable());
    match e {
        Error::ProviderRequest(ProviderRequestError { status, .. }) => assert_eq!(status, 400),
        other => panic!("expected ProviderRequest, got {other:?}"),
    }
    // Nor are the other final errors.
    for e in [
        Error::QuotaExhausted {
            provider: "p".into(),
            message: "m".into(),
        },
        Error::refusal("c", "e", tollgate::Usage::default()),
        Error::Cancelled,
    ] {
        assert!(!matches!(e, Error::Provider(_)), "{e}");
    }
}
