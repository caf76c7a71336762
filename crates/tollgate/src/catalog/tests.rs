//! Catalog loading and validation: every mistake named with its model and field.

use super::*;
use crate::usage::Usage;

const GOOD: &str = r#"
[embeddings]
width = 1024

[models.claude-sonnet]
provider = "anthropic-direct"
name = "claude-sonnet-4-5"
credential = "anthropic-main"
rpm = 4000
input_tpm = 2000000
output_tpm = 400000
max_output_tokens = 64000
default_output_tokens = 4096
context_window = 200000
fallbacks = ["gpt-4o"]
[models.claude-sonnet.price]
input = 3.0
output = 15.0
cache_read = 0.30
cache_write = 3.75
cache_write_1h = 6.00

[models.gpt-4o]
provider = "openai"
credential = "openai-main"
tpm = 800000
rpm = 10000
max_output_tokens = 16384

[models.embed]
provider = "openai"
kind = "embeddings"
credential = "openai-main"
native_width = 3072
dimensions_param = true

[models.local]
provider = "fake"
max_output_tokens = 100
"#;

/// The first-party keys as their crates register them. No provider crate is linked into
/// the core's own tests, so the catalog is checked against this explicit set.
fn known() -> KnownProviders {
    [
        ("fake", "tollgate-fake", false),
        ("anthropic-direct", "tollgate-anthropic", true),
        ("openai", "tollgate-openai", true),
        ("openai-compatible", "tollgate-openai", false),
        ("bedrock-converse", "tollgate-bedrock", false),
    ]
    .into_iter()
    .fold(
        KnownProviders::empty(),
        |known, (key, krate, credential)| known.with(key, krate, credential),
    )
}

fn load(text: &str) -> Result<Catalog, CatalogError> {
    Catalog::from_toml_str_with(text, &known())
}

fn err(text: &str) -> String {
    load(text)
        .expect_err("catalog must be rejected")
        .to_string()
}

fn assert_names(message: &str, model: &str, field: &str) {
    assert!(
        message.contains(&format!("`{model}`")),
        "message should name model `{model}`: {message}"
    );
    assert!(
        message.contains(field),
        "message should name field `{field}`: {message}"
    );
}

#[test]
fn catalog_loads_a_valid_file_with_every_field() {
    let catalog = load(GOOD).unwrap();
    let sonnet = catalog.model("claude-sonnet").unwrap();
    assert_eq!(sonnet.name, "claude-sonnet-4-5");
    assert_eq!(
        sonnet.limits,
        Limits {
            rpm: 4000,
            tpm: 0,
            input_tpm: 2_000_000,
            output_tpm: 400_000
        }
    );
    assert_eq!(sonnet.fallbacks, vec!["gpt-4o".to_string()]);
    assert_eq!(sonnet.price.unwrap().cache_write_1h, Some(6.0));
    assert_eq!(
        catalog.model("gpt-4o").unwrap().name,
        "gpt-4o",
        "name defaults to the id"
    );
    assert_eq!(catalog.embedding_width(), Some(1024));
    assert_eq!(catalog.model("embed").unwrap().kind, ModelKind::Embeddings);
}

#[test]
fn catalog_rejects_unknown_provider_key() {
    let m = err("[models.x]\nprovider = \"antropic\"\nmax_output_tokens = 10\n");
    assert_names(&m, "x", "provider");
    assert!(
        m.contains("antropic") && m.contains("anthropic-direct (tollgate-anthropic)"),
        "the error lists the known keys with their crates: {m}"
    );
    assert!(
        m.contains("no first-party crate registers `antropic`") && !m.contains("tollgate-antropic"),
        "a key no first-party crate registers gets no guessed crate: {m}"
    );
}

