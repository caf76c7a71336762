//! One model's catalog entry.

use std::time::Duration;

use super::batch_terms::BatchTerms;
use super::price::Price;
use super::{CatalogError, FallbackWait, KnownProviders};

/// How long a stream may go without an event when the catalog sets no
/// `stream_idle_timeout_secs`.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest answer (whole body, or one stream event) read from a chat or decision
/// model when the catalog sets no `max_response_bytes`: 32 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 32 << 20;

/// The same for an embeddings model: 256 MiB, since a full batch of wide vectors is
/// tens of MB as JSON (2,048 vectors of 3,072 numbers is over 100 MB).
pub const DEFAULT_MAX_EMBEDDINGS_RESPONSE_BYTES: u64 = 256 << 20;

/// What a model serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ModelKind {
    /// Chat (`Models::chat`).
    #[default]
    Chat,
    /// Embeddings (`Models::embeddings`).
    Embeddings,
    /// Decisions (`Models::decision`).
    Decision,
}

impl ModelKind {
    /// The catalog spelling: `chat`, `embeddings`, `decision`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Chat => "chat",
            ModelKind::Embeddings => "embeddings",
            ModelKind::Decision => "decision",
        }
    }
}

/// Rate limits per minute; 0 means unlimited on that dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Limits {
    /// Requests per minute.
    pub rpm: u64,
    /// Tokens (input and output together) per minute.
    pub tpm: u64,
    /// Input tokens per minute.
    pub input_tpm: u64,
    /// Output tokens per minute.
    pub output_tpm: u64,
}

/// How a provider refills its rate limits, which decides what a rate-limit header
/// saying "nothing left until the reset" means (catalog field `window`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RateWindow {
    /// A continuous token bucket (the default; Anthropic's documented behaviour): one
    /// unit refills every `reset / limit`, so the next request may go long before the
    /// reset, which is when the bucket is *full* again.
    #[default]
    Continuous,
    /// Fixed windows: nothing refills until the window turns at the reset, when all of it
    /// does. `window = "fixed"`.
    Fixed,
}

impl RateWindow {
    /// The catalog spelling: `continuous` or `fixed`.
    pub fn as_str(self) -> &'static str {
        match self {
            RateWindow::Continuous => "continuous",
            RateWindow::Fixed => "fixed",
        }
    }
}

/// How an embeddings model reaches the deployment's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EmbeddingCapabilities {
    /// The width the model produces when not asked for another.
    pub native_width: Option<u64>,
    /// The model takes a dimensions parameter (up to `native_width`, when that is set).
    pub dimensions_param: bool,
    /// The model is Matryoshka-trained: truncating its vectors keeps them meaningful.
    pub truncation_safe: bool,
}

/// One deployment of a model: an API key (or account, region, endpoint) that the
/// provider limits separately. Each deployment has its own buckets at the model's limits
/// (paused by its own 429s); a call goes to the one that can serve it soonest.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Deployment {
    /// Its name, unique within the model (in records, errors and limiter ids
    /// `model/name`).
    pub name: String,
    /// Id of its secret in the credential store (default: the model's).
    pub credential: Option<String>,
    /// Provider options that differ for this deployment (e.g. `region`, `base_url`,
    /// `endpoint_url`), laid over the model's `options`.
    pub options: toml::Table,
}

impl Deployment {
    /// A deployment `name` using the secret `credential`.
    pub fn new(name: impl Into<String>, credential: impl Into<String>) -> Self {
        Deployment {
            name: name.into(),
            credential: Some(credential.into()),
            options: toml::Table::new(),
        }
    }

    /// Sets a provider option for this deployment only.
    pub fn with_option(mut self, key: impl Into<String>, value: impl Into<toml::Value>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }
}

