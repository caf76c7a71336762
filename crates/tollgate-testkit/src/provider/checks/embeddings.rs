//! Embeddings: a batch split at the transport's `max_batch`, one request and one
//! reservation each, in order; a failed request re-sent alone; the purpose and the width
//! carried by every request, the vectors made the deployment's width and unit length.

use std::ops::Range;

use tollgate::EmbeddingPurpose;
use tollgate::pipeline::Outcome;

use super::super::harness::{EMBEDDING_WIDTH, EMBEDDINGS, Kit, PRICE, SECRET};
use super::super::outcome::Checked;
use super::super::script::{EmbeddingsWire, WireScript};
use super::super::server::Reply;

/// Why every embeddings check is skipped for a provider without embeddings.
pub(super) const NO_EMBEDDINGS: &str =
    "the script's `embeddings` is `None`: the provider serves no embeddings";

/// The tokens the kit's server reports for each text.
const TOKENS_PER_TEXT: u64 = 3;

/// The vector the server answers for text `i`: its first component `i + 1`, the rest 1,
/// so that after normalization the ratio of the first two components names the text.
fn vector(i: usize) -> Vec<f32> {
    let width = usize::try_from(EMBEDDING_WIDTH).unwrap_or(8);
    let mut v = vec![1.0; width];
    v[0] = (i + 1) as f32;
    v
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text-{i}")).collect()
}

/// A batch that needs three requests at the transport's `max_batch` (three texts in one
/// request when it takes any number).
fn batch_size(wire: &dyn EmbeddingsWire) -> usize {
    wire.max_batch().map_or(3, |b| 2 * b.max(1) + 1)
}

/// An embeddings kit, a batch needing three requests, and the texts of each request;
/// `None` when the script has no embeddings.
async fn batch(
    script: &dyn WireScript,
) -> Option<(Kit<'_>, &dyn EmbeddingsWire, Vec<String>, Vec<Range<usize>>)> {
    let (kit, wire) = Kit::with_embeddings(script).await?;
    let n = batch_size(wire);
    Some((kit, wire, texts(n), requests_for(wire, n)))
}

/// The ranges of texts each request carries.
fn requests_for(wire: &dyn EmbeddingsWire, n: usize) -> Vec<Range<usize>> {
    let size = wire.max_batch().unwrap_or(n).max(1);
    (0..n)
        .step_by(size)
        .map(|start| start..(start + size).min(n))
        .collect()
}

fn answer(wire: &dyn EmbeddingsWire, texts: Range<usize>) -> Reply {
    let tokens = TOKENS_PER_TEXT * texts.len() as u64;
    let vectors: Vec<Vec<f32>> = texts.map(vector).collect();
    wire.answer(&vectors, tokens)
}

/// The texts of every request the server received, in order.
fn sent_texts(kit: &Kit<'_>, wire: &dyn EmbeddingsWire) -> Vec<Vec<String>> {
    kit.server
        .requests()
        .iter()
        .map(|r| wire.texts(r))
        .collect()
}

/// Each embedding is text `i`'s (in order), of the deployment's width, of unit length.
fn assert_in_order(embeddings: &[tollgate::Embedding]) {
    for (i, e) in embeddings.iter().enumerate() {
        let v = e.as_slice();
        assert_eq!(v.len() as u64, EMBEDDING_WIDTH, "the deployment's width");
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length, not {norm}");
        let ratio = v[0] / v[1];
        assert!(
            (ratio - (i + 1) as f32).abs() < 1e-3,
            "embedding {i} is text {i}'s (ratio {ratio})"
        );
    }
}

