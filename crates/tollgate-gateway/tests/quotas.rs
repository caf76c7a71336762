//! A virtual key's own limits: its `rpm`/`tpm` caps pace (or, past the bound, refuse
//! with 429 and the exact `retry-after`) its requests below the model's limits, and its
//! daily budget refuses, with 402 and before anything is sent, a call whose worst case
//! no longer fits. On tokio's paused clock, in process.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{call, json_of, models, post, priced_models};
use serde_json::{Value, json};
use tollgate::Usage;
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{Gateway, Keys, hash_secret};

fn chat() -> Value {
    json!({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]})
}

fn bearer(secret: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {secret}"))
}

/// Keys `capped` (one request a minute of its own) and `free` (no caps).
fn capped_keys() -> Keys {
    Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"capped\"\nsecret_sha256 = \"{}\"\nrpm = 1\n\n\
         [[keys]]\nid = \"free\"\nsecret_sha256 = \"{}\"\n",
        hash_secret("capped-secret"),
        hash_secret("free-secret")
    ))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_keys_rpm_cap_paces_its_requests_below_the_models_limit() {
    let fake = FakeProvider::new();
    for _ in 0..4 {
        fake.reply_any(FakeReply::text("ok"));
    }
    // `chat` allows 6,000 a minute; the key `capped` one.
    let gateway = Gateway::new(models(&fake))
        .with_keys(capped_keys())
        .unwrap();
    let (name, value) = bearer("capped-secret");
    let auth = [(name, value.as_str())];
    let first = call(&gateway, post("/v1/chat/completions", &chat(), &auth)).await;
    assert_eq!(first.status(), StatusCode::OK);

    // Past the bound: 429 with the key's bucket's own schedule, at once, nothing sent.
    let mut bounded = auth.to_vec();
    bounded.push(("x-tollgate-max-wait-ms", "1000"));
    let started = tollgate::clock::now();
    let refused = call(&gateway, post("/v1/chat/completions", &chat(), &bounded)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "60");
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(json_of(refused).await["error"]["code"], "would_wait");
    assert_eq!(fake.calls("chat"), 1);

    // Another key is not held back by `capped`'s bucket.
    let (name, value) = bearer("free-secret");
    let other = call(
        &gateway,
        post("/v1/chat/completions", &chat(), &[(name, value.as_str())]),
    )
    .await;
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(started.elapsed(), Duration::ZERO);

    // Unbounded, the capped key's next request waits for its own refill, then is sent.
    let patient = call(&gateway, post("/v1/chat/completions", &chat(), &auth)).await;
    assert_eq!(patient.status(), StatusCode::OK);
    assert!(
        started.elapsed() >= Duration::from_secs(59),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fake.calls("chat"), 3);
}

#[tokio::test(start_paused = true)]
async fn a_keys_tpm_cap_larger_than_a_request_can_ever_fit_is_refused_naming_the_key() {
    let fake = FakeProvider::new();
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"tiny\"\nsecret_sha256 = \"{}\"\ntpm = 10\n",
        hash_secret("tiny-secret")
    ))
    .unwrap();
    let gateway = Gateway::new(models(&fake)).with_keys(keys).unwrap();
    let (name, value) = bearer("tiny-secret");
    // 64 output tokens reserved at least: more than the key's whole bucket of 10.
    let r = call(
        &gateway,
        post("/v1/chat/completions", &chat(), &[(name, value.as_str())]),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v = json_of(r).await;
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("key:tiny"), "{message}");
    assert_eq!(fake.calls("chat"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_keys_daily_budget_refuses_with_402_before_sending_once_the_worst_case_no_longer_fits() {
    let fake = FakeProvider::new();
    let spent = Usage {
        output_tokens: 50,
        ..Usage::default()
    };
    fake.reply_any(FakeReply::text("ok").with_usage(spent));
    let models = priced_models(&fake, None);
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"thrifty\"\nsecret_sha256 = \"{}\"\nbudget_usd_per_day = 0.1\n",
        hash_secret("thrifty-secret")
    ))
    .unwrap();
    let gateway = Gateway::new(models).with_keys(keys).unwrap();
    let (name, value) = bearer("thrifty-secret");
    let body = json!({"model": "priced", "messages": [{"role": "user", "content": "Hi"}]});
    let auth = [(name, value.as_str())];
    // $0.064 worst case fits $0.10; it settles at its actual $0.05.
    let first = call(&gateway, post("/v1/chat/completions", &body, &auth)).await;
    assert_eq!(first.status(), StatusCode::OK);
    // $0.064 no longer fits the $0.05 left: refused before anything is sent.
    for path in ["/v1/chat/completions", "/v1/messages"] {
        let mut body = body.clone();
        body["max_tokens"] = json!(64);
        let r = call(&gateway, post(path, &body, &auth)).await;
        assert_eq!(r.status(), StatusCode::PAYMENT_REQUIRED, "{path}");
        let v = json_of(r).await;
        let message = v["error"]["message"].to_string();
        assert!(message.contains("key:thrifty daily budget"), "{v}");
    }
    assert_eq!(fake.calls("priced"), 1);
}

