//! What a key holder may ask of its key: `GET /v1/tollgate/key` answers the calling
//! key's limits, the room its own caps leave, what is left of today's budget and what it
//! spent today by model. An admin key (`admin = true` in the keys file) may ask the same
//! of every key: `GET /v1/tollgate/keys` (a page of them, in file order) and
//! `GET /v1/tollgate/keys/{id}`, and ask for a live reload, `POST /v1/tollgate/reload`.
//! Answered in OpenAI's dialect.

use std::sync::{Arc, Weak};

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Map, Value, json};

use crate::answering::{Route, Speaks};
use crate::auth::Caller;
use crate::error::GatewayError;
use crate::failure::OpenAiError;
use crate::keys::VirtualKey;
use crate::quota::{civil_date, today};
use crate::reload::ReloadError;
use crate::room::{self, Room};
use crate::state::Gateway;

/// `GET /v1/tollgate/key`.
pub(crate) const KEY: Route = Route::get("tollgate_key", "/v1/tollgate/key", Speaks::OpenAi);
/// `GET /v1/tollgate/keys`.
pub(crate) const KEYS: Route = Route::get("tollgate_keys", "/v1/tollgate/keys", Speaks::OpenAi);
/// `GET /v1/tollgate/keys/{id}`.
pub(crate) const ONE_KEY: Route = Route::get(
    "tollgate_keys_one",
    "/v1/tollgate/keys/{id}",
    Speaks::OpenAi,
);

/// The most keys one page of `GET /v1/tollgate/keys` holds (and its default, 100).
const MOST_PER_PAGE: usize = 1000;
const DEFAULT_PER_PAGE: usize = 100;

/// `GET /v1/tollgate/key`: the calling key's view (404 on a gateway without keys).
pub(crate) async fn own(
    State(state): State<Arc<Gateway>>,
    caller: Caller,
) -> Result<Json<Value>, OpenAiError> {
    let key = caller.key().ok_or(GatewayError::NoKeys)?;
    Ok(Json(view(&state, key).await))
}

/// A page's bounds from the query: `limit` keys after the key `after` (OpenAI's list
/// parameters; others are ignored).
#[derive(Debug, Default)]
struct Page {
    limit: Option<usize>,
    after: Option<String>,
}

impl Page {
    fn parse(query: &str) -> Result<Self, GatewayError> {
        let mut page = Page::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned();
            match name {
                "limit" => {
                    page.limit = Some(value.parse().map_err(|_| GatewayError::BadQuery {
                        name: "limit",
                        reason: format!("is `{value}`; give a whole number, 1 to {MOST_PER_PAGE}"),
                    })?);
                }
                "after" => page.after = Some(value),
                _ => {}
            }
        }
        Ok(page)
    }
}

/// `GET /v1/tollgate/keys`: a page of every key's view, for an admin key.
pub(crate) async fn all(
    State(state): State<Arc<Gateway>>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, OpenAiError> {
    admin(&caller)?;
    let page = Page::parse(query.as_deref().unwrap_or_default())?;
    let keys = state.keys.as_ref().ok_or(GatewayError::NoKeys)?;
    let limit = match page.limit {
        Some(n) if (1..=MOST_PER_PAGE).contains(&n) => n,
        Some(n) => {
            return Err(GatewayError::BadQuery {
                name: "limit",
                reason: format!("is {n}; give 1 to {MOST_PER_PAGE}"),
            }
            .into());
        }
        None => DEFAULT_PER_PAGE,
    };
    let start = match &page.after {
        Some(after) => {
            keys.position(after)
                .ok_or_else(|| GatewayError::UnknownKey(after.to_owned()))?
                + 1
        }
        None => 0,
    };
    let listed: Vec<&VirtualKey> = keys.iter().skip(start).take(limit + 1).collect();
    let has_more = listed.len() > limit;
    let mut data = Vec::with_capacity(limit);
    for key in listed.into_iter().take(limit) {
        data.push(view(&state, key).await);
    }
    let first = data.first().map(|k| k["id"].clone());
    let last = data.last().map(|k| k["id"].clone());
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "first_id": first,
        "last_id": last,
        "has_more": has_more,
    })))
}

