//! The `fake` provider: answers from a script or a replay cache, streams answers as
//! deltas, and injects the failures real providers produce, all offline.
//!
//! How a call flows through it: [`FakeProvider`] is registered under the key `fake`
//! (link it with `use tollgate_fake as _;`), or passed to
//! [`tollgate::ModelsBuilder::provider`] when a test wants to script it. Each call to a
//! model is counted; the answer is, in order of precedence:
//!
//! 1. a fault injected on that call number ([`FakeProvider::inject`]);
//! 2. the first matching rule ([`FakeProvider::on`]);
//! 3. the next step queued for the model ([`FakeProvider::reply`], [`FakeProvider::fail`]),
//!    or for any model ([`FakeProvider::reply_any`]);
//! 4. the replay cache ([`FakeProvider::replay`]);
//! 5. otherwise [`tollgate::Error::UnmatchedRequest`].
//!
//! Catalog entries can script the registered provider without code:
//! `[models.m.options] replies = ["first answer", "second answer"]`, and
//! `replay_dir = "path"` with `replay_key = "activation"`; `max_batch = 96` makes its
//! embeddings (texts) and decision (questions) transports take at most that many items per
//! request, as a real provider's would (unset: any number).
//!
//! ```
//! use tollgate::{Catalog, Conversation, Models, SamplingParams, catalog::ModelEntry};
//! use tollgate_fake::{FakeProvider, FakeReply, Fault};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> tollgate::Result<()> {
//! let fake = FakeProvider::new();
//! fake.fail("m", Fault::Overloaded { retry_after: None });
//! fake.reply("m", FakeReply::text("Hello!"));
//!
//! let catalog = Catalog::builder().model(ModelEntry::new("m", "fake", "fake-1").with_output_tokens(100, 50)).build()?;
//! let models = Models::builder().catalog(catalog).provider(fake.clone()).build()?;
//! let chat = models.chat("m").await?;
//! let request = Conversation::new().user("Hi").request("m", SamplingParams::new())?;
//! // The injected 529 is retried by the pipeline; the caller sees only the answer.
//! assert_eq!(chat.single_response(&request).await?.text(), "Hello!");
//! assert_eq!(fake.calls("m"), 2);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod script;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::stream;
use tollgate::catalog::{Catalog, ModelEntry};
use tollgate::pipeline::{
    ChatTransport, DecisionReply, DecisionTransport, EmbeddingsReply, EmbeddingsTransport, Signals,
    TokenEstimator,
};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{
    DecisionRequest, DecisionWeights, Dimension, EmbeddingPurpose, Error, LlmRequest, LlmResponse,
    ReplayCache, ResponseStream, Result, StreamEvent, Usage, compute_cache_key,
};

use script::Step;
pub use script::{FakeReply, Fault};
/// The core crate, re-exported so a binary that depends only on provider crates can use it.
pub use tollgate;

/// The provider key.
pub const KEY: &str = "fake";

tollgate::register_provider!(|| Arc::new(FakeProvider::new()));

type Matcher = Box<dyn Fn(&LlmRequest) -> bool + Send + Sync>;

#[derive(Default)]
struct State {
    queues: HashMap<String, VecDeque<Step>>,
    any: VecDeque<Step>,
    rules: Vec<(Matcher, Step)>,
    injected: HashMap<(String, u64), Fault>,
    calls: HashMap<String, u64>,
    /// Input estimates the pipeline asked for, per model.
    estimates: HashMap<String, u64>,
    journal: Vec<LlmRequest>,
    replay: Option<(ReplayCache, String)>,
    replay_seq: HashMap<LlmRequest, u64>,
    decisions: HashMap<String, VecDeque<DecisionWeights>>,
    latency: Duration,
    limits: HashMap<String, Vec<(Dimension, u64)>>,
    remaining: HashMap<String, Vec<(Dimension, u64)>>,
    resets: HashMap<String, Vec<(Dimension, Duration)>>,
    should_retry: HashMap<(String, u64), bool>,
}

