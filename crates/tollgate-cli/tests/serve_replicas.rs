//! Replicas of `tollgate serve` sharing one provider key's limits through `--redis URL`,
//! against a third-party server that enforces them: llmock (`scripts/peers.sh llmock
//! NAME --rpm N`, a continuous bucket per API key, 429 beyond it). Two gateways on one
//! Redis, spoken to in both dialects, send it no 429s, whether the model is
//! `openai-compatible` or `anthropic-direct`; the same two without Redis do get 429s, so
//! the first 0 is evidence. And a replica whose Redis is gone fails closed: 503, nothing
//! sent.
//!
//! The llmock tests need the peers (`TOLLGATE_LLMOCK_URL` and `TOLLGATE_REDIS_URL`, as
//! `cargo xtask test-all` sets them); without them they are skipped, or fail under
//! `TOLLGATE_PEERS_REQUIRED=1`. The fail-closed tests run on the simulated provider
//! served over HTTP and need no peers (the one that stops Redis mid-run needs a
//! `redis-server`: `TOLLGATE_REDIS_SERVER`, or one on PATH).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Served;
use common::llmock::{LlmockRun, records, statuses};
use common::serving::{Serving, spawn_serve};
use serde_json::{Value, json};
use tollgate_sim::{SimConfig, SimLimits};

/// What llmock enforces per API key, and what the catalog says: a bucket of 60 (a full
/// minute, both sides' default), refilled at one a second.
const RPM: u64 = 60;
/// Requests per test: 12 more than the bucket holds, so some must wait for its refill;
/// half to each replica, so that each half alone fits.
const REQUESTS: usize = 72;
/// How long one client request may take before it counts as failed (a bound, not a
/// figure the test checks).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(CLIENT_TIMEOUT)
        .build()
        .unwrap()
}

/// A model id (and upstream model name) of this test run alone: its Redis keys are
/// `tollgate:{<id>}:lim`, and llmock's journal tells its requests apart by the name.
fn fresh_model(tag: &str) -> String {
    let nanos = tollgate::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// Writes `catalog` (TOML) and a credentials file holding llmock's API key into `dir`;
/// the `--catalog` and `--credentials` arguments for them.
fn write_config(dir: &Path, catalog: &str) -> Vec<String> {
    let (catalog_path, credentials): (PathBuf, PathBuf) =
        (dir.join("models.toml"), dir.join("secrets.toml"));
    std::fs::write(&catalog_path, catalog).unwrap();
    std::fs::write(&credentials, "llmock-key = \"one-provider-key\"\n").unwrap();
    vec![
        "--catalog".into(),
        catalog_path.display().to_string(),
        "--credentials".into(),
        credentials.display().to_string(),
    ]
}

/// An API the gateway is spoken to in, or speaks to llmock in.
#[derive(Debug, Clone, Copy)]
enum Dialect {
    /// Chat completions (`openai-compatible` upstream).
    OpenAi,
    /// Messages (`anthropic-direct` upstream, at llmock's `/anthropic`).
    Anthropic,
}

impl Dialect {
    /// Model `model` on this dialect's provider at llmock `url`, with llmock's limit.
    fn catalog(self, model: &str, url: &str) -> String {
        let (provider, base_url) = match self {
            Dialect::OpenAi => ("openai-compatible", url.to_owned()),
            Dialect::Anthropic => ("anthropic-direct", format!("{url}/anthropic")),
        };
        format!(
            "[models.{model}]\nprovider = \"{provider}\"\nname = \"{model}\"\n\
             credential = \"llmock-key\"\nrpm = {RPM}\nmax_output_tokens = 64\n\
             [models.{model}.options]\nbase_url = \"{base_url}\"\n"
        )
    }

    /// The gateway's route for a chat in this dialect.
    fn route(self) -> &'static str {
        match self {
            Dialect::OpenAi => "/v1/chat/completions",
            Dialect::Anthropic => "/v1/messages",
        }
    }
}

