//! The tiktoken table an `openai` model's estimates need is loaded ahead of its first
//! call: `Models::build` starts the load on a thread of its own. One test in its own
//! binary, because the tables are loaded once per process.

use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::TiktokenEncoding;
use tollgate::{Catalog, Models};
use tollgate_openai as _;

fn build(catalog: &str) -> Models {
    Models::builder()
        .catalog(Catalog::from_toml_str(catalog).unwrap())
        .credentials(MemoryCredentialStore::new().with("key", "sk-test"))
        .build()
        .unwrap()
}

#[test]
fn building_models_starts_loading_the_tiktoken_table_of_each_openai_model() {
    let (o200k, cl100k) = (TiktokenEncoding::O200k, TiktokenEncoding::Cl100k);
    // A compatible server's tokenizer is unknown: its estimates load no table.
    build(
        r#"
        [models.local]
        provider = "openai-compatible"
        name = "gpt-4o-mini"
        max_output_tokens = 256
        [models.local.options]
        base_url = "http://127.0.0.1:9"
        "#,
    );
    assert!(!o200k.warm_up_started() && !cl100k.warm_up_started());

    build(
        r#"
        [models.mini]
        provider = "openai"
        name = "gpt-4o-mini"
        credential = "key"
        max_output_tokens = 256
        [models.turbo]
        provider = "openai"
        name = "gpt-4-turbo"
        credential = "key"
        max_output_tokens = 256
        [models.turbo.options]
        base_url = "http://127.0.0.1:9"
        "#,
    );
    assert!(o200k.warm_up_started(), "gpt-4o-mini counts with o200k");
    assert!(cl100k.warm_up_started(), "gpt-4-turbo counts with cl100k");
}
