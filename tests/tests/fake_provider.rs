//! The `fake` provider: scripts, matching, replay, streaming and failure injection.

use std::collections::BTreeMap;
use std::time::Duration;
use tollgate::clock;

use futures::StreamExt;
use tollgate::catalog::{EmbeddingCapabilities, ModelEntry};
use tollgate::pipeline::{ChatTransport, Signals};
use tollgate::{
    Catalog, Conversation, DecisionRequest, EmbeddingPurpose, Error, LlmRequest, Models,
    ProviderError, Question, ReplayCache, SamplingParams, StopReason, StreamEvent,
    compute_cache_key,
};
use tollgate_fake::{FakeProvider, FakeReply, Fault};
use tollgate_integration_tests::{fake_catalog, fake_transport};

fn ask(model: &str, text: &str) -> LlmRequest {
    Conversation::new()
        .user(text)
        .request(model, SamplingParams::new())
        .unwrap()
}

/// The fake's own transport, without the pipeline (which would retry injected faults).
struct Direct(std::sync::Arc<dyn ChatTransport>);

impl Direct {
    async fn single_response(
        &self,
        request: &LlmRequest,
    ) -> tollgate::Result<tollgate::LlmResponse> {
        self.0.send(request, &Signals::default()).await
    }

    async fn stream_response(
        &self,
        request: &LlmRequest,
    ) -> tollgate::Result<tollgate::ResponseStream> {
        self.0.send_stream(request, &Signals::default()).await
    }
}

async fn direct(fake: &FakeProvider, model: &str) -> Direct {
    Direct(fake_transport(fake, fake_catalog(&[model]), model).await)
}

#[tokio::test]
async fn fake_answers_from_a_queue_in_order_then_reports_unmatched() {
    let fake = FakeProvider::new();
    fake.reply("m", FakeReply::text("one"))
        .reply("m", FakeReply::text("two"));
    let chat = direct(&fake, "m").await;
    assert_eq!(
        chat.single_response(&ask("m", "q")).await.unwrap().text(),
        "one"
    );
    assert_eq!(
        chat.single_response(&ask("m", "q")).await.unwrap().text(),
        "two"
    );
    let err = chat.single_response(&ask("m", "q")).await.unwrap_err();
    let expected_key = compute_cache_key(&ask("m", "q"), "", 0).unwrap().to_hex();
    assert!(
        matches!(err, Error::UnmatchedRequest { ref cache_key, .. } if *cache_key == expected_key),
        "{err}"
    );
}

#[tokio::test]
async fn fake_answers_matched_requests_before_the_queue() {
    let fake = FakeProvider::new();
    fake.reply("m", FakeReply::text("queued"));
    fake.on(
        |r| {
            r.turns()
                .last()
                .is_some_and(|m| m.text().contains("weather"))
        },
        FakeReply::text("sunny"),
    );
    let chat = direct(&fake, "m").await;
    assert_eq!(
        chat.single_response(&ask("m", "the weather?"))
            .await
            .unwrap()
            .text(),
        "sunny"
    );
    assert_eq!(
        chat.single_response(&ask("m", "the weather again?"))
            .await
            .unwrap()
            .text(),
        "sunny"
    );
    assert_eq!(
        chat.single_response(&ask("m", "other"))
            .await
            .unwrap()
            .text(),
        "queued"
    );
}

#[tokio::test]
async fn fake_replays_recorded_answers_from_a_replay_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ReplayCache::in_dir(dir.path());
    // Record two answers for the same request (seq 0 and 1) with a scripted fake.
    let recorder = FakeProvider::new();
    recorder
        .reply("m", FakeReply::text("first"))
        .reply("m", FakeReply::text("second"));
    let chat = direct(&recorder, "m").await;
    for seq in 0..2 {
        let response = chat.single_response(&ask("m", "q")).await.unwrap();
        cache
            .put(
                &compute_cache_key(&ask("m", "q"), "run-1", seq).unwrap(),
                &response,
            )
            .await
            .unwrap();
    }
    // Replay them offline, in order, byte for byte.
    let replayer = FakeProvider::new();
    replayer.replay(ReplayCache::in_dir(dir.path()), "run-1");
    let chat = direct(&replayer, "m").await;
    assert_eq!(
        chat.single_response(&ask("m", "q")).await.unwrap().text(),
        "first"
    );
    assert_eq!(
        chat.single_response(&ask("m", "q")).await.unwrap().text(),
        "second"
    );
    assert!(matches!(
        chat.single_response(&ask("m", "q")).await.unwrap_err(),
        Error::UnmatchedRequest { .. }
    ));
    assert!(matches!(
        chat.single_response(&ask("m", "other")).await.unwrap_err(),
        Error::UnmatchedRequest { .. }
    ));
}

