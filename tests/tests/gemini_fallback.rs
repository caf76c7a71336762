//! The seeds' own example, as a new user would write it: a catalog in TOML where a
//! Gemini model is the fallback of an OpenAI model, run against a third-party mock
//! server (llmock, which speaks both APIs, started on 127.0.0.1 by `scripts/peers.sh`).
//! Without `TOLLGATE_LLMOCK_URL` the test says so and passes, unless
//! `TOLLGATE_PEERS_REQUIRED` is set (`cargo xtask test-all` sets it).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{FallbackOptions, MemoryRecorder, Outcome, PipelineConfig, RetryPolicy};
use tollgate::{Catalog, Conversation, Models, SamplingParams};
use tollgate_gemini as _;
use tollgate_openai as _;

/// The catalog of `docs/providers/gemini.md`, pointed at the mock.
fn catalog(base: &str) -> Catalog {
    Catalog::from_toml_str(&format!(
        r#"
[models.gpt]
provider = "openai"
name = "gpt-4o-mini"
credential = "openai-main"
rpm = 5000
tpm = 4000000
max_output_tokens = 16384
fallbacks = ["flash"]
[models.gpt.options]
base_url = "{base}"

[models.flash]
provider = "gemini"
name = "gemini-2.5-flash"
credential = "gemini-main"
rpm = 1000
input_tpm = 1000000
max_output_tokens = 65536
default_output_tokens = 2048
[models.flash.price]
input = 0.30
output = 2.50
[models.flash.options]
base_url = "{base}/gemini"
"#
    ))
    .expect("the guide's catalog loads")
}

#[tokio::test]
async fn a_rate_limited_openai_model_falls_back_to_its_gemini_model_on_the_mock() {
    let Some(base) = tollgate_testkit::peers::url("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let control = |path: &str, body: serde_json::Value| {
        http.post(format!("{base}/_llmock/{path}"))
            .json(&body)
            .send()
    };
    assert!(
        control("reset", json!({}))
            .await
            .unwrap()
            .status()
            .is_success()
    );
    // The next request (OpenAI's) is told to slow down for a minute.
    let limited =
        json!({"behaviors": [{"type": "fail", "status": 429, "retry_after": 60, "times": 1}]});
    assert!(
        control("scenario", limited)
            .await
            .unwrap()
            .status()
            .is_success()
    );

    let recorder = Arc::new(MemoryRecorder::new());
    let models = Models::builder()
        .catalog(catalog(&base))
        .credentials(
            MemoryCredentialStore::new()
                .with("openai-main", "sk-peer-test")
                .with("gemini-main", "AIza-peer-test"),
        )
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                jitter_seed: Some(7),
                ..RetryPolicy::default()
            },
            ..PipelineConfig::default()
        })
        .recorder(recorder.clone())
        .build()
        .unwrap();
    let chat = models
        .chat_with_fallbacks("gpt", FallbackOptions::default())
        .await
        .unwrap();
    let request = Conversation::new()
        .user("hello")
        .request("gpt", SamplingParams::new())
        .unwrap();
    let answer = chat.single_response(&request).await.unwrap();
    assert!(!answer.text().is_empty());

    // The OpenAI model was asked once (its 429 ends its turn in a chain), then Gemini
    // answered; both calls recorded under their own model and provider.
    let calls = recorder.calls();
    let by_model = |id: &str| calls.iter().find(|c| c.model_id == id).cloned();
    let gpt = by_model("gpt").expect("the OpenAI call was recorded");
    assert!(
        matches!(
            &gpt.outcome,
            Outcome::Failed {
                status: Some(429),
                ..
            }
        ),
        "{gpt:?}"
    );
    let flash = by_model("flash").expect("the Gemini call was recorded");
    assert_eq!(
        (flash.provider.as_str(), &flash.outcome),
        ("gemini", &Outcome::Success)
    );
    assert!(flash.cost_usd.is_some_and(|c| c > 0.0), "{flash:?}");
}
