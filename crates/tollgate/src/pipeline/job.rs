//! A job: the retry budget and spend cap shared by every call made on its behalf.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::limit::{Admission, AdmissionGrant, LimiterBackend, Priority};

/// A unit of work (a workflow run, a request from a user) that may make many calls.
///
/// Every call made through `Models::for_job(job)` draws retries from the job's one
/// `upstream_retries` budget and counts against its spend cap, so a job that hits a bad
/// patch cannot multiply its retries by its number of calls.
///
/// A job carries a [`Priority`] class (default [`Priority::Default`]): while its calls
/// wait on a model's limiter, a higher class is granted first (see
/// [`crate::limit::TokenBucketRateLimiter::reserve_with`]).
#[derive(Clone)]
pub struct JobContext {
    id: Arc<str>,
    retries_left: Arc<AtomicU32>,
    spend_cap: Option<SpendCap>,
    priority: Priority,
    admission: Option<Admission>,
    admitted: Arc<Mutex<Option<AdmissionGrant>>>,
    max_wait: Option<Duration>,
    limiter: Option<Arc<dyn LimiterBackend>>,
    queue_closed: Option<watch::Receiver<bool>>,
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("id", &self.id)
            .field("retries_left", &self.retries_left())
            .field("spend_cap", &self.spend_cap)
            .field("priority", &self.priority)
            .field("admission", &self.admission)
            .field("max_wait", &self.max_wait)
            .field("limiter", &self.limiter.as_ref().map(|l| l.model_id()))
            .field(
                "queue_closed",
                &self.queue_closed.as_ref().map(|c| *c.borrow()),
            )
            .finish()
    }
}

impl JobContext {
    /// A job with `upstream_retries` retries to share among its calls.
    pub fn new(id: impl Into<String>, upstream_retries: u32) -> Self {
        JobContext {
            id: Arc::from(id.into()),
            retries_left: Arc::new(AtomicU32::new(upstream_retries)),
            spend_cap: None,
            priority: Priority::Default,
            admission: None,
            admitted: Arc::default(),
            max_wait: None,
            limiter: None,
            queue_closed: None,
        }
    }

    /// Ends the job's waits in the queue when `closed` turns true (a server shutting
    /// down): an attempt still waiting for a reservation then fails with
    /// [`Error::QueueClosed`], nothing sent, and so does every later one. Attempts
    /// already sent are not touched.
    pub fn with_queue_closed(mut self, closed: watch::Receiver<bool>) -> Self {
        self.queue_closed = Some(closed);
        self
    }

