//! `GET /v1/models` and `GET /v1/models/{id}`: the catalog's models (and their aliases)
//! that the caller may use, in OpenAI's shape, or in Anthropic's when the request carries
//! an `anthropic-version` header (as Anthropic's SDKs and Claude Code send).
//!
//! Every catalog model is an item, with its `aliases` and `patterns` as extra fields;
//! every alias is an item of its own whose `catalog_id` names its model, so a client
//! that picks from the list (Claude Code's model discovery) finds the names it knows.
//! Patterns are not items: they are no name a client could pick, only a rule the catalog
//! resolves names by. `GET /v1/models/{id}` resolves the id as a chat request would (id,
//! alias, then pattern) and answers the item under the name asked for.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};
use tollgate::ModelEntry;

use crate::answering::{Route, Speaks, Tags};
use crate::auth::Caller;
use crate::error::{Dialect, GatewayError};
use crate::failure::Refusal;
use crate::state::Gateway;

/// `GET /v1/models`, as its metrics and span name it; like `GET /v1/models/{id}`, in
/// Anthropic's shape when the request carries `anthropic-version`.
pub(crate) const LIST: Route = Route::get("models", "/v1/models", Speaks::ByVersionHeader);

/// `GET /v1/models/{id}`, as its metrics and span name it.
pub(crate) const RETRIEVE: Route = Route::get("model", "/v1/models/{id}", Speaks::ByVersionHeader);

/// When a request lists no `limit`: Anthropic's default page size.
const DEFAULT_LIMIT: usize = 20;

/// The largest page Anthropic's API serves.
const MAX_LIMIT: usize = 1000;

/// The RFC 3339 time given as every model's `created_at`: the catalog has no release
/// dates, and Anthropic's API documents the epoch for an unknown one.
const EPOCH: &str = "1970-01-01T00:00:00Z";

/// One name the catalog serves: a model's id, or an alias of it.
struct Listed<'c> {
    name: &'c str,
    entry: &'c ModelEntry,
}

impl Listed<'_> {
    fn is_alias(&self) -> bool {
        self.name != self.entry.id
    }

    /// The item in `dialect`'s shape, with tollgate's fields beside the dialect's.
    fn item(&self, dialect: Dialect) -> Value {
        let mut item = match dialect {
            Dialect::OpenAi => json!({
                "id": self.name,
                "object": "model",
                "created": 0,
                "owned_by": self.entry.provider,
            }),
            Dialect::Anthropic => json!({
                "type": "model",
                "id": self.name,
                "display_name": self.name,
                "created_at": EPOCH,
            }),
        };
        item["kind"] = self.entry.kind.as_str().into();
        item["catalog_id"] = self.entry.id.as_str().into();
        if !self.is_alias() {
            item["aliases"] = json!(self.entry.aliases);
            item["patterns"] = json!(self.entry.patterns);
        }
        if dialect == Dialect::Anthropic {
            // Anthropic's optional limits, where the catalog has them.
            if let Some(max) = self.entry.max_output_tokens {
                item["max_tokens"] = max.into();
            }
            if let Some(window) = self.entry.context_window {
                item["max_input_tokens"] = window.into();
            }
        }
        item
    }
}

/// Every name the caller may use: each catalog model, then its aliases, by id.
fn listed<'c>(state: &'c Gateway, caller: &Caller) -> Vec<Listed<'c>> {
    let catalog = state.models.catalog();
    let mut names = Vec::new();
    for entry in catalog.models().filter(|m| caller.allows(state, &m.id)) {
        names.push(Listed {
            name: &entry.id,
            entry,
        });
        let mut aliases: Vec<&str> = entry.aliases.iter().map(String::as_str).collect();
        aliases.sort_unstable();
        names.extend(aliases.into_iter().map(|name| Listed { name, entry }));
    }
    names
}