/// `GET /v1/tollgate/keys/{id}`: one key's view, for an admin key.
pub(crate) async fn one(
    State(state): State<Arc<Gateway>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpenAiError> {
    admin(&caller)?;
    let keys = state.keys.as_ref().ok_or(GatewayError::NoKeys)?;
    let key = keys.get(&id).ok_or(GatewayError::UnknownKey(id))?;
    Ok(Json(view(&state, key).await))
}

/// Refuses a caller that is not an admin key (on a gateway without keys: there is none).
fn admin(caller: &Caller) -> Result<(), GatewayError> {
    match caller.key() {
        None => Err(GatewayError::NoKeys),
        Some(key) if key.is_admin() => Ok(()),
        Some(_) => Err(GatewayError::NotAdmin),
    }
}

/// `key`'s view: its settings, the room its caps leave, its budget today and its spend
/// today by model.
async fn view(state: &Gateway, key: &VirtualKey) -> Value {
    let day = today();
    let caps = key.caps();
    let limits = json!({
        "rpm": (caps.rpm > 0).then_some(caps.rpm),
        "tpm": (caps.tpm > 0).then_some(caps.tpm),
    });
    let room_left = rooms(&room::for_key(state, key.id()).await);
    let budget = state.quotas.budget(key.id()).map(|budget| {
        let cap = budget.on(day);
        json!({
            "usd_per_day": budget.limit_usd(),
            "spent_usd": cap.spent_usd(),
            "held_usd": cap.held_usd(),
            "remaining_usd": cap.remaining_usd(),
        })
    });
    let by_model = state.metrics.spent_today.of(day, key.id());
    let total: f64 = by_model.values().sum();
    json!({
        "object": "tollgate.key",
        "id": key.id(),
        "admin": key.is_admin(),
        "models": key.models(),
        "priority": key.priority().as_str(),
        "max_wait_ms": key.max_wait().map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        "limits": limits,
        "room": room_left,
        "day": civil_date(day),
        "budget": budget,
        "spent_today": {"total_usd": total, "by_model": by_model},
    })
}

/// Rooms as `{"requests": {"limit", "remaining", "reset_ms"}, …}`.
fn rooms(rooms: &[Room]) -> Value {
    let mut out = Map::new();
    for room in rooms {
        let Some(name) = room::dimension_name(room.dimension) else {
            continue;
        };
        out.insert(
            name.to_owned(),
            json!({
                "limit": room.limit,
                "remaining": room.remaining,
                "reset_ms": u64::try_from(room.reset.as_millis()).unwrap_or(u64::MAX),
            }),
        );
    }
    Value::Object(out)
}

/// `POST /v1/tollgate/reload`.
pub(crate) const RELOAD: Route =
    Route::post("tollgate_reload", "/v1/tollgate/reload", Speaks::OpenAi);

/// `POST /v1/tollgate/reload`, for an admin key: reloads, and answers what is served
/// now, or 400 with why the reload was refused (the old catalog and keys kept).
pub(crate) async fn reload(
    State(state): State<Arc<Gateway>>,
    caller: Caller,
) -> Result<Json<Value>, OpenAiError> {
    admin(&caller)?;
    let live = state
        .live
        .as_ref()
        .and_then(Weak::upgrade)
        .ok_or(GatewayError::Reload(ReloadError::NotReloadable))?;
    // The source reads files: off the runtime's workers.
    let outcome = tokio::task::spawn_blocking(move || live.reload())
        .await
        .map_err(|_| GatewayError::Reload(ReloadError::NotReloadable))?;
    let reloaded = outcome.map_err(GatewayError::Reload)?;
    Ok(Json(json!({
        "object": "tollgate.reload",
        "reloaded": true,
        "models": reloaded.models,
        "keys": reloaded.keys,
    })))
}
