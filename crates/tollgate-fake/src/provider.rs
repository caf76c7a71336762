//! The scripted provider: what each call answers (rules, queues, injected faults, a
//! replay cache), what its answers report (rate-limit signals, latency), and the journal
//! of what it received. Its `Provider` impl, which builds the transports, is theirs
//! ([`crate::transports`]).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tollgate::provider::Signals;
use tollgate::provider::{
    Catalog, DecisionWeights, Dimension, Error, LlmRequest, ModelEntry, ReplayCache, Result,
    compute_cache_key,
};

use crate::KEY;
use crate::options::FakeOptions;
use crate::script::{FakeReply, Fault, Step};

type Matcher = Box<dyn Fn(&LlmRequest) -> bool + Send + Sync>;

#[derive(Default)]
pub(crate) struct State {
    queues: HashMap<String, VecDeque<Step>>,
    any: VecDeque<Step>,
    rules: Vec<(Matcher, Step)>,
    injected: HashMap<(String, u64), Fault>,
    calls: HashMap<String, u64>,
    /// Input estimates the pipeline asked for, per model.
    pub(crate) estimates: HashMap<String, u64>,
    journal: Vec<LlmRequest>,
    replay: Option<(ReplayCache, String)>,
    replay_seq: HashMap<LlmRequest, u64>,
    pub(crate) decisions: HashMap<String, VecDeque<DecisionWeights>>,
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

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
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
    pub(crate) fn load_options(&self, catalog: &Catalog) -> Result<()> {
        for model in catalog.models().filter(|m| m.provider == KEY) {
            let options = FakeOptions::from_model(model)?;
            for text in options.replies {
                self.reply(&model.id, FakeReply::text(text));
            }
            if let Some((dir, key)) = options.replay {
                self.replay(ReplayCache::in_dir(dir), key);
            }
        }
        Ok(())
    }

    /// Picks the step for one chat call and records it.
    pub(crate) async fn next_step(
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

impl FakeProvider {
    /// Counts one embeddings or decision request to `model`, fills its signals, and
    /// returns the fault injected on it, if any.
    pub(crate) fn count_request(&self, model: &ModelEntry, signals: &Signals) -> Option<Fault> {
        let (call, fault) = {
            let mut state = self.lock();
            let call = Self::count_call(&mut state, &model.id);
            (call, state.injected.remove(&(model.id.clone(), call)))
        };
        self.signal(&model.id, call, signals);
        fault
    }
}
