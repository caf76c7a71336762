//! The `sim` provider key: chat models answered by a [`SimProvider`] sized from the
//! catalog entry.
//!
//! An answer is generated text; a structured-output request gets the minimal instance of
//! its schema ([`example_of`]), a `json_object` request a JSON object; a request that
//! declares tools, whose last turn is the user's (no tool result; a later system message
//! is not a turn), gets one call of a tool with the minimal instance of that tool's
//! schema as arguments and the tool-use stop, so that a client's tool loop runs against
//! the demo (after the tool's result, text again). The tool is the one a `tool_choice`
//! names, else the first; `tool_choice` none answers text. Reasoning that turns thinking
//! on opens the answer with a signed thinking block, and a `seed` draws the words
//! (`answer.rs` says how each setting acts). The answer is `output_tokens` long, plus
//! its thinking, whatever the request's `max_tokens` (a client's default of 128000
//! included), unless that limit is lower.
//!
//! Options (`[models.ID.options]`), all optional:
//!
//! | option | default | meaning |
//! |---|---|---|
//! | `latency_ms` | 300 | time to answer an accepted call: a number, or drawn per call from `{ min = 20, max = 800, distribution = "uniform" }` (or `"log-normal"`), so concurrent answers come back out of order |
//! | `per_output_token_ms` | 0 | added per output token produced |
//! | `network_delay_ms` | 0 | time for a call to reach the provider, which admits it and computes its headers on arrival: a number or drawn, as `latency_ms`, so calls arrive out of order |
//! | `output_tokens` | 24 | output produced per call (capped at the call's output limit) |
//! | `served` | 1.0 | the fraction of the published limits actually served |
//! | `overload_probability` | 0.0 | chance that a call is refused as overloaded (529) |
//! | `seed` | 0 | seed of the overload, latency and network delay draws |
//! | `window` | `"continuous"` | `"fixed"`: fixed windows instead of continuous buckets |
//! | `headers` | `"none"` | `"openai"` or `"anthropic"`: every answer reports what remains of each limit and when it is full again, as that provider's headers do (in process, to the pipeline; over HTTP, as headers, [`crate::http`]) |
//!
//! The simulated provider enforces `rpm`, `input_tpm` and `output_tpm`; a combined `tpm`
//! is enforced on input tokens. `burst_seconds = 1` gives it one second's worth of
//! capacity, as providers that enforce `60 rpm` as one a second do; any other value a
//! full minute's.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{
    SimCapacity, SimConfig, SimDelay, SimDimension, SimHeaderStyle, SimHeaders, SimLatency,
    SimLimits, SimProvider, SimRefusal, SimRequest, SimReset, SimWindow,
};
use futures::stream;
use tollgate::provider::{
    ChatTransport, ModelOptions, Provider, ProviderContext, ProviderTransports, Signals,
};
use tollgate::provider::{
    Dimension, Error, LlmRequest, LlmResponse, ModelEntry, ProviderError, ResponseBody,
    ResponseStream, Result, Usage,
};

use crate::answer;
pub use crate::answer::{KEY, example_of};

/// Output produced per call when `output_tokens` is not set.
pub const DEFAULT_OUTPUT_TOKENS: u64 = 24;

tollgate::register_provider!(|| Arc::new(SimClientProvider::default()));

/// The `sim` provider. Every model keeps one simulated provider for the life of the
/// built clients, shared by its transports, so its buckets see every call.
#[derive(Debug, Clone, Default)]
pub struct SimClientProvider {
    overrides: Arc<Mutex<HashMap<String, SimProvider>>>,
}

impl SimClientProvider {
    /// A provider whose models are simulated from their catalog entries.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `model_id` answer through `provider` (e.g. one a test inspects afterwards)
    /// instead of one built from the catalog.
    pub fn with_model(self, model_id: impl Into<String>, provider: SimProvider) -> Self {
        self.overrides
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(model_id.into(), provider);
        self
    }
}

