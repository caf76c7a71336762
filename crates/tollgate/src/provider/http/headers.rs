//! Reading an answer's headers: rate limits into [`Signals`], `retry-after`,
//! `x-should-retry`.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::catalog::Dimension;
use crate::clock::wall_now;
use crate::provider::{Signals, parse_retry_after};

/// Header `name` as text, if present and readable.
pub fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The provider's requested wait: `retry-after-ms`, else `retry-after` (seconds or an
/// HTTP date).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    parse_retry_after(
        header(headers, "retry-after-ms"),
        header(headers, "retry-after"),
        wall_now(),
    )
}

/// How a rate-limit reset header says when the limit is full again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reset {
    /// An RFC 3339 instant (`2026-01-01T00:00:30Z`; Anthropic).
    Rfc3339,
    /// A Go duration (`6m0s`, `12ms`; OpenAI), see [`parse_go_duration`].
    GoDuration,
    /// Seconds from now (`30`, `1.5`).
    Seconds,
}

/// The three headers that report one rate-limit dimension; a name left empty is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// Which limit.
    pub dimension: Dimension,
    /// The limit itself (a whole number).
    pub limit: &'static str,
    /// What is left of it (a whole number).
    pub remaining: &'static str,
    /// When it is full again.
    pub reset: &'static str,
    /// How `reset` is written.
    pub reset_format: Reset,
}

/// OpenAI's rate-limit headers, which Groq, Together and most compatible servers copy:
/// each limit (`x-ratelimit-limit-*`), what is left of it (`x-ratelimit-remaining-*`) and
/// when it is full again (`x-ratelimit-reset-*`, Go durations such as `6m0s`).
pub const OPENAI_RATE_LIMITS: &[RateLimitHeaders] = &[
    RateLimitHeaders {
        dimension: Dimension::Requests,
        limit: "x-ratelimit-limit-requests",
        remaining: "x-ratelimit-remaining-requests",
        reset: "x-ratelimit-reset-requests",
        reset_format: Reset::GoDuration,
    },
    RateLimitHeaders {
        dimension: Dimension::Tokens,
        limit: "x-ratelimit-limit-tokens",
        remaining: "x-ratelimit-remaining-tokens",
        reset: "x-ratelimit-reset-tokens",
        reset_format: Reset::GoDuration,
    },
];

/// Passes the answer's rate-limit headers and `x-should-retry` to the pipeline.
pub fn read_signals(headers: &HeaderMap, rate_limits: &[RateLimitHeaders], signals: &Signals) {
    let number = |name: &str| {
        (!name.is_empty())
            .then(|| header(headers, name))
            .flatten()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    for h in rate_limits {
        if let Some(n) = number(h.limit) {
            signals.limit(h.dimension, n);
        }
        if let Some(n) = number(h.remaining) {
            signals.remaining(h.dimension, n);
        }
        let reset = (!h.reset.is_empty())
            .then(|| header(headers, h.reset))
            .flatten()
            .map(str::trim);
        let reset_in = reset.and_then(|v| match h.reset_format {
            Reset::Rfc3339 => humantime::parse_rfc3339_weak(v)
                .ok()
                .map(|at| at.duration_since(wall_now()).unwrap_or(Duration::ZERO)),
            Reset::GoDuration => parse_go_duration(v),
            Reset::Seconds => v
                .parse::<f64>()
                .ok()
                .and_then(|s| Duration::try_from_secs_f64(s).ok()),
        });
        if let Some(d) = reset_in {
            signals.reset_in(h.dimension, d);
        }
    }
    match header(headers, "x-should-retry").map(str::trim) {
        Some("true") => signals.should_retry(true),
        Some("false") => signals.should_retry(false),
        _ => {}
    }
}

/// Parses a Go duration as OpenAI's `x-ratelimit-reset-*` headers carry them: `1s`,
/// `6m0s`, `12ms`, `1.5s`, `1h2m3.5s`, `250us`. `None` for anything else.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    const LIMITS: &[RateLimitHeaders] = &[
        RateLimitHeaders {
            dimension: Dimension::Requests,
            limit: "rl-limit",
            remaining: "rl-left",
            reset: "rl-reset",
            reset_format: Reset::GoDuration,
        },
        RateLimitHeaders {
            dimension: Dimension::Tokens,
            limit: "",
            remaining: "tk-left",
            reset: "tk-reset",
            reset_format: Reset::Seconds,
        },
    ];

    #[test]
    fn rate_limit_headers_and_should_retry_become_signals() {
        let signals = Signals::default();
        read_signals(
            &headers(&[
                ("rl-limit", "100"),
                ("rl-left", " 7 "),
                ("rl-reset", "1m30s"),
                ("tk-left", "900"),
                ("tk-reset", "2.5"),
                ("x-should-retry", "false"),
            ]),
            LIMITS,
            &signals,
        );
        let values = signals.take();
        assert_eq!(values.limits, [(Dimension::Requests, 100)]);
        assert_eq!(
            values.remaining,
            [(Dimension::Requests, 7), (Dimension::Tokens, 900)]
        );
        assert_eq!(
            values.resets,
            [
                (Dimension::Requests, Duration::from_secs(90)),
                (Dimension::Tokens, Duration::from_millis(2500)),
            ]
        );
        assert_eq!(values.should_retry, Some(false));
    }

    #[test]
    fn unreadable_values_are_ignored() {
        let signals = Signals::default();
        read_signals(
            &headers(&[
                ("rl-left", "many"),
                ("rl-reset", "soon"),
                ("x-should-retry", "maybe"),
            ]),
            LIMITS,
            &signals,
        );
        let values = signals.take();
        assert!(values.remaining.is_empty() && values.resets.is_empty());
        assert_eq!(values.should_retry, None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(parse_go_duration("12ms"), Some(Duration::from_millis(12)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("5x"), None);
        assert_eq!(parse_go_duration(""), None);
    }
}
