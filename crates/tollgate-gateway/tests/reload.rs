//! Live reload: a [`LiveGateway`] swaps keys and catalog whole for the requests to come;
//! a request in flight finishes on what it started with; a model whose limits did not
//! change keeps its limiter (level and queue), a key whose caps did not its buckets;
//! a reload that does not parse is refused with the reason and the old one kept; the
//! admin route asks for one. On tokio's paused clock, in process.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{json_of, post};
use serde_json::{Value, json};
use tollgate::{Catalog, Models};
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{Gateway, Keys, LiveGateway, ReloadError, hash_secret};
use tower::ServiceExt;

/// `chat` answers at once (rpm given); `slow` takes one request a minute.
fn catalog(chat_rpm: u64) -> String {
    format!(
        "[models.chat]\nprovider = \"fake\"\nname = \"fake-chat\"\nrpm = {chat_rpm}\n\
         max_output_tokens = 64\narrival_allowance_ms = 0\n\n\
         [models.slow]\nprovider = \"fake\"\nname = \"fake-slow\"\nrpm = 1\n\
         max_output_tokens = 64\narrival_allowance_ms = 0\n"
    )
}

/// Keys `ids` (secret `<id>-secret`); `admin` is an admin key, `capped` has rpm 1.
fn keys(ids: &[&str]) -> String {
    ids.iter()
        .map(|id| {
            let extra = match *id {
                "admin" => "admin = true\n",
                "capped" => "rpm = 1\n",
                _ => "",
            };
            format!(
                "[[keys]]\nid = \"{id}\"\nsecret_sha256 = \"{}\"\n{extra}\n",
                hash_secret(&format!("{id}-secret"))
            )
        })
        .collect()
}

/// The files a reload reads, as the test writes them.
#[derive(Clone)]
struct Files(Arc<Mutex<(String, String)>>);

impl Files {
    fn write(&self, catalog: String, keys: String) {
        *self.0.lock().unwrap() = (catalog, keys);
    }
}

/// A live gateway over `fake`, reloading from `files` as `tollgate serve` does.
fn live(fake: &FakeProvider, files: &Files) -> Arc<LiveGateway> {
    let (catalog, keys) = files.0.lock().unwrap().clone();
    let models = Models::builder()
        .catalog(Catalog::from_toml_str(&catalog).unwrap())
        .provider(fake.clone())
        .build()
        .unwrap();
    let gateway = Gateway::new(models)
        .with_keys(Keys::from_toml_str(&keys).unwrap())
        .unwrap();
    let files = files.clone();
    LiveGateway::reloading(gateway, move |current| {
        let (catalog, keys) = files.0.lock().unwrap().clone();
        let models = current
            .models()
            .reloaded(Catalog::from_toml_str(&catalog)?)?;
        Ok(current.reloaded(models, Some(Keys::from_toml_str(&keys)?))?)
    })
}

/// The limiter snapshot of `gateway`'s model `slow`.
async fn slow_snapshot(gateway: &Gateway) -> tollgate::limit::LimiterSnapshot {
    let limiter = gateway.models().limiter("slow").unwrap();
    limiter.snapshot().await.unwrap()
}

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]})
}

async fn ask(live: &Arc<LiveGateway>, model: &str, key: &str, wait_ms: Option<&str>) -> StatusCode {
    let secret = format!("Bearer {key}-secret");
    let mut headers = vec![("authorization", secret.as_str())];
    if let Some(ms) = wait_ms {
        headers.push(("x-tollgate-max-wait-ms", ms));
    }
    let request = post("/v1/chat/completions", &chat(model), &headers);
    live.router().oneshot(request).await.unwrap().status()
}

