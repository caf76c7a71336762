//! What both providers share: a model's options, its SDK client (region, endpoint,
//! credentials, no SDK retries, tollgate's connect timeout, the model's response-size
//! cap), and the mapping of SDK failures, whole answers' and a stream's, to tollgate's
//! error types (Bedrock's modeled exceptions are read in [`crate::exceptions`]).

use std::time::Duration;

use aws_credential_types::Credentials;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::http::HttpResponse;
use aws_sdk_bedrockruntime::config::{
    BehaviorVersion, IdentityCache, Region, SharedCredentialsProvider,
    StalledStreamProtectionConfig,
};
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver;
use aws_smithy_types::event_stream::RawMessage;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use futures::Stream;
use serde::Deserialize;
use tokio::sync::OnceCell;
use tollgate::provider::{ConnectionCause, Error, ModelEntry, ProviderError, Result};
use tollgate::provider::{
    CredentialRef, ModelOptions, ProviderContext, clock, connection_cause, connection_error,
    keep_raw, parse_retry_after, redact, redact_bytes, undecodable,
};

use crate::exceptions::{classify, read_exception};
use crate::response_cap::{ResponseCap, too_large};

/// A Bedrock model's `[models.ID.options]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BedrockOptions {
    /// `region`: required; never defaulted. `None` here fails the model's first call.
    pub(crate) region: Option<String>,
    /// `endpoint_url`: an override of the Bedrock runtime address (proxies, tests).
    pub(crate) endpoint_url: Option<String>,
}

const KNOWN: &[&str] = &["region", "endpoint_url"];

impl BedrockOptions {
    /// Reads `model.options`; an unknown key or a value of the wrong kind is an error.
    pub(crate) fn from_model(model: &ModelEntry) -> Result<Self> {
        let options = ModelOptions::new(model, KNOWN)?;
        Ok(BedrockOptions {
            region: options.text("region", "an AWS region, e.g. `us-east-1`", |r| {
                !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })?,
            endpoint_url: options.url("endpoint_url")?,
        })
    }

