//! Embeddings over InvokeModel with each family's own JSON body: Amazon Titan Text
//! Embeddings (one text per request) and Cohere Embed (up to 96 texts per request). Each
//! `embed` call sends one request; the pipeline splits larger batches and reserves each. Served by
//! the `bedrock-converse` key for catalog entries of kind `embeddings`. The core makes
//! every vector the deployment's width and unit length; this returns them as sent.

use aws_sdk_bedrockruntime::primitives::Blob;
use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::{CatalogError, EmbeddingsReply, EmbeddingsTransport, Signals};
use tollgate::provider::{EmbeddingPurpose, Error, Result, Usage};

use crate::client::{BedrockClient, redacted, send_once, without_secrets};

/// Cohere Embed's per-request maximum number of texts.
const COHERE_BATCH: usize = 96;

/// Which request body the model takes, by its Bedrock model id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// `amazon.titan-embed-*`: `{inputText, dimensions?, normalize}`.
    Titan,
    /// `cohere.embed-*`: `{texts, input_type, output_dimension?}`.
    Cohere,
}

/// The embeddings transport of one Bedrock embeddings model.
#[derive(Debug)]
pub struct BedrockEmbeddings {
    aws: BedrockClient,
    family: Family,
}

impl BedrockEmbeddings {
    pub(crate) fn new(aws: BedrockClient) -> Result<Self> {
        let name = aws.model().name.as_str();
        // Cross-region inference profiles prefix the id with a geography (`us.`, `eu.`).
        let family = if name.contains("amazon.titan-embed") {
            Family::Titan
        } else if name.contains("cohere.embed") {
            Family::Cohere
        } else {
            return Err(Error::Catalog(CatalogError::InvalidField {
                model_id: aws.model().id.clone(),
                field: "name".into(),
                reason: format!(
                    "`{name}` is not a Bedrock embeddings model tollgate speaks to: \
                     amazon.titan-embed-* or cohere.embed-*"
                ),
            }));
        };
        Ok(BedrockEmbeddings { aws, family })
    }

    /// Sends `body`; the answer's bytes with the call's secrets cut out (in any form),
    /// and the secrets, to cut out of the errors decoding it builds.
    async fn invoke(&self, body: &Value) -> Result<(Vec<u8>, Vec<String>)> {
        let (output, secrets) = send_once!(self.aws, |client| client
            .invoke_model()
            .model_id(&self.aws.model().name)
            .content_type("application/json")
            .accept("application/json")
            .body(Blob::new(body.to_string().into_bytes())));
        Ok((without_secrets(output.body.as_ref(), &secrets), secrets))
    }
}

/// An embeddings answer that does not decode: retryable, its first bytes kept.
fn malformed(what: impl Into<String>, raw: &[u8]) -> Error {
    tollgate::provider::malformed(format!("Bedrock embeddings answer: {}", what.into()), raw)
}

#[derive(Deserialize)]
struct TitanAnswer {
    embedding: Vec<f32>,
    #[serde(rename = "inputTextTokenCount", default)]
    input_tokens: u64,
}

/// Cohere's `embeddings` is a list of vectors, or `{"float": [...]}` when embedding
/// types were asked for.
#[derive(Deserialize)]
#[serde(untagged)]
enum CohereVectors {
    Floats(Vec<Vec<f32>>),
    ByType { float: Vec<Vec<f32>> },
}

#[derive(Deserialize)]
struct CohereAnswer {
    embeddings: CohereVectors,
}

#[tollgate::provider::async_trait]
impl EmbeddingsTransport for BedrockEmbeddings {
    /// One InvokeModel request per call (the pipeline never passes more than
    /// [`max_batch`](EmbeddingsTransport::max_batch) texts). Titan: the one text,
    /// `dimensions` sent when set, `normalize: true`; usage from `inputTextTokenCount`.
    /// Cohere: up to 96 texts, `input_type` `search_document` or `search_query` by
    /// purpose, `output_dimension` when set; Cohere reports no token count in the body, so
    /// usage is tollgate's estimate.
    async fn embed(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        _signals: &Signals,
    ) -> Result<EmbeddingsReply> {
        if texts.len() > self.max_batch() {
            return Err(Error::invalid_request(
                "texts",
                format!(
                    "holds {} texts; model `{}` takes at most {} per request (the pipeline \
                     splits larger batches)",
                    texts.len(),
                    self.aws.model().id,
                    self.max_batch()
                ),
            ));
        }
        let (vectors, tokens) = match self.family {
            Family::Titan => {
                let Some(text) = texts.first() else {
                    return Ok(EmbeddingsReply {
                        vectors: Vec::new(),
                        usage: Usage::default(),
                    });
                };
                let mut body = json!({"inputText": text, "normalize": true});
                if let Some(d) = dimensions {
                    body["dimensions"] = json!(d);
                }
                let (bytes, secrets) = self.invoke(&body).await?;
                let answer: TitanAnswer = redacted(
                    serde_json::from_slice(&bytes).map_err(|e| malformed(e.to_string(), &bytes)),
                    &secrets,
                )?;
                (vec![answer.embedding], answer.input_tokens)
            }
            Family::Cohere => {
                let input_type = match purpose {
                    EmbeddingPurpose::Document => "search_document",
                    EmbeddingPurpose::Query => "search_query",
                };
                let mut body = json!({"texts": texts, "input_type": input_type});
                if let Some(d) = dimensions {
                    body["output_dimension"] = json!(d);
                }
                let (bytes, secrets) = self.invoke(&body).await?;
                let answer: CohereAnswer = redacted(
                    serde_json::from_slice(&bytes).map_err(|e| malformed(e.to_string(), &bytes)),
                    &secrets,
                )?;
                let vectors = match answer.embeddings {
                    CohereVectors::Floats(v) | CohereVectors::ByType { float: v } => v,
                };
                if vectors.len() != texts.len() {
                    return redacted(
                        Err(malformed(
                            format!("{} vectors for {} texts", vectors.len(), texts.len()),
                            &bytes,
                        )),
                        &secrets,
                    );
                }
                (vectors, self.estimate_input_tokens(texts))
            }
        };
        Ok(EmbeddingsReply {
            vectors,
            usage: Usage::from_cache_exclusive(tokens, 0, 0, 0, 0),
        })
    }

    /// Titan takes one text per request; Cohere Embed up to 96.
    fn max_batch(&self) -> usize {
        match self.family {
            Family::Titan => 1,
            Family::Cohere => COHERE_BATCH,
        }
    }
}