#[tokio::test(start_paused = true)]
async fn a_reload_serves_new_keys_to_new_requests_while_one_in_flight_finishes_on_the_old() {
    let fake = FakeProvider::new();
    fake.on(|_| true, FakeReply::text("ok"));
    fake.with_latency(Duration::from_secs(10));
    let files = Files(Arc::new(Mutex::new((catalog(6000), keys(&["old"])))));
    let live = live(&fake, &files);
    // In flight across the reload: admitted by the key `old`, answered after it is revoked.
    let in_flight = tokio::spawn({
        let live = live.clone();
        async move { ask(&live, "chat", "old", None).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    files.write(catalog(6000), keys(&["new"]));
    let reloaded = live.reload().unwrap();
    assert_eq!((reloaded.models, reloaded.keys), (2, Some(1)));
    assert_eq!(
        ask(&live, "chat", "old", None).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(ask(&live, "chat", "new", None).await, StatusCode::OK);
    assert_eq!(in_flight.await.unwrap(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_model_and_a_key_whose_limits_did_not_change_keep_their_buckets_and_queue_across_a_reload()
 {
    let fake = FakeProvider::new();
    fake.on(|_| true, FakeReply::text("ok"));
    let files = Files(Arc::new(Mutex::new((
        catalog(6000),
        keys(&["a", "capped"]),
    ))));
    let live = live(&fake, &files);
    // `slow` spends its one request a minute; another waits in its queue.
    assert_eq!(ask(&live, "slow", "a", None).await, StatusCode::OK);
    let queued = tokio::spawn({
        let live = live.clone();
        async move { ask(&live, "slow", "a", None).await }
    });
    // `capped` spends its own one request a minute (on `chat`).
    assert_eq!(ask(&live, "chat", "capped", None).await, StatusCode::OK);
    tokio::task::yield_now().await;
    let before = live.current();
    let slow_before = slow_snapshot(&before).await;
    assert_eq!(slow_before.queued, 1);

    // `chat`'s limit changes; `slow`'s and the keys' do not.
    files.write(catalog(3000), keys(&["a", "capped"]));
    live.reload().unwrap();
    let after = live.current();
    assert!(Arc::ptr_eq(
        before.models().limiter("slow").unwrap(),
        after.models().limiter("slow").unwrap()
    ));
    assert!(!Arc::ptr_eq(
        before.models().limiter("chat").unwrap(),
        after.models().limiter("chat").unwrap()
    ));
    let slow_after = slow_snapshot(&after).await;
    assert_eq!((slow_after.grants, slow_after.queued), (1, 1));
    // Still spent: past a bound of nothing, `slow` and the key `capped` refuse at once,
    // which fresh buckets would not.
    assert_eq!(
        ask(&live, "slow", "a", Some("0")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        ask(&live, "chat", "capped", Some("0")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(ask(&live, "chat", "a", Some("0")).await, StatusCode::OK);
    // The request queued before the reload is served when `slow` refills.
    assert_eq!(queued.await.unwrap(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_reload_that_does_not_parse_or_fit_is_refused_with_the_reason_and_the_old_one_kept() {
    let fake = FakeProvider::new();
    fake.on(|_| true, FakeReply::text("ok"));
    let files = Files(Arc::new(Mutex::new((catalog(6000), keys(&["a"])))));
    let live = live(&fake, &files);
    files.write("[models.chat\nprovider = ".into(), keys(&["b"]));
    let refused = live.reload().unwrap_err();
    assert!(matches!(refused, ReloadError::Refused(_)), "{refused:?}");
    assert_eq!(ask(&live, "chat", "a", None).await, StatusCode::OK);
    assert_eq!(
        ask(&live, "chat", "b", None).await,
        StatusCode::UNAUTHORIZED
    );
    // Keys that name a model the new catalog lacks: refused naming the key and the model.
    let named = format!("{}models = [\"gone\"]\n", keys(&["b"]).trim_end());
    files.write(catalog(6000), named);
    let refused = live.reload().unwrap_err().to_string();
    assert!(
        refused.contains('b') && refused.contains("gone"),
        "{refused}"
    );
    assert_eq!(ask(&live, "chat", "a", None).await, StatusCode::OK);
    // A gateway given nothing to reload from says so.
    let fixed = LiveGateway::new(live.current());
    assert!(matches!(fixed.reload(), Err(ReloadError::NotReloadable)));
}

#[tokio::test(start_paused = true)]
async fn the_admin_route_reloads_and_answers_a_refusal_with_its_reason() {
    let fake = FakeProvider::new();
    let files = Files(Arc::new(Mutex::new((catalog(6000), keys(&["admin", "a"])))));
    let live = live(&fake, &files);
    let reload = |key: &str| {
        Request::post("/v1/tollgate/reload")
            .header("authorization", format!("Bearer {key}-secret"))
            .body(Body::empty())
            .unwrap()
    };
    let refused = live.router().oneshot(reload("a")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    files.write(catalog(6000), keys(&["admin", "a", "b"]));
    let done = live.router().oneshot(reload("admin")).await.unwrap();
    assert_eq!(done.status(), StatusCode::OK);
    let done = json_of(done).await;
    assert_eq!(done["reloaded"], true);
    assert_eq!(done["keys"], 3);
    assert!(live.current().keys().unwrap().get("b").is_some());
    files.write(catalog(6000), "[[keys]]\nid = 1\n".into());
    let bad = live.router().oneshot(reload("admin")).await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let bad = json_of(bad).await;
    assert_eq!(bad["error"]["code"], "reload_refused");
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("kept"),
        "{bad}"
    );
    assert_eq!(live.current().keys().unwrap().len(), 3);
}
