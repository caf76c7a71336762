//! The verdict table: every kind of failure, in the contexts that change its verdict.

use std::time::Duration;

use super::*;
use crate::error::ProviderRequestError;

const SECS_2: Duration = Duration::from_secs(2);

fn cx() -> FailureContext {
    FailureContext::default()
}

fn rate_limited(retry_after: Option<Duration>) -> Error {
    ProviderError::RateLimited { retry_after }.into()
}

fn refusal(output: u64) -> Error {
    Error::refusal(
        "refusal",
        "no",
        Usage {
            input_tokens: 10,
            output_tokens: output,
            ..Usage::default()
        },
    )
}

/// One row: the error, the context, and what the verdict must say.
struct Row {
    name: &'static str,
    error: Error,
    cx: FailureContext,
    kind: &'static str,
    retry: Retry,
    feedback: Option<Feedback>,
    settle: Settle,
    health: Health,
    next_model: bool,
}

fn table() -> Vec<Row> {
    let limited = |retry_after| Some(Feedback::RateLimited { retry_after });
    vec![
        Row {
            name: "a 429 with retry-after waits exactly that long and pauses the limiter",
            error: rate_limited(Some(SECS_2)),
            cx: cx(),
            kind: "rate_limited",
            retry: Retry::After(SECS_2),
            feedback: limited(Some(SECS_2)),
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a 429 without retry-after backs off",
            error: rate_limited(None),
            cx: cx(),
            kind: "rate_limited",
            retry: Retry::Backoff,
            feedback: limited(None),
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a repeated 429 of one call is no new refusal for the throttle",
            error: rate_limited(Some(SECS_2)),
            cx: FailureContext {
                rate_limited_before: true,
                ..cx()
            },
            kind: "rate_limited",
            retry: Retry::After(SECS_2),
            feedback: Some(Feedback::RateLimitedAgain {
                retry_after: Some(SECS_2),
            }),
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a 429 inside a fallback chain moves on instead of retrying",
            error: rate_limited(Some(SECS_2)),
            cx: FailureContext {
                in_chain: true,
                ..cx()
            },
            kind: "rate_limited",
            retry: Retry::Never,
            feedback: limited(Some(SECS_2)),
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: true,
        },
        Row {
            name: "a 429 on one of several deployments retries at once elsewhere",
            error: rate_limited(Some(SECS_2)),
            cx: FailureContext {
                several_deployments: true,
                ..cx()
            },
            kind: "rate_limited",
            retry: Retry::Now,
            feedback: limited(Some(SECS_2)),
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a 529 waits its retry-after and counts against health",
            error: ProviderError::overloaded(Some(SECS_2)).into(),
            cx: cx(),
            kind: "overloaded",
            retry: Retry::After(SECS_2),
            feedback: Some(Feedback::Overloaded {
                retry_after: Some(SECS_2),
            }),
            settle: Settle::KeepRequest,
            health: Health::Failing,
            next_model: false,
        },
        Row {
            name: "a 5xx backs off, keeps the charge (the work may be done) and counts",
            error: ProviderError::server(500).into(),
            cx: cx(),
            kind: "server_error",
            retry: Retry::Backoff,
            feedback: None,
            settle: Settle::KeepAll,
            health: Health::Failing,
            next_model: false,
        },
        Row {
            name: "a timeout keeps the charge and counts",
            error: ProviderError::Timeout { after: None }.into(),
            cx: cx(),
            kind: "timeout",
            retry: Retry::Backoff,
            feedback: None,
            settle: Settle::KeepAll,
            health: Health::Failing,
            next_model: false,
        },
        Row {
            name: "a refused connection never reached the provider: the tokens come back",
            error: ProviderError::Connection {
                cause: ConnectionCause::Refused,
                detail: "refused".into(),
            }
            .into(),
            cx: cx(),
            kind: "connection",
            retry: Retry::Backoff,
            feedback: None,
            settle: Settle::KeepRequest,
            health: Health::Failing,
            next_model: false,
        },
        Row {
            name: "a connection reset mid-answer keeps the charge",
            error: ProviderError::Connection {
                cause: ConnectionCause::Reset,
                detail: "reset".into(),
            }
            .into(),
            cx: cx(),
            kind: "connection",
            retry: Retry::Backoff,
            feedback: None,
            settle: Settle::KeepAll,
            health: Health::Failing,
            next_model: false,
        },
        Row {
            name: "a 4xx is final and says nothing about health",
            error: ProviderRequestError::new(400, "bad").into(),
            cx: cx(),
            kind: "request_rejected",
            retry: Retry::Never,
            feedback: None,
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a 4xx the provider says to retry (x-should-retry: true) backs off",
            error: ProviderRequestError::new(409, "locked").into(),
            cx: FailureContext {
                should_retry: Some(true),
                ..cx()
            },
            kind: "request_rejected",
            retry: Retry::Backoff,
            feedback: None,
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a 5xx the provider says not to retry (x-should-retry: false) is final",
            error: ProviderError::server(503).into(),
            cx: FailureContext {
                should_retry: Some(false),
                ..cx()
            },
            kind: "server_error",
            retry: Retry::Never,
            feedback: None,
            settle: Settle::KeepAll,
            health: Health::Failing,
            next_model: false,
        },
        Row {
            name: "a refusal settles at the usage the provider billed",
            error: refusal(3),
            cx: cx(),
            kind: "refusal",
            retry: Retry::Never,
            feedback: None,
            settle: Settle::AtUsage(Usage {
                input_tokens: 10,
                output_tokens: 3,
                ..Usage::default()
            }),
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "quota exhausted is final and gives the tokens back",
            error: Error::QuotaExhausted {
                provider: "p".into(),
                message: "out".into(),
            },
            cx: cx(),
            kind: "quota_exhausted",
            retry: Retry::Never,
            feedback: None,
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a context overflow is final and gives the tokens back",
            error: Error::provider_context_overflow(),
            cx: cx(),
            kind: "context_window_exceeded",
            retry: Retry::Never,
            feedback: None,
            settle: Settle::KeepRequest,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "a stream broken after delivering is never re-sent and keeps the charge",
            error: ProviderError::Connection {
                cause: ConnectionCause::Refused,
                detail: "gone".into(),
            }
            .into(),
            cx: FailureContext {
                delivered: true,
                ..cx()
            },
            kind: "connection",
            retry: Retry::Never,
            feedback: None,
            settle: Settle::KeepAll,
            health: Health::Failing,
            next_model: false,
        },
        Row {
            name: "a 429 event mid-stream in a chain does not move on: the reader has text",
            error: rate_limited(None),
            cx: FailureContext {
                delivered: true,
                in_chain: true,
                ..cx()
            },
            kind: "rate_limited",
            retry: Retry::Never,
            feedback: limited(None),
            settle: Settle::KeepAll,
            health: Health::Unknown,
            next_model: false,
        },
        Row {
            name: "the limiter's own would-wait is final here and no provider refusal",
            error: Error::WouldWait { ready_in: SECS_2 },
            cx: cx(),
            kind: "would_wait",
            retry: Retry::Never,
            feedback: None,
            settle: Settle::KeepAll,
            health: Health::Unknown,
            next_model: false,
        },
    ]
}

