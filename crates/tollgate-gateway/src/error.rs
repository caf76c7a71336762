//! Failures, answered in the client's dialect: one [`GatewayError`] per cause, its
//! status chosen by type (a tollgate [`Error`]'s variant, never its message text), and
//! its body shaped as OpenAI's `{"error":{…}}` or Anthropic's `{"type":"error",…}`.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tollgate::{Error, ProviderError};

/// The `retry-after` of a 503 that says "not here, not now": a request still queued
/// when the gateway shuts down, or one whose shared limiter (Redis) cannot be reached.
pub const SHUTDOWN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Which wire format a route speaks, so its failures are answered in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's chat completions, embeddings and models.
    OpenAi,
    /// Anthropic's messages.
    Anthropic,
}

/// Why the gateway did not answer a request with a model's answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// No key, or one no virtual key matches.
    #[error("invalid or missing API key")]
    Unauthorized,
    /// The key may not use this model.
    #[error("this key may not use model `{0}`")]
    ModelNotAllowed(String),
    /// The body could not be read as the route's request.
    #[error("invalid request body: {0}")]
    BadBody(String),
    /// The body is larger than the gateway's cap.
    #[error("the request body is larger than the gateway's limit of {0} bytes")]
    BodyTooLarge(usize),
    /// A header the gateway reads is malformed.
    #[error("invalid header `{name}`: {reason}")]
    BadHeader {
        /// The header.
        name: &'static str,
        /// What is accepted.
        reason: &'static str,
    },
    /// What tollgate's pipeline (or `Models`) failed with.
    #[error(transparent)]
    Tollgate(#[from] Error),
}

/// What kind of failure, for the status and each dialect's error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    TooLarge,
    RateLimited,
    Quota,
    Overloaded,
    Timeout,
    Upstream,
    Internal,
}

impl Class {
    fn status(self) -> StatusCode {
        match self {
            Class::BadRequest => StatusCode::BAD_REQUEST,
            Class::Unauthorized => StatusCode::UNAUTHORIZED,
            Class::Forbidden => StatusCode::FORBIDDEN,
            Class::NotFound => StatusCode::NOT_FOUND,
            Class::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Class::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Class::Quota => StatusCode::PAYMENT_REQUIRED,
            Class::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            Class::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Class::Upstream => StatusCode::BAD_GATEWAY,
            Class::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// OpenAI's `error.type`.
    fn openai_type(self) -> &'static str {
        match self {
            Class::BadRequest | Class::NotFound | Class::TooLarge | Class::Forbidden => {
                "invalid_request_error"
            }
            Class::Unauthorized => "authentication_error",
            Class::RateLimited => "rate_limit_error",
            Class::Quota => "insufficient_quota",
            Class::Overloaded | Class::Timeout | Class::Upstream | Class::Internal => {
                "server_error"
            }
        }
    }

    /// Anthropic's `error.type`.
    fn anthropic_type(self) -> &'static str {
        match self {
            Class::BadRequest => "invalid_request_error",
            Class::Unauthorized => "authentication_error",
            Class::Forbidden => "permission_error",
            Class::NotFound => "not_found_error",
            Class::TooLarge => "request_too_large",
            Class::RateLimited => "rate_limit_error",
            Class::Quota => "billing_error",
            Class::Overloaded => "overloaded_error",
            Class::Timeout => "timeout_error",
            Class::Upstream | Class::Internal => "api_error",
        }
    }
}

impl GatewayError {
    /// The failure's class, and the wait to advertise in `retry-after`, if any.
    fn class(&self) -> (Class, Option<Duration>) {
        match self {
            GatewayError::Unauthorized => (Class::Unauthorized, None),
            GatewayError::ModelNotAllowed(_) => (Class::Forbidden, None),
            GatewayError::BadBody(_) | GatewayError::BadHeader { .. } => (Class::BadRequest, None),
            GatewayError::BodyTooLarge(_) => (Class::TooLarge, None),
            GatewayError::Tollgate(e) => classify(e),
        }
    }

    /// The HTTP status this failure is answered with.
    pub fn status(&self) -> StatusCode {
        self.class().0.status()
    }

    /// The wait advertised in `retry-after`, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.class().1
    }

    /// A stable code for the failure (OpenAI's `error.code`): tollgate's
    /// [`Error::kind`] for a pipeline failure.
    pub fn code(&self) -> &'static str {
        match self {
            GatewayError::Unauthorized => "invalid_api_key",
            GatewayError::ModelNotAllowed(_) => "model_not_allowed",
            GatewayError::BadBody(_) | GatewayError::BadHeader { .. } => "invalid_request",
            GatewayError::BodyTooLarge(_) => "request_too_large",
            GatewayError::Tollgate(Error::UnknownModel { .. }) => "model_not_found",
            GatewayError::Tollgate(Error::ContextWindowExceeded { .. }) => {
                "context_length_exceeded"
            }
            GatewayError::Tollgate(e) => e.kind(),
        }
    }

    /// The error body in `dialect`: OpenAI's `{"error":{message,type,param,code}}` or
    /// Anthropic's `{"type":"error","error":{type,message}}`; streams end with it too.
    pub fn body(&self, dialect: Dialect) -> serde_json::Value {
        let class = self.class().0;
        let message = self.to_string();
        match dialect {
            Dialect::OpenAi => json!({"error": {
                "message": message,
                "type": class.openai_type(),
                "param": null,
                "code": self.code(),
            }}),
            Dialect::Anthropic => json!({
                "type": "error",
                "error": {"type": class.anthropic_type(), "message": message},
            }),
        }
    }

    /// The answer in `dialect`: status, `retry-after` (whole seconds, rounded up) and
    /// `retry-after-ms` when there is a wait, and the dialect's error body.
    pub fn into_response_in(self, dialect: Dialect) -> Response {
        let (class, wait) = self.class();
        let body = self.body(dialect);
        let mut response = (class.status(), axum::Json(body)).into_response();
        if let Some(wait) = wait {
            let headers = response.headers_mut();
            headers.insert("retry-after", HeaderValue::from(retry_after_secs(wait)));
            let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            headers.insert("retry-after-ms", HeaderValue::from(ms));
        }
        response
    }
}

