//! OpenTelemetry, read back through in-memory exporters (feature `otel`): the spans of a
//! chat call, a stream, an embeddings call, a retried call and a failed call carry the
//! GenAI conventions' names, attributes and values; the metrics their instruments,
//! bucket boundaries and attributes; and no secret reaches any attribute.

mod support;

use futures::StreamExt;
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, Status};
use tollgate::catalog::{EmbeddingCapabilities, Limits, ModelEntry};
use tollgate::otel::{DURATION_BUCKETS, MetricNames, TOKEN_USAGE_BUCKETS};
use tollgate::{Catalog, Conversation, EmbeddingPurpose, LlmRequest, SamplingParams, Usage};
use tollgate_fake::{FakeReply, Fault};

use support::*;

fn chat_catalog() -> Catalog {
    Catalog::builder().model(chat_entry()).build().unwrap()
}

fn ask() -> LlmRequest {
    Conversation::new()
        .user("hello")
        .request(
            "m",
            SamplingParams::new()
                .with_temperature(0.5)
                .unwrap()
                .with_top_p(0.9)
                .unwrap()
                .with_stop("END")
                .with_max_output_tokens(300)
                .unwrap(),
        )
        .unwrap()
}

fn cached_usage() -> Usage {
    Usage {
        input_tokens: 10,
        cache_read_tokens: 5,
        cache_write_tokens: 3,
        output_tokens: 7,
        ..Usage::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_chat_call_is_a_client_span_named_chat_and_model_with_the_genai_attributes() {
    let t = Telemetry::new(chat_catalog(), MetricNames::V1_42);
    t.fake
        .reply("m", FakeReply::text("ok").with_usage(cached_usage()));
    let client = t.models.chat("m").await.unwrap();
    client.single_response(&ask()).await.unwrap();

    let calls = t.spans_named("chat fake-model-1");
    assert_eq!(calls.len(), 1, "{:?}", t.finished_spans());
    let call = &calls[0];
    assert_eq!(call.span_kind, SpanKind::Client);
    assert_eq!(call.status, Status::Unset);
    assert_eq!(attr(call, "gen_ai.operation.name"), string("chat"));
    assert_eq!(attr(call, "gen_ai.provider.name"), string("fake"));
    assert_eq!(attr(call, "gen_ai.request.model"), string("fake-model-1"));
    assert_eq!(attr(call, "server.address"), string("fake.example"));
    assert_eq!(attr(call, "server.port"), int(8443));
    assert_eq!(
        attr(call, "gen_ai.request.temperature"),
        Some(Value::F64(0.5))
    );
    assert_eq!(attr(call, "gen_ai.request.top_p"), Some(Value::F64(0.9)));
    assert_eq!(attr(call, "gen_ai.request.max_tokens"), int(300));
    assert_eq!(
        attr(call, "gen_ai.request.stop_sequences"),
        strings(&["END"])
    );
    assert_eq!(attr(call, "gen_ai.response.model"), string("fake-model-1"));
    assert_eq!(
        attr(call, "gen_ai.response.finish_reasons"),
        strings(&["end_turn"])
    );
    // Input counts cached input; reads and writes beside it are parts of it.
    assert_eq!(attr(call, "gen_ai.usage.input_tokens"), int(18));
    assert_eq!(attr(call, "gen_ai.usage.cache_read.input_tokens"), int(5));
    assert_eq!(attr(call, "gen_ai.usage.cache_write.input_tokens"), int(3));
    assert_eq!(
        attr(call, "gen_ai.usage.cache_creation.input_tokens"),
        int(3)
    );
    assert_eq!(attr(call, "gen_ai.usage.output_tokens"), int(7));
    assert_eq!(attr(call, "gen_ai.request.stream"), None);
    assert_eq!(attr(call, "tollgate.streamed"), Some(Value::Bool(false)));
    assert_eq!(attr(call, "tollgate.operation"), string("chat"));
    assert_eq!(attr(call, "tollgate.model_id"), string("m"));
    assert_eq!(attr(call, "tollgate.provider"), string("fake"));
    assert_eq!(attr(call, "tollgate.attempts"), int(1));
    assert_eq!(attr(call, "tollgate.queue_wait"), Some(Value::F64(0.0)));
    assert_eq!(attr(call, "error.type"), None);
    for key in [
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
    ] {
        assert_eq!(times_set(call, key), 1, "{key}");
    }

    let attempts = t.spans_named("tollgate.attempt");
    assert_eq!(attempts.len(), 1);
    let attempt = &attempts[0];
    assert_eq!(attempt.parent_span_id, call.span_context.span_id());
    assert_eq!(attempt.span_kind, SpanKind::Internal);
    assert_eq!(attr(attempt, "tollgate.attempt.number"), int(1));
    assert_eq!(attr(attempt, "tollgate.retry.reason"), None);
    assert_eq!(attr(attempt, "tollgate.reservation.requests"), int(1));
    assert_eq!(
        attr(attempt, "tollgate.reservation.output_tokens"),
        int(300)
    );
    assert_eq!(
        attr(attempt, "tollgate.throttle_factor"),
        Some(Value::F64(1.0))
    );
    assert_eq!(attr(attempt, "tollgate.queue_wait"), Some(Value::F64(0.0)));
    assert_eq!(attr(attempt, "server.address"), string("fake.example"));
    assert_eq!(attr(attempt, "gen_ai.usage.input_tokens"), int(18));

    let metrics = t.collect();
    let duration = f64_histogram(metric(&metrics, "gen_ai.client.operation.duration"));
    assert_eq!(duration.len(), 1);
    let (attributes, count, _, bounds) = &duration[0];
    assert_eq!(*count, 1);
    assert_eq!(bounds, &DURATION_BUCKETS.to_vec());
    assert_eq!(get(attributes, "gen_ai.operation.name"), string("chat"));
    assert_eq!(get(attributes, "gen_ai.provider.name"), string("fake"));
    assert_eq!(
        get(attributes, "gen_ai.request.model"),
        string("fake-model-1")
    );
    assert_eq!(
        get(attributes, "gen_ai.response.model"),
        string("fake-model-1")
    );
    assert_eq!(get(attributes, "server.address"), string("fake.example"));
    assert_eq!(get(attributes, "server.port"), int(8443));
    assert_eq!(get(attributes, "error.type"), None);
    assert_eq!(
        metric(&metrics, "gen_ai.client.operation.duration").unit(),
        "s"
    );

    let tokens = metric(&metrics, "gen_ai.client.token.usage");
    assert_eq!(tokens.unit(), "{token}");
    let mut by_type: Vec<(String, u64, Vec<f64>)> = u64_histogram(tokens)
        .into_iter()
        .map(|(a, _, sum, bounds)| {
            (
                get(&a, "gen_ai.token.type").unwrap().as_str().into_owned(),
                sum,
                bounds,
            )
        })
        .collect();
    by_type.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(by_type[0].0, "input");
    assert_eq!(by_type[0].1, 18);
    assert_eq!(by_type[1].0, "output");
    assert_eq!(by_type[1].1, 7);
    assert_eq!(by_type[0].2, TOKEN_USAGE_BUCKETS.to_vec());

    let throttle = f64_gauge(metric(&metrics, "tollgate.limiter.throttle_factor"));
    assert_eq!(throttle.len(), 1);
    assert_eq!(throttle[0].1, 1.0);
    assert_eq!(get(&throttle[0].0, "tollgate.model_id"), string("m"));
    let levels = f64_gauge(metric(&metrics, "tollgate.limiter.bucket_level"));
    let dimensions: Vec<String> = levels
        .iter()
        .map(|(a, _)| {
            get(a, "tollgate.limit.dimension")
                .unwrap()
                .as_str()
                .into_owned()
        })
        .collect();
    assert!(dimensions.contains(&"rpm".to_string()), "{dimensions:?}");
    assert!(dimensions.contains(&"tpm".to_string()), "{dimensions:?}");
    let waits = f64_histogram(metric(&metrics, "tollgate.limiter.queue_wait"));
    assert_eq!(waits[0].1, 1);
    assert!(find_metric(&metrics, "tollgate.provider.rate_limited").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_a_chat_span_marked_streamed_with_its_time_to_first_chunk() {
    let t = Telemetry::new(chat_catalog(), MetricNames::V1_42);
    t.fake.reply(
        "m",
        FakeReply::text("streamed answer").with_usage(cached_usage()),
    );
    let client = t.models.chat("m").await.unwrap();
    let mut stream = client.stream_response(&ask()).await.unwrap();
    while let Some(event) = stream.next().await {
        event.unwrap();
    }
    drop(stream);

    let calls = t.spans_named("chat fake-model-1");
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.span_kind, SpanKind::Client);
    assert_eq!(attr(call, "gen_ai.operation.name"), string("chat"));
    assert_eq!(attr(call, "gen_ai.request.stream"), Some(Value::Bool(true)));
    assert_eq!(attr(call, "tollgate.streamed"), Some(Value::Bool(true)));
    assert_eq!(attr(call, "tollgate.operation"), string("chat_stream"));
    assert_eq!(
        attr(call, "gen_ai.response.finish_reasons"),
        strings(&["end_turn"])
    );
    assert_eq!(attr(call, "gen_ai.usage.input_tokens"), int(18));
    assert!(matches!(
        attr(call, "gen_ai.response.time_to_first_chunk"),
        Some(Value::F64(s)) if s >= 0.0
    ));
    let attempts = t.spans_named("tollgate.attempt");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].parent_span_id, call.span_context.span_id());

    let metrics = t.collect();
    let duration = f64_histogram(metric(&metrics, "gen_ai.client.operation.duration"));
    assert_eq!(get(&duration[0].0, "gen_ai.operation.name"), string("chat"));
}

#[tokio::test(start_paused = true)]
async fn an_embeddings_call_is_an_embeddings_span_with_its_dimension_count() {
    let entry = ModelEntry::new("e", "fake", "fake-embed")
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(8),
            ..Default::default()
        })
        .with_limits(Limits {
            rpm: 600,
            ..Limits::default()
        });
    let catalog = Catalog::builder()
        .embedding_width(8)
        .model(entry)
        .build()
        .unwrap();
    let t = Telemetry::new(catalog, MetricNames::V1_42);
    let client = t.models.embeddings("e").await.unwrap();
    let texts = vec!["one".to_string(), "two".to_string()];
    client
        .embed_batch(&texts, EmbeddingPurpose::Document)
        .await
        .unwrap();

    let calls = t.spans_named("embeddings fake-embed");
    assert_eq!(calls.len(), 1, "{:?}", t.finished_spans());
    let call = &calls[0];
    assert_eq!(call.span_kind, SpanKind::Client);
    assert_eq!(attr(call, "gen_ai.operation.name"), string("embeddings"));
    assert_eq!(attr(call, "gen_ai.provider.name"), string("fake"));
    assert_eq!(attr(call, "gen_ai.embeddings.dimension.count"), int(8));
    assert_eq!(attr(call, "gen_ai.response.finish_reasons"), None);
    assert_eq!(attr(call, "tollgate.operation"), string("embeddings"));
    // No base_url: no server attributes.
    assert_eq!(attr(call, "server.address"), None);
    assert_eq!(t.spans_named("tollgate.attempt").len(), 1);

    let metrics = t.collect();
    let duration = f64_histogram(metric(&metrics, "gen_ai.client.operation.duration"));
    assert_eq!(
        get(&duration[0].0, "gen_ai.operation.name"),
        string("embeddings")
    );
}

