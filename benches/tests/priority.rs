//! Benchmark 4, reduced: interactive calls under a saturating batch load, FIFO against
//! priority classes, on tokio's paused clock. Hard assertions on behaviour; nothing here
//! reads the wall clock.

use std::time::Duration;

use tollgate_bench::priority::{self, PriorityConfig, Queueing};

// The benchmark's load for 4 simulated minutes instead of 10.
const REDUCED: PriorityConfig = PriorityConfig {
    duration: Duration::from_secs(240),
    seed: 9,
    ..PriorityConfig::FULL
};

#[tokio::test(start_paused = true)]
async fn priorities_cut_interactive_delay_under_batch_load_and_keep_batch_throughput() {
    let fifo = priority::run(Queueing::Fifo, REDUCED).await;
    let prio = priority::run(Queueing::Priorities, REDUCED).await;
    assert!(
        fifo.interactive > 100,
        "{} interactive calls",
        fifo.interactive
    );
    assert_eq!(
        fifo.interactive, prio.interactive,
        "the same seeded arrivals"
    );
    // FIFO: interactive calls wait behind the whole batch queue.
    let (fifo_p99, prio_p99) = (fifo.interactive_delay(0.99), prio.interactive_delay(0.99));
    assert!(
        fifo.interactive_delay(0.5) > 1.0,
        "FIFO p50 {}: the batch load does not saturate",
        fifo.interactive_delay(0.5)
    );
    assert!(
        prio_p99 * 10.0 < fifo_p99,
        "interactive p99: priorities {prio_p99} s, FIFO {fifo_p99} s"
    );
    assert!(
        prio.interactive_delay(0.5) < fifo.interactive_delay(0.5),
        "interactive p50"
    );
    // The model stays saturated: batch throughput within 2% of FIFO's.
    let change = prio.batch_per_min / fifo.batch_per_min - 1.0;
    assert!(
        change.abs() <= 0.02,
        "batch {} / min vs FIFO {} / min",
        prio.batch_per_min,
        fifo.batch_per_min
    );
    for r in [&fifo, &prio] {
        assert!(
            (r.total_per_min - 600.0).abs() <= 6.0,
            "{:?}: {} grants / min at 600 rpm",
            r.queueing,
            r.total_per_min
        );
    }
}
