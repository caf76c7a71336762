//! Budgets that hold: a key's daily spend kept in a `FileSpendLedger` survives a restart
//! of the gateway (dropped and built again on the same file), and keys that do not fit
//! the catalog (a model it lacks, a budget over an unpriced model) are refused when the
//! gateway is built. In process, on tokio's paused clock.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{call, json_of, models, post, priced_models};
use serde_json::json;
use tollgate::Usage;
use tollgate::limit::InProcessLimiters;
use tollgate::pipeline::SpendLedger;
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{FileSpendLedger, Gateway, Keys, KeysError, hash_secret};

fn thrifty() -> Keys {
    Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"thrifty\"\nsecret_sha256 = \"{}\"\nbudget_usd_per_day = 0.1\n",
        hash_secret("thrifty-secret")
    ))
    .unwrap()
}

/// A gateway over `priced` whose key `thrifty` ($0.10 a day) keeps its spend in `path`.
fn gateway_on(fake: &FakeProvider, path: &std::path::Path) -> Gateway {
    let ledger: Arc<dyn SpendLedger> = Arc::new(FileSpendLedger::open(path).unwrap());
    Gateway::new(priced_models(fake, None))
        .with_keys_on(
            thrifty(),
            std::sync::Arc::new(InProcessLimiters),
            Some(ledger),
        )
        .unwrap()
}

/// A chat on `priced` as `thrifty`.
fn chat() -> axum::http::Request<axum::body::Body> {
    let body = json!({"model": "priced", "messages": [{"role": "user", "content": "Hi"}]});
    post(
        "/v1/chat/completions",
        &body,
        &[("authorization", "Bearer thrifty-secret")],
    )
}

/// A provider whose `calls` answers each cost $0.05 on `priced` (50 output tokens).
fn provider(calls: usize) -> FakeProvider {
    let fake = FakeProvider::new();
    let spent = Usage {
        output_tokens: 50,
        ..Usage::default()
    };
    for _ in 0..calls {
        fake.reply_any(FakeReply::text("ok").with_usage(spent));
    }
    fake
}

#[tokio::test(start_paused = true)]
async fn a_keys_daily_spend_in_a_state_file_still_refuses_with_402_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.spend.json");

    let before = provider(1);
    let first = gateway_on(&before, &path);
    // $0.064 worst case fits $0.10; it settles at its actual $0.05.
    let r = call(&first, chat()).await;
    assert_eq!(r.status(), StatusCode::OK);
    drop(first);

    // The restarted gateway: $0.05 left, so a $0.064 worst case is refused unsent.
    let after = provider(1);
    let second = gateway_on(&after, &path);
    let r = call(&second, chat()).await;
    assert_eq!(r.status(), StatusCode::PAYMENT_REQUIRED);
    let v = json_of(r).await;
    assert!(
        v["error"]["message"]
            .to_string()
            .contains("key:thrifty daily budget"),
        "{v}"
    );
    assert_eq!((before.calls("priced"), after.calls("priced")), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_gateway_without_a_state_file_forgets_the_days_spend_when_rebuilt() {
    // The control for the test above: in-process budgets start afresh.
    let fake = provider(2);
    for _ in 0..2 {
        let gateway = Gateway::new(priced_models(&fake, None))
            .with_keys(thrifty())
            .unwrap();
        let r = call(&gateway, chat()).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
}

#[test]
fn a_gateway_refuses_a_budget_over_an_unpriced_model_naming_the_key_and_the_model() {
    // `chat`, `slow` and `embed` have no price; the key lists no models, so all of them.
    let fake = FakeProvider::new();
    let e = Gateway::new(models(&fake))
        .with_keys(thrifty())
        .unwrap_err();
    assert!(
        matches!(&e, KeysError::UnpricedBudget { id, model } if id == "thrifty" && model == "chat"),
        "{e}"
    );
    let e = Gateway::new(models(&fake))
        .with_keys_on(thrifty(), std::sync::Arc::new(InProcessLimiters), None)
        .unwrap_err();
    assert!(matches!(e, KeysError::UnpricedBudget { .. }), "{e}");
}

#[test]
fn a_gateway_refuses_a_key_naming_a_model_outside_its_catalog() {
    let fake = FakeProvider::new();
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"nb\"\nsecret_sha256 = \"{}\"\nmodels = [\"chat\", \"gpt-4o\"]\n",
        hash_secret("nb-secret")
    ))
    .unwrap();
    let e = Gateway::new(models(&fake)).with_keys(keys).unwrap_err();
    assert!(
        matches!(&e, KeysError::UnknownModel { id, model } if id == "nb" && model == "gpt-4o"),
        "{e}"
    );
}