/// One model of the catalog. Build it in code with [`ModelEntry::new`] and the `with_*`
/// methods; it is checked when the catalog is built.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelEntry {
    /// The catalog id that callers use.
    pub id: String,
    /// Other exact names that resolve to this model (`aliases`), e.g. a client's default
    /// model name; unique across the catalog's ids and aliases.
    pub aliases: Vec<String>,
    /// Globs with one `*` that resolve to this model when no id or alias is the name
    /// (`patterns`, e.g. `claude-*`); the most literal characters win.
    pub patterns: Vec<String>,
    /// The provider key, e.g. `anthropic-direct`.
    pub provider: String,
    /// The provider's own model name (defaults to the id).
    pub name: String,
    /// What the model serves.
    pub kind: ModelKind,
    /// Id of the secret in the credential store.
    pub credential: Option<String>,
    /// Rate limits.
    pub limits: Limits,
    /// Bucket size in seconds of refill (1 to 60); `None` = a full minute. Some
    /// providers enforce `60 rpm` as one request per second: set 1 for them.
    pub burst_seconds: Option<u64>,
    /// How much later the first request out of a full bucket may reach the provider than
    /// the ones after it, in milliseconds (`arrival_allowance_ms`, 0 to 60000); `None` =
    /// [`LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE`](crate::limit::LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE).
    /// See [`LimiterConfig::arrival_allowance`](crate::limit::LimiterConfig::arrival_allowance).
    pub arrival_allowance_ms: Option<u64>,
    /// How the provider refills its limits (`window = "continuous" | "fixed"`); decides
    /// how long a header saying nothing is left holds the model back.
    pub window: RateWindow,
    /// The model's output ceiling in tokens.
    pub max_output_tokens: Option<u64>,
    /// The output limit used when a request sets none.
    pub default_output_tokens: Option<u64>,
    /// The context window in tokens.
    pub context_window: Option<u64>,
    /// Models to try, in order, when this one cannot serve.
    pub fallbacks: Vec<String>,
    /// Which candidate of this model's chain waits when none can serve now
    /// (`fallback_wait`); read from the model a chain starts at.
    pub fallback_wait: FallbackWait,
    /// Prices; `None` when unknown (cost is then not computed).
    pub price: Option<Price>,
    /// The provider's batch API for this model (`[models.ID.batch]`): its price and
    /// queue limits.
    pub batch: BatchTerms,
    /// Embedding capabilities (embeddings models).
    pub embedding: EmbeddingCapabilities,
    /// Provider-specific settings (`[models.ID.options]`), read by the provider crate.
    pub options: toml::Table,
    /// The model's deployments (empty: one, the model itself).
    pub deployments: Vec<Deployment>,
    /// The longest a stream may go without an event, in seconds
    /// (`stream_idle_timeout_secs`); `None` = [`DEFAULT_STREAM_IDLE_TIMEOUT`]. See
    /// [`ModelEntry::stream_idle_timeout`].
    pub stream_idle_timeout_secs: Option<u64>,
    /// The largest answer read, in bytes, for a whole body and for any one stream event
    /// (`max_response_bytes`); `None` = the default for the model's kind. See
    /// [`ModelEntry::response_byte_limit`].
    pub max_response_bytes: Option<u64>,
}

impl ModelEntry {
    /// A chat model `id` served by `provider` under the provider's name `name`.
    pub fn new(
        id: impl Into<String>,
        provider: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ModelEntry {
            id: id.into(),
            aliases: Vec::new(),
            patterns: Vec::new(),
            provider: provider.into(),
            name: name.into(),
            kind: ModelKind::Chat,
            credential: None,
            limits: Limits::default(),
            burst_seconds: None,
            arrival_allowance_ms: None,
            window: RateWindow::Continuous,
            max_output_tokens: None,
            default_output_tokens: None,
            context_window: None,
            fallbacks: Vec::new(),
            fallback_wait: FallbackWait::default(),
            price: None,
            batch: BatchTerms::default(),
            embedding: EmbeddingCapabilities::default(),
            options: toml::Table::new(),
            deployments: Vec::new(),
            stream_idle_timeout_secs: None,
            max_response_bytes: None,
        }
    }

    /// The longest a stream may go without an event before it fails with a timeout
    /// (retried before the first event reached the reader; `StreamInterrupted` after).
    pub fn stream_idle_timeout(&self) -> Duration {
        self.stream_idle_timeout_secs
            .map_or(DEFAULT_STREAM_IDLE_TIMEOUT, Duration::from_secs)
    }

