//! llmock's journal (`GET /_llmock/requests`) read back: every attempt a client sent, with
//! llmock's own times (`time.monotonic()`, seconds), status and fault, and what it
//! charged the attempt against its token bucket.
//!
//! Each benchmark request carries a marker in its prompt ([`marker`]), so attempts are
//! grouped by logical request without trusting the client; each client of a row sends a
//! model name of its own, so one llmock serves a whole row.

use serde_json::Value;

/// One attempt as llmock journaled it.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalRecord {
    /// llmock's sequence number (arrival order).
    pub seq: u64,
    /// `openai`, `anthropic`, `gemini`, ...
    pub provider: String,
    /// The model the request named (body or path).
    pub model: Option<String>,
    /// When llmock began serving it (seconds, llmock's monotonic clock).
    pub started_at: f64,
    /// When its answer's last byte was about to go out.
    pub ended_at: f64,
    /// The HTTP status.
    pub status: u16,
    /// What llmock did to it, e.g. `ratelimit:requests` (`None`: served normally).
    pub fault: Option<String>,
    /// The request body as JSON (llmock keeps bodies up to 256 KiB).
    pub body: Option<Value>,
}

impl JournalRecord {
    /// Refused by llmock's rate limiter (a 429 with a `ratelimit:` fault).
    pub fn is_rate_limited(&self) -> bool {
        self.status == 429
            && self
                .fault
                .as_deref()
                .is_some_and(|f| f.starts_with("ratelimit:"))
    }

    /// Answered with 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The benchmark request this attempt belongs to, from the marker in its body.
    pub fn request_index(&self) -> Option<usize> {
        self.body.as_ref().and_then(find_marker)
    }

    /// What llmock charged this attempt against its token bucket (see [`llmock_charge`]).
    pub fn charge(&self) -> Option<u64> {
        self.body.as_ref().map(llmock_charge)
    }
}

/// The text put at the start of request `index`'s prompt: `req-00042 `.
pub fn marker(index: usize) -> String {
    format!("req-{index:05} ")
}

