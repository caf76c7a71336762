//! A run's requests grouped into batches: within the API's caps (requests, bytes, as the
//! catalog may lower them) and the model's enqueued-token limit; what no batch can
//! carry (a stream, an embeddings line, an encoding refusal, a request larger than a
//! batch) set aside with its error before anything is uploaded.

use tollgate::Error;
use tollgate::pipeline::{DefaultEstimator, TokenEstimator};
use tollgate::provider::batch::BatchItem;

use super::BatchRun;
use crate::input::{Body, Item};

/// A batch ready to submit: its requests, encoded, and its estimated input tokens.
pub(super) struct Chunk {
    pub(super) ids: Vec<String>,
    pub(super) lines: Vec<Vec<u8>>,
    pub(super) tokens: u64,
    /// Its worst-case cost at the batch price.
    pub(super) worst_usd: f64,
}

/// Groups `items` into batches within the API's caps and the enqueued-token limit;
/// those that cannot go (a stream, an encoding refusal, too large alone) with their
/// error.
pub(super) fn chunk(run: &BatchRun, items: &[&Item]) -> (Vec<Chunk>, Vec<(String, Error)>) {
    let api = run.transport.caps();
    let max_requests = run
        .max_requests
        .map_or(api.max_requests, |m| (m as usize).min(api.max_requests))
        .max(1);
    let max_bytes = run
        .max_bytes
        .map_or(api.max_bytes, |m| m.min(api.max_bytes));
    let max_tokens = run.caps.tokens;
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut refused = Vec::new();
    let empty = || Chunk {
        ids: Vec::new(),
        lines: Vec::new(),
        tokens: 0,
        worst_usd: 0.0,
    };
    let mut current = empty();
    let mut bytes = 0u64;
    for item in items {
        let Body::Chat(request) = &item.body else {
            refused.push((
                item.custom_id.clone(),
                Error::InvalidRequest {
                    field: "url".into(),
                    reason: "only chat requests go through `--via batch`; send embeddings \
                             with `--via live`"
                        .into(),
                },
            ));
            continue;
        };
        if item.stream {
            refused.push((
                item.custom_id.clone(),
                Error::InvalidRequest {
                    field: "stream".into(),
                    reason: "a provider's batch API cannot stream an answer; remove \
                             `\"stream\": true` or send the line with `--via live`"
                        .into(),
                },
            ));
            continue;
        }
        let batch_item = BatchItem {
            custom_id: item.custom_id.clone(),
            request: (**request).clone(),
        };
        let line = match run.transport.encode(&batch_item) {
            Ok(line) => line,
            Err(e) => {
                refused.push((item.custom_id.clone(), e));
                continue;
            }
        };
        let tokens = DefaultEstimator.estimate_request(request);
        let size = line.len() as u64 + 1;
        if size > max_bytes || max_tokens.is_some_and(|t| tokens > t) {
            refused.push((
                item.custom_id.clone(),
                Error::InvalidRequest {
                    field: "request".into(),
                    reason: format!(
                        "is {size} bytes and about {tokens} input tokens, more than one batch \
                         takes ({max_bytes} bytes{}); send it with `--via live`",
                        max_tokens.map_or(String::new(), |t| format!(", {t} enqueued tokens"))
                    ),
                },
            ));
            continue;
        }
        let full = current.ids.len() >= max_requests
            || bytes + size > max_bytes
            || max_tokens.is_some_and(|t| current.tokens + tokens > t);
        if full && !current.ids.is_empty() {
            chunks.push(std::mem::replace(&mut current, empty()));
            bytes = 0;
        }
        current.ids.push(item.custom_id.clone());
        current.lines.push(line);
        current.tokens += tokens;
        current.worst_usd += run.worst_usd(request, tokens);
        bytes += size;
    }
    if !current.ids.is_empty() {
        chunks.push(current);
    }
    (chunks, refused)
}
