//! Error answers: each status's typed outcome, how many times it was sent, what was
//! recorded; `retry-after`, `x-should-retry`, quota, refusal, and a connection that
//! fails (context overflows are in `overflow`).

use std::sync::Arc;
use std::time::Duration;

use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{MemoryRecorder, Outcome};
use tollgate::{ConnectionCause, Conversation, Error, ProviderError, SamplingParams};

use super::super::harness::{Kit, MODEL, SECRET, USAGE, models};
use super::super::outcome::Checked;
use super::super::script::WireScript;
use super::super::server::RefusingPort;

/// The last call's outcome and attempts as recorded.
fn last_call(kit: &Kit<'_>) -> (Outcome, u32) {
    let call = kit.recorder.calls().pop().expect("the call was recorded");
    (call.outcome, call.attempts)
}

/// 400, 401, 403, 404 and 413 are the caller's to fix: a `ProviderRequest` error with
/// the wire's status, sent once, recorded as failed with that status.
pub async fn request_errors_keep_their_status_and_are_sent_once(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    for (i, status) in [400u16, 401, 403, 404, 413].into_iter().enumerate() {
        kit.server.only(script.error(status, "you asked wrong"));
        let err = kit.ask(&kit.models).await.expect_err("an error answer");
        assert!(
            matches!(&err, Error::ProviderRequest(e) if e.status == status),
            "{status}: {err:?}"
        );
        assert_eq!(kit.server.hits(), i + 1, "{status} is sent once");
        let (outcome, attempts) = last_call(&kit);
        assert_eq!(attempts, 1);
        assert!(
            matches!(outcome, Outcome::Failed { status: Some(s), .. } if s == status),
            "{status}: {outcome:?}"
        );
    }
    Checked::Passed
}

/// A 408 is a timeout: retried, then answered.
pub async fn status_408_is_a_timeout_retried_then_answered(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(script.error(408, "too slow"));
    let err = kit.ask(&kit.no_retries()).await.expect_err("408");
    assert!(
        matches!(err, Error::Provider(ProviderError::Timeout { .. })),
        "{err:?}"
    );
    kit.server
        .script([script.error(408, "too slow"), script.answer("ok", USAGE)]);
    kit.ask(&kit.models).await.expect("answered on the retry");
    assert_eq!(kit.server.hits(), 3);
    assert_eq!(last_call(&kit), (Outcome::Success, 2));
    Checked::Passed
}

/// 500, 502, 503 and 504 are server errors keeping their status: retried, then answered.
pub async fn server_errors_keep_their_status_and_are_retried_then_answered(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    for status in [500u16, 502, 503, 504] {
        kit.server.only(script.error(status, "broke"));
        let err = kit.ask(&kit.no_retries()).await.expect_err("5xx");
        assert!(
            matches!(&err, Error::Provider(e) if e.status() == Some(status)),
            "{status}: {err:?}"
        );
        let before = kit.server.hits();
        kit.server
            .script([script.error(status, "broke"), script.answer("ok", USAGE)]);
        kit.ask(&kit.models).await.expect("answered on the retry");
        assert_eq!(kit.server.hits(), before + 2, "{status}");
        assert_eq!(last_call(&kit), (Outcome::Success, 2));
    }
    Checked::Passed
}

/// A 529 is `Overloaded` with status 529, retried.
pub async fn status_529_is_overloaded_and_retried(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(script.error(529, "overloaded"));
    let err = kit.ask(&kit.no_retries()).await.expect_err("529");
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded { status: 529, .. })
        ),
        "{err:?}"
    );
    kit.server
        .script([script.error(529, "overloaded"), script.answer("ok", USAGE)]);
    kit.ask(&kit.models).await.expect("answered on the retry");
    assert_eq!(last_call(&kit), (Outcome::Success, 2));
    Checked::Passed
}

/// A 429 is `RateLimited` carrying the provider's `retry-after`; the retry waits it out
/// and is answered.
pub async fn status_429_is_rate_limited_with_its_retry_after(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    let limited = || script.rate_limited("slow down").header("retry-after", "1");
    kit.server.only(limited());
    let err = kit.ask(&kit.no_retries()).await.expect_err("429");
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(1)
        ),
        "{err:?}"
    );
    kit.server.script([limited(), script.answer("ok", USAGE)]);
    kit.ask(&kit.models).await.expect("answered on the retry");
    assert_eq!(last_call(&kit), (Outcome::Success, 2));
    Checked::Passed
}

/// A `retry-after` on a 503 is kept on the error (and so honoured by the retry).
pub async fn retry_after_on_a_503_is_kept(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.server
        .only(script.error(503, "later").header("retry-after", "2"));
    let err = kit.ask(&kit.no_retries()).await.expect_err("503");
    assert!(
        matches!(&err, Error::Provider(e) if e.status() == Some(503) && e.retry_after() == Some(Duration::from_secs(2))),
        "{err:?}"
    );
    Checked::Passed
}

