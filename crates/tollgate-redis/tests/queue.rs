//! Batch-queue holds on Redis ([`tollgate_redis::RedisQueueLedger`]): the in-process
//! ledger's behaviours against a real server, two ledgers (two connections, as two
//! processes) sharing one account under concurrent holds, expiries on Redis `TIME`, a
//! Redis Cluster, and a Redis that cannot answer (fail closed).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{admin, fresh_prefix, redis_url};
use redis::AsyncCommands;
use tollgate::Error;
use tollgate::limit::{MemoryQueueLedger, QueueAnswer, QueueCaps, QueueLedger};
use tollgate_redis::{RedisClock, RedisConfig, RedisLimiters, RedisQueueLedger};

const DAY: Duration = Duration::from_secs(24 * 3600);

/// A ledger of its own connection on `prefix`, on Redis `TIME`.
fn ledger(url: &str, prefix: &str) -> RedisQueueLedger {
    let config = RedisConfig::new(url).with_key_prefix(prefix);
    RedisLimiters::new(config).unwrap().queue()
}

/// A ledger on fresh keys whose clock is tokio's (paused in these tests).
fn paused_ledger(url: &str) -> RedisQueueLedger {
    let config = RedisConfig::new(url)
        .with_key_prefix(fresh_prefix())
        .with_clock(RedisClock::Tokio {
            epoch: tollgate::clock::now(),
        });
    RedisLimiters::new(config).unwrap().queue()
}

/// A ledger on fresh keys on Redis `TIME`, a connection to look at its keys, and the key
/// of its account `acct`; `None` without a test server.
async fn on_redis_time() -> Option<(RedisQueueLedger, redis::aio::MultiplexedConnection, String)> {
    let url = redis_url()?;
    let ledger = ledger(&url, &fresh_prefix());
    let key = ledger.key("acct");
    Some((ledger, admin(&url).await, key))
}

/// Redis `TIME` in unix ms.
async fn server_ms(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    s * 1000 + us / 1000
}

#[tokio::test(start_paused = true)]
async fn queue_tokens_cap_refuses_a_batch_that_does_not_fit_until_one_is_released() {
    let Some(url) = redis_url() else { return };
    let ledger = paused_ledger(&url);
    let caps = QueueCaps {
        tokens: Some(1_000),
        batches: None,
    };
    assert_eq!(
        ledger.hold("openai:m", "a", 600, caps, DAY).await.unwrap(),
        QueueAnswer::Held
    );
    assert_eq!(
        ledger.hold("openai:m", "b", 500, caps, DAY).await.unwrap(),
        QueueAnswer::Full {
            held_tokens: 600,
            held_batches: 1
        }
    );
    // Another account's queue is its own.
    assert_eq!(
        ledger.hold("openai:n", "b", 500, caps, DAY).await.unwrap(),
        QueueAnswer::Held
    );
    ledger.release("openai:m", "a").await.unwrap();
    assert_eq!(
        ledger.hold("openai:m", "b", 500, caps, DAY).await.unwrap(),
        QueueAnswer::Held
    );
}

#[tokio::test(start_paused = true)]
async fn pending_batches_cap_counts_batches_and_a_lease_held_twice_counts_once() {
    let Some(url) = redis_url() else { return };
    let ledger = paused_ledger(&url);
    let caps = QueueCaps {
        tokens: None,
        batches: Some(2),
    };
    for lease in ["a", "b", "a"] {
        assert_eq!(
            ledger.hold("acct", lease, 10, caps, DAY).await.unwrap(),
            QueueAnswer::Held
        );
    }
    assert_eq!(
        ledger.hold("acct", "c", 10, caps, DAY).await.unwrap(),
        QueueAnswer::Full {
            held_tokens: 20,
            held_batches: 2
        }
    );
}

#[tokio::test(start_paused = true)]
async fn adopted_hold_counts_whatever_the_caps_and_a_hold_lapses_after_its_ttl() {
    let Some(url) = redis_url() else { return };
    let ledger = paused_ledger(&url);
    let caps = QueueCaps {
        tokens: Some(100),
        batches: None,
    };
    ledger.adopt("acct", "old", 500, DAY).await.unwrap();
    assert_eq!(
        ledger.hold("acct", "new", 10, caps, DAY).await.unwrap(),
        QueueAnswer::Full {
            held_tokens: 500,
            held_batches: 1
        }
    );
    tokio::time::advance(DAY - Duration::from_secs(1)).await;
    assert!(matches!(
        ledger.hold("acct", "new", 10, caps, DAY).await.unwrap(),
        QueueAnswer::Full { .. }
    ));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(
        ledger.hold("acct", "new", 10, caps, DAY).await.unwrap(),
        QueueAnswer::Held
    );
    // The lapsed hold is gone from the hash, not only left out of the sum.
    let mut conn = admin(&url).await;
    let leases: Vec<String> = conn.hkeys(ledger.key("acct")).await.unwrap();
    assert_eq!(leases, ["new"]);
}