/// A time in milliseconds: a number (fixed), or `{ min, max, distribution }` drawn per
/// call (`distribution` `"uniform"`, the default, or `"log-normal"`).
fn delay(options: &ModelOptions<'_>, field: &str) -> Result<Option<SimDelay>> {
    let ms = |v: f64| Duration::from_micros((v * 1000.0) as u64);
    let Some(toml::Value::Table(table)) = options.value(field) else {
        return Ok(options.number(field)?.map(|v| SimDelay::Fixed(ms(v))));
    };
    let bound = |key: &str| match table.get(key) {
        Some(toml::Value::Integer(n)) if *n >= 0 => Ok(ms(*n as f64)),
        Some(toml::Value::Float(x)) if *x >= 0.0 => Ok(ms(*x)),
        _ => Err(options.error(
            field,
            format!("`{key}` must be a non-negative number of milliseconds"),
        )),
    };
    let (min, max) = (bound("min")?, bound("max")?);
    if min > max {
        return Err(options.error(field, "`min` must not exceed `max`"));
    }
    if let Some(key) = table
        .keys()
        .find(|k| !["min", "max", "distribution"].contains(&k.as_str()))
    {
        return Err(options.error(
            field,
            format!("unknown key `{key}` (expected `min`, `max`, `distribution`)"),
        ));
    }
    match table.get("distribution").map(toml::Value::as_str) {
        None | Some(Some("uniform")) => Ok(Some(SimDelay::Uniform { min, max })),
        Some(Some("log-normal")) => Ok(Some(SimDelay::LogNormal { min, max })),
        Some(_) => Err(options.error(
            field,
            "`distribution` must be \"uniform\" or \"log-normal\"",
        )),
    }
}

/// The simulated provider's configuration for a catalog entry (see the module doc).
///
/// The options are read with the kit's [`ModelOptions`], unknown keys left alone: the
/// entry may be another provider's, sized for a simulation (`tollgate simulate`).
pub fn sim_config_for(model: &ModelEntry) -> Result<SimConfig> {
    let options = ModelOptions::unchecked(model);
    let l = model.limits;
    let limits = SimLimits {
        rpm: l.rpm,
        input_tpm: if l.input_tpm > 0 { l.input_tpm } else { l.tpm },
        output_tpm: l.output_tpm,
    };
    let capacity = if model.burst_seconds == Some(1) {
        SimCapacity::PerSecond
    } else {
        SimCapacity::FullMinute
    };
    let ms = |v: f64| Duration::from_micros((v * 1000.0) as u64);
    let answer_time = delay(&options, "latency_ms")?;
    let latency = SimLatency {
        base: match answer_time {
            Some(SimDelay::Fixed(d)) => d,
            _ => Duration::from_millis(300),
        },
        per_output_token: ms(options.number("per_output_token_ms")?.unwrap_or(0.0)),
        refusal: Duration::ZERO,
    };
    let mut config = SimConfig::new(limits)
        .with_capacity(capacity)
        .with_latency(latency)
        .with_seed(options.number("seed")?.unwrap_or(0.0) as u64);
    if let Some(drawn @ (SimDelay::Uniform { .. } | SimDelay::LogNormal { .. })) = answer_time {
        config = config.with_answer_time(drawn);
    }
    if let Some(network) = delay(&options, "network_delay_ms")? {
        config = config.with_network_delay(network);
    }
    if let Some(served) = options.number("served")? {
        if !(served > 0.0 && served <= 1.0) {
            return Err(options.error("served", "must be in (0, 1]"));
        }
        config = config.with_served(served);
    }
    let window = options.parse("window", "\"continuous\" or \"fixed\"", |v| match v {
        "continuous" => Some(SimWindow::Continuous),
        "fixed" => Some(SimWindow::Fixed),
        _ => None,
    })?;
    if let Some(window) = window {
        config = config.with_window(window);
    }
    let headers = options.parse(
        "headers",
        "\"none\", \"openai\" or \"anthropic\"",
        |v| match v {
            "none" => Some(None),
            "openai" => Some(Some(SimHeaderStyle::OpenAi)),
            "anthropic" => Some(Some(SimHeaderStyle::Anthropic)),
            _ => None,
        },
    )?;
    if let Some(style) = headers.flatten() {
        config = config.with_headers(style);
    }
    if let Some(p) = options.number("overload_probability")? {
        if p > 1.0 {
            return Err(options.error("overload_probability", "must be in [0, 1]"));
        }
        let seed = config.seed;
        config = config.with_overloads(p, seed);
    }
    Ok(config)
}

