//! `bedrock-converse`'s embeddings, scripted for the kit: InvokeModel on
//! `/model/{id}/invoke` with each family's own JSON body (PROTOCOLS §3.8), both models
//! taking a width, so the kit's width is asked of them.

use serde_json::{Value, json};
use tollgate::catalog::EmbeddingCapabilities;
use tollgate::{EmbeddingPurpose, ModelEntry};
use tollgate_testkit::provider::{EmbeddingsWire, Recorded, Reply};

use super::aws_entry;

/// A `bedrock-converse` embeddings model `name` producing `native_width`, taking a
/// dimensions parameter.
fn model(model_id: &str, name: &str, native_width: u64, base_url: &str, cred: &str) -> ModelEntry {
    let entry =
        ModelEntry::new(model_id, "bedrock-converse", name).with_embedding(EmbeddingCapabilities {
            native_width: Some(native_width),
            dimensions_param: true,
            truncation_safe: true,
        });
    aws_entry(entry, base_url, cred)
}

/// Titan Text Embeddings v2: `{inputText, dimensions, normalize}`, one text a request,
/// answered `{embedding, inputTextTokenCount}`; its body has no purpose field.
pub(super) struct Titan;

impl EmbeddingsWire for Titan {
    fn model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        let name = "amazon.titan-embed-text-v2:0";
        model(model_id, name, 1024, base_url, credential)
    }

    fn max_batch(&self) -> Option<usize> {
        Some(1)
    }

    fn texts(&self, request: &Recorded) -> Vec<String> {
        let body = request.json();
        body["inputText"]
            .as_str()
            .map(str::to_owned)
            .into_iter()
            .collect()
    }

    fn purpose(&self, _: &Recorded) -> Option<EmbeddingPurpose> {
        None
    }

    fn dimensions(&self, request: &Recorded) -> Option<u64> {
        request.json()["dimensions"].as_u64()
    }

    fn answer(&self, vectors: &[Vec<f32>], input_tokens: u64) -> Reply {
        let [vector] = vectors else {
            panic!("Titan answers one vector a request, not {}", vectors.len());
        };
        Reply::json(
            200,
            &json!({"embedding": vector, "inputTextTokenCount": input_tokens}),
        )
    }
}

/// Cohere Embed v4: `{texts, input_type, output_dimension}`, up to 96 texts a request,
/// the purpose as `search_query` / `search_document`; answered with the vectors by type
/// (`{"float": […]}`) and no token count, so tollgate estimates the usage.
pub(super) struct Cohere;

impl EmbeddingsWire for Cohere {
    fn model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        model(model_id, "cohere.embed-v4:0", 1536, base_url, credential)
    }

    fn max_batch(&self) -> Option<usize> {
        Some(96)
    }

    fn texts(&self, request: &Recorded) -> Vec<String> {
        request.strings("/texts")
    }

    fn purpose(&self, request: &Recorded) -> Option<EmbeddingPurpose> {
        match request.json()["input_type"].as_str()? {
            "search_query" => Some(EmbeddingPurpose::Query),
            "search_document" => Some(EmbeddingPurpose::Document),
            _ => None,
        }
    }

    fn dimensions(&self, request: &Recorded) -> Option<u64> {
        request.json()["output_dimension"].as_u64()
    }

    fn answer(&self, vectors: &[Vec<f32>], _: u64) -> Reply {
        let texts: Vec<Value> = (0..vectors.len()).map(|i| json!(format!("t{i}"))).collect();
        Reply::json(
            200,
            &json!({"id": "emb-1", "embeddings": {"float": vectors}, "texts": texts,
                    "response_type": "embeddings_by_type"}),
        )
    }

    fn reports_usage(&self) -> bool {
        false
    }
}
