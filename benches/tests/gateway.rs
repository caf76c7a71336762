//! Benchmark 10's fixed parts, without wall-clock figures: the 100k-token prompt is what
//! tollgate's estimator counts as 100k tokens, the catalogs the gateway is started with
//! parse and set no limits, LiteLLM's config carries the settings the tables say, the
//! head-of-line upstream streams its first token and ends its stream; and a reduced run
//! of the pinned overhead part (nginx, wrk, `tollgate serve`; skipped when they are not
//! at hand) answers, with no assertion on its timings.

use tollgate::Catalog;
use tollgate::provider::{DefaultEstimator, TokenEstimator};
use tollgate_bench::gateway::head_of_line::{FIRST_TOKEN, large_prompt, serve_upstream};
use tollgate_bench::gateway::process::{catalog, litellm_config};

// The provider the catalogs name (linked, so its key is known).
use tollgate_openai as _;

#[test]
fn the_large_prompt_is_a_hundred_thousand_tokens() {
    let prompt = large_prompt(100_000);
    let tokens = DefaultEstimator.estimate_text(&prompt);
    assert!((100_000..100_100).contains(&tokens), "{tokens}");
}

#[test]
fn the_catalogs_parse_and_only_the_pacing_one_limits() {
    let open = Catalog::from_toml_str(&catalog("fast", "http://127.0.0.1:9", "")).unwrap();
    let limits = &open.get("fast").unwrap().limits;
    assert_eq!((limits.rpm, limits.tpm), (0, 0));
    let paced = catalog("gw", "http://127.0.0.1:9", "credential = \"k\"\nrpm = 60\n");
    let paced = Catalog::from_toml_str(&paced).unwrap();
    assert_eq!(paced.get("gw").unwrap().limits.rpm, 60);
}

#[test]
fn litellm_gets_one_deployment_with_its_settings() {
    let router = "  redis_host: 127.0.0.1\n  redis_port: 7\n";
    let config = litellm_config("gw", "http://127.0.0.1:9", "      rpm: 60\n", router);
    for line in [
        "  - model_name: gw",
        "      model: openai/gw",
        "      api_base: http://127.0.0.1:9/v1",
        "      rpm: 60",
        "  telemetry: false",
        "  disable_spend_logs: true",
        "  redis_port: 7",
    ] {
        assert!(config.lines().any(|l| l == line), "{line} in\n{config}");
    }
}

#[test]
fn the_upstream_streams_a_first_token_and_ends() {
    let base = serve_upstream().unwrap();
    let runtime = tollgate_bench::real_runtime();
    let text = runtime.block_on(async {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(format!("{base}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(r#"{"model":"stream","stream": true,"messages":[]}"#)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert!(text.contains(FIRST_TOKEN), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

/// The `tollgate` binary for the reduced pinned run: `TOLLGATE_CLI_BIN`, else one built
/// beside this test (release, then debug); never built here (too slow for a test).
fn built_tollgate() -> Option<std::path::PathBuf> {
    if let Ok(path) = std::env::var("TOLLGATE_CLI_BIN") {
        return Some(path.into());
    }
    // target/debug/deps/gateway-HASH → target/{release,debug}/tollgate
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?.parent()?;
    ["release", "debug"]
        .iter()
        .map(|p| target.join(p).join("tollgate"))
        .find(|p| p.exists())
}

#[test]
fn a_reduced_pinned_run_answers_direct_and_through_the_gateway() {
    use tollgate_bench::gateway::overhead::{DIRECT, OverheadConfig, TOLLGATE, run};
    use tollgate_bench::gateway::overhead_report::sections;
    use tollgate_bench::gateway::pinned::peer;
    if let Err(e) = peer("nginx").and_then(|_| peer("wrk")) {
        eprintln!("skipped: nginx or wrk cannot be installed here ({e})");
        return;
    }
    let Some(binary) = built_tollgate() else {
        eprintln!(
            "skipped: no `tollgate` binary (set TOLLGATE_CLI_BIN, or build tollgate-cli first)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let c = OverheadConfig::TINY;
    let measured = run(&c, &binary, dir.path());
    for path in [DIRECT, TOLLGATE] {
        for streamed in [false, true] {
            let row = measured
                .rows
                .iter()
                .find(|r| r.path == path && r.streamed == streamed)
                .unwrap_or_else(|| panic!("no {path} row (streamed {streamed}): {measured:?}"));
            assert!(row.wrk.answered() > 0, "{row:?}");
        }
        let open = measured.open.iter().find(|r| r.path == path);
        assert!(open.is_some_and(|o| o.result.answered > 0), "{measured:?}");
    }
    let tollgate = measured.rows.iter().find(|r| r.path == TOLLGATE).unwrap();
    assert!(tollgate.cpu_us.is_some() && tollgate.peak_rss.is_some_and(|b| b > 0));
    let md: String = sections(&measured, &c)
        .iter()
        .map(|s| s.to_markdown())
        .collect();
    assert!(md.contains("## 8. The gateway's overhead"), "{md}");
    assert!(md.contains("## 8a."), "{md}");
}
