//! Faults past the status line: bodies and events that do not decode, answers too large
//! to keep, streams that stall before or after their first event.

use std::time::Duration;

use tollgate::pipeline::Outcome;
use tollgate::{Error, ProviderError};

use super::super::harness::{Kit, MODEL, USAGE, streamed_text};
use super::super::outcome::Checked;
use super::super::script::WireScript;
use super::super::server::{Body, End, Reply};

const PIECES: [&str; 3] = ["Hel", "lo ", "there"];

/// A 200 whose body does not decode is a retryable `Malformed` keeping the start of the
/// body; the retry is answered.
pub async fn a_malformed_answer_is_retried_then_answered(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    let garbage = || Reply::raw(200, "application/json", "{not json");
    kit.server.only(garbage());
    let err = kit.ask(&kit.no_retries()).await.expect_err("malformed");
    assert!(
        matches!(&err, Error::Provider(ProviderError::Malformed { raw, .. }) if raw.contains("{not json")),
        "{err:?}"
    );
    kit.server.script([garbage(), script.answer("ok", USAGE)]);
    kit.ask(&kit.models).await.expect("answered on the retry");
    let call = kit.recorder.calls().pop().expect("recorded");
    assert_eq!((call.outcome, call.attempts), (Outcome::Success, 2));
    Checked::Passed
}

/// An event that does not decode before the first event is retried; after it, the
/// stream is `StreamInterrupted` with `Malformed` as the cause, never re-sent.
pub async fn a_malformed_stream_event_is_retried_before_the_first_event_only(
    script: &dyn WireScript,
) -> Checked {
    let good = script.stream(&PIECES, USAGE);
    let with_garbage_after = |n: usize| {
        let mut frames = good.frames[..n].to_vec();
        frames.push(script.malformed_frame());
        Reply::frames(&good.content_type, frames, End::Clean)
    };
    let whole = Reply::frames(&good.content_type, good.frames.clone(), End::Clean);
    let kit = Kit::new(script).await;
    kit.server
        .script([with_garbage_after(good.first_event), whole]);
    let (events, error) = kit.stream(&kit.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(streamed_text(&events), PIECES.concat());
    assert_eq!(kit.server.hits(), 2);

    let kit = Kit::new(script).await;
    kit.server.only(with_garbage_after(good.first_event + 1));
    let (events, error) = kit.stream(&kit.models).await;
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { cause, .. })
            if matches!(**cause, Error::Provider(ProviderError::Malformed { .. }))),
        "{error:?}"
    );
    assert_eq!(streamed_text(&events), PIECES[0]);
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// An answer larger than the model's `max_response_bytes` fails typed, naming the model
/// and the limit, without being read whole; it is not retried (the same request would
/// get the same answer).
pub async fn an_answer_larger_than_the_models_cap_fails_typed(script: &dyn WireScript) -> Checked {
    let limit = 64 << 10;
    let kit = Kit::with_model(script, |e| e.with_max_response_bytes(limit)).await;
    kit.server.only(Reply::Respond {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Body::Huge {
            prefix: b"{\"filler\": \"".to_vec(),
            len: 8 << 20,
        },
    });
    let err = kit.ask(&kit.models).await.expect_err("too large");
    assert!(
        matches!(&err, Error::ResponseTooLarge { model_id, limit_bytes } if model_id == MODEL && limit_bytes == &limit),
        "{err:?}"
    );
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// A stream event larger than the model's `max_response_bytes` ends the stream typed,
/// naming the model and the limit, without being read whole (reading stops at the limit,
/// wherever the event's end would be); it is not retried.
pub async fn a_stream_event_larger_than_the_models_cap_fails_typed(
    script: &dyn WireScript,
) -> Checked {
    let limit = 64 << 10;
    let len = 8 << 20;
    let kit = Kit::with_model(script, |e| e.with_max_response_bytes(limit)).await;
    kit.server.only(Reply::Respond {
        status: 200,
        headers: vec![(
            "content-type".into(),
            script.stream(&PIECES, USAGE).content_type,
        )],
        body: Body::Huge {
            prefix: script.oversized_event(len),
            len,
        },
    });
    let (events, error) = kit.stream(&kit.models).await;
    assert!(
        matches!(&error, Some(Error::ResponseTooLarge { model_id, limit_bytes })
            if model_id == MODEL && limit_bytes == &limit),
        "{error:?}"
    );
    assert_eq!(streamed_text(&events), "");
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// A stream that stalls before its first event is given up after the model's idle
/// timeout and retried; one that stalls after it is `StreamInterrupted` with a `Timeout`
/// cause. Runs on the paused clock: the stall is ten minutes, the idle timeout 5 s.
pub async fn a_stalled_stream_times_out_retried_before_the_first_event_only(
    script: &dyn WireScript,
) -> Checked {
    let good = script.stream(&PIECES, USAGE);
    let stalled_after = |n: usize| {
        Reply::frames(
            &good.content_type,
            good.frames[..n].to_vec(),
            End::Stall(Duration::from_secs(600)),
        )
    };
    let whole = Reply::frames(&good.content_type, good.frames.clone(), End::Clean);
    let idle = |e: tollgate::ModelEntry| e.with_stream_idle_timeout_secs(5);

    let kit = Kit::with_model(script, idle).await;
    kit.server.script([stalled_after(good.first_event), whole]);
    let (events, error) = kit.stream(&kit.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(streamed_text(&events), PIECES.concat());
    assert_eq!(kit.server.hits(), 2);

    let kit = Kit::with_model(script, idle).await;
    kit.server.only(stalled_after(good.first_event + 1));
    let (events, error) = kit.stream(&kit.models).await;
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { cause, .. })
            if matches!(**cause, Error::Provider(ProviderError::Timeout { .. }))),
        "{error:?}"
    );
    assert_eq!(streamed_text(&events), PIECES[0]);
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// A storm of 429s, three with `retry-after: 2` and one without, is waited out (each
/// wait at least what the provider asked, on the paused clock) and then answered within
/// the retry budget.
pub async fn a_429_storm_is_waited_out_then_answered(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    let limited = || script.rate_limited("slow down");
    let with_wait = || limited().header("retry-after", "2");
    kit.server.script([
        with_wait(),
        with_wait(),
        limited(),
        with_wait(),
        script.answer("ok", USAGE),
    ]);
    let started = tollgate::clock::now();
    kit.ask(&kit.models)
        .await
        .expect("answered after the storm");
    assert!(
        started.elapsed() >= Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    let call = kit.recorder.calls().pop().expect("recorded");
    assert_eq!((call.outcome, call.attempts), (Outcome::Success, 5));
    assert_eq!(kit.server.hits(), 5);
    Checked::Passed
}

/// A storm longer than the retry budget ends with the provider's last word, typed: the
/// budget is the pipeline's, however long the provider keeps refusing.
pub async fn a_429_storm_longer_than_the_budget_ends_rate_limited(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    kit.server
        .only(script.rate_limited("slow down").header("retry-after", "1"));
    let err = kit
        .ask(&kit.models)
        .await
        .expect_err("the storm does not end");
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { .. })),
        "{err:?}"
    );
    assert_eq!(kit.server.hits(), 5, "one send and four retries");
    Checked::Passed
}

