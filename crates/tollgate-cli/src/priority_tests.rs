//! The priority class of each command reaches the model's limiter: a limiter backend
//! that records the class of every reservation it is asked for stands in for the
//! in-process one (through the same seam as `--redis`).

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Parser;
use tollgate::limit::{
    Cost, Feedback, LimiterBackend, LimiterConfig, LimiterFactory, LimiterSnapshot, Priority,
    Reservation, TokenBucketRateLimiter, TryReserveError,
};
use tollgate::{Conversation, SamplingParams};

use crate::chat::Turn;
use crate::record::CliRecorder;
use crate::setup::Source;
use crate::{Cli, Command};

/// Builds in-process limiters that note the class of every reservation.
#[derive(Debug, Default)]
struct Recording {
    asked: Arc<Mutex<Vec<Priority>>>,
}

impl Recording {
    fn asked(&self) -> Vec<Priority> {
        self.asked.lock().unwrap().clone()
    }
}

#[derive(Debug)]
struct RecordingLimiter {
    inner: TokenBucketRateLimiter,
    asked: Arc<Mutex<Vec<Priority>>>,
}

impl LimiterFactory for Recording {
    fn build(&self, config: &LimiterConfig) -> tollgate::Result<Arc<dyn LimiterBackend>> {
        Ok(Arc::new(RecordingLimiter {
            inner: TokenBucketRateLimiter::new(config.clone()),
            asked: self.asked.clone(),
        }))
    }
}

#[async_trait::async_trait]
impl LimiterBackend for RecordingLimiter {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn reserve(&self, cost: Cost, priority: Priority) -> tollgate::Result<Reservation> {
        self.asked.lock().unwrap().push(priority);
        self.inner.reserve_with(cost, priority).await
    }

    async fn try_reserve(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError> {
        self.asked.lock().unwrap().push(priority);
        self.inner.try_reserve_with(cost, priority)
    }

    fn feedback(&self, feedback: Feedback) {
        self.inner.feedback(feedback);
    }

    async fn snapshot(&self) -> tollgate::Result<LimiterSnapshot> {
        Ok(self.inner.snapshot())
    }
}

/// A catalog with one chat model on the simulated provider.
fn catalog(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("models.toml");
    std::fs::write(
        &path,
        "[models.m]\nprovider = \"sim\"\nrpm = 600\nburst_seconds = 1\narrival_allowance_ms = 0\n\
         max_output_tokens = 64\n[models.m.options]\nlatency_ms = 20\noutput_tokens = 4\n",
    )
    .unwrap();
    path
}

fn source(dir: &Path, recording: &Arc<Recording>) -> Source {
    Source {
        catalog: Some(catalog(dir)),
        credentials: None,
        limiters: Some(recording.clone()),
        spend: None,
        queues: std::sync::Arc::new(tollgate::limit::MemoryQueueLedger::new()),
    }
}

#[tokio::test(start_paused = true)]
async fn run_reserves_at_batch_priority_unless_priority_says_otherwise() {
    for (flags, class) in [
        (&[][..], Priority::Batch),
        (&["--priority", "interactive"][..], Priority::Interactive),
        (
            &["--priority", "default", "--fallback"][..],
            Priority::Default,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("batch.jsonl");
        std::fs::write(&input, "\"one\"\n\"two\"\n\"three\"\n").unwrap();
        let out = dir.path().join("out.jsonl");
        let recording = Arc::new(Recording::default());
        let mut argv = vec!["tollgate", "run", "-m", "m", "--quiet"];
        argv.extend_from_slice(flags);
        let cli = Cli::try_parse_from(argv.into_iter().map(Into::into).chain([
            input.as_os_str().to_owned(),
            "-o".into(),
            out.as_os_str().to_owned(),
        ]))
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run parsed as another command")
        };
        let code = crate::run::run(&source(dir.path(), &recording), args)
            .await
            .unwrap();
        assert_eq!(code, ExitCode::SUCCESS, "{flags:?}");
        let asked = recording.asked();
        assert!(
            asked.len() >= 3,
            "{flags:?}: every request reserved: {asked:?}"
        );
        assert!(
            asked.iter().all(|p| *p == class),
            "{flags:?}: every reservation at {class}: {asked:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn chat_answers_reserve_at_interactive_priority() {
    let dir = tempfile::tempdir().unwrap();
    let recording = Arc::new(Recording::default());
    let (models, _) = source(dir.path(), &recording)
        .models(Arc::new(CliRecorder::default()))
        .unwrap();
    let params = SamplingParams::new();
    for fallback in [false, true] {
        let turn = Turn {
            models: &models,
            fallback,
            model_id: "m",
            params: &params,
            structured: false,
            usage: false,
        };
        let mut conversation = Conversation::new();
        conversation.push_user("Hello");
        turn.answer(&conversation).await.unwrap();
    }
    let asked = recording.asked();
    assert!(asked.len() >= 2, "both answers reserved: {asked:?}");
    assert!(
        asked.iter().all(|p| *p == Priority::Interactive),
        "{asked:?}"
    );
}
