//! The catalog examples of `docs/providers/gemini.md` and `docs/providers/anthropic-vertex.md`
//! load, and every model in them gets its transport (options checked) without sending
//! anything.

use tollgate::catalog::{KnownProviders, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Models};
use tollgate_gemini as _;

const PAGE: &str = include_str!("../../../docs/providers/gemini.md");
#[cfg(feature = "vertex")]
const CLAUDE_PAGE: &str = include_str!("../../../docs/providers/anthropic-vertex.md");

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
async fn docs_catalog_examples_load_with_gemini_as_the_fallback_of_openai() {
    let blocks = toml_blocks(PAGE);
    assert_eq!(blocks.len(), 2, "Gemini API and Vertex");
    // The first example's OpenAI model needs tollgate-openai, which this crate does not
    // link: the catalog is told about its key.
    let known = KnownProviders::linked().with("openai", "tollgate-openai", true);
    let mut served = Vec::new();
    for block in blocks {
        let catalog =
            Catalog::from_toml_str_with(&block, &known).unwrap_or_else(|e| panic!("{e}\n{block}"));
        if let Some(gpt) = catalog.model("gpt") {
            assert_eq!(gpt.fallbacks, ["flash"]);
        }
        let ids: Vec<(String, ModelKind)> = catalog
            .models()
            .filter(|m| m.provider != "openai")
            .map(|m| (m.id.clone(), m.kind))
            .collect();
        let models = Models::builder()
            .catalog(catalog)
            .credentials(
                MemoryCredentialStore::new()
                    .with("gemini-main", "AIza-doc")
                    .with("vertex-sa", "{}"),
            )
            .build()
            .unwrap();
        for (id, kind) in ids {
            match kind {
                ModelKind::Chat => drop(models.chat(&id).await.unwrap()),
                ModelKind::Embeddings => drop(models.embeddings(&id).await.unwrap()),
                ModelKind::Decision => drop(models.decision(&id).await.unwrap()),
            }
            served.push(id);
        }
    }
    assert_eq!(served, ["flash", "embed", "judge", "pro"]);
}

#[cfg(feature = "vertex")]
#[tokio::test]
async fn anthropic_vertex_docs_catalog_examples_load_and_their_models_get_transports() {
    let blocks = toml_blocks(CLAUDE_PAGE);
    assert_eq!(blocks.len(), 1, "one catalog");
    let catalog = Catalog::from_toml_str(&blocks[0]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        catalog.model("claude").map(|m| m.fallbacks.clone()),
        Some(vec!["claude-global".to_owned()])
    );
    let ids: Vec<String> = catalog.models().map(|m| m.id.clone()).collect();
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("vertex-sa", "{}"))
        .build()
        .unwrap();
    for id in &ids {
        drop(models.chat(id).await.unwrap());
    }
    assert_eq!(ids, ["claude", "claude-global"]);
}
