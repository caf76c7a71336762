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

#[test]
fn one_url_is_one_node_and_seeds_or_the_cluster_scheme_a_cluster() {
    use crate::target::Target;
    let one = |u: &str| Target::Single(u.to_owned());
    let cluster = |u: &[&str]| Target::Cluster(u.iter().map(|s| (*s).to_owned()).collect());
    assert_eq!(Target::parse("redis://h:1/"), Ok(one("redis://h:1/")));
    assert_eq!(
        Target::parse("redis+cluster://h:7000"),
        Ok(cluster(&["redis://h:7000"]))
    );
    assert_eq!(
        Target::parse("redis://a:7000, redis://b:7001"),
        Ok(cluster(&["redis://a:7000", "redis://b:7001"]))
    );
    // A bare seed takes the first one's scheme and credentials.
    assert_eq!(
        Target::parse("rediss+cluster://:pw@a:7000,b:7001"),
        Ok(cluster(&["rediss://:pw@a:7000", "rediss://:pw@b:7001"]))
    );
    let bad = Target::parse("redis://:secret@a:1,").unwrap_err();
    assert!(!bad.contains("secret"), "{bad}");
    assert!(Target::parse("a:1").is_err());
    assert!(Target::parse("http://a:1").is_err());
}

#[test]
fn cluster_urls_in_errors_hide_every_password() {
    assert_eq!(
        shown("redis://:a@h:1,redis://:b@k:2"),
        "redis://***@h:1,redis://***@k:2"
    );
}
