//! Spend caps on Redis ([`tollgate_redis::RedisSpend`]): two processes' caps of one name
//! count against one account (a hold in one is seen by the other; settles land once),
//! and a Redis that cannot be reached refuses the call, closed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{admin, fresh_prefix, redis_url};
use redis::AsyncCommands;
use tollgate::pipeline::SpendLedger;
use tollgate::{Error, SpendCap};
use tollgate_redis::{RedisConfig, RedisLimiters};

/// A process's ledger: its own connection, the shared prefix.
fn ledger(url: &str, prefix: &str) -> Arc<dyn SpendLedger> {
    let limiters = RedisLimiters::new(RedisConfig::new(url).with_key_prefix(prefix)).unwrap();
    Arc::new(limiters.spend())
}

/// Waits (bounded) until the account's `held` field is `nanos`: settles run on tasks.
async fn until_held(url: &str, key: &str, nanos: i64) {
    let mut conn = admin(url).await;
    for _ in 0..200 {
        let held: Option<i64> = conn.hget(key, "held").await.unwrap();
        if held.unwrap_or(0) == nanos {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("held never reached {nanos}");
}

#[tokio::test]
async fn spend_caps_on_one_redis_count_every_processs_calls_against_one_account() {
    let Some(url) = redis_url() else { return };
    let prefix = fresh_prefix();
    let here = SpendCap::shared("key:nb daily budget", 1.0, ledger(&url, &prefix));
    let there = SpendCap::shared("key:nb daily budget", 1.0, ledger(&url, &prefix));
    let key = RedisLimiters::new(RedisConfig::new(url.as_str()).with_key_prefix(prefix.as_str()))
        .unwrap()
        .spend()
        .key("key:nb daily budget");

    let hold = here.reserve(0.6).await.unwrap();
    // The other process sees the hold: $0.40 is left for it.
    match there.reserve(0.5).await {
        Err(Error::SpendCapExceeded { remaining_usd, .. }) => {
            assert!((remaining_usd - 0.4).abs() < 1e-9, "{remaining_usd}")
        }
        other => panic!("expected SpendCapExceeded, got {other:?}"),
    }
    hold.settle(0.25);
    until_held(&url, &key, 0).await;
    let mut conn = admin(&url).await;
    let spent: i64 = conn.hget(&key, "spent").await.unwrap();
    assert_eq!(spent, 250_000_000);
    // $0.75 is left for anyone now.
    there.reserve(0.75).await.unwrap().settle(0.75);
    until_held(&url, &key, 0).await;
    assert!(here.reserve(0.01).await.is_err());
    // A hold dropped unsent is released on Redis too.
    let other = SpendCap::shared("another cap", 1.0, ledger(&url, &prefix));
    drop(other.reserve(0.9).await.unwrap());
    let other_key = key.replace("key:nb daily budget", "another cap");
    until_held(&url, &other_key, 0).await;
    other.reserve(1.0).await.unwrap().settle(0.0);
    // The account expires when left alone.
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!(ttl > 0, "{ttl}");
}

#[tokio::test]
async fn a_shared_spend_cap_whose_redis_is_unreachable_refuses_closed_naming_the_cap() {
    let closed = tollgate_testkit::provider::RefusingPort::bind();
    let url = format!("redis://127.0.0.1:{}/", closed.port());
    let limiters =
        RedisLimiters::new(RedisConfig::new(url).with_call_timeout(Duration::from_millis(300)))
            .unwrap();
    let cap = SpendCap::shared("key:nb daily budget", 1.0, Arc::new(limiters.spend()));
    match cap.reserve(0.1).await {
        Err(Error::LimiterUnavailable {
            backend, model_id, ..
        }) => {
            assert_eq!(backend, "redis");
            assert!(model_id.contains("key:nb daily budget"), "{model_id}");
        }
        other => panic!("expected LimiterUnavailable, got {other:?}"),
    }
    assert_eq!(cap.held_usd(), 0.0);
}
