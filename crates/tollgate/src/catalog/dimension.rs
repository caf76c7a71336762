//! The rate-limit dimensions a catalog entry sets (`rpm`, `tpm`, `input_tpm`,
//! `output_tpm`), named by their catalog fields.

use std::fmt;

/// A rate-limit dimension of a model's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dimension {
    /// Requests per minute (`rpm`).
    Requests,
    /// Tokens per minute, input and output together (`tpm`).
    Tokens,
    /// Input tokens per minute (`input_tpm`).
    InputTokens,
    /// Output tokens per minute (`output_tpm`).
    OutputTokens,
}

impl Dimension {
    /// The catalog field that sets this dimension's limit.
    pub fn catalog_field(self) -> &'static str {
        match self {
            Dimension::Requests => "rpm",
            Dimension::Tokens => "tpm",
            Dimension::InputTokens => "input_tpm",
            Dimension::OutputTokens => "output_tpm",
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dimension::Requests => "requests (rpm)",
            Dimension::Tokens => "tokens (tpm)",
            Dimension::InputTokens => "input tokens (input_tpm)",
            Dimension::OutputTokens => "output tokens (output_tpm)",
        })
    }
}
