//! A scripted batch API for `--via batch`'s tests: each batch ends at its second poll
//! and answers every request, with knobs for the cases under test.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::provider::batch::{
    BatchCaps, BatchCounts, BatchHandle, BatchItem, BatchOutcome, BatchPhase, BatchStatus,
    BatchTransport,
};
use tollgate::{Block, Error, LlmResponse, ProviderError, ResponseBody, StopReason, Usage};

/// One batch at the scripted API.
#[derive(Debug, Clone)]
pub(super) struct Submitted {
    pub(super) label: String,
    pub(super) ids: Vec<String>,
    pub(super) polls: u32,
    pub(super) cancelled: bool,
}

/// A batch API that ends each batch at its second poll and answers every line, with
/// knobs for the cases under test.
#[derive(Debug, Default)]
pub(super) struct Script {
    pub(super) batches: Mutex<Vec<Submitted>>,
    /// Fail the first N batches as a whole with a queue-limit failure.
    pub(super) fail_for_queue: AtomicU64,
    /// Leave these ids out of the results (expired).
    pub(super) drop_ids: Vec<String>,
    /// Answer these ids with a refusal (a content filter).
    pub(super) refuse_ids: Vec<String>,
    /// Answer the first N submissions with a 429 asking for 90 s.
    pub(super) refuse_submits: AtomicU64,
    /// When each submission was tried, on tokio's clock.
    pub(super) submit_times: Mutex<Vec<tokio::time::Instant>>,
    /// The most input tokens pending at once, as the API saw them.
    pub(super) max_pending_lines: Mutex<usize>,
    pub(super) max_requests: usize,
}

impl Script {
    pub(super) fn new(max_requests: usize) -> Arc<Script> {
        Arc::new(Script {
            max_requests,
            ..Script::default()
        })
    }

    pub(super) fn submitted(&self) -> Vec<Submitted> {
        self.batches.lock().unwrap().clone()
    }

    fn pending_lines(&self) -> usize {
        self.batches
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.polls < 2 && !b.cancelled)
            .map(|b| b.ids.len())
            .sum()
    }
}

fn answer(id: &str, stop: StopReason) -> LlmResponse {
    LlmResponse::new(ResponseBody::new(
        "m-1",
        vec![Block::text(format!("answer to {id}"))],
        stop,
        Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            ..Usage::default()
        },
    ))
    .unwrap()
}

/// The scripted API as a transport (the script stays shared with the test).
#[derive(Debug)]
pub(super) struct Api(pub(super) Arc<Script>);

impl std::ops::Deref for Api {
    type Target = Script;
    fn deref(&self) -> &Script {
        &self.0
    }
}

#[async_trait::async_trait]
impl BatchTransport for Api {
    fn caps(&self) -> BatchCaps {
        BatchCaps {
            max_requests: self.max_requests,
            max_bytes: 1 << 20,
        }
    }

    fn encode(&self, item: &BatchItem) -> tollgate::Result<Vec<u8>> {
        if item.custom_id.contains(' ') {
            return Err(Error::InvalidRequest {
                field: "custom_id".into(),
                reason: "must not hold a space".into(),
            });
        }
        Ok(item.custom_id.clone().into_bytes())
    }

    async fn submit(&self, lines: &[Vec<u8>], label: &str) -> tollgate::Result<BatchHandle> {
        self.submit_times
            .lock()
            .unwrap()
            .push(tollgate::clock::now());
        if self
            .refuse_submits
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |f| f.checked_sub(1),
            )
            .is_ok()
        {
            return Err(Error::Provider(ProviderError::RateLimited {
                retry_after: Some(Duration::from_secs(90)),
            }));
        }
        let mut batches = self.batches.lock().unwrap();
        batches.push(Submitted {
            label: label.into(),
            ids: lines
                .iter()
                .map(|l| String::from_utf8(l.clone()).unwrap())
                .collect(),
            polls: 0,
            cancelled: false,
        });
        let id = format!("b{}", batches.len());
        drop(batches);
        let pending = self.pending_lines();
        let mut max = self.max_pending_lines.lock().unwrap();
        *max = (*max).max(pending);
        Ok(BatchHandle {
            id,
            input_file: None,
        })
    }

    async fn status(&self, handle: &BatchHandle) -> tollgate::Result<BatchStatus> {
        let Ok(n) = handle.id[1..].parse::<usize>() else {
            return Err(Error::ProviderRequest(tollgate::ProviderRequestError::new(
                404,
                format!("no batch `{}`", handle.id),
            )));
        };
        let mut batches = self.batches.lock().unwrap();
        let b = &mut batches[n - 1];
        b.polls += 1;
        let ended = b.polls >= 2 || b.cancelled;
        let failure = if ended
            && self
                .fail_for_queue
                .fetch_update(
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                    |f| f.checked_sub(1),
                )
                .is_ok()
        {
            Some(Error::Provider(ProviderError::RateLimited {
                retry_after: None,
            }))
        } else {
            None
        };
        Ok(BatchStatus {
            phase: if ended {
                BatchPhase::Ended
            } else {
                BatchPhase::Running
            },
            counts: BatchCounts {
                total: b.ids.len() as u64,
                ..BatchCounts::default()
            },
            failure,
        })
    }

    async fn results(&self, handle: &BatchHandle) -> tollgate::Result<Vec<BatchOutcome>> {
        let n: usize = handle.id[1..].parse().unwrap();
        let b = self.batches.lock().unwrap()[n - 1].clone();
        if b.cancelled {
            return Ok(Vec::new());
        }
        Ok(b.ids
            .iter()
            .filter(|id| !self.drop_ids.contains(id))
            .map(|id| BatchOutcome {
                custom_id: id.clone(),
                result: Ok(answer(
                    id,
                    if self.refuse_ids.contains(id) {
                        StopReason::ContentFilter
                    } else {
                        StopReason::EndTurn
                    },
                )),
            })
            .collect())
    }

    async fn cancel(&self, handle: &BatchHandle) -> tollgate::Result<()> {
        let n: usize = handle.id[1..].parse().unwrap();
        self.batches.lock().unwrap()[n - 1].cancelled = true;
        Ok(())
    }

    async fn find(&self, label: &str) -> tollgate::Result<Option<BatchHandle>> {
        let batches = self.batches.lock().unwrap();
        Ok(batches
            .iter()
            .position(|b| b.label == label)
            .map(|i| BatchHandle {
                id: format!("b{}", i + 1),
                input_file: None,
            }))
    }
}
