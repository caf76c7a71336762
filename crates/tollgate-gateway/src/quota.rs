//! Each virtual key's own limits: its `rpm`/`tpm` caps, as buckets built by the same
//! [`LimiterFactory`] as the models' (so `--redis` shares them across replicas), and its
//! spend budget per UTC day, as a pipeline [`SpendCap`] renewed when the day changes,
//! its account in a [`SpendLedger`] when one is given (Redis, shared by replicas; or a
//! [`FileSpendLedger`](crate::FileSpendLedger), kept across restarts).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use tollgate::limit::{LimiterBackend, LimiterConfig, LimiterFactory, TokenBucketRateLimiter};
use tollgate::pipeline::SpendLedger;
use tollgate::{JobContext, SpendCap};

use crate::keys::{Keys, KeysError, VirtualKey};

/// A day, in seconds.
const DAY: u64 = 24 * 60 * 60;

/// Every key's caps and budget, by key id, and where they were built (for a reload).
#[derive(Debug, Default)]
pub(crate) struct KeyQuotas {
    by_id: HashMap<String, KeyQuota>,
    /// The factory of the keys' buckets (`None`: in this process).
    factory: Option<Arc<dyn LimiterFactory>>,
    /// The ledger of the keys' budgets (`None`: in this process).
    ledger: Option<Arc<dyn SpendLedger>>,
}

#[derive(Debug, Default)]
struct KeyQuota {
    /// What the key's buckets and budget were built for.
    caps: tollgate::catalog::Limits,
    budget_usd: Option<f64>,
    limiter: Option<Arc<dyn LimiterBackend>>,
    budget: Option<Arc<DailyBudget>>,
}

impl KeyQuotas {
    /// The caps and budgets of `keys`, the caps' buckets built by `factory`, the budgets'
    /// accounts in `ledger` (else in this process). Fails naming the key whose buckets
    /// the factory cannot build.
    pub(crate) fn build(
        keys: &Keys,
        factory: Arc<dyn LimiterFactory>,
        ledger: Option<Arc<dyn SpendLedger>>,
    ) -> Result<Self, KeysError> {
        KeyQuotas {
            factory: Some(factory),
            ledger,
            ..KeyQuotas::default()
        }
        .reloaded(keys)
    }

    /// The caps and budgets of `keys`, all in this process.
    pub(crate) fn in_process(keys: &Keys) -> Self {
        // Buckets in this process are built by no factory, and cannot fail.
        KeyQuotas::default().reloaded(keys).unwrap_or_default()
    }

    /// The caps and budgets of `keys`, on the same factory and ledger as these: a key
    /// whose caps and budget are what they were keeps its buckets (their level and
    /// queue) and its budget (today's spend); any other gets new ones. Fails naming the
    /// key whose buckets the factory cannot build.
    pub(crate) fn reloaded(&self, keys: &Keys) -> Result<Self, KeysError> {
        let mut by_id = HashMap::new();
        for key in keys.iter() {
            let (caps, budget_usd) = (key.caps(), key.budget_usd_per_day());
            let old = self
                .by_id
                .get(key.id())
                .filter(|old| old.caps == caps && old.budget_usd == budget_usd);
            let quota = match old {
                Some(old) => KeyQuota {
                    caps,
                    budget_usd,
                    limiter: old.limiter.clone(),
                    budget: old.budget.clone(),
                },
                None => KeyQuota {
                    caps,
                    budget_usd,
                    limiter: self.limiter_for(key)?,
                    budget: budget_usd
                        .map(|usd| Arc::new(DailyBudget::new(key.id(), usd, self.ledger.clone()))),
                },
            };
            by_id.insert(key.id().to_owned(), quota);
        }
        Ok(KeyQuotas {
            by_id,
            factory: self.factory.clone(),
            ledger: self.ledger.clone(),
        })
    }

    /// New buckets for `key`'s caps, if it has any.
    fn limiter_for(&self, key: &VirtualKey) -> Result<Option<Arc<dyn LimiterBackend>>, KeysError> {
        let caps = key.caps();
        if caps == tollgate::catalog::Limits::default() {
            return Ok(None);
        }
        // The key's caps are ours, not a provider's: no throttle on 429s and no
        // allowance for a provider's late first arrival.
        let config = LimiterConfig::new(limiter_id(key), caps)
            .with_adaptive(false)
            .with_arrival_allowance(Duration::ZERO);
        match &self.factory {
            None => Ok(Some(Arc::new(TokenBucketRateLimiter::new(config)))),
            Some(factory) => factory
                .build(&config)
                .map(Some)
                .map_err(|e| KeysError::Limiter {
                    id: key.id().to_owned(),
                    source: Box::new(e),
                }),
        }
    }

    /// `job` with `key`'s buckets and today's budget, when it has them.
    pub(crate) fn apply(&self, key: &VirtualKey, mut job: JobContext) -> JobContext {
        let Some(quota) = self.by_id.get(key.id()) else {
            return job;
        };
        if let Some(limiter) = &quota.limiter {
            job = job.with_limiter(limiter.clone());
        }
        if let Some(budget) = &quota.budget {
            job = job.with_spend_cap(budget.on(today()));
        }
        job
    }

    /// Every key's own buckets (for the queue-depth metric).
    pub(crate) fn limiters(&self) -> impl Iterator<Item = &Arc<dyn LimiterBackend>> {
        self.by_id.values().filter_map(|q| q.limiter.as_ref())
    }