/// The scripted provider. Clones share one script and one journal.
#[derive(Clone, Default)]
pub struct FakeProvider {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("FakeProvider")
            .field("queued_models", &state.queues.keys().collect::<Vec<_>>())
            .field("rules", &state.rules.len())
            .field("calls", &state.calls)
            .finish_non_exhaustive()
    }
}

impl FakeProvider {
    /// A provider with an empty script.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an answer for the next call to `model_id`.
    pub fn reply(&self, model_id: &str, reply: FakeReply) -> &Self {
        self.lock()
            .queues
            .entry(model_id.into())
            .or_default()
            .push_back(Step::Reply(reply));
        self
    }

    /// Queues a failure for the next call to `model_id`.
    pub fn fail(&self, model_id: &str, fault: Fault) -> &Self {
        self.lock()
            .queues
            .entry(model_id.into())
            .or_default()
            .push_back(Step::Fault(fault));
        self
    }

    /// Queues an answer for the next call to any model that has nothing queued.
    pub fn reply_any(&self, reply: FakeReply) -> &Self {
        self.lock().any.push_back(Step::Reply(reply));
        self
    }

    /// Answers every request that `matches` accepts with `reply` (rules are kept, not
    /// consumed; the first matching rule wins).
    pub fn on(
        &self,
        matches: impl Fn(&LlmRequest) -> bool + Send + Sync + 'static,
        reply: FakeReply,
    ) -> &Self {
        self.lock()
            .rules
            .push((Box::new(matches), Step::Reply(reply)));
        self
    }

    /// Fails every request that `matches` accepts with `fault`.
    pub fn fail_on(
        &self,
        matches: impl Fn(&LlmRequest) -> bool + Send + Sync + 'static,
        fault: Fault,
    ) -> &Self {
        self.lock()
            .rules
            .push((Box::new(matches), Step::Fault(fault)));
        self
    }

    /// Fails call number `call` (1 for the first) to `model_id` with `fault`, whatever
    /// else is scripted. Embeddings and decision requests count as calls too (one per HTTP
    /// request the pipeline sends), so a fault can be put on any one request of a batch.
    pub fn inject(&self, model_id: &str, call: u64, fault: Fault) -> &Self {
        self.lock().injected.insert((model_id.into(), call), fault);
        self
    }

    /// Answers unscripted requests from `cache`, keyed with `compute_cache_key(request,
    /// activation_key, seq)`, where `seq` counts earlier identical requests (0 first), so a
    /// repeated request replays the next recorded answer.
    pub fn replay(&self, cache: ReplayCache, activation_key: impl Into<String>) -> &Self {
        self.lock().replay = Some((cache, activation_key.into()));
        self
    }

    /// Queues a decision (weights per option, per question) for `model_id`.
    pub fn decide(&self, model_id: &str, weights: DecisionWeights) -> &Self {
        self.lock()
            .decisions
            .entry(model_id.into())
            .or_default()
            .push_back(weights);
        self
    }

    /// Waits `latency` (on tokio's clock) before every answer, like a real provider.
    pub fn with_latency(&self, latency: Duration) -> &Self {
        self.lock().latency = latency;
        self
    }

    /// Reports, on every answer from `model_id`, that the provider has `remaining` left
    /// of `dimension` (as rate-limit headers would).
    pub fn report_remaining(&self, model_id: &str, dimension: Dimension, remaining: u64) -> &Self {
        self.lock()
            .remaining
            .entry(model_id.into())
            .or_default()
            .push((dimension, remaining));
        self
    }

    /// Reports, on every answer from `model_id`, that the provider's limit on `dimension`
    /// is `limit` per minute (as `*-limit` rate-limit headers would).
    pub fn report_limit(&self, model_id: &str, dimension: Dimension, limit: u64) -> &Self {
        self.lock()
            .limits
            .entry(model_id.into())
            .or_default()
            .push((dimension, limit));
        self
    }

