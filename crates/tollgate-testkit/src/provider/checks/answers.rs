//! Whole answers: decoded, recorded and costed; the credential read from the store on
//! every call; rate-limit headers read into the limiter.

use tollgate::StopReason;
use tollgate::pipeline::Outcome;

use super::super::harness::{CREDENTIAL, Kit, MODEL, PRICE, SECRET, USAGE};
use super::super::outcome::Checked;
use super::super::script::WireScript;

/// A good answer's text, stop reason and usage are decoded; the call is recorded once,
/// named after the provider, costed at the catalog's prices; the credential was sent.
pub async fn a_good_answer_is_decoded_recorded_and_costed(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(script.answer("Hello there", USAGE));
    let answer = kit
        .ask(&kit.models)
        .await
        .unwrap_or_else(|e| panic!("a good answer failed: {e}"));
    assert_eq!(answer.text(), "Hello there");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let usage = answer.usage();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens
        ),
        (USAGE.input, USAGE.output, 0),
        "{usage:?}"
    );
    assert_eq!(kit.server.hits(), 1);
    let calls = kit.recorder.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let call = &calls[0];
    assert_eq!(
        (
            call.model_id.as_str(),
            call.provider.as_str(),
            call.attempts
        ),
        (MODEL, script.provider(), 1)
    );
    assert_eq!(call.outcome, Outcome::Success);
    assert_eq!(call.usage, usage);
    let cost = call.cost_usd.expect("a priced model's call has a cost");
    assert!((cost - PRICE.cost_usd(&usage)).abs() < 1e-12, "{cost}");
    let sent = &kit.server.requests()[0];
    assert_eq!(
        script.sent_identity(sent),
        Some(script.identity(SECRET)),
        "the request carries the stored credential"
    );
    Checked::Passed
}

/// The credential is fetched from the store for every request, so a rotated key is used
/// at once, without rebuilding anything.
pub async fn the_credential_is_read_from_the_store_on_every_call(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(script.answer("ok", USAGE));
    kit.ask(&kit.models).await.expect("first call");
    let rotated = "sk-kit-ROTATED-00c0ffee";
    kit.store.insert(CREDENTIAL, script.credential(rotated));
    kit.ask(&kit.models).await.expect("second call");
    let requests = kit.server.requests();
    assert_eq!(
        script.sent_identity(&requests[0]),
        Some(script.identity(SECRET))
    );
    assert_eq!(
        script.sent_identity(&requests[1]),
        Some(script.identity(rotated))
    );
    Checked::Passed
}

/// Rate-limit headers on an answer set the limiter: the requests bucket holds no more
/// than the provider said is left, and its capacity is the provider's limit.
pub async fn rate_limit_headers_set_the_limiter_buckets(script: &dyn WireScript) -> Checked {
    let headers = script.rate_limit_headers(100, 7);
    if headers.is_empty() {
        return Checked::skipped(
            "the script's `rate_limit_headers` is empty: the provider sends none",
        );
    }
    let kit = Kit::new(script).await;
    let mut answer = script.answer("ok", USAGE);
    for (name, value) in headers {
        answer = answer.header(&name, value);
    }
    kit.server.only(answer);
    kit.ask(&kit.models).await.expect("answer");
    let (level, capacity) = kit.requests_bucket().await;
    assert!(level <= 8.0, "7 left (plus refill), not {level}");
    assert_eq!(capacity, 100, "the provider's limit, below the catalog's");
    Checked::Passed
}
