//! The client traits every provider serves, and the embedding and decision types.
//!
//! All traits are async, `Send + Sync` and object-safe: they are used as
//! `Arc<dyn LlmClient>` and so on. There is no synchronous path. Implement them with
//! [`async_trait`](crate::async_trait) (re-exported).

use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::request::LlmRequest;
use crate::response::LlmResponse;
use crate::stream::ResponseStream;

/// A chat model: one request in, the whole answer or a stream of events out.
///
/// [`Models::chat`](crate::Models::chat) hands out an `Arc<dyn LlmClient>` that runs every
/// call through the pipeline; implement the trait yourself only to wrap or fake a client.
///
/// ```
/// use futures::StreamExt;
/// use tollgate::{Catalog, Conversation, Models, SamplingParams, StreamEvent};
/// use tollgate_fake as _;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tollgate::Result<()> {
/// # let catalog = Catalog::from_toml_str("[models.m]\nprovider = \"fake\"\nmax_output_tokens = 100\noptions = { replies = [\"one two three\"] }\n")?;
/// let chat = Models::builder().catalog(catalog).build()?.chat("m").await?;
/// let request = Conversation::new().user("Count to three").request("m", SamplingParams::new())?;
///
/// let mut stream = chat.stream_response(&request).await?;
/// let mut text = String::new();
/// while let Some(event) = stream.next().await {
///     match event? {
///         StreamEvent::TextDelta { text: delta, .. } => text.push_str(&delta), // as it arrives
///         StreamEvent::Completed(response) => assert_eq!(response.text(), text), // the same answer
///         _ => {}
///     }
/// }
/// assert_eq!(text, "one two three");
/// # Ok(()) }
/// ```
#[async_trait::async_trait]
pub trait LlmClient: Send + Sync + Debug {
    /// Sends the request and returns the whole answer.
    async fn single_response(&self, request: &LlmRequest) -> Result<LlmResponse>;

    /// Sends the request and streams the answer as it is produced.
    async fn stream_response(&self, request: &LlmRequest) -> Result<ResponseStream>;

    /// Counts the request's input tokens without answering it: the provider's own count
    /// where its transport has a counter ([`crate::provider::ChatTransport::count_input_tokens`],
    /// e.g. Anthropic's `count_tokens`), else tollgate's estimate (the one each call
    /// reserves with); [`TokenCount::counted_by`] says which. It reserves nothing on the
    /// model's limiter: providers limit their counters apart from their answers.
    ///
    /// A client of your own that does not override it answers
    /// [`Error::UnsupportedSetting`] (feature `count_input_tokens`).
    async fn count_input_tokens(&self, request: &LlmRequest) -> Result<TokenCount> {
        Err(Error::unsupported_setting(
            "count_input_tokens",
            "(a client that does not count tokens)",
            request.model_id(),
        ))
    }
}

/// A request's input tokens, counted before sending ([`LlmClient::count_input_tokens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCount {
    /// Input tokens.
    pub input_tokens: u64,
    /// Who counted them.
    pub counted_by: TokenCounter,
}

/// Who counted a [`TokenCount`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenCounter {
    /// The provider's counting endpoint: what the provider will bill, near enough.
    Provider,
    /// Tollgate's estimate (the same one each call reserves with): close, not exact.
    Estimate,
}

impl TokenCounter {
    /// `provider` or `estimate`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenCounter::Provider => "provider",
            TokenCounter::Estimate => "estimate",
        }
    }
}

/// What an embedded text is for; some models embed queries and documents differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingPurpose {
    /// Text to be stored and searched.
    Document,
    /// Text searched with.
    Query,
}

/// An L2-normalized vector of the deployment's width (the catalog's `[embeddings] width`).
///
/// Only [`Embedding::normalize`] makes one, so every `Embedding` has unit length.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding(Vec<f32>);

impl Embedding {
    /// Makes a vector of width `width` with unit length from a provider's raw vector:
    /// truncated first when it is wider and `truncate` is allowed (Matryoshka-trained
    /// models), then scaled to unit length.
    pub fn normalize(
        model_id: &str,
        mut raw: Vec<f32>,
        width: usize,
        truncate: bool,
    ) -> Result<Self> {
        let got = raw.len();
        let shape_error = |reason: &str| Error::EmbeddingShape {
            model_id: model_id.to_owned(),
            expected: width,
            got,
            reason: reason.to_owned(),
        };
        if got > width && truncate {
            raw.truncate(width);
        } else if got != width {
            return Err(shape_error(if got > width {
                "the catalog does not declare truncation safe for this model"
            } else {
                "the vector is narrower than the deployment width"
            }));
        }
        if raw.iter().any(|x| !x.is_finite()) {
            return Err(shape_error("the vector holds NaN or infinite values"));
        }
        let norm = raw
            .iter()
            .map(|x| f64::from(*x) * f64::from(*x))
            .sum::<f64>()
            .sqrt();
        if norm == 0.0 {
            return Err(shape_error("the vector is all zeros and has no direction"));
        }
        Ok(Embedding(
            raw.into_iter()
                .map(|x| (f64::from(x) / norm) as f32)
                .collect(),
        ))
    }

    /// The components.
    pub fn as_slice(&self) -> &[f32] {
        &self.0
    }

    /// The width.
    pub fn width(&self) -> usize {
        self.0.len()
    }

