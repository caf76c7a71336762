//! The simulated provider on tokio's paused clock.

use std::time::Duration;

use tollgate::provider::clock;

use crate::*;

fn rpm(n: u64) -> SimLimits {
    SimLimits {
        rpm: n,
        ..SimLimits::default()
    }
}

fn small() -> SimRequest {
    SimRequest::new(10, 10, 0)
}

fn instant() -> SimLatency {
    SimLatency {
        base: Duration::ZERO,
        per_output_token: Duration::ZERO,
        refusal: Duration::ZERO,
    }
}

#[tokio::test(start_paused = true)]
async fn sim_full_minute_bucket_then_one_per_refill_with_whole_second_retry_after() {
    let p = SimProvider::new(SimConfig::new(rpm(60)).with_latency(instant()));
    for _ in 0..60 {
        p.call(small()).await.unwrap();
    }
    assert_eq!(
        p.call(small()).await,
        Err(SimRefusal::RateLimited {
            retry_after: Some(Duration::from_secs(1))
        })
    );
    tokio::time::sleep(Duration::from_millis(999)).await;
    assert!(p.call(small()).await.is_err());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(p.call(small()).await.is_ok());
    let stats = p.stats();
    assert_eq!((stats.accepted, stats.rate_limited), (61, 2));
}

#[tokio::test(start_paused = true)]
async fn sim_per_second_capacity_and_exact_retry_after() {
    let p = SimProvider::new(
        SimConfig::new(rpm(600))
            .with_capacity(SimCapacity::PerSecond)
            .with_retry_after(RetryAfter::Exact)
            .with_latency(instant()),
    );
    for _ in 0..10 {
        p.call(small()).await.unwrap();
    }
    assert_eq!(
        p.call(small()).await,
        Err(SimRefusal::RateLimited {
            retry_after: Some(Duration::from_millis(100))
        })
    );
    assert_eq!(p.capacity().requests, 10);
}

