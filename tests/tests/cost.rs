//! Cost from catalog prices with one `Usage` convention: the usage shapes each provider
//! reports (PROTOCOLS.md) convert so that cached tokens are neither dropped nor counted
//! twice, and the cost matches a hand computation.

use serde_json::{Value, json};
use tollgate::Usage;
use tollgate::catalog::Price;

/// Sonnet-like prices: $3 input, $15 output, $0.30 cache read, $3.75 5-minute and $6
/// one-hour cache writes, per million tokens.
const PRICE: Price = Price {
    input: 3.0,
    output: 15.0,
    cache_read: 0.30,
    cache_write: 3.75,
    cache_write_1h: Some(6.0),
};

fn n(v: &Value, path: &[&str]) -> u64 {
    path.iter().fold(v, |v, k| &v[*k]).as_u64().unwrap_or(0)
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-12, "{a} != {b}");
}

#[test]
fn anthropic_usage_excludes_cache_from_input_tokens() {
    // Total input = input_tokens + cache_creation_input_tokens + cache_read_input_tokens.
    let u = json!({"input_tokens": 50, "output_tokens": 400, "cache_creation_input_tokens": 3000,
                   "cache_read_input_tokens": 100000,
                   "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 1000}});
    let usage = Usage::from_cache_exclusive(
        n(&u, &["input_tokens"]),
        n(&u, &["cache_read_input_tokens"]),
        n(&u, &["cache_creation", "ephemeral_5m_input_tokens"]),
        n(&u, &["cache_creation", "ephemeral_1h_input_tokens"]),
        n(&u, &["output_tokens"]),
    );
    assert_eq!(usage.total_input_tokens(), 50 + 3000 + 100_000);
    let expected =
        (50.0 * 3.0 + 100_000.0 * 0.30 + 2000.0 * 3.75 + 1000.0 * 6.0 + 400.0 * 15.0) / 1e6;
    close(PRICE.cost_usd(&usage), expected);
}

#[test]
fn openai_chat_usage_includes_cached_tokens_in_prompt_tokens() {
    let u = json!({"prompt_tokens": 120000, "completion_tokens": 300, "total_tokens": 120300,
                   "prompt_tokens_details": {"cached_tokens": 100000, "cache_write_tokens": 0}});
    let usage = Usage::from_cache_inclusive(
        n(&u, &["prompt_tokens"]),
        n(&u, &["prompt_tokens_details", "cached_tokens"]),
        n(&u, &["prompt_tokens_details", "cache_write_tokens"]),
        n(&u, &["completion_tokens"]),
    );
    assert_eq!(
        usage.input_tokens, 20_000,
        "cached tokens are taken out of the full-price count"
    );
    assert_eq!(usage.total_input_tokens(), 120_000, "and none is dropped");
    close(
        PRICE.cost_usd(&usage),
        (20_000.0 * 3.0 + 100_000.0 * 0.30 + 300.0 * 15.0) / 1e6,
    );
}

#[test]
fn openai_responses_usage_includes_cached_and_written_tokens() {
    let u = json!({"input_tokens": 9000, "output_tokens": 100, "total_tokens": 9100,
                   "input_tokens_details": {"cached_tokens": 4000, "cache_write_tokens": 1000},
                   "output_tokens_details": {"reasoning_tokens": 40}});
    let usage = Usage::from_cache_inclusive(
        n(&u, &["input_tokens"]),
        n(&u, &["input_tokens_details", "cached_tokens"]),
        n(&u, &["input_tokens_details", "cache_write_tokens"]),
        n(&u, &["output_tokens"]),
    );
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens
        ),
        (4000, 4000, 1000)
    );
    assert_eq!(usage.total_input_tokens(), 9000);
    close(
        PRICE.cost_usd(&usage),
        (4000.0 * 3.0 + 4000.0 * 0.30 + 1000.0 * 3.75 + 100.0 * 15.0) / 1e6,
    );
}

#[test]
fn bedrock_converse_usage_reports_cache_reads_and_writes_apart() {
    // Treated like Anthropic's: inputTokens excludes cached tokens (UNCERTAIN in
    // PROTOCOLS.md; the codec documents the reading it takes).
    let u = json!({"inputTokens": 10, "outputTokens": 5, "totalTokens": 15,
                   "cacheReadInputTokens": 3, "cacheWriteInputTokens": 2});
    let usage = Usage::from_cache_exclusive(
        n(&u, &["inputTokens"]),
        n(&u, &["cacheReadInputTokens"]),
        n(&u, &["cacheWriteInputTokens"]),
        0,
        n(&u, &["outputTokens"]),
    );
    assert_eq!(usage.total_input_tokens(), 15);
    close(
        PRICE.cost_usd(&usage),
        (10.0 * 3.0 + 3.0 * 0.30 + 2.0 * 3.75 + 5.0 * 15.0) / 1e6,
    );
}

#[test]
fn gemini_usage_includes_cached_content_in_prompt_tokens() {
    let u = json!({"promptTokenCount": 5000, "candidatesTokenCount": 200, "cachedContentTokenCount": 4096,
                   "totalTokenCount": 5200});
    let usage = Usage::from_cache_inclusive(
        n(&u, &["promptTokenCount"]),
        n(&u, &["cachedContentTokenCount"]),
        0,
        n(&u, &["candidatesTokenCount"]),
    );
    assert_eq!((usage.input_tokens, usage.cache_read_tokens), (904, 4096));
    close(
        PRICE.cost_usd(&usage),
        (904.0 * 3.0 + 4096.0 * 0.30 + 200.0 * 15.0) / 1e6,
    );
}

#[test]
fn inconsistent_sub_counts_never_go_negative() {
    // A provider reporting more cached tokens than its total: clamp, never underflow.
    let usage = Usage::from_cache_inclusive(100, 150, 10, 1);
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens
        ),
        (0, 100, 0)
    );
}

#[test]
fn one_hour_cache_writes_fall_back_to_the_cache_write_price_when_unpriced() {
    let price = Price {
        cache_write_1h: None,
        ..PRICE
    };
    let usage = Usage {
        cache_write_1h_tokens: 1_000_000,
        ..Usage::default()
    };
    close(price.cost_usd(&usage), 3.75);
}