#[tokio::test(start_paused = true)]
async fn zero_and_absent_caps_answer_as_the_memory_ledger_does() {
    let Some(url) = redis_url() else { return };
    let redis = paused_ledger(&url);
    let memory = MemoryQueueLedger::new();
    let zero_tokens = QueueCaps {
        tokens: Some(0),
        batches: None,
    };
    let zero_batches = QueueCaps {
        tokens: None,
        batches: Some(0),
    };
    let unlimited = QueueCaps::default();
    let steps = [
        ("a", "x", 5, zero_tokens),
        ("a", "y", 0, zero_tokens),
        ("b", "x", 0, zero_batches),
        ("c", "x", u64::from(u32::MAX), unlimited),
        ("c", "y", u64::from(u32::MAX), unlimited),
        ("c", "z", 1, zero_tokens),
    ];
    for (account, lease, tokens, caps) in steps {
        assert_eq!(
            redis.hold(account, lease, tokens, caps, DAY).await.unwrap(),
            memory
                .hold(account, lease, tokens, caps, DAY)
                .await
                .unwrap(),
            "{account} {lease} {tokens} {caps:?}"
        );
    }
}

#[tokio::test]
async fn a_hold_keeps_its_expiry_on_redis_time_and_the_key_lives_as_long_as_its_longest_hold() {
    let Some((ledger, mut conn, key)) = on_redis_time().await else {
        return;
    };
    let hour = Duration::from_secs(3600);
    let caps = QueueCaps::default();

    let before = server_ms(&mut conn).await;
    ledger.hold("acct", "short", 7, caps, hour).await.unwrap();
    ledger.adopt("acct", "long", 9, 2 * hour).await.unwrap();
    let after = server_ms(&mut conn).await;

    for (lease, tokens, ttl) in [("short", 7, hour), ("long", 9, 2 * hour)] {
        let value: String = conn.hget(&key, lease).await.unwrap();
        let (held, expiry) = value.split_once(':').unwrap();
        assert_eq!(held, tokens.to_string());
        let expiry: u64 = expiry.parse().unwrap();
        let ttl = ttl.as_millis() as u64;
        assert!(
            before + ttl <= expiry && expiry <= after + ttl,
            "{lease}: {expiry}"
        );
    }
    // The key ends with the longest hold, measured on the server (to the ms: PTTL rounds).
    let pttl: u64 = conn.pttl(&key).await.unwrap();
    let longest = (2 * hour).as_millis() as u64;
    let now = server_ms(&mut conn).await;
    assert!(
        pttl <= longest && pttl + (now - before) + 1 >= longest,
        "{pttl}"
    );
}

#[tokio::test]
async fn a_hold_whose_expiry_passed_on_redis_time_counts_nothing_and_is_dropped() {
    let Some((ledger, mut conn, key)) = on_redis_time().await else {
        return;
    };
    let now = server_ms(&mut conn).await;
    // One hold that ended a second ago, one that ends in an hour, and a field that is
    // not a hold at all.
    let _: () = conn
        .hset_multiple(
            &key,
            &[
                ("ended", format!("500:{}", now - 1000)),
                ("pending", format!("30:{}", now + 3_600_000)),
                ("junk", "not a hold".to_owned()),
            ],
        )
        .await
        .unwrap();
    let caps = QueueCaps {
        tokens: Some(40),
        batches: None,
    };
    assert_eq!(
        ledger.hold("acct", "new", 20, caps, DAY).await.unwrap(),
        QueueAnswer::Full {
            held_tokens: 30,
            held_batches: 1
        }
    );
    let mut leases: Vec<String> = conn.hkeys(&key).await.unwrap();
    leases.sort();
    assert_eq!(leases, ["pending"]);
    assert_eq!(
        ledger.hold("acct", "new", 10, caps, DAY).await.unwrap(),
        QueueAnswer::Held
    );
}