/// `tollgate [--redis URL] serve` on the catalog and credentials of `config`.
fn replica(config: &[String], redis: Option<&str>) -> Serving {
    let mut args: Vec<&str> = config.iter().map(String::as_str).collect();
    if let Some(url) = redis {
        args.extend(["--redis", url]);
    }
    spawn_serve(&args)
}

/// Chat `i` through the gateway at `gateway`, in `dialect` (the body is the same in
/// both): its status and body (status 0 if it never answered). Its `max_tokens` leaves
/// room for llmock's short answers: one cut off below the catalog's `max_output_tokens`
/// would be sent again at that ceiling (the pipeline's truncation re-run).
async fn chat(
    http: &reqwest::Client,
    gateway: &str,
    dialect: Dialect,
    model: &str,
    i: usize,
) -> (u16, Value) {
    let body = json!({
        "model": model, "max_tokens": 32,
        "messages": [{"role": "user", "content": format!("request {i}")}],
    });
    match http
        .post(format!("{gateway}{}", dialect.route()))
        .json(&body)
        .send()
        .await
    {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

/// Sends [`REQUESTS`] chats for `model`, alternating between the replicas (request `i`
/// to replica `i % 2`) and, every second pair, between the dialects: one to each replica
/// first, in turn (each replica's first call starts the model's buckets, in tollgate and
/// in llmock, at the same moment), then the rest all at once, each from its own task.
/// The statuses the clients got, in request order.
async fn send_through(replicas: &[Serving; 2], model: &str) -> Vec<u16> {
    let http = http();
    let urls: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();
    let dialect = |i: usize| [Dialect::OpenAi, Dialect::Anthropic][(i / 2) % 2];
    let mut statuses = Vec::with_capacity(REQUESTS);
    for (i, url) in urls.iter().enumerate() {
        statuses.push(chat(&http, url, dialect(i), model, i).await.0);
    }
    let tasks: Vec<_> = (urls.len()..REQUESTS)
        .map(|i| {
            let (http, url, model) = (http.clone(), urls[i % 2].clone(), model.to_owned());
            let dialect = dialect(i);
            tokio::spawn(async move { chat(&http, &url, dialect, &model, i).await.0 })
        })
        .collect();
    for task in tasks {
        statuses.push(task.await.unwrap());
    }
    statuses
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|s| **s == status).count()
}

/// Two replicas at llmock `name` (its own, limited to [`RPM`]) through `upstream`, with
/// or without a shared Redis, sent [`REQUESTS`] chats ([`send_through`]). Says and
/// returns what the clients got and what llmock answered, each in order.
fn two_replicas_at_llmock(
    peers: &LlmockRun,
    name: &str,
    upstream: Dialect,
    redis: Option<&str>,
) -> (Vec<u16>, Vec<u16>) {
    let llmock = peers.start(name, RPM);
    let dir = tempfile::tempdir().unwrap();
    let model = fresh_model(name);
    let config = write_config(dir.path(), &upstream.catalog(&model, &llmock));
    let replicas = [replica(&config, redis), replica(&config, redis)];
    let (clients, upstream_statuses) = block_on(async {
        let clients = send_through(&replicas, &model).await;
        (clients, statuses(&llmock, &model).await)
    });
    let others: Vec<u16> = clients.iter().copied().filter(|s| *s != 200).collect();
    eprintln!(
        "{name} ({upstream:?} upstream, Redis: {}): clients got {} × 200 of {} (others: \
         {others:?}); llmock answered {} × 200, {} × 429",
        redis.is_some(),
        count(&clients, 200),
        clients.len(),
        count(&upstream_statuses, 200),
        count(&upstream_statuses, 429)
    );
    (clients, upstream_statuses)
}

/// Two replicas on the peers' Redis at llmock `name` through `dialect` (skipped without
/// the peers): every client got 200, and llmock saw each request once and accepted it,
/// no 429 at all.
fn paced_as_one_on_redis(name: &str, dialect: Dialect) {
    let Some(redis) = tollgate_testkit::peers::url("TOLLGATE_REDIS_URL") else {
        return;
    };
    let Some(peers) = LlmockRun::new(&format!("serve-{name}")) else {
        return;
    };
    let (clients, upstream) = two_replicas_at_llmock(&peers, name, dialect, Some(&redis));
    assert_eq!(
        count(&clients, 200),
        REQUESTS,
        "every request answered: {clients:?}"
    );
    assert_eq!(count(&upstream, 429), 0, "paced as one: {upstream:?}");
    // Each request sent once (no retry was needed), and accepted.
    assert_eq!(upstream.len(), REQUESTS, "{upstream:?}");
    assert_eq!(count(&upstream, 200), REQUESTS, "{upstream:?}");
}

#[test]
fn two_gateway_replicas_on_one_redis_send_no_429s_to_llmock() {
    paced_as_one_on_redis("replicas-shared", Dialect::OpenAi);
}

#[test]
fn two_gateway_replicas_on_one_redis_send_no_429s_to_an_anthropic_model_at_llmock() {
    paced_as_one_on_redis("replicas-anthropic", Dialect::Anthropic);
}

#[test]
fn two_gateway_replicas_without_redis_each_pace_alone_and_meet_llmocks_429s() {
    let Some(peers) = LlmockRun::new("serve-replicas-apart") else {
        return;
    };
    let (_, upstream) = two_replicas_at_llmock(&peers, "replicas-apart", Dialect::OpenAi, None);
    // Each replica's half fits its own bucket of the whole limit, so each sends at once:
    // together twelve more than llmock's bucket holds.
    assert!(
        count(&upstream, 429) > 0,
        "apart, they exceed it: {upstream:?}"
    );
}

/// The simulated provider: 600 requests a minute, far more than these tests send.
fn sim() -> SimConfig {
    SimConfig::new(SimLimits {
        rpm: 600,
        input_tpm: 0,
        output_tpm: 0,
    })
}

/// A free 127.0.0.1 port, taken and given back: nothing listens there afterwards.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Asserts that the gateway answered `(status, body)` as a shared limiter it cannot
/// reach: 503 in the OpenAI dialect, `code: limiter_unavailable`, with the stable message
/// and the request id, never the Redis address (the detail is in the gateway's log).
fn assert_limiter_unavailable((status, body): &(u16, Value)) {
    assert_eq!(*status, 503, "{body}");
    assert_eq!(body["error"]["type"], "server_error", "{body}");
    assert_eq!(body["error"]["code"], "limiter_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("shared rate limiter") && message.contains("request req_"),
        "{body}"
    );
    assert!(
        !message.contains("127.0.0.1") && !message.contains("redis://"),
        "{body}"
    );
}

#[test]
fn a_replica_whose_redis_is_not_there_starts_and_answers_503_without_sending() {
    let served = Served::new(sim(), 4);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &served.catalog("m", "rpm = 600"));
    let redis = format!("redis://127.0.0.1:{}/", free_port());
    // It starts (Redis is first asked on a request's reservation), but is not ready: a
    // load balancer sends its requests to a replica whose Redis answers.
    let replica = replica(&config, Some(&redis));
    block_on(async {
        let http = http();
        let ready = http
            .get(format!("{}/ready", replica.url))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), 503);
        assert!(ready.text().await.unwrap().contains("`m`"));
        assert_limiter_unavailable(&chat(&http, &replica.url, Dialect::OpenAi, "m", 0).await);
    });
    assert_eq!(served.server.stats().calls, 0, "fails closed: nothing sent");
}

