//! What the Redis tests share: the server's URL (from `TOLLGATE_REDIS_URL`, set by
//! `cargo xtask test-all`, which starts a private `redis-server`), and a harness that
//! builds limiters on fresh keys and waits for their background calls.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::limit::{LimiterBackend, LimiterConfig};
use tollgate_redis::{RedisClock, RedisConfig, RedisLimiter, RedisLimiters};
use tollgate_testkit::limiter::Backends;

/// The test server's URL (`TOLLGATE_REDIS_URL`); `None` skips the test, unless
/// `TOLLGATE_PEERS_REQUIRED` is set (then a missing server fails it).
pub fn redis_url() -> Option<String> {
    tollgate_testkit::peers::url("TOLLGATE_REDIS_URL")
}

/// A key prefix no other test (or run) uses.
pub fn fresh_prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "tollgate-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Builds limiters on fresh keys with the paused tokio clock injected.
pub struct Harness {
    pub limiters: RedisLimiters,
    pub built: Mutex<Vec<RedisLimiter>>,
}

impl Harness {
    /// A harness on the test server, or `None` when there is none.
    pub fn new() -> Option<Harness> {
        let url = redis_url()?;
        Some(Harness::with(
            RedisConfig::new(url)
                .with_key_prefix(fresh_prefix())
                .with_clock(RedisClock::Tokio {
                    epoch: tollgate::clock::now(),
                }),
        ))
    }

    pub fn with(config: RedisConfig) -> Harness {
        Harness {
            limiters: RedisLimiters::new(config).unwrap(),
            built: Mutex::new(Vec::new()),
        }
    }

    pub fn limiter(&self, config: LimiterConfig) -> RedisLimiter {
        let limiter = self.limiters.limiter(&config);
        self.built.lock().unwrap().push(limiter.clone());
        limiter
    }

    /// Waits until every limiter built here has applied what was sent to it. The paused
    /// clock is held still while replies are on their way (see [`without_time_jumps`]),
    /// in slices of 50 ms of real time; between slices it may move, so that a retry
    /// sleeping on it (after a dropped connection) gets to run.
    pub async fn flush(&self) {
        loop {
            let all = async {
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
                let built = self.built.lock().unwrap().clone();
                for l in built {
                    l.flush().await;
                }
            };
            if held_still_for(Duration::from_millis(50), all)
                .await
                .is_some()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl Backends for Harness {
    fn build(&self, config: LimiterConfig) -> Arc<dyn LimiterBackend> {
        Arc::new(self.limiter(config))
    }

    fn settled(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.flush())
    }
}

/// A plain connection to the test server, for looking at keys.
pub async fn admin(url: &str) -> redis::aio::MultiplexedConnection {
    // No timeouts: on a paused clock they would fire while the reply is on its way.
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None);
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// Runs `f` with tokio's paused clock held still: while a `spawn_blocking` task runs, the
/// runtime does not auto-advance the clock, so waiting on Redis's reply does not let
/// sleeping waiters wake early in simulated time. (A wait on the paused clock inside `f`
/// would never end: use [`held_still_for`] when `f` may sleep.)
pub async fn without_time_jumps<F: Future>(f: F) -> F::Output {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let guard = tokio::task::spawn_blocking(move || {
        let _ = held.recv();
    });
    let out = f.await;
    drop(release);
    guard.await.unwrap();
    out
}

/// [`without_time_jumps`] for at most `real` of real time: `None` if `f` had not
/// finished by then (it is dropped).
pub async fn held_still_for<F: Future>(real: Duration, f: F) -> Option<F::Output> {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let mut guard = tokio::task::spawn_blocking(move || {
        let _ = held.recv_timeout(real);
    });
    tokio::select! {
        biased;
        out = f => {
            drop(release);
            let _ = guard.await;
            Some(out)
        }
        _ = &mut guard => None,
    }
}

/// A `redis-server` of a test's own (to kill and restart), from `TOLLGATE_REDIS_SERVER`
/// (set by `cargo xtask test-all`) or `redis-server` on PATH. Stopped when dropped.
pub struct PrivateRedis {
    pub port: u16,
    binary: String,
    child: Option<std::process::Child>,
}

impl PrivateRedis {
    /// Starts one on a free port, or `None` (the test is skipped) when there is no
    /// binary, unless `TOLLGATE_PEERS_REQUIRED` is set.
    pub fn start() -> Option<PrivateRedis> {
        let binary =
            std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let found = std::process::Command::new(&binary)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("TOLLGATE_PEERS_REQUIRED").is_none(),
                "TOLLGATE_PEERS_REQUIRED is set but no redis-server could be run"
            );
            eprintln!("skipped: no redis-server (set TOLLGATE_REDIS_SERVER or put one on PATH)");
            return None;
        }
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut redis = PrivateRedis {
            port,
            binary,
            child: None,
        };
        redis.restart();
        Some(redis)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts the server (again) on its port and waits until it answers.
    pub fn restart(&mut self) {
        let child = std::process::Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        for _ in 0..500 {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let mut buf = [0u8; 7];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read_exact(&mut buf).is_ok()
                    && &buf == b"+PONG\r\n"
                {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server did not start on port {}", self.port);
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `rpm` requests a minute with a one-second burst, the model named `name`: the limits
/// the multi-process tests share.
pub fn rpm_with_one_second_burst(name: &str, rpm: u64) -> LimiterConfig {
    LimiterConfig::new(
        name,
        tollgate::catalog::Limits {
            rpm,
            ..tollgate::catalog::Limits::default()
        },
    )
    .with_burst(tollgate::limit::Burst::Seconds(1))
}

/// This test binary spawned again as a child that runs only the ignored test `test`,
/// with `envs` set, its stdout piped (what the child prints is what it reports).
pub fn spawn_child(test: &str, envs: &[(&str, &str)]) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// `n` children running the ignored test `test` (see [`spawn_child`]).
pub fn spawn_children(n: usize, test: &str, envs: &[(&str, &str)]) -> Vec<std::process::Child> {
    (0..n).map(|_| spawn_child(test, envs)).collect()
}

/// The most slot starts (µs, sorted) in any window of `window_s` seconds.
pub fn busiest(starts: &[u64], window_s: u64) -> usize {
    (0..starts.len())
        .map(|i| {
            starts[i..]
                .iter()
                .take_while(|s| **s < starts[i] + window_s * 1_000_000)
                .count()
        })
        .max()
        .unwrap_or(0)
}