/// Races `n` holds of `tokens` each on one account from `ledgers` in turn; the number
/// answered [`QueueAnswer::Held`].
async fn race(ledgers: &[RedisQueueLedger], n: usize, tokens: u64, caps: QueueCaps) -> usize {
    let start = Arc::new(tokio::sync::Barrier::new(n));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let ledger = ledgers[i % ledgers.len()].clone();
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                ledger
                    .hold("openai:m", &format!("batch-{i}"), tokens, caps, DAY)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut held = 0;
    for t in tasks {
        if t.await.unwrap() == QueueAnswer::Held {
            held += 1;
        }
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_ledgers_sharing_an_account_never_hold_past_its_caps_under_concurrent_holds() {
    let Some(url) = redis_url() else { return };
    let mut conn = admin(&url).await;

    let prefix = fresh_prefix();
    let ledgers = [ledger(&url, &prefix), ledger(&url, &prefix)];
    let tokens_cap = QueueCaps {
        tokens: Some(1_000),
        batches: None,
    };
    // 150 tokens each: six fit under 1,000.
    assert_eq!(race(&ledgers, 20, 150, tokens_cap).await, 6);
    let holds: Vec<String> = conn.hvals(ledgers[0].key("openai:m")).await.unwrap();
    assert_eq!(holds.len(), 6);
    assert!(holds.iter().all(|h| h.starts_with("150:")), "{holds:?}");

    let prefix = fresh_prefix();
    let ledgers = [ledger(&url, &prefix), ledger(&url, &prefix)];
    let batches_cap = QueueCaps {
        tokens: None,
        batches: Some(4),
    };
    assert_eq!(race(&ledgers, 20, 1, batches_cap).await, 4);
    let count: usize = conn.hlen(ledgers[1].key("openai:m")).await.unwrap();
    assert_eq!(count, 4);
}

#[tokio::test]
async fn a_batch_queue_whose_redis_is_unreachable_fails_closed_naming_the_account() {
    let closed = tollgate_testkit::provider::RefusingPort::bind();
    let url = format!("redis://127.0.0.1:{}/", closed.port());
    let config = RedisConfig::new(url).with_call_timeout(Duration::from_millis(300));
    let ledger = RedisLimiters::new(config).unwrap().queue();
    let caps = QueueCaps::default();
    let results = [
        ledger.hold("openai:m", "a", 1, caps, DAY).await.map(|_| ()),
        ledger.adopt("openai:m", "a", 1, DAY).await,
        ledger.release("openai:m", "a").await,
    ];
    for result in results {
        match result {
            Err(Error::LimiterUnavailable {
                backend, model_id, ..
            }) => {
                assert_eq!(backend, "redis");
                assert!(model_id.contains("openai:m"), "{model_id}");
            }
            other => panic!("expected LimiterUnavailable, got {other:?}"),
        }
    }
}

#[test]
fn an_accounts_holds_are_one_hash_whose_hash_tag_is_the_whole_account() {
    let ledger = RedisLimiters::new(RedisConfig::new("redis://127.0.0.1:1/").with_key_prefix("p"))
        .unwrap()
        .queue();
    assert_eq!(ledger.key("openai:gpt-4o"), "p:{queue:openai:gpt-4o}:holds");
    assert_eq!(ledger.key("a}b"), "p:{queue:a_b}:holds");
}

/// The slot of `key` on the cluster at `url`, as a node says.
async fn cluster_keyslot(url: &str, key: &str) -> u16 {
    let seeds: Vec<String> = url
        .trim_start_matches("redis+cluster://")
        .split(',')
        .map(|s| format!("redis://{s}/"))
        .collect();
    let mut conn = redis::cluster::ClusterClient::new(seeds)
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_queue_holds_on_a_redis_cluster_count_every_ledgers_batches_against_one_account() {
    let Some(url) = tollgate_testkit::peers::url("TOLLGATE_REDIS_CLUSTER_URL") else {
        return;
    };
    let prefix = fresh_prefix();
    // An account off slots 0–5460, where tests/cluster.rs kills a primary.
    let mut account = String::new();
    for i in 0.. {
        account = format!("openai:m{i}");
        let key = format!("{prefix}:{{queue:{account}}}:holds");
        if cluster_keyslot(&url, &key).await > 5460 {
            break;
        }
    }
    let here = ledger(&url, &prefix);
    let there = ledger(&url, &prefix);
    let caps = QueueCaps {
        tokens: Some(1_000),
        batches: Some(2),
    };
    assert_eq!(
        here.hold(&account, "a", 600, caps, DAY).await.unwrap(),
        QueueAnswer::Held
    );
    assert_eq!(
        there.hold(&account, "b", 500, caps, DAY).await.unwrap(),
        QueueAnswer::Full {
            held_tokens: 600,
            held_batches: 1
        }
    );
    there.adopt(&account, "c", 100, DAY).await.unwrap();
    here.release(&account, "a").await.unwrap();
    assert_eq!(
        there.hold(&account, "b", 500, caps, DAY).await.unwrap(),
        QueueAnswer::Held
    );
    assert!(matches!(
        here.hold(&account, "d", 1, caps, DAY).await.unwrap(),
        QueueAnswer::Full {
            held_tokens: 600,
            held_batches: 2
        }
    ));
}