    /// The key's own buckets, if it has caps.
    pub(crate) fn limiter(&self, key_id: &str) -> Option<&Arc<dyn LimiterBackend>> {
        self.by_id.get(key_id)?.limiter.as_ref()
    }

    /// The key's daily budget, if it has one.
    pub(crate) fn budget(&self, key_id: &str) -> Option<&DailyBudget> {
        self.by_id.get(key_id)?.budget.as_deref()
    }
}

/// The id a key's buckets go by (in errors, snapshots and Redis keys).
fn limiter_id(key: &VirtualKey) -> String {
    format!("key:{}", key.id())
}

/// Days since the Unix epoch, UTC.
pub(crate) fn today() -> u64 {
    tollgate::clock::wall_now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / DAY)
}

/// A key's spend budget per UTC day: one [`SpendCap`] a day, named
/// `key:<id> daily budget <YYYY-MM-DD>` (a shared ledger's account key). Calls in flight
/// when the day changes settle on the day they started on.
#[derive(Debug)]
pub(crate) struct DailyBudget {
    name: String,
    limit_usd: f64,
    ledger: Option<Arc<dyn SpendLedger>>,
    current: Mutex<Option<(u64, SpendCap)>>,
}

impl DailyBudget {
    fn new(key_id: &str, limit_usd: f64, ledger: Option<Arc<dyn SpendLedger>>) -> Self {
        DailyBudget {
            name: format!("key:{key_id} daily budget"),
            limit_usd,
            ledger,
            current: Mutex::new(None),
        }
    }

    /// The budget a day, in USD.
    pub(crate) fn limit_usd(&self) -> f64 {
        self.limit_usd
    }

    /// The cap of `day` (days since the epoch): the same one all day, a fresh one the
    /// first time a later day is asked for.
    pub(crate) fn on(&self, day: u64) -> SpendCap {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        match &*current {
            Some((d, cap)) if *d >= day => cap.clone(),
            _ => {
                let name = format!("{} {}", self.name, civil_date(day));
                let cap = match &self.ledger {
                    Some(ledger) => SpendCap::shared(name, self.limit_usd, ledger.clone()),
                    None => SpendCap::new(name, self.limit_usd),
                };
                *current = Some((day, cap.clone()));
                cap
            }
        }
    }
}

/// `days` since 1970-01-01 as `YYYY-MM-DD` (the proleptic Gregorian calendar; Howard
/// Hinnant's `civil_from_days`).
pub(crate) fn civil_date(days: u64) -> String {
    let z = i64::try_from(days).unwrap_or(i64::MAX / 2) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_date_names_the_utc_day() {
        assert_eq!(super::civil_date(0), "1970-01-01");
        assert_eq!(super::civil_date(11_016), "2000-02-29");
        assert_eq!(super::civil_date(20_423), "2025-12-01");
        assert_eq!(super::civil_date(20_788), "2026-12-01");
    }

    use super::*;

    #[test]
    fn daily_budget_keeps_one_cap_a_day_and_starts_afresh_the_next_day() {
        let budget = DailyBudget::new("nb", 1.0, None);
        let monday = budget.on(20_000);
        monday.hold(0.75).unwrap().settle(0.75);
        // Same day: the same cap, with what was spent.
        let again = budget.on(20_000);
        assert!((again.remaining_usd() - 0.25).abs() < 1e-12);
        assert!(again.hold(0.5).is_err());
        // A call that started yesterday does not renew the cap.
        assert!((budget.on(19_999).remaining_usd() - 0.25).abs() < 1e-12);
        // The next day: the whole budget again.
        let tuesday = budget.on(20_001);
        assert!((tuesday.remaining_usd() - 1.0).abs() < 1e-12);
        assert!((monday.remaining_usd() - 0.25).abs() < 1e-12);
    }

    #[test]
    fn key_quotas_build_buckets_only_for_keys_with_caps() {
        let keys = Keys::new(vec![
            VirtualKey::new("capped", [1; 32]).with_caps(60, 0),
            VirtualKey::new("free", [2; 32]).with_budget_usd_per_day(3.0),
        ])
        .unwrap();
        let quotas =
            KeyQuotas::build(&keys, Arc::new(tollgate::limit::InProcessLimiters), None).unwrap();
        assert_eq!(quotas.limiter("capped").unwrap().model_id(), "key:capped");
        assert!(quotas.limiter("free").is_none());
        let free = keys.iter().find(|k| k.id() == "free").unwrap();
        let job = quotas.apply(free, JobContext::new("j", 0));
        assert!(job.spend_cap().is_some() && job.limiter().is_none());
    }

    /// A factory that cannot build anything (a backend that refuses its config).
    #[derive(Debug)]
    struct Refusing;

    impl LimiterFactory for Refusing {
        fn build(&self, config: &LimiterConfig) -> tollgate::Result<Arc<dyn LimiterBackend>> {
            Err(tollgate::Error::LimiterUnavailable {
                backend: "refusing".into(),
                model_id: config.model_id.clone(),
                source: "no".into(),
            })
        }
    }

    #[test]
    fn key_quotas_name_the_key_whose_buckets_the_factory_cannot_build() {
        let keys = Keys::new(vec![
            VirtualKey::new("uncapped", [1; 32]),
            VirtualKey::new("capped", [2; 32]).with_caps(60, 0),
        ])
        .unwrap();
        let e = KeyQuotas::build(&keys, Arc::new(Refusing), None).unwrap_err();
        assert!(
            matches!(&e, KeysError::Limiter { id, .. } if id == "capped"),
            "{e}"
        );
    }
}
