//! Streams: a good one read to the end; one cut, ended early or failing before its first
//! event is retried; after it, interrupted and never re-sent, so no text is repeated.

use tollgate::pipeline::Outcome;
use tollgate::{Error, StreamEvent};

use super::super::harness::{Kit, USAGE, streamed_text};
use super::super::outcome::Checked;
use super::super::script::{StreamScript, WireScript};
use super::super::server::{End, Reply};

const PIECES: [&str; 3] = ["Hel", "lo ", "there"];

const NO_ERROR_EVENT: &str =
    "the script's `stream_error` is `None`: the provider's streams carry no error event";

fn good(script: &dyn WireScript) -> StreamScript {
    script.stream(&PIECES, USAGE)
}

/// The first `n` frames of the good stream, then `end`.
fn first(script: &dyn WireScript, n: usize, end: End) -> Reply {
    let s = good(script);
    Reply::frames(&s.content_type, s.frames[..n].to_vec(), end)
}

/// The first `n` frames of the good stream, then the provider's error event.
fn failing_after(script: &dyn WireScript, n: usize) -> Option<Reply> {
    let s = good(script);
    let mut frames = s.frames[..n].to_vec();
    frames.push(script.stream_error()?);
    Some(Reply::frames(&s.content_type, frames, End::Clean))
}

fn whole(script: &dyn WireScript) -> Reply {
    let s = good(script);
    Reply::frames(&s.content_type, s.frames, End::Clean)
}

fn assert_interrupted(error: Option<Error>, events: &[StreamEvent]) {
    match error {
        Some(Error::StreamInterrupted {
            delivered_events,
            cause,
            ..
        }) => {
            assert!(delivered_events >= 1, "{delivered_events}");
            assert!(
                cause.is_retryable(),
                "the cause is a provider failure: {cause:?}"
            );
        }
        other => panic!("expected StreamInterrupted, got {other:?} after {events:?}"),
    }
    assert_eq!(
        streamed_text(events),
        PIECES[0],
        "the text up to the break, once"
    );
}

/// A good stream reaches the reader piece by piece and ends with the completed answer,
/// its usage, and one recorded call with a time to first token.
pub async fn a_good_stream_reaches_the_reader_and_completes(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(whole(script));
    let (events, error) = kit.stream(&kit.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(streamed_text(&events), PIECES.concat());
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("the last event is the completed answer: {events:?}");
    };
    assert_eq!(answer.text(), PIECES.concat());
    let usage = answer.usage();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (USAGE.input, USAGE.output)
    );
    assert_eq!(kit.server.hits(), 1);
    let call = kit.recorder.calls().pop().expect("recorded");
    assert_eq!((call.outcome, call.attempts), (Outcome::Success, 1));
    assert_eq!(call.usage, usage);
    assert!(call.time_to_first_token.is_some());
    Checked::Passed
}

/// A stream whose connection drops before its first event is retried; the reader sees
/// the whole answer once.
pub async fn a_stream_dropped_before_its_first_event_is_retried(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    let first_event = good(script).first_event;
    kit.server
        .script([first(script, first_event, End::Drop), whole(script)]);
    let (events, error) = kit.stream(&kit.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(streamed_text(&events), PIECES.concat());
    assert_eq!(kit.server.hits(), 2);
    Checked::Passed
}

/// A stream that ends cleanly before its first event (the server closed it) is retried.
pub async fn a_stream_ended_before_its_first_event_is_retried(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    let first_event = good(script).first_event;
    kit.server
        .script([first(script, first_event, End::Clean), whole(script)]);
    let (events, error) = kit.stream(&kit.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(streamed_text(&events), PIECES.concat());
    assert_eq!(kit.server.hits(), 2, "{:#?}", kit.recorder.attempts());
    Checked::Passed
}

/// A stream whose connection drops after its first event is `StreamInterrupted` with a
/// provider failure as the cause, never re-sent: the text already read is not repeated.
pub async fn a_stream_dropped_after_its_first_event_is_interrupted_not_resent(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    let first_event = good(script).first_event;
    kit.server.only(first(script, first_event + 1, End::Drop));
    let (events, error) = kit.stream(&kit.models).await;
    assert_interrupted(error, &events);
    assert_eq!(kit.server.hits(), 1);
    let call = kit.recorder.calls().pop().expect("recorded");
    assert!(matches!(call.outcome, Outcome::Failed { .. }), "{call:?}");
    Checked::Passed
}

/// A stream that ends cleanly after its first event but before its end is
/// `StreamInterrupted` (cut, not complete), never re-sent.
pub async fn a_stream_ended_early_after_its_first_event_is_interrupted(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    let first_event = good(script).first_event;
    kit.server.only(first(script, first_event + 1, End::Clean));
    let (events, error) = kit.stream(&kit.models).await;
    assert_interrupted(error, &events);
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// The provider's error event before the first event is retried like an error answer.
pub async fn an_error_event_before_the_first_event_is_retried(script: &dyn WireScript) -> Checked {
    let first_event = good(script).first_event;
    let Some(failing) = failing_after(script, first_event) else {
        return Checked::skipped(NO_ERROR_EVENT);
    };
    let kit = Kit::new(script).await;
    kit.server.script([failing, whole(script)]);
    let (events, error) = kit.stream(&kit.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(streamed_text(&events), PIECES.concat());
    assert_eq!(kit.server.hits(), 2);
    Checked::Passed
}

/// The provider's error event after the first event interrupts the stream, never
/// re-sent.
pub async fn an_error_event_after_the_first_event_interrupts_the_stream(
    script: &dyn WireScript,
) -> Checked {
    let first_event = good(script).first_event;
    let Some(failing) = failing_after(script, first_event + 1) else {
        return Checked::skipped(NO_ERROR_EVENT);
    };
    let kit = Kit::new(script).await;
    kit.server.only(failing);
    let (events, error) = kit.stream(&kit.models).await;
    assert_interrupted(error, &events);
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// A stream answered with an error status is that status's typed error.
pub async fn a_stream_answered_with_an_error_status_is_that_typed_error(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(script.error(401, "who are you"));
    let (events, error) = kit.stream(&kit.models).await;
    assert!(events.is_empty());
    assert!(
        matches!(&error, Some(Error::ProviderRequest(e)) if e.status == 401),
        "{error:?}"
    );
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}
