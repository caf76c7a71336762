//! Room for each client and usage for each key: the `x-ratelimit-*` headers on every
//! model answer (the tighter of the model's and the key's buckets), `GET
//! /v1/tollgate/key` for the calling key, and the admin view over every key. On tokio's
//! paused clock, in process.

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, json_of, models, post, priced_models};
use serde_json::{Value, json};
use tollgate::Usage;
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{Gateway, GatewayMetrics, Keys, hash_secret};

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]})
}

fn get(path: &str, secret: &str) -> Request<Body> {
    Request::get(path)
        .header("authorization", format!("Bearer {secret}"))
        .body(Body::empty())
        .unwrap()
}

/// `capped` (two requests a minute, may call only `model`, with a $1 daily budget when
/// `model` is priced), `free` (nothing of its own) and `ops` (an admin key).
fn keys(model: &str) -> Keys {
    let budget = if model == "priced" {
        "budget_usd_per_day = 1.0\n"
    } else {
        ""
    };
    Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"capped\"\nsecret_sha256 = \"{}\"\nrpm = 2\n{budget}\
         priority = \"batch\"\nmodels = [\"{model}\"]\n\n\
         [[keys]]\nid = \"free\"\nsecret_sha256 = \"{}\"\n\n\
         [[keys]]\nid = \"ops\"\nsecret_sha256 = \"{}\"\nadmin = true\n",
        hash_secret("capped-secret"),
        hash_secret("free-secret"),
        hash_secret("ops-secret"),
    ))
    .unwrap()
}

fn header<'a>(response: &'a axum::http::Response<Body>, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test(start_paused = true)]
async fn every_model_answer_carries_the_tighter_room_of_model_and_key_as_x_ratelimit_headers() {
    let fake = FakeProvider::new();
    fake.on(|_| true, FakeReply::text("ok"));
    // `chat`: 6,000 requests a minute, no token limit.
    let gateway = Gateway::new(models(&fake)).with_keys(keys("chat")).unwrap();
    let free = [("authorization", "Bearer free-secret")];
    let answer = call(&gateway, post("/v1/chat/completions", &chat("chat"), &free)).await;
    assert_eq!(answer.status(), StatusCode::OK);
    // The model's bucket: one request taken, refilling at 100 a second.
    assert_eq!(header(&answer, "x-ratelimit-limit-requests"), Some("6000"));
    assert_eq!(
        header(&answer, "x-ratelimit-remaining-requests"),
        Some("5999")
    );
    assert_eq!(header(&answer, "x-ratelimit-reset-requests"), Some("10ms"));
    assert_eq!(header(&answer, "x-ratelimit-limit-tokens"), None);

    // A key whose own cap (2 a minute) is tighter than the model's: its bucket is told.
    let capped = Gateway::new(priced_models(&fake, None))
        .with_keys(keys("priced"))
        .unwrap();
    let auth = [("authorization", "Bearer capped-secret")];
    let first = call(
        &capped,
        post("/v1/chat/completions", &chat("priced"), &auth),
    )
    .await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(header(&first, "x-ratelimit-limit-requests"), Some("2"));
    assert_eq!(header(&first, "x-ratelimit-remaining-requests"), Some("1"));
    assert_eq!(header(&first, "x-ratelimit-reset-requests"), Some("30s"));
    // Anthropic's route too, and a refusal (429 past the bound) says the same room.
    let second = call(
        &capped,
        post(
            "/v1/messages",
            &json!({"model": "priced", "max_tokens": 16,
            "messages": [{"role": "user", "content": "Hi"}]}),
            &auth,
        ),
    )
    .await;
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(header(&second, "x-ratelimit-remaining-requests"), Some("0"));
    assert_eq!(header(&second, "x-ratelimit-reset-requests"), Some("1m0s"));
    let mut bounded = auth.to_vec();
    bounded.push(("x-tollgate-max-wait-ms", "0"));
    let refused = call(
        &capped,
        post("/v1/chat/completions", &chat("priced"), &bounded),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(&refused, "x-ratelimit-remaining-requests"),
        Some("0")
    );
    // A request for a model the catalog lacks has no model's room to tell.
    let unknown = call(&gateway, post("/v1/chat/completions", &chat("nope"), &free)).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(header(&unknown, "x-ratelimit-limit-requests"), None);
}

