//! Failures, answered in the client's dialect: one [`GatewayError`] per cause, its
//! status chosen by type (a tollgate [`Error`]'s variant, never its message text), and
//! its body shaped as OpenAI's `{"error":{…}}` or Anthropic's `{"type":"error",…}`.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::reload::ReloadError;
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
    /// A key view was asked of a gateway that runs without virtual keys.
    #[error(
        "this gateway runs without virtual keys, so it has no key to describe; start it with \
         a keys file (`tollgate serve --keys FILE`)"
    )]
    NoKeys,
    /// A view of every key was asked with a key that is not an admin key.
    #[error(
        "this key may not read other keys' usage; an admin key may (`admin = true` in the \
         keys file)"
    )]
    NotAdmin,
    /// An admin asked for a key the keys file does not have.
    #[error("no virtual key `{0}`")]
    UnknownKey(String),
    /// The body could not be read as the route's request.
    #[error("invalid request body: {0}")]
    BadBody(String),
    /// The body is larger than the gateway's cap.
    #[error("the request body is larger than the gateway's limit of {0} bytes")]
    BodyTooLarge(usize),
    /// The body did not arrive in time: the client sent it slower than the gateway's
    /// minimum rate, or stopped sending it.
    #[error(
        "the request body did not arrive in time ({received} bytes in {waited:?}); send it \
         at once, or at least at the gateway's minimum rate"
    )]
    BodyTimeout {
        /// Bytes that had arrived.
        received: usize,
        /// How long the gateway waited.
        waited: Duration,
    },
    /// No route has this path.
    #[error(
        "no route for {method} {path}; the gateway serves {}",
        crate::router::ROUTES
    )]
    NoRoute {
        /// The request's method.
        method: String,
        /// The request's path (cut to 200 characters).
        path: String,
    },
    /// The path exists, but not for this method.
    #[error(
        "{path} does not take {method}; the gateway serves {}",
        crate::router::ROUTES
    )]
    MethodNotAllowed {
        /// The request's method.
        method: String,
        /// The request's path (cut to 200 characters).
        path: String,
    },

    /// The request names state the gateway does not keep (a stored response, a
    /// conversation, a stored item or prompt): it keeps none, so the client sends the
    /// whole input instead.
    #[error("{reason}")]
    NotKept {
        /// The field that named it (OpenAI's `param`).
        param: String,
        /// OpenAI's error `code` for it, e.g. `previous_response_not_found`.
        code: &'static str,
        /// What was asked and what to send instead.
        reason: String,
    },

    /// The gateway is shutting down and the request did not finish within the grace.
    #[error(
        "the gateway is shutting down and this request did not finish within its grace \
         period; send it again (another replica, or this one restarted, will take it)"
    )]
    ShuttingDown,
    /// A header the gateway reads is malformed.
    #[error("invalid header `{name}`: {reason}")]
    BadHeader {
        /// The header.
        name: &'static str,
        /// What is accepted.
        reason: &'static str,
    },
    /// A query parameter the gateway reads is malformed.
    #[error("invalid query parameter `{name}`: {reason}")]
    BadQuery {
        /// The parameter.
        name: &'static str,
        /// What is accepted, and what was sent.
        reason: String,
    },
    /// A reload asked on the admin route did not happen.
    #[error(transparent)]
    Reload(#[from] ReloadError),
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
    NotAllowed,
    ClientTimeout,
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
            Class::ClientTimeout => StatusCode::REQUEST_TIMEOUT,
            Class::NotAllowed => StatusCode::METHOD_NOT_ALLOWED,

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
            Class::BadRequest
            | Class::NotFound
            | Class::TooLarge
            | Class::Forbidden
            | Class::NotAllowed
            | Class::ClientTimeout => "invalid_request_error",
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
            Class::BadRequest | Class::ClientTimeout | Class::NotAllowed => "invalid_request_error",
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

/// How a failure is answered: its class, the wait to advertise, and whether its own
/// text is the client's to read (else a stable message and the request id; the detail
/// goes to the gateway's log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Answer {
    class: Class,
    wait: Option<Duration>,
    shown: Shown,
}

