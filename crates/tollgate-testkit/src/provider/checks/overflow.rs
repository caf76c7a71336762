//! Context overflows the provider reports, by an error answer or by a stop reason: each
//! is `ContextWindowExceeded` naming the model, and each starts the opt-in larger-window
//! fallback without the catalog stating the model's `context_window`.

use tollgate::pipeline::FallbackOptions;
use tollgate::{Error, ModelEntry};

use super::super::harness::{Kit, LARGER, LARGER_WINDOW, MODEL, USAGE, request};
use super::super::outcome::Checked;
use super::super::script::WireScript;
use super::super::server::Reply;

const NO_OVERFLOW_ERROR: &str = "the script's `context_overflow` is `None`: the provider never answers an overflow with an error";
const NO_WINDOW_STOP: &str =
    "the script's `context_window_stop` is `None`: the provider has no full-window stop reason";

/// Whether `err` is the overflow of `model`, whose catalog entry states no window.
fn is_overflow_of(err: &Error, model: &str) -> bool {
    matches!(err, Error::ContextWindowExceeded { model_id, window: None, .. } if model_id == model)
}

/// A kit whose server answers `overflow`, after one whole call, checked to fail as the
/// model's overflow, sent once.
async fn asked(script: &dyn WireScript, overflow: Reply) -> Kit<'_> {
    let kit = Kit::new(script).await;
    kit.server.only(overflow);
    let err = kit.ask(&kit.models).await.expect_err("overflow");
    assert!(is_overflow_of(&err, MODEL), "{err:?}");
    assert_eq!(kit.server.hits(), 1);
    kit
}

/// The provider's overflow error is `ContextWindowExceeded` naming the model (its window
/// `None`: the catalog states none), sent once, for a whole call and a streamed one.
pub async fn a_context_overflow_is_typed_and_names_the_model(script: &dyn WireScript) -> Checked {
    let Some(overflow) = script.context_overflow() else {
        return Checked::skipped(NO_OVERFLOW_ERROR);
    };
    let kit = asked(script, overflow).await;
    let (events, error) = kit.stream(&kit.models).await;
    assert!(
        error.as_ref().is_some_and(|e| is_overflow_of(e, MODEL)),
        "{error:?}"
    );
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(kit.server.hits(), 2);
    Checked::Passed
}

/// An answer whose stop reason says the window filled is `ContextWindowExceeded` naming
/// the model, sent once (an overflow, not a truncation to re-run at the ceiling).
pub async fn a_context_window_stop_is_typed_and_names_the_model(
    script: &dyn WireScript,
) -> Checked {
    let Some(stop) = script.context_window_stop() else {
        return Checked::skipped(NO_WINDOW_STOP);
    };
    asked(script, stop).await;
    Checked::Passed
}

fn larger(entry: ModelEntry) -> ModelEntry {
    entry.with_context_window(LARGER_WINDOW)
}

/// An overflow the provider reports (its error, and its stop reason) on a model whose
/// catalog entry states no `context_window` is returned as it is by a fallback chain
/// (one send), and with `on_context_overflow` moves the call to the chain's model that
/// states a window, which answers (two sends).
pub async fn a_reported_overflow_moves_to_a_larger_window_when_opted_in(
    script: &dyn WireScript,
) -> Checked {
    let overflows = [script.context_overflow(), script.context_window_stop()];
    let skipped = match &overflows {
        [None, None] => {
            return Checked::skipped(format!("{NO_OVERFLOW_ERROR}, and {NO_WINDOW_STOP}"));
        }
        [None, Some(_)] => Some(NO_OVERFLOW_ERROR.to_owned()),
        [Some(_), None] => Some(NO_WINDOW_STOP.to_owned()),
        [Some(_), Some(_)] => None,
    };
    for overflow in overflows.into_iter().flatten() {
        let kit =
            Kit::with_models(script, |e| e.with_fallbacks([LARGER]), &[(LARGER, larger)]).await;
        let replies = || {
            [
                overflow.clone(),
                script.answer("from the larger window", USAGE),
            ]
        };
        kit.server.script(replies());
        let kept = kit
            .models
            .chat_with_fallbacks(MODEL, FallbackOptions::default())
            .await
            .expect("the chain")
            .single_response(&request())
            .await
            .expect_err("kept without opting in");
        assert!(is_overflow_of(&kept, MODEL), "{kept:?}");
        assert_eq!(kit.server.hits(), 1);

        kit.server.script(replies());
        let options = FallbackOptions {
            on_context_overflow: true,
            ..FallbackOptions::default()
        };
        let answer = kit
            .models
            .chat_with_fallbacks(MODEL, options)
            .await
            .expect("the chain")
            .single_response(&request())
            .await
            .expect("answered by the larger model");
        assert_eq!(answer.text(), "from the larger window");
        assert_eq!(kit.server.hits(), 3);
        let last = kit.recorder.calls().pop().expect("recorded");
        assert_eq!(last.model_id, LARGER);
    }
    Checked::passed_except(skipped)
}