#[tokio::test(start_paused = true)]
async fn a_key_reads_its_limits_room_budget_and_spend_today_by_model() {
    let fake = FakeProvider::new();
    // $1,000 per million output tokens: 100 tokens cost $0.10.
    fake.on(
        |_| true,
        FakeReply::text("ok").with_usage(Usage {
            output_tokens: 100,
            ..Usage::default()
        }),
    );
    let metrics = Arc::new(GatewayMetrics::new());
    let gateway = Gateway::new(priced_models(&fake, Some(metrics.clone())))
        .with_metrics(metrics)
        .with_keys(keys("priced"))
        .unwrap();
    let auth = [("authorization", "Bearer capped-secret")];
    let answer = call(
        &gateway,
        post("/v1/chat/completions", &chat("priced"), &auth),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::OK);

    let view = call(&gateway, get("/v1/tollgate/key", "capped-secret")).await;
    assert_eq!(view.status(), StatusCode::OK);
    let view = json_of(view).await;
    assert_eq!(view["object"], "tollgate.key");
    assert_eq!(view["id"], "capped");
    assert_eq!(view["admin"], false);
    assert_eq!(view["models"], json!(["priced"]));
    assert_eq!(view["priority"], "batch");
    assert_eq!(view["limits"], json!({"rpm": 2, "tpm": null}));
    assert_eq!(
        view["room"]["requests"],
        json!({"limit": 2, "remaining": 1, "reset_ms": 30000})
    );
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(close(&view["budget"]["usd_per_day"], 1.0), "{view}");
    assert!(close(&view["budget"]["spent_usd"], 0.1), "{view}");
    assert!(close(&view["budget"]["remaining_usd"], 0.9), "{view}");
    assert!(
        close(&view["spent_today"]["by_model"]["priced"], 0.1),
        "{view}"
    );
    assert!(close(&view["spent_today"]["total_usd"], 0.1), "{view}");
    assert_eq!(view["day"].as_str().unwrap().len(), 10);

    // Another key's view holds only its own: nothing spent, no caps, no budget.
    let free = json_of(call(&gateway, get("/v1/tollgate/key", "free-secret")).await).await;
    assert_eq!(free["id"], "free");
    assert_eq!(free["budget"], Value::Null);
    assert_eq!(free["room"], json!({}));
    assert_eq!(free["spent_today"]["by_model"], json!({}));
    // A wrong key learns nothing.
    let wrong = call(&gateway, get("/v1/tollgate/key", "guess")).await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test(start_paused = true)]
async fn the_view_of_every_key_is_for_an_admin_key_only_and_pages_in_file_order() {
    let fake = FakeProvider::new();
    let gateway = Gateway::new(models(&fake)).with_keys(keys("chat")).unwrap();
    let refused = call(&gateway, get("/v1/tollgate/keys", "free-secret")).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(json_of(refused).await["error"]["code"], "not_admin");
    let refused = call(&gateway, get("/v1/tollgate/keys/capped", "free-secret")).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);

    let all = json_of(call(&gateway, get("/v1/tollgate/keys", "ops-secret")).await).await;
    let ids: Vec<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["capped", "free", "ops"]);
    assert_eq!(all["has_more"], false);
    let page = json_of(call(&gateway, get("/v1/tollgate/keys?limit=1", "ops-secret")).await).await;
    assert_eq!(page["data"][0]["id"], "capped");
    assert_eq!(page["has_more"], true);
    assert_eq!(page["last_id"], "capped");
    let next = json_of(
        call(
            &gateway,
            get("/v1/tollgate/keys?limit=1&after=capped", "ops-secret"),
        )
        .await,
    )
    .await;
    assert_eq!(next["data"][0]["id"], "free");
    let bad = call(&gateway, get("/v1/tollgate/keys?limit=0", "ops-secret")).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    let one = json_of(call(&gateway, get("/v1/tollgate/keys/capped", "ops-secret")).await).await;
    assert_eq!(one["id"], "capped");
    assert_eq!(one["limits"]["rpm"], 2);
    let missing = call(&gateway, get("/v1/tollgate/keys/nobody", "ops-secret")).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(json_of(missing).await["error"]["code"], "key_not_found");

    // A gateway without keys has no key to describe.
    let open = Gateway::new(models(&fake));
    let none = call(&open, get("/v1/tollgate/key", "anything")).await;
    assert_eq!(none.status(), StatusCode::NOT_FOUND);
    assert_eq!(json_of(none).await["error"]["code"], "no_keys");
}