/// Whether a failure's text reaches the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// The text is about the client's own request, key or budget: it says what to fix.
    Text,
    /// The text is about the upstream provider, the gateway's credentials, catalog or
    /// files (a provider may quote a masked key; a path names the server's disk): the
    /// client reads this stable message instead.
    Masked(&'static str),
}

const UPSTREAM_FAILED: &str = "the upstream provider failed to answer this request";
const UPSTREAM_REFUSED_GATEWAY: &str =
    "the upstream provider refused the gateway's own credentials for this model";
const UPSTREAM_QUOTA: &str = "the upstream provider's account is out of quota or credit";
const LIMITER_DOWN: &str = "the gateway's shared rate limiter cannot be reached; nothing was sent";
const INTERNAL: &str = "the gateway failed to serve this request (a configuration error)";

impl Answer {
    fn text(class: Class, wait: Option<Duration>) -> Self {
        Answer {
            class,
            wait,
            shown: Shown::Text,
        }
    }

    fn masked(class: Class, wait: Option<Duration>, message: &'static str) -> Self {
        Answer {
            class,
            wait,
            shown: Shown::Masked(message),
        }
    }
}

impl GatewayError {
    fn answer(&self) -> Answer {
        match self {
            GatewayError::Unauthorized => Answer::text(Class::Unauthorized, None),
            GatewayError::ModelNotAllowed(_) | GatewayError::NotAdmin => {
                Answer::text(Class::Forbidden, None)
            }
            GatewayError::NoKeys | GatewayError::UnknownKey(_) => {
                Answer::text(Class::NotFound, None)
            }
            GatewayError::Reload(ReloadError::NotReloadable) => Answer::text(Class::NotFound, None),
            GatewayError::Reload(ReloadError::Refused(_)) => Answer::text(Class::BadRequest, None),
            GatewayError::BadBody(_)
            | GatewayError::BadHeader { .. }
            | GatewayError::BadQuery { .. } => Answer::text(Class::BadRequest, None),
            GatewayError::BodyTooLarge(_) => Answer::text(Class::TooLarge, None),
            GatewayError::BodyTimeout { .. } => Answer::text(Class::ClientTimeout, None),
            GatewayError::NoRoute { .. } => Answer::text(Class::NotFound, None),
            GatewayError::NotKept {
                code: "not_found", ..
            } => Answer::text(Class::NotFound, None),
            GatewayError::NotKept { .. } => Answer::text(Class::BadRequest, None),
            GatewayError::MethodNotAllowed { .. } => Answer::text(Class::NotAllowed, None),
            GatewayError::ShuttingDown => {
                Answer::text(Class::Overloaded, Some(SHUTDOWN_RETRY_AFTER))
            }
            GatewayError::Tollgate(e) => classify(e),
        }
    }

    /// The HTTP status this failure is answered with.
    pub fn status(&self) -> StatusCode {
        self.answer().class.status()
    }