/// The index of the first `req-NNNNN` marker in any string of `body`.
pub fn find_marker(body: &Value) -> Option<usize> {
    match body {
        Value::String(s) => {
            let at = s.find("req-")?;
            let digits: String = s[at + 4..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        }
        Value::Array(items) => items.iter().find_map(find_marker),
        Value::Object(map) => map.values().find_map(find_marker),
        _ => None,
    }
}

/// What llmock 0.2.2 charges a request against its tokens-per-minute bucket
/// (`ratelimit.requested_tokens`): `max(1, body bytes / 4)` plus the output budget
/// (`max_tokens`, `max_completion_tokens` or `max_output_tokens`, else Gemini's
/// `generationConfig.maxOutputTokens`).
///
/// llmock counts the raw body; the journal keeps it parsed, so its length here is that of
/// the compact JSON it parses into. Every client of this benchmark sends compact JSON
/// (serde_json, as tollgate's transports do), whose length does not depend on key order,
/// so the two agree.
pub fn llmock_charge(body: &Value) -> u64 {
    let bytes = serde_json::to_vec(body).map_or(0, |v| v.len() as u64);
    let budget = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
        .iter()
        .find_map(|k| body.get(k).and_then(Value::as_u64))
        .or_else(|| {
            body.get("generationConfig")
                .and_then(|c| c.get("maxOutputTokens"))
                .and_then(Value::as_u64)
        })
        .unwrap_or(0);
    (bytes / 4).max(1) + budget
}

/// Parses the journal's JSON (`{"count": N, "requests": [...]}`), in arrival order.
pub fn parse_journal(text: &str) -> Result<Vec<JournalRecord>, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("journal: {e}"))?;
    let items = root
        .get("requests")
        .and_then(Value::as_array)
        .ok_or("journal: no `requests` array")?;
    let mut records = items
        .iter()
        .map(|r| {
            let number = |k: &str| {
                r.get(k)
                    .and_then(Value::as_f64)
                    .ok_or_else(|| format!("journal: a record without `{k}`"))
            };
            let text = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
            Ok(JournalRecord {
                seq: number("seq")? as u64,
                provider: text("provider").unwrap_or_default(),
                model: text("model"),
                started_at: number("started_at")?,
                ended_at: number("ended_at")?,
                status: number("status")? as u16,
                fault: text("fault"),
                body: r.get("body").filter(|b| !b.is_null()).cloned(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    records.sort_by_key(|r| r.seq);
    Ok(records)
}

/// What happened to one benchmark request, from its attempts in the journal.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTrace {
    /// Attempts sent.
    pub attempts: u32,
    /// Of them, refused by llmock's rate limiter.
    pub rate_limited: u32,
    /// Of them, other failures (neither 2xx nor a rate-limit 429).
    pub other_errors: u32,
    /// The accepted attempt's `(started_at, ended_at)`.
    pub accepted: Option<(f64, f64)>,
    /// When its first attempt started (llmock's clock); `None` if never sent.
    pub first_start: Option<f64>,
    /// When its last attempt ended (llmock's clock); `None` if never sent.
    pub last_end: Option<f64>,
    /// What llmock charged it in tokens (from any attempt's body).
    pub charge: Option<u64>,
}

/// One client's requests, from the journal: `requests[i]` is request `i`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientTrace {
    /// Per request, in file order.
    pub requests: Vec<RequestTrace>,
    /// Attempts of this client whose body carried no marker of `0..n`.
    pub unmatched: u32,
}

impl ClientTrace {
    /// Groups the attempts of `model` among `records` into `n` requests.
    pub fn from_records(records: &[JournalRecord], model: &str, n: usize) -> ClientTrace {
        let empty = RequestTrace {
            attempts: 0,
            rate_limited: 0,
            other_errors: 0,
            accepted: None,
            first_start: None,
            last_end: None,
            charge: None,
        };
        let mut trace = ClientTrace {
            requests: vec![empty; n],
            unmatched: 0,
        };
        for r in records.iter().filter(|r| r.model.as_deref() == Some(model)) {
            let Some(req) = r.request_index().and_then(|i| trace.requests.get_mut(i)) else {
                trace.unmatched += 1;
                continue;
            };
            req.attempts += 1;
            if r.is_success() {
                req.accepted.get_or_insert((r.started_at, r.ended_at));
            } else if r.is_rate_limited() {
                req.rate_limited += 1;
            } else {
                req.other_errors += 1;
            }
            req.first_start = Some(
                req.first_start
                    .map_or(r.started_at, |s: f64| s.min(r.started_at)),
            );
            req.last_end = Some(req.last_end.map_or(r.ended_at, |e: f64| e.max(r.ended_at)));
            req.charge = req.charge.or(r.charge());
        }
        trace
    }

    /// Attempts sent.
    pub fn sends(&self) -> u32 {
        self.requests.iter().map(|r| r.attempts).sum::<u32>() + self.unmatched
    }

    /// Rate-limit 429s.
    pub fn rate_limited(&self) -> u32 {
        self.requests.iter().map(|r| r.rate_limited).sum()
    }

    /// Other failed attempts.
    pub fn other_errors(&self) -> u32 {
        self.requests.iter().map(|r| r.other_errors).sum()
    }

    /// Requests never accepted.
    pub fn failed(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| r.accepted.is_none())
            .count()
    }

    /// Accepted requests' service times (`ended_at - started_at`), in file order.
    pub fn service_times(&self) -> Vec<f64> {
        self.requests
            .iter()
            .filter_map(|r| r.accepted.map(|(s, e)| e - s))
            .collect()
    }

    /// Each request's completion, seconds after `t0` on llmock's clock: its accepted
    /// answer's end, else (failed) its last attempt's end, else (never sent) `None`.
    pub fn completions(&self, t0: f64) -> Vec<Option<f64>> {
        self.requests
            .iter()
            .map(|r| r.accepted.map(|(_, e)| e).or(r.last_end).map(|e| e - t0))
            .collect()
    }

    /// When the first attempt reached llmock, seconds after `t0`.
    pub fn first_start(&self, t0: f64) -> Option<f64> {
        self.requests
            .iter()
            .filter_map(|r| r.first_start.map(|s| s - t0))
            .reduce(f64::min)
    }

    /// When the last accepted attempt started, seconds after `t0`.
    pub fn last_accepted_start(&self, t0: f64) -> Option<f64> {
        self.requests
            .iter()
            .filter_map(|r| r.accepted.map(|(s, _)| s - t0))
            .reduce(f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn charge_is_compact_body_bytes_over_four_plus_the_budget() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "req-00003 hi"}], "max_tokens": 10});
        let bytes = serde_json::to_vec(&body).unwrap().len() as u64;
        assert_eq!(llmock_charge(&body), bytes / 4 + 10);
        let gemini = json!({"contents": [], "generationConfig": {"maxOutputTokens": 7}});
        let bytes = serde_json::to_vec(&gemini).unwrap().len() as u64;
        assert_eq!(llmock_charge(&gemini), bytes / 4 + 7);
        assert_eq!(llmock_charge(&json!({})), 1);
    }

    #[test]
    fn marker_is_found_anywhere_in_the_body() {
        let body = json!({"contents": [{"parts": [{"text": format!("{}words", marker(42))}]}]});
        assert_eq!(find_marker(&body), Some(42));
        assert_eq!(find_marker(&json!({"messages": []})), None);
    }
}
