//! Benchmark 4: priority classes, interactive queue delay under a saturating batch load,
//! one FIFO queue against `Interactive` / `Batch`: in process on tokio's paused clock,
//! then (4b) on tollgate-redis in real time when a Redis can be had (`TOLLGATE_REDIS_URL`,
//! or `redis-server` on PATH). Prints its tables (and writes them where
//! `TOLLGATE_BENCH_OUT` says).

use std::sync::Arc;

use tollgate::limit::LimiterBackend;
use tollgate_bench::priority::{self, PriorityConfig, PriorityReport, Queueing};
use tollgate_bench::redis_server::RedisServer;
use tollgate_redis::{RedisConfig, RedisLimiters};

fn print(place: &str, r: &PriorityReport) {
    eprintln!(
        "{place} {}: interactive p50 {:.3} s, p99 {:.3} s ({} calls); batch {:.1} / min",
        r.queueing.name(),
        r.interactive_delay(0.5),
        r.interactive_delay(0.99),
        r.interactive,
        r.batch_per_min
    );
}

fn main() {
    let config = PriorityConfig::FULL;
    let reports: Vec<_> = Queueing::ALL
        .iter()
        .map(|queueing| {
            let r = tollgate_bench::paused_runtime().block_on(priority::run(*queueing, config));
            print("in process", &r);
            r
        })
        .collect();
    let mut sections = vec![priority::section(&reports, config)];
    match RedisServer::find_or_start() {
        Some(redis) => {
            let config = PriorityConfig::REAL_TIME;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let reports = runtime.block_on(async {
                let limiters = RedisLimiters::new(
                    RedisConfig::new(redis.url.clone())
                        .with_key_prefix(format!("tollgate-bench-priority-{}", std::process::id())),
                )
                .expect("a Redis config");
                let runs = Queueing::ALL.map(|queueing| {
                    let limiter: Arc<dyn LimiterBackend> = Arc::new(
                        limiters.limiter(&config.limiter_config(&format!("m-{queueing:?}"))),
                    );
                    tokio::spawn(priority::run_on(limiter, queueing, config))
                });
                let mut reports = Vec::new();
                for run in runs {
                    reports.push(run.await.expect("a priority run"));
                }
                reports
            });
            reports.iter().for_each(|r| print("redis", r));
            sections.push(priority::redis_section(&reports, config));
        }
        None => eprintln!(
            "priority on Redis skipped: no Redis (TOLLGATE_REDIS_URL, or redis-server on PATH)"
        ),
    }
    tollgate_bench::report::emit_all(&sections);
}
