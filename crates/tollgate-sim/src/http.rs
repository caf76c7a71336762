//! A [`SimProvider`] served over HTTP on 127.0.0.1, speaking the OpenAI chat-completions
//! wire format, so that `openai-compatible` (with `base_url`) or any other client can be
//! measured against exact limits.
//!
//! `POST …/chat/completions` with `messages` and `max_tokens` (or
//! `max_completion_tokens`): the input is estimated as tollgate estimates it, the call
//! made on the simulated provider; an accepted call answers 200 with a completion and its
//! `usage`, a refused one 429 (`rate_limit_exceeded`, with `retry-after` in whole
//! seconds) or 529 (`overloaded_error`). With [`SimHeaderStyle::OpenAi`] in the
//! provider's configuration every answer carries OpenAI's rate-limit headers
//! (`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, tokens being input tokens, the
//! reset a duration such as `1250ms`); otherwise only `x-ratelimit-limit-requests` and
//! `x-ratelimit-limit-tokens`. Streaming is not simulated (400).
//!
//! The server has no timing of its own: each request is one [`SimProvider`] call, so the
//! provider's network delay ([`SimConfig::network_delay`](crate::SimConfig::network_delay),
//! added to loopback's) passes before it is admitted and its headers are computed, as
//! llmock admits a request after its configured latency, and its answer time
//! ([`SimConfig::answer_time`](crate::SimConfig::answer_time)) before it answers;
//! requests on separate connections are served concurrently.

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;

use crate::{
    SimDimension, SimHeaderStyle, SimHeaders, SimProvider, SimRefusal, SimRequest, SimReset,
    SimStats,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tollgate::provider::{
    DefaultEstimator, MESSAGE_OVERHEAD_TOKENS, REQUEST_OVERHEAD_TOKENS, TokenEstimator,
};

/// Output limit assumed when a request sets none.
pub const DEFAULT_MAX_TOKENS: u64 = 256;

/// A running server. Dropping it stops accepting connections.
pub struct SimServer {
    addr: SocketAddr,
    sim: SimProvider,
    task: JoinHandle<()>,
}

impl fmt::Debug for SimServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimServer")
            .field("addr", &self.addr)
            .field("stats", &self.sim.stats())
            .finish()
    }
}

impl SimServer {
    /// The address it listens on (127.0.0.1, a free port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to give `openai-compatible` (`base_url`), without `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The simulated provider behind it.
    pub fn sim(&self) -> &SimProvider {
        &self.sim
    }

    /// Its counters: calls, accepted, 429s, 529s.
    pub fn stats(&self) -> SimStats {
        self.sim.stats()
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `sim` on 127.0.0.1 at a free port, until the returned server is dropped.
/// `output_tokens` is what each accepted call produces (capped at its `max_tokens`).
pub async fn serve(sim: SimProvider, output_tokens: u64) -> std::io::Result<SimServer> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let served = sim.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let sim = served.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| handle(sim.clone(), output_tokens, req));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(SimServer { addr, sim, task })
}

fn reply(status: StatusCode, sim: &SimProvider, body: Value) -> Response<Full<Bytes>> {
    let limits = sim.config().limits;
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert("content-type", "application/json".parse().expect("static"));
    if limits.rpm > 0 {
        headers.insert("x-ratelimit-limit-requests", limits.rpm.into());
    }
    if limits.input_tpm > 0 {
        headers.insert("x-ratelimit-limit-tokens", limits.input_tpm.into());
    }
    response
}

