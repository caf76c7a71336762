//! Bedrock embeddings (Titan Text Embeddings v2, Cohere Embed) through the pipeline,
//! against a local mock endpoint on 127.0.0.1.

mod common;

use common::*;
use serde_json::{Value, json};
use tollgate::catalog::{EmbeddingCapabilities, ModelEntry, ModelKind};
use tollgate::{EmbeddingPurpose, Error, ProviderError};
use tollgate_bedrock::BedrockConverseProvider;
use wiremock::matchers::{method, path};
use wiremock::{Mock, Request, ResponseTemplate};

fn embed_entry(id: &str, name: &str, uri: &str, dimensions_param: bool) -> ModelEntry {
    entry(id, "bedrock-converse", name, uri)
        .with_kind(ModelKind::Embeddings)
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(1024),
            dimensions_param,
            truncation_safe: true,
        })
}

async fn setup() -> Setup {
    setup_with(BedrockConverseProvider, |uri| {
        vec![
            embed_entry("titan", "amazon.titan-embed-text-v2:0", uri, true),
            embed_entry("cohere", "cohere.embed-english-v3", uri, false),
        ]
    })
    .await
}

async fn bodies(s: &Setup) -> Vec<Value> {
    s.server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json().unwrap())
        .collect()
}

#[tokio::test]
async fn titan_sends_one_text_per_call_with_dimensions_and_returns_unit_vectors() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/model/amazon.titan-embed-text-v2%3A0/invoke"))
        .respond_with(|r: &Request| {
            let body: Value = r.body_json().unwrap();
            let v = if body["inputText"] == "a" {
                [3.0, 4.0, 0.0, 0.0]
            } else {
                [0.0, 0.0, 2.0, 0.0]
            };
            ResponseTemplate::new(200)
                .set_body_json(json!({"embedding": v, "inputTextTokenCount": 3}))
        })
        .expect(2)
        .mount(&s.server)
        .await;
    let vectors = s
        .models
        .embeddings("titan")
        .await
        .unwrap()
        .embed_batch(
            &["a".to_owned(), "b".to_owned()],
            EmbeddingPurpose::Document,
        )
        .await
        .unwrap();
    assert_eq!(vectors[0].as_slice(), &[0.6, 0.8, 0.0, 0.0]);
    assert_eq!(vectors[1].as_slice(), &[0.0, 0.0, 1.0, 0.0]);
    for body in bodies(&s).await {
        assert_eq!(
            body["dimensions"], 4,
            "the deployment's width, asked of the model"
        );
        assert_eq!(body["normalize"], true);
    }
}

#[tokio::test]
async fn cohere_maps_the_purpose_to_input_type_and_batches_texts() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/model/cohere.embed-english-v3/invoke"))
        .respond_with(|r: &Request| {
            let body: Value = r.body_json().unwrap();
            let n = body["texts"].as_array().unwrap().len();
            let vectors: Vec<Vec<f32>> = (0..n).map(|_| vec![1.0, 1.0, 1.0, 1.0, 9.0]).collect();
            ResponseTemplate::new(200).set_body_json(json!({"id": "x", "embeddings": vectors,
                "texts": body["texts"], "response_type": "embeddings_floats"}))
        })
        .mount(&s.server)
        .await;
    let client = s.models.embeddings("cohere").await.unwrap();
    let texts: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
    let vectors = client
        .embed_batch(&texts, EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 100);
    assert_eq!(
        vectors[0].as_slice(),
        &[0.5, 0.5, 0.5, 0.5],
        "truncated to 4, unit length"
    );
    client.embed("q", EmbeddingPurpose::Query).await.unwrap();
    let sent = bodies(&s).await;
    let sizes: Vec<usize> = sent
        .iter()
        .map(|b| b["texts"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [96, 4, 1]);
    assert_eq!(sent[0]["input_type"], "search_document");
    assert_eq!(sent[2]["input_type"], "search_query");
    assert!(
        sent[0].get("output_dimension").is_none(),
        "not a dimensions model here"
    );
}

#[tokio::test]
async fn embeddings_exceptions_are_typed_like_chat_ones() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(exception_response(429, "ThrottlingException", "slow down"))
        .mount(&s.server)
        .await;
    let error = no_retries(&s.models)
        .embeddings("titan")
        .await
        .unwrap()
        .embed("x", EmbeddingPurpose::Document)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Provider(ProviderError::RateLimited { .. })),
        "{error:?}"
    );
}
