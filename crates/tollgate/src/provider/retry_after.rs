//! A provider's requested wait, read from its `retry-after-ms` / `retry-after` headers:
//! a transport calls it while filling [`Signals`](super::Signals); the pipeline waits it.

use std::time::{Duration, SystemTime};

/// Reads a provider's requested wait from its headers: `retry-after-ms` (milliseconds)
/// first, then `retry-after` as seconds (fractions allowed) or an HTTP date, relative to
/// `now`. Unparseable or negative values are ignored.
pub fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = retry_after?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_prefers_milliseconds_then_seconds_then_http_date() {
        let now = httpdate::parse_http_date("Sun, 29 Nov 2026 12:00:00 GMT").unwrap();
        assert_eq!(
            parse_retry_after(Some("1500"), Some("9"), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(None, Some("2.5"), now),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            parse_retry_after(None, Some("Sun, 29 Nov 2026 12:00:07 GMT"), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after(None, Some("Sun, 29 Nov 2026 11:00:00 GMT"), now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(Some("soon"), Some("-3"), now), None);
        assert_eq!(parse_retry_after(None, None, now), None);
    }
}