#[tollgate::provider::async_trait]
impl Provider for SimClientProvider {
    fn key(&self) -> &'static str {
        KEY
    }

    fn requires_credential(&self) -> bool {
        false
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        let mut sims = self
            .overrides
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for model in context.catalog().models().filter(|m| m.provider == KEY) {
            let entries: Vec<ModelEntry> = if model.deployments.is_empty() {
                vec![model.clone()]
            } else {
                model
                    .deployments
                    .iter()
                    .map(|d| model.for_deployment(d))
                    .collect()
            };
            for entry in entries {
                if let Entry::Vacant(slot) = sims.entry(sim_key(&entry)) {
                    slot.insert(SimProvider::new(sim_config_for(&entry)?));
                }
            }
        }
        Ok(Arc::new(SimTransports {
            sims: Mutex::new(sims),
        }))
    }
}

/// Which simulated provider serves an entry: one per model, and one per credential of a
/// model with several deployments, as a provider limits each key separately. A provider
/// given with [`SimClientProvider::with_model`] serves every deployment of its model.
fn sim_key(entry: &ModelEntry) -> String {
    match &entry.credential {
        Some(credential) => format!("{}#{credential}", entry.id),
        None => entry.id.clone(),
    }
}

struct SimTransports {
    sims: Mutex<HashMap<String, SimProvider>>,
}

impl fmt::Debug for SimTransports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sims = self.sims.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("SimTransports")
            .field("providers", &sims.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ProviderTransports for SimTransports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let sim = {
            let mut sims = self.sims.lock().unwrap_or_else(|e| e.into_inner());
            match sims.get(&model.id).or_else(|| sims.get(&sim_key(model))) {
                Some(sim) => sim.clone(),
                None => {
                    let sim = SimProvider::new(sim_config_for(model)?);
                    sims.insert(sim_key(model), sim.clone());
                    sim
                }
            }
        };
        let output_tokens = ModelOptions::unchecked(model)
            .number("output_tokens")?
            .map(|n| n as u64)
            .unwrap_or(DEFAULT_OUTPUT_TOKENS);
        Ok(Arc::new(SimChat {
            sim,
            model: model.clone(),
            output_tokens,
        }))
    }
}

/// One model's chat transport over its simulated provider.
#[derive(Debug)]
struct SimChat {
    sim: SimProvider,
    model: ModelEntry,
    output_tokens: u64,
}

impl SimChat {
    /// Tells the pipeline what the provider's rate-limit headers would (with the `headers`
    /// option): remaining and time to full per limit the catalog also names.
    fn signal(&self, headers: &SimHeaders, signals: &Signals) {
        let l = self.model.limits;
        for h in &headers.limits {
            let dimension = match h.dimension {
                SimDimension::Requests => Dimension::Requests,
                SimDimension::InputTokens if l.input_tpm > 0 => Dimension::InputTokens,
                SimDimension::OutputTokens if l.output_tpm > 0 => Dimension::OutputTokens,
                _ => continue,
            };
            let reset = match h.reset {
                SimReset::In(d) => d,
                SimReset::At(at) => at.saturating_sub(self.sim.elapsed()),
            };
            signals.limit(dimension, h.limit);
            signals.remaining(dimension, h.remaining);
            signals.reset_in(dimension, reset);
        }
    }

    async fn answer(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let input = self.estimate_input_tokens(request);
        let max_output = self
            .model
            .output_limit(request.sampling_params().max_output_tokens())
            .unwrap_or(self.output_tokens)
            .max(1);
        let thinking = answer::thinking_tokens(request.sampling_params().reasoning());
        let produced = self.output_tokens + thinking.unwrap_or(0);
        let sim_request = SimRequest::new(input, max_output, produced);
        let (outcome, headers) = self.sim.call_with_headers(sim_request).await;
        self.signal(&headers, signals);
        match outcome {
            Ok(answer) => {
                let (content, stop_reason) =
                    answer::content(request, answer.output_tokens, max_output, thinking);
                LlmResponse::new(ResponseBody {
                    model: self.model.name.clone(),
                    content,
                    stop_reason,
                    usage: Usage {
                        input_tokens: answer.input_tokens,
                        output_tokens: answer.output_tokens,
                        ..Usage::default()
                    },
                    refusal: None,
                })
            }
            Err(SimRefusal::RateLimited { retry_after }) => {
                Err(Error::Provider(ProviderError::RateLimited { retry_after }))
            }
            Err(SimRefusal::Overloaded) => Err(Error::Provider(ProviderError::Overloaded {
                status: 529,
                retry_after: None,
            })),
        }
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for SimChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        self.answer(request, signals).await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let response = self.answer(request, signals).await?;
        let events = answer::stream_events(response);
        Ok(ResponseStream::new(stream::iter(events)))
    }
}
