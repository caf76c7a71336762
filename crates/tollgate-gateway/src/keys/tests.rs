//! Tests of the keys file: reading, checking, finding a key by its secret.

use super::*;

#[test]
fn authenticate_finds_each_of_many_keys_by_its_secret_and_no_key_for_a_guess() {
    let hash = |secret: &str| -> [u8; 32] { Sha256::digest(secret.as_bytes()).into() };
    let keys = Keys::new(
        (0..5000)
            .map(|i| VirtualKey::new(format!("k{i}"), hash(&format!("secret-{i}"))))
            .collect(),
    )
    .unwrap();
    for i in [0, 1, 2500, 4999] {
        let found = keys
            .authenticate(&format!("secret-{i}"))
            .map(VirtualKey::id);
        assert_eq!(found, Some(format!("k{i}").as_str()));
    }
    assert!(keys.authenticate("secret-5000").is_none());
    assert!(keys.authenticate("").is_none());
    let twice = Keys::new(vec![
        VirtualKey::new("a", hash("s")),
        VirtualKey::new("b", hash("t")),
        VirtualKey::new("c", hash("s")),
    ]);
    assert!(
        matches!(twice, Err(KeysError::DuplicateSecret { ref id, ref other }) if id == "c" && other == "a"),
        "{twice:?}"
    );
}

fn file(secret: &str) -> String {
    format!(
        "[[keys]]\nid = \"nb\"\nsecret_sha256 = \"{}\"\nmodels = [\"demo\"]\n\
         priority = \"interactive\"\nmax_wait_ms = 1500\n\n\
         [[keys]]\nid = \"batch\"\nsecret_sha256 = \"{}\"\npriority = \"batch\"\n",
        hash_secret(secret),
        hash_secret("other-secret")
    )
}

#[test]
fn keys_file_authenticates_by_hash_and_reads_models_priority_and_max_wait() {
    let keys = Keys::from_toml_str(&file("s3cret")).unwrap();
    let key = keys.authenticate("s3cret").unwrap();
    assert_eq!(key.id(), "nb");
    assert_eq!(key.priority(), Priority::Interactive);
    assert_eq!(key.max_wait(), Some(Duration::from_millis(1500)));
    assert!(key.allows("demo") && !key.allows("demo-slow"));
    let batch = keys.authenticate("other-secret").unwrap();
    assert_eq!((batch.id(), batch.priority()), ("batch", Priority::Batch));
    assert!(batch.allows("anything"));
    assert!(keys.authenticate("s3cre").is_none());
    assert!(keys.authenticate("").is_none());
}

#[test]
fn keys_file_refuses_bad_hashes_priorities_and_repeated_ids_naming_the_key() {
    let bad_hash = "[[keys]]\nid = \"a\"\nsecret_sha256 = \"abc\"\n";
    let e = Keys::from_toml_str(bad_hash).unwrap_err();
    assert!(
        matches!(e, KeysError::Invalid { ref id, .. } if id == "a"),
        "{e}"
    );
    let h = hash_secret("x");
    let bad_priority =
        format!("[[keys]]\nid = \"b\"\nsecret_sha256 = \"{h}\"\npriority = \"urgent\"\n");
    let e = Keys::from_toml_str(&bad_priority).unwrap_err();
    assert!(
        matches!(e, KeysError::Invalid { ref id, .. } if id == "b"),
        "{e}"
    );
    let twice = format!(
        "[[keys]]\nid = \"c\"\nsecret_sha256 = \"{h}\"\n[[keys]]\nid = \"c\"\nsecret_sha256 = \"{h}\"\n"
    );
    assert!(matches!(
        Keys::from_toml_str(&twice),
        Err(KeysError::Invalid { .. })
    ));
}

