//! Where `vertex` gets its OAuth access tokens.
//!
//! Vertex takes `Authorization: Bearer <access token>` (scope `cloud-platform`), never
//! an API key. A [`TokenSource`] turns a model's credential into a token; the kit's
//! endpoint asks it once per request ([`SecretSource`]), so the token is
//! sent as a sensitive header and redacted from error messages like a key.
//!
//! With the `vertex` feature, the source is Google's own auth crate
//! (`google-cloud-auth`):
//!
//! - a model that names a `credential`: that record in the credential store is a
//!   service-account key (the JSON file Google issues). It is read on every call (so a
//!   rotated key is used at once); the credentials made from it are kept while the record
//!   is unchanged, and cache and renew their tokens before expiry. A service-account key
//!   signs its own tokens (a self-signed JWT): nothing is fetched from Google for it.
//! - a model without one: **Application Default Credentials** (the
//!   `GOOGLE_APPLICATION_CREDENTIALS` file, gcloud's ADC file, or the metadata server),
//!   made once per provider. This is the one place where tollgate reads the environment,
//!   and only through Google's crate, as the Bedrock provider uses the AWS chain.
//!
//! An application with its own token broker (or a test) gives
//! [`GeminiProvider::vertex_with_tokens`](crate::GeminiProvider::vertex_with_tokens) its
//! own source.

use std::fmt;
use std::sync::Arc;

use tollgate::provider::ProviderContext;
use tollgate::provider::http::SecretSource;
use tollgate::provider::{ModelEntry, Result, Secret};

/// The OAuth scope Vertex AI's Gemini endpoints need.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Makes OAuth access tokens for `vertex` models.
#[tollgate::provider::async_trait]
pub trait TokenSource: Send + Sync + fmt::Debug {
    /// A valid access token for `credential`: the model's credential id in the
    /// credential store, or `None` for a model that names none.
    async fn access_token(&self, credential: Option<&str>) -> Result<Secret>;
}

/// One model's tokens: its credential id and the provider's source.
#[derive(Debug)]
pub(crate) struct ModelTokens {
    tokens: Arc<dyn TokenSource>,
    credential: Option<String>,
    id: String,
}

impl ModelTokens {
    pub(crate) fn new(tokens: Arc<dyn TokenSource>, model: &ModelEntry) -> Self {
        let credential = model.credential.clone();
        let id = credential
            .clone()
            .unwrap_or_else(|| "application default credentials".to_owned());
        ModelTokens {
            tokens,
            credential,
            id,
        }
    }
}

#[tollgate::provider::async_trait]
impl SecretSource for ModelTokens {
    async fn secret(&self) -> Result<Secret> {
        self.tokens.access_token(self.credential.as_deref()).await
    }

    fn id(&self) -> &str {
        &self.id
    }
}

/// The provider's token source when none was given: Google's credentials.
#[cfg(feature = "vertex")]
pub(crate) fn google_tokens(context: &ProviderContext) -> Result<Arc<dyn TokenSource>> {
    Ok(Arc::new(google::GoogleTokens::new(
        context.credentials().clone(),
    )))
}

/// Without the `vertex` feature the `vertex` key is not registered, and a provider made
/// with [`crate::GeminiProvider::vertex_with_tokens`] brings its own source.
#[cfg(not(feature = "vertex"))]
pub(crate) fn google_tokens(context: &ProviderContext) -> Result<Arc<dyn TokenSource>> {
    Err(tollgate::provider::Error::Catalog(
        tollgate::provider::CatalogError::InvalidSection {
            field: format!("providers.{}", context.key()),
            reason: "tollgate-gemini was built without its `vertex` feature: enable it, or \
                     give the provider a token source"
                .into(),
        },
    ))
}

#[cfg(feature = "vertex")]
mod google {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use google_cloud_auth::credentials::service_account::{self, AccessSpecifier};
    use google_cloud_auth::credentials::{self, AccessTokenCredentials};
    use sha2::{Digest, Sha256};
    use tokio::sync::OnceCell;
    use tollgate::provider::connection_error;
    use tollgate::provider::{CredentialStore, Secret};
    use tollgate::provider::{Error, Result};

    use super::{CLOUD_PLATFORM_SCOPE, TokenSource};

    /// Google's credentials: service-account keys from the store, else ADC.
    #[derive(Debug)]
    pub(super) struct GoogleTokens {
        store: Arc<dyn CredentialStore>,
        /// Per credential id: the digest of the record the credentials were made from
        /// (never the record) and the credentials, which cache their tokens.
        accounts: Mutex<HashMap<String, ([u8; 32], AccessTokenCredentials)>>,
        adc: OnceCell<AccessTokenCredentials>,
    }

    impl GoogleTokens {
        pub(super) fn new(store: Arc<dyn CredentialStore>) -> Self {
            GoogleTokens {
                store,
                accounts: Mutex::new(HashMap::new()),
                adc: OnceCell::new(),
            }
        }

        fn service_account(&self, id: &str, record: &Secret) -> Result<AccessTokenCredentials> {
            let digest: [u8; 32] = Sha256::digest(record.expose_secret().as_bytes()).into();
            let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((seen, credentials)) = accounts.get(id)
                && *seen == digest
            {
                return Ok(credentials.clone());
            }
            let not_a_key = |why: String| Error::InvalidRequest {
                field: "credential".into(),
                reason: format!(
                    "`{id}` is not a Google service-account key (the JSON with `client_email`, \
                     `private_key_id` and `private_key` that Google issues): {why}"
                ),
            };
            let json: serde_json::Value = serde_json::from_str(record.expose_secret())
                .map_err(|e| not_a_key(format!("not JSON (line {})", e.line())))?;
            let credentials = service_account::Builder::new(json)
                .with_access_specifier(AccessSpecifier::from_scopes([CLOUD_PLATFORM_SCOPE]))
                .build_access_token_credentials()
                .map_err(|e| not_a_key(e.to_string()))?;
            accounts.insert(id.to_owned(), (digest, credentials.clone()));
            Ok(credentials)
        }

        async fn adc(&self) -> Result<&AccessTokenCredentials> {
            self.adc
                .get_or_try_init(|| async {
                    credentials::Builder::default()
                        .with_scopes([CLOUD_PLATFORM_SCOPE])
                        .build_access_token_credentials()
                        .map_err(|e| Error::InvalidRequest {
                            field: "credential".into(),
                            reason: format!(
                                "names none, and Application Default Credentials could not be \
                                 loaded: {e}; name a service-account key in the credential \
                                 store, or set up ADC"
                            ),
                        })
                })
                .await
        }
    }

    #[tollgate::provider::async_trait]
    impl TokenSource for GoogleTokens {
        async fn access_token(&self, credential: Option<&str>) -> Result<Secret> {
            let credentials = match credential {
                Some(id) => {
                    let record = self.store.get(id).await?;
                    self.service_account(id, &record)?
                }
                None => self.adc().await?.clone(),
            };
            match credentials.access_token().await {
                Ok(token) => Ok(Secret::new(token.token)),
                // The token endpoint or metadata server did not answer: a connection
                // failure with its cause, so the pipeline retries it.
                Err(e) if e.is_transient() => Err(connection_error(&e, &[]).into()),
                Err(e) => Err(Error::InvalidRequest {
                    field: "credential".into(),
                    reason: format!(
                        "`{}` gave no access token: {e}",
                        credential.unwrap_or("application default credentials")
                    ),
                }),
            }
        }
    }
}
