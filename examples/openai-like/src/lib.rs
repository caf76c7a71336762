//! `fireworks`: Fireworks AI's OpenAI-compatible API as a tollgate provider, written as a
//! third party would: a preset of the OpenAI codec (`tollgate_openai::preset`) plus what
//! differs, registered through `inventory`. Chat (whole, streamed, with tools) and
//! embeddings go through the codec; this file only says where the API is and how it
//! differs from OpenAI's.
//!
//! ```toml
//! [models.llama]
//! provider = "fireworks"
//! name = "accounts/fireworks/models/llama-v3p1-8b-instruct"
//! credential = "fireworks-key"   # the API key's id in the credential store
//! max_output_tokens = 4096
//! ```
#![deny(missing_docs)]

use std::sync::Arc;

use tollgate::provider::Setting;
use tollgate_openai::preset::{Dialect, OpenAiProvider, Preset};

/// The `fireworks` provider: the API under `https://api.fireworks.ai/inference/v1`, a key
/// required (a bearer token), OpenAI's rate-limit headers and error bodies. What this
/// example declares it cannot send (`verbosity`, OpenAI's own setting) is refused before a
/// request leaves, never dropped; everything else is OpenAI-compatible.
pub const PROVIDER: OpenAiProvider = OpenAiProvider::new(Preset {
    key: "fireworks",
    conventions_name: "fireworks",
    base_url: Some("https://api.fireworks.ai/inference"),
    requires_credential: true,
    dialect: Dialect {
        refuses: &[Setting::Verbosity],
        ..Dialect::OPENAI
    },
    ..Preset::COMPATIBLE
});

tollgate::register_provider!(|| Arc::new(PROVIDER));
