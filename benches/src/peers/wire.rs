//! What the baselines send to llmock, by hand, in each dialect; and the seeded workload
//! every client of a row sends.

use std::time::Duration;

use serde_json::{Value, json};
use tollgate_sim::SimRng;

use super::journal::marker;

/// The API a row speaks, and where llmock serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenAI chat completions under `/v1` (provider `openai`).
    OpenAi,
    /// Anthropic messages under `/anthropic/v1/messages` (provider `anthropic-direct`).
    Anthropic,
    /// Gemini `generateContent` under `/gemini/v1beta` (provider `gemini`).
    Gemini,
}

impl Dialect {
    /// All three.
    pub const ALL: [Dialect; 3] = [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini];

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "OpenAI",
            Dialect::Anthropic => "Anthropic",
            Dialect::Gemini => "Gemini",
        }
    }

    /// A short lower-case tag, for model names.
    pub fn tag(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
        }
    }

    /// tollgate's provider key for it.
    pub fn provider(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic-direct",
            Dialect::Gemini => "gemini",
        }
    }

    /// The `base_url` option of the tollgate provider, for llmock at `llmock`.
    pub fn base_url(self, llmock: &str) -> String {
        match self {
            Dialect::OpenAi => llmock.to_owned(),
            Dialect::Anthropic => format!("{llmock}/anthropic"),
            Dialect::Gemini => format!("{llmock}/gemini"),
        }
    }
}

/// One client's address on llmock: its dialect, its API key (llmock's buckets are per
/// key) and its model name (how the journal tells clients apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The dialect.
    pub dialect: Dialect,
    /// llmock's base URL, `http://127.0.0.1:PORT`.
    pub llmock: String,
    /// The API key sent.
    pub api_key: String,
    /// The model name sent.
    pub model: String,
}

/// One request of the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The user prompt (starting with its [`marker`]).
    pub prompt: String,
    /// `max_tokens`.
    pub max_tokens: u64,
}

const WORDS: [&str; 16] = [
    "the", "bucket", "refills", "at", "a", "steady", "rate", "and", "every", "request", "waits",
    "for", "its", "turn", "before", "sending",
];

/// `n` requests with prompts of `words.0..=words.1` words (seeded) and `max_tokens`.
pub fn workload(n: usize, words: (u64, u64), max_tokens: u64, seed: u64) -> Vec<Job> {
    let mut rng = SimRng::new(seed);
    (0..n)
        .map(|i| {
            let count = rng.range(words.0, words.1) as usize;
            let text: Vec<&str> = (0..count)
                .map(|_| WORDS[rng.range(0, WORDS.len() as u64 - 1) as usize])
                .collect();
            Job {
                prompt: format!("{}{}", marker(i), text.join(" ")),
                max_tokens,
            }
        })
        .collect()
}

/// The URL, headers and JSON body of `job` for `target`, as the provider's API wants it.
pub fn raw_request(target: &Target, job: &Job) -> (String, Vec<(&'static str, String)>, Value) {
    let base = &target.llmock;
    match target.dialect {
        Dialect::OpenAi => (
            format!("{base}/v1/chat/completions"),
            vec![("authorization", format!("Bearer {}", target.api_key))],
            json!({
                "model": target.model,
                "messages": [{"role": "user", "content": job.prompt}],
                "max_tokens": job.max_tokens,
            }),
        ),
        Dialect::Anthropic => (
            format!("{base}/anthropic/v1/messages"),
            vec![
                ("x-api-key", target.api_key.clone()),
                ("anthropic-version", "2023-06-01".to_owned()),
            ],
            json!({
                "model": target.model,
                "max_tokens": job.max_tokens,
                "messages": [{"role": "user", "content": job.prompt}],
            }),
        ),
        Dialect::Gemini => (
            format!(
                "{base}/gemini/v1beta/models/{}:generateContent",
                target.model
            ),
            vec![("x-goog-api-key", target.api_key.clone())],
            json!({
                "contents": [{"role": "user", "parts": [{"text": job.prompt}]}],
                "generationConfig": {"maxOutputTokens": job.max_tokens},
            }),
        ),
    }
}

/// How llmock answered one raw attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawAnswer {
    /// 2xx.
    Ok,
    /// 429, with `retry-after-ms` (else `retry-after`) if sent.
    RateLimited(Option<Duration>),
    /// Another status, or no answer (`None`).
    Failed(Option<u16>),
}

/// An HTTP client for loopback (no proxy).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client")
}

/// Sends `job` once (compact JSON, as llmock's charge assumes).
pub async fn send(http: &reqwest::Client, target: &Target, job: &Job) -> RawAnswer {
    let (url, headers, body) = raw_request(target, job);
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap_or_default());
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let Ok(response) = request.send().await else {
        return RawAnswer::Failed(None);
    };
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let retry_after = header("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| header("retry-after"))
        .map(Duration::from_secs_f64);
    // Read the body, so the connection is reused.
    let _ = response.bytes().await;
    match status {
        200..=299 => RawAnswer::Ok,
        429 => RawAnswer::RateLimited(retry_after),
        other => RawAnswer::Failed(Some(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::journal::{find_marker, llmock_charge};

    #[test]
    fn workload_is_seeded_and_marked() {
        let a = workload(5, (10, 20), 50, 1);
        assert_eq!(a, workload(5, (10, 20), 50, 1));
        for (i, job) in a.iter().enumerate() {
            assert!(job.prompt.starts_with(&marker(i)));
            let words = job.prompt.split(' ').count() - 1;
            assert!((10..=20).contains(&words), "{words}");
        }
    }

    #[test]
    fn every_dialect_carries_the_marker_and_the_budget() {
        let job = &workload(3, (5, 5), 64, 9)[2];
        for dialect in Dialect::ALL {
            let target = Target {
                dialect,
                llmock: "http://127.0.0.1:1".into(),
                api_key: "k".into(),
                model: "m".into(),
            };
            let (url, _, body) = raw_request(&target, job);
            assert!(url.starts_with("http://127.0.0.1:1/"));
            assert_eq!(find_marker(&body), Some(2));
            let bytes = serde_json::to_vec(&body).unwrap().len() as u64;
            assert_eq!(llmock_charge(&body), bytes / 4 + 64);
        }
    }
}