/// A `redis-server` of this test's own (`TOLLGATE_REDIS_SERVER`, else the one on PATH),
/// without persistence, killed when dropped.
struct OwnRedis {
    child: Child,
    port: u16,
    url: String,
}

impl OwnRedis {
    /// Started on `port` and taking connections; `None` (the test is skipped) when there
    /// is no binary, unless `TOLLGATE_PEERS_REQUIRED` is set.
    fn start(port: u16) -> Option<OwnRedis> {
        let binary =
            std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let spawned = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = spawned else {
            assert!(
                std::env::var_os("TOLLGATE_PEERS_REQUIRED").is_none(),
                "TOLLGATE_PEERS_REQUIRED is set but {binary} cannot be run"
            );
            eprintln!("skipped: no redis-server (set TOLLGATE_REDIS_SERVER or put one on PATH)");
            return None;
        };
        let redis = OwnRedis {
            child,
            port,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        let up = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "{binary} takes no connections on port {port}");
        Some(redis)
    }

    /// SIGKILL, and reaped.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn a_replica_whose_redis_stops_mid_run_answers_503_sends_nothing_more_and_recovers() {
    let Some(mut redis) = OwnRedis::start(free_port()) else {
        return;
    };
    let served = Served::new(sim(), 4);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &served.catalog("m", "rpm = 600"));
    let replica = replica(&config, Some(&redis.url));
    // A client per runtime (its pooled connections belong to the runtime).
    let send = |i| block_on(async { chat(&http(), &replica.url, Dialect::OpenAi, "m", i).await });
    let (status, body) = send(0);
    assert_eq!(status, 200, "{body}");
    redis.kill();
    assert_limiter_unavailable(&send(1));
    assert_eq!(
        served.server.stats().calls,
        1,
        "fails closed: only the first was sent"
    );
    // Back (empty: no persistence) on the same port: the replica reconnects on its own.
    let _back = OwnRedis::start(redis.port).expect("it ran before");
    let answered = (2..50).any(|i| {
        let (status, body) = send(i);
        if status != 200 {
            assert_limiter_unavailable(&(status, body));
            std::thread::sleep(Duration::from_millis(100));
        }
        status == 200
    });
    assert!(answered, "answered again once Redis is back");
    assert_eq!(
        served.server.stats().calls,
        2,
        "only the answered ones were sent"
    );
}

