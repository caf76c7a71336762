//! Runs the link-check binary and checks that every linked provider is listed, with the
//! crate its registration names.

#[test]
fn binary_depending_only_on_provider_crates_lists_them() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate-link-check"))
        .output()
        .expect("the link-check binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let keys: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        keys,
        [
            "anthropic-bedrock tollgate-bedrock no-credential",
            "anthropic-direct tollgate-anthropic credential",
            "anthropic-vertex tollgate-gemini no-credential",
            "azure-openai tollgate-azure no-credential",
            "bedrock-converse tollgate-bedrock no-credential",
            "cohere tollgate-cohere credential",
            "deepseek tollgate-deepseek credential",
            "fake tollgate-fake no-credential",
            "gemini tollgate-gemini credential",
            "groq tollgate-groq credential",
            "mistral tollgate-mistral credential",
            "ollama tollgate-ollama no-credential",
            "openai tollgate-openai credential",
            "openai-compatible tollgate-openai no-credential",
            "perplexity tollgate-perplexity credential",
            "together tollgate-together credential",
            "vertex tollgate-gemini no-credential",
            "xai tollgate-xai credential",
        ]
    );
}
