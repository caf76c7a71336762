//! The catalog parser: any text is a catalog or a `CatalogError`, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = tollgate::Catalog::from_toml_str(text);
    }
});
