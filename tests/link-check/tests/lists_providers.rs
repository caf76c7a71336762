//! Runs the link-check binary and checks that every linked provider is listed.

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
            "anthropic-bedrock",
            "anthropic-direct",
            "bedrock-converse",
            "fake",
            "openai",
            "openai-compatible"
        ]
    );
}
