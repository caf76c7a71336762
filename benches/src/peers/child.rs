//! Benchmark 9's clients in other OS processes: `tollgate run` (the command), and one
//! part of a batch split over several processes of the benchmark binary itself (started
//! with [`CHILD_ENV`] set to a [`ChildSpec`]), for the row on `tollgate-redis`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tollgate_redis::{RedisConfig, RedisLimiters};

use super::clients::{catalog_toml, credential, models, run_cookbook, run_naive, run_tollgate};
use super::oracle::BucketLimits;
use super::wire::{Dialect, Job, Target, workload};

/// The variable that makes the benchmark binary run one [`ChildSpec`] and exit.
pub const CHILD_ENV: &str = "TOLLGATE_PEERS_CHILD";

/// Which client a child process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildClient {
    /// tollgate with the `tollgate-redis` limiter backend.
    TollgateRedis,
    /// The cookbook's pacing, told the catalog's limits.
    Cookbook,
    /// The naive client.
    Naive,
}

impl ChildClient {
    fn name(self) -> &'static str {
        match self {
            ChildClient::TollgateRedis => "tollgate-redis",
            ChildClient::Cookbook => "cookbook",
            ChildClient::Naive => "naive",
        }
    }
}

/// What one child process runs: its part of a seeded batch (requests `i` with
/// `i % parts == part`), in a whitespace-separated `key=value` form for [`CHILD_ENV`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSpec {
    /// The client.
    pub client: ChildClient,
    /// llmock's URL.
    pub llmock: String,
    /// The model name (and, through [`super::server::Llmock::target`], the key) it sends.
    pub model: String,
    /// Which part.
    pub part: usize,
    /// Of how many.
    pub parts: usize,
    /// The whole batch's size.
    pub requests: usize,
    /// Prompt words, least and most.
    pub words: (u64, u64),
    /// `max_tokens`.
    pub max_tokens: u64,
    /// The batch's seed.
    pub seed: u64,
    /// Callers in this process.
    pub concurrency: usize,
    /// The limits the client is told (rpm; 0 = none).
    pub rpm: u64,
    /// Redis URL and key prefix (tollgate-redis only).
    pub redis: Option<(String, String)>,
}

impl ChildSpec {
    /// The spec as one line.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "client={} llmock={} model={} part={} parts={} requests={} words={}-{} \
             max_tokens={} seed={} concurrency={} rpm={}",
            self.client.name(),
            self.llmock,
            self.model,
            self.part,
            self.parts,
            self.requests,
            self.words.0,
            self.words.1,
            self.max_tokens,
            self.seed,
            self.concurrency,
            self.rpm
        );
        if let Some((url, prefix)) = &self.redis {
            s += &format!(" redis={url} prefix={prefix}");
        }
        s
    }

    /// Reads [`ChildSpec::encode`]'s line.
    pub fn decode(line: &str) -> Result<ChildSpec, String> {
        let get = |key: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .ok_or_else(|| format!("child spec: no `{key}`"))
        };
        let num = |key: &str| -> Result<u64, String> {
            get(key)?
                .parse()
                .map_err(|_| format!("child spec: bad `{key}`"))
        };
        let client = match get("client")? {
            "tollgate-redis" => ChildClient::TollgateRedis,
            "cookbook" => ChildClient::Cookbook,
            "naive" => ChildClient::Naive,
            other => return Err(format!("child spec: unknown client `{other}`")),
        };
        let (lo, hi) = get("words")?
            .split_once('-')
            .ok_or("child spec: bad `words`")?;
        let words = (
            lo.parse().map_err(|_| "child spec: bad `words`")?,
            hi.parse().map_err(|_| "child spec: bad `words`")?,
        );
        Ok(ChildSpec {
            client,
            llmock: get("llmock")?.to_owned(),
            model: get("model")?.to_owned(),
            part: num("part")? as usize,
            parts: num("parts")? as usize,
            requests: num("requests")? as usize,
            words,
            max_tokens: num("max_tokens")?,
            seed: num("seed")?,
            concurrency: num("concurrency")? as usize,
            rpm: num("rpm")?,
            redis: match (get("redis"), get("prefix")) {
                (Ok(url), Ok(prefix)) => Some((url.to_owned(), prefix.to_owned())),
                _ => None,
            },
        })
    }

    /// This child's jobs, in file order.
    pub fn jobs(&self) -> Vec<Job> {
        workload(self.requests, self.words, self.max_tokens, self.seed)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.parts.max(1) == self.part)
            .map(|(_, job)| job)
            .collect()
    }

    fn target(&self) -> Target {
        Target {
            dialect: Dialect::OpenAi,
            llmock: self.llmock.clone(),
            api_key: format!("key-{}", self.model),
            model: self.model.clone(),
        }
    }

    fn limits(&self) -> BucketLimits {
        BucketLimits {
            rpm: Some(self.rpm).filter(|r| *r > 0),
            tpm: None,
        }
    }
}

