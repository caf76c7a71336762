//! The Gemini codec's body decoders: a whole answer, embeddings (batch, Vertex predict,
//! embedContent), a decision over logprobs, and `google.rpc.Status` error bodies (HTTP,
//! Vertex and mid-stream), with their `RetryInfo` durations.

use tollgate_gemini::codec;

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let _ = codec::decode_response(data);
    let expected = data.first().map_or(1, |&b| usize::from(b % 8));
    let _ = codec::decode_batch_embeddings(data, expected);
    let _ = codec::decode_vertex_predict(data, expected);
    let _ = codec::decode_embed_content(data);
    let labels = ["yes".to_owned(), "no".to_owned(), "Maybe".to_owned()];
    let _ = codec::decode_decision(data, &labels[..1 + expected % 3]);
    let status = data.first().map_or(429, |&b| 400 + u16::from(b) % 200);
    let _ = codec::read_error(status, data).verdict();
    let _ = codec::read_vertex_error(status, data).verdict();
    let text = String::from_utf8_lossy(data);
    let _ = codec::read_stream_error(&text).verdict();
    let _ = codec::parse_duration(&text);
}
