//! What `examples/openai-like` shows a provider author: an OpenAI-like provider is a
//! preset of the public OpenAI codec, at most 60 lines importing only `tollgate::provider`
//! and `tollgate_openai::preset`, and it passes the same contract kit as the first-party
//! crates (chat whole and streamed, tools, embeddings, errors, limits, secrets).

const SOURCE: &str = include_str!("../src/lib.rs");

#[test]
fn the_provider_imports_only_the_kit_and_the_openai_preset_module_within_60_lines() {
    for line in SOURCE.lines().map(str::trim_start) {
        if line.starts_with("use tollgate") {
            assert!(
                line.starts_with("use tollgate::provider")
                    || line.starts_with("use tollgate_openai::preset"),
                "imports from outside the kit and the preset module: {line}"
            );
        }
    }
    let paths = SOURCE.matches("tollgate::").count();
    let kit = SOURCE.matches("tollgate::provider").count();
    let macro_call = SOURCE.matches("tollgate::register_provider!").count();
    assert_eq!(paths, kit + macro_call, "every tollgate path is the kit");
    let codec = SOURCE.matches("tollgate_openai::").count();
    let preset = SOURCE.matches("tollgate_openai::preset").count();
    assert_eq!(
        codec, preset,
        "every tollgate_openai path is the preset module"
    );
    let lines = SOURCE.lines().count();
    assert!(lines <= 60, "src/lib.rs is {lines} lines");
}

#[test]
fn the_example_registers_its_key_with_its_crate() {
    let linked = tollgate::provider::linked_providers();
    let fireworks = linked.iter().find(|p| p.key() == "fireworks");
    assert!(fireworks.is_some_and(|p| p.requires_credential()));
}

tollgate_testkit::provider_contract_tests!(
    tollgate_openai::testkit::OpenAiWire::new(tollgate_openai_like::PROVIDER);
    skip {
        a_context_window_stop_is_typed_and_names_the_model:
            "an OpenAI-compatible API has no full-window stop reason",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (none); the overflow error is checked",
        an_embeddings_request_carries_the_purpose_and_the_width:
            "the purpose (OpenAI's wire has no field for it); the width is checked",
    }
);
