//! The catalog parser: any text is a catalog or a `CatalogError`, never a panic.

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = tollgate::Catalog::from_toml_str(text);
    }
}