#[tokio::test]
async fn fake_streams_an_answer_as_deltas_that_add_up_to_it() {
    let fake = FakeProvider::new();
    fake.reply("m", FakeReply::text("The quick brown fox"));
    let chat = direct(&fake, "m").await;
    let events: Vec<StreamEvent> = chat
        .stream_response(&ask("m", "q"))
        .await
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
        .await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["The ", "quick ", "brown ", "fox"]);
    assert!(matches!(
        events[events.len() - 2],
        StreamEvent::Stop(StopReason::EndTurn)
    ));
    match events.last().unwrap() {
        StreamEvent::Completed(r) => assert_eq!(r.text(), deltas.concat()),
        other => panic!("stream must end with the completed response, got {other:?}"),
    }
}

#[tokio::test]
async fn fake_interrupted_stream_delivers_some_deltas_then_fails() {
    let fake = FakeProvider::new();
    fake.reply("m", FakeReply::text("a b c d").interrupted_after(2));
    let chat = direct(&fake, "m").await;
    let items: Vec<_> = chat
        .stream_response(&ask("m", "q"))
        .await
        .unwrap()
        .collect()
        .await;
    // The opening usage event, two deltas, then the failure.
    assert_eq!(items.len(), 4);
    assert!(matches!(items[0], Ok(StreamEvent::Usage(_))));
    assert!(matches!(items[1], Ok(StreamEvent::TextDelta { .. })));
    assert!(matches!(
        items[3],
        Err(Error::Provider(ProviderError::Server { status: 502, .. }))
    ));
}

#[tokio::test]
async fn fake_injects_each_failure_on_the_chosen_call() {
    type Check = fn(&Error) -> bool;
    let cases: Vec<(Fault, Check)> = vec![
        (
            Fault::RateLimited {
                retry_after: Some(Duration::from_secs(2)),
            },
            |e| matches!(e, Error::Provider(p @ ProviderError::RateLimited { .. }) if p.retry_after_ms() == Some(2000)),
        ),
        (Fault::Overloaded { retry_after: None }, |e| {
            matches!(e, Error::Provider(ProviderError::Overloaded { .. }))
        }),
        (Fault::Server { status: 503 }, |e| {
            matches!(
                e,
                Error::Provider(ProviderError::Server { status: 503, .. })
            )
        }),
        (Fault::Timeout, |e| {
            matches!(e, Error::Provider(ProviderError::Timeout { .. }))
        }),
        (Fault::QuotaExhausted, |e| {
            matches!(e, Error::QuotaExhausted { .. })
        }),
        (
            Fault::RequestError {
                status: 400,
                message: "bad".into(),
            },
            |e| matches!(e, Error::ProviderRequest(r) if r.status == 400),
        ),
    ];
    for (fault, check) in cases {
        let fake = FakeProvider::new();
        fake.reply_any(FakeReply::text("ok"))
            .reply_any(FakeReply::text("ok"));
        fake.inject("m", 2, fault.clone());
        let chat = direct(&fake, "m").await;
        assert!(
            chat.single_response(&ask("m", "q")).await.is_ok(),
            "call 1 is not the chosen one"
        );
        let err = chat.single_response(&ask("m", "q")).await.unwrap_err();
        assert!(check(&err), "{fault:?} gave {err:?}");
        assert!(
            chat.single_response(&ask("m", "q")).await.is_ok(),
            "call 3 answers again"
        );
    }
}

#[tokio::test]
async fn fake_refusal_fault_is_a_refused_answer_with_its_category_not_an_error() {
    let fake = FakeProvider::new();
    fake.inject(
        "m",
        1,
        Fault::Refusal {
            category: "cyber".into(),
            explanation: "no".into(),
        },
    );
    let chat = direct(&fake, "m").await;
    // A provider answers a refusal; the pipeline's judge, not the codec, makes it an error.
    let answer = chat.single_response(&ask("m", "q")).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::Refusal);
    assert_eq!(answer.refusal_category(), Some("cyber"));
    assert_eq!(answer.refusal_explanation(), "no");
}

