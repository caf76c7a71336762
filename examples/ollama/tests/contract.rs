//! The provider contract kit against the Ollama crate, plus what is Ollama's own: the
//! request body, a cut-off answer, a block it cannot send.

use serde_json::{Value, json};
use tollgate::{ModelEntry, ModelsBuilder};
use tollgate_ollama::OllamaProvider;
use tollgate_testkit::provider::{
    Kit, MODEL, Recorded, Reply, StreamScript, USAGE, WireScript, WireUsage,
};

struct OllamaWire;

fn chunk(content: &str, done: Option<(&str, WireUsage)>) -> Value {
    let mut chunk = json!({"model": "llama-test", "created_at": "2026-11-30T12:00:00Z",
                           "message": {"role": "assistant", "content": content}, "done": false});
    if let Some((reason, usage)) = done {
        chunk["done"] = json!(true);
        chunk["done_reason"] = json!(reason);
        chunk["prompt_eval_count"] = json!(usage.input);
        chunk["eval_count"] = json!(usage.output);
    }
    chunk
}

fn line(value: &Value) -> Vec<u8> {
    format!("{value}\n").into_bytes()
}

impl WireScript for OllamaWire {
    fn provider(&self) -> &'static str {
        "ollama"
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(OllamaProvider)
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, "ollama", "llama-test")
            .with_credential(credential)
            .with_option("base_url", base_url)
    }

    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request.bearer()
    }

    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        Reply::json(200, &chunk(text, Some(("stop", usage))))
    }

    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        let mut frames: Vec<Vec<u8>> = pieces.iter().map(|p| line(&chunk(p, None))).collect();
        frames.push(line(&chunk("", Some(("stop", usage)))));
        StreamScript {
            content_type: "application/x-ndjson".into(),
            frames,
            first_event: 0,
        }
    }

    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        Some(line(&json!({ "error": message })))
    }

    fn malformed_frame(&self) -> Vec<u8> {
        b"{not json\n".to_vec()
    }

    fn error(&self, status: u16, message: &str) -> Reply {
        Reply::json(status, &json!({ "error": message }))
    }

    /// Ollama itself has no quota; a proxy in front of it answers 402.
    fn quota_exhausted(&self, message: &str) -> Reply {
        Reply::json(402, &json!({ "error": message }))
    }

    /// Ollama truncates a prompt longer than `num_ctx` instead of saying so.
    fn context_overflow(&self) -> Option<Reply> {
        None
    }

    /// Nor does it stop at a full window.
    fn context_window_stop(&self) -> Option<Reply> {
        None
    }

    /// Ollama has no refusal answer.
    fn refusal(&self, _: WireUsage) -> Option<Reply> {
        None
    }

    fn rate_limit_headers(&self, _: u64, _: u64) -> Vec<(String, String)> {
        Vec::new()
    }
}

tollgate_testkit::provider_contract_tests!(OllamaWire;
    skip {
        rate_limit_headers_set_the_limiter_buckets: "Ollama sends no rate-limit headers",
        x_should_retry_false_vetoes_the_retry: "Ollama sends no x-should-retry",
        a_refusal_is_a_provider_refusal_costed_at_its_usage: "Ollama has no refusal answer",
        a_context_overflow_is_typed_and_names_the_model:
            "Ollama truncates a prompt over num_ctx instead of saying so",
        a_context_window_stop_is_typed_and_names_the_model: "Ollama has no full-window stop",
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "Ollama reports no overflow, by error or by stop",
        a_tool_call_is_decoded_whole_with_its_id_name_and_input: "this codec has no tool calls",
        a_streamed_tool_call_arrives_in_deltas_indexed_by_its_block:
            "this codec has no tool calls",
        embeddings_are_sent_in_batches_of_max_batch_one_reservation_each: "this example serves no embeddings",
        a_failed_embeddings_request_is_resent_alone: "this example serves no embeddings",
        an_embeddings_request_carries_the_purpose_and_the_width: "this example serves no embeddings",
        the_secret_never_shows_in_embeddings_errors: "this example serves no embeddings",
    }
);

