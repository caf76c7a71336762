//! One verdict per failure: a codec reads an error answer into a [`WireError`]; the
//! table in [`WireError::verdict`] is the only place that decides what it means.

use std::time::Duration;

use crate::error::{Error, ProviderError, ProviderRequestError};

/// An error answer as the wire said it, before anyone decided what it means.
///
/// A codec fills it from the status and body (or a stream's error event, giving the
/// status its error type stands for); the flags carry what only the body can say. The
/// provider key is not here: the pipeline writes it into every error it hands out, so
/// no codec can name the wrong provider.
///
/// ```
/// use tollgate::wire::WireError;
/// use tollgate::{Error, ProviderError};
///
/// let wire = WireError { status: 529, kind: "overloaded_error".into(), ..WireError::default() };
/// assert!(matches!(wire.verdict(), Error::Provider(ProviderError::Overloaded { status: 529, .. })));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WireError {
    /// The HTTP status; for an error without one (a stream's error event), the status
    /// its type stands for (500 when unknown).
    pub status: u16,
    /// The provider's error type (`error.type`, an exception name), if any.
    pub kind: String,
    /// The provider's error code (`error.code`), if any.
    pub code: String,
    /// What the provider said (already redacted).
    pub message: String,
    /// The provider's `retry-after`, if sent.
    pub retry_after: Option<Duration>,
    /// The account is out of money or quota (even when sent as a 429).
    pub quota: bool,
    /// The provider says it is overloaded (whatever the status).
    pub overloaded: bool,
    /// The input does not fit the model's context window.
    pub context_overflow: bool,
    /// The provider refused the request itself, before any answer (a prompt its content
    /// filter blocked: Azure's 400 `content_filter`): the refusal's category, e.g.
    /// `content_filter:hate,violence`.
    pub refusal: Option<String>,
}

impl WireError {
    /// The error the caller sees, decided by status and flags (never by message text):
    ///
    /// | wire | error |
    /// |---|---|
    /// | `refusal` | `ProviderRefusal { category, explanation: message }` (never retried; no tokens billed) |
    /// | `quota`, or 402 | `QuotaExhausted` (never retried) |
    /// | `context_overflow` | `ContextWindowExceeded` (the pipeline fills in the model) |
    /// | 529, or `overloaded` (whatever the status: Bedrock sends ModelNotReady as a 429) | `ProviderError::Overloaded { status, retry_after }` (the wire's status) |
    /// | other 429 | `ProviderError::RateLimited { retry_after }` |
    /// | 408 | `ProviderError::Timeout` |
    /// | other 5xx | `ProviderError::Server { status, retry_after }` |
    /// | anything else (400, 401, 403, 404, 413, …) | `ProviderRequestError { status }` |
    ///
    /// A provider that really differs sets a flag or the status its error stands for
    /// before calling this; it never builds the `Error` itself.
    pub fn verdict(self) -> Error {
        let retry_after = self.retry_after;
        let status = self.status;
        if let Some(category) = self.refusal {
            return Error::ProviderRefusal {
                category,
                explanation: self.message,
                usage: crate::usage::Usage::default(),
                delivered_events: 0,
            };
        }
        if self.quota || status == 402 {
            return Error::QuotaExhausted {
                provider: String::new(),
                message: self.describe(),
            };
        }
        if self.context_overflow {
            return Error::provider_context_overflow();
        }
        match status {
            _ if status == 529 || self.overloaded => ProviderError::Overloaded {
                status,
                retry_after,
            }
            .into(),
            429 => ProviderError::RateLimited { retry_after }.into(),
            408 => ProviderError::Timeout { after: None }.into(),
            500..=599 => ProviderError::Server {
                status,
                retry_after,
            }
            .into(),
            _ => ProviderRequestError::new(status, self.describe()).into(),
        }
    }

    /// `type/code: message`, or the message alone.
    fn describe(self) -> String {
        let label = [self.kind.as_str(), self.code.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        if label.is_empty() {
            self.message
        } else {
            format!("{label}: {}", self.message)
        }
    }
}

impl From<WireError> for Error {
    fn from(wire: WireError) -> Self {
        wire.verdict()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16) -> WireError {
        WireError {
            status,
            message: "m".into(),
            retry_after: Some(Duration::from_secs(2)),
            ..WireError::default()
        }
    }

    #[test]
    fn a_refused_request_is_a_refusal_whatever_its_status() {
        let wire = WireError {
            refusal: Some("content_filter:hate".into()),
            ..status(400)
        };
        assert!(matches!(
            wire.verdict(),
            Error::ProviderRefusal { category, explanation, delivered_events: 0, .. }
                if category == "content_filter:hate" && explanation == "m"
        ));
    }

    #[test]
    fn the_status_table() {
        let two = Some(Duration::from_secs(2));
        let table: [(WireError, Error); 10] = [
            (
                status(429),
                ProviderError::RateLimited { retry_after: two }.into(),
            ),
            (
                status(529),
                ProviderError::Overloaded {
                    status: 529,
                    retry_after: two,
                }
                .into(),
            ),
            (
                WireError {
                    overloaded: true,
                    ..status(429)
                },
                ProviderError::Overloaded {
                    status: 429,
                    retry_after: two,
                }
                .into(),
            ),
            (
                WireError {
                    overloaded: true,
                    ..status(503)
                },
                ProviderError::Overloaded {
                    status: 503,
                    retry_after: two,
                }
                .into(),
            ),
            (status(408), ProviderError::Timeout { after: None }.into()),
            (
                status(503),
                ProviderError::Server {
                    status: 503,
                    retry_after: two,
                }
                .into(),
            ),
            (status(400), ProviderRequestError::new(400, "m").into()),
            (
                WireError {
                    kind: "t".into(),
                    code: "c".into(),
                    ..status(404)
                },
                ProviderRequestError::new(404, "t/c: m").into(),
            ),
            (
                WireError {
                    quota: true,
                    ..status(429)
                },
                Error::QuotaExhausted {
                    provider: String::new(),
                    message: "m".into(),
                },
            ),
            (
                status(402),
                Error::QuotaExhausted {
                    provider: String::new(),
                    message: "m".into(),
                },
            ),
        ];
        for (wire, want) in table {
            let got = wire.clone().verdict();
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{wire:?}");
        }
    }

    #[test]
    fn a_context_overflow_is_typed() {
        let wire = WireError {
            context_overflow: true,
            ..status(400)
        };
        assert!(matches!(
            wire.verdict(),
            Error::ContextWindowExceeded { window: None, .. }
        ));
    }

    #[test]
    fn the_pipeline_names_the_provider() {
        let wire = WireError {
            quota: true,
            ..status(429)
        };
        let error = wire.verdict().with_provider("openai-compatible");
        assert!(
            matches!(&error, Error::QuotaExhausted { provider, .. } if provider == "openai-compatible"),
            "{error:?}"
        );
    }
}
