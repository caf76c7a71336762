//! [`CacheKey`]: a request named by sha256 over its canonical form, the caller's
//! activation key and a sequence number.

use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::json::canonical_bytes;
use crate::request::LlmRequest;

/// A request's identity in the replay cache: 32 bytes of SHA-256, shown as hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The raw digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({})", self.to_hex())
    }
}

#[derive(Serialize)]
struct KeyMaterial<'a> {
    version: u32,
    request: &'a LlmRequest,
    key: &'a str,
    seq: u64,
}

/// Version of the key material's layout; bump it when the layout changes so old replay
/// directories miss instead of answering wrongly.
const KEY_LAYOUT_VERSION: u32 = 1;

/// SHA-256 over the canonical serialization of the request's four components, the
/// caller's activation `key` and the sequence number `seq`.
///
/// Stable across runs, platforms and the order of fields and JSON object keys: objects
/// are written with sorted keys at every depth, without whitespace.
pub fn compute_cache_key(request: &LlmRequest, key: &str, seq: u64) -> Result<CacheKey> {
    let material = KeyMaterial {
        version: KEY_LAYOUT_VERSION,
        request,
        key,
        seq,
    };
    let bytes = canonical_bytes(&material).map_err(|source| Error::Decode {
        what: "a request for its cache key".into(),
        source,
    })?;
    Ok(CacheKey(Sha256::digest(&bytes).into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, SamplingParams};

    fn request_from(json: &str) -> LlmRequest {
        serde_json::from_str(json).expect("valid request JSON")
    }

    #[test]
    fn cache_key_ignores_json_object_order() {
        let a = request_from(
            r#"{"model_id":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],
                "tools_schema":[{"name":"t","description":"d","input_schema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}}}}],
                "sampling_params":{"temperature":0.5,"max_output_tokens":10}}"#,
        );
        let b = request_from(
            r#"{"sampling_params":{"max_output_tokens":10,"temperature":0.5},
                "tools_schema":[{"input_schema":{"properties":{"b":{"type":"number"},"a":{"type":"string"}},"type":"object"},"description":"d","name":"t"}],
                "messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}],"model_id":"m"}"#,
        );
        assert_eq!(
            compute_cache_key(&a, "job", 0).unwrap(),
            compute_cache_key(&b, "job", 0).unwrap()
        );
    }

    #[test]
    fn cache_key_changes_with_each_input() {
        let r = LlmRequest::new(
            "m",
            vec![Message::user("hi")],
            vec![],
            SamplingParams::new(),
        )
        .unwrap();
        let other = LlmRequest::new(
            "m",
            vec![Message::user("ho")],
            vec![],
            SamplingParams::new(),
        )
        .unwrap();
        let base = compute_cache_key(&r, "k", 0).unwrap();
        assert_ne!(base, compute_cache_key(&r, "k", 1).unwrap());
        assert_ne!(base, compute_cache_key(&r, "k2", 0).unwrap());
        assert_ne!(base, compute_cache_key(&other, "k", 0).unwrap());
    }

    /// A golden value: the same request must hash the same on every platform and run.
    /// If this changes, replay directories recorded earlier stop matching; bump
    /// `KEY_LAYOUT_VERSION` deliberately instead.
    #[test]
    fn cache_key_is_stable_across_runs_and_platforms() {
        let r = LlmRequest::new(
            "claude-sonnet",
            vec![Message::system("Be brief."), Message::user("What is 2+2?")],
            vec![],
            SamplingParams::new()
                .with_temperature(0.0)
                .unwrap()
                .with_max_output_tokens(64)
                .unwrap(),
        )
        .unwrap();
        let key = compute_cache_key(&r, "activation-1", 7).unwrap();
        let material = r#"{"key":"activation-1","request":{"messages":[{"content":[{"text":"Be brief.","type":"text"}],"role":"system"},{"content":[{"text":"What is 2+2?","type":"text"}],"role":"user"}],"model_id":"claude-sonnet","sampling_params":{"max_output_tokens":64,"temperature":0.0},"tools_schema":[]},"seq":7,"version":1}"#;
        let expected: [u8; 32] = Sha256::digest(material.as_bytes()).into();
        assert_eq!(key.as_bytes(), &expected);
        assert_eq!(key.to_hex().len(), 64);
    }
}