    /// Reports, on every answer from `model_id`, that `dimension` is full again in
    /// `reset_in` (as rate-limit reset headers would).
    pub fn report_reset(&self, model_id: &str, dimension: Dimension, reset_in: Duration) -> &Self {
        self.lock()
            .resets
            .entry(model_id.into())
            .or_default()
            .push((dimension, reset_in));
        self
    }

    /// Sends `x-should-retry: <retry>` with call number `call` (1 for the first) to
    /// `model_id`.
    pub fn should_retry_on(&self, model_id: &str, call: u64, retry: bool) -> &Self {
        self.lock()
            .should_retry
            .insert((model_id.into(), call), retry);
        self
    }

    /// Fills `signals` as the provider's headers would for call `call` to `model_id`.
    fn signal(&self, model_id: &str, call: u64, signals: &Signals) {
        let state = self.lock();
        for (dimension, limit) in state.limits.get(model_id).into_iter().flatten() {
            signals.limit(*dimension, *limit);
        }
        for (dimension, remaining) in state.remaining.get(model_id).into_iter().flatten() {
            signals.remaining(*dimension, *remaining);
        }
        for (dimension, reset_in) in state.resets.get(model_id).into_iter().flatten() {
            signals.reset_in(*dimension, *reset_in);
        }
        if let Some(retry) = state.should_retry.get(&(model_id.to_owned(), call)) {
            signals.should_retry(*retry);
        }
    }

    /// Counts a call to `model_id` and returns its number (1 for the first).
    fn count_call(state: &mut State, model_id: &str) -> u64 {
        let n = state.calls.entry(model_id.to_owned()).or_insert(0);
        *n += 1;
        *n
    }

    /// How many calls reached `model_id` (failed ones included).
    pub fn calls(&self, model_id: &str) -> u64 {
        self.lock().calls.get(model_id).copied().unwrap_or(0)
    }

    /// How many times the pipeline asked `model_id`'s chat transport for an input-token
    /// estimate (a tokenizer's count costs milliseconds on a long prompt: once per call).
    pub fn estimates(&self, model_id: &str) -> u64 {
        self.lock().estimates.get(model_id).copied().unwrap_or(0)
    }

    /// Every chat request received, in order.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.lock().journal.clone()
    }

    /// Loads `[models.ID.options]` scripts (`replies`, `replay_dir`, `replay_key`).
    fn load_options(&self, catalog: &Catalog) -> Result<()> {
        for model in catalog.models().filter(|m| m.provider == KEY) {
            if let Some(replies) = model.options.get("replies") {
                let items = replies
                    .as_array()
                    .ok_or_else(|| option_error(model, "replies", "must be an array of strings"))?;
                for item in items {
                    let text = item.as_str().ok_or_else(|| {
                        option_error(model, "replies", "must be an array of strings")
                    })?;
                    self.reply(&model.id, FakeReply::text(text));
                }
            }
            if let Some(dir) = model.options.get("replay_dir") {
                let dir = dir
                    .as_str()
                    .ok_or_else(|| option_error(model, "replay_dir", "must be a path string"))?;
                let key = match model.options.get("replay_key") {
                    Some(k) => k
                        .as_str()
                        .ok_or_else(|| option_error(model, "replay_key", "must be a string"))?,
                    None => "",
                };
                self.replay(ReplayCache::in_dir(dir), key);
            }
        }
        Ok(())
    }

    /// Picks the step for one chat call and records it.
    async fn next_step(
        &self,
        model: &ModelEntry,
        request: &LlmRequest,
        signals: &Signals,
    ) -> Result<Step> {
        let (step, latency, replay, call) = {
            let mut state = self.lock();
            state.journal.push(request.clone());
            let call = Self::count_call(&mut state, &model.id);
            let step = if let Some(fault) = state.injected.remove(&(model.id.clone(), call)) {
                Some(Step::Fault(fault))
            } else if let Some((_, step)) = state.rules.iter().find(|(m, _)| m(request)) {
                Some(step.clone())
            } else if let Some(step) = state
                .queues
                .get_mut(&model.id)
                .and_then(VecDeque::pop_front)
            {
                Some(step)
            } else {
                state.any.pop_front()
            };
            let replay = match (&step, &state.replay) {
                (None, Some((cache, key))) => {
                    let (cache, key) = (cache.clone(), key.clone());
                    let seq = state.replay_seq.entry(request.clone()).or_insert(0);
                    let this = *seq;
                    *seq += 1;
                    Some((cache, key, this))
                }
                _ => None,
            };
            (step, state.latency, replay, call)
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        self.signal(&model.id, call, signals);
        if let Some(step) = step {
            return Ok(step);
        }
        let (key_text, seq) = match &replay {
            Some((_, key, seq)) => (key.clone(), *seq),
            None => (String::new(), 0),
        };
        let cache_key = compute_cache_key(request, &key_text, seq)?;
        if let Some((cache, _, _)) = replay
            && let Some(response) = cache.get(&cache_key).await?
        {
            return Ok(Step::Replayed(response));
        }
        Err(Error::UnmatchedRequest {
            model_id: model.id.clone(),
            cache_key: cache_key.to_hex(),
        })
    }
}