/// A batch is sent in requests of at most the transport's `max_batch` texts, in order,
/// each reserved once; the vectors come back in the texts' order. One call is recorded,
/// its attempts the requests, its usage their sum, costed; the credential was sent.
pub async fn embeddings_are_sent_in_batches_of_max_batch_one_reservation_each(
    script: &dyn WireScript,
) -> Checked {
    let Some((kit, wire, all, requests)) = batch(script).await else {
        return Checked::skipped(NO_EMBEDDINGS);
    };
    let n = all.len();
    kit.server
        .script(requests.iter().map(|r| answer(wire, r.clone())));
    let client = kit.models.embeddings(EMBEDDINGS).await.expect("client");
    let embeddings = client
        .embed_batch(&all, EmbeddingPurpose::Document)
        .await
        .unwrap_or_else(|e| panic!("a good batch failed: {e}"));
    assert_eq!(embeddings.len(), n);
    assert_in_order(&embeddings);
    let sent = sent_texts(&kit, wire);
    let expected: Vec<Vec<String>> = requests.iter().map(|r| all[r.clone()].to_vec()).collect();
    assert_eq!(
        sent, expected,
        "one request per `max_batch` texts, in order"
    );
    assert_eq!(
        kit.limiters.granted(),
        requests.len(),
        "one reservation per request"
    );
    let calls = kit.recorder.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let call = &calls[0];
    assert_eq!(call.outcome, Outcome::Success);
    assert_eq!(call.attempts as usize, requests.len());
    if wire.reports_usage() {
        assert_eq!(
            call.usage.input_tokens,
            TOKENS_PER_TEXT * n as u64,
            "the usage reported"
        );
    } else {
        assert!(
            call.usage.input_tokens > 0,
            "an estimated usage: {:?}",
            call.usage
        );
    }
    let cost = call.cost_usd.expect("a priced model's call has a cost");
    assert!((cost - PRICE.cost_usd(&call.usage)).abs() < 1e-12, "{cost}");
    assert_eq!(
        script.sent_identity(&kit.server.requests()[0]),
        Some(script.identity(SECRET)),
        "the request carries the stored credential"
    );
    Checked::Passed
}

/// A request of a batch that fails with a server error is retried alone: the requests
/// before it are not re-sent, the one after it goes once; each send is its own
/// reservation, and the batch's vectors are whole and in order.
pub async fn a_failed_embeddings_request_is_resent_alone(script: &dyn WireScript) -> Checked {
    let Some((kit, wire, all, requests)) = batch(script).await else {
        return Checked::skipped(NO_EMBEDDINGS);
    };
    // The second request fails once (the first, when one request takes them all).
    let failing = 1.min(requests.len() - 1);
    let mut replies: Vec<Reply> = Vec::new();
    let mut expected: Vec<Vec<String>> = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        if i == failing {
            replies.push(script.error(500, "broke"));
            expected.push(all[r.clone()].to_vec());
        }
        replies.push(answer(wire, r.clone()));
        expected.push(all[r.clone()].to_vec());
    }
    kit.server.script(replies);
    let client = kit.models.embeddings(EMBEDDINGS).await.expect("client");
    let embeddings = client
        .embed_batch(&all, EmbeddingPurpose::Document)
        .await
        .unwrap_or_else(|e| panic!("the batch failed after its retry: {e}"));
    assert_in_order(&embeddings);
    let sent = sent_texts(&kit, wire);
    assert_eq!(sent, expected, "only the failed request is sent again");
    assert_eq!(
        kit.limiters.granted(),
        expected.len(),
        "one reservation per send"
    );
    let call = kit.recorder.calls().pop().expect("recorded");
    assert_eq!(
        (call.outcome, call.attempts as usize),
        (Outcome::Success, expected.len())
    );
    Checked::Passed
}

/// Each request says the purpose it was given (query, document) where the provider's wire
/// has a field for it, and asks for the deployment's width exactly when the catalog says
/// the model takes a dimensions parameter; the vector comes back at that width, of unit
/// length.
pub async fn an_embeddings_request_carries_the_purpose_and_the_width(
    script: &dyn WireScript,
) -> Checked {
    let Some((kit, wire)) = Kit::with_embeddings(script).await else {
        return Checked::skipped(NO_EMBEDDINGS);
    };
    let takes_dimensions = kit
        .models
        .catalog()
        .get(EMBEDDINGS)
        .expect("the embeddings model")
        .embedding
        .dimensions_param;
    let client = kit.models.embeddings(EMBEDDINGS).await.expect("client");
    let purposes = [EmbeddingPurpose::Query, EmbeddingPurpose::Document];
    let mut said = Vec::new();
    for purpose in purposes {
        kit.server.only(answer(wire, 0..1));
        let embedding = client
            .embed("text-0", purpose)
            .await
            .unwrap_or_else(|e| panic!("{purpose:?}: {e}"));
        assert_in_order(&[embedding]);
        let sent = kit.server.requests().pop().expect("a request");
        said.push(wire.purpose(&sent));
        let expected = takes_dimensions.then_some(EMBEDDING_WIDTH);
        assert_eq!(
            wire.dimensions(&sent),
            expected,
            "the width is asked for exactly when the catalog says `dimensions_param`"
        );
    }
    if said.iter().all(Option::is_none) {
        return Checked::Partly(
            "the purpose: the script's `purpose` reads none (the wire has no field for it)".into(),
        );
    }
    assert_eq!(
        said,
        purposes.map(Some).to_vec(),
        "each request says its purpose"
    );
    Checked::Passed
}
