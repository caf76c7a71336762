//! The catalog example of `docs/providers/bedrock.md` loads, and its model gets its
//! transport (options checked) without sending anything.

use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Models};
use tollgate_bedrock::{AnthropicBedrockProvider, BedrockConverseProvider};

const PAGE: &str = include_str!("../../../docs/providers/bedrock.md");

fn blocks(page: &str, language: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    let fence = format!("```{language}");
    for line in page.lines() {
        match (&mut current, line.trim_end()) {
            (None, l) if l == fence => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(text), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[tokio::test]
async fn docs_catalog_example_loads_and_the_record_has_the_documented_fields() {
    let catalogs = blocks(PAGE, "toml");
    assert_eq!(catalogs.len(), 2, "chat models, then an embeddings model");
    let records = blocks(PAGE, "json");
    assert_eq!(records.len(), 1);
    let catalog = Catalog::from_toml_str(&catalogs[0]).unwrap_or_else(|e| panic!("{e}"));
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("aws-main", records[0].trim()))
        .provider(AnthropicBedrockProvider)
        .provider(BedrockConverseProvider)
        .build()
        .unwrap();
    models.chat("claude-bedrock").await.unwrap();
    models.chat("nova-pro").await.unwrap();
    let catalog = Catalog::from_toml_str(&catalogs[1]).unwrap_or_else(|e| panic!("{e}"));
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new())
        .provider(BedrockConverseProvider)
        .build()
        .unwrap();
    models.embeddings("titan-embed").await.unwrap();
    let record: serde_json::Value = serde_json::from_str(&records[0]).unwrap();
    let mut keys: Vec<_> = record.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["access_key_id", "secret_access_key", "session_token"],
        "the documented record format"
    );
}