/// Runs the spec in this process (the child side); exits non-zero if it cannot start.
pub fn child_main(line: &str) {
    let spec = ChildSpec::decode(line).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let failed = crate::real_runtime().block_on(async {
        let (target, jobs) = (spec.target(), spec.jobs());
        match spec.client {
            ChildClient::Naive => run_naive(&target, jobs, spec.concurrency).await,
            ChildClient::Cookbook => {
                run_cookbook(&target, jobs, spec.concurrency, spec.limits()).await
            }
            ChildClient::TollgateRedis => {
                let (url, prefix) = spec.redis.clone().expect("tollgate-redis needs redis=");
                let backend = RedisLimiters::new(RedisConfig::new(url).with_key_prefix(prefix))
                    .expect("a Redis URL");
                let models =
                    models("bench", &target, spec.limits(), Some(backend)).expect("a catalog");
                run_tollgate(&models, "bench", jobs, spec.concurrency).await
            }
        }
    });
    println!("FAILED {failed}");
}

/// Starts one child process running `spec`.
pub fn spawn_child(spec: &ChildSpec) -> std::io::Result<std::process::Child> {
    Command::new(std::env::current_exe()?)
        .env(CHILD_ENV, spec.encode())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
}

/// The `tollgate` command's binary: `TOLLGATE_CLI_BIN`, else the one beside this
/// benchmark's (`target/release/tollgate`, which `cargo xtask bench` builds), built with
/// `cargo build --release -p tollgate-cli` if missing.
pub fn cli_binary() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var("TOLLGATE_CLI_BIN") {
        return Ok(path.into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/release/deps/peers-HASH → target/release/tollgate
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("no target directory")?;
    let binary = dir.join("tollgate");
    if !binary.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = Command::new(cargo)
            .args(["build", "--release", "-p", "tollgate-cli"])
            .status()
            .is_ok_and(|s| s.success());
        if !built || !binary.exists() {
            return Err(format!("no `tollgate` binary at {}", binary.display()));
        }
    }
    Ok(binary)
}

/// A batch file for `tollgate run` in the Batch API's format: one chat request a line,
/// `custom_id` `r0`, `r1`, … in order, from (prompt, `max_tokens`) pairs.
pub fn batch_file<'a>(prompts: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    prompts
        .into_iter()
        .enumerate()
        .map(|(i, (prompt, max_tokens))| {
            serde_json::json!({
                "custom_id": format!("r{i}"), "method": "POST", "url": "/v1/chat/completions",
                "body": {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens},
            })
            .to_string()
                + "\n"
        })
        .collect()
}

/// Writes what `tollgate run` needs into `dir` (catalog, credentials, batch in the Batch
/// API's format) and returns the command, ready to spawn.
pub fn cli_command(
    binary: &Path,
    dir: &Path,
    target: &Target,
    limits: BucketLimits,
    jobs: &[Job],
    concurrency: usize,
) -> std::io::Result<Command> {
    let (catalog, credentials, batch, output) = (
        dir.join("catalog.toml"),
        dir.join("credentials.toml"),
        dir.join("batch.jsonl"),
        dir.join("out.jsonl"),
    );
    std::fs::write(&catalog, catalog_toml("bench", target, limits))?;
    let (id, secret) = credential("bench", target);
    std::fs::write(&credentials, format!("{id} = \"{secret}\"\n"))?;
    let prompts = jobs.iter().map(|job| (job.prompt.as_str(), job.max_tokens));
    std::fs::write(&batch, batch_file(prompts))?;
    let _ = std::fs::remove_file(&output);
    let mut command = Command::new(binary);
    command
        .arg("--catalog")
        .arg(&catalog)
        .arg("--credentials")
        .arg(&credentials)
        .args(["run", "--quiet", "--concurrency", &concurrency.to_string()])
        .args(["-m", "bench"])
        .arg(&batch)
        .arg("-o")
        .arg(&output)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_survives_its_encoding_and_parts_cover_the_batch() {
        let spec = ChildSpec {
            client: ChildClient::TollgateRedis,
            llmock: "http://127.0.0.1:9".into(),
            model: "redis-tollgate".into(),
            part: 1,
            parts: 4,
            requests: 10,
            words: (3, 9),
            max_tokens: 20,
            seed: 5,
            concurrency: 8,
            rpm: 60,
            redis: Some(("redis://127.0.0.1:1/".into(), "p".into())),
        };
        assert_eq!(ChildSpec::decode(&spec.encode()).unwrap(), spec);
        let all = workload(10, (3, 9), 20, 5);
        let mut parts: Vec<Job> = (0..4)
            .flat_map(|part| {
                ChildSpec {
                    part,
                    ..spec.clone()
                }
                .jobs()
            })
            .collect();
        parts.sort_by(|a, b| a.prompt.cmp(&b.prompt));
        assert_eq!(parts, all);
        assert_eq!(ChildSpec { part: 1, ..spec }.jobs()[0], all[1]);
    }
}
