//! Names a client sends: resolution by id, alias and the most specific pattern, and
//! each mistake in `aliases` or `patterns` refused at load with its model, field and name.

use super::*;

/// The core's tests link no provider: the `fake` key alone is known.
fn load(text: &str) -> Result<Catalog, CatalogError> {
    Catalog::from_toml_str_with(
        text,
        &KnownProviders::empty().with("fake", "tollgate-fake", false),
    )
}

const NAMED: &str = r#"
[models.opus]
provider = "fake"
max_output_tokens = 100
aliases = ["claude-opus-5-5", "opus-latest"]
patterns = ["claude-opus-*"]

[models.sonnet]
provider = "fake"
max_output_tokens = 100
aliases = ["claude-sonnet-4-5"]
patterns = ["claude-*"]

[models.gpt]
provider = "fake"
max_output_tokens = 100
patterns = ["gpt-*", "*-mini"]
"#;

fn resolved(catalog: &Catalog, name: &str) -> Option<String> {
    catalog.model(name).map(|e| e.id.clone())
}

#[test]
fn a_name_resolves_by_exact_id_first() {
    let catalog = load(NAMED).unwrap();
    let (entry, how) = catalog.resolve("sonnet").unwrap();
    assert_eq!((entry.id.as_str(), how), ("sonnet", NameMatch::Id));
}

#[test]
fn a_name_resolves_by_alias_before_any_pattern() {
    let catalog = load(NAMED).unwrap();
    // `claude-sonnet-4-5` matches `claude-*` (sonnet) but is an alias of sonnet; the
    // alias wins over the longer `claude-opus-*` for `claude-opus-5-5` too.
    let (entry, how) = catalog.resolve("claude-opus-5-5").unwrap();
    assert_eq!((entry.id.as_str(), how), ("opus", NameMatch::Alias));
    assert_eq!(catalog.get("opus-latest").unwrap().id, "opus");
}

#[test]
fn a_name_resolves_by_the_pattern_with_the_most_literal_characters() {
    let catalog = load(NAMED).unwrap();
    let (entry, how) = catalog.resolve("claude-opus-9").unwrap();
    assert_eq!(
        (entry.id.as_str(), how),
        ("opus", NameMatch::Pattern("claude-opus-*"))
    );
    assert_eq!(
        resolved(&catalog, "claude-haiku-4-5").as_deref(),
        Some("sonnet")
    );
    assert_eq!(resolved(&catalog, "gpt-5.6-luna").as_deref(), Some("gpt"));
    assert_eq!(
        resolved(&catalog, "o4-mini").as_deref(),
        Some("gpt"),
        "a leading `*`"
    );
}

#[test]
fn a_more_specific_pattern_wins_whatever_the_order_of_the_file() {
    let text = r#"
[models.a]
provider = "fake"
max_output_tokens = 1
patterns = ["x-*"]
[models.b]
provider = "fake"
max_output_tokens = 1
patterns = ["x-long-*"]
"#;
    let catalog = load(text).unwrap();
    assert_eq!(resolved(&catalog, "x-long-1").as_deref(), Some("b"));
    assert_eq!(resolved(&catalog, "x-short").as_deref(), Some("a"));
    let listed: Vec<&str> = catalog.patterns().map(|(p, _)| p).collect();
    assert_eq!(listed, ["x-long-*", "x-*"], "tried most specific first");
}

#[test]
fn a_name_no_id_alias_or_pattern_covers_is_unknown_and_lists_the_ids() {
    let catalog = load(NAMED).unwrap();
    let err = catalog.get("mistral-large").unwrap_err();
    assert_eq!(err.model_id, "mistral-large");
    assert_eq!(err.known, "gpt, opus, sonnet");
    // A pattern's literal parts must both be there: `claude-` alone is not `claude-opus-*`.
    assert_eq!(resolved(&catalog, "claude").as_deref(), None);
}

#[test]
fn aliases_are_listed_with_their_models() {
    let catalog = load(NAMED).unwrap();
    let aliases: Vec<(&str, &str)> = catalog.aliases().map(|(a, e)| (a, e.id.as_str())).collect();
    assert_eq!(
        aliases,
        [
            ("claude-opus-5-5", "opus"),
            ("claude-sonnet-4-5", "sonnet"),
            ("opus-latest", "opus")
        ]
    );
}

