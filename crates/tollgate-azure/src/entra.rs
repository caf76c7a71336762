//! Where `auth = "entra"` models get their Microsoft Entra ID access tokens.
//!
//! Azure OpenAI takes `Authorization: Bearer <token>` for the scope
//! [`COGNITIVE_SERVICES_SCOPE`]. A [`TokenSource`] makes the token; the kit's endpoint
//! asks it once per request (as a [`SecretSource`]), so the token is sent as a sensitive
//! header and redacted from error messages like a key.
//!
//! The built-in source is the OAuth 2.0 client-credentials grant of a service principal
//! ([`ClientSecretTokens`]): the model's credential record in the store is
//! `{"tenant_id": "…", "client_id": "…", "client_secret": "…"}`, read on every call (a
//! rotated secret is used at once); its tokens are cached until five minutes before
//! they expire. Nothing is read from the environment. An application with its own
//! token broker (managed identity, the developer CLI, a workload identity) gives
//! [`AzureProvider::with_tokens`](crate::AzureProvider::with_tokens) its own source.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tollgate::provider::http::SecretSource;
use tollgate::provider::{CredentialStore, Error, Result, Secret};
use tollgate::provider::{ProviderContext, ProviderError, connection_error};

/// The OAuth scope Azure OpenAI's data plane takes tokens for.
pub const COGNITIVE_SERVICES_SCOPE: &str = "https://cognitiveservices.azure.com/.default";

/// How long before its expiry a cached token is renewed.
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// Makes Entra ID access tokens for `azure-openai` models with `auth = "entra"`.
#[tollgate::provider::async_trait]
pub trait TokenSource: Send + Sync + fmt::Debug {
    /// A valid access token for scope [`COGNITIVE_SERVICES_SCOPE`], for `credential`
    /// (the model's credential id in the store, if it names one) at `authority_host`.
    async fn access_token(&self, credential: Option<&str>, authority_host: &str) -> Result<Secret>;
}

/// One model's tokens: its credential id, its authority and the provider's source.
#[derive(Debug)]
pub(crate) struct ModelTokens {
    pub(crate) tokens: Arc<dyn TokenSource>,
    pub(crate) credential: Option<String>,
    pub(crate) authority_host: String,
    pub(crate) id: String,
}

#[tollgate::provider::async_trait]
impl SecretSource for ModelTokens {
    async fn secret(&self) -> Result<Secret> {
        self.tokens
            .access_token(self.credential.as_deref(), &self.authority_host)
            .await
    }

    fn id(&self) -> &str {
        &self.id
    }
}

/// A service principal's record in the credential store.
#[derive(Deserialize)]
struct ServicePrincipal {
    tenant_id: String,
    client_id: String,
    client_secret: String,
}

/// Entra ID's token answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: u64,
}

/// Entra ID's error answer: only its code is kept (its description is not needed,
/// and is never the secret).
#[derive(Deserialize)]
struct TokenError {
    #[serde(default)]
    error: String,
}

/// The client-credentials grant of service principals whose records are in the
/// credential store, with each token cached until shortly before it expires.
pub struct ClientSecretTokens {
    store: Arc<dyn CredentialStore>,
    http: reqwest::Client,
    /// Per credential id and authority host: the token last made.
    cache: Mutex<HashMap<(String, String), Cached>>,
}

/// A token and what it was made from: the digest of the record (never the record), so
/// a changed record makes a new token; and when to renew it.
struct Cached {
    record: [u8; 32],
    token: Secret,
    renew_at: Instant,
}

impl fmt::Debug for ClientSecretTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSecretTokens").finish_non_exhaustive()
    }
}

