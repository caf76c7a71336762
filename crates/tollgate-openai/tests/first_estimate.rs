//! An `openai` model's input estimate before the process has loaded its tiktoken table:
//! a small request is counted by its bytes (never below tiktoken's count, so the
//! reservation is safe and the rest is settled back) and starts the load; a large one, or
//! one whose bound would not fit the context window, waits for the exact count. Each test
//! needs a process whose table is not loaded yet (nextest runs every test in its own).

use std::sync::Arc;

use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::{
    ByteBoundEstimator, ChatTransport, Provider, ProviderContext, TiktokenEncoding,
    TiktokenEstimator, TokenEstimator,
};
use tollgate::{Catalog, LlmRequest, Message, SamplingParams};
use tollgate_openai::{OpenAiProvider, PROVISIONAL_ESTIMATE_TOKENS};

/// The chat transport of an `openai` gpt-4o model (o200k), with `extra` catalog lines,
/// built without `Models` (which would start the table's load at build).
async fn transport(extra: &str) -> Arc<dyn ChatTransport> {
    let catalog = Arc::new(
        Catalog::from_toml_str(&format!(
            "[models.gpt]\nprovider = \"openai\"\nname = \"gpt-4o\"\ncredential = \"key\"\n\
             max_output_tokens = 256\n{extra}\n[models.gpt.options]\nbase_url = \"http://127.0.0.1:9\"\n"
        ))
        .unwrap(),
    );
    let credentials = Arc::new(MemoryCredentialStore::new().with("key", "sk-test"));
    let context = ProviderContext::new("openai", catalog.clone(), credentials);
    let clients = OpenAiProvider::OPENAI.build(&context).await.unwrap();
    clients.chat(catalog.model("gpt").unwrap()).unwrap()
}

fn ask(text: &str) -> LlmRequest {
    LlmRequest::new(
        "gpt",
        vec![Message::system("Be brief."), Message::user(text)],
        vec![],
        SamplingParams::new().with_max_output_tokens(256).unwrap(),
    )
    .unwrap()
}

fn exact(request: &LlmRequest) -> u64 {
    TiktokenEstimator::new(TiktokenEncoding::O200k).estimate_request(request)
}

#[tokio::test]
async fn openai_first_estimate_is_the_byte_bound_until_the_table_is_loaded_then_exact() {
    let chat = transport("").await;
    let small = ask("Hello, world! How are you today?");
    assert!(!TiktokenEncoding::O200k.is_loaded());
    let first = chat.estimate_input_tokens(&small);
    assert_eq!(first, ByteBoundEstimator.estimate_request(&small));
    assert!(
        TiktokenEncoding::O200k.warm_up_started(),
        "the bound starts the load for the next call"
    );

    let large = ask(&"the quick brown fox ".repeat(300));
    assert!(ByteBoundEstimator.estimate_request(&large) > PROVISIONAL_ESTIMATE_TOKENS);
    assert_eq!(
        chat.estimate_input_tokens(&large),
        exact(&large),
        "a large request waits for the table"
    );

    let exact_small = exact(&small);
    assert!(
        first > exact_small,
        "the bound over-counts: {first} vs {exact_small}"
    );
    assert_eq!(
        chat.estimate_input_tokens(&small),
        exact_small,
        "loaded: exact"
    );
}

/// With `extra` leaving 44 tokens beside the 256 of output, a bound above 44 could fail
/// a check the exact count passes, so the exact count is waited for.
async fn waits_for_the_table(extra: &str) {
    let chat = transport(extra).await;
    let request = ask("Hello, world! How are you today?");
    let bound = ByteBoundEstimator.estimate_request(&request);
    assert!(bound > 44, "{bound}");
    assert!(!TiktokenEncoding::O200k.is_loaded());
    let estimate = chat.estimate_input_tokens(&request);
    assert_eq!(estimate, exact(&request));
    assert!(estimate + 256 <= 300, "the exact count fits: {estimate}");
}

#[tokio::test]
async fn openai_first_estimate_waits_for_the_table_when_the_bound_would_overflow_the_window() {
    waits_for_the_table("context_window = 300").await;
}

#[tokio::test]
async fn openai_first_estimate_waits_for_the_table_when_the_bound_would_not_fit_the_bucket() {
    waits_for_the_table("tpm = 300").await;
}
