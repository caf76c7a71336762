//! Answers that do not decode: one constructor for every codec, keeping the first bytes
//! for diagnosis.

use crate::error::{Error, ProviderError, Result};

/// The most bytes of an undecodable answer kept in [`ProviderError::Malformed`].
pub const MALFORMED_RAW_BYTES: usize = 512;

/// The error for a success answer (a body, or one stream event) that does not decode:
/// a retryable [`ProviderError::Malformed`] with `what` the decoder said and the first
/// [`MALFORMED_RAW_BYTES`] of `raw` (cut at a character boundary, invalid UTF-8
/// replaced). The endpoint that read the answer redacts the credential from it.
///
/// Once a stream's first event has reached the reader, the pipeline reports it as the
/// cause of [`Error::StreamInterrupted`] instead (nothing is re-sent).
///
/// ```
/// use tollgate::wire::malformed;
/// use tollgate::{Error, ProviderError};
///
/// let error = malformed("expected value at line 1 column 1", b"<html>oops</html>");
/// assert!(matches!(
///     error,
///     Error::Provider(ProviderError::Malformed { ref raw, raw_len: 17, .. }) if raw == "<html>oops</html>"
/// ));
/// assert!(error.is_retryable());
/// ```
pub fn malformed(what: impl std::fmt::Display, raw: &[u8]) -> Error {
    let text = String::from_utf8_lossy(&raw[..raw.len().min(MALFORMED_RAW_BYTES)]);
    let mut kept = String::with_capacity(text.len());
    for c in text.chars() {
        if kept.len() + c.len_utf8() > MALFORMED_RAW_BYTES {
            break;
        }
        kept.push(c);
    }
    ProviderError::Malformed {
        what: what.to_string(),
        raw: kept,
        raw_len: raw.len(),
    }
    .into()
}

/// [`malformed`] without the bytes, for a codec's inner helpers: what was wrong with a
/// part of the answer. The entry point that holds the whole input adds its bytes with
/// [`keep_raw`] (the [`StreamDecoder`](super::StreamDecoder) shell does for each event).
pub fn undecodable(what: impl std::fmt::Display) -> Error {
    malformed(what, b"")
}

/// `bytes` read as JSON into `T`; JSON that does not read is [`malformed`], keeping the
/// bytes.
pub fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| malformed(e, bytes))
}

/// `error` with `raw` as its bytes when it is a [`ProviderError::Malformed`] that keeps
/// none yet; any other error passes through. A codec's inner helpers report what was
/// wrong with [`malformed`]`(what, b"")`; its entry point (decode a body, decode one
/// event) calls this once with the whole input.
pub fn keep_raw(error: Error, raw: &[u8]) -> Error {
    match error {
        Error::Provider(ProviderError::Malformed {
            what, raw_len: 0, ..
        }) => malformed(what, raw),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_answer_keeps_at_most_512_bytes_of_it() {
        let raw = "é".repeat(1000);
        let Error::Provider(ProviderError::Malformed {
            raw: kept, raw_len, ..
        }) = malformed("bad", raw.as_bytes())
        else {
            panic!("not malformed")
        };
        assert_eq!(raw_len, 2000);
        assert_eq!(kept.len(), 512);
        assert!(kept.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_codec_entry_point_keeps_the_raw_bytes_once() {
        let inner = malformed("unknown stop", b"");
        let Error::Provider(ProviderError::Malformed { raw, raw_len, what }) =
            keep_raw(keep_raw(inner, b"{\"stop\":\"x\"}"), b"outer")
        else {
            panic!()
        };
        assert_eq!(
            (raw.as_str(), raw_len, what.as_str()),
            ("{\"stop\":\"x\"}", 12, "unknown stop")
        );
    }

    #[test]
    fn json_that_does_not_read_is_malformed_with_its_bytes() {
        let Err(Error::Provider(ProviderError::Malformed { raw, raw_len, .. })) =
            parse_json::<serde_json::Value>(b"{oops")
        else {
            panic!("not malformed")
        };
        assert_eq!((raw.as_str(), raw_len), ("{oops", 5));
        assert_eq!(parse_json::<u8>(b"7").unwrap(), 7);
    }

    #[test]
    fn an_undecodable_part_keeps_no_bytes_until_its_entry_point_adds_them() {
        let error = keep_raw(undecodable("no choices"), b"{}");
        assert!(matches!(
            error,
            Error::Provider(ProviderError::Malformed { ref raw, ref what, .. }) if raw == "{}" && what == "no choices"
        ));
    }

    #[test]
    fn a_malformed_answer_is_redacted_by_its_reader() {
        let error = malformed("bad", b"echo sk-secret-1 back");
        let Error::Provider(p) = error else { panic!() };
        let text = p.redacted(&["sk-secret-1"]).to_string();
        assert!(!text.contains("sk-secret-1"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
}
