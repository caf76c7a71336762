//! What both providers share: a model's options, its SDK client (region, endpoint,
//! credentials, no SDK retries, tollgate's connect timeout), and the mapping of Bedrock's
//! modeled exceptions to tollgate's error types.

use std::time::Duration;

use aws_credential_types::Credentials;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::{
    BehaviorVersion, IdentityCache, Region, SharedCredentialsProvider,
    StalledStreamProtectionConfig,
};
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use serde::Deserialize;
use tokio::sync::OnceCell;
use tollgate::catalog::CatalogError;
use tollgate::provider::CredentialRef;
use tollgate::{Error, ModelEntry, ProviderError, ProviderRequestError, Result};

/// A Bedrock model's `[models.ID.options]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BedrockOptions {
    /// `region`: required; never defaulted. `None` here fails the model's first call.
    pub(crate) region: Option<String>,
    /// `endpoint_url`: an override of the Bedrock runtime address (proxies, tests).
    pub(crate) endpoint_url: Option<String>,
}

const KNOWN: &[&str] = &["region", "endpoint_url"];

pub(crate) fn option_error(model: &ModelEntry, field: &str, reason: impl Into<String>) -> Error {
    Error::Catalog(CatalogError::InvalidField {
        model_id: model.id.clone(),
        field: format!("options.{field}"),
        reason: reason.into(),
    })
}

impl BedrockOptions {
    /// Reads `model.options`; an unknown key or a value of the wrong kind is an error.
    pub(crate) fn from_model(model: &ModelEntry, provider: &str) -> Result<Self> {
        let options = &model.options;
        if let Some(unknown) = options.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(option_error(
                model,
                unknown,
                format!("is not a {provider} option; known: {}", KNOWN.join(", ")),
            ));
        }
        let region = match options.get("region") {
            None => None,
            Some(v) => Some(
                v.as_str()
                    .filter(|r| {
                        !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    })
                    .ok_or_else(|| {
                        option_error(model, "region", "must be an AWS region, e.g. `us-east-1`")
                    })?
                    .to_owned(),
            ),
        };
        let endpoint_url = match options.get("endpoint_url") {
            None => None,
            Some(v) => Some(
                v.as_str()
                    .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                    .ok_or_else(|| {
                        option_error(
                            model,
                            "endpoint_url",
                            "must be an http:// or https:// address",
                        )
                    })?
                    .trim_end_matches('/')
                    .to_owned(),
            ),
        };
        Ok(BedrockOptions {
            region,
            endpoint_url,
        })
    }
}

/// The AWS credential record kept in tollgate's credential store, as JSON:
/// `{"access_key_id": "…", "secret_access_key": "…", "session_token": "…"}`
/// (`session_token` optional).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AwsRecord {
    access_key_id: String,
    secret_access_key: String,
    #[serde(default)]
    session_token: Option<String>,
}

/// Parses a stored record. The error names the credential id and where the JSON is
/// wrong, never a value from it.
pub(crate) fn parse_record(id: &str, text: &str) -> Result<Credentials> {
    let record: AwsRecord = serde_json::from_str(text).map_err(|e| Error::InvalidRequest {
        field: "credential".into(),
        reason: format!(
            "`{id}` is not an AWS credential record (JSON with `access_key_id`, \
             `secret_access_key` and optional `session_token`): {} at line {}, column {}",
            match e.classify() {
                serde_json::error::Category::Data => "a field is missing, unknown or not a string",
                _ => "not valid JSON",
            },
            e.line(),
            e.column()
        ),
    })?;
    if record.access_key_id.is_empty() || record.secret_access_key.is_empty() {
        return Err(Error::InvalidRequest {
            field: "credential".into(),
            reason: format!("`{id}`: `access_key_id` and `secret_access_key` must not be empty"),
        });
    }
    Ok(Credentials::new(
        record.access_key_id,
        record.secret_access_key,
        record.session_token,
        None,
        "tollgate-credential-store",
    ))
}

/// One model's SDK client, made on its first call (the default credential chain needs
/// an async start), plus where its credentials come from.
#[derive(Debug)]
pub(crate) struct BedrockClient {
    model: ModelEntry,
    options: BedrockOptions,
    credential: Option<CredentialRef>,
    connect_timeout: Duration,
    client: OnceCell<Client>,
}

impl BedrockClient {
    pub(crate) fn new(
        model: &ModelEntry,
        provider: &str,
        credential: Option<CredentialRef>,
        connect_timeout: Duration,
    ) -> Result<Self> {
        Ok(BedrockClient {
            model: model.clone(),
            options: BedrockOptions::from_model(model, provider)?,
            credential,
            connect_timeout,
            client: OnceCell::new(),
        })
    }

    pub(crate) fn model(&self) -> &ModelEntry {
        &self.model
    }

    /// The client, and the credentials to use for this one call when the model names a
    /// credential-store record (read now, so a rotated record is used at once).
    pub(crate) async fn client(&self) -> Result<(&Client, Option<Credentials>)> {
        let region = self.options.region.clone().ok_or_else(|| {
            option_error(
                &self.model,
                "region",
                format!(
                    "model `{}` has no `options.region`; Bedrock models must name their AWS \
                     region (it is never defaulted)",
                    self.model.id
                ),
            )
        })?;
        let call_credentials = match &self.credential {
            Some(credential) => {
                let secret = credential.secret().await?;
                Some(parse_record(credential.id(), secret.expose_secret())?)
            }
            None => None,
        };
        let client = self
            .client
            .get_or_init(|| async {
                let region = Region::new(region);
                let mut config = aws_sdk_bedrockruntime::Config::builder()
                    .behavior_version(BehaviorVersion::latest())
                    .region(region.clone())
                    // The pipeline is the one place that retries and times out.
                    .retry_config(RetryConfig::disabled())
                    .timeout_config(
                        TimeoutConfig::builder()
                            .connect_timeout(self.connect_timeout)
                            .build(),
                    )
                    .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
                if let Some(url) = &self.options.endpoint_url {
                    config = config.endpoint_url(url);
                }
                config = if self.credential.is_some() {
                    // Each call passes the record it read; nothing is cached.
                    config.identity_cache(IdentityCache::no_cache())
                } else {
                    let chain = aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                        .region(region)
                        .build()
                        .await;
                    config.credentials_provider(chain)
                };
                Client::from_conf(config.build())
            })
            .await;
        Ok((client, call_credentials))
    }
}

