//! How a call's attempts and the call itself are recorded: an [`AttemptRecord`] per
//! attempt and a [`CallRecord`] per call to the pipeline's recorder, the attempt and call
//! spans' closing attributes, and the call metrics.

use std::time::Duration;

use super::call::CallState;
use super::record::{AttemptRecord, CallRecord, Outcome};
use super::telemetry;
use crate::error::Error;
use crate::usage::Usage;

impl CallState {
    /// Records how an attempt on `deployment` ended (`retry_in`: the wait before the next
    /// one, when there is one).
    pub(super) fn record_attempt(
        &self,
        deployment: usize,
        span: &tracing::Span,
        outcome: Outcome,
        usage: Usage,
        latency: Duration,
        retry_in: Option<Duration>,
    ) {
        let failed = match &outcome {
            Outcome::Failed { error, status } => {
                tracing::debug!(parent: span, attempt = self.attempts, error = %error, ?retry_in, "attempt failed");
                Some((error.as_str(), *status))
            }
            Outcome::Success => None,
        };
        telemetry::record_attempt_end(span, &usage, failed, retry_in);
        self.rt.config.recorder.record_attempt(&AttemptRecord {
            call_id: self.call_id,
            job_id: self.job.as_ref().map(|j| j.id().to_owned()),
            attempt: self.attempts,
            model_id: self.rt.entry.id.clone(),
            deployment: self.rt.deployments[deployment].name.clone(),
            outcome,
            usage,
            latency,
            retry_in,
        });
    }

    /// Records the call's end; called once.
    pub(crate) fn finish(&mut self, result: Result<(), &Error>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let outcome = match result {
            Ok(_) => Outcome::Success,
            Err(e) => Outcome::of(e),
        };
        let error_type = result.err().map(Error::kind);
        let priced = self.rt.entry.price.is_some();
        let span = &self.span;
        telemetry::record_usage(span, &self.usage);
        span.record("tollgate.attempts", i64::from(self.attempts));
        span.record("tollgate.queue_wait", self.queue_wait.as_secs_f64());
        if priced {
            span.record("tollgate.cost_usd", self.cost_usd);
        }
        if let Some(limit) = self.max_tokens {
            span.record("gen_ai.request.max_tokens", telemetry::int(limit));
        }
        if let Some(model) = &self.response_model {
            span.record("gen_ai.response.model", model.as_str());
        }
        if let Some(ttfc) = self.time_to_first_token {
            span.record("gen_ai.response.time_to_first_chunk", ttfc.as_secs_f64());
        }
        // A generation cut short (a stream broken after its first event) ended with
        // `error`, as the conventions ask.
        let reason = match (self.finish_reason, result) {
            (Some(reason), _) => Some(reason),
            (None, Err(Error::StreamInterrupted { .. })) => Some("error"),
            (None, _) => None,
        };
        if let Some(reason) = reason {
            telemetry::record_strings(span, "gen_ai.response.finish_reasons", &[reason]);
        }
        if let Some(kind) = error_type {
            span.record("error.type", kind);
            span.record("otel.status_code", "error");
        }
        telemetry::measure_call(
            &self.rt,
            self.operation,
            self.response_model.as_deref(),
            error_type,
            self.started.elapsed(),
            &self.usage,
        );
        self.rt.config.recorder.record_call(&CallRecord {
            call_id: self.call_id,
            job_id: self.job.as_ref().map(|j| j.id().to_owned()),
            model_id: self.rt.entry.id.clone(),
            model_name: self.rt.entry.name.clone(),
            provider: self.rt.entry.provider.clone(),
            operation: self.operation.to_owned(),
            attempts: self.attempts,
            usage: self.usage,
            cost_usd: priced.then_some(self.cost_usd),
            latency: self.started.elapsed(),
            queue_wait: self.queue_wait,
            time_to_first_token: self.time_to_first_token,
            outcome,
        });
    }
}