#[tokio::test]
async fn the_request_carries_the_model_the_messages_and_the_set_sampling_options_only() {
    let kit = Kit::new(&OllamaWire).await;
    kit.server.only(OllamaWire.answer("Hi", USAGE));
    let request = tollgate::Conversation::new()
        .with_system("Be brief.")
        .user("Hello?")
        .request(
            MODEL,
            tollgate::SamplingParams::new()
                .with_temperature(0.5)
                .unwrap(),
        )
        .unwrap();
    let chat = kit.models.chat(MODEL).await.unwrap();
    chat.single_response(&request).await.unwrap();
    let sent = kit.server.requests()[0].json();
    assert_eq!(kit.server.requests()[0].path, "/api/chat");
    assert_eq!(
        sent,
        json!({"model": "llama-test", "stream": false,
               "messages": [{"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "Hello?"}],
               "options": {"temperature": 0.5, "num_predict": 500, "stop": []}})
    );
}

#[tokio::test]
async fn done_reason_length_is_max_tokens_so_the_pipeline_reruns_at_the_ceiling() {
    let kit = Kit::new(&OllamaWire).await;
    kit.server
        .only(Reply::json(200, &chunk("cut", Some(("length", USAGE)))));
    let err = kit.ask(&kit.models).await.unwrap_err();
    assert!(
        matches!(
            err,
            tollgate::Error::OutputTruncated {
                max_output_tokens: 2000,
                ..
            }
        ),
        "{err:?}"
    );
    let limits: Vec<Value> = kit
        .server
        .requests()
        .iter()
        .map(|r| r.json()["options"]["num_predict"].clone())
        .collect();
    assert_eq!(limits, [json!(500), json!(2000)]);
}

#[tokio::test]
async fn a_block_other_than_text_is_refused_before_sending_naming_the_field() {
    let kit = Kit::new(&OllamaWire).await;
    let image = tollgate::Block::Image {
        source: tollgate::ImageSource::Url {
            url: "https://example.com/cat.png".into(),
        },
        cache: None,
    };
    let message = tollgate::Message {
        role: tollgate::Role::User,
        content: vec![image],
    };
    let request = tollgate::LlmRequest::new(
        MODEL,
        vec![message],
        vec![],
        tollgate::SamplingParams::new(),
    )
    .unwrap();
    let chat = kit.models.chat(MODEL).await.unwrap();
    let err = chat.single_response(&request).await.unwrap_err();
    assert!(
        matches!(&err, tollgate::Error::InvalidRequest { field, .. } if field == "messages[0].content[0]"),
        "{err:?}"
    );
    assert_eq!(kit.server.hits(), 0);
}

/// A catalog as an application writes it, loaded by the kit against its own server: the
/// default `num_predict` is the catalog's `default_output_tokens`, and the limiter is the
/// catalog's `rpm`.
#[tokio::test]
async fn a_catalog_written_in_toml_drives_the_request_against_the_kits_server() {
    let kit = Kit::from_toml(
        &OllamaWire,
        r#"
        [models.llama]
        provider = "ollama"
        name = "llama3.2"
        credential = "kit-credential"
        max_output_tokens = 4096
        default_output_tokens = 300
        rpm = 600
        options = { base_url = "$BASE_URL" }
        "#,
    )
    .await;
    kit.server.only(OllamaWire.answer("Hi", USAGE));
    let request = tollgate::Conversation::new()
        .user("Hello?")
        .request("llama", tollgate::SamplingParams::new())
        .unwrap();
    let answer = kit
        .models
        .chat("llama")
        .await
        .unwrap()
        .single_response(&request)
        .await
        .unwrap();
    assert_eq!(answer.text(), "Hi");
    let sent = &kit.server.requests()[0];
    assert_eq!(
        (
            sent.json()["model"].as_str(),
            sent.json()["options"]["num_predict"].as_u64()
        ),
        (Some("llama3.2"), Some(300))
    );
    assert_eq!(
        sent.bearer().as_deref(),
        Some(tollgate_testkit::provider::SECRET)
    );
    let snapshot = kit
        .models
        .limiter("llama")
        .unwrap()
        .snapshot()
        .await
        .unwrap();
    assert!(format!("{snapshot:?}").contains("600"), "{snapshot:?}");
}
