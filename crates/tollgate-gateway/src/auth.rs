//! Who is calling: the virtual key from `Authorization: Bearer` or `x-api-key`, and the
//! job each of its requests runs as (its id, priority class and queue bound).

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use tollgate::{JobContext, Models};

use crate::answering::Tags;
use crate::error::GatewayError;
use crate::extract::{decode, read_body};
use crate::failure::Refusal;
use crate::keys::{Keys, VirtualKey};
use crate::state::Gateway;

/// A route's request body, which names the catalog model it is for.
pub(crate) trait ForModel: DeserializeOwned + Send + 'static {
    /// The failure of the dialect the body is in, which refusing it is answered as.
    type Error: From<GatewayError> + IntoResponse;

    /// The catalog model the request asks for.
    fn model(&self) -> &str;
}

/// A model route's request, admitted: what every model route does first, in this order:
/// the key from the headers (401 before a byte of the body is read, so a wrong key costs
/// the same whatever it sends), the body (413, 408, 400), then the model (404, 403); the
/// request and the `Models` to call it through, with the request's [`Tags`] told the key
/// and the (catalog) model as they are learnt. Refused in the body's dialect
/// ([`ForModel::Error`]).
pub(crate) struct Admitted<T>(pub(crate) T, pub(crate) Models);

impl<T: ForModel> FromRequest<Arc<Gateway>> for Admitted<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &Arc<Gateway>) -> Result<Self, Response> {
        let refused = |e: GatewayError| T::Error::from(e).into_response();
        let (mut parts, body) = request.into_parts();
        let tags = tags_of(&mut parts, state).await?;
        let caller = Caller::authenticate(state, &parts.headers).map_err(refused)?;
        tags.key(caller.key_id());
        let bytes = read_body(state.body_limit, state.body_timing, &parts.headers, body)
            .await
            .map_err(refused)?;
        let request: T = decode(bytes).await.map_err(refused)?;
        // Labelled by the catalog id the name resolves to (an alias or pattern included),
        // so the series stay bounded by the catalog whatever names clients send.
        match state.models.catalog().model(request.model()) {
            Some(entry) => tags.model(&entry.id),
            None => tags.unknown_model(),
        }
        let models = caller
            .models_for(state, &parts.headers, request.model())
            .map_err(refused)?;
        Ok(Admitted(request, models))
    }
}

/// The request's [`Tags`], which the route's answering layer put there (a route served
/// without it is answered 500, as a missing extension is).
async fn tags_of(parts: &mut Parts, state: &Arc<Gateway>) -> Result<Arc<Tags>, Response> {
    let Extension(tags) = Extension::<Arc<Tags>>::from_request_parts(parts, state)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok(tags)
}

/// The caller, from the headers alone, with the request's [`Tags`] told its key;
/// refused (401) in the route's dialect.
impl FromRequestParts<Arc<Gateway>> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<Gateway>) -> Result<Self, Response> {
        let tags = tags_of(parts, state).await?;
        let caller = Caller::authenticate(state, &parts.headers)
            .map_err(|e| Refusal::new(e, tags.dialect()).into_response())?;
        tags.key(caller.key_id());
        Ok(caller)
    }
}

/// The request header that bounds this request's queue wait, in milliseconds.
pub const MAX_WAIT_HEADER: &str = "x-tollgate-max-wait-ms";

/// An authenticated caller: its key (`None` when the gateway runs open).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The keys it was found in and its place there: one reference count a request, not
    /// a copy of the key.
    key: Option<(Arc<Keys>, usize)>,
}

impl Caller {
    /// Checks the presented key before any other work: a gateway with keys refuses a
    /// request without one, or with one that matches none (401).
    pub(crate) fn authenticate(state: &Gateway, headers: &HeaderMap) -> Result<Self, GatewayError> {
        let Some(keys) = &state.keys else {
            return Ok(Caller { key: None });
        };
        let secret = presented_secret(headers).ok_or(GatewayError::Unauthorized)?;
        let at = keys
            .authenticate_at(secret)
            .ok_or(GatewayError::Unauthorized)?;
        Ok(Caller {
            key: Some((keys.clone(), at)),
        })
    }

    /// The caller's key (`None` on an open gateway).
    pub(crate) fn key(&self) -> Option<&VirtualKey> {
        self.key.as_ref().and_then(|(keys, at)| keys.at(*at))
    }

    /// The caller's key id (empty on an open gateway).
    pub(crate) fn key_id(&self) -> &str {
        self.key().map_or("", VirtualKey::id)
    }

    /// Whether the caller may use catalog model `model_id` (a catalog id; the key's
    /// `models` may name it by an alias).
    pub(crate) fn allows(&self, state: &Gateway, model_id: &str) -> bool {
        self.key()
            .is_none_or(|k| k.allows_in(state.models.catalog(), model_id))
    }

    /// The `Models` handle to call `model_id` through, for this caller: fails 404 for a
    /// name the catalog resolves to no model (by id, alias or pattern), 403 for a model
    /// the key may not use. Each request is one
    /// job (`key:<id>`, or `gateway` when open) at the key's priority, bounded by the
    /// `x-tollgate-max-wait-ms` header, else the key's `max_wait_ms`.
    pub(crate) fn models_for(
        &self,
        state: &Gateway,
        headers: &HeaderMap,
        model_id: &str,
    ) -> Result<Models, GatewayError> {
        let entry = state
            .models
            .catalog()
            .get(model_id)
            .map_err(tollgate::Error::from)?;
        if !self.allows(state, &entry.id) {
            return Err(GatewayError::ModelNotAllowed(model_id.to_owned()));
        }
        let id = match self.key() {
            Some(key) => format!("key:{}", key.id()),
            None => "gateway".to_owned(),
        };
        let mut job = JobContext::new(id, state.retries).with_queue_closed(state.queue_closed());
        if let Some(key) = self.key() {
            job = state.quotas.apply(key, job.with_priority(key.priority()));
        }
        let max_wait = match header_max_wait(headers)? {
            Some(wait) => Some(wait),
            None => self.key().and_then(VirtualKey::max_wait),
        };
        if let Some(wait) = max_wait {
            job = job.with_max_wait(wait);
        }
        Ok(state.models.for_job(job))
    }
}

/// The secret from `Authorization: Bearer <secret>` (OpenAI's SDKs; Anthropic's with an
/// auth token; the scheme in any case, as RFC 9110 says), else from `x-api-key`
/// (Anthropic's SDKs).
fn presented_secret(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    bearer
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

/// The token of an `Authorization` value whose scheme is `Bearer`, in any case.
fn bearer_token(value: &str) -> Option<&str> {
    let value = value.trim_start();
    let (scheme, token) = value.split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

fn header_max_wait(headers: &HeaderMap) -> Result<Option<Duration>, GatewayError> {
    let Some(value) = headers.get(MAX_WAIT_HEADER) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|ms| Some(Duration::from_millis(ms)))
        .ok_or(GatewayError::BadHeader {
            name: MAX_WAIT_HEADER,
            reason: "must be a whole number of milliseconds",
        })
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case() {
        for value in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "  bEaReR\ts3cret",
        ] {
            assert_eq!(bearer_token(value), Some("s3cret"), "{value}");
        }
        assert_eq!(bearer_token("Basic czNjcmV0"), None);
        assert_eq!(bearer_token("Bearers3cret"), None);
    }
}
