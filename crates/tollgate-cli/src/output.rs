//! Batch output: one line per request in the OpenAI Batch API's output shape
//! (`id`, `custom_id`, `response: {status_code, request_id, body}`, `error: {code,
//! message}`), plus a `tollgate` object with what the pipeline measured (model, attempts,
//! usage in tollgate's convention, cost, latency, input line). The `body` is written by
//! the gateway's writers of OpenAI's answers (`tollgate_gateway::openai_completion`,
//! `openai_embeddings`), so a batch answer has the shape `tollgate serve` answers with.
//!
//! A failure's `error` also says whether a re-run sends the request again
//! (`retryable`, see [`crate::resume`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tollgate::Usage;

/// One output line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct OutputLine {
    pub(crate) id: String,
    pub(crate) custom_id: String,
    pub(crate) response: Option<ResponsePart>,
    pub(crate) error: Option<ErrorPart>,
    pub(crate) tollgate: Meta,
}

/// A successful answer, as the Batch API writes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ResponsePart {
    pub(crate) status_code: u16,
    pub(crate) request_id: String,
    pub(crate) body: Value,
}

/// A failure: a stable error kind (`rate_limited`, `spend_cap_exceeded` ...), the
/// message, and whether a re-run of the same command sends the request again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ErrorPart {
    pub(crate) code: String,
    pub(crate) message: String,
    pub(crate) retryable: bool,
}

/// What tollgate measured for the request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct Meta {
    /// The catalog model that answered (or was asked last).
    pub(crate) model: String,
    /// Sends to the provider, retries included.
    pub(crate) attempts: u32,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) latency_ms: u64,
    /// The input line it came from.
    pub(crate) line: usize,
    /// How it was sent when not live: `batch:<provider batch id>` for a line answered by
    /// the provider's batch API (`tollgate run --via batch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) via: Option<String>,
}

/// Opens the output for appending; if its last line was cut short, ends it first so the
/// next line starts on its own.
pub(crate) fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    let len = file.metadata()?.len();
    if len > 0 {
        file.seek(SeekFrom::Start(len - 1))?;
        let mut last = [0u8; 1];
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            use std::io::Write;
            file.write_all(b"\n")?;
        }
    }
    Ok(file)
}