#[tokio::test(start_paused = true)]
async fn a_retried_call_has_an_attempt_span_per_attempt_and_the_retry_reason() {
    let t = Telemetry::new(chat_catalog(), MetricNames::V1_42);
    t.fake.fail(
        "m",
        Fault::RateLimited {
            retry_after: Some(std::time::Duration::from_secs(2)),
        },
    );
    t.fake
        .reply("m", FakeReply::text("ok").with_usage(cached_usage()));
    let client = t.models.chat("m").await.unwrap();
    client.single_response(&ask()).await.unwrap();

    let call = &t.spans_named("chat fake-model-1")[0];
    assert_eq!(attr(call, "tollgate.attempts"), int(2));
    assert_eq!(attr(call, "error.type"), None);
    assert_eq!(call.status, Status::Unset);
    let mut attempts = t.spans_named("tollgate.attempt");
    attempts.sort_by_key(|s| match attr(s, "tollgate.attempt.number") {
        Some(Value::I64(n)) => n,
        _ => 0,
    });
    assert_eq!(attempts.len(), 2);
    assert!(
        attempts
            .iter()
            .all(|a| a.parent_span_id == call.span_context.span_id())
    );
    let (first, second) = (&attempts[0], &attempts[1]);
    assert_eq!(attr(first, "error.type"), string("rate_limited"));
    assert_eq!(attr(first, "http.response.status_code"), int(429));
    assert!(matches!(first.status, Status::Error { .. }));
    assert!(matches!(
        attr(first, "tollgate.retry.wait"),
        Some(Value::F64(s)) if s >= 2.0
    ));
    assert_eq!(attr(second, "tollgate.attempt.number"), int(2));
    assert_eq!(
        attr(second, "tollgate.retry.reason"),
        string("rate_limited")
    );
    assert_eq!(attr(second, "error.type"), None);
    // The 429 lowered the throttle the second attempt was sent under.
    assert!(matches!(
        attr(second, "tollgate.throttle_factor"),
        Some(Value::F64(f)) if f < 1.0
    ));

    let metrics = t.collect();
    let refusals = u64_sum(metric(&metrics, "tollgate.provider.rate_limited"));
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].1, 1);
    assert_eq!(get(&refusals[0].0, "tollgate.model_id"), string("m"));
    let throttle = f64_gauge(metric(&metrics, "tollgate.limiter.throttle_factor"));
    assert!(throttle[0].1 < 1.0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_records_error_type_and_an_error_status() {
    let t = Telemetry::new(chat_catalog(), MetricNames::V1_42);
    t.fake.fail(
        "m",
        Fault::RequestError {
            status: 400,
            message: "bad request".into(),
        },
    );
    let client = t.models.chat("m").await.unwrap();
    client.single_response(&ask()).await.unwrap_err();

    let call = &t.spans_named("chat fake-model-1")[0];
    assert_eq!(attr(call, "error.type"), string("request_rejected"));
    assert!(matches!(call.status, Status::Error { .. }));
    assert_eq!(attr(call, "gen_ai.response.finish_reasons"), None);
    assert_eq!(attr(call, "tollgate.attempts"), int(1));
    let attempt = &t.spans_named("tollgate.attempt")[0];
    assert_eq!(attr(attempt, "error.type"), string("request_rejected"));
    assert_eq!(attr(attempt, "http.response.status_code"), int(400));
    assert_eq!(attr(attempt, "tollgate.retry.wait"), None);

    let metrics = t.collect();
    let duration = f64_histogram(metric(&metrics, "gen_ai.client.operation.duration"));
    assert_eq!(
        get(&duration[0].0, "error.type"),
        string("request_rejected")
    );
    // No tokens were reported: no token usage point.
    assert!(
        find_metric(&metrics, "gen_ai.client.token.usage")
            .is_none_or(|m| u64_histogram(m).is_empty())
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_after_its_first_event_ends_with_the_error_finish_reason() {
    let t = Telemetry::new(chat_catalog(), MetricNames::V1_42);
    t.fake.reply(
        "m",
        FakeReply::text("a long answer cut").interrupted_after(1),
    );
    let client = t.models.chat("m").await.unwrap();
    let mut stream = client.stream_response(&ask()).await.unwrap();
    let mut failed = false;
    while let Some(event) = stream.next().await {
        failed |= event.is_err();
    }
    assert!(failed);
    drop(stream);

    let call = &t.spans_named("chat fake-model-1")[0];
    assert_eq!(attr(call, "error.type"), string("stream_interrupted"));
    assert_eq!(
        attr(call, "gen_ai.response.finish_reasons"),
        strings(&["error"])
    );
}

#[tokio::test(start_paused = true)]
async fn no_secret_reaches_a_span_even_from_a_base_url_with_userinfo() {
    let entry =
        chat_entry().with_option("base_url", format!("https://user:{SECRET}@proxy.example"));
    let catalog = Catalog::builder().model(entry).build().unwrap();
    let t = Telemetry::new(catalog, MetricNames::V1_42);
    t.fake.reply("m", FakeReply::text("ok"));
    let client = t.models.chat("m").await.unwrap();
    client.single_response(&ask()).await.unwrap();
    // `finished_spans` and `collect` assert that no attribute holds the secret.
    let call = &t.spans_named("chat fake-model-1")[0];
    assert_eq!(attr(call, "server.address"), string("proxy.example"));
    assert_eq!(attr(call, "server.port"), int(443));
    t.collect();
}

#[tokio::test(start_paused = true)]
async fn the_latest_experimental_metric_names_are_emitted_when_chosen() {
    let t = Telemetry::new(chat_catalog(), MetricNames::LatestExperimental);
    t.fake
        .reply("m", FakeReply::text("ok").with_usage(cached_usage()));
    let client = t.models.chat("m").await.unwrap();
    client.single_response(&ask()).await.unwrap();

    let metrics = t.collect();
    let duration = f64_histogram(metric(&metrics, "gen_ai.client.inference.duration"));
    assert_eq!(duration[0].3, DURATION_BUCKETS.to_vec());
    assert!(find_metric(&metrics, "gen_ai.client.token.usage").is_none());
    let sum = |name: &str| u64_sum(metric(&metrics, name))[0].1;
    assert_eq!(sum("gen_ai.client.inference.usage.input_tokens"), 18);
    assert_eq!(sum("gen_ai.client.inference.usage.output_tokens"), 7);
    assert_eq!(
        sum("gen_ai.client.inference.usage.cache_read.input_tokens"),
        5
    );
    assert_eq!(
        sum("gen_ai.client.inference.usage.cache_write.input_tokens"),
        3
    );
    let input = u64_histogram(metric(
        &metrics,
        "gen_ai.client.inference.operation.input_tokens",
    ));
    assert_eq!(input[0].2, 18);
    assert_eq!(input[0].3, TOKEN_USAGE_BUCKETS.to_vec());
}