/// Adds OpenAI's rate-limit headers for what the provider reported.
fn rate_limit_headers(
    response: &mut Response<Full<Bytes>>,
    sim: &SimProvider,
    headers: &SimHeaders,
) {
    if sim.config().headers != SimHeaderStyle::OpenAi {
        return;
    }
    let out = response.headers_mut();
    for h in &headers.limits {
        let suffix = match h.dimension {
            SimDimension::Requests => "requests",
            SimDimension::InputTokens => "tokens",
            SimDimension::OutputTokens => continue,
        };
        let reset = match h.reset {
            SimReset::In(d) => d,
            SimReset::At(at) => at.saturating_sub(sim.elapsed()),
        };
        let pairs = [
            (format!("x-ratelimit-limit-{suffix}"), h.limit.to_string()),
            (
                format!("x-ratelimit-remaining-{suffix}"),
                h.remaining.to_string(),
            ),
            (
                format!("x-ratelimit-reset-{suffix}"),
                format!("{}ms", reset.as_millis()),
            ),
        ];
        for (name, value) in pairs {
            if let (Ok(name), Ok(value)) = (
                hyper::header::HeaderName::from_bytes(name.as_bytes()),
                hyper::header::HeaderValue::from_str(&value),
            ) {
                out.insert(name, value);
            }
        }
    }
}

fn error(
    status: StatusCode,
    sim: &SimProvider,
    kind: &str,
    message: &str,
) -> Response<Full<Bytes>> {
    reply(
        status,
        sim,
        json!({"error": {"message": message, "type": kind, "code": kind}}),
    )
}

/// Input tokens of a chat-completions body, as tollgate's default estimator counts them.
fn estimate_input(body: &Value) -> u64 {
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let text: u64 = messages
        .iter()
        .map(|m| match &m["content"] {
            Value::String(s) => DefaultEstimator.estimate_text(s),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .map(|s| DefaultEstimator.estimate_text(s))
                .sum(),
            _ => 0,
        })
        .sum();
    REQUEST_OVERHEAD_TOKENS + MESSAGE_OVERHEAD_TOKENS * messages.len() as u64 + text
}

async fn handle(
    sim: SimProvider,
    output_tokens: u64,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != hyper::Method::POST || !req.uri().path().ends_with("/chat/completions") {
        return Ok(error(
            StatusCode::NOT_FOUND,
            &sim,
            "not_found",
            "only POST /v1/chat/completions is simulated",
        ));
    }
    let Ok(bytes) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &sim,
            "invalid_request_error",
            "unreadable body",
        ));
    };
    let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &sim,
            "invalid_request_error",
            "body is not JSON",
        ));
    };
    if body["stream"].as_bool() == Some(true) {
        return Ok(error(
            StatusCode::BAD_REQUEST,
            &sim,
            "invalid_request_error",
            "streaming is not simulated",
        ));
    }
    let max_tokens = body["max_completion_tokens"]
        .as_u64()
        .or_else(|| body["max_tokens"].as_u64())
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let input = estimate_input(&body);
    let (outcome, headers) = sim
        .call_with_headers(SimRequest::new(input, max_tokens, output_tokens))
        .await;
    let mut response = answer(&sim, &body, max_tokens, outcome);
    rate_limit_headers(&mut response, &sim, &headers);
    Ok(response)
}

fn answer(
    sim: &SimProvider,
    body: &Value,
    max_tokens: u64,
    outcome: Result<crate::SimAnswer, SimRefusal>,
) -> Response<Full<Bytes>> {
    match outcome {
        Ok(answer) => {
            let text = vec!["sim"; answer.output_tokens as usize].join(" ");
            let finish = if answer.output_tokens >= max_tokens {
                "length"
            } else {
                "stop"
            };
            reply(
                StatusCode::OK,
                sim,
                json!({
                    "id": format!("chatcmpl-sim-{}", answer.id),
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"].as_str().unwrap_or("sim"),
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish,
                    }],
                    "usage": {
                        "prompt_tokens": answer.input_tokens,
                        "completion_tokens": answer.output_tokens,
                        "total_tokens": answer.input_tokens + answer.output_tokens,
                    },
                }),
            )
        }
        Err(SimRefusal::RateLimited { retry_after }) => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                sim,
                "rate_limit_exceeded",
                "Rate limit reached (simulated).",
            );
            if let Some(after) = retry_after {
                let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
                response.headers_mut().insert("retry-after", secs.into());
            }
            response
        }
        Err(SimRefusal::Overloaded) => error(
            StatusCode::from_u16(529).expect("529 is a valid status"),
            sim,
            "overloaded_error",
            "Overloaded (simulated).",
        ),
    }
}