    /// The wait advertised in `retry-after`, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.answer().wait
    }

    /// Whether the failure's own text is withheld from the client (an upstream or
    /// internal failure): the answer then carries a stable message and the request id,
    /// and the text belongs in the gateway's log.
    pub fn is_masked(&self) -> bool {
        matches!(self.answer().shown, Shown::Masked(_))
    }

    /// A stable code for the failure (OpenAI's `error.code`): tollgate's
    /// [`Error::kind`] for a pipeline failure.
    pub fn code(&self) -> &'static str {
        match self {
            GatewayError::Unauthorized => "invalid_api_key",
            GatewayError::ModelNotAllowed(_) => "model_not_allowed",
            GatewayError::NoKeys => "no_keys",
            GatewayError::NotAdmin => "not_admin",
            GatewayError::UnknownKey(_) => "key_not_found",
            GatewayError::Reload(ReloadError::NotReloadable) => "not_reloadable",
            GatewayError::Reload(ReloadError::Refused(_)) => "reload_refused",
            GatewayError::BadBody(_)
            | GatewayError::BadHeader { .. }
            | GatewayError::BadQuery { .. } => "invalid_request",
            GatewayError::BodyTooLarge(_) => "request_too_large",
            GatewayError::BodyTimeout { .. } => "request_timeout",
            GatewayError::NoRoute { .. } => "unknown_route",
            GatewayError::NotKept { code, .. } => code,
            GatewayError::MethodNotAllowed { .. } => "method_not_allowed",
            GatewayError::ShuttingDown => "shutting_down",
            GatewayError::Tollgate(Error::UnknownModel { .. }) => "model_not_found",
            GatewayError::Tollgate(Error::ContextWindowExceeded { .. }) => {
                "context_length_exceeded"
            }
            GatewayError::Tollgate(e) => e.kind(),
        }
    }

    /// What the client reads: the failure's text, or for a masked one its stable
    /// message with `request_id` (to quote when asking the operator).
    /// The request field the failure is about (OpenAI's `param`), where one is known.
    fn param(&self) -> Option<&str> {
        match self {
            GatewayError::NotKept { param, .. } => Some(param),
            _ => None,
        }
    }

    fn message(&self, request_id: Option<&str>) -> String {
        match (self.answer().shown, request_id) {
            (Shown::Text, _) => self.to_string(),
            (Shown::Masked(message), Some(id)) => {
                format!("{message} (request {id}; the gateway's log has the detail)")
            }
            (Shown::Masked(message), None) => message.to_owned(),
        }
    }

    /// The error body in `dialect`: OpenAI's `{"error":{message,type,param,code}}` or
    /// Anthropic's `{"type":"error","error":{type,message}}`; streams end with it too.
    /// An upstream or internal failure says a stable message, not its own text.
    pub fn body(&self, dialect: Dialect) -> serde_json::Value {
        self.body_for(dialect, None)
    }

    /// [`GatewayError::body`], a masked message naming `request_id`.
    pub fn body_for(&self, dialect: Dialect, request_id: Option<&str>) -> serde_json::Value {
        let class = self.answer().class;
        let message = self.message(request_id);
        match dialect {
            Dialect::OpenAi => json!({"error": {
                "message": message,
                "type": class.openai_type(),
                "param": self.param(),
                "code": self.code(),
            }}),
            Dialect::Anthropic => {
                let mut body = json!({
                    "type": "error",
                    "error": {"type": class.anthropic_type(), "message": message},
                });
                if let Some(id) = request_id {
                    body["request_id"] = id.into();
                }
                body
            }
        }
    }

    /// The answer in `dialect`: status, `retry-after` (whole seconds, rounded up) and
    /// `retry-after-ms` when there is a wait, and the dialect's error body.
    pub fn into_response_in(self, dialect: Dialect) -> Response {
        self.into_response_for(dialect, None)
    }

    /// [`GatewayError::into_response_in`], a masked message naming `request_id`.
    pub fn into_response_for(self, dialect: Dialect, request_id: Option<&str>) -> Response {
        self.response_for(dialect, request_id)
    }

    /// [`GatewayError::into_response_for`], the failure kept (a route's answering layer
    /// renders one that other handles share).
    pub(crate) fn response_for(&self, dialect: Dialect, request_id: Option<&str>) -> Response {
        let Answer { class, wait, .. } = self.answer();
        let body = self.body_for(dialect, request_id);
        let mut response = (class.status(), axum::Json(body)).into_response();
        let headers = response.headers_mut();
        if let Some(wait) = wait {
            headers.insert("retry-after", HeaderValue::from(retry_after_secs(wait)));
            let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            headers.insert("retry-after-ms", HeaderValue::from(ms));
        }
        // The client stopped sending its body: the connection cannot be reused.
        if class == Class::ClientTimeout {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
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

/// A pipeline failure's answer, by its type: every variant decides, with no wildcard, so
/// a new one does not compile until it is placed.
fn classify(error: &Error) -> Answer {
    match error {
        // The limiter's own estimate: nothing was sent, come back then.
        Error::WouldWait { ready_in } => Answer::text(Class::RateLimited, Some(*ready_in)),
        Error::Provider(p) => match p {
            ProviderError::RateLimited { retry_after } => {
                Answer::text(Class::RateLimited, *retry_after)
            }
            ProviderError::Overloaded { retry_after, .. } => {
                Answer::text(Class::Overloaded, *retry_after)
            }
            ProviderError::Timeout { .. } => Answer::text(Class::Timeout, None),
            // Their text quotes the provider's answer or the transport's error.
            ProviderError::Server { retry_after, .. } => {
                Answer::masked(Class::Upstream, *retry_after, UPSTREAM_FAILED)
            }
            ProviderError::Malformed { .. } | ProviderError::Connection { .. } => {
                Answer::masked(Class::Upstream, p.retry_after(), UPSTREAM_FAILED)
            }
        },
        Error::CircuitOpen { retry_in, .. } => Answer::text(Class::Overloaded, Some(*retry_in)),
        // A shared limiter (Redis) that cannot answer: nothing was sent; a moment later,
        // or another replica, may serve it. Its text may name the Redis address.
        Error::LimiterUnavailable { .. } => {
            Answer::masked(Class::Overloaded, Some(SHUTDOWN_RETRY_AFTER), LIMITER_DOWN)
        }
        Error::Cancelled | Error::BatchLineUnfinished { .. } => {
            Answer::text(Class::Overloaded, None)
        }
        // Still queued when this gateway began shutting down: nothing was sent, and
        // another replica (or this one restarted) can take it a moment later.
        Error::QueueClosed => Answer::text(Class::Overloaded, Some(SHUTDOWN_RETRY_AFTER)),
        // The provider rejected the request as sent: the client's request must change,
        // unless the provider refused the gateway's own credential.
        Error::ProviderRequest(r) => match r.status {
            401 | 403 => Answer::masked(Class::Upstream, None, UPSTREAM_REFUSED_GATEWAY),
            _ => Answer::text(Class::BadRequest, None),
        },
        // The operator's provider account, not the client's.
        Error::QuotaExhausted { .. } => Answer::masked(Class::Quota, None, UPSTREAM_QUOTA),
        // The key's own budget: its text says what is left.
        Error::SpendCapExceeded { .. } => Answer::text(Class::Quota, None),
        Error::UnknownModel { .. } => Answer::text(Class::NotFound, None),
        Error::InvalidRequest { .. }
        | Error::ContextWindowExceeded { .. }
        | Error::TooLargeForBucket { .. }
        | Error::OutputTruncated { .. }
        | Error::ProviderRefusal { .. }
        | Error::WrongModelKind { .. }
        | Error::UnsupportedSetting { .. }
        | Error::Unsupported { .. } => Answer::text(Class::BadRequest, None),
        Error::ShapeInvalid { .. }
        | Error::StreamInterrupted { .. }
        | Error::ResponseTooLarge { .. }
        | Error::UnmatchedRequest { .. }
        | Error::EmbeddingShape { .. } => Answer::masked(Class::Upstream, None, UPSTREAM_FAILED),
        // The gateway's own configuration: credentials, catalog, linking, files. Their
        // text names credential ids and the server's paths.
        Error::Catalog(_)
        | Error::Credential(_)
        | Error::ProviderNotLinked { .. }
        | Error::DuplicateProvider { .. }
        | Error::Decode { .. }
        | Error::ReplayStore { .. } => Answer::masked(Class::Internal, None, INTERNAL),
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
            (GatewayError::NotAdmin, 403),
            (GatewayError::NoKeys, 404),
            (GatewayError::UnknownKey("k".into()), 404),
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