/// `text` with every non-empty secret replaced by `[redacted]`.
pub(crate) fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(text.to_owned(), |t, s| t.replace(s.as_str(), "[redacted]"))
}

/// The secret parts of `credentials`, to cut out of error messages.
pub(crate) fn secrets_of(credentials: Option<&Credentials>) -> Vec<String> {
    credentials
        .map(|c| {
            let mut out = vec![c.secret_access_key().to_owned()];
            out.extend(c.session_token().map(str::to_owned));
            out
        })
        .unwrap_or_default()
}

/// The per-call config carrying a credential-store record.
pub(crate) fn call_config(
    credentials: Option<Credentials>,
) -> Option<aws_sdk_bedrockruntime::config::Builder> {
    credentials.map(|c| {
        aws_sdk_bedrockruntime::config::Builder::default()
            .credentials_provider(SharedCredentialsProvider::new(c))
    })
}

/// Maps a Bedrock exception, by its modeled name (`code`), to tollgate's error type.
///
/// | exception | error |
/// |---|---|
/// | ThrottlingException | `ProviderError::RateLimited` |
/// | ServiceUnavailableException, ModelNotReadyException | `ProviderError::Overloaded` |
/// | InternalServerException, ModelStreamErrorException | `ProviderError::Server { 500 }` |
/// | ModelTimeoutException | `ProviderError::Timeout` |
/// | ServiceQuotaExceededException | `Error::QuotaExhausted` |
/// | AccessDeniedException about payment or a Marketplace subscription | `Error::QuotaExhausted` |
/// | ValidationException, AccessDeniedException, ResourceNotFoundException, ModelErrorException | `ProviderRequestError` |
///
/// An unknown code falls back on the HTTP status when there is one (429, 5xx), else it
/// is a `ProviderRequestError`.
pub(crate) fn classify(
    provider: &str,
    code: Option<&str>,
    message: Option<&str>,
    status: Option<u16>,
) -> Error {
    let code = code.unwrap_or("");
    let message = message.unwrap_or("");
    let text = if code.is_empty() {
        message.to_owned()
    } else {
        format!("{code}: {message}")
    };
    match code {
        "ThrottlingException" => ProviderError::RateLimited { retry_after: None }.into(),
        // Overloaded, with the status the wire said (503 for ServiceUnavailable).
        "ServiceUnavailableException" | "ModelNotReadyException" => ProviderError::Overloaded {
            status: status.unwrap_or(503),
            retry_after: None,
        }
        .into(),
        "InternalServerException" | "ModelStreamErrorException" => {
            ProviderError::server(500).into()
        }
        "ModelTimeoutException" => ProviderError::Timeout { after: None }.into(),
        "ServiceQuotaExceededException" => Error::QuotaExhausted {
            provider: provider.into(),
            message: text,
        },
        "AccessDeniedException"
            if message.contains("INVALID_PAYMENT_INSTRUMENT")
                || message.contains("AWS Marketplace") =>
        {
            Error::QuotaExhausted {
                provider: provider.into(),
                message: text,
            }
        }
        "ValidationException" => ProviderRequestError::new(400, text).into(),
        "AccessDeniedException" => ProviderRequestError::new(403, text).into(),
        "ResourceNotFoundException" => ProviderRequestError::new(404, text).into(),
        "ModelErrorException" => ProviderRequestError::new(424, text).into(),
        _ => match status {
            Some(429) => ProviderError::RateLimited { retry_after: None }.into(),
            Some(s @ 500..=599) => ProviderError::server(s).into(),
            Some(s) => ProviderRequestError::new(s, text).into(),
            None => ProviderError::server(500).into(),
        },
    }
}

/// Maps an SDK failure: a service exception by [`classify`]; no answer in time as a
/// timeout; no answer at all (refused, reset, unreadable) as a bad gateway, so it is
/// retried.
///
/// `secrets` (the call's secret key and session token) are cut out of any message the
/// server sent back, so an echo never carries them into an error.
pub(crate) fn sdk_error<E, R>(
    provider: &str,
    error: &SdkError<E, R>,
    connect_timeout: Duration,
    status: Option<u16>,
    secrets: &[String],
) -> Error
where
    E: ProvideErrorMetadata,
{
    match error {
        SdkError::ServiceError(service) => {
            let e = service.err();
            let message = e.message().map(|m| redact(m, secrets));
            classify(provider, e.code(), message.as_deref(), status)
        }
        SdkError::TimeoutError(_) => ProviderError::Timeout { after: None }.into(),
        SdkError::DispatchFailure(failure) if failure.is_timeout() => ProviderError::Timeout {
            after: Some(connect_timeout),
        }
        .into(),
        SdkError::ConstructionFailure(_) => Error::InvalidRequest {
            field: "request".into(),
            reason: "the AWS SDK could not build the request".into(),
        },
        _ => ProviderError::server(502).into(),
    }
}

impl BedrockClient {
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }
}
