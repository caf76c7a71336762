//! How every call is run: the [`PipelineConfig`] (retries, breaker, deadlines,
//! corrections, recorder, metrics) a [`crate::Models`] hands to each model's runtime.

use std::sync::Arc;
use std::time::Duration;

use super::breaker::BreakerConfig;
use super::record::{NoRecorder, Recorder};
use super::retry::RetryPolicy;

/// The most times an answer that fails its declared shape is sent back for correction.
pub const MAX_CORRECTIONS: u32 = 2;

/// How every call is run.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Retries and back-off.
    pub retry: RetryPolicy,
    /// When circuits open.
    pub breaker: BreakerConfig,
    /// Deadline for one attempt, from send to the whole answer (streams: to the first
    /// event). Passing it is a [`ProviderError::Timeout`](crate::ProviderError::Timeout).
    pub attempt_timeout: Duration,
    /// Deadline for the whole call, retries and waits included (`None`: no limit). A
    /// retry that would end past it is not made; an attempt is cut at it.
    pub call_deadline: Option<Duration>,
    /// Deadline for connecting, handed to transports (see
    /// [`crate::ProviderContext::connect_timeout`]).
    pub connect_timeout: Duration,
    /// How many times an answer that fails its declared shape is sent back.
    pub max_corrections: u32,
    /// Where call and attempt records go.
    pub recorder: Arc<dyn Recorder>,
    /// The OpenTelemetry metrics calls are measured with (`None`: not measured).
    #[cfg(feature = "otel")]
    pub metrics: Option<Arc<crate::otel::Metrics>>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            retry: RetryPolicy::default(),
            breaker: BreakerConfig::default(),
            attempt_timeout: Duration::from_secs(600),
            call_deadline: None,
            connect_timeout: Duration::from_secs(10),
            max_corrections: MAX_CORRECTIONS,
            recorder: Arc::new(NoRecorder),
            #[cfg(feature = "otel")]
            metrics: None,
        }
    }
}
