//! One request of a run: its job (id, retries, priority, the run's spend cap), its
//! reservation waited for where Ctrl-C can still drop it unsent, its call through the
//! pipeline (or the model's fallbacks), and its line written.

use tollgate::clock;
use tollgate::limit::{Admission, Cost, Priority};
use tollgate::pipeline::{DefaultEstimator, FallbackOptions, TokenEstimator};
use tollgate::{EmbeddingPurpose, Error, JobContext, Models, SpendCap};

use super::interrupts::{StopLevel, reached};
use super::lines::{Answer, LineWriter};
use crate::input::{Body, Item};

/// What every request of a run shares.
pub(super) struct Shared {
    pub(super) models: Models,
    pub(super) model_id: String,
    pub(super) fallback: bool,
    pub(super) retries: u32,
    pub(super) priority: Priority,
    pub(super) purpose: EmbeddingPurpose,
    pub(super) cap: Option<SpendCap>,
    /// Whether requests reserve before the pipeline (and so can be dropped unsent).
    pub(super) preadmit: bool,
    pub(super) lines: LineWriter,
}

/// Runs one request and writes its line; false if it was dropped unsent by Ctrl-C.
pub(super) async fn one(shared: &Shared, item: Item, mut stop: StopLevel) -> bool {
    let mut job =
        JobContext::new(item.custom_id.clone(), shared.retries).with_priority(shared.priority);
    if let Some(cap) = &shared.cap {
        job = job.with_spend_cap(cap.clone());
    }
    let started = clock::now();
    if shared.preadmit
        && let Body::Chat(request) = &item.body
        && let Ok(limiter) = shared.models.limiter(&shared.model_id)
    {
        // Wait for the reservation here, where Ctrl-C can drop it unsent; the pipeline
        // takes the grant for the first attempt.
        let entry = shared.models.catalog().get(&shared.model_id).ok();
        let output = entry
            .and_then(|e| e.output_limit(request.sampling_params().max_output_tokens()))
            .unwrap_or(0);
        let cost = Cost::call(DefaultEstimator.estimate_request(request), output);
        let admission = Admission::new(limiter.clone());
        let grant = tokio::select! {
            biased;
            _ = reached(&mut stop, 1) => return false,
            g = admission.admit_with(cost, shared.priority) => g,
        };
        match grant {
            Ok(grant) => job = job.with_admitted(grant),
            Err(e) => {
                shared.lines.write(&item, Err(e), started.elapsed());
                return true;
            }
        }
    } else if *stop.borrow() >= 1 {
        return false;
    }
    let models = shared.models.for_job(job);
    let call = async {
        match &item.body {
            Body::Chat(request) => {
                let client = if shared.fallback {
                    models
                        .chat_with_fallbacks(&shared.model_id, FallbackOptions::default())
                        .await
                } else {
                    models.chat(&shared.model_id).await
                };
                let response = client?.single_response(request).await?;
                Ok(Answer::Chat(response))
            }
            Body::Embed(texts) => {
                let client = models.embeddings(&shared.model_id).await?;
                let vectors = client.embed_batch(texts, shared.purpose).await?;
                Ok(Answer::Embed(
                    vectors.into_iter().map(|v| v.into_vec()).collect(),
                ))
            }
        }
    };
    let result = tokio::select! {
        biased;
        _ = reached(&mut stop, 2) => Err(Error::Cancelled),
        r = call => r,
    };
    shared.lines.write(&item, result, started.elapsed());
    true
}
