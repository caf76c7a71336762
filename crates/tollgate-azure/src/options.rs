//! A model's `[models.ID.options]` for `azure-openai`: where its deployment is (the
//! resource `endpoint`, the `deployment`, the `api_version`), how it signs in (`auth`),
//! and the OpenAI options the shared codec reads.

use tollgate::provider::ModelOptions;
use tollgate::provider::{ModelEntry, Result};
use tollgate_openai::{Api, OpenAiOptions};

use crate::PRESET;

/// The `api_version` sent when a model sets none: the latest generally available
/// dated version of Azure OpenAI's inference API.
pub const DEFAULT_API_VERSION: &str = "2024-10-21";

/// The `api_version` that selects Azure's v1 API (`/openai/v1/...`, no dated version).
pub const V1: &str = "v1";

/// The default host of Microsoft Entra ID's token endpoint.
pub const DEFAULT_AUTHORITY_HOST: &str = "https://login.microsoftonline.com";

/// How a model signs in (option `auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// `api-key` (the default): the model's credential is the resource key, sent as
    /// the `api-key` header.
    #[default]
    ApiKey,
    /// `entra`: a Microsoft Entra ID access token (scope
    /// `https://cognitiveservices.azure.com/.default`) sent as a bearer token.
    Entra,
}

/// Azure's own options, beside the OpenAI options in [`AzureOptions::openai`].
const AZURE_OPTIONS: &[&str] = &[
    "endpoint",
    "deployment",
    "api_version",
    "auth",
    "authority_host",
];

/// What a catalog entry's `options` table sets for an `azure-openai` model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureOptions {
    /// `endpoint`: the resource's address, e.g. `https://myres.openai.azure.com`.
    pub endpoint: String,
    /// `deployment`: the deployment's name (default: the model's `name`).
    pub deployment: String,
    /// `api_version`: a dated version (default [`DEFAULT_API_VERSION`]) or [`V1`].
    pub api_version: String,
    /// `auth`: `api-key` (default) or `entra`.
    pub auth: AuthMode,
    /// `authority_host`: Entra ID's host (default [`DEFAULT_AUTHORITY_HOST`]; another
    /// for a sovereign cloud).
    pub authority_host: String,
    /// The OpenAI options the shared codec reads (`tool_choice`, `api`,
    /// `output_limit_field`, `stream_usage`, `embedding_batch`, `extra_body`, …).
    pub openai: OpenAiOptions,
}

fn deployment_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn api_version(s: &str) -> bool {
    s == V1
        || (s.len() >= 10
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && s[..10].bytes().enumerate().all(|(i, b)| match i {
                4 | 7 => b == b'-',
                _ => b.is_ascii_digit(),
            }))
}

impl AzureOptions {
    /// Reads `model.options`; an unknown key, a value of the wrong kind, a missing
    /// `endpoint`, or `base_url` (Azure's address is `endpoint`) is an error naming it.
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        // The OpenAI codec's reading checks that every key is known.
        let checked = ModelOptions::unchecked(model);
        for (name, why) in OPENAIS_OWN {
            if checked.has(name) {
                return Err(checked.error(name, *why));
            }
        }
        let Some(endpoint) = checked.url("endpoint")? else {
            return Err(checked.error(
                "endpoint",
                "is required: the Azure OpenAI resource's address, e.g. \
                 \"https://myres.openai.azure.com\"",
            ));
        };
        let deployment = checked
            .text(
                "deployment",
                "a deployment name (letters, digits, `-`, `_`, `.`)",
                deployment_name,
            )?
            .unwrap_or_else(|| model.name.clone());
        if !deployment_name(&deployment) {
            return Err(checked.error(
                "deployment",
                format!(
                    "is not set, and the model's name `{}` is not a deployment name (letters, \
                     digits, `-`, `_`, `.`): set `deployment`",
                    model.name
                ),
            ));
        }
        let api_version = checked
            .text(
                "api_version",
                "a dated API version such as \"2024-10-21\" or \"2025-04-01-preview\", or \"v1\"",
                api_version,
            )?
            .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned());
        let auth = checked
            .parse("auth", "`api-key` or `entra`", |v| match v {
                "api-key" => Some(AuthMode::ApiKey),
                "entra" => Some(AuthMode::Entra),
                _ => None,
            })?
            .unwrap_or_default();
        let authority_host = checked
            .url("authority_host")?
            .unwrap_or_else(|| DEFAULT_AUTHORITY_HOST.to_owned());
        let mut openai = OpenAiOptions::for_preset(model, &PRESET, AZURE_OPTIONS)?;
        openai.base_url = endpoint.clone();
        Ok(AzureOptions {
            endpoint,
            deployment,
            api_version,
            auth,
            authority_host,
            openai,
        })
    }

    /// Whether the v1 API is used (`api_version = "v1"`).
    pub fn is_v1(&self) -> bool {
        self.api_version == V1
    }

    /// The Chat Completions path after the endpoint: the deployment's, with
    /// `api-version`; or the v1 API's.
    pub fn chat_path(&self) -> String {
        self.deployment_path("chat/completions")
    }

    /// The embeddings path after the endpoint.
    pub fn embeddings_path(&self) -> String {
        self.deployment_path("embeddings")
    }

    /// The Responses API path after the endpoint: `/openai/responses?api-version=V`,
    /// or the v1 API's `/openai/v1/responses` (the deployment named in the body).
    pub fn responses_path(&self) -> String {
        if self.is_v1() {
            "/openai/v1/responses".to_owned()
        } else {
            format!("/openai/responses?api-version={}", self.api_version)
        }
    }

    fn deployment_path(&self, operation: &str) -> String {
        if self.is_v1() {
            format!("/openai/v1/{operation}")
        } else {
            format!(
                "/openai/deployments/{}/{operation}?api-version={}",
                self.deployment, self.api_version
            )
        }
    }

    /// Whether chat goes through the Responses API.
    pub fn uses_responses(&self) -> bool {
        self.openai.api == Api::Responses
    }
}

/// The OpenAI codec's options that Azure has no use for, refused by name with what to
/// set instead.
const OPENAIS_OWN: &[(&str, &str)] = &[
    (
        "base_url",
        "is not read by azure-openai: set `endpoint`, the resource's address \
         (e.g. \"https://myres.openai.azure.com\")",
    ),
    (
        "organization",
        "is OpenAI's header and not sent to Azure: leave it out",
    ),
    (
        "project",
        "is OpenAI's header and not sent to Azure: leave it out",
    ),
];
