//! Unit tests: keys, capacities, secrets kept out of errors.

use tollgate::limit::Burst;

use crate::buckets::capacity;
use crate::config::{key_for, shown};

#[test]
fn keys_are_cluster_safe_with_the_model_as_hash_tag() {
    assert_eq!(key_for("tollgate", "gpt-4o"), "tollgate:{gpt-4o}:lim");
    assert_eq!(key_for("p", "a}b"), "p:{a_b}:lim");
}

#[test]
fn urls_in_errors_hide_the_password() {
    assert_eq!(
        shown("redis://user:secret@host:6379/0"),
        "redis://***@host:6379/0"
    );
    assert_eq!(shown("redis://127.0.0.1:1/"), "redis://127.0.0.1:1/");
}

#[test]
fn burst_capacity_matches_the_in_process_limiter() {
    assert_eq!(capacity(Burst::FullMinute, 60), 60);
    assert_eq!(capacity(Burst::Seconds(1), 60), 1);
    assert_eq!(capacity(Burst::Seconds(1), 30), 1);
    assert_eq!(capacity(Burst::Seconds(10), 600), 100);
}