#[tokio::test(start_paused = true)]
async fn sim_answer_takes_base_plus_per_token_and_actual_output_refunds_the_rest() {
    let p = SimProvider::new(
        SimConfig::new(SimLimits {
            output_tpm: 1000,
            ..SimLimits::default()
        })
        .with_output_charge(OutputCharge::Actual),
    );
    let start = clock::now();
    let answer = p.call(SimRequest::new(100, 800, 20)).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(300 + 15 * 20));
    assert_eq!(answer.output_tokens, 20);
    assert_eq!(answer.finished_at, Duration::from_millis(600));
    // 800 were held while it ran; 780 came back at the end: another 800 fits now.
    let call = p.journal()[0];
    assert_eq!(call.charged.output_tokens, 20);
    assert_eq!(call.completed_at, Some(Duration::from_millis(600)));
    assert_eq!(p.stats().accepted_charge.output_tokens, 20);
    let held = tokio::spawn({
        let p = p.clone();
        async move { p.call(SimRequest::new(0, 900, 900)).await }
    });
    tokio::task::yield_now().await;
    assert!(matches!(
        p.call(SimRequest::new(0, 200, 1)).await,
        Err(SimRefusal::RateLimited { .. })
    ));
    assert!(held.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn sim_max_tokens_charge_is_kept() {
    let p = SimProvider::new(
        SimConfig::new(SimLimits {
            output_tpm: 1000,
            ..SimLimits::default()
        })
        .with_latency(instant()),
    );
    p.call(SimRequest::new(0, 800, 1)).await.unwrap();
    assert!(p.call(SimRequest::new(0, 201, 1)).await.is_err());
    assert_eq!(p.stats().accepted_charge.output_tokens, 800);
}

#[tokio::test(start_paused = true)]
async fn sim_counted_rejections_leave_debt_and_are_reported_as_waste() {
    let p = SimProvider::new(
        SimConfig::new(rpm(60))
            .with_count_rejected(true)
            .with_latency(instant()),
    );
    for _ in 0..60 {
        p.call(small()).await.unwrap();
    }
    for _ in 0..3 {
        assert!(p.call(small()).await.is_err());
    }
    // Three requests of debt: the next one fits after four seconds, not one.
    tokio::time::sleep(Duration::from_millis(3_999)).await;
    assert!(p.call(small()).await.is_err());
    let stats = p.stats();
    assert_eq!(stats.wasted_charge.requests, 4);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(p.call(small()).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn sim_oversize_call_is_refused_with_a_full_refill_wait() {
    let p = SimProvider::new(SimConfig::new(SimLimits {
        input_tpm: 1000,
        ..SimLimits::default()
    }));
    assert_eq!(
        p.call(SimRequest::new(1001, 1, 1)).await,
        Err(SimRefusal::RateLimited {
            retry_after: Some(Duration::from_secs(60))
        })
    );
    assert_eq!(p.stats().oversize, 1);
    assert!(matches!(
        p.journal()[0].outcome,
        SimOutcome::RateLimited {
            dimension: SimDimension::InputTokens,
            oversize: true
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn sim_serves_a_fraction_and_steps_it_over_time() {
    let p = SimProvider::new(
        SimConfig::new(rpm(600))
            .with_capacity(SimCapacity::PerSecond)
            .with_served(0.5)
            .with_served_step(Duration::from_secs(10), 0.2)
            .with_latency(instant()),
    );
    // Capacity 10 at the published limit, 5 at half.
    let burst = |p: SimProvider| async move {
        let mut n = 0;
        while p.call(small()).await.is_ok() {
            n += 1;
        }
        n
    };
    assert_eq!(burst(p.clone()).await, 5);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(burst(p.clone()).await, 5);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(p.served(), 0.2);
    assert_eq!(burst(p.clone()).await, 2);
    p.set_served(1.0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(burst(p.clone()).await, 10);
}

#[tokio::test(start_paused = true)]
async fn sim_overloads_are_seeded_and_unrelated_to_rate() {
    let run = || async {
        let p = SimProvider::new(
            SimConfig::new(SimLimits::default())
                .with_overloads(0.05, 42)
                .with_latency(instant()),
        );
        let mut refused = Vec::new();
        for i in 0..2000 {
            if p.call(small()).await == Err(SimRefusal::Overloaded) {
                refused.push(i);
            }
        }
        (refused, p.stats())
    };
    let (a, stats) = run().await;
    let (b, _) = run().await;
    assert_eq!(a, b, "the same seed refuses the same calls");
    assert!((60..140).contains(&a.len()), "{}", a.len());
    assert_eq!(stats.overloaded, a.len() as u64);
    assert_eq!(stats.rate_limited, 0);
}

#[tokio::test(start_paused = true)]
async fn sim_fixed_window_refuses_until_the_window_turns_then_allows_the_whole_limit() {
    let p = SimProvider::new(
        SimConfig::new(rpm(30))
            .with_latency(instant())
            .with_window(SimWindow::Fixed),
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    for _ in 0..30 {
        p.call(small()).await.unwrap();
    }
    // 10 s into the first window: refused until it turns at 60 s, whatever has passed.
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert_eq!(
        p.call(small()).await,
        Err(SimRefusal::RateLimited {
            retry_after: Some(Duration::from_secs(10))
        })
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    for _ in 0..30 {
        p.call(small()).await.unwrap();
    }
    assert!(p.call(small()).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn sim_headers_say_limit_remaining_and_when_full_in_each_style() {
    for (window, style) in [
        (SimWindow::Continuous, SimHeaderStyle::Anthropic),
        (SimWindow::Continuous, SimHeaderStyle::OpenAi),
        (SimWindow::Fixed, SimHeaderStyle::Anthropic),
        (SimWindow::Fixed, SimHeaderStyle::OpenAi),
    ] {
        let p = SimProvider::new(
            SimConfig::new(rpm(60))
                .with_latency(instant())
                .with_window(window)
                .with_served(0.5)
                .with_headers(style),
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        let (answer, headers) = p.call_with_headers(small()).await;
        answer.unwrap();
        let [h] = headers.limits.as_slice() else {
            panic!("one limited dimension: {headers:?}")
        };
        assert_eq!(
            (h.dimension, h.limit, h.remaining),
            (SimDimension::Requests, 30, 29)
        );
        // Full again: one request refills in 2 s at 30 a minute; a fixed window at 60 s.
        let full_in = match window {
            SimWindow::Continuous => Duration::from_secs(2),
            SimWindow::Fixed => Duration::from_secs(50),
        };
        let expected = match style {
            SimHeaderStyle::Anthropic => SimReset::At(Duration::from_secs(10) + full_in),
            _ => SimReset::In(full_in),
        };
        assert_eq!(h.reset, expected, "{window:?} {style:?}");
    }
    let quiet = SimProvider::new(SimConfig::new(rpm(60)));
    assert!(quiet.call_with_headers(small()).await.1.limits.is_empty());
}

const MS: Duration = Duration::from_millis(1);

/// A call whose input size is its number in send order, so the journal tells who it was.
fn numbered(i: u64) -> SimRequest {
    SimRequest::new(i, 10, 0)
}

/// Sends `n` calls at once (call `i` after `i * gap`), each on its own task; returns each
/// call's send number, answer and headers.
async fn send_concurrently(
    p: &SimProvider,
    n: u64,
    gap: Duration,
) -> Vec<(u64, SimAnswer, SimHeaders)> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let p = p.clone();
            tokio::spawn(async move {
                tokio::time::sleep(gap * u32::try_from(i).unwrap()).await;
                let (answer, headers) = p.call_with_headers(numbered(i)).await;
                (i, answer.unwrap(), headers)
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// tokio's timers fire on whole milliseconds: a drawn time is waited to within 1 ms.
fn waited(actual: Duration, drawn: Duration) -> bool {
    actual >= drawn && actual <= drawn + MS
}

#[tokio::test(start_paused = true)]
async fn answers_of_concurrent_requests_come_back_out_of_order() {
    let p = SimProvider::new(SimConfig::new(rpm(600)).with_seed(1).with_answer_time(
        SimDelay::Uniform {
            min: 20 * MS,
            max: 800 * MS,
        },
    ));
    let mut answers: Vec<_> = send_concurrently(&p, 20, Duration::ZERO)
        .await
        .into_iter()
        .map(|(_, a, _)| a)
        .collect();
    // Admitted one after another; each answered after its own drawn time, the draws
    // being those a replay of the configuration makes in admission order.
    answers.sort_by_key(|a| a.id);
    let mut replay = SimTimings::new(p.config());
    for a in &answers {
        let drawn = replay.next_answer_time(0);
        assert!((20 * MS..=800 * MS).contains(&drawn));
        assert!(
            waited(a.finished_at - a.accepted_at, drawn),
            "{a:?} {drawn:?}"
        );
    }
    let admitted: Vec<u64> = answers.iter().map(|a| a.id).collect();
    answers.sort_by_key(|a| a.finished_at);
    let answered: Vec<u64> = answers.iter().map(|a| a.id).collect();
    assert_ne!(answered, admitted);
    assert_eq!(p.stats().completed, 20);
}

#[tokio::test(start_paused = true)]
async fn with_a_fixed_latency_answers_come_back_in_admission_order() {
    let p = SimProvider::new(SimConfig::new(rpm(600)).with_seed(1));
    let answers = send_concurrently(&p, 20, Duration::ZERO).await;
    let mut by_finish: Vec<_> = answers.iter().map(|(_, a, _)| a).collect();
    by_finish.sort_by_key(|a| (a.finished_at, a.id));
    assert!(by_finish.windows(2).all(|w| w[0].id < w[1].id));
    assert!(by_finish.iter().all(|a| a.finished_at == 300 * MS));
}

#[tokio::test(start_paused = true)]
async fn network_delay_reorders_arrivals() {
    let p = SimProvider::new(
        SimConfig::new(SimLimits::default())
            .with_seed(2)
            .with_latency(instant())
            .with_network_delay(SimDelay::Uniform {
                min: Duration::ZERO,
                max: 200 * MS,
            }),
    );
    let gap = 10 * MS;
    send_concurrently(&p, 20, gap).await;
    let journal = p.journal();
    // The journal is in arrival order; each call arrived its drawn delay after it was
    // sent, the draws being a replay's in send order.
    let mut replay = SimTimings::new(p.config());
    let delays: Vec<Duration> = (0..20).map(|_| replay.next_network_delay()).collect();
    for call in &journal {
        let i = call.request.input_tokens;
        let sent = gap * u32::try_from(i).unwrap();
        assert!(waited(call.at - sent, delays[i as usize]), "{call:?}");
    }
    assert!(journal.windows(2).all(|w| w[0].at <= w[1].at));
    let arrived: Vec<u64> = journal.iter().map(|c| c.request.input_tokens).collect();
    let mut sent = arrived.clone();
    sent.sort();
    assert_eq!(sent, (0..20).collect::<Vec<_>>());
    assert_ne!(arrived, sent);
}

#[tokio::test(start_paused = true)]
async fn headers_are_computed_when_the_request_arrives() {
    // 60 rpm, so a request refills in 1 s; answers take 10 s, by when the bucket would be
    // full again; calls sent together arrive within 500 ms, in another order.
    let p = SimProvider::new(
        SimConfig::new(rpm(60))
            .with_seed(3)
            .with_headers(SimHeaderStyle::OpenAi)
            .with_latency(SimLatency {
                base: Duration::from_secs(10),
                ..instant()
            })
            .with_network_delay(SimDelay::Uniform {
                min: Duration::ZERO,
                max: 500 * MS,
            }),
    );
    let answers = send_concurrently(&p, 10, Duration::ZERO).await;
    let mut reordered = false;
    for (sent, answer, headers) in &answers {
        reordered |= answer.id != *sent;
        assert!(answer.finished_at >= Duration::from_secs(10));
        let [h] = headers.limits.as_slice() else {
            panic!("one limited dimension: {headers:?}")
        };
        // What was left when it arrived, the `id`-th: 60 less the arrivals so far (less
        // than half a request refilled meanwhile), not what is left when it is answered.
        assert_eq!(h.remaining, 59 - answer.id, "{answer:?} {h:?}");
        let SimReset::In(full_in) = h.reset else {
            panic!("{h:?}")
        };
        let missing = Duration::from_secs(answer.id + 1);
        assert!(full_in <= missing && full_in > missing - 500 * MS, "{h:?}");
    }
    assert!(reordered, "{answers:?}");
}