    /// The largest answer read, in bytes, whole or one stream event: the catalog's
    /// `max_response_bytes`, else [`DEFAULT_MAX_RESPONSE_BYTES`]
    /// ([`DEFAULT_MAX_EMBEDDINGS_RESPONSE_BYTES`] for an embeddings model).
    pub fn response_byte_limit(&self) -> u64 {
        self.max_response_bytes.unwrap_or(match self.kind {
            ModelKind::Embeddings => DEFAULT_MAX_EMBEDDINGS_RESPONSE_BYTES,
            ModelKind::Chat | ModelKind::Decision => DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// Sets the stream idle timeout (`stream_idle_timeout_secs`), in whole seconds.
    pub fn with_stream_idle_timeout_secs(mut self, secs: u64) -> Self {
        self.stream_idle_timeout_secs = Some(secs);
        self
    }

    /// Sets the arrival allowance in milliseconds (`arrival_allowance_ms`); 0 for a
    /// provider whose requests all arrive alike (in process, or on one warm connection).
    pub fn with_arrival_allowance_ms(mut self, ms: u64) -> Self {
        self.arrival_allowance_ms = Some(ms);
        self
    }

    /// Sets the response size limit (`max_response_bytes`).
    pub fn with_max_response_bytes(mut self, bytes: u64) -> Self {
        self.max_response_bytes = Some(bytes);
        self
    }

    /// Adds a deployment (see [`Deployment`]).
    pub fn with_deployment(mut self, deployment: Deployment) -> Self {
        self.deployments.push(deployment);
        self
    }

    /// The entry a provider builds `deployment`'s transport from: this model with the
    /// deployment's credential and its options laid over the model's.
    pub fn for_deployment(&self, deployment: &Deployment) -> ModelEntry {
        let mut entry = self.clone();
        entry.deployments = Vec::new();
        if deployment.credential.is_some() {
            entry.credential.clone_from(&deployment.credential);
        }
        for (key, value) in &deployment.options {
            entry.options.insert(key.clone(), value.clone());
        }
        entry
    }

    /// Sets the other exact names the model answers to (`aliases`).
    pub fn with_aliases<I, S>(mut self, aliases: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.aliases = aliases.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the globs with one `*` the model answers to (`patterns`).
    pub fn with_patterns<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.patterns = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// Sets what the model serves.
    pub fn with_kind(mut self, kind: ModelKind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the credential id.
    pub fn with_credential(mut self, id: impl Into<String>) -> Self {
        self.credential = Some(id.into());
        self
    }

    /// Sets the rate limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the output ceiling and the default output limit.
    pub fn with_output_tokens(mut self, max: u64, default: u64) -> Self {
        self.max_output_tokens = Some(max);
        self.default_output_tokens = Some(default);
        self
    }

    /// Sets how the provider refills its limits.
    pub fn with_window(mut self, window: RateWindow) -> Self {
        self.window = window;
        self
    }

    /// Sets the context window.
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the fallbacks.
    pub fn with_fallbacks<I, S>(mut self, fallbacks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.fallbacks = fallbacks.into_iter().map(Into::into).collect();
        self
    }

    /// Sets which candidate of this model's chain waits when none can serve now.
    pub fn with_fallback_wait(mut self, wait: FallbackWait) -> Self {
        self.fallback_wait = wait;
        self
    }

    /// Sets the prices.
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// Sets the embedding capabilities (and makes this an embeddings model).
    pub fn with_embedding(mut self, embedding: EmbeddingCapabilities) -> Self {
        self.kind = ModelKind::Embeddings;
        self.embedding = embedding;
        self
    }

    /// Sets a provider-specific option.
    pub fn with_option(mut self, key: impl Into<String>, value: impl Into<toml::Value>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }

    /// The output limit for a request that sets none.
    pub fn output_limit(&self, requested: Option<u64>) -> Option<u64> {
        requested
            .or(self.default_output_tokens)
            .or(self.max_output_tokens)
    }

    /// Checks what can be checked without the other entries.
    pub(super) fn validate_alone(
        &self,
        known: &KnownProviders,
        width: Option<u64>,
    ) -> Result<(), CatalogError> {
        let invalid = |field: &str, reason: &str| CatalogError::InvalidField {
            model_id: self.id.clone(),
            field: field.into(),
            reason: reason.into(),
        };
        if self.id.trim().is_empty() {
            return Err(invalid("id", "must not be empty"));
        }
        if self.name.trim().is_empty() {
            return Err(invalid("name", "must not be empty"));
        }
        let Some(requires_credential) = known.requires_credential(&self.provider) else {
            return Err(CatalogError::UnknownProvider {
                model_id: self.id.clone(),
                provider: self.provider.clone(),
                known: known.list(),
                hint: KnownProviders::hint_for(&self.provider),
            });
        };
        let mut names = std::collections::HashSet::new();
        for d in &self.deployments {
            if d.name.trim().is_empty() || d.name.contains('/') {
                return Err(invalid(
                    "deployments.name",
                    "must be a non-empty name without `/`",
                ));
            }
            if !names.insert(d.name.as_str()) {
                return Err(CatalogError::InvalidField {
                    model_id: self.id.clone(),
                    field: "deployments.name".into(),
                    reason: format!("`{}` names two deployments", d.name),
                });
            }
        }
        let blank = |c: Option<&str>| c.is_none_or(|c| c.trim().is_empty());
        let missing = if self.deployments.is_empty() {
            blank(self.credential.as_deref())
        } else {
            blank(self.credential.as_deref())
                && self
                    .deployments
                    .iter()
                    .any(|d| blank(d.credential.as_deref()))
        };
        if requires_credential && missing {
            return Err(CatalogError::MissingCredential {
                model_id: self.id.clone(),
                provider: self.provider.clone(),
            });
        }
        if self.burst_seconds.is_some_and(|s| s == 0 || s > 60) {
            return Err(invalid(
                "burst_seconds",
                "must be from 1 to 60 (seconds of refill the bucket holds)",
            ));
        }
        if self.arrival_allowance_ms.is_some_and(|ms| ms > 60_000) {
            return Err(invalid(
                "arrival_allowance_ms",
                "must be from 0 to 60000 (milliseconds a first request may arrive late)",
            ));
        }
        for (field, value) in [
            ("max_output_tokens", self.max_output_tokens),
            ("default_output_tokens", self.default_output_tokens),
            ("context_window", self.context_window),
            ("stream_idle_timeout_secs", self.stream_idle_timeout_secs),
            ("max_response_bytes", self.max_response_bytes),
        ] {
            if value == Some(0) {
                return Err(invalid(field, "must be at least 1"));
            }
        }
        if let (Some(default), Some(max)) = (self.default_output_tokens, self.max_output_tokens)
            && default > max
        {
            return Err(CatalogError::DefaultAboveMax {
                model_id: self.id.clone(),
                default_output_tokens: default,
                max_output_tokens: max,
            });
        }
        if self.kind == ModelKind::Chat && self.max_output_tokens.is_none() {
            return Err(invalid(
                "max_output_tokens",
                "is required for chat models: it is the output ceiling used to price calls and to re-run truncated answers",
            ));
        }
        if let Some(price) = &self.price {
            for (field, value) in [
                ("price.input", Some(price.input)),
                ("price.output", Some(price.output)),
                ("price.cache_read", Some(price.cache_read)),
                ("price.cache_write", Some(price.cache_write)),
                ("price.cache_write_1h", price.cache_write_1h),
            ] {
                if value.is_some_and(|v| !v.is_finite() || v < 0.0) {
                    return Err(invalid(
                        field,
                        "must be a finite number of USD per million tokens, 0 or more",
                    ));
                }
            }
        }
        if self.kind == ModelKind::Embeddings {
            self.validate_embedding_width(width)?;
        }
        Ok(())
    }

    fn validate_embedding_width(&self, width: Option<u64>) -> Result<(), CatalogError> {
        let Some(width) = width else {
            return Err(CatalogError::InvalidSection {
                field: "embeddings.width".into(),
                reason: format!(
                    "is required because model `{}` is an embeddings model: every vector has the deployment's one width",
                    self.id
                ),
            });
        };
        let caps = self.embedding;
        let err = |field: &str, reason: String| CatalogError::EmbeddingWidth {
            model_id: self.id.clone(),
            field: field.into(),
            width,
            reason,
        };
        match caps.native_width {
            Some(native) if native == width => Ok(()),
            Some(native) if native < width => Err(err(
                "native_width",
                format!("its vectors have {native} components, fewer than {width}"),
            )),
            Some(native) if caps.dimensions_param || caps.truncation_safe => {
                debug_assert!(native > width);
                Ok(())
            }
            Some(native) => Err(err(
                "truncation_safe",
                format!(
                    "its vectors have {native} components, it takes no dimensions parameter, and truncation \
                     is not declared safe (set `truncation_safe = true` only for Matryoshka-trained models)"
                ),
            )),
            None if caps.dimensions_param => Ok(()),
            None => Err(err(
                "native_width",
                "its width is not declared and it takes no dimensions parameter; set `native_width` \
                 or `dimensions_param = true`"
                    .into(),
            )),
        }
    }
}