    /// The components, taken out.
    pub fn into_vec(self) -> Vec<f32> {
        self.0
    }
}

/// An embeddings model.
#[async_trait::async_trait]
pub trait EmbeddingsClient: Send + Sync + Debug {
    /// Embeds one text.
    async fn embed(&self, text: &str, purpose: EmbeddingPurpose) -> Result<Embedding> {
        let mut all = self.embed_batch(&[text.to_owned()], purpose).await?;
        all.pop().ok_or_else(|| {
            Error::ProviderRequest(crate::ProviderRequestError::new(
                200,
                "the provider returned no embedding",
            ))
        })
    }

    /// Embeds several texts; the answer has one vector per text, in order.
    async fn embed_batch(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
    ) -> Result<Vec<Embedding>>;
}

/// A question in a [`DecisionRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Question {
    /// Pick one of several named options.
    Choice {
        /// The question's name, a key in the [`Decision`].
        name: String,
        /// What is asked.
        prompt: String,
        /// The options (at least two, distinct).
        options: Vec<String>,
    },
    /// A yes/no question: options `yes` and `no`.
    Noul {
        /// The question's name, a key in the [`Decision`].
        name: String,
        /// What is asked.
        prompt: String,
    },
}

impl Question {
    /// The question's name.
    pub fn name(&self) -> &str {
        match self {
            Question::Choice { name, .. } | Question::Noul { name, .. } => name,
        }
    }

    /// The options the answer gives probabilities for.
    pub fn options(&self) -> Vec<String> {
        match self {
            Question::Choice { options, .. } => options.clone(),
            Question::Noul { .. } => vec!["yes".to_owned(), "no".to_owned()],
        }
    }
}

/// A state and named questions about it; the answer is a probability per option, no text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DecisionRequest {
    model_id: String,
    state: String,
    questions: Vec<Question>,
}

impl DecisionRequest {
    /// Builds a request; question names must be unique and each choice needs two or
    /// more distinct options.
    pub fn new(
        model_id: impl Into<String>,
        state: impl Into<String>,
        questions: Vec<Question>,
    ) -> Result<Self> {
        for (i, q) in questions.iter().enumerate() {
            if questions[..i].iter().any(|p| p.name() == q.name()) {
                return Err(Error::InvalidRequest {
                    field: format!("questions[{i}].name"),
                    reason: format!("`{}` is used twice", q.name()),
                });
            }
            let options = q.options();
            let distinct = options
                .iter()
                .enumerate()
                .all(|(j, o)| !options[..j].contains(o));
            if options.len() < 2 || !distinct {
                return Err(Error::InvalidRequest {
                    field: format!("questions[{i}].options"),
                    reason: "a choice needs two or more distinct options".into(),
                });
            }
        }
        if questions.is_empty() {
            return Err(Error::InvalidRequest {
                field: "questions".into(),
                reason: "must hold at least one question".into(),
            });
        }
        Ok(DecisionRequest {
            model_id: model_id.into(),
            state: state.into(),
            questions,
        })
    }

    /// The catalog model id.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The state the questions are about.
    pub fn state(&self) -> &str {
        &self.state
    }

    /// The questions.
    pub fn questions(&self) -> &[Question] {
        &self.questions
    }
}

/// Weights (or probabilities) per option, per question: question → option → weight.
pub type DecisionWeights = BTreeMap<String, BTreeMap<String, f64>>;

/// Probabilities per option, per question: each question's probabilities sum to 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    answers: DecisionWeights,
}

impl Decision {
    /// Makes a decision from weights per option (any non-negative scale), normalizing
    /// each question to sum to 1. Every question of `request` must be answered with
    /// exactly its options.
    pub fn from_weights(request: &DecisionRequest, weights: DecisionWeights) -> Result<Self> {
        let mut answers = BTreeMap::new();
        for q in request.questions() {
            let field = format!("decision.{}", q.name());
            let given = weights.get(q.name()).ok_or_else(|| Error::InvalidRequest {
                field: field.clone(),
                reason: "has no answer".into(),
            })?;
            let options = q.options();
            if given.len() != options.len() || options.iter().any(|o| !given.contains_key(o)) {
                return Err(Error::InvalidRequest {
                    field,
                    reason: format!("must give exactly the options {options:?}"),
                });
            }
            let total: f64 = given.values().sum();
            if given.values().any(|w| !w.is_finite() || *w < 0.0) || total <= 0.0 {
                return Err(Error::InvalidRequest {
                    field,
                    reason: "weights must be finite, non-negative and not all zero".into(),
                });
            }
            answers.insert(
                q.name().to_owned(),
                given.iter().map(|(o, w)| (o.clone(), w / total)).collect(),
            );
        }
        Ok(Decision { answers })
    }

    /// The probability of `option` for `question`.
    pub fn probability(&self, question: &str, option: &str) -> Option<f64> {
        self.answers.get(question)?.get(option).copied()
    }

    /// All answers: question → option → probability.
    pub fn answers(&self) -> &DecisionWeights {
        &self.answers
    }
}

/// A decision model: probabilities for named options, no text.
#[async_trait::async_trait]
pub trait DecisionClient: Send + Sync + Debug {
    /// Answers every question of the request.
    async fn decide(&self, request: &DecisionRequest) -> Result<Decision>;
}
