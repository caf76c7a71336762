//! The `tollgate-simulate` binary end to end, on the embedded demo catalog and on a
//! catalog file naming a real provider (whose limits are simulated too).

use std::process::Command;

/// The binary, run in a directory without tollgate.toml.
fn simulate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate-simulate"));
    cmd.current_dir(std::env::temp_dir());
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The table's row of `name`, split at whitespace.
fn row(stdout: &str, name: &str) -> Vec<String> {
    stdout
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no row {name}: {stdout}"))
        .replace("naive retry", "naive")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn simulate_writes_an_svg_chart_and_a_table_where_tollgate_gets_no_429s() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("sim.svg");
    let result = simulate()
        .args(["-m", "demo", "--callers", "16", "--duration", "60", "-o"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    assert_eq!(
        row(&stdout, "tollgate")[3],
        "0",
        "tollgate: no 429s: {stdout}"
    );
    assert_ne!(
        row(&stdout, "naive")[3],
        "0",
        "the naive client meets 429s: {stdout}"
    );
    row(&stdout, "cookbook");
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg"));
    assert!(chart.contains("queue depth"));
}

#[test]
fn simulate_reads_a_catalog_naming_a_real_provider_and_simulates_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("models.toml");
    std::fs::write(
        &catalog,
        r#"
[models.claude]
provider = "anthropic-direct"
name = "claude-sonnet-4-5"
credential = "anthropic"
rpm = 50
input_tpm = 30000
max_output_tokens = 1024
"#,
    )
    .unwrap();
    let result = simulate()
        .arg("--catalog")
        .arg(&catalog)
        .args(["-m", "claude", "--callers", "4", "--duration", "30", "-o"])
        .arg(dir.path().join("sim.svg"))
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    assert!(
        stdout.starts_with("limits: 50 rpm, 30000 input tpm"),
        "{stdout}"
    );
    assert_eq!(row(&stdout, "tollgate")[3], "0", "{stdout}");
}

#[test]
fn simulate_of_a_model_not_in_the_catalog_fails_naming_it() {
    let result = simulate().args(["-m", "no-such-model"]).output().unwrap();
    assert_eq!(result.status.code(), Some(1));
    assert!(
        text(&result.stderr).contains("no-such-model"),
        "{}",
        text(&result.stderr)
    );
}

#[test]
fn help_shows_examples() {
    let result = simulate().arg("--help").output().unwrap();
    assert!(result.status.success());
    let stdout = text(&result.stdout);
    assert!(stdout.contains("Examples:"), "{stdout}");
    assert!(stdout.contains("--callers"), "{stdout}");
}
