//! The catalog examples of `docs/providers/openai.md` load, and every model in them gets
//! its transport (options checked) without sending anything.

use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Models};
use tollgate_openai::OpenAiProvider;

const PAGE: &str = include_str!("../../../docs/providers/openai.md");

fn toml_blocks(page: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in page.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```toml") => current = Some(String::new()),
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
async fn docs_catalog_examples_load() {
    let blocks = toml_blocks(PAGE);
    assert_eq!(blocks.len(), 3, "OpenAI, vLLM and Ollama");
    let mut kinds = 0;
    for block in blocks {
        let catalog = Catalog::from_toml_str(&block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        let ids: Vec<(String, tollgate::catalog::ModelKind)> =
            catalog.models().map(|m| (m.id.clone(), m.kind)).collect();
        let models = Models::builder()
            .catalog(catalog)
            .credentials(
                MemoryCredentialStore::new()
                    .with("openai-main", "sk-doc")
                    .with("vllm-token", "token-abc123"),
            )
            .provider(OpenAiProvider::OPENAI)
            .provider(OpenAiProvider::COMPATIBLE)
            .build()
            .unwrap();
        for (id, kind) in ids {
            use tollgate::catalog::ModelKind;
            match kind {
                ModelKind::Chat => drop(models.chat(&id).await.unwrap()),
                ModelKind::Embeddings => drop(models.embeddings(&id).await.unwrap()),
                ModelKind::Decision => drop(models.decision(&id).await.unwrap()),
            }
            kinds += 1;
        }
    }
    assert_eq!(kinds, 5);
}