#[test]
fn catalog_naming_an_unlinked_first_party_key_names_the_crate_that_registers_it() {
    // Keys whose first word is not their crate's name.
    for (key, crate_name, link) in [
        (
            "anthropic-bedrock",
            "tollgate-bedrock",
            "use tollgate_bedrock as _;",
        ),
        ("vertex", "tollgate-gemini", "use tollgate_gemini as _;"),
    ] {
        let e = Catalog::from_toml_str(&format!(
            "[models.x]\nprovider = \"{key}\"\nmax_output_tokens = 10\n"
        ))
        .unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, CatalogError::UnknownProvider { .. }), "{m}");
        assert!(
            m.contains(&format!("`{crate_name}`")) && m.contains(link),
            "{key}: {m}"
        );
    }
}

#[test]
fn catalog_linked_providers_in_the_core_alone_are_none_and_the_error_says_so() {
    // The core links no provider crate: a catalog naming one fails at load, saying so.
    let e = Catalog::from_toml_str("[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\n")
        .unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, CatalogError::UnknownProvider { .. }), "{m}");
    assert!(
        m.contains("linked providers: (none)") && m.contains("`tollgate-fake`"),
        "{m}"
    );
}

#[test]
fn catalog_rejects_negative_limit() {
    let m = err("[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\nrpm = -5\n");
    assert_names(&m, "x", "rpm");
    assert!(m.contains("negative"), "{m}");
}

#[test]
fn catalog_rejects_limit_that_is_not_a_number() {
    let m = err("[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\ntpm = \"lots\"\n");
    assert_names(&m, "x", "tpm");
    let m = err("[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\ninput_tpm = 1.5\n");
    assert_names(&m, "x", "input_tpm");
}

#[test]
fn catalog_rejects_default_output_above_max() {
    let m = err(
        "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\ndefault_output_tokens = 11\n",
    );
    assert_names(&m, "x", "default_output_tokens");
    assert!(m.contains("max_output_tokens"), "{m}");
}

#[test]
fn catalog_rejects_fallback_to_unknown_model() {
    let m =
        err("[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\nfallbacks = [\"nope\"]\n");
    assert_names(&m, "x", "fallbacks");
    assert!(m.contains("nope"), "{m}");
}

#[test]
fn catalog_rejects_fallback_to_itself() {
    let m = err("[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\nfallbacks = [\"x\"]\n");
    assert_names(&m, "x", "fallbacks");
    assert!(m.contains("itself"), "{m}");
}

#[test]
fn catalog_rejects_missing_credential_for_provider_that_needs_one() {
    let m = err("[models.x]\nprovider = \"anthropic-direct\"\nmax_output_tokens = 10\n");
    assert_names(&m, "x", "credential");
    // Providers that can run without a key are accepted without one.
    load("[models.x]\nprovider = \"openai-compatible\"\nmax_output_tokens = 10\n").unwrap();
}

#[test]
fn catalog_rejects_duplicate_model_ids_in_toml() {
    let m = err(
        "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\n[models.\"x\"]\nprovider = \"fake\"\n",
    );
    assert_names(&m, "x", "models.x");
    assert!(m.contains("twice"), "{m}");
}

#[test]
fn catalog_rejects_duplicate_model_ids_in_code() {
    let e = Catalog::builder()
        .model(ModelEntry::new("x", "fake", "a").with_output_tokens(10, 10))
        .model(ModelEntry::new("x", "fake", "b").with_output_tokens(10, 10))
        .build()
        .unwrap_err();
    assert!(
        matches!(e, CatalogError::DuplicateModel { ref model_id } if model_id == "x"),
        "{e}"
    );
}

#[test]
fn catalog_rejects_misspelt_field() {
    let m = err("[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\ntmp = 5\n");
    assert_names(&m, "x", "tmp");
}

#[test]
fn catalog_rejects_negative_price() {
    let m = err(
        "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\n[models.x.price]\ninput = -1\noutput = 2\n",
    );
    assert_names(&m, "x", "price.input");
}

