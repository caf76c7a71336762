//! The catalog example of `docs/providers/cohere.md` loads, and every model in it gets
//! its transport (options checked) without sending anything.

use tollgate::catalog::ModelKind;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Models};
use tollgate_cohere as _;

const PAGE: &str = include_str!("../../../docs/providers/cohere.md");

/// The page's one ```toml block.
fn example() -> &'static str {
    let (_, rest) = PAGE.split_once("```toml\n").expect("a ```toml block");
    assert!(!rest.contains("```toml"), "one example");
    rest.split_once("\n```").expect("the block ends").0
}

#[tokio::test]
async fn docs_catalog_example_loads_and_serves_every_model() {
    let catalog = Catalog::from_toml_str(example()).unwrap_or_else(|e| panic!("{e}"));
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
