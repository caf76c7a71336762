//! The catalog side: a `cohere` model's options, checked with errors naming the option,
//! and the provider's registration.

use tollgate::catalog::CatalogError;
use tollgate::provider::{ToolChoice, linked_providers};
use tollgate::{Catalog, Error, ModelEntry};
use tollgate_cohere::{CohereOptions, DEFAULT_BASE_URL, InputType, MAX_EMBEDDING_BATCH};

fn model() -> ModelEntry {
    ModelEntry::new("m", "cohere", "command-a-03-2025")
}

fn invalid_field(err: Error) -> String {
    match err {
        Error::Catalog(CatalogError::InvalidField { field, .. }) => field,
        other => panic!("not an invalid field: {other:?}"),
    }
}

#[test]
fn the_defaults_are_coheres_address_auto_tools_and_batches_of_96() {
    let o = CohereOptions::from_model(&model()).unwrap();
    assert_eq!(o.base_url, DEFAULT_BASE_URL);
    assert_eq!(o.tool_choice, ToolChoice::Auto);
    assert_eq!(o.embedding_batch, MAX_EMBEDDING_BATCH);
    assert_eq!(o.input_type, None);
}

#[test]
fn a_base_url_loses_its_trailing_v2() {
    let o = CohereOptions::from_model(&model().with_option("base_url", "http://127.0.0.1:9/v2/"))
        .unwrap();
    assert_eq!(o.base_url, "http://127.0.0.1:9");
}

#[test]
fn a_forced_named_tool_in_the_catalog_is_refused_naming_the_option() {
    let err = CohereOptions::from_model(&model().with_option("tool_choice", "tool:f")).unwrap_err();
    assert_eq!(invalid_field(err), "options.tool_choice");
    let o = CohereOptions::from_model(&model().with_option("tool_choice", "required")).unwrap();
    assert_eq!(o.tool_choice, ToolChoice::Required);
}

#[test]
fn an_embedding_batch_over_96_is_refused() {
    let err = CohereOptions::from_model(&model().with_option("embedding_batch", 97)).unwrap_err();
    assert_eq!(invalid_field(err), "options.embedding_batch");
    let o = CohereOptions::from_model(&model().with_option("embedding_batch", 10)).unwrap();
    assert_eq!(o.embedding_batch, 10);
}

#[test]
fn input_type_takes_classification_or_clustering() {
    let o = CohereOptions::from_model(&model().with_option("input_type", "clustering")).unwrap();
    assert_eq!(o.input_type, Some(InputType::Clustering));
    let err =
        CohereOptions::from_model(&model().with_option("input_type", "search_query")).unwrap_err();
    assert_eq!(invalid_field(err), "options.input_type");
}

#[test]
fn an_unknown_option_is_refused() {
    let err = CohereOptions::from_model(&model().with_option("colour", "red")).unwrap_err();
    assert_eq!(invalid_field(err), "options.colour");
}

#[test]
fn the_provider_registers_its_key_and_needs_a_credential() {
    let provider = linked_providers()
        .into_iter()
        .find(|p| p.key() == "cohere")
        .expect("registered");
    assert!(provider.requires_credential());
    let err =
        Catalog::from_toml_str("[models.c]\nprovider = \"cohere\"\nname = \"command-a-03-2025\"\n")
            .unwrap_err();
    assert!(
        matches!(err, CatalogError::MissingCredential { .. }),
        "{err:?}"
    );
}