    /// Completes once the job's queue is closed; never without one (or once the sender
    /// is gone without closing it).
    pub(crate) async fn queue_closed(&self) {
        let Some(mut closed) = self.queue_closed.clone() else {
            return std::future::pending().await;
        };
        if closed.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Gives the job buckets of its own (a gateway key's `rpm`/`tpm`, say): every
    /// attempt of its calls reserves its cost there first, then on the model's limiter,
    /// and settles there as on the model's. Built by a [`crate::limit::LimiterFactory`],
    /// they are shared by every process on the same backend (Redis) like a model's.
    /// The job's [`JobContext::max_wait`] bounds the wait on them too, together with the
    /// wait on the model's.
    pub fn with_limiter(mut self, limiter: Arc<dyn LimiterBackend>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// The job's own buckets, if any ([`JobContext::with_limiter`]).
    pub fn limiter(&self) -> Option<&Arc<dyn LimiterBackend>> {
        self.limiter.as_ref()
    }

    /// Bounds how long each of the job's calls may wait, all its waits together: on the
    /// job's own buckets and the model's (or its deployments', or an admission), in the
    /// queue (a grant pushed back meanwhile too) and before its retries, from the call's
    /// start, not counting the time its attempts spend with the provider. A call that
    /// cannot be sent within it fails with [`Error::WouldWait`] as soon as that is
    /// known, holding nothing: when a limiter's estimate passes what is left, when a
    /// retry's wait (an upstream `retry-after`, a back-off) would, and at the deadline
    /// for a queued grant pushed back, with the limiter's fresh estimate. A gateway
    /// answers 429 with that `retry-after` rather than hold a client. Each request of a
    /// call that sends several (embeddings batches, decision questions) has the whole
    /// bound; the calls of one fallback chain share one.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// The longest each of the job's calls may wait ([`JobContext::with_max_wait`]), if
    /// bounded.
    pub fn max_wait(&self) -> Option<Duration> {
        self.max_wait
    }

    /// Makes every attempt of the job's calls on `admission`'s model reserve through it:
    /// the model reservation together with the admission's other resources, all or
    /// nothing, held for the attempt. A retry re-admits with fresh resources.
    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Hands the job a grant the caller already waited for: the job's next call on the
    /// grant's model takes it for its first attempt instead of reserving again (the
    /// grant is resized to the call's own cost). Its other resources are held for that
    /// attempt and then released.
    pub fn with_admitted(self, grant: AdmissionGrant) -> Self {
        *self.admitted.lock().unwrap_or_else(|e| e.into_inner()) = Some(grant);
        self
    }

    /// The admission every attempt on its model reserves through, if any.
    pub(crate) fn admission_for(&self, model_id: &str) -> Option<&Admission> {
        self.admission.as_ref().filter(|a| a.model_id() == model_id)
    }

    /// Takes the grant handed over with [`JobContext::with_admitted`], if it is for
    /// `model_id`.
    pub(crate) fn take_admitted(&self, model_id: &str) -> Option<AdmissionGrant> {
        let mut slot = self.admitted.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|g| g.model_id() == model_id) {
            slot.take()
        } else {
            None
        }
    }

    /// Sets the priority class of every call made for the job.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The job's priority class ([`Priority::Default`] unless set).
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Counts every call of the job against `cap`.
    pub fn with_spend_cap(mut self, cap: SpendCap) -> Self {
        self.spend_cap = Some(cap);
        self
    }

    /// The job id (recorded with every call).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Retries left in the job's budget.
    pub fn retries_left(&self) -> u32 {
        self.retries_left.load(Ordering::SeqCst)
    }

    /// The job's spend cap, if any.
    pub fn spend_cap(&self) -> Option<&SpendCap> {
        self.spend_cap.as_ref()
    }

    /// Takes one retry from the budget; false when it is spent.
    pub(crate) fn take_retry(&self) -> bool {
        self.retries_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// Where a shared [`SpendCap`]'s account lives, so that many processes count against one
/// cap (Redis: `tollgate_redis::RedisSpend`). The cap's name is its account's key.
#[async_trait::async_trait]
pub trait SpendLedger: Send + Sync + fmt::Debug {
    /// Holds `usd` on cap `cap` of `limit_usd` if it fits beside what every process has
    /// spent and holds: `Ok(Ok(()))`; else `Ok(Err(remaining_usd))`. `Err` when the
    /// ledger cannot answer (fail closed: the call is not sent).
    async fn hold(&self, cap: &str, usd: f64, limit_usd: f64) -> Result<Result<(), f64>>;

    /// Releases `held_usd` of cap `cap` and counts `spent_usd` as spent. Synchronous (it
    /// runs when a hold is dropped): a shared ledger sends it on a task of its own.
    fn settle(&self, cap: &str, held_usd: f64, spent_usd: f64);
}

/// A spend limit in USD for a workflow. Each call reserves its worst-case cost before it
/// is sent and settles at its actual cost afterwards; a call that cannot fit fails with
/// [`Error::SpendCapExceeded`] before anything is sent. A cap made with
/// [`SpendCap::shared`] keeps its account in a [`SpendLedger`] that many processes share.
#[derive(Clone)]
pub struct SpendCap {
    name: Arc<str>,
    limit_usd: f64,
    state: Arc<Mutex<CapState>>,
    ledger: Option<Arc<dyn SpendLedger>>,
}

#[derive(Debug, Default)]
struct CapState {
    spent_usd: f64,
    held_usd: f64,
}

impl fmt::Debug for SpendCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("SpendCap")
            .field("name", &self.name)
            .field("limit_usd", &self.limit_usd)
            .field("spent_usd", &state.spent_usd)
            .field("held_usd", &state.held_usd)
            .field("ledger", &self.ledger)
            .finish()
    }
}

impl SpendCap {
    /// A cap named `name` of `limit_usd`.
    pub fn new(name: impl Into<String>, limit_usd: f64) -> Self {
        SpendCap {
            name: Arc::from(name.into()),
            limit_usd,
            state: Arc::default(),
            ledger: None,
        }
    }

    /// A cap named `name` of `limit_usd` whose account is in `ledger`, shared by every
    /// process that makes a cap of the same name on it. [`SpendCap::spent_usd`],
    /// [`SpendCap::held_usd`] and [`SpendCap::remaining_usd`] then tell this process's
    /// part only.
    pub fn shared(name: impl Into<String>, limit_usd: f64, ledger: Arc<dyn SpendLedger>) -> Self {
        SpendCap {
            ledger: Some(ledger),
            ..SpendCap::new(name, limit_usd)
        }
    }

    /// The cap's name (a shared cap's account key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Holds `worst_case_usd` for a call about to be sent, or refuses: on the shared
    /// ledger when the cap has one (one round trip), else in this process as
    /// [`SpendCap::hold`]. What the pipeline calls.
    pub async fn reserve(&self, worst_case_usd: f64) -> Result<SpendHold> {
        let Some(ledger) = &self.ledger else {
            return self.hold(worst_case_usd);
        };
        if let Err(remaining) = ledger
            .hold(&self.name, worst_case_usd, self.limit_usd)
            .await?
        {
            return Err(self.exceeded(remaining, worst_case_usd));
        }
        self.lock().held_usd += worst_case_usd;
        Ok(SpendHold {
            cap: Some(self.clone()),
            held_usd: worst_case_usd,
            sent: false,
        })
    }

    /// What has been spent (settled calls).
    pub fn spent_usd(&self) -> f64 {
        self.lock().spent_usd
    }

    /// What is held for calls in flight (their worst case).
    pub fn held_usd(&self) -> f64 {
        self.lock().held_usd
    }

    /// What is left for new calls.
    pub fn remaining_usd(&self) -> f64 {
        let s = self.lock();
        (self.limit_usd - s.spent_usd - s.held_usd).max(0.0)
    }

    /// Refuses a call whose `worst_case_usd` would not fit even if every call in flight
    /// spent nothing (what is held aside): such a call need not wait for the limiter.
    pub fn check_fits_unheld(&self, worst_case_usd: f64) -> Result<()> {
        let s = self.lock();
        let remaining = self.limit_usd - s.spent_usd;
        if worst_case_usd > remaining + 1e-12 {
            return Err(self.exceeded(remaining, worst_case_usd));
        }
        Ok(())
    }

    fn exceeded(&self, remaining: f64, needed: f64) -> Error {
        Error::SpendCapExceeded {
            cap: self.name.to_string(),
            limit_usd: self.limit_usd,
            remaining_usd: remaining.max(0.0),
            needed_usd: needed,
        }
    }

    /// Holds `worst_case_usd` for a call about to be sent, or refuses, in this process
    /// alone (a shared cap's ledger is not asked: use [`SpendCap::reserve`]).
    pub fn hold(&self, worst_case_usd: f64) -> Result<SpendHold> {
        let mut s = self.lock();
        let remaining = self.limit_usd - s.spent_usd - s.held_usd;
        // A tolerance for float rounding, far below a millionth of a cent.
        if worst_case_usd > remaining + 1e-12 {
            return Err(self.exceeded(remaining, worst_case_usd));
        }
        s.held_usd += worst_case_usd;
        Ok(SpendHold {
            cap: Some(self.clone()),
            held_usd: worst_case_usd,
            sent: false,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CapState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A call's hold on a spend cap. Settle it at the actual cost. Dropped unsettled it is
/// released at zero if its request was never sent, and settled at the worst case once
/// it was (the provider may have billed it).
#[derive(Debug)]
pub struct SpendHold {
    cap: Option<SpendCap>,
    held_usd: f64,
    sent: bool,
}

impl SpendHold {
    /// A hold on no cap.
    pub(crate) fn none() -> Self {
        SpendHold {
            cap: None,
            held_usd: 0.0,
            sent: false,
        }
    }

    /// Records that the request left: from now on, dropping settles at the worst case.
    pub fn mark_sent(&mut self) {
        self.sent = true;
    }

    /// Releases the hold and records `actual_usd` as spent.
    pub fn settle(mut self, actual_usd: f64) {
        self.finish(actual_usd);
    }

    fn finish(&mut self, actual_usd: f64) {
        if let Some(cap) = self.cap.take() {
            {
                let mut s = cap.lock();
                s.held_usd = (s.held_usd - self.held_usd).max(0.0);
                s.spent_usd += actual_usd;
            }
            if let Some(ledger) = &cap.ledger {
                ledger.settle(&cap.name, self.held_usd, actual_usd);
            }
        }
    }
}

impl Drop for SpendHold {
    fn drop(&mut self) {
        let charge = if self.sent { self.held_usd } else { 0.0 };
        self.finish(charge);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_cap_refuses_a_call_that_cannot_fit_and_settles_at_actual_cost() {
        let cap = SpendCap::new("workflow", 1.0);
        let hold = cap.hold(0.6).unwrap();
        assert!((cap.remaining_usd() - 0.4).abs() < 1e-12);
        let err = cap.hold(0.5).unwrap_err();
        assert!(matches!(err, Error::SpendCapExceeded { .. }), "{err}");
        hold.settle(0.1);
        assert!((cap.spent_usd() - 0.1).abs() < 1e-12);
        drop(cap.hold(0.2).unwrap()); // never sent: released at zero
        assert!((cap.spent_usd() - 0.1).abs() < 1e-12);
        let mut sent = cap.hold(0.2).unwrap();
        sent.mark_sent();
        drop(sent); // sent, outcome unknown: the worst case is spent
        assert!((cap.spent_usd() - 0.3).abs() < 1e-12);
        assert_eq!(cap.held_usd(), 0.0);
        cap.hold(0.5).unwrap().settle(0.5);
        assert!((cap.remaining_usd() - 0.2).abs() < 1e-12);
    }

    /// A ledger two caps share, as two processes would share Redis.
    #[derive(Debug, Default)]
    struct Book(Mutex<std::collections::HashMap<String, (f64, f64)>>);

    #[async_trait::async_trait]
    impl SpendLedger for Book {
        async fn hold(&self, cap: &str, usd: f64, limit: f64) -> Result<Result<(), f64>> {
            let mut book = self.0.lock().unwrap();
            let (spent, held) = book.entry(cap.to_owned()).or_default();
            let remaining = limit - *spent - *held;
            if usd > remaining + 1e-12 {
                return Ok(Err(remaining));
            }
            *held += usd;
            Ok(Ok(()))
        }
        fn settle(&self, cap: &str, held_usd: f64, spent_usd: f64) {
            let mut book = self.0.lock().unwrap();
            let (spent, held) = book.entry(cap.to_owned()).or_default();
            *held -= held_usd;
            *spent += spent_usd;
        }
    }

    #[tokio::test]
    async fn shared_caps_of_one_name_count_against_one_account_in_their_ledger() {
        let book: Arc<dyn SpendLedger> = Arc::new(Book::default());
        let here = SpendCap::shared("daily", 1.0, book.clone());
        let there = SpendCap::shared("daily", 1.0, book.clone());
        let other = SpendCap::shared("other", 1.0, book.clone());
        let hold = here.reserve(0.6).await.unwrap();
        // Another process's cap of the same name sees the hold.
        let err = there.reserve(0.5).await.unwrap_err();
        assert!(
            matches!(err, Error::SpendCapExceeded { remaining_usd, .. } if (remaining_usd - 0.4).abs() < 1e-12),
            "{err}"
        );
        other.reserve(0.9).await.unwrap().settle(0.9);
        hold.settle(0.3);
        there.reserve(0.7).await.unwrap().settle(0.7);
        assert!(there.reserve(0.01).await.is_err());
        // Each cap's own figures are its process's part.
        assert!((here.spent_usd() - 0.3).abs() < 1e-12);
        assert!((there.spent_usd() - 0.7).abs() < 1e-12);
        // Dropped unsent: released on the ledger too.
        drop(other.reserve(0.05).await.unwrap());
        assert!(other.reserve(0.1).await.is_ok());
    }

    #[test]
    fn job_priority_defaults_to_default_and_is_kept_by_clones() {
        let job = JobContext::new("j", 0);
        assert_eq!(job.priority(), Priority::Default);
        let urgent = job.with_priority(Priority::Interactive);
        assert_eq!(urgent.priority(), Priority::Interactive);
        assert_eq!(urgent.clone().priority(), Priority::Interactive);
        let batch = JobContext::new("b", 0).with_priority(Priority::Batch);
        assert_eq!(batch.priority(), Priority::Batch);
    }

    #[test]
    fn job_max_wait_is_unbounded_by_default_and_kept_by_clones() {
        let job = JobContext::new("j", 0);
        assert_eq!(job.max_wait(), None);
        let bounded = job.with_max_wait(Duration::from_millis(250));
        assert_eq!(bounded.clone().max_wait(), Some(Duration::from_millis(250)));
    }

    #[test]
    fn job_retry_budget_is_shared_and_runs_out() {
        let job = JobContext::new("j", 2);
        let clone = job.clone();
        assert!(job.take_retry());
        assert!(clone.take_retry());
        assert!(!job.take_retry());
        assert_eq!(clone.retries_left(), 0);
    }
}