#[test]
fn keys_file_reads_rate_caps_and_daily_budget_and_refuses_a_negative_budget() {
    let h = hash_secret("x");
    let text = format!(
        "[[keys]]\nid = \"a\"\nsecret_sha256 = \"{h}\"\nrpm = 30\nbudget_usd_per_day = 2.5\n\
         [[keys]]\nid = \"b\"\nsecret_sha256 = \"{}\"\ntpm = 1000\n",
        hash_secret("y")
    );
    let keys = Keys::from_toml_str(&text).unwrap();
    let a = keys.authenticate("x").unwrap();
    assert_eq!((a.caps().rpm, a.caps().tpm), (30, 0));
    assert_eq!(a.budget_usd_per_day(), Some(2.5));
    let b = keys.authenticate("y").unwrap();
    assert_eq!(
        (b.caps().rpm, b.caps().tpm, b.budget_usd_per_day()),
        (0, 1000, None)
    );
    let negative =
        format!("[[keys]]\nid = \"n\"\nsecret_sha256 = \"{h}\"\nbudget_usd_per_day = -1\n");
    let e = Keys::from_toml_str(&negative).unwrap_err();
    assert!(
        matches!(e, KeysError::Invalid { ref id, ref reason } if id == "n" && reason.contains("budget_usd_per_day")),
        "{e}"
    );
}

#[test]
fn keys_file_refuses_two_keys_with_one_secret_in_any_case_naming_both() {
    let h = hash_secret("shared");
    let text = format!(
        "[[keys]]\nid = \"first\"\nsecret_sha256 = \"{h}\"\n\
         [[keys]]\nid = \"second\"\nsecret_sha256 = \"{}\"\n",
        h.to_uppercase()
    );
    let e = Keys::from_toml_str(&text).unwrap_err();
    assert!(
        matches!(&e, KeysError::DuplicateSecret { id, other } if id == "second" && other == "first"),
        "{e}"
    );
    // Neither the hash nor the secret is shown.
    let shown = format!("{e} {e:?}");
    assert!(
        !shown.contains(&h) && !shown.contains(&h.to_uppercase()),
        "{shown}"
    );
    // Built in code, too.
    let e = Keys::new(vec![
        VirtualKey::new("a", [3; 32]),
        VirtualKey::new("b", [3; 32]),
    ])
    .unwrap_err();
    assert!(matches!(e, KeysError::DuplicateSecret { .. }), "{e}");
}

#[test]
fn keys_file_refuses_an_unknown_field_naming_the_key_and_the_field() {
    let h = hash_secret("x");
    let text = format!(
        "[[keys]]\nid = \"fine\"\nsecret_sha256 = \"{}\"\n\
         [[keys]]\nid = \"typo\"\nsecret_sha256 = \"{h}\"\nbudget_usd_per_dya = 5.0\n",
        hash_secret("y")
    );
    let e = Keys::from_toml_str(&text).unwrap_err();
    assert!(
        matches!(&e, KeysError::Invalid { id, reason } if id == "typo" && reason.contains("budget_usd_per_dya")),
        "{e}"
    );
    assert!(e.to_string().starts_with("key `typo`:"), "{e}");
    // A key without an id is named by its place; a stray top-level field is refused.
    let e = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"a\"\nsecret_sha256 = \"{h}\"\n[[keys]]\nsecret_sha256 = \"{h}\"\n"
    ))
    .unwrap_err();
    assert!(
        matches!(&e, KeysError::Invalid { id, reason } if id == "#2" && reason.contains("id")),
        "{e}"
    );
    let e = Keys::from_toml_str("budget = 1\n").unwrap_err();
    assert!(matches!(e, KeysError::Parse(_)), "{e}");
}

#[test]
fn virtual_key_debug_shows_neither_secret_nor_hash() {
    let key = VirtualKey::new("nb", [7u8; 32]);
    let shown = format!("{key:?}");
    assert!(shown.contains("nb"));
    assert!(!shown.contains(&hex::encode([7u8; 32])) && !shown.contains("[7, 7"));
}
