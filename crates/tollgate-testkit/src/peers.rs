//! The third-party mock servers (llmock, aimock) and Redis that `scripts/peers.sh`
//! starts on 127.0.0.1 for `cargo xtask test-all`: where a test finds them.

/// The URL in `var` (e.g. `TOLLGATE_LLMOCK_URL`). Without it the test should skip, and
/// this says so on stderr; but when `TOLLGATE_PEERS_REQUIRED` is set (xtask sets it), a
/// missing server fails the test instead of passing it silently.
pub fn url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("TOLLGATE_PEERS_REQUIRED").is_none(),
                "{var} is not set, but TOLLGATE_PEERS_REQUIRED is: start the peers with scripts/peers.sh start"
            );
            eprintln!(
                "{var} is not set: skipped (run `cargo xtask test-all`, or scripts/peers.sh start)"
            );
            None
        }
    }
}