    /// Where calls go: `endpoint_url`, else the region's Bedrock runtime address.
    pub(crate) fn base_url(&self) -> Option<String> {
        self.endpoint_url.clone().or_else(|| {
            self.region
                .as_ref()
                .map(|r| format!("https://bedrock-runtime.{r}.amazonaws.com"))
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

/// How much longer than the model's `stream_idle_timeout_secs` the SDK's stalled-stream
/// protection waits, so that the pipeline's typed timeout is the one that fires.
pub(crate) const STALL_MARGIN: Duration = Duration::from_secs(5);

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
    pub(crate) fn new(model: &ModelEntry, context: &ProviderContext) -> Result<Self> {
        Ok(BedrockClient {
            model: model.clone(),
            options: BedrockOptions::from_model(model)?,
            credential: context.credential_ref(model),
            connect_timeout: context.connect_timeout(),
            client: OnceCell::new(),
        })
    }

    /// The error a failed call means, with the HTTP status of its raw answer, if any
    /// (and its bytes, when it did not decode).
    pub(crate) fn failure<E: ProvideErrorMetadata + std::error::Error + 'static>(
        &self,
        error: &SdkError<E, HttpResponse>,
        secrets: &[String],
    ) -> Error {
        let answer = error.raw_response();
        let status = answer.map(|r| r.status().as_u16());
        let retry_after = answer.and_then(|r| {
            let headers = r.headers();
            parse_retry_after(
                headers.get("retry-after-ms"),
                headers.get("retry-after"),
                clock::wall_now(),
            )
        });
        let raw = answer.and_then(|r| r.body().bytes());
        let failure = sdk_error(error, self.connect_timeout, status, retry_after, secrets);
        let failure = keep_raw(failure, raw.unwrap_or_default());
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        failure.redacted(&secrets)
    }

    pub(crate) fn model(&self) -> &ModelEntry {
        &self.model
    }

    /// The client, and the credentials to use for this one call when the model names a
    /// credential-store record (read now, so a rotated record is used at once).
    pub(crate) async fn client(&self) -> Result<(&Client, Option<Credentials>)> {
        let region = self.options.region.clone().ok_or_else(|| {
            ModelOptions::new(&self.model, KNOWN).map_or_else(
                |e| e,
                |options| {
                    options.error(
                        "region",
                        format!(
                            "model `{}` has no `options.region`; Bedrock models must name \
                             their AWS region (it is never defaulted)",
                            self.model.id
                        ),
                    )
                },
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
                    // A backstop to the pipeline's own idle timeout (which fires first and
                    // is typed: the SDK's stall error is a private type): a body that
                    // stalls for the model's idle timeout plus a margin fails.
                    .stalled_stream_protection(
                        StalledStreamProtectionConfig::enabled()
                            .grace_period(self.model.stream_idle_timeout() + STALL_MARGIN)
                            .build(),
                    )
                    // The model's `max_response_bytes`, on whole answers and on each
                    // event-stream message (the SDK reads both itself).
                    .interceptor(ResponseCap::new(&self.model));
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

/// `result` with `secrets`, in any form ([`tollgate::provider::redact`]), cut out of
/// its error's text: what every path puts around an error it builds from an answer.
pub(crate) fn redacted<T>(result: Result<T>, secrets: &[String]) -> Result<T> {
    result.map_err(|e| {
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        e.redacted(&secrets)
    })
}

/// `bytes` (an answer's body, a stream chunk) with `secrets`, in any form, cut out
/// before a codec decodes them, so nothing it builds or logs from them can carry one.
pub(crate) fn without_secrets(bytes: &[u8], secrets: &[String]) -> Vec<u8> {
    secrets.iter().fold(bytes.to_vec(), |bytes, secret| {
        redact_bytes(&bytes, secret).unwrap_or(bytes)
    })
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

/// Maps an SDK failure, never to a bare status:
///
/// | SDK error | error |
/// |---|---|
/// | any, caused by an answer or event-stream message over the model's `max_response_bytes` ([`crate::response_cap`]) | `Error::ResponseTooLarge` |
/// | `ServiceError` (a modeled exception) | by [`read_exception`] and the core's verdict, with the answer's `retry-after` |
/// | `ServiceError` without an exception name on a 2xx (a success answer the SDK could not parse) | `ProviderError::Malformed`, the answer's first bytes kept |
/// | `TimeoutError`, a `DispatchFailure` that timed out | `ProviderError::Timeout` |
/// | `DispatchFailure` (the request could not be sent) | `ProviderError::Connection` with the cause read from its error chain ([`connection_cause`]: refused, reset, TLS, …) |
/// | `ResponseError` whose chain shows a connection failure | `ProviderError::Connection` with that cause |
/// | other `ResponseError` (an answer or event-stream frame that does not decode) | `ProviderError::Malformed`, with the SDK's reason |
/// | `ConstructionFailure` | `Error::InvalidRequest` |
///
/// `secrets` (the call's secret key and session token) are cut out of any message the
/// server sent back and of every cause's text, so an echo never carries them into an
/// error.
pub(crate) fn sdk_error<E, R>(
    error: &SdkError<E, R>,
    connect_timeout: Duration,
    status: Option<u16>,
    retry_after: Option<Duration>,
    secrets: &[String],
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    if let Some(too_large) = too_large(error) {
        return too_large;
    }
    let secret_strs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    match error {
        SdkError::ServiceError(service)
            if service.err().code().is_none()
                && status.is_some_and(|s| (200..300).contains(&s)) =>
        {
            // A success answer the SDK could not parse (an error with no exception name).
            let e = service.err();
            let what =
                std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string);
            undecodable(redact(&what, secrets))
        }
        SdkError::ServiceError(service) => {
            let e = service.err();
            let message = e.message().map(|m| redact(m, secrets));
            // The answer's `retry-after` joins what the exception says, for the one verdict.
            let mut wire = read_exception(e.code(), message.as_deref(), status);
            wire.retry_after = wire.retry_after.or(retry_after);
            wire.verdict()
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
        SdkError::ResponseError(_) if connection_cause(error) == ConnectionCause::Other => {
            let what = std::error::Error::source(error)
                .map_or_else(|| error.to_string(), ToString::to_string);
            undecodable(redact(&what, secrets))
        }
        // A dispatch failure, a response cut by the connection, anything else.
        _ => connection_error(error, &secret_strs).into(),
    }
}

/// An SDK event stream as a stream of events; a failure mid-stream is read by `error`.
pub(crate) fn events<T, E>(
    receiver: EventReceiver<T, E>,
    error: impl Fn(&SdkError<E, RawMessage>) -> Error + Send + 'static,
) -> impl Stream<Item = Result<T>> + Send + 'static
where
    T: Send + 'static,
    E: Send + 'static,
    EventReceiver<T, E>: Send,
{
    futures::stream::unfold(
        (receiver, error, false),
        |(mut receiver, error, failed)| async move {
            if failed {
                return None;
            }
            match receiver.recv().await {
                Ok(Some(event)) => Some((Ok(event), (receiver, error, false))),
                Ok(None) => None,
                Err(e) => {
                    let e = error(&e);
                    Some((Err(e), (receiver, error, true)))
                }
            }
        },
    )
}

/// A mid-stream failure: an exception the SDK modeled is classified by its name like an
/// HTTP one (`name` gives the modeled name of each of the stream's exception variants,
/// else the error's code is read); a frame that does not decode keeps its bytes, when
/// the SDK kept them. `secrets` are cut out of every message.
pub(crate) fn stream_failure<E>(
    error: &SdkError<E, RawMessage>,
    secrets: &[String],
    name: fn(&E) -> Option<&'static str>,
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let Some(service) = error.as_service_error() else {
        let raw = match error.raw_response() {
            Some(RawMessage::Invalid(Some(bytes))) => bytes.as_ref(),
            _ => &[],
        };
        let failure = keep_raw(sdk_error(error, Duration::ZERO, None, None, secrets), raw);
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        return failure.redacted(&secrets);
    };
    let code = match name(service) {
        Some(name) => name,
        None => service.code().unwrap_or(""),
    };
    let message = service.message().map(|m| redact(m, secrets));
    classify(Some(code), message.as_deref(), None)
}

/// Sends one SDK call once and evaluates to `(output, secrets)`: the client and this
/// call's credential record come from `$aws.client()`, `$build` makes the call from
/// `$client`, and a failure returns from the enclosing function as
/// [`BedrockClient::failure`] reads it (`secrets` are what must not appear in errors
/// later read from the output, e.g. a stream's exceptions). A macro because the SDK's
/// send bound (`CustomizableSend`) cannot be named outside it.
macro_rules! send_once {
    ($aws:expr, |$client:ident| $build:expr) => {{
        let ($client, credentials) = $aws.client().await?;
        let secrets = $crate::client::secrets_of(credentials.as_ref());
        let mut call = $build.customize();
        if let Some(config) = $crate::client::call_config(credentials) {
            call = call.config_override(config);
        }
        match call.send().await {
            Ok(output) => (output, secrets),
            Err(e) => return Err($aws.failure(&e, &secrets)),
        }
    }};
}
pub(crate) use send_once;