/// `x-should-retry: false` on a 500 vetoes the retry, for providers that send it.
pub async fn x_should_retry_false_vetoes_the_retry(script: &dyn WireScript) -> Checked {
    if !script.honours_should_retry() {
        return Checked::skipped(
            "the script's `honours_should_retry` is false: the provider sends no `x-should-retry`",
        );
    }
    let kit = Kit::new(script).await;
    kit.server.only(
        script
            .error(500, "do not")
            .header("x-should-retry", "false"),
    );
    let err = kit.ask(&kit.models).await.expect_err("500");
    assert!(
        matches!(&err, Error::Provider(e) if e.status() == Some(500)),
        "{err:?}"
    );
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// Out of quota or credit is final: `QuotaExhausted` naming the provider, sent once.
pub async fn quota_exhausted_is_final_and_names_the_provider(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(script.quota_exhausted("no credit left"));
    let err = kit.ask(&kit.models).await.expect_err("quota");
    assert!(
        matches!(&err, Error::QuotaExhausted { provider, .. } if provider == script.provider()),
        "{err:?}"
    );
    assert_eq!(kit.server.hits(), 1);
    Checked::Passed
}

/// A refused answer is `ProviderRefusal` carrying the usage the provider billed, sent
/// once, recorded and costed (a refused answer is not free). The codec must decode the
/// refusal as an answer with a refusal stop reason (the pipeline's judge makes it the
/// error), never as a codec error: asked with `with_refusals_as_answers`, the same reply
/// is an answer stopped by `Refusal` or `ContentFilter`.
pub async fn a_refusal_is_a_provider_refusal_costed_at_its_usage(
    script: &dyn WireScript,
) -> Checked {
    let Some(refusal) = script.refusal(USAGE) else {
        return Checked::skipped(
            "the script's `refusal` is `None`: the provider has no refusal answer",
        );
    };
    let kit = Kit::new(script).await;
    kit.server.only(refusal);
    let err = kit.ask(&kit.models).await.expect_err("refusal");
    let Error::ProviderRefusal { usage, .. } = &err else {
        panic!("expected ProviderRefusal, got {err:?}");
    };
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (USAGE.input, USAGE.output),
        "{err:?}"
    );
    assert_eq!(kit.server.hits(), 1);
    let call = kit.recorder.calls().pop().expect("recorded");
    assert_eq!(call.usage, *usage);
    assert!(call.cost_usd.is_some_and(|c| c > 0.0), "{call:?}");
    let Some(again) = script.refusal(USAGE) else {
        unreachable!("the script answered a refusal above");
    };
    kit.server.only(again);
    let request = Conversation::new()
        .user("Hello?")
        .request(MODEL, SamplingParams::new().with_refusals_as_answers())
        .expect("a valid request");
    let chat = kit.models.chat(MODEL).await.expect("the kit's model");
    let answer = chat.single_response(&request).await.unwrap_or_else(|e| {
        panic!("a refusal decoded as an error, not as an answer with a refusal stop reason: {e:?}")
    });
    assert!(
        answer.stop_reason().is_refusal(),
        "a refusal answered with stop reason {:?}",
        answer.stop_reason()
    );
    Checked::Passed
}

/// A connection closed before any answer is a `Connection` failure (closed early, or
/// reset), retried, and the retry is answered.
pub async fn a_connection_closed_before_the_answer_is_retried(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(super::super::server::Reply::Hangup);
    let err = kit.ask(&kit.no_retries()).await.expect_err("hang-up");
    assert!(
        matches!(&err, Error::Provider(ProviderError::Connection { cause, .. })
            if matches!(cause, ConnectionCause::ClosedEarly | ConnectionCause::Reset)),
        "{err:?}"
    );
    kit.server.script([
        super::super::server::Reply::Hangup,
        script.answer("ok", USAGE),
    ]);
    kit.ask(&kit.models).await.expect("answered on the retry");
    assert_eq!(last_call(&kit), (Outcome::Success, 2));
    Checked::Passed
}

/// Nothing listening is a retryable `Connection { Refused }` failure, not a hang.
pub async fn a_refused_connection_is_retryable(script: &dyn WireScript) -> Checked {
    let refusing = RefusingPort::bind();
    let url = refusing.uri();
    let store = Arc::new(
        MemoryCredentialStore::new()
            .with(super::super::harness::CREDENTIAL, script.credential(SECRET)),
    );
    let models = models(script, &url, store, Arc::new(MemoryRecorder::new()));
    let models = models.for_job(tollgate::JobContext::new("no-retries", 0));
    let err = models
        .chat(MODEL)
        .await
        .expect("client")
        .single_response(&super::super::harness::request())
        .await
        .expect_err("nothing listens");
    assert!(
        matches!(
            &err,
            Error::Provider(ProviderError::Connection {
                cause: ConnectionCause::Refused,
                ..
            })
        ),
        "{err:?}"
    );
    Checked::Passed
}