#[test]
fn catalog_rejects_embedding_model_that_cannot_reach_the_width() {
    let base =
        "[embeddings]\nwidth = 1024\n[models.e]\nprovider = \"fake\"\nkind = \"embeddings\"\n";
    let m = err(&format!("{base}native_width = 3072\n"));
    assert_names(&m, "e", "truncation_safe");
    let m = err(&format!(
        "{base}native_width = 768\ntruncation_safe = true\n"
    ));
    assert_names(&m, "e", "native_width");
    let m = err(base);
    assert_names(&m, "e", "native_width");
    // Each way to reach the width is accepted.
    for ok in [
        "native_width = 1024\n",
        "native_width = 3072\ntruncation_safe = true\n",
        "dimensions_param = true\n",
    ] {
        load(&format!("{base}{ok}")).unwrap();
    }
}

#[test]
fn catalog_requires_embedding_width_when_it_has_embeddings_models() {
    let m =
        err("[models.e]\nprovider = \"fake\"\nkind = \"embeddings\"\ndimensions_param = true\n");
    assert!(m.contains("embeddings.width") && m.contains("`e`"), "{m}");
}

#[test]
fn catalog_requires_max_output_tokens_for_chat_models() {
    let m = err("[models.x]\nprovider = \"fake\"\n");
    assert_names(&m, "x", "max_output_tokens");
}

#[test]
fn catalog_reports_toml_syntax_errors() {
    let e = load("[models.x\nprovider=").unwrap_err();
    assert!(matches!(e, CatalogError::Syntax { .. }), "{e}");
}

#[test]
fn catalog_built_in_code_runs_the_same_checks() {
    let e = Catalog::builder()
        .known_providers(known())
        .model(ModelEntry::new("x", "fake", "x").with_output_tokens(10, 20))
        .build()
        .unwrap_err();
    assert!(matches!(e, CatalogError::DefaultAboveMax { .. }), "{e}");
    let known = KnownProviders::empty().with("mine", "my-crate", true);
    let e = Catalog::builder()
        .known_providers(known.clone())
        .model(ModelEntry::new("x", "mine", "x").with_output_tokens(10, 10))
        .build()
        .unwrap_err();
    assert!(matches!(e, CatalogError::MissingCredential { .. }), "{e}");
    Catalog::builder()
        .known_providers(known)
        .model(
            ModelEntry::new("x", "mine", "x")
                .with_output_tokens(10, 10)
                .with_credential("c"),
        )
        .build()
        .unwrap();
}

#[test]
fn price_counts_each_kind_of_token_once() {
    let price = Price {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
        cache_write_1h: Some(6.0),
    };
    let usage = Usage {
        input_tokens: 1_000,
        cache_read_tokens: 100_000,
        cache_write_tokens: 10_000,
        cache_write_1h_tokens: 2_000,
        output_tokens: 500,
    };
    // 1000*3 + 100000*0.3 + 10000*3.75 + 2000*6 + 500*15, per million.
    let expected = (3_000.0 + 30_000.0 + 37_500.0 + 12_000.0 + 7_500.0) / 1_000_000.0;
    assert!((price.cost_usd(&usage) - expected).abs() < 1e-12);
}

#[test]
fn catalog_accepts_burst_seconds_from_1_to_60_only() {
    let base = "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\nrpm = 60\n";
    let ok = load(&format!("{base}burst_seconds = 1\n")).unwrap();
    assert_eq!(ok.model("x").unwrap().burst_seconds, Some(1));
    for bad in ["0", "61", "-1", "\"1s\""] {
        let m = err(&format!("{base}burst_seconds = {bad}\n"));
        assert_names(&m, "x", "burst_seconds");
    }
}

#[test]
fn catalog_arrival_allowance_ms_sets_the_limiter_s_allowance_from_0_to_60000() {
    use crate::limit::LimiterConfig;
    use std::time::Duration;
    let base = "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\nrpm = 60\n";
    let default = load(base).unwrap();
    assert_eq!(
        LimiterConfig::for_model(default.model("x").unwrap()).arrival_allowance,
        LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE
    );
    for (ms, expected) in [("0", 0), ("250", 250), ("60000", 60_000)] {
        let ok = load(&format!("{base}arrival_allowance_ms = {ms}\n")).unwrap();
        let config = LimiterConfig::for_model(ok.model("x").unwrap());
        assert_eq!(config.arrival_allowance, Duration::from_millis(expected));
    }
    for bad in ["60001", "-1", "\"1s\""] {
        let m = err(&format!("{base}arrival_allowance_ms = {bad}\n"));
        assert_names(&m, "x", "arrival_allowance_ms");
    }
}

