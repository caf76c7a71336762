//! The `sim` provider through `Models`, and the simulated provider served over HTTP to the
//! `openai-compatible` provider.

use std::time::Duration;

use futures::StreamExt;
use tollgate::{
    Block, Catalog, Conversation, Error, JobContext, Message, Models, ProviderError, Role,
    SamplingParams, StopReason, StreamEvent,
};
use tollgate_sim::http::serve;
use tollgate_sim::{SimClientProvider, SimConfig, SimDelay, SimLatency, SimLimits, SimProvider};

use tollgate_openai as _;

fn catalog(extra: &str) -> Catalog {
    Catalog::from_toml_str(&format!(
        r#"
        [models.m]
        provider = "sim"
        rpm = 2
        max_output_tokens = 100
        default_output_tokens = 20
        [models.m.price]
        input = 1.0
        output = 2.0
        [models.m.options]
        latency_ms = 100
        output_tokens = 5
        {extra}
        "#
    ))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn sim_model_answers_through_models_with_generated_text_and_usage() {
    let models = Models::builder().catalog(catalog("")).build().unwrap();
    let chat = models.chat("m").await.unwrap();
    let request = Conversation::new()
        .user("Hello")
        .request("m", SamplingParams::new())
        .unwrap();
    let answer = chat.single_response(&request).await.unwrap();
    assert_eq!(answer.usage().output_tokens, 5);
    assert!(answer.usage().input_tokens > 0);
    assert_eq!(answer.text().split_whitespace().count(), 5);
}

#[tokio::test(start_paused = true)]
async fn sim_refusal_is_rate_limited_with_its_retry_after() {
    // The sim serves half of its published limit: tollgate's limiter lets two calls go at
    // once, the provider takes one.
    let models = Models::builder()
        .catalog(catalog("served = 0.5"))
        .build()
        .unwrap()
        .for_job(JobContext::new("no-retries", 0));
    let chat = models.chat("m").await.unwrap();
    let request = Conversation::new()
        .user("Hello")
        .request("m", SamplingParams::new())
        .unwrap();
    let (a, b) = tokio::join!(
        chat.single_response(&request),
        chat.single_response(&request)
    );
    let refused = [a, b]
        .into_iter()
        .filter_map(Result::err)
        .collect::<Vec<_>>();
    assert_eq!(refused.len(), 1, "{refused:?}");
    match &refused[0] {
        Error::Provider(ProviderError::RateLimited { retry_after }) => {
            assert!(retry_after.is_some_and(|d| d > Duration::ZERO));
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_given_sim_provider_sees_every_call() {
    let sim = SimProvider::new(SimConfig::new(SimLimits {
        rpm: 10,
        ..SimLimits::default()
    }));
    let models = Models::builder()
        .catalog(catalog(""))
        .provider(SimClientProvider::new().with_model("m", sim.clone()))
        .build()
        .unwrap();
    let chat = models.chat("m").await.unwrap();
    let request = Conversation::new()
        .user("Hi")
        .request("m", SamplingParams::new())
        .unwrap();
    chat.single_response(&request).await.unwrap();
    assert_eq!(sim.stats().accepted, 1);
}

fn quick(limits: SimLimits) -> SimProvider {
    SimProvider::new(SimConfig::new(limits).with_latency(SimLatency {
        base: Duration::from_millis(1),
        per_output_token: Duration::ZERO,
        refusal: Duration::ZERO,
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_over_http_it_answers_openai_compatible_with_usage() {
    let server = serve(
        quick(SimLimits {
            rpm: 600,
            ..SimLimits::default()
        }),
        7,
    )
    .await
    .unwrap();
    let catalog = Catalog::from_toml_str(&format!(
        r#"
        [models.local]
        provider = "openai-compatible"
        name = "sim"
        rpm = 600
        max_output_tokens = 100
        [models.local.options]
        base_url = "{}"
        "#,
        server.base_url()
    ))
    .unwrap();
    let models = Models::builder().catalog(catalog).build().unwrap();
    let chat = models.chat("local").await.unwrap();
    let request = Conversation::new()
        .user("Hello")
        .request(
            "local",
            SamplingParams::new().with_max_output_tokens(20).unwrap(),
        )
        .unwrap();
    let answer = chat.single_response(&request).await.unwrap();
    assert_eq!(answer.usage().output_tokens, 7);
    assert!(answer.usage().input_tokens > 0);
    assert_eq!(server.stats().accepted, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_over_http_a_refusal_is_429_with_retry_after_and_limit_headers() {
    let server = serve(
        quick(SimLimits {
            rpm: 1,
            ..SimLimits::default()
        }),
        3,
    )
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", server.base_url());
    let body = serde_json::json!({"model": "sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5});
    let first = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let second = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(second.status(), 429);
    let retry_after: u64 = second.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after));
    assert_eq!(second.headers()["x-ratelimit-limit-requests"], "1");
    let error: serde_json::Value = second.json().await.unwrap();
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert_eq!(server.stats().rate_limited, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_over_http_with_openai_headers_it_says_what_remains_and_when_it_is_full() {
    let sim = SimProvider::new(
        SimConfig::new(SimLimits {
            rpm: 60,
            input_tpm: 10_000,
            ..SimLimits::default()
        })
        .with_latency(SimLatency {
            base: Duration::from_millis(1),
            per_output_token: Duration::ZERO,
            refusal: Duration::ZERO,
        })
        .with_headers(tollgate_sim::SimHeaderStyle::OpenAi),
    );
    let server = serve(sim, 3).await.unwrap();
    let url = format!("{}/v1/chat/completions", server.base_url());
    let body = serde_json::json!({"model": "sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5});
    let answer = reqwest::Client::new()
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let h = answer.headers();
    assert_eq!(h["x-ratelimit-limit-requests"], "60");
    assert_eq!(h["x-ratelimit-remaining-requests"], "59");
    assert_eq!(h["x-ratelimit-limit-tokens"], "10000");
    assert!(
        h["x-ratelimit-reset-requests"]
            .to_str()
            .unwrap()
            .ends_with("ms")
    );
}

#[tokio::test(start_paused = true)]
async fn sim_model_with_headers_reports_what_remains_to_the_limiter() {
    let models = Models::builder()
        .catalog(catalog("headers = \"openai\"\nserved = 0.5"))
        .build()
        .unwrap();
    let chat = models.chat("m").await.unwrap();
    let request = Conversation::new()
        .user("Hello")
        .request("m", SamplingParams::new())
        .unwrap();
    chat.single_response(&request).await.unwrap();
    // The catalog says 2 rpm, the provider serves half and says nothing remains: the
    // limiter, which would otherwise count one request left, believes the provider.
    let snapshot = models.limiter("m").unwrap().snapshot().await.unwrap();
    let (_, level, _) = snapshot
        .levels
        .iter()
        .find(|(d, _, _)| *d == tollgate::Dimension::Requests)
        .copied()
        .unwrap();
    assert!(level < 0.5, "level {level}");
}

fn sim_options(options: &str) -> tollgate::Result<SimConfig> {
    let catalog = Catalog::from_toml_str(&format!(
        "[models.m]\nprovider = \"sim\"\nrpm = 60\nmax_output_tokens = 100\n[models.m.options]\n{options}\n"
    ))?;
    tollgate_sim::provider::sim_config_for(catalog.model("m").unwrap())
}

#[test]
fn sim_options_draw_answer_times_and_network_delays_from_a_distribution() {
    let ms = Duration::from_millis;
    let config = sim_options(
        "latency_ms = { min = 20, max = 800, distribution = \"log-normal\" }\n\
         network_delay_ms = { min = 0, max = 150 }\nseed = 7",
    )
    .unwrap();
    assert_eq!(
        config.answer_time,
        Some(SimDelay::LogNormal {
            min: ms(20),
            max: ms(800)
        })
    );
    assert_eq!(
        config.network_delay,
        SimDelay::Uniform {
            min: ms(0),
            max: ms(150)
        }
    );
    assert_eq!(config.seed, 7);
    // A number is a fixed time, as before.
    let fixed = sim_options("latency_ms = 120\nnetwork_delay_ms = 5").unwrap();
    assert_eq!((fixed.answer_time, fixed.latency.base), (None, ms(120)));
    assert_eq!(fixed.network_delay, SimDelay::Fixed(ms(5)));
    let default = sim_options("").unwrap();
    assert_eq!(
        (default.latency.base, default.network_delay),
        (ms(300), SimDelay::ZERO)
    );
}

#[test]
fn sim_options_refuse_a_malformed_distribution() {
    for bad in [
        "latency_ms = { min = 20 }",
        "latency_ms = { min = 800, max = 20 }",
        "latency_ms = { min = 20, max = 800, distribution = \"pareto\" }",
        "network_delay_ms = { min = 0, max = 10, mean = 5 }",
        "network_delay_ms = -1",
    ] {
        let field = bad.split(' ').next().unwrap();
        let error = sim_options(bad).expect_err(bad).to_string();
        assert!(
            error.contains(&format!("options.{field}")),
            "{bad}: {error}"
        );
    }
}

/// A request declaring the `weather` tool (the city required), the user asking.
fn weather_request() -> tollgate::LlmRequest {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    });
    Conversation::new()
        .with_tool(tollgate::ToolDefinition {
            defer_loading: false,
            cache: None,
            name: "weather".into(),
            description: "The weather in a city".into(),
            input_schema: tollgate::Json::new(schema),
            strict: None,
            native: None,
        })
        .user("Weather in Paris?")
        .request("m", SamplingParams::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn sim_model_given_tools_calls_the_first_with_arguments_valid_for_its_schema() {
    let models = Models::builder().catalog(catalog("")).build().unwrap();
    let chat = models.chat("m").await.unwrap();
    let answer = chat.single_response(&weather_request()).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    let [
        Block::ToolUse {
            id, name, input, ..
        },
    ] = answer.blocks()
    else {
        panic!("one tool call: {:?}", answer.blocks());
    };
    assert_eq!((id.as_str(), name.as_str()), ("call_sim_1", "weather"));
    assert_eq!(input.value(), &serde_json::json!({"city": "sim"}));
    let again = chat.single_response(&weather_request()).await.unwrap();
    assert_eq!(again.blocks(), answer.blocks(), "the same call every time");
}

#[tokio::test(start_paused = true)]
async fn sim_model_calls_a_tool_when_a_system_message_follows_the_users_turn() {
    let models = Models::builder().catalog(catalog("")).build().unwrap();
    let chat = models.chat("m").await.unwrap();
    let environment = Message {
        role: Role::System,
        content: vec![Block::text("# Environment\nWorking directory: /tmp")],
    };
    let request = weather_request().with_appended([environment]).unwrap();
    let answer = chat.single_response(&request).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(
        matches!(answer.blocks(), [Block::ToolUse { name, .. }] if name == "weather"),
        "{:?}",
        answer.blocks()
    );
}

#[tokio::test(start_paused = true)]
async fn sim_model_answers_text_after_a_tool_result() {
    let models = Models::builder().catalog(catalog("")).build().unwrap();
    let chat = models.chat("m").await.unwrap();
    let request = weather_request();
    let call = chat.single_response(&request).await.unwrap();
    let result = Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: "call_sim_1".into(),
            content: vec![Block::text("18C, sunny")],
            is_error: false,
            cache: None,
        }],
    };
    let assistant = Message {
        role: Role::Assistant,
        content: call.blocks().to_vec(),
    };
    let answered = request.with_appended([assistant, result]).unwrap();
    let answer = chat.single_response(&answered).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert!(!answer.text().is_empty());
    assert!(
        answer
            .blocks()
            .iter()
            .all(|b| !matches!(b, Block::ToolUse { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn sim_model_streams_its_tool_call_in_deltas_with_the_id_and_name_first() {
    let models = Models::builder().catalog(catalog("")).build().unwrap();
    let chat = models.chat("m").await.unwrap();
    let mut stream = chat.stream_response(&weather_request()).await.unwrap();
    let (mut deltas, mut completed) = (Vec::new(), None);
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            StreamEvent::ToolUseDelta {
                index,
                id,
                name,
                input_json,
            } => deltas.push((index, id, name, input_json)),
            StreamEvent::Completed(response) => completed = Some(response),
            _ => {}
        }
    }
    assert!(deltas.len() >= 2, "{deltas:?}");
    assert!(deltas.iter().all(|d| d.0 == 0));
    assert_eq!(deltas[0].1.as_deref(), Some("call_sim_1"));
    assert_eq!(deltas[0].2.as_deref(), Some("weather"));
    assert!(deltas[1..].iter().all(|d| d.1.is_none() && d.2.is_none()));
    let json: String = deltas.iter().map(|d| d.3.as_str()).collect();
    let input: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(input, serde_json::json!({"city": "sim"}));
    let completed = completed.expect("the completed answer");
    assert_eq!(completed.stop_reason(), StopReason::ToolUse);
}