fn option_error(model: &ModelEntry, field: &str, reason: &str) -> Error {
    Error::Catalog(tollgate::catalog::CatalogError::InvalidField {
        model_id: model.id.clone(),
        field: format!("options.{field}"),
        reason: reason.into(),
    })
}

#[tollgate::async_trait]
impl Provider for FakeProvider {
    fn key(&self) -> &'static str {
        KEY
    }

    fn requires_credential(&self) -> bool {
        false
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        self.load_options(context.catalog())?;
        Ok(Arc::new(FakeTransports {
            provider: self.clone(),
            embedding_width: context.catalog().embedding_width(),
        }))
    }
}

#[derive(Debug)]
struct FakeTransports {
    provider: FakeProvider,
    embedding_width: Option<u64>,
}

impl ProviderTransports for FakeTransports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(FakeChat {
            provider: self.provider.clone(),
            model: model.clone(),
        }))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let width = model
            .embedding
            .native_width
            .or(self.embedding_width)
            .unwrap_or(16);
        Ok(Arc::new(FakeEmbeddings {
            provider: self.provider.clone(),
            model: model.clone(),
            native_width: width,
            max_batch: max_batch(model)?,
        }))
    }

    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        Ok(Arc::new(FakeDecision {
            provider: self.provider.clone(),
            model: model.clone(),
            max_batch: max_batch(model)?,
        }))
    }
}

/// The fake chat transport for one model.
#[derive(Debug)]
struct FakeChat {
    provider: FakeProvider,
    model: ModelEntry,
}

impl FakeChat {
    async fn answer(
        &self,
        request: &LlmRequest,
        signals: &Signals,
    ) -> Result<(LlmResponse, Option<usize>)> {
        match self
            .provider
            .next_step(&self.model, request, signals)
            .await?
        {
            Step::Fault(fault) => {
                let reply = fault.into_outcome(&self.model, request)?;
                Ok((reply.into_response(&self.model, request)?, None))
            }
            Step::Reply(reply) => {
                let interrupt = reply.interrupt_after();
                Ok((reply.into_response(&self.model, request)?, interrupt))
            }
            Step::Replayed(response) => Ok((response, None)),
        }
    }
}

