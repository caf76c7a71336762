//! Benchmark 9: pacing against llmock, a third-party mock server run with its own rate
//! limits by `scripts/peers.sh`. tollgate, the cookbook's pacing and a naive client run
//! the same batches at the same time on separate API keys; llmock's journal says when
//! each request went and what it answered, and a replay of its buckets gives the best
//! possible. Real time: about 7 minutes.
//!
//! `TOLLGATE_PEERS_ROWS=openai,tokens,...` runs only those phases (`openai`, `anthropic`,
//! `gemini`, `tokens`, `cli`, `redis`). The binary is also its own child process for the
//! Redis row (with `TOLLGATE_PEERS_CHILD` set it runs one part of a batch).

use tollgate_bench::peers::child::{CHILD_ENV, child_main};
use tollgate_bench::peers::run::{Context, PeersConfig, Phase, run_phase};
use tollgate_bench::peers::section::sections;
use tollgate_bench::peers::server::PeersRun;
use tollgate_bench::redis_server::RedisServer;
use tollgate_bench::report::emit_all;

fn main() {
    if let Ok(line) = std::env::var(CHILD_ENV) {
        child_main(&line);
        return;
    }
    let only: Option<Vec<String>> = std::env::var("TOLLGATE_PEERS_ROWS")
        .ok()
        .map(|s| s.split(',').map(|t| t.trim().to_owned()).collect());
    let config = PeersConfig::FULL;
    let started = tollgate::clock::now();
    let pid = std::process::id();
    let peers = PeersRun::new(format!("bench-peers-{pid}"));
    let redis = RedisServer::find_or_start();
    let context = Context {
        peers: &peers,
        redis: redis.as_ref().map(|r| r.url.as_str()),
        prefix: format!("tollgate-peers-{pid}"),
    };
    let runtime = tollgate_bench::real_runtime();
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    if redis.is_none() {
        problems.push(
            "the Redis row: no Redis (set TOLLGATE_REDIS_URL, or put redis-server on PATH)".into(),
        );
    }
    for phase in Phase::ALL {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|t| t == phase.tag()))
        {
            continue;
        }
        eprintln!("peers: phase {}", phase.tag());
        match runtime.block_on(run_phase(phase, &config, &context)) {
            Ok(done) => rows.extend(done),
            Err(e) => {
                eprintln!("peers: phase {} failed: {e}", phase.tag());
                problems.push(format!("phase `{}`: {e}", phase.tag()));
            }
        }
    }
    drop(peers);
    drop(redis);
    let seconds = started.elapsed().as_secs_f64();
    emit_all(&sections(&rows, &config, &problems, seconds));
}