/// `wait` in whole seconds, rounded up (a client that waits that long finds room).
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs();
    if wait.subsec_nanos() > 0 {
        secs + 1
    } else {
        secs
    }
}

/// A pipeline failure's class, by its type.
fn classify(error: &Error) -> (Class, Option<Duration>) {
    match error {
        // The limiter's own estimate: nothing was sent, come back then.
        Error::WouldWait { ready_in } => (Class::RateLimited, Some(*ready_in)),
        Error::Provider(p) => match p {
            ProviderError::RateLimited { retry_after } => (Class::RateLimited, *retry_after),
            ProviderError::Overloaded { retry_after, .. } => (Class::Overloaded, *retry_after),
            ProviderError::Timeout { .. } => (Class::Timeout, None),
            _ => (Class::Upstream, p.retry_after()),
        },
        Error::CircuitOpen { retry_in, .. } => (Class::Overloaded, Some(*retry_in)),
        // A shared limiter (Redis) that cannot answer: nothing was sent; a moment later,
        // or another replica, may serve it.
        Error::LimiterUnavailable { .. } => (Class::Overloaded, Some(SHUTDOWN_RETRY_AFTER)),
        Error::Cancelled => (Class::Overloaded, None),
        // Still queued when this gateway began shutting down: nothing was sent, and
        // another replica (or this one restarted) can take it a moment later.
        Error::QueueClosed => (Class::Overloaded, Some(SHUTDOWN_RETRY_AFTER)),
        // The provider rejected the request as sent: the client's request must change,
        // unless the provider refused the gateway's own credential.
        Error::ProviderRequest(r) => match r.status {
            401 | 403 => (Class::Upstream, None),
            _ => (Class::BadRequest, None),
        },
        Error::QuotaExhausted { .. } | Error::SpendCapExceeded { .. } => (Class::Quota, None),
        Error::UnknownModel { .. } => (Class::NotFound, None),
        Error::InvalidRequest { .. }
        | Error::ContextWindowExceeded { .. }
        | Error::TooLargeForBucket { .. }
        | Error::OutputTruncated { .. }
        | Error::ProviderRefusal { .. }
        | Error::WrongModelKind { .. }
        | Error::Unsupported { .. } => (Class::BadRequest, None),
        Error::ShapeInvalid { .. }
        | Error::StreamInterrupted { .. }
        | Error::ResponseTooLarge { .. }
        | Error::UnmatchedRequest { .. }
        | Error::EmbeddingShape { .. } => (Class::Upstream, None),
        _ => (Class::Internal, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::ZERO), 0);
    }

    #[test]
    fn an_unreachable_shared_limiter_and_a_closed_queue_are_503s_with_a_short_retry_after() {
        let unreachable = Error::LimiterUnavailable {
            backend: "redis".into(),
            model_id: "m".into(),
            source: "connection refused".into(),
        };
        for e in [unreachable, Error::QueueClosed] {
            let r = GatewayError::from(e).into_response_in(Dialect::Anthropic);
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(r.headers()["retry-after"], "1");
        }
    }

    #[test]
    fn would_wait_is_a_429_with_the_limiters_wait_in_both_dialects() {
        for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
            let e = GatewayError::from(Error::WouldWait {
                ready_in: Duration::from_millis(2500),
            });
            let r = e.into_response_in(dialect);
            assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(r.headers()["retry-after"], "3");
            assert_eq!(r.headers()["retry-after-ms"], "2500");
        }
    }

    #[test]
    fn failures_map_by_type_to_their_status() {
        let cases: Vec<(GatewayError, u16)> = vec![
            (GatewayError::Unauthorized, 401),
            (GatewayError::BodyTooLarge(10), 413),
            (GatewayError::ModelNotAllowed("m".into()), 403),
            (Error::invalid_request("messages", "empty").into(), 400),
            (
                Error::UnknownModel {
                    model_id: "x".into(),
                    known: String::new(),
                }
                .into(),
                404,
            ),
            (
                Error::from(ProviderError::Server {
                    status: 500,
                    retry_after: None,
                })
                .into(),
                502,
            ),
            (
                Error::from(ProviderError::Timeout { after: None }).into(),
                504,
            ),
            (
                Error::from(tollgate::ProviderRequestError::new(401, "bad upstream key")).into(),
                502,
            ),
            (
                Error::from(tollgate::ProviderRequestError::new(400, "bad field")).into(),
                400,
            ),
        ];
        for (error, status) in cases {
            assert_eq!(error.status().as_u16(), status, "{error}");
        }
    }
}
