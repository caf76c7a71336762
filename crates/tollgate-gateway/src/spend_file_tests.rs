//! [`FileSpendLedger`]'s tests: spend kept across a reopen, written on each settle,
//! holds counted, old days pruned, one ledger per file, a corrupt file refused, and
//! concurrent holds and settles counted exactly once.

use std::sync::Arc;

use super::*;

const CAP: &str = "key:nb daily budget 2026-01-01";

fn ledger_in(dir: &tempfile::TempDir) -> FileSpendLedger {
    FileSpendLedger::open(dir.path().join("spend.json")).unwrap()
}

async fn hold(ledger: &FileSpendLedger, usd: f64, limit: f64) -> Result<(), f64> {
    ledger.hold(CAP, usd, limit).await.unwrap()
}

#[tokio::test]
async fn file_spend_ledger_keeps_what_was_spent_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    hold(&ledger, 0.6, 1.0).await.unwrap();
    ledger.settle(CAP, 0.6, 0.25);
    drop(ledger);

    let reopened = ledger_in(&dir);
    assert!((reopened.spent_usd(CAP) - 0.25).abs() < 1e-12);
    // $0.75 left: a $0.8 worst case no longer fits, a $0.75 one does.
    let left = hold(&reopened, 0.8, 1.0).await.unwrap_err();
    assert!((left - 0.75).abs() < 1e-12, "{left}");
    hold(&reopened, 0.75, 1.0).await.unwrap();
}

#[tokio::test]
async fn file_spend_ledger_writes_each_settle_to_the_file_before_returning() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    hold(&ledger, 0.5, 1.0).await.unwrap();
    ledger.settle(CAP, 0.5, 0.125);
    // Read while the ledger is still open: nothing waits for a drop or a flush.
    let text = fs::read_to_string(ledger.path()).unwrap();
    let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(stored["accounts"][CAP]["spent_usd"], 0.125);
    assert!(!sibling(ledger.path(), "tmp").exists());
}

#[tokio::test]
async fn file_spend_ledger_counts_holds_in_flight_and_releases_them_at_settle() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir);
    hold(&ledger, 0.6, 1.0).await.unwrap();
    let left = hold(&ledger, 0.6, 1.0).await.unwrap_err();
    assert!((left - 0.4).abs() < 1e-12, "{left}");
    // Released unsent: nothing spent, the whole limit free again.
    ledger.settle(CAP, 0.6, 0.0);
    hold(&ledger, 1.0, 1.0).await.unwrap();
    assert_eq!(ledger.spent_usd(CAP), 0.0);
    // Other caps have accounts of their own.
    ledger.hold("other", 1.0, 1.0).await.unwrap().unwrap();
}

#[test]
fn file_spend_ledger_drops_accounts_untouched_for_more_than_two_days_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spend.json");
    fs::write(
        &path,
        r#"{"version": 1, "accounts": {
            "old": {"spent_usd": 1.0, "day": 20000},
            "two days ago": {"spent_usd": 2.0, "day": 20001},
            "today": {"spent_usd": 3.0, "day": 20003}}}"#,
    )
    .unwrap();
    let ledger = FileSpendLedger::open_on(path.clone(), 20_003).unwrap();
    assert_eq!(ledger.spent_usd("old"), 0.0);
    assert_eq!(ledger.spent_usd("two days ago"), 2.0);
    assert_eq!(ledger.spent_usd("today"), 3.0);
    // Written back without it.
    assert!(!fs::read_to_string(&path).unwrap().contains("\"old\""));
}

#[test]
fn file_spend_ledger_refuses_a_second_open_of_its_file_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let first = ledger_in(&dir);
    let e = FileSpendLedger::open(dir.path().join("spend.json")).unwrap_err();
    assert!(matches!(e, SpendFileError::InUse { .. }), "{e}");
    drop(first);
    ledger_in(&dir);
}

#[test]
fn file_spend_ledger_refuses_a_corrupt_file_and_leaves_it_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spend.json");
    fs::write(&path, "{\"accounts\": 3").unwrap();
    let e = FileSpendLedger::open(&path).unwrap_err();
    assert!(matches!(e, SpendFileError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("remove it"), "{e}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"accounts\": 3");
}

#[test]
fn file_spend_ledger_that_cannot_write_its_file_fails_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let e = FileSpendLedger::open(dir.path().join("missing-dir").join("spend.json")).unwrap_err();
    assert!(matches!(e, SpendFileError::Io { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn file_spend_ledger_counts_concurrent_holds_and_settles_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Arc::new(ledger_in(&dir));
    // 40 tasks race to hold $0.3 of $10: exactly 33 fit.
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let ledger = ledger.clone();
            tokio::spawn(async move { ledger.hold(CAP, 0.3, 10.0).await.unwrap().is_ok() })
        })
        .collect();
    let mut held = 0;
    for task in tasks {
        held += usize::from(task.await.unwrap());
    }
    assert_eq!(held, 33);
    // They settle at once, each at $0.25.
    let tasks: Vec<_> = (0..held)
        .map(|_| {
            let ledger = ledger.clone();
            tokio::spawn(async move { ledger.settle(CAP, 0.3, 0.25) })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    drop(ledger);
    let reopened = ledger_in(&dir);
    assert!((reopened.spent_usd(CAP) - 33.0 * 0.25).abs() < 1e-9);
}
