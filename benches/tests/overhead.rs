//! Benchmark 1's queue, reduced: every waiter is woken exactly once, by the grant, whether
//! capacity comes from the clock or from a hand-off. Counts only, no wall time.

use tollgate_bench::overhead;

#[tokio::test(start_paused = true)]
async fn one_wake_up_per_grant_when_the_clock_refills() {
    let r = overhead::tollgate_clock(500).await;
    assert_eq!(r.wakes, 500);
    assert_eq!(
        r.polls, 1_000,
        "each waiter polled once to queue, once to finish"
    );
}

#[tokio::test(start_paused = true)]
async fn one_wake_up_per_grant_on_hand_off() {
    let r = overhead::tollgate_handoff(500).await;
    assert_eq!(r.wakes, 500);
    assert_eq!(r.polls, 1_000);
}
