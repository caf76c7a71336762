//! Credential stores: secrets never print, lookups happen on every call.

use super::*;

#[test]
fn secret_debug_and_display_are_redacted() {
    let s = Secret::new("sk-live-123");
    assert_eq!(format!("{s:?}"), "[redacted]");
    assert_eq!(format!("{s}"), "[redacted]");
    assert_eq!(s.expose_secret(), "sk-live-123");
    let store = MemoryCredentialStore::new().with("main", "sk-live-123");
    assert!(!format!("{store:?}").contains("sk-live"));
}

#[tokio::test]
async fn memory_store_rotation_is_seen_by_the_next_lookup() {
    let store = MemoryCredentialStore::new().with("main", "old");
    assert_eq!(store.get("main").await.unwrap().expose_secret(), "old");
    store.insert("main", "new");
    assert_eq!(store.get("main").await.unwrap().expose_secret(), "new");
}

#[tokio::test]
async fn file_store_reads_the_file_on_every_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("creds.toml");
    std::fs::write(&path, "main = \"first\"\n").unwrap();
    let store = FileCredentialStore::new(&path);
    assert_eq!(store.get("main").await.unwrap().expose_secret(), "first");
    std::fs::write(&path, "main = \"second\"\n").unwrap();
    assert_eq!(store.get("main").await.unwrap().expose_secret(), "second");
    let err = store.get("other").await.unwrap_err();
    assert!(matches!(err, CredentialError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn file_store_errors_never_quote_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("creds.toml");
    std::fs::write(&path, "main = \"sk-secret-value\n").unwrap();
    let err = FileCredentialStore::new(&path)
        .get("main")
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("sk-secret"), "{err}");
    assert!(!format!("{err:?}").contains("sk-secret"), "{err:?}");
}

#[tokio::test]
async fn env_store_reads_only_mapped_variables() {
    let store = EnvCredentialStore::new().map("main", "TOLLGATE_TEST_SURELY_UNSET_VAR");
    let err = store.get("main").await.unwrap_err();
    assert!(err.to_string().contains("TOLLGATE_TEST_SURELY_UNSET_VAR"));
    let err = store.get("unmapped").await.unwrap_err();
    assert!(err.to_string().contains("no variable is mapped"));
    let path = store.get("PATH").await.unwrap_err();
    assert!(matches!(path, CredentialError::NotFound { .. }));
}