impl ClientSecretTokens {
    /// The source reading records from `context`'s credential store, over an HTTP
    /// client with its connect timeout, no proxy from the environment and no retries.
    pub fn new(context: &ProviderContext) -> Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(context.connect_timeout())
            .no_proxy()
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| Error::InvalidRequest {
                field: format!("providers.{}", context.key()),
                reason: format!("the Entra ID HTTP client could not be made: {e}"),
            })?;
        Ok(ClientSecretTokens {
            store: context.credentials().clone(),
            http,
            cache: Mutex::new(HashMap::new()),
        })
    }

    async fn fetch(
        &self,
        id: &str,
        principal: &ServicePrincipal,
        host: &str,
    ) -> Result<(Secret, Duration)> {
        let not_a_principal = |why: &str| Error::InvalidRequest {
            field: "credential".into(),
            reason: format!("`{id}` {why}"),
        };
        if principal.tenant_id.is_empty()
            || !principal
                .tenant_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'))
        {
            return Err(not_a_principal(
                "has a `tenant_id` that is not a tenant id or domain",
            ));
        }
        let form = serde_urlencoded::to_string([
            ("grant_type", "client_credentials"),
            ("client_id", principal.client_id.as_str()),
            ("client_secret", principal.client_secret.as_str()),
            ("scope", COGNITIVE_SERVICES_SCOPE),
        ])
        .map_err(|_| not_a_principal("cannot be sent as a form"))?;
        let url = format!("{host}/{}/oauth2/v2.0/token", principal.tenant_id);
        let secret = principal.client_secret.as_str();
        let answer = self
            .http
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(form)
            .send()
            .await
            .map_err(|e| Error::from(connection_error(&e, &[secret])))?;
        let status = answer.status();
        let bytes = answer
            .bytes()
            .await
            .map_err(|e| Error::from(connection_error(&e, &[secret])))?;
        if status.is_server_error() {
            return Err(ProviderError::Server {
                status: status.as_u16(),
                retry_after: None,
            }
            .into());
        }
        if !status.is_success() {
            let code = serde_json::from_slice::<TokenError>(&bytes)
                .map(|e| e.error)
                .unwrap_or_default();
            return Err(not_a_principal(&format!(
                "was refused by Entra ID (HTTP {}, `{code}`): check its tenant_id, client_id \
                 and client_secret, and the principal's role on the resource",
                status.as_u16()
            )));
        }
        let token: TokenAnswer = serde_json::from_slice(&bytes).map_err(|_| {
            not_a_principal("got a token answer from Entra ID that does not decode")
        })?;
        Ok((
            Secret::new(token.access_token),
            Duration::from_secs(token.expires_in),
        ))
    }
}

#[tollgate::provider::async_trait]
impl TokenSource for ClientSecretTokens {
    async fn access_token(&self, credential: Option<&str>, host: &str) -> Result<Secret> {
        let Some(id) = credential else {
            return Err(Error::InvalidRequest {
                field: "credential".into(),
                reason: "an `auth = \"entra\"` model names no credential: name the service \
                         principal's record ({\"tenant_id\", \"client_id\", \"client_secret\"}) \
                         in the credential store"
                    .into(),
            });
        };
        let record = self.store.get(id).await?;
        let digest: [u8; 32] = Sha256::digest(record.expose_secret().as_bytes()).into();
        let key = (id.to_owned(), host.to_owned());
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.get(&key)
            && cached.record == digest
            && tollgate::provider::clock::now() < cached.renew_at
        {
            return Ok(cached.token.clone());
        }
        let principal: ServicePrincipal =
            serde_json::from_str(record.expose_secret()).map_err(|_| Error::InvalidRequest {
                field: "credential".into(),
                reason: format!(
                    "`{id}` is not a service principal's record: JSON with `tenant_id`, \
                     `client_id` and `client_secret`"
                ),
            })?;
        let (token, lifetime) = self.fetch(id, &principal, host).await?;
        let renew_at = tollgate::provider::clock::now() + lifetime.saturating_sub(RENEW_BEFORE);
        cache.insert(
            key,
            Cached {
                record: digest,
                token: token.clone(),
                renew_at,
            },
        );
        Ok(token)
    }
}
