//! Benchmark 10: the gateway, `tollgate serve` (the release binary beside this bench, as
//! for the peers bench; `TOLLGATE_CLI_BIN` overrides), beside its peers, in one run:
//! the overhead, pinned (each gateway alone on core 0 — `tollgate serve` with one tokio
//! worker thread, Portkey's gateway, LiteLLM's proxy with one worker — in front of nginx,
//! driven by wrk and an open-loop driver on core 1; `scripts/peers.sh nginx`, `wrk`,
//! `portkey`, `litellm`); pacing through two replicas on Redis against llmock, LiteLLM
//! beside; and head-of-line blocking of streamed turns by a 100k-token request. Real
//! time: a few minutes.
//!
//! `TOLLGATE_GATEWAY_ROWS=overhead,pacing,hol` runs only those parts. The binary is also
//! the pacing part's client process (with `TOLLGATE_GATEWAY_CHILD` set) and the overhead
//! part's open-loop driver (with `TOLLGATE_GATEWAY_OPEN_LOOP` set).

use tollgate_bench::gateway::{head_of_line, open_loop, overhead, overhead_report, pacing};
use tollgate_bench::peers::child::cli_binary;
use tollgate_bench::report::{Section, emit_all};

fn main() {
    if let Ok(line) = std::env::var(pacing::CHILD_ENV) {
        pacing::child_main(&line);
        return;
    }
    if let Ok(line) = std::env::var(open_loop::OPEN_LOOP_ENV) {
        open_loop::child_main(&line);
        return;
    }
    let only: Option<Vec<String>> = std::env::var("TOLLGATE_GATEWAY_ROWS")
        .ok()
        .map(|s| s.split(',').map(|t| t.trim().to_owned()).collect());
    let wanted = |tag: &str| only.as_ref().is_none_or(|o| o.iter().any(|t| t == tag));
    let binary = cli_binary().unwrap_or_else(|e| {
        eprintln!("gateway: {e}");
        std::process::exit(1);
    });
    let dir = std::env::temp_dir().join(format!("tollgate-gateway-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let runtime = tollgate_bench::real_runtime();
    let mut sections: Vec<Section> = Vec::new();
    if wanted("overhead") {
        let config = overhead::OverheadConfig::FULL;
        let measured = overhead::run(&config, &binary, &dir);
        sections.extend(overhead_report::sections(&measured, &config));
    }
    if wanted("pacing") {
        let config = pacing::PacingConfig::FULL;
        let (rows, problems) = runtime.block_on(pacing::run(&config, &binary, &dir));
        sections.push(pacing::section(&rows, &config, &problems));
    }
    if wanted("hol") {
        let config = head_of_line::HolConfig::FULL;
        let (rows, problems) = runtime.block_on(head_of_line::run(&config, &binary, &dir));
        sections.push(head_of_line::section(&rows, &config, &problems));
    }
    let _ = std::fs::remove_dir_all(&dir);
    emit_all(&sections);
}