/// Not about replicas, found by them: the Anthropic test sent every chat twice until its
/// `max_tokens` left room for llmock's answer, because the pipeline re-ran a chat cut off
/// at the client's `max_tokens` at the catalog's `max_output_tokens`, and answered one cut
/// off at the ceiling 400 `output_truncated`. The gateway now asks for cut-off answers as
/// they are (`SamplingParams::with_truncated_answers`): one send, answered 200 with
/// `finish_reason: length` / `stop_reason: max_tokens`, as the providers' APIs answer.
#[test]
fn a_chat_cut_off_at_the_clients_max_tokens_is_answered_length_after_one_send() {
    let Some(peers) = LlmockRun::new("serve-truncation") else {
        return;
    };
    let llmock = peers.start("truncation", RPM);
    let dir = tempfile::tempdir().unwrap();
    let model = fresh_model("truncation");
    // max_output_tokens 64: below it, a re-run; `ceiling` has it at 8, the client's limit.
    let catalog = Dialect::Anthropic.catalog(&model, &llmock);
    let ceiling = format!("ceiling-{model}");
    let at_ceiling = Dialect::Anthropic
        .catalog(&ceiling, &llmock)
        .replace("max_output_tokens = 64", "max_output_tokens = 8");
    let config = write_config(dir.path(), &format!("{catalog}{at_ceiling}"));
    let replica = replica(&config, None);
    block_on(async {
        let http = http();
        for model in [&model, &ceiling] {
            let body = json!({
                "model": model, "max_tokens": 8,
                "messages": [{"role": "user", "content": "a long answer, please"}],
            });
            let response = http
                .post(format!("{}/v1/chat/completions", replica.url))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let answer: Value = response.json().await.unwrap();
            let sends: Vec<Value> = records(&llmock, model)
                .await
                .iter()
                .map(|r| r["body"]["max_tokens"].clone())
                .collect();
            assert_eq!(
                sends,
                [json!(8)],
                "{model}: one send, at the client's limit"
            );
            assert_eq!(status, 200, "{model}: {answer}");
            assert_eq!(answer["choices"][0]["finish_reason"], "length", "{answer}");
        }
    });
}