fn two(first: &str, second: &str) -> String {
    format!(
        "[models.a]\nprovider = \"fake\"\nmax_output_tokens = 1\n{first}\n\
         [models.b]\nprovider = \"fake\"\nmax_output_tokens = 1\n{second}\n"
    )
}

#[test]
fn catalog_rejects_an_alias_that_is_another_model_s_id() {
    let err = load(&two("aliases = [\"b\"]", "")).unwrap_err();
    let CatalogError::NameTaken {
        model_id,
        field,
        name,
        ..
    } = &err
    else {
        panic!("expected NameTaken, got {err:?}");
    };
    assert_eq!(
        (model_id.as_str(), *field, name.as_str()),
        ("a", "aliases", "b")
    );
    assert!(err.to_string().contains("the id of model `b`"), "{err}");
}

#[test]
fn catalog_rejects_an_alias_that_is_another_model_s_alias() {
    let err = load(&two("aliases = [\"x\"]", "aliases = [\"x\"]")).unwrap_err();
    assert!(
        matches!(&err, CatalogError::NameTaken { model_id, name, .. } if model_id == "b" && name == "x"),
        "{err:?}"
    );
    assert!(err.to_string().contains("alias of model `a`"), "{err}");
}

#[test]
fn catalog_rejects_an_alias_holding_a_star() {
    let err = load(&two("aliases = [\"claude-*\"]", "")).unwrap_err();
    assert!(
        matches!(&err, CatalogError::InvalidField { model_id, field, .. } if model_id == "a" && field == "aliases"),
        "{err:?}"
    );
    assert!(err.to_string().contains("`claude-*`"), "{err}");
}

#[test]
fn catalog_rejects_a_pattern_without_exactly_one_star() {
    for bad in ["claude", "a*b*", ""] {
        let err = load(&two(&format!("patterns = [\"{bad}\"]"), "")).unwrap_err();
        assert!(
            matches!(&err, CatalogError::InvalidField { model_id, field, .. } if model_id == "a" && field == "patterns"),
            "{bad}: {err:?}"
        );
    }
}

#[test]
fn catalog_rejects_a_pattern_two_models_list() {
    let err = load(&two(
        "patterns = [\"claude-*\"]",
        "patterns = [\"claude-*\"]",
    ))
    .unwrap_err();
    let CatalogError::DuplicatePattern {
        model_id,
        pattern,
        other_model,
    } = &err
    else {
        panic!("expected DuplicatePattern, got {err:?}");
    };
    assert_eq!(
        (model_id.as_str(), pattern.as_str(), other_model.as_str()),
        ("b", "claude-*", "a")
    );
}

#[test]
fn catalog_rejects_aliases_that_are_not_a_list_of_strings() {
    let err = load(&two("aliases = \"x\"", "")).unwrap_err();
    assert!(
        matches!(&err, CatalogError::InvalidField { field, .. } if field == "aliases"),
        "{err:?}"
    );
    let err = load(&two("patterns = [1]", "")).unwrap_err();
    assert!(
        matches!(&err, CatalogError::InvalidField { field, .. } if field == "patterns"),
        "{err:?}"
    );
}

#[test]
fn catalog_built_in_code_checks_aliases_and_patterns_the_same_way() {
    let entry = |id: &str| ModelEntry::new(id, "fake", id).with_output_tokens(1, 1);
    let known = KnownProviders::empty().with("fake", "tollgate-fake", false);
    let err = Catalog::builder()
        .model(entry("a").with_aliases(["b"]))
        .model(entry("b"))
        .known_providers(known.clone())
        .build()
        .unwrap_err();
    assert!(matches!(err, CatalogError::NameTaken { .. }), "{err:?}");
    let catalog = Catalog::builder()
        .model(entry("a").with_aliases(["first"]).with_patterns(["a-*"]))
        .known_providers(known)
        .build()
        .unwrap();
    assert_eq!(catalog.get("first").unwrap().id, "a");
    assert_eq!(catalog.get("a-9").unwrap().id, "a");
}