/// `GET /v1/models`, in the request's dialect ([`Speaks::ByVersionHeader`]).
pub(crate) async fn list(
    State(state): State<Arc<Gateway>>,
    Extension(tags): Extension<Arc<Tags>>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, Refusal> {
    let dialect = tags.dialect();
    let names = listed(&state, &caller);
    let body = match dialect {
        Dialect::OpenAi => {
            let data: Vec<Value> = names.iter().map(|n| n.item(dialect)).collect();
            json!({"object": "list", "data": data})
        }
        Dialect::Anthropic => {
            let page = Page::parse(query.as_deref().unwrap_or_default())
                .map_err(|e| Refusal::new(e, dialect))?;
            anthropic_page(&names, &page)
        }
    };
    Ok(Json(body).into_response())
}

/// Anthropic's list parameters: `limit`, and `after_id` or `before_id`.
#[derive(Debug, Default)]
struct Page {
    limit: Option<usize>,
    after_id: Option<String>,
    before_id: Option<String>,
}

/// `GET /v1/models`' query as it is sent, before its values are checked.
#[derive(Debug, Default, serde::Deserialize)]
struct PageQuery {
    #[serde(default)]
    limit: Option<String>,
    #[serde(default)]
    after_id: Option<String>,
    #[serde(default)]
    before_id: Option<String>,
}

impl Page {
    fn parse(query: &str) -> Result<Self, GatewayError> {
        let query: PageQuery =
            serde_urlencoded::from_str(query).map_err(|e| GatewayError::BadQuery {
                name: "query",
                reason: e.to_string(),
            })?;
        let limit = match query.limit {
            None => None,
            Some(value) => Some(
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| GatewayError::BadQuery {
                        name: "limit",
                        reason: format!(
                            "must be a whole number from 1 to {MAX_LIMIT}, got `{value}`"
                        ),
                    })?,
            ),
        };
        Ok(Page {
            limit,
            after_id: query.after_id,
            before_id: query.before_id,
        })
    }
}

/// One page of `names` in Anthropic's shape: the items after `after_id` (or before
/// `before_id`), at most `limit`, with `has_more`, `first_id` and `last_id`.
fn anthropic_page(names: &[Listed<'_>], page: &Page) -> Value {
    let position = |id: &str| names.iter().position(|n| n.name == id);
    let limit = page.limit.unwrap_or(DEFAULT_LIMIT);
    let (start, end) = match (&page.after_id, &page.before_id) {
        (Some(after), _) => {
            let start = position(after).map_or(names.len(), |i| i + 1);
            (start, names.len().min(start + limit))
        }
        (None, Some(before)) => {
            let end = position(before).unwrap_or(0);
            (end.saturating_sub(limit), end)
        }
        (None, None) => (0, names.len().min(limit)),
    };
    let items = &names[start..end];
    let has_more = if page.before_id.is_some() && page.after_id.is_none() {
        start > 0
    } else {
        end < names.len()
    };
    let data: Vec<Value> = items.iter().map(|n| n.item(Dialect::Anthropic)).collect();
    json!({
        "data": data,
        "has_more": has_more,
        "first_id": items.first().map(|n| n.name),
        "last_id": items.last().map(|n| n.name),
    })
}

/// `GET /v1/models/{id}`, in the request's dialect ([`Speaks::ByVersionHeader`]).
pub(crate) async fn retrieve(
    State(state): State<Arc<Gateway>>,
    Extension(tags): Extension<Arc<Tags>>,
    caller: Caller,
    uri: Uri,
) -> Result<Response, Refusal> {
    // The id as sent: everything after the prefix (a pattern's name may hold a `/`).
    let name = uri
        .path()
        .strip_prefix("/v1/models/")
        .map(|id| {
            percent_encoding::percent_decode_str(id)
                .decode_utf8_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let dialect = tags.dialect();
    let entry = match state.models.catalog().get(&name) {
        Ok(entry) => entry,
        Err(unknown) => {
            tags.unknown_model();
            return Err(Refusal::new(tollgate::Error::from(unknown), dialect));
        }
    };
    tags.model(&entry.id);
    if !caller.allows(&state, &entry.id) {
        return Err(Refusal::new(GatewayError::ModelNotAllowed(name), dialect));
    }
    let listed = Listed { name: &name, entry };
    Ok(Json(listed.item(dialect)).into_response())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use tollgate::{Catalog, Models};
    use tower::ServiceExt;

    use crate::answering::served;
    use crate::state::Gateway;

    fn gateway() -> Gateway {
        let catalog = r#"
            [models.chat]
            provider = "fake"
            name = "fake-chat"
            rpm = 60
            max_output_tokens = 64
        "#;
        let catalog = Catalog::from_toml_str(catalog).unwrap();
        Gateway::new(Models::builder().catalog(catalog).build().unwrap())
    }

    async fn status(router: Router<Arc<Gateway>>, gateway: Arc<Gateway>) -> StatusCode {
        let request = Request::get("/v1/models").body(Body::empty()).unwrap();
        let response = router.with_state(gateway).oneshot(request).await.unwrap();
        response.status()
    }

    #[tokio::test]
    async fn a_model_route_is_served_only_under_its_answering_layer() {
        let gateway = Arc::new(gateway());
        let bare = Router::new().route("/v1/models", get(super::list));
        assert_eq!(
            status(bare, gateway.clone()).await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let layered = Router::new().route("/v1/models", served(&gateway, super::LIST, super::list));
        assert_eq!(status(layered, gateway.clone()).await, StatusCode::OK);
        let text = gateway.metrics.encode();
        assert!(text.contains(r#"route="models""#), "{text}");
    }
}