/// A burst of server errors (500, 502, 503, 504), each kept with its status, is retried
/// to an answer; a 529 burst likewise.
pub async fn a_burst_of_server_errors_is_retried_then_answered(script: &dyn WireScript) -> Checked {
    for burst in [vec![500u16, 502, 503, 504], vec![529, 529, 529]] {
        let kit = Kit::new(script).await;
        let mut replies: Vec<Reply> = burst.iter().map(|s| script.error(*s, "down")).collect();
        replies.push(script.answer("ok", USAGE));
        kit.server.script(replies);
        kit.ask(&kit.models)
            .await
            .expect("answered after the burst");
        let attempts = kit.recorder.attempts();
        let statuses: Vec<Option<u16>> = attempts
            .iter()
            .map(|a| match &a.outcome {
                Outcome::Failed { status, .. } => *status,
                Outcome::Success => None,
            })
            .collect();
        let mut expected: Vec<Option<u16>> = burst.iter().map(|s| Some(*s)).collect();
        expected.push(None);
        assert_eq!(statuses, expected, "each attempt recorded with its status");
    }
    Checked::Passed
}

/// A stream dripped a byte a second never completes an event within the model's idle
/// timeout (5 s here): each attempt is given up as a `Timeout` before its first event,
/// retried, and the last `Timeout` is the call's error. Nothing reaches the reader.
pub async fn a_slow_drip_is_cut_by_the_idle_timeout(script: &dyn WireScript) -> Checked {
    let good = script.stream(&PIECES, USAGE);
    let drip = Reply::Respond {
        status: 200,
        headers: vec![("content-type".into(), good.content_type.clone())],
        body: Body::Drip {
            bytes: good.frames.concat(),
            every: Duration::from_secs(1),
        },
    };
    let kit = Kit::with_model(script, |e| e.with_stream_idle_timeout_secs(5)).await;
    kit.server.only(drip);
    let (events, error) = kit.stream(&kit.models).await;
    assert!(
        matches!(&error, Some(Error::Provider(ProviderError::Timeout { .. }))),
        "{error:?}"
    );
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(kit.server.hits(), 5);
    Checked::Passed
}