#[test]
fn catalog_window_is_continuous_by_default_or_fixed_and_a_typo_names_model_and_field() {
    let base = "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\nrpm = 60\n";
    let default = load(base).unwrap();
    assert_eq!(default.model("x").unwrap().window, RateWindow::Continuous);
    for (text, window) in [
        ("continuous", RateWindow::Continuous),
        ("fixed", RateWindow::Fixed),
    ] {
        let c = load(&format!("{base}window = \"{text}\"\n")).unwrap();
        assert_eq!(c.model("x").unwrap().window, window);
        assert_eq!(window.as_str(), text);
    }
    for bad in ["\"fixd\"", "\"Fixed\"", "1"] {
        let e = load(&format!("{base}window = {bad}\n")).unwrap_err();
        assert!(
            matches!(&e, CatalogError::InvalidField { model_id, field, .. } if model_id == "x" && field == "window"),
            "{e}"
        );
        assert_names(&e.to_string(), "x", "window");
    }
}

#[test]
fn catalog_fallback_wait_is_soonest_by_default_or_last_and_a_typo_names_model_and_field() {
    let base = "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\n";
    let default = load(base).unwrap();
    assert_eq!(
        default.model("x").unwrap().fallback_wait,
        FallbackWait::Soonest
    );
    for (text, wait) in [
        ("soonest", FallbackWait::Soonest),
        ("last", FallbackWait::Last),
    ] {
        let c = load(&format!("{base}fallback_wait = \"{text}\"\n")).unwrap();
        assert_eq!(c.model("x").unwrap().fallback_wait, wait);
        assert_eq!(wait.as_str(), text);
    }
    for bad in ["\"first\"", "\"Last\"", "true"] {
        let e = load(&format!("{base}fallback_wait = {bad}\n")).unwrap_err();
        assert!(
            matches!(&e, CatalogError::InvalidField { model_id, field, .. } if model_id == "x" && field == "fallback_wait"),
            "{e}"
        );
        assert_names(&e.to_string(), "x", "fallback_wait");
    }
}

#[test]
fn batch_terms_read_their_price_and_queue_limits_and_default_to_half_the_live_price() {
    let catalog = load(
        "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\n\
         [models.x.price]\ninput = 2.0\noutput = 8.0\n\
         [models.x.batch]\nqueue_tokens = 90000\nmax_batches = 3\nmax_requests = 500\nmax_bytes = 1000000\n\
         [models.y]\nprovider = \"fake\"\nmax_output_tokens = 10\n\
         [models.y.price]\ninput = 2.0\noutput = 8.0\n\
         [models.y.batch.price]\ninput = 0.5\noutput = 1.0\n",
    )
    .unwrap();
    let x = catalog.get("x").unwrap();
    assert_eq!(x.batch.queue_tokens, Some(90_000));
    assert_eq!(x.batch.max_batches, Some(3));
    assert_eq!(x.batch.max_requests, Some(500));
    assert_eq!(x.batch.max_bytes, Some(1_000_000));
    let half = x.batch.price(x.price.as_ref()).unwrap();
    assert_eq!((half.input, half.output), (1.0, 4.0));
    let y = catalog.get("y").unwrap();
    let own = y.batch.price(y.price.as_ref()).unwrap();
    assert_eq!((own.input, own.output), (0.5, 1.0));
    assert_eq!(y.batch.queue_tokens, None);
}

#[test]
fn batch_terms_reject_an_unknown_field_and_a_price_without_output() {
    let m = err(
        "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\n[models.x.batch]\nqueue = 5\n",
    );
    assert_names(&m, "x", "batch.queue");
    let m = err(
        "[models.x]\nprovider = \"fake\"\nmax_output_tokens = 10\n[models.x.batch.price]\ninput = 1\n",
    );
    assert_names(&m, "x", "batch.price.output");
}