#[tokio::test]
async fn fake_truncation_stops_at_max_tokens_with_the_output_limit_used() {
    let fake = FakeProvider::new();
    fake.fail("m", Fault::Truncated);
    let chat = direct(&fake, "m").await;
    let request = ask("m", "long essay").with_max_output_tokens(77).unwrap();
    let r = chat.single_response(&request).await.unwrap();
    assert_eq!(r.stop_reason(), StopReason::MaxTokens);
    assert_eq!(r.usage().output_tokens, 77);
}

#[tokio::test]
async fn fake_is_scripted_from_catalog_options() {
    let catalog = Catalog::from_toml_str(
        "[models.m]\nprovider = \"fake\"\nmax_output_tokens = 50\n[models.m.options]\nreplies = [\"from the catalog\"]\n",
    )
    .unwrap();
    // No explicit provider: the registered one is used.
    let models = Models::builder().catalog(catalog).build().unwrap();
    let chat = models.chat("m").await.unwrap();
    assert_eq!(
        chat.single_response(&ask("m", "q")).await.unwrap().text(),
        "from the catalog"
    );
}

#[tokio::test]
async fn fake_rejects_malformed_catalog_options_naming_the_field() {
    let catalog =
        Catalog::from_toml_str("[models.m]\nprovider = \"fake\"\nmax_output_tokens = 50\n[models.m.options]\nreplies = 3\n")
            .unwrap();
    let err = Models::builder()
        .catalog(catalog)
        .build()
        .unwrap()
        .chat("m")
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("options.replies") && err.to_string().contains("`m`"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn fake_latency_runs_on_tokios_clock() {
    let fake = FakeProvider::new();
    fake.reply("m", FakeReply::text("slow"))
        .with_latency(Duration::from_secs(3));
    let chat = direct(&fake, "m").await;
    let start = clock::now();
    chat.single_response(&ask("m", "q")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

fn embedding_models(caps: EmbeddingCapabilities, fake: &FakeProvider) -> Models {
    let catalog = Catalog::builder()
        .embedding_width(8)
        .model(ModelEntry::new("e", "fake", "fake-embed").with_embedding(caps))
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .build()
        .unwrap()
}

fn norm(v: &[f32]) -> f64 {
    v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt()
}

#[tokio::test]
async fn embeddings_have_the_deployment_width_and_unit_length() {
    let fake = FakeProvider::new();
    for caps in [
        EmbeddingCapabilities {
            native_width: Some(8),
            ..Default::default()
        },
        EmbeddingCapabilities {
            native_width: Some(32),
            dimensions_param: true,
            ..Default::default()
        },
        EmbeddingCapabilities {
            native_width: Some(32),
            truncation_safe: true,
            ..Default::default()
        },
    ] {
        let client = embedding_models(caps, &fake).embeddings("e").await.unwrap();
        let vectors = client
            .embed_batch(&["a".into(), "b".into()], EmbeddingPurpose::Document)
            .await
            .unwrap();
        assert_eq!(vectors.len(), 2);
        for v in &vectors {
            assert_eq!(v.width(), 8, "{caps:?}");
            assert!((norm(v.as_slice()) - 1.0).abs() < 1e-5, "{caps:?}");
        }
        let single = client.embed("a", EmbeddingPurpose::Document).await.unwrap();
        assert_eq!(single, vectors[0]);
    }
}

#[tokio::test]
async fn decision_returns_normalized_probabilities_per_option() {
    let fake = FakeProvider::new();
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("d", "fake", "fake-decide")
                .with_kind(tollgate::catalog::ModelKind::Decision),
        )
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .build()
        .unwrap();
    let request = DecisionRequest::new(
        "d",
        "a ticket about a refund",
        vec![
            Question::Choice {
                name: "route".into(),
                prompt: "which team?".into(),
                options: vec!["billing".into(), "tech".into()],
            },
            Question::Noul {
                name: "urgent".into(),
                prompt: "urgent?".into(),
            },
        ],
    )
    .unwrap();
    let weights: BTreeMap<String, BTreeMap<String, f64>> = [
        (
            "route".to_string(),
            [("billing".to_string(), 3.0), ("tech".to_string(), 1.0)].into(),
        ),
        (
            "urgent".to_string(),
            [("yes".to_string(), 1.0), ("no".to_string(), 1.0)].into(),
        ),
    ]
    .into();
    fake.decide("d", weights);
    let decision = models
        .decision("d")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap();
    assert_eq!(decision.probability("route", "billing"), Some(0.75));
    assert_eq!(decision.probability("urgent", "no"), Some(0.5));
    assert!(matches!(
        models.decision("d").await.unwrap().decide(&request).await,
        Err(Error::UnmatchedRequest { .. })
    ));
}