#[tollgate::async_trait]
impl ChatTransport for FakeChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        match self.answer(request, signals).await? {
            (_, Some(_)) => Err(script::INTERRUPTION.into()),
            (response, None) => Ok(response),
        }
    }

    fn estimate_input_tokens(&self, request: &LlmRequest) -> u64 {
        *self
            .provider
            .lock()
            .estimates
            .entry(self.model.id.clone())
            .or_default() += 1;
        tollgate::pipeline::DefaultEstimator.estimate_request(request)
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let (response, interrupt) = self.answer(request, signals).await?;
        // Input usage first, as providers report it when the answer starts.
        let started = Usage {
            output_tokens: 0,
            ..response.usage()
        };
        let mut deltas: Vec<Result<StreamEvent>> =
            script::deltas(&response).into_iter().map(Ok).collect();
        if let Some(after) = interrupt {
            deltas.truncate(after);
        }
        let mut events = vec![Ok(StreamEvent::Usage(started))];
        events.extend(deltas);
        if interrupt.is_some() {
            events.push(Err(script::INTERRUPTION.into()));
        } else {
            events.push(Ok(StreamEvent::Usage(response.usage())));
            events.push(Ok(StreamEvent::Stop(response.stop_reason())));
            events.push(Ok(StreamEvent::Completed(response)));
        }
        Ok(ResponseStream::new(stream::iter(events)))
    }
}

/// `[models.ID.options] max_batch`: the most texts (embeddings) or questions (decisions)
/// one fake request takes; unset, any number.
fn max_batch(model: &ModelEntry) -> Result<usize> {
    match model.options.get("max_batch") {
        None => Ok(usize::MAX),
        Some(v) => v
            .as_integer()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| option_error(model, "max_batch", "must be an integer of 1 or more")),
    }
}

impl FakeProvider {
    /// Counts one embeddings or decision request to `model`, fills its signals, and
    /// returns the fault injected on it, if any.
    fn count_request(&self, model: &ModelEntry, signals: &Signals) -> Option<Fault> {
        let (call, fault) = {
            let mut state = self.lock();
            let call = Self::count_call(&mut state, &model.id);
            (call, state.injected.remove(&(model.id.clone(), call)))
        };
        self.signal(&model.id, call, signals);
        fault
    }
}

/// Deterministic fake embeddings: the same text and purpose always give the same vector.
/// Each `embed` call is one request (counted by [`FakeProvider::calls`]).
#[derive(Debug)]
struct FakeEmbeddings {
    provider: FakeProvider,
    model: ModelEntry,
    native_width: u64,
    max_batch: usize,
}

#[tollgate::async_trait]
impl EmbeddingsTransport for FakeEmbeddings {
    async fn embed(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        signals: &Signals,
    ) -> Result<EmbeddingsReply> {
        if let Some(fault) = self.provider.count_request(&self.model, signals) {
            return Err(fault.into_error(&self.model));
        }
        let width = dimensions.unwrap_or(self.native_width);
        Ok(EmbeddingsReply {
            vectors: texts
                .iter()
                .map(|t| script::pseudo_vector(t, purpose, width))
                .collect(),
            usage: Usage {
                input_tokens: self.estimate_input_tokens(texts),
                ..Usage::default()
            },
        })
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }
}

/// Scripted decisions: each request (after the pipeline's split by `max_batch`) takes
/// the next queued weights, of which it reads its own questions.
#[derive(Debug)]
struct FakeDecision {
    provider: FakeProvider,
    model: ModelEntry,
    max_batch: usize,
}

#[tollgate::async_trait]
impl DecisionTransport for FakeDecision {
    async fn decide(&self, request: &DecisionRequest, signals: &Signals) -> Result<DecisionReply> {
        if let Some(fault) = self.provider.count_request(&self.model, signals) {
            return Err(fault.into_error(&self.model));
        }
        let weights = self
            .provider
            .lock()
            .decisions
            .get_mut(&self.model.id)
            .and_then(VecDeque::pop_front);
        match weights {
            Some(w) => Ok(DecisionReply {
                decision: tollgate::Decision::from_weights(request, w)?,
                usage: Usage {
                    input_tokens: self.estimate_input_tokens(request),
                    ..Usage::default()
                },
            }),
            None => Err(Error::UnmatchedRequest {
                model_id: self.model.id.clone(),
                cache_key: "(decision requests have no cache key)".into(),
            }),
        }
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }
}
