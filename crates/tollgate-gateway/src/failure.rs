//! A route's failure as its handler returns it, in the dialect it answers in:
//! [`OpenAiError`] and [`AnthropicError`] for the routes that speak one dialect, a
//! [`Refusal`] for those that choose theirs per request (the model list, by
//! `anthropic-version`). Each answers with the dialect's error response, carrying the
//! failure as a [`Failed`] extension; the route's answering layer (`answering`) sees it
//! and answers instead with the body that names the request id, the detail of a masked
//! failure logged under it. So every handler keeps `?`, and none renders its own
//! error shape.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};

use crate::error::{Dialect, GatewayError};

/// The failure a response answers, in the dialect it answers it in; the answering layer
/// answers it again with the request's id and logs it.
#[derive(Debug, Clone)]
pub(crate) struct Failed(pub(crate) Arc<GatewayError>, pub(crate) Dialect);

impl Failed {
    /// The response to `error` in `dialect` (without the request id, which the answering
    /// layer adds), carrying it as a [`Failed`].
    fn response(error: GatewayError, dialect: Dialect) -> Response {
        let mut response = error.response_for(dialect, None);
        response
            .extensions_mut()
            .insert(Failed(Arc::new(error), dialect));
        response
    }
}

/// A failure in one fixed dialect, with the conversions `?` needs.
macro_rules! dialect_error {
    ($(#[$doc:meta])* $name:ident, $dialect:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) struct $name(pub(crate) GatewayError);

        impl From<GatewayError> for $name {
            fn from(error: GatewayError) -> Self {
                $name(error)
            }
        }

        impl From<tollgate::Error> for $name {
            fn from(error: tollgate::Error) -> Self {
                $name(GatewayError::from(error))
            }
        }

        impl IntoResponse for $name {
            fn into_response(self) -> Response {
                Failed::response(self.0, $dialect)
            }
        }
    };
}

dialect_error!(
    /// A failure of an OpenAI route (chat completions, embeddings, responses), answered
    /// in OpenAI's `{"error":{…}}`.
    OpenAiError,
    Dialect::OpenAi
);

dialect_error!(
    /// A failure of an Anthropic route (messages, count_tokens), answered in Anthropic's
    /// `{"type":"error",…}`.
    AnthropicError,
    Dialect::Anthropic
);

/// A failure answered in a dialect chosen per request: the model list's (by
/// `anthropic-version`), or the route's own when a shared extractor refuses.
#[derive(Debug)]
pub(crate) struct Refusal {
    error: GatewayError,
    dialect: Dialect,
}

impl Refusal {
    /// `error`, answered in `dialect`.
    pub(crate) fn new(error: impl Into<GatewayError>, dialect: Dialect) -> Self {
        Refusal {
            error: error.into(),
            dialect,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        Failed::response(self.error, self.dialect)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;

    use super::{AnthropicError, Failed, OpenAiError, Refusal};
    use crate::error::{Dialect, GatewayError};

    fn failed(response: &axum::response::Response) -> &Failed {
        response.extensions().get::<Failed>().expect("the failure")
    }

    #[test]
    fn each_dialect_error_answers_in_its_dialect_and_carries_the_failure() {
        let r = OpenAiError(GatewayError::Unauthorized).into_response();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(failed(&r).1, Dialect::OpenAi);
        let r = AnthropicError(GatewayError::BodyTooLarge(1)).into_response();
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(failed(&r).1, Dialect::Anthropic);
        assert!(matches!(*failed(&r).0, GatewayError::BodyTooLarge(1)));
        let r = Refusal::new(GatewayError::Unauthorized, Dialect::Anthropic).into_response();
        assert_eq!(failed(&r).1, Dialect::Anthropic);
    }
}