#[test]
fn verdict_table_decides_every_failure_once() {
    for row in table() {
        let v = verdict(&row.error, &row.cx);
        assert_eq!(v.kind, row.kind, "{}: kind", row.name);
        assert_eq!(v.retry, row.retry, "{}: retry", row.name);
        assert_eq!(v.feedback, row.feedback, "{}: feedback", row.name);
        assert_eq!(v.settle, row.settle, "{}: settle", row.name);
        assert_eq!(v.health, row.health, "{}: health", row.name);
        assert_eq!(v.next_model, row.next_model, "{}: next model", row.name);
    }
}

#[test]
fn error_kinds_are_distinct_snake_case_names() {
    let errors: Vec<Error> = vec![
        rate_limited(None),
        ProviderError::overloaded(None).into(),
        ProviderError::server(500).into(),
        ProviderError::Timeout { after: None }.into(),
        crate::provider::malformed("x", b""),
        ProviderError::closed_early("x").into(),
        ProviderRequestError::new(400, "bad").into(),
        refusal(0),
        Error::WouldWait { ready_in: SECS_2 },
        Error::Cancelled,
        Error::InvalidRequest {
            field: "f".into(),
            reason: "r".into(),
        },
    ];
    let kinds: Vec<&str> = errors.iter().map(Error::kind).collect();
    let mut unique = kinds.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), kinds.len(), "{kinds:?}");
    for kind in kinds {
        assert!(
            kind.chars().all(|c| c.is_ascii_lowercase() || c == '_') && kind != "other",
            "{kind}"
        );
    }
}