/// One account book that two gateways share, as replicas share Redis
/// (`tollgate_redis::RedisSpend` in `tollgate serve --redis`).
#[derive(Debug, Default)]
struct SharedBook(std::sync::Mutex<std::collections::HashMap<String, (f64, f64)>>);

#[tollgate::async_trait]
impl tollgate::pipeline::SpendLedger for SharedBook {
    async fn hold(&self, cap: &str, usd: f64, limit: f64) -> tollgate::Result<Result<(), f64>> {
        let mut book = self.0.lock().unwrap();
        let (spent, held) = book.entry(cap.to_owned()).or_default();
        let left = limit - *spent - *held;
        if usd > left + 1e-12 {
            return Ok(Err(left));
        }
        *held += usd;
        Ok(Ok(()))
    }

    fn settle(&self, cap: &str, held_usd: f64, spent_usd: f64) {
        let mut book = self.0.lock().unwrap();
        let (spent, held) = book.entry(cap.to_owned()).or_default();
        *held -= held_usd;
        *spent += spent_usd;
    }
}

#[tokio::test(start_paused = true)]
async fn replicas_on_one_spend_ledger_share_a_keys_daily_budget() {
    let book: std::sync::Arc<dyn tollgate::pipeline::SpendLedger> =
        std::sync::Arc::new(SharedBook::default());
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"thrifty\"\nsecret_sha256 = \"{}\"\nbudget_usd_per_day = 0.1\n",
        hash_secret("thrifty-secret")
    ))
    .unwrap();
    let replica = |fake: &FakeProvider| {
        Gateway::new(priced_models(fake, None))
            .with_keys_on(
                keys.clone(),
                std::sync::Arc::new(tollgate::limit::InProcessLimiters),
                Some(book.clone()),
            )
            .unwrap()
    };
    let (fake_a, fake_b) = (FakeProvider::new(), FakeProvider::new());
    let spent = Usage {
        output_tokens: 50,
        ..Usage::default()
    };
    fake_a.reply_any(FakeReply::text("ok").with_usage(spent));
    fake_b.reply_any(FakeReply::text("ok").with_usage(spent));
    let (a, b) = (replica(&fake_a), replica(&fake_b));
    let body = json!({"model": "priced", "messages": [{"role": "user", "content": "Hi"}]});
    let auth = [("authorization", "Bearer thrifty-secret")];
    // $0.05 spent through replica A leaves $0.05: B refuses a $0.064 worst case.
    let first = call(&a, post("/v1/chat/completions", &body, &auth)).await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = call(&b, post("/v1/chat/completions", &body, &auth)).await;
    assert_eq!(second.status(), StatusCode::PAYMENT_REQUIRED);
    assert_eq!((fake_a.calls("priced"), fake_b.calls("priced")), (1, 0));
}
