//! The Redis a multi-process benchmark shares (benchmarks 7 and 9): `TOLLGATE_REDIS_URL`,
//! or a private `redis-server` (from `TOLLGATE_REDIS_SERVER` or PATH) on a free port,
//! stopped when dropped.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A Redis to use, and the server this process started for it, if any.
#[derive(Debug)]
pub struct RedisServer {
    /// `redis://127.0.0.1:PORT/`.
    pub url: String,
    child: Option<Child>,
}

impl RedisServer {
    /// `TOLLGATE_REDIS_URL` if set, else a private server on a free port; `None` if none
    /// can be had.
    pub fn find_or_start() -> Option<RedisServer> {
        if let Ok(url) = std::env::var("TOLLGATE_REDIS_URL") {
            return Some(RedisServer { url, child: None });
        }
        let binary =
            std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let redis = RedisServer {
            url: format!("redis://127.0.0.1:{port}/"),
            child: Some(child),
        };
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(redis);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
