//! llmock instances for benchmark 9, started and stopped through `scripts/peers.sh`
//! (`llmock NAME --rpm N --tpm N --latency-ms N`; `stop` for the whole run), their
//! journals, and the clock: llmock's journal times are its own `time.monotonic()`, which
//! a probe request maps onto this process's clock.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use tokio::time::Instant;

use super::journal::{JournalRecord, parse_journal};
use super::oracle::BucketLimits;
use super::wire::{Dialect, Job, Target, http_client, send};

/// The model name and API key of the clock probe (its own bucket; left out of every
/// client's figures).
pub const PROBE_MODEL: &str = "peers-probe";

/// The repository's `scripts/peers.sh`.
pub fn peers_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), |root| root.to_path_buf())
        .join("scripts")
        .join("peers.sh")
}

/// The llmocks of one `PEERS_RUN`, all stopped (by saved PID, `scripts/peers.sh stop`)
/// when this is dropped.
#[derive(Debug)]
pub struct PeersRun {
    run: String,
}

impl PeersRun {
    /// A run named `run` (its PIDs and ports under `target/peers/runs/<run>`).
    pub fn new(run: impl Into<String>) -> Self {
        PeersRun { run: run.into() }
    }

    /// Starts (or reuses, with the same settings) llmock `name` enforcing `limits` per API
    /// key, answering after `latency_ms`; its URL.
    pub fn llmock(
        &self,
        name: &str,
        limits: BucketLimits,
        latency_ms: u64,
    ) -> Result<Llmock, String> {
        let mut args = vec!["llmock".to_owned(), name.to_owned()];
        for (flag, value) in [
            ("--rpm", limits.rpm),
            ("--tpm", limits.tpm),
            ("--latency-ms", Some(latency_ms).filter(|ms| *ms > 0)),
        ] {
            if let Some(v) = value {
                args.extend([flag.to_owned(), v.to_string()]);
            }
        }
        let out = Command::new("bash")
            .arg(peers_script())
            .args(&args)
            .env("PEERS_RUN", &self.run)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("scripts/peers.sh: {e}"))?;
        let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || !url.starts_with("http://") {
            return Err(format!("scripts/peers.sh {} failed", args.join(" ")));
        }
        Ok(Llmock {
            url,
            limits,
            latency_ms,
        })
    }
}

impl Drop for PeersRun {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(peers_script())
            .arg("stop")
            .env("PEERS_RUN", &self.run)
            .stderr(Stdio::inherit())
            .status();
    }
}

/// One running llmock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Llmock {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// What it enforces per API key.
    pub limits: BucketLimits,
    /// Its answer latency (`--latency-ms`), spent before it admits a request.
    pub latency_ms: u64,
}

impl Llmock {
    /// A client's address on it.
    pub fn target(&self, dialect: Dialect, model: &str) -> Target {
        Target {
            dialect,
            llmock: self.url.clone(),
            api_key: format!("key-{model}"),
            model: model.to_owned(),
        }
    }

    /// The journal: every attempt since it started, in arrival order.
    pub async fn journal(&self) -> Result<Vec<JournalRecord>, String> {
        let text = http_client()
            .get(format!("{}/_llmock/requests", self.url))
            .send()
            .await
            .map_err(|e| format!("journal: {e}"))?
            .text()
            .await
            .map_err(|e| format!("journal: {e}"))?;
        parse_journal(&text)
    }

    /// Forgets the journal (`DELETE /_llmock/requests`); the buckets stay as they are.
    pub async fn clear_journal(&self) -> Result<(), String> {
        http_client()
            .delete(format!("{}/_llmock/requests", self.url))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map(drop)
            .map_err(|e| format!("clearing the journal: {e}"))
    }

    /// Sends the clock probe: a request of its own model and key; the instant it left.
    /// Find it later with [`Clock::from_journal`].
    pub async fn probe(&self) -> Instant {
        let target = self.target(Dialect::OpenAi, PROBE_MODEL);
        let job = Job {
            prompt: "clock probe".into(),
            max_tokens: 1,
        };
        let http = http_client();
        // A first request opens the connection; the second, on it, is the probe.
        let _ = send(&http, &target, &job).await;
        let sent = tollgate::clock::now();
        let _ = send(&http, &target, &job).await;
        sent
    }
}

/// Maps this process's instants onto llmock's clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    local: Instant,
    server: f64,
}

impl Clock {
    /// From the probe sent at `sent` ([`Llmock::probe`]): its record is the last of
    /// [`PROBE_MODEL`]; `None` if the journal has none.
    pub fn from_journal(sent: Instant, journal: &[JournalRecord]) -> Option<Clock> {
        journal
            .iter()
            .rfind(|r| r.model.as_deref() == Some(PROBE_MODEL))
            .map(|r| Clock {
                local: sent,
                server: r.started_at,
            })
    }

    /// `at` on llmock's clock (seconds). Off by the probe's one-way trip on loopback
    /// (well under a millisecond), early.
    pub fn server(&self, at: Instant) -> f64 {
        if at >= self.local {
            self.server + (at - self.local).as_secs_f64()
        } else {
            self.server - (self.local - at).as_secs_f64()
        }
    }
}
