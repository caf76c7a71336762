//! The catalog example of `docs/providers/cohere.md` loads, and every model in it gets
//! its transport (options checked) without sending anything.

use tollgate::catalog::ModelKind;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Models};
use tollgate_cohere as _;

const PAGE: &str = include_str!("../../../docs/providers/cohere.md");

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
async fn docs_catalog_example_loads_and_serves_every_model() {
    let blocks = toml_blocks(PAGE);
    assert_eq!(blocks.len(), 1, "one example");
    let catalog = Catalog::from_toml_str(&blocks[0]).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<(String, ModelKind)> = catalog.models().map(|m| (m.id.clone(), m.kind)).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("cohere-main", "co-doc"))
        .build()
        .unwrap();
    for (id, kind) in ids {
        match kind {
            ModelKind::Embeddings => drop(models.embeddings(&id).await.unwrap()),
            _ => drop(models.chat(&id).await.unwrap()),
        }
    }
}
