//! What each virtual key spent today, by model: the figures `GET /v1/tollgate/key`
//! answers with, fed by the same call records as the metrics. Counted in this process
//! from the UTC day's first call it saw (a restart, or another replica, starts from
//! nothing); a key's budget, which a shared ledger keeps across both, is read from the
//! budget itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Today's spend by key and model, in USD; a new UTC day starts every figure afresh.
#[derive(Debug, Default)]
pub(crate) struct SpentToday {
    tally: Mutex<Tally>,
}

#[derive(Debug, Default)]
struct Tally {
    /// Days since the epoch the figures are of.
    day: u64,
    by_key: HashMap<String, BTreeMap<String, f64>>,
}

impl SpentToday {
    /// Adds a call of `model` by `key` that cost `usd`, settled on `day`.
    pub(crate) fn add(&self, day: u64, key: &str, model: &str, usd: f64) {
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        if day > tally.day {
            tally.day = day;
            tally.by_key.clear();
        } else if day < tally.day {
            // Settled on a day already over (the day turned while it ran): that day's
            // figures are gone, and today's are not its.
            return;
        }
        let models = match tally.by_key.get_mut(key) {
            Some(models) => models,
            None => tally.by_key.entry(key.to_owned()).or_default(),
        };
        match models.get_mut(model) {
            Some(spent) => *spent += usd,
            None => {
                models.insert(model.to_owned(), usd);
            }
        }
    }

    /// What `key` spent on `day`, by model (nothing for a day other than the tally's).
    pub(crate) fn of(&self, day: u64, key: &str) -> BTreeMap<String, f64> {
        let tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        if tally.day != day {
            return BTreeMap::new();
        }
        tally.by_key.get(key).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::SpentToday;

    #[test]
    fn spent_today_adds_by_key_and_model_and_starts_afresh_on_a_new_day() {
        let spent = SpentToday::default();
        spent.add(10, "a", "m1", 0.25);
        spent.add(10, "a", "m1", 0.5);
        spent.add(10, "a", "m2", 1.0);
        spent.add(10, "b", "m1", 2.0);
        let a = spent.of(10, "a");
        assert_eq!(a.get("m1"), Some(&0.75));
        assert_eq!(a.get("m2"), Some(&1.0));
        assert_eq!(spent.of(10, "b").get("m1"), Some(&2.0));
        assert!(spent.of(10, "c").is_empty());
        // A new day: yesterday's figures are not today's, and a late settle of
        // yesterday's call does not count today.
        spent.add(11, "a", "m2", 0.125);
        spent.add(10, "a", "m1", 9.0);
        let a = spent.of(11, "a");
        assert_eq!(a.get("m2"), Some(&0.125));
        assert_eq!(a.get("m1"), None);
        assert!(spent.of(10, "a").is_empty());
    }
}
